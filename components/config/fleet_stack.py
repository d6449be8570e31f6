"""Manager-stack slice: reading `gpu-platform-fleet:` config (the `fleet/` Pulumi project) into
a `FleetManagerConfig` (components/config/fleet.py), one line per problem in the project's own
namespace, like the job project's (job_stack.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import ValidationError

from components.config.base import ConfigError
from components.config.errors import format_errors
from components.config.fleet import FleetManagerConfig
from components.config.load import namespace_values, rekeyed, runtime_values

#: Config namespace of the manager project (`name:` in fleet/Pulumi.yaml).
FLEET_NAMESPACE: Final = "gpu-platform-fleet"


def fleet_lines(lines: list[str]) -> list[str]:
    """Config-error lines re-keyed from the platform's namespace to the manager project's."""
    return rekeyed(lines, FLEET_NAMESPACE)


def parse_fleet(values: Mapping[str, Any]) -> FleetManagerConfig:
    """Validate the manager project's keys (names without the `gpu-platform-fleet:` prefix)."""
    try:
        return FleetManagerConfig.model_validate(dict(values))
    except ValidationError as exc:
        raise ConfigError(fleet_lines(format_errors(exc, FleetManagerConfig))) from None


def fleet_namespace_values(all_config: Mapping[str, str]) -> dict[str, Any]:
    """The manager project's keys from a flat `namespace:key -> value` map, decoded."""
    return namespace_values(all_config, FLEET_NAMESPACE)


def load_fleet() -> FleetManagerConfig:
    """Read and validate the manager stack's config from the Pulumi runtime (CLI or mocks)."""
    return parse_fleet(fleet_namespace_values(runtime_values()))
