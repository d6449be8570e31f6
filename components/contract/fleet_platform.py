"""`jobPlatform` of a fleet's manager (docs/fleet.md): `FleetContract`, what a team's job stack
reads when its `platformStack` is a manager.

The keys a job stack reads of a platform's `jobPlatform` where it reads them (`version`,
`teams`, `cluster`, `accountId`) plus `fleet`: the manager's own config and, per worker,
exactly what the manager read of it (its `fleetWorker` and `jobPlatform`, as the models of
contract/fleet_worker.py and contract/job_platform.py). A job stack rebuilds the fleet from
them with the manager's own code (analysis/fleet.py read_workers) and judges every job on every
worker, so its "will it run" is the one the manager and each worker would give.

Written by components/contract/fleet_contract.py `fleet_contract` (exported by
fleet/__main__.py); read by training_jobs/job_stack.py `read_platform`. Its version is its
schema's (contract/schema.py), which nests both worker contracts and the fleet's config model.
"""

from __future__ import annotations

from typing import ClassVar

from components.config.fleet import FleetManagerConfig
from components.contract.fleet_worker import WorkerContract
from components.contract.job_platform import ClusterRef, PlatformContract
from components.contract.schema import Block, Contract


class FleetQuota(Block):
    """One flavor of a team's quota on the manager: every worker's added up."""

    flavor: str
    gpus: int
    borrowing_limit_gpus: int | None = None


class FleetTeam(Block):
    """One team on the manager: namespace, LocalQueue, quota, its CI roles there."""

    namespace: str
    local_queue: str
    service_account: str
    group: str
    quota: list[FleetQuota]
    #: The team's CI roles on the manager (fleet config `teamDeploy`), if any.
    deploy_role_arn: str | None = None
    preview_role_arn: str | None = None


class FleetMember(Block):
    """A worker as the manager read it."""

    name: str
    stack: str
    fleet_worker: WorkerContract
    job_platform: PlatformContract


class FleetBlock(Block):
    """The fleet: the manager's config and region, and its workers."""

    name: str
    region: str
    config: FleetManagerConfig
    workers: list[FleetMember]


class FleetContract(Contract):
    """The `jobPlatform` output of a fleet's manager (module docstring)."""

    OUTPUT: ClassVar[str] = "jobPlatform"

    environment: str
    account_id: str
    cluster: ClusterRef
    teams: dict[str, FleetTeam]
    #: Always empty: the manager runs no jobs of its own.
    platform_jobs: dict[str, list[str]]
    fleet: FleetBlock
