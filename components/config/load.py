"""Loading a stack's config: from the Pulumi runtime (CLI or mocks) into the validated model."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from components.config.base import NAMESPACE, ConfigError
from components.config.errors import format_errors
from components.config.stack import StackConfig


def _decode(raw: str) -> Any:
    # Under the CLI (and synth) structured values arrive JSON-encoded; plain strings stay strings.
    stripped = raw.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            return raw
    return raw


def parse(values: Mapping[str, Any]) -> StackConfig:
    """Validate the namespace's keys (names without the `gpu-platform:` prefix)."""
    try:
        return StackConfig.model_validate(dict(values))
    except ValidationError as exc:
        raise ConfigError(format_errors(exc)) from None


def namespace_values(all_config: Mapping[str, str], namespace: str = NAMESPACE) -> dict[str, Any]:
    """The keys of config namespace `namespace` (default: the platform's) from a flat
    `namespace:key -> value` map, decoded."""
    prefix = f"{namespace}:"
    return {
        key[len(prefix) :]: _decode(value)
        for key, value in all_config.items()
        if key.startswith(prefix)
    }


def runtime_values() -> dict[str, str]:
    """Every config key this run was given, from the Pulumi runtime (CLI or mocks). pulumi.Config
    only answers for keys asked for by name; rejecting unknown keys needs the full set, which
    the SDK keeps in `pulumi.runtime.config` (private API — the SDK is pinned and
    tests/config/test_config.py covers this call)."""
    from pulumi.runtime import config as runtime_config

    given: dict[str, str] = dict(runtime_config.CONFIG.get())
    given.update(runtime_config.get_config_env())
    return given


def rekeyed(lines: list[str], namespace: str) -> list[str]:
    """Config-error lines re-keyed from the platform's namespace to another project's."""
    prefix = f"{NAMESPACE}:"
    return [
        f"{namespace}:{line.removeprefix(prefix)}" if line.startswith(prefix) else line
        for line in lines
    ]


def load() -> StackConfig:
    """Read and validate this stack's config from the Pulumi runtime (CLI or mocks)."""
    return parse(namespace_values(runtime_values()))
