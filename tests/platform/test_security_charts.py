"""Helm values keys of the security charts (Kyverno, External Secrets Operator) exist in the
chart versions pinned, read from the vendored values.yaml (schemas/SOURCES.md)."""

from __future__ import annotations

import functools
from typing import Any

import yaml

from synth.harness import PROJECT_ROOT
from tests.helm_values import OPEN_KEYS, key_paths

CHARTS = PROJECT_ROOT / "schemas" / "charts"


@functools.cache
def _values(chart: str) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((CHARTS / chart / "values.yaml").read_text())
    return loaded


def chart_missing_keys(chart: str, values: dict[str, Any]) -> list[str]:
    """Key paths of `values` that the vendored chart values do not have (an upstream `~`/`{}`
    leaf such as `serviceAccount.name: ~` counts as the key existing)."""
    tree = _values(chart)
    missing = []
    for path in key_paths(values, open_keys=OPEN_KEYS):
        node: Any = tree
        for part in path:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif node in (None, {}):
                break
            else:
                missing.append(".".join(path))
                break
    return missing


def test_vendored_charts_are_the_pinned_versions() -> None:
    sources = (PROJECT_ROOT / "schemas" / "SOURCES.md").read_text()
    assert "kyverno-chart-3.9.0" in sources and "helm-chart-2.9.0" in sources
    assert "admissionController" in _values("kyverno")
    assert "installCRDs" in _values("external-secrets")
