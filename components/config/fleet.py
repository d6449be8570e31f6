"""Fleet slices: one queue, many regions (Kueue MultiKueue, docs/fleet.md).

A fleet is the same platform deployed as **worker** stacks in several regions and one small
**manager** stack (its own Pulumi project, `fleet/`) whose Kueue holds the teams' queues and
dispatches each job to whichever worker admits it first (Kueue v0.19.2 MultiKueue,
site/content/en/docs/concepts/multikueue.md). The manager is a dedicated cluster, not one of the
workers: "We do not currently support running the manager cluster as one of the workers for
itself" (same page, "Limitations").

- `FleetWorkerConfig` is the platform stack's `gpu-platform:fleet` key: the fleet it serves
  and the rotation keys of the token its manager connects with.
- `FleetManagerConfig` is everything under the `gpu-platform-fleet:` namespace of
  `fleet/Pulumi.<stack>.yaml` (read by components/config/fleet_stack.py): the manager's own
  cluster and network, and its workers, named by the platform stacks they are (read through
  StackReferences, never copied by hand).
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints, model_validator

from components.config.base import GoDuration, Model, Name, Problem, problems_error
from components.config.cluster import ClusterConfig, RoleArn
from components.config.network import NetworkConfig
from components.config.node_groups import SystemNodeGroup
from components.config.scheduling import SchedulingConfig
from components.config.security import LoggingConfig, SecretsConfig
from components.config.teams import TeamDeploy
from components.config.training import AwsRegion

#: Most workers one MultiKueueConfig lists (`spec.clusters` maxItems 20,
#: kubernetes-sigs/kueue@v0.19.2 apis/kueue/v1beta2/multikueue_types.go).
MAX_WORKERS: Final = 20

#: A token rotation key: part of the name of the worker's token Secret.
TokenKey = Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([a-z0-9-]{0,18}[a-z0-9])?$")]
#: `org/gpu-platform/<stack>` (Pulumi Cloud) or a bare stack name (DIY backends): a platform
#: stack of this repository's platform project.
WorkerStackRef = Annotated[
    str, StringConstraints(pattern=r"^([A-Za-z0-9_.-]+/gpu-platform/)?[A-Za-z0-9_.-]+$")
]


class FleetWorkerConfig(Model):
    """This platform stack is a MultiKueue worker of fleet `name`: it creates the manager's
    ServiceAccount, its least-privilege ClusterRole and token, and exports what the manager
    reads (`fleetWorker`, and the kubeconfig as a secret output). Its teams' namespaces and
    LocalQueues are the fleet's: the manager mirrors each workload into the same namespace and
    LocalQueue name (Kueue v0.19.2 setup_multikueue.md: "the worker cluster configuration
    mirrors the one of the manager cluster in terms of namespaces and LocalQueues")."""

    #: The fleet (the manager's `name`): a manager takes only workers of its own fleet.
    name: Name
    #: Rotation keys of the manager's token, oldest first; the worker publishes the token of the
    #: last key. Rotate without a gap: append a key (`pulumi up` here: both tokens valid), `up`
    #: the manager (it switches), then drop the old key (`up` here: its token is revoked with
    #: its Secret). Kueue reloads a changed kubeconfig Secret without a restart
    #: (pkg/controller/admissionchecks/multikueue/multikueuecluster.go, Secret watch).
    token_keys: Annotated[list[TokenKey], Field(min_length=1, max_length=2)] = ["v1"]
    #: Who else may read the manager's kubeconfig (its token) in Secrets Manager besides the
    #: manager's External Secrets role and the principal running `pulumi up`: IAM role ARNs,
    #: e.g. the CI deploy role when a person deploys, and the other way round. The secret's
    #: policy denies GetSecretValue to everyone else (docs/fleet.md).
    kubeconfig_readers: list[RoleArn] = []
    #: The fleet's one trainer image (docs/fleet.md "One image in every region"). Kueue
    #: compares the pod sets a worker recomputes from its ClusterTrainingRuntime with those the
    #: manager dispatched, image included, so every worker's runtimes name the same reference:
    #: the trainer one worker — the fleet's *trainer home* — builds, pushes, signs and pins.
    #: On every other worker, `trainerHome` is that worker's stack (read through a
    #: StackReference): this stack builds no trainer, runs the home's by its reference, trusts
    #: the home's signing key for it, and its pods pull the replica in this region's registry.
    trainer_home: WorkerStackRef | None = None
    #: On the trainer home: the regions its trainer repository is replicated to (ECR
    #: cross-region replication, digest and signatures kept) — every other worker's region.
    trainer_replicas: list[AwsRegion] = []

    @model_validator(mode="after")
    def _check(self) -> FleetWorkerConfig:
        problems: list[Problem] = []
        if len(set(self.token_keys)) != len(self.token_keys):
            problems.append(Problem("tokenKeys", self.token_keys, "distinct keys (oldest first)"))
        if self.trainer_home is not None and self.trainer_replicas:
            problems.append(
                Problem(
                    "trainerReplicas",
                    self.trainer_replicas,
                    "left out where trainerHome is set: only the trainer home replicates its "
                    "repository (a worker that runs another's trainer builds none)",
                )
            )
        if len(set(self.trainer_replicas)) != len(self.trainer_replicas):
            problems.append(Problem("trainerReplicas", self.trainer_replicas, "distinct regions"))
        if problems:
            raise problems_error(problems)
        return self

    @property
    def token_key(self) -> str:
        """The key of the token the worker publishes."""
        return self.token_keys[-1]


class WorkerRef(Model):
    """One worker of the manager: the platform stack and the name its MultiKueueCluster gets."""

    #: The MultiKueueCluster's name (and its kubeconfig Secret's): a DNS label, e.g. `use1`.
    name: Name
    #: The worker's platform stack (`org/gpu-platform/prod-use1`), read through a
    #: StackReference: its region, VPC, endpoint, token and teams come from there.
    stack: WorkerStackRef

    @property
    def stack_name(self) -> str:
        """The worker stack's own name (`prod-use1` of `org/gpu-platform/prod-use1`)."""
        return self.stack.rsplit("/", 1)[-1]


class MultiKueueSettings(Model):
    """The manager Kueue's `multiKueue` Configuration block (config.kueue.x-k8s.io/v1beta2,
    apis/config/v1beta2/configuration_types.go at v0.19.2; defaults in defaults.go)."""

    #: How long an admitted workload stays admitted while its worker is unreachable before it is
    #: evicted and dispatched again elsewhere (workload.go reconcileGroup, "Admitting remote
    #: lost"). A partition shorter than this never duplicates a run; a longer one may run the
    #: job twice until the lost worker reconnects and its copy is garbage-collected.
    worker_lost_timeout: GoDuration = "15m"
    #: `AllAtOnce` mirrors a workload to every connected worker and the first to admit wins;
    #: `Incremental` tries `incrementalStepSize` workers at a time in `workers` order, 5 minutes
    #: per round (pkg/controller/workloaddispatcher/incrementaldispatcher.go).
    dispatcher: Literal["AllAtOnce", "Incremental"] = "AllAtOnce"
    incremental_step_size: Annotated[int, Field(ge=1, le=MAX_WORKERS)] = 3
    #: How often the manager deletes remote objects whose manager workload is gone.
    gc_interval: GoDuration = "1m"


class FleetManagerConfig(Model):
    """Everything under the `gpu-platform-fleet:` namespace of a manager stack."""

    #: The fleet's name: every worker's `fleet.name`, the MultiKueueConfig's name and the origin
    #: label of the objects the manager creates on workers (`kueue.x-k8s.io/multikueue-origin`).
    name: Name
    environment: Literal["dev", "staging", "prod"]
    tags: dict[
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_ .:/=+@-]+$", max_length=128)],
        Annotated[str, StringConstraints(max_length=256)],
    ] = {}
    #: The manager's VPC: it is peered with every worker's, so its CIDR must overlap none.
    network: NetworkConfig
    cluster: ClusterConfig
    #: The manager runs controllers only (Kueue, Trainer's webhook); no GPU node, no Karpenter.
    system_nodes: SystemNodeGroup = Field(default_factory=SystemNodeGroup)
    scheduling: SchedulingConfig = Field(default_factory=SchedulingConfig)
    multi_kueue: MultiKueueSettings = Field(default_factory=MultiKueueSettings)
    #: External Secrets Operator on the manager: it syncs each worker's kubeconfig (a Secrets
    #: Manager secret in the worker's region) into Kueue's namespace.
    secrets: SecretsConfig = Field(default_factory=SecretsConfig)
    #: Control-plane and controller logs, encrypted and retained (as a platform's).
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    #: team -> the CI identity of its job stack on this manager (the team's deploy and preview
    #: roles, confined to its namespace here; components/platform/tenancy/team_deploy.py).
    team_deploy: dict[Name, TeamDeploy] = {}
    workers: Annotated[list[WorkerRef], Field(min_length=1, max_length=MAX_WORKERS)]

    @model_validator(mode="after")
    def _check(self) -> FleetManagerConfig:
        problems: list[Problem] = []
        for field, values in (
            ("name", [w.name for w in self.workers]),
            ("stack", [w.stack_name for w in self.workers]),
        ):
            seen: dict[str, int] = {}
            for index, value in enumerate(values):
                if value in seen:
                    problems.append(
                        Problem(
                            f"workers[{index}].{field}",
                            value,
                            f"a {field} no other worker has (workers[{seen[value]}])",
                        )
                    )
                seen.setdefault(value, index)
        if self.network.existing_vpc is not None:
            problems.append(
                Problem(
                    "network.existingVpc",
                    self.network.existing_vpc.vpc_id,
                    "left out: the manager creates its own VPC (its route tables carry the "
                    "peering routes to the workers)",
                )
            )
        if problems:
            raise problems_error(problems)
        return self
