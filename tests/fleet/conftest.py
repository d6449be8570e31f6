"""Helpers of the fleet tests: the committed fleet's config and workers as the manager reads them
(the session's worker synths, tests/conftest.py), and throw-away variants of both.

A test changes a worker's outputs as the other side exports them (`Exports`: plain JSON, the
keys of `fleetWorker` and `jobPlatform`), and the manager reads them through its own boundary
(components/platform/fleet/reading.py `worker_input`: parsed, once)."""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from components.analysis.fleet import FleetFacts, WorkerInput, read_workers
from components.config.fleet import FleetManagerConfig, WorkerRef
from components.config.fleet_stack import fleet_namespace_values, parse_fleet
from components.platform.fleet.reading import worker_input
from synth.fleet import FLEET_ROOT
from synth.harness import SynthResult


def fleet_values(stack: str = "prod") -> dict[str, Any]:
    """A committed manager stack's config (bare keys), for tests to modify."""
    data = yaml.safe_load((FLEET_ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {k.split(":", 1)[1]: v for k, v in data.items() if k.startswith("gpu-platform-fleet:")}


def fleet_config(values: dict[str, Any] | None = None) -> FleetManagerConfig:
    return parse_fleet(values if values is not None else fleet_values())


@dataclass
class Exports:
    """A worker stack's outputs as it exports them (a test's copy, to change)."""

    ref: WorkerRef
    fleet_worker: dict[str, Any] | None
    job_platform: dict[str, Any] | None

    def read(self) -> WorkerInput:
        """What the manager makes of them (parsed where read)."""
        return worker_input(self.ref, self.fleet_worker, self.job_platform)


def exports_of(cfg: FleetManagerConfig, workers: dict[str, SynthResult]) -> list[Exports]:
    """Each worker synth's exports, copied."""
    return [
        Exports(
            ref,
            copy.deepcopy(workers[ref.stack_name].outputs.get("fleetWorker")),
            copy.deepcopy(workers[ref.stack_name].outputs.get("jobPlatform")),
        )
        for ref in cfg.workers
    ]


def inputs_of(cfg: FleetManagerConfig, workers: dict[str, SynthResult]) -> list[WorkerInput]:
    """What the manager reads of each worker synth (its exports, parsed)."""
    return [given.read() for given in exports_of(cfg, workers)]


@pytest.fixture(scope="session")
def worker_synths(prod_use1: SynthResult, prod_usw2: SynthResult) -> dict[str, SynthResult]:
    return {"prod-use1": prod_use1, "prod-usw2": prod_usw2}


@pytest.fixture
def read(
    worker_synths: dict[str, SynthResult],
) -> Callable[..., FleetFacts]:
    """read_workers over the committed workers, each one's exports changed by
    `change(index, exports)` before the manager reads them."""

    def run(
        change: Callable[[int, Exports], Exports] | None = None,
        cfg: FleetManagerConfig | None = None,
    ) -> FleetFacts:
        config = cfg or fleet_config()
        given = exports_of(config, worker_synths)
        if change is not None:
            given = [change(i, w) for i, w in enumerate(given)]
        return read_workers(config, "us-east-1", [w.read() for w in given])

    return run


__all__ = ["Exports", "fleet_config", "fleet_namespace_values", "fleet_values", "inputs_of"]
