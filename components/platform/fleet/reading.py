"""Reading a fleet's workers from the manager (docs/fleet.md): one StackReference per worker,
its `fleetWorker` and `jobPlatform` outputs read as plain values before anything else is
registered (the same synchronous read a job stack makes of its platform,
components/training_jobs/job_stack.py read_platform); and, the same way, a worker's trainer home
by the worker that runs its trainer. No credential crosses: the worker's
kubeconfig for the manager is in Secrets Manager (`fleetWorker.kubeconfigSecretArn`)."""

from __future__ import annotations

from typing import Any

import pulumi

from components.analysis.fleet import WorkerInput
from components.config.fleet import WorkerRef
from components.contract.platform_contract import JOB_PLATFORM_OUTPUT
from components.platform.fleet.worker import FLEET_WORKER_OUTPUT


def read_worker(ref: WorkerRef) -> WorkerInput:
    """Worker `ref`'s outputs, plain, now."""
    from pulumi.runtime.sync_await import _sync_await

    stack = pulumi.StackReference(f"worker-{ref.name}", stack_name=ref.stack)

    def plain(name: str) -> Any:
        details = _sync_await(stack.get_output_details(name))
        return details.value if details.value is not None else details.secret_value

    return WorkerInput(ref, plain(FLEET_WORKER_OUTPUT), plain(JOB_PLATFORM_OUTPUT))


def read_trainer_home(stack: str) -> tuple[Any, Any]:
    """A worker's trainer home (`fleet.trainerHome`, another worker stack): its `fleetWorker`
    and `jobPlatform`, plain, now (components/analysis/fleet_trainer.py home_trainer)."""
    from pulumi.runtime.sync_await import _sync_await

    ref = pulumi.StackReference("fleet-trainer-home", stack_name=stack)

    def plain(name: str) -> Any:
        details = _sync_await(ref.get_output_details(name))
        return details.value if details.value is not None else details.secret_value

    return plain(FLEET_WORKER_OUTPUT), plain(JOB_PLATFORM_OUTPUT)
