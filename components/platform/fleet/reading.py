"""Reading a fleet's workers from the manager (docs/fleet.md): one StackReference per worker,
its `fleetWorker` and `jobPlatform` outputs read before anything else is registered (the same
synchronous read a job stack makes of its platform, components/training_jobs/job_stack.py
read_platform) and parsed there, once, into their models (`worker_input`:
components/contract/fleet_worker.py, job_platform.py); and, the same way, a worker's trainer
home by the worker that runs its trainer. No credential crosses: the worker's kubeconfig for
the manager is in Secrets Manager (`fleetWorker.kubeconfigSecretArn`)."""

from __future__ import annotations

import pulumi

from components.analysis.fleet import WorkerInput
from components.config import ConfigError, Problem
from components.config.errors import problem_lines
from components.config.fleet import WorkerRef
from components.contract.fleet_worker import WorkerContract
from components.contract.job_platform import PlatformContract
from components.contract.schema import ContractError, parse_contract


def _outputs(stack: pulumi.StackReference) -> tuple[object, object]:
    """A platform stack's `fleetWorker` and `jobPlatform` as read, now (a secret one too)."""
    from pulumi.runtime.sync_await import _sync_await

    def plain(name: str) -> object:
        details = _sync_await(stack.get_output_details(name))
        return details.value if details.value is not None else details.secret_value

    return plain(WorkerContract.OUTPUT), plain(PlatformContract.OUTPUT)


def worker_input(ref: WorkerRef, fleet_worker: object, job_platform: object) -> WorkerInput:
    """What the manager read of worker `ref`, parsed: each output as its model, None where the
    stack exports none, and why one of another version or shape cannot be taken."""
    unreadable: list[str] = []
    try:
        worker = parse_contract(WorkerContract, fleet_worker)
    except ContractError as exc:
        worker = None
        unreadable.append(exc.problem)
    try:
        platform = parse_contract(PlatformContract, job_platform)
    except ContractError as exc:
        platform = None
        unreadable.append(exc.problem)
    return WorkerInput(ref, worker, platform, tuple(unreadable))


def read_worker(ref: WorkerRef) -> WorkerInput:
    """Worker `ref`'s outputs, parsed, now."""
    return worker_input(
        ref, *_outputs(pulumi.StackReference(f"worker-{ref.name}", stack_name=ref.stack))
    )


def read_trainer_home(stack: str) -> tuple[WorkerContract | None, PlatformContract | None]:
    """A worker's trainer home (`fleet.trainerHome`, another worker stack): its `fleetWorker`
    and `jobPlatform`, parsed, now (components/analysis/fleet_trainer.py home_trainer judges
    them); `ConfigError` naming `fleet.trainerHome` when one is of another version or shape."""
    fleet_worker, job_platform = _outputs(
        pulumi.StackReference("fleet-trainer-home", stack_name=stack)
    )
    try:
        return (
            parse_contract(WorkerContract, fleet_worker),
            parse_contract(PlatformContract, job_platform),
        )
    except ContractError as exc:
        allowed = f"{exc.problem}: deploy the trainer home from this repository's revision first"
        raise ConfigError(problem_lines([Problem("fleet.trainerHome", stack, allowed)])) from None
