"""The text of synth's JSON and YAML files: exactly what `json.dumps(indent=2, sort_keys=True)`
and PyYAML's libyaml safe dumper (`yaml.CSafeDumper`) write, in less time.

Both standard paths spend most of their time in generic Python code per value: `json.dumps`
with `indent` cannot use its C encoder and walks the data through generators, and PyYAML's
representer looks up a representer by type and alias-tracks every value before libyaml emits
the nodes. Synth writes plain data (dicts with string keys, lists, strings, ints, floats,
booleans, None), so both are done here in one direct pass. Anything else — a non-string key, a
subclass, NaN — is handed to the standard implementation unchanged. tests/synth/test_scale.py
compares both against the standard ones on synthesized stacks and on edge cases.
"""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from json.encoder import encode_basestring_ascii
from typing import Any

import yaml
from yaml.nodes import MappingNode, ScalarNode, SequenceNode


class _NotPlainError(Exception):
    """A value the direct JSON path does not cover."""


def to_json(data: Any) -> str:
    """`json.dumps(data, indent=2, sort_keys=True)`."""
    parts: list[str] = []
    try:
        _encode_json(data, "", parts.append)
    except (_NotPlainError, TypeError):  # TypeError: keys that do not sort
        return json.dumps(data, indent=2, sort_keys=True)
    return "".join(parts)


def _encode_json(value: Any, indent: str, append: Callable[[str], None]) -> None:
    """One value as `json.dumps` writes it at `indent`: the per-type dispatch of `to_json`."""
    kind = type(value)
    if kind is str:
        append(encode_basestring_ascii(value))
    elif kind is dict:
        _encode_json_object(value, indent, append)
    elif kind is list:
        _encode_json_array(value, indent, append)
    elif value is True:
        append("true")
    elif value is False:
        append("false")
    elif value is None:
        append("null")
    elif kind is int:
        append(int.__repr__(value))
    elif kind is float and math.isfinite(value):
        append(float.__repr__(value))
    else:
        raise _NotPlainError


def _encode_json_object(value: dict[Any, Any], indent: str, append: Callable[[str], None]) -> None:
    """A dict, keys sorted, one per line; a non-string key is not plain."""
    if not value:
        append("{}")
        return
    inner = indent + "  "
    separator = "{\n" + inner
    for key in sorted(value):
        if type(key) is not str:
            raise _NotPlainError
        append(separator)
        append(encode_basestring_ascii(key))
        append(": ")
        _encode_json(value[key], inner, append)
        separator = ",\n" + inner
    append("\n" + indent + "}")


def _encode_json_array(value: list[Any], indent: str, append: Callable[[str], None]) -> None:
    """A list, one item per line."""
    if not value:
        append("[]")
        return
    inner = indent + "  "
    separator = "[\n" + inner
    for item in value:
        append(separator)
        _encode_json(item, inner, append)
        separator = ",\n" + inner
    append("\n" + indent + "]")


_TAG = "tag:yaml.org,2002:"
_STR, _INT, _BOOL, _NULL, _MAP, _SEQ = (
    _TAG + name for name in ("str", "int", "bool", "null", "map", "seq")
)
#: libyaml's emitter where PyYAML was built with it (the wheels are). The pure-Python emitter
#: breaks some long escaped strings at other places: files would differ between such builds.
_SafeDumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


class _Dumper(_SafeDumper):  # type: ignore[misc]
    """PyYAML's safe dumper with a direct path for plain values.

    The nodes are the ones `SafeRepresenter` builds (same tags, no style; collections in the
    dumper's flow style, mappings sorted when asked; a dict or list met twice becomes an alias,
    as there), so the emitter writes the same text. Tag resolution, which the emitter asks for
    twice per scalar and which tries regular expressions each time, is remembered per value.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._tags: dict[tuple[str, Any], str] = {}

    def represent_data(self, data: Any) -> Any:
        if self.default_flow_style is None:
            return super().represent_data(data)  # PyYAML's best-style choice: its own rules
        kind = type(data)
        if kind is str:
            return ScalarNode(_STR, data)
        if kind is dict or kind is list:
            key = id(data)
            seen = self.represented_objects.get(key)
            if seen is not None:
                return seen
            self.object_keeper.append(data)
            value: list[Any] = []
            node: Any
            if kind is dict:
                node = MappingNode(_MAP, value, flow_style=self.default_flow_style)
                self.represented_objects[key] = node
                items = list(data.items())
                if self.sort_keys:
                    with contextlib.suppress(TypeError):  # PyYAML keeps such keys unsorted
                        items = sorted(items)
                for item_key, item_value in items:
                    value.append((self.represent_data(item_key), self.represent_data(item_value)))
            else:
                node = SequenceNode(_SEQ, value, flow_style=self.default_flow_style)
                self.represented_objects[key] = node
                for item in data:
                    value.append(self.represent_data(item))
            return node
        if kind is bool:
            return ScalarNode(_BOOL, "true" if data else "false")
        if kind is int:
            return ScalarNode(_INT, str(data))
        if data is None:
            return ScalarNode(_NULL, "null")
        return super().represent_data(data)

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is ScalarNode and not self.yaml_path_resolvers:
            key = (value, implicit)
            tag = self._tags.get(key)
            if tag is None:
                tag = self._tags[key] = super().resolve(kind, value, implicit)
            return tag
        return super().resolve(kind, value, implicit)


def to_yaml(data: Any, *, multi: bool = False) -> str:
    """`yaml.safe_dump(data, sort_keys=True, default_flow_style=False)` (`safe_dump_all` for
    `multi`)."""
    dump = yaml.dump_all if multi else yaml.dump
    return str(dump(data, Dumper=_Dumper, sort_keys=True, default_flow_style=False))
