"""Helpers of the fleet tests: the committed fleet's config and workers as the manager reads them
(the session's worker synths, tests/conftest.py), and throw-away variants of both."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from components.analysis.fleet import FleetFacts, WorkerInput, read_workers
from components.config.fleet import FleetManagerConfig
from components.config.fleet_stack import fleet_namespace_values, parse_fleet
from components.contract.platform_contract import contract_version
from synth.fleet import FLEET_ROOT
from synth.harness import SynthResult


def fleet_values(stack: str = "prod") -> dict[str, Any]:
    """A committed manager stack's config (bare keys), for tests to modify."""
    data = yaml.safe_load((FLEET_ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {k.split(":", 1)[1]: v for k, v in data.items() if k.startswith("gpu-platform-fleet:")}


def fleet_config(values: dict[str, Any] | None = None) -> FleetManagerConfig:
    return parse_fleet(values if values is not None else fleet_values())


def inputs_of(cfg: FleetManagerConfig, workers: dict[str, SynthResult]) -> list[WorkerInput]:
    """What the manager reads of each worker synth (its exports)."""
    return [
        WorkerInput(
            ref,
            copy.deepcopy(workers[ref.stack_name].outputs.get("fleetWorker")),
            copy.deepcopy(workers[ref.stack_name].outputs.get("jobPlatform")),
        )
        for ref in cfg.workers
    ]


@pytest.fixture(scope="session")
def worker_synths(prod_use1: SynthResult, prod_usw2: SynthResult) -> dict[str, SynthResult]:
    return {"prod-use1": prod_use1, "prod-usw2": prod_usw2}


@pytest.fixture
def read(
    worker_synths: dict[str, SynthResult],
) -> Callable[..., FleetFacts]:
    """read_workers over the committed workers, each input changed by `change(index, input)`."""

    def run(
        change: Callable[[int, WorkerInput], WorkerInput] | None = None,
        cfg: FleetManagerConfig | None = None,
    ) -> FleetFacts:
        config = cfg or fleet_config()
        given = inputs_of(config, worker_synths)
        if change is not None:
            given = [change(i, w) for i, w in enumerate(given)]
        return read_workers(config, "us-east-1", given, contract_version())

    return run


__all__ = ["fleet_config", "fleet_namespace_values", "fleet_values", "inputs_of"]
