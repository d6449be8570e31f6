"""Each contract as its writer exports it is what its reader parses, and parsing it back gives
the writer's model (tests/jobs/test_platform_contract.py does the same for a platform's
`jobPlatform` from its pure builder): a fleet worker's `fleetWorker`, a manager's `jobPlatform`
with every worker as the manager read it, and both as the wire carries them (Pulumi drops
null-valued keys: contract/schema.py)."""

from __future__ import annotations

import json
from typing import Any

from components.contract.fleet_contract import fleet_contract
from components.contract.fleet_platform import FleetContract
from components.contract.fleet_worker import WorkerContract
from components.contract.job_platform import PlatformContract
from components.contract.schema import dumped, parse_contract
from synth.harness import SynthResult
from synth.mocks import ACCOUNT_ID


def _wire(value: Any) -> Any:
    """An output as a StackReference reads it: null-valued keys dropped."""
    if isinstance(value, dict):
        return {k: _wire(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_wire(v) for v in value]
    return value


def test_a_workers_exports_round_trip(prod_use1: SynthResult, prod_usw2: SynthResult) -> None:
    for worker in (prod_use1, prod_usw2):
        exported = worker.outputs["fleetWorker"]
        assert exported["version"] == WorkerContract.current_version()
        parsed = parse_contract(WorkerContract, exported)
        assert parsed is not None
        assert json.dumps(dumped(parsed)) == json.dumps(exported)  # the keys in their order too
        assert parse_contract(WorkerContract, _wire(exported)) == parsed
        platform = parse_contract(PlatformContract, worker.outputs["jobPlatform"])
        assert platform is not None
        assert parse_contract(PlatformContract, _wire(dumped(platform))) == platform


def test_the_manager_exports_what_it_read_and_a_job_stack_reads_it_back(
    fleet_prod: SynthResult,
) -> None:
    """The manager's model (its read workers, parsed once) -> its export -> a job stack's
    parse: the same model, each worker exactly as the manager read it."""
    fleet = fleet_prod.fleet
    written = fleet_contract(fleet, account_id=ACCOUNT_ID)
    exported = fleet_prod.outputs["jobPlatform"]
    assert exported == dumped(written)
    assert parse_contract(FleetContract, exported) == written
    assert parse_contract(FleetContract, _wire(exported)) == written
    members = written.fleet.workers
    assert [(m.name, m.fleet_worker, m.job_platform) for m in members] == [
        (w.name, w.fleet_worker, w.job_platform) for w in fleet.workers
    ]
    for member, stack in zip(members, fleet_prod.workers.values(), strict=True):
        assert dumped(member.fleet_worker) == stack.outputs["fleetWorker"]
