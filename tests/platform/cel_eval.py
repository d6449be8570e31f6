"""Offline evaluation of a ValidatingAdmissionPolicy's CEL with cel-python (pinned in
requirements-dev.txt): variables in order, then every validation, as the API server does.

Adapted from /work/research/vap_eval_celpy.py (the project's security research memo).
cel-python implements standard CEL only: the Kubernetes `join` list extension used in the
policy's message is shimmed here; it does no type-checking against the OpenAPI schema and no
cost estimation, so a server-side dry run stays the final word (docs/security.md).
"""

from __future__ import annotations

from typing import Any

import celpy
from celpy import celtypes

_ENV = celpy.Environment()


def _join(items: Any, separator: Any = "") -> celtypes.StringType:
    return celtypes.StringType(str(separator).join(str(x) for x in items))


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    program = _ENV.program(_ENV.compile(expression), functions={"join": _join})
    return program.evaluate(activation)


def admit(policy: dict[str, Any], obj: dict[str, Any]) -> tuple[bool, list[str]]:
    """(admitted, messages of the failed validations) for `obj` under `policy`."""
    activation: dict[str, Any] = {"object": celpy.json_to_cel(obj)}
    variables: dict[str, Any] = {}
    for variable in policy["spec"].get("variables", []):
        activation["variables"] = celtypes.MapType(
            {celtypes.StringType(k): v for k, v in variables.items()}
        )
        variables[variable["name"]] = _evaluate(variable["expression"], activation)
    activation["variables"] = celtypes.MapType(
        {celtypes.StringType(k): v for k, v in variables.items()}
    )
    messages = []
    for validation in policy["spec"]["validations"]:
        if not bool(_evaluate(validation["expression"], activation)):
            messages.append(str(_evaluate(validation["messageExpression"], activation)))
    return not messages, messages
