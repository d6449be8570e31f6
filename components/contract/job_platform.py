"""`jobPlatform`, the platform stack's output a team's job stack (jobs/) and a fleet's manager
(fleet/) read: `PlatformContract`.

Per team its namespace, Kueue LocalQueue, Volcano queue, service account, storage claims,
quotas per flavor, namespace limits and CI roles; the GPU classes with each flavor's capacity
and instance types; the data buckets, the RWX storage class, the training settings, the
reference trainer and the ClusterTrainingRuntimes rendered; and the platform's config itself
(`platformConfig`, its own training jobs left out: `platformJobs` names them). A job stack
judges its jobs against that config with the platform's own rules.

Written by components/contract/platform_contract.py `platform_contract` (exported by
__main__.py); read by training_jobs/job_stack.py `read_platform` and
platform/fleet/reading.py. Its version is its schema's (contract/schema.py), and the schema
nests the config model's: a change to either is a new version. The kubeconfig is not in it: it
is the platform's separate, secret `kubeconfig` output, so this one stays plain (readable with
`pulumi stack output`).
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

from pydantic import SerializationInfo, field_serializer, field_validator

from components import catalog
from components.config import StackConfig
from components.config.training import TrainingConfig
from components.contract.schema import Block, Contract

#: The platform's secret output holding its kubeconfig (`cluster.kubeconfigOutput` names it).
KUBECONFIG_OUTPUT: Final = "kubeconfig"


class ClusterRef(Block):
    """The platform's cluster, and the output its kubeconfig is in."""

    name: str
    kubeconfig_output: str


class TeamClaims(Block):
    """The team's PersistentVolumeClaims by role."""

    checkpoints: str
    datasets: str


class TeamQuota(Block):
    """One flavor of the team's ClusterQueue quota."""

    flavor: str
    gpu_class: str
    capacity_type: catalog.CapacityType
    gpus: int
    borrowing_limit_gpus: int | None = None


class TeamLimits(Block):
    """The team namespace's ResourceQuota."""

    gpus: int
    cpu: int
    memory_gib: int


class PlatformTeam(Block):
    """One team as a job stack needs it: namespace, queues, claims, quota, limits, CI roles."""

    namespace: str
    local_queue: str
    volcano_queue: str
    service_account: str
    group: str
    claims: TeamClaims
    #: Where the team's CI pushes (and signs) its own images; None without a deploy role.
    image_repository: str | None = None
    quota: list[TeamQuota]
    limits: TeamLimits
    #: The team's CI roles (components/platform/tenancy/team_deploy.py), when it has them.
    deploy_role_arn: str | None = None
    preview_role_arn: str | None = None


class GpuFlavor(Block):
    """A GPU class's flavor of one capacity type: the GPUs its pools provide, the instance types
    they launch."""

    flavor: str
    gpus: int
    instance_types: list[str]


class PlatformContract(Contract):
    """The `jobPlatform` output of a platform stack (module docstring)."""

    OUTPUT: ClassVar[str] = "jobPlatform"

    environment: str
    account_id: str
    cluster: ClusterRef
    #: Data bucket purpose -> bucket name.
    buckets: dict[str, str]
    storage_class: str
    teams: dict[str, PlatformTeam]
    #: GPU class -> capacity type -> flavor.
    gpu_classes: dict[str, dict[catalog.CapacityType, GpuFlavor]]
    training: TrainingConfig
    #: The reference trainer (`repo@sha256:...`, pushed or resolved by the deploy, else
    #: `training.defaultImage`); None where the platform publishes none.
    trainer_image: str | None = None
    #: The ClusterTrainingRuntimes it renders (cluster-scoped: a job stack's TrainJob can only
    #: name one of these, components/analysis/trainer.py runtime_problems).
    training_runtimes: list[str]
    #: Namespace -> the names of the platform stack's own jobs there (a job stack's may not
    #: take them).
    platform_jobs: dict[str, list[str]]
    #: The platform's config without its training jobs (a job stack adds its own).
    platform_config: StackConfig

    @field_validator("platform_config")
    @classmethod
    def _without_jobs(cls, cfg: StackConfig) -> StackConfig:
        if cfg.training_jobs:
            raise ValueError("the platform's config without its training jobs (platformJobs)")
        return cfg

    @field_serializer("platform_config")
    def _dump_without_jobs(self, cfg: StackConfig, info: SerializationInfo) -> Any:
        # Left out rather than `[]`: the output carries exactly the keys of the config a job
        # stack adds its jobs to.
        return cfg.model_dump(
            mode=info.mode, by_alias=bool(info.by_alias), exclude={"training_jobs"}
        )
