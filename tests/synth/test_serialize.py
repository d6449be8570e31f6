"""synth/serialize.py writes exactly what `json.dumps` and PyYAML's libyaml safe dumper write."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from synth import output
from synth.harness import SynthResult
from synth.serialize import to_json, to_yaml

SHARED = {"labels": {"team": "a"}}
EDGE_CASES: list[Any] = [
    {},
    [],
    {"empty": {}, "none": [], "nested": [[], {}, [[]]]},
    {"b": 1, "a": [True, False, None, 0, -7, 2**70, 1.5, -0.0, 1e-7, 1e22, 3.0]},
    {"text": ["", " lead", "trail ", "yes", "No", "null", "~", "1.0", "0o12", "1e3", "a: b"]},
    {"quotes": ["it's", 'say "hi"', "#hash", "- dash", "*star", "&amp", "!bang", "%pct", "@at"]},
    {
        "lines": [
            "one\ntwo",
            "tab\there",
            "x" * 200,
            " ".join(["word"] * 40),
            "\u00e9t\u00e9 \u2713",
        ]
    },
    {"escaped": "{{ $value }} \u00b0C " * 12, "folded": "a\n" + "b " * 60},
    {"unicode-key-\u00fc": "\U0001f680", "ctl": "\x01\x7f"},
    [SHARED, SHARED],  # one object twice: YAML anchors and aliases
    {"tuple": (1, 2), "float-nan": float("nan"), "inf": float("inf")},
    {1: "int key"},
]


@pytest.mark.parametrize("data", EDGE_CASES, ids=range(len(EDGE_CASES)))
def test_json_text_is_json_dumps(data: Any) -> None:
    assert to_json(data) == json.dumps(data, indent=2, sort_keys=True)


def test_json_keys_that_do_not_sort_fail_as_json_dumps_does() -> None:
    with pytest.raises(TypeError):
        json.dumps({1: "a", "b": 2}, indent=2, sort_keys=True)
    with pytest.raises(TypeError):
        to_json({1: "a", "b": 2})


def _yaml(data: Any, *, multi: bool = False) -> str:
    """What synth wrote before: libyaml's safe dumper (its line breaks inside long escaped
    strings differ from the pure-Python emitter's)."""
    dump = yaml.dump_all if multi else yaml.dump
    return str(dump(data, Dumper=yaml.CSafeDumper, sort_keys=True, default_flow_style=False))


@pytest.mark.parametrize("data", EDGE_CASES, ids=range(len(EDGE_CASES)))
def test_yaml_text_is_libyaml_safe_dump(data: Any) -> None:
    assert to_yaml(data) == _yaml(data)
    assert to_yaml([data, data], multi=True) == _yaml([data, data], multi=True)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_synthesized_files_are_the_standard_serializers_text(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    resources = [r.to_json() for r in result.resources]
    manifests = output.manifests(result)
    releases = output.helm_releases(result)
    assert resources and manifests and releases
    assert to_json(resources) == json.dumps(resources, indent=2, sort_keys=True)
    assert to_yaml(manifests, multi=True) == _yaml(manifests, multi=True)
    assert to_yaml(releases) == _yaml(releases)
