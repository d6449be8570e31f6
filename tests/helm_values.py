"""Check that every Helm values key we set exists in the chart's upstream values.yaml."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from typing import Any

import yaml

from tests.conftest import SCHEMAS

CHARTS = SCHEMAS / "charts"
#: Maps the chart leaves open: anything below them is the user's (Kubernetes fields).
OPEN_KEYS = frozenset({"nodeSelector", "tolerations", "affinity", "labels", "annotations"})


@functools.cache
def upstream(chart: str) -> tuple[dict[str, Any], str]:
    text = (CHARTS / chart / "values.yaml").read_text()
    return yaml.safe_load(text), text


def key_paths(
    values: dict[str, Any], prefix: tuple[str, ...] = (), open_keys: frozenset[str] = OPEN_KEYS
) -> Iterator[tuple[str, ...]]:
    for key, value in values.items():
        path = (*prefix, key)
        yield path
        if isinstance(value, dict) and key not in open_keys and value:
            yield from key_paths(value, path, open_keys)


def missing_keys(
    chart: str,
    values: dict[str, Any],
    documented: frozenset[tuple[str, ...]] = frozenset(),
    open_keys: frozenset[str] = frozenset(),
) -> list[str]:
    """Key paths of `values` absent upstream. `documented`: keys the chart documents only in a
    commented-out example (their last name must appear as `# <name>:` in values.yaml).
    `open_keys`: further free-form maps of this chart (below them, keys are the user's)."""
    tree, text = upstream(chart)
    missing = []
    for path in key_paths(values, open_keys=OPEN_KEYS | open_keys):
        if _has_key(tree, path) or _under_open_map(tree, path):
            continue
        if path in documented and re.search(rf"^\s*#\s*{re.escape(path[-1])}:", text, re.M):
            continue
        missing.append(".".join(path))
    return missing


def _has_key(tree: Any, path: tuple[str, ...]) -> bool:
    node = tree
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def _under_open_map(tree: Any, path: tuple[str, ...]) -> bool:
    """True when an ancestor of `path` is an empty map upstream (`storageSpec: {}`)."""
    node = tree
    for part in path[:-1]:
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
        if node == {}:
            return True
    return False
