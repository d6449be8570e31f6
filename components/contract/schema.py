"""What every contract between the projects shares (docs/architecture.md "Contracts between
projects").

The platform (repository root), job (jobs/) and fleet (fleet/) projects exchange stack outputs
through StackReferences. Each output another project reads is a `Contract`: a frozen, closed
pydantic model whose fields carry camelCase aliases, the output's JSON keys. The writer builds
the model and exports its dump (`dumped`, once any deploy-time value resolved: `resolved`); the
reader parses what it read once, where it read it (`parse_contract`), and hands the typed model
inward. A model's `version` is derived from its JSON schema (`schema_version`): any change to
a field, its type or a nested model (the platform's whole config model included) is a new
version, with no revision to remember, and a reader refuses another version naming both.
"""

from __future__ import annotations

import functools
import hashlib
import json
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import pulumi
from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic.alias_generators import to_camel

from components.config.errors import format_errors


class Block(BaseModel):
    """A part of a contract: frozen, closed (`extra="forbid"`), camelCase aliases matching the
    output's JSON keys. A field that may be null defaults to None: Pulumi drops null-valued
    keys when it serializes an output and when it deserializes one (pulumi/pulumi
    sdk/python/lib/pulumi/runtime/rpc.py@v3.272.0 `serialize_property` L243,
    `deserialize_properties` L892), so a reader never sees them."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=to_camel, populate_by_name=True
    )


class Contract(Block):
    """A stack output another project reads: `OUTPUT` names it, `version` is its schema's
    (`current_version`), the first key of every contract."""

    #: The stack output the contract is exported as.
    OUTPUT: ClassVar[str]

    version: str

    @classmethod
    def current_version(cls) -> str:
        """The version this revision writes and reads (`schema_version`)."""
        return schema_version(cls)


_C = TypeVar("_C", bound=Contract)

#: Keys of a JSON schema whose values are data (not schemas): left as they are.
_DATA_KEYS = frozenset({"default", "const", "enum", "examples"})
#: Keys of a JSON schema whose values map names to schemas.
_NAMED_SCHEMAS = frozenset({"properties", "$defs", "patternProperties"})


def _shape(node: Any, *, names: bool = False) -> Any:
    """A JSON schema without its prose: pydantic puts each model's docstring in `description`,
    which says nothing about what a reader can parse (a docstring edit is no new version)."""
    if isinstance(node, list):
        return [_shape(item) for item in node]
    if not isinstance(node, dict):
        return node
    if names:
        return {key: _shape(value) for key, value in node.items()}
    return {
        key: value if key in _DATA_KEYS else _shape(value, names=key in _NAMED_SCHEMAS)
        for key, value in node.items()
        if not (key == "description" and isinstance(value, str))
    }


@functools.cache
def schema_version(model: type[BaseModel]) -> str:
    """The sha256 (16 hex) of `model`'s JSON schema as the output's keys spell it, prose left
    out: every field, type, constraint and default of the model and of every model it nests."""
    schema = json.dumps(_shape(model.model_json_schema(by_alias=True)), sort_keys=True)
    return hashlib.sha256(schema.encode()).hexdigest()[:16]


class ContractError(Exception):
    """A stack output of another version or shape than this revision reads. `problem` is a
    phrase (`` `fleetWorker` version X (it has Y)``) each reader completes with the config key
    it reports under and its remedy."""

    def __init__(self, output: str, problem: str) -> None:
        super().__init__(problem)
        self.output = output
        self.problem = problem


def _shown(version: object) -> object:
    # Numbers cross the engine's wire as doubles: an old integer version 2 arrives as 2.0.
    return int(version) if isinstance(version, float) and version.is_integer() else version


def parse_contract(model: type[_C], value: object) -> _C | None:
    """`value` (a StackReference's read of `model.OUTPUT`) as `model`; None where the stack
    exports no such output. `ContractError` when it is of another version — compared first:
    another revision's fields would otherwise read as field errors — or, of this version, does
    not validate (each field named by its path in the output)."""
    if value is None:
        return None
    output, expected = model.OUTPUT, model.current_version()
    found = value.get("version") if isinstance(value, Mapping) else None
    if found != expected:
        raise ContractError(output, f"`{output}` version {expected} (it has {_shown(found)})")
    try:
        return model.model_validate(value)
    except ValidationError as exc:
        lines = format_errors(exc, model, prefix=f"{output}.")
        problem = f"`{output}` as this revision reads it ({'; '.join(lines)})"
        raise ContractError(output, problem) from None


def dumped(contract: Contract) -> dict[str, Any]:
    """The contract as the writer exports it: plain JSON under the output's keys."""
    return contract.model_dump(mode="json", by_alias=True)


def resolved(build: Callable[..., _C], **inputs: pulumi.Input[Any]) -> pulumi.Output[_C]:
    """`build(**inputs)` once every Output among `inputs` (nested in lists and dicts too) has
    resolved: a writer whose values are known only at deploy time (IDs, ARNs, a pushed digest)
    builds its model from plain values all the same."""
    return pulumi.Output.from_input(inputs).apply(lambda plain: build(**plain))
