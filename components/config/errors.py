"""Config error formatting: pydantic's errors (and our multi-path problems) as one line each,
`gpu-platform:<key path>: got <value>; <what is allowed>`, with a did-you-mean for unknown keys."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, get_args, get_origin

from pydantic import BaseModel, ValidationError

from components.config.base import NAMESPACE, Problem
from components.config.stack import StackConfig


def _path(loc: Iterable[int | str]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _model_at(
    loc: Sequence[int | str], root: type[BaseModel] = StackConfig
) -> type[BaseModel] | None:
    """The model class whose field set applies at `loc` of `root` (to list allowed keys)."""
    model: Any = root
    keys = 0  # the keys of mappings the path steps through (`teams.<name>` of a dict field)
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        if keys:
            keys -= 1
            continue
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        field = fields.get(part)
        if field is None:
            return None
        model = _unwrap_model(field.annotation)
        keys = _mapping_depth(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _mapping_depth(annotation: Any) -> int:
    """How many dict keys a path takes before it reaches the model inside `annotation`
    (`dict[str, dict[str, Flavor]]`: 2)."""
    if get_origin(annotation) in (dict, Mapping):
        return 1 + _mapping_depth(get_args(annotation)[-1])
    for arg in get_args(annotation):
        if arg is not type(None):
            return _mapping_depth(arg)
    return 0


def _unwrap_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _unwrap_model(arg)
        if found is not None:
            return found
    meta = getattr(annotation, "__origin__", None)
    if meta is not None and isinstance(meta, type) and issubclass(meta, BaseModel):
        return meta
    return None


def _show(value: Any) -> str:
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def format_errors(
    error: ValidationError, root: type[BaseModel] = StackConfig, prefix: str = f"{NAMESPACE}:"
) -> list[str]:
    """One line per problem: `gpu-platform:<path>: got <value>; <allowed>`; `root`: the model
    validated (its fields are the allowed keys at the top); `prefix`: what precedes the path
    (a stack output's name where a contract between projects is read: components/contract)."""
    lines: list[str] = []
    for item in error.errors(include_url=False):
        loc = list(item["loc"])
        if item["type"] == "gpu_platform":
            for sub, value, allowed in item["ctx"]["problems"]:
                path = _path([*loc, *split_path(sub)])
                lines.append(f"{prefix}{path}: got {_show(value)}; {allowed}")
            continue
        path = _path(loc)
        if item["type"] == "extra_forbidden":
            model = _model_at(loc[:-1], root)
            allowed = sorted((f.alias or n) for n, f in model.model_fields.items()) if model else []
            close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            lines.append(f"{prefix}{path}: unknown key{hint}; allowed keys: {', '.join(allowed)}")
        elif item["type"] == "missing":
            lines.append(f"{prefix}{path}: required key is missing")
        else:
            message = str(item["msg"]).removeprefix("Value error, ")
            lines.append(f"{prefix}{path}: got {_show(item['input'])}; {message}")
    return lines


def split_path(sub: str) -> list[int | str]:
    parts: list[int | str] = []
    for token in re.findall(r"[^.\[\]]+|\[\d+\]", sub):
        parts.append(int(token[1:-1]) if token.startswith("[") else token)
    return parts


def problem_lines(problems: Sequence[Problem]) -> list[str]:
    """Cross-slice problems (paths from the namespace root) as config-error lines."""
    return [
        f"{NAMESPACE}:{path}: got {_show(value)}; {allowed}" for path, value, allowed in problems
    ]
