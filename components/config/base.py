"""What every config slice shares: the frozen base model, the problem format and its error.

A config problem is `(relative key path, offending value, what is allowed)`. Model validators
raise them through `problems_error`; `components.config.errors` expands them into one line each,
`gpu-platform:<key path>: got <value>; <what is allowed>`, carried by `ConfigError` — a
`pulumi.RunError`, which the Pulumi CLI prints without a traceback and `python -m synth` turns
into exit code 2.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Annotated, Any, Final, Literal, NamedTuple

import pulumi
from pydantic import BaseModel, ConfigDict, StringConstraints
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

NAMESPACE: Final = "gpu-platform"


class Problem(NamedTuple):
    """One finding about a config: the key path it names (relative to the model that found it,
    or from the namespace's root for the cross-area rules), the offending value, and what is
    allowed. Rendered to one line (`gpu-platform:<key>: got <value>; <allowed>`) only at the
    edge: components/config/errors.py for the CLI and `pulumi up`, the report for reviewers."""

    key: str
    value: Any
    allowed: str


class ConfigError(pulumi.RunError):
    """An invalid stack config; `lines` holds one human-readable line per problem."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = list(lines)
        super().__init__(
            f"invalid stack config ({len(self.lines)} problem"
            f"{'s' if len(self.lines) != 1 else ''}):\n" + "\n".join(self.lines)
        )


def problems_error(problems: Sequence[Problem]) -> PydanticCustomError:
    """A cross-field failure that carries several key paths; `format_errors` expands it."""
    return PydanticCustomError(
        "gpu_platform",
        "; ".join(f"{path}: {allowed}" for path, _, allowed in problems),
        {"problems": list(problems)},
    )


class Model(BaseModel):
    """Frozen, closed (`extra="forbid"`), camelCase aliases matching the YAML keys."""

    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        validate_default=True,
    )


Name = Annotated[
    str, StringConstraints(pattern=r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$", max_length=40)
]

#: Prometheus durations as the rules and the operator take them (`30s`, `15m`, `2h`, `10d`).
Duration = Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]*(s|m|h|d)$")]
ScrapeInterval = Literal["15s", "20s", "30s"]
#: Go durations as Karpenter takes them (`30m`, `720h`, `1h30m`).
GoDuration = Annotated[str, StringConstraints(pattern=r"^([0-9]+(s|m|h))+$")]
#: What a GPU node source that no team's queue reaches is for, in a sentence (the report prints
#: it): `nodeGroups.gpu[].unqueuedReason`, `karpenter.pools[].unqueuedReason`.
UnqueuedReason = Annotated[str, StringConstraints(min_length=10, max_length=300)]
#: A GPU class names a GPU model and the GPUs per node (`h100-x8`, `l4-x1`).
GPU_CLASS_PATTERN: Final = re.compile(r"^(?P<model>[a-z0-9]+)-x(?P<gpus>[0-9]+)$")
#: An S3 key prefix (no leading or trailing slash).
S3Prefix = Annotated[
    str,
    StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$", max_length=200),
]
#: Image references must be pinned by digest: a moved tag must not change what a test runs.
DigestImage = Annotated[
    str, StringConstraints(pattern=r"^[a-z0-9./:_-]+(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$")
]


#: Kubernetes quantity suffixes (k8s.io/apimachinery pkg/api/resource): decimal and binary.
_QUANTITY_UNITS: Final = {
    "m": 1e-3,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
    "Ki": 2.0**10,
    "Mi": 2.0**20,
    "Gi": 2.0**30,
    "Ti": 2.0**40,
}


def quantity(value: str | float) -> float:
    """A Kubernetes quantity ("500m", "16Gi", "2") as a number (cores, bytes, counts)."""
    text = str(value)
    for suffix in sorted(_QUANTITY_UNITS, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * _QUANTITY_UNITS[suffix]
    return float(text)
