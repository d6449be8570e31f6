"""`StackConfig`: the slices composed into one model, and the rules between slices that are
about structure (names that must refer to, or differ from, names in another slice).

Rules about capacity, quotas and whether a workload can run need facts computed from several
slices; they live in `components.analysis`, which runs right after this model is built and
reports in the same key-path format. This package imports neither `analysis` nor a component.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints, model_validator

from components import catalog
from components.config.autoscaler import IMAGE_FOR_MINOR, ClusterAutoscalerConfig
from components.config.base import Model, Problem, problems_error
from components.config.cluster import ClusterConfig
from components.config.fleet import FleetWorkerConfig
from components.config.gpu import GpuOperatorConfig
from components.config.images import TRAINER_REPOSITORY, ImagesConfig
from components.config.karpenter import KarpenterConfig, KarpenterPool
from components.config.network import NetworkConfig
from components.config.node_groups import GpuNodeGroup, NodeGroupsConfig
from components.config.observability import ObservabilityConfig
from components.config.scheduling import SchedulingConfig
from components.config.security import SecurityConfig
from components.config.storage import BUCKET_PREFIX_MAX, StorageConfig
from components.config.teams import TeamConfig
from components.config.training import TrainingConfig, TrainingJobConfig
from components.config.validation import ValidationConfig


class StackConfig(Model):
    """Everything under the `gpu-platform:` config namespace of a stack."""

    environment: Literal["dev", "staging", "prod"]
    #: Cost-allocation tags put on every AWS resource that takes tags.
    tags: dict[
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_ .:/=+@-]+$", max_length=128)],
        Annotated[str, StringConstraints(max_length=256)],
    ] = {}
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    cluster: ClusterConfig
    node_groups: NodeGroupsConfig
    cluster_autoscaler: ClusterAutoscalerConfig = Field(default_factory=ClusterAutoscalerConfig)
    karpenter: KarpenterConfig
    storage: StorageConfig = Field(default_factory=StorageConfig)
    gpu_operator: GpuOperatorConfig = Field(default_factory=GpuOperatorConfig)
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    scheduling: SchedulingConfig = Field(default_factory=SchedulingConfig)
    teams: list[TeamConfig] = []
    images: ImagesConfig = Field(default_factory=ImagesConfig)
    training: TrainingConfig = Field(default_factory=TrainingConfig)
    training_jobs: list[TrainingJobConfig] = []
    security: SecurityConfig = Field(default_factory=SecurityConfig)
    #: This stack is a MultiKueue worker of a fleet (components/config/fleet.py, docs/fleet.md).
    fleet: FleetWorkerConfig | None = None

    @model_validator(mode="after")
    def _storage_fits(self) -> StackConfig:
        problems: list[Problem] = []
        # Without a prefix, bucket names start with the cluster name: it must fit S3's limit.
        if self.storage.bucket_prefix is None and len(self.cluster.name) > BUCKET_PREFIX_MAX:
            problems.append(
                Problem(
                    "storage.bucketPrefix",
                    None,
                    f"set a prefix of at most {BUCKET_PREFIX_MAX} characters: the cluster "
                    "name is too long for S3 bucket names",
                )
            )
        existing = self.network.existing_vpc
        subnets = len(existing.private_subnet_ids) if existing else self.network.az_count
        index = self.storage.rwx.subnet_index
        if index is not None and index >= subnets:
            problems.append(
                Problem(
                    "storage.rwx.subnetIndex",
                    index,
                    f"an index of one of the {subnets} private subnets (0-{subnets - 1})",
                )
            )
        if problems:
            raise problems_error(problems)
        return self

    @model_validator(mode="after")
    def _gpu_sections(self) -> StackConfig:
        problems = self._time_slicing_problems()
        problems += self._mig_problems()
        problems += self._nccl_target_problems()
        if problems:
            raise problems_error(problems)
        return self

    def _time_slicing_problems(self) -> list[Problem]:
        """Time slicing only on existing GPU groups that do not train (shared GPUs slow it)."""
        problems: list[Problem] = []
        groups = {group.name: group for group in self.node_groups.gpu}
        for index, pool in enumerate(self.gpu_operator.time_slicing.pools):
            key = f"gpuOperator.timeSlicing.pools[{index}]"
            group = groups.get(pool)
            if group is None:
                problems.append(
                    Problem(key, pool, f"a GPU node group ({', '.join(sorted(groups))})")
                )
            elif group.workload_type == "training":
                problems.append(
                    Problem(
                        key,
                        pool,
                        "a pool whose workloadType is not training (time-sliced GPUs share "
                        "memory and break training throughput and isolation)",
                    )
                )
        return problems

    def _mig_problems(self) -> list[Problem]:
        """A MIG strategy only where some group or pool has a GPU that can be partitioned."""
        models = {group.gpu_model for group in self.node_groups.gpu} | {
            pool.gpu_model for pool in self.karpenter.pools if pool.is_gpu
        }
        if self.gpu_operator.mig_strategy != "none" and not (
            models & catalog.MIG_CAPABLE_GPU_MODELS
        ):
            return [
                Problem(
                    "gpuOperator.migStrategy",
                    self.gpu_operator.mig_strategy,
                    "'none' unless a GPU group or pool has a MIG-capable GPU "
                    f"({', '.join(sorted(catalog.MIG_CAPABLE_GPU_MODELS))})",
                )
            ]
        return []

    def _nccl_target_problems(self) -> list[Problem]:
        """The NCCL test names a GPU pool that exists and asks no more nodes than it reaches."""
        problems: list[Problem] = []
        nccl = self.validation.nccl
        if self.validation.enabled and self.validation.nccl_test:
            targets = self.nccl_targets()
            if nccl.pool is not None and nccl.pool not in targets:
                problems.append(
                    Problem(
                        "validation.nccl.pool",
                        nccl.pool,
                        f"a GPU node group or Karpenter GPU pool ({', '.join(sorted(targets))})",
                    )
                )
            target = self.nccl_pool()
            if target is not None and targets[target.name] < nccl.nodes:
                problems.append(
                    Problem(
                        "validation.nccl.nodes",
                        nccl.nodes,
                        f"at most the nodes its pool reaches ({target.name}: "
                        f"{targets[target.name]})",
                    )
                )
        return problems

    @model_validator(mode="after")
    def _node_group_scaling(self) -> StackConfig:
        """Who resizes which group, and one provisioner per (GPU class, capacity type)."""
        problems = self._gpu_group_problems()
        if self.autoscaler_deployed:
            problems += self._autoscaler_problems()
        problems += self._one_provisioner_problems()
        if problems:
            raise problems_error(problems)
        return self

    def _gpu_group_problems(self) -> list[Problem]:
        """A managed GPU group is resized only by a running autoscaler, in subnets that exist."""
        problems: list[Problem] = []
        scaler = self.cluster_autoscaler
        existing = self.network.existing_vpc
        subnets = len(existing.private_subnet_ids) if existing else self.network.az_count
        for index, group in enumerate(self.node_groups.gpu):
            key = f"nodeGroups.gpu[{index}]"
            if group.resizable and not scaler.enabled:
                problems.append(
                    Problem(
                        f"{key}.maxSize",
                        group.max_size,
                        f"= minSize ({group.min_size}): nothing resizes a managed group while "
                        "clusterAutoscaler.enabled is false (Karpenter never does)",
                    )
                )
            # The subnet indices a group names: its reservation's zone, or its own zoneIndex.
            reservation = (
                group.reservation_zone_index if group.capacity_reservation_id is not None else None
            )
            for field_name, zone in (
                ("reservationZoneIndex", reservation),
                ("zoneIndex", group.zone_index),
            ):
                if zone is not None and zone >= subnets:
                    problems.append(
                        Problem(
                            f"{key}.{field_name}",
                            zone,
                            f"the index of one of the {subnets} private subnets (0-{subnets - 1})",
                        )
                    )
        return problems

    def _autoscaler_problems(self) -> list[Problem]:
        """A deployed cluster-autoscaler leaves the system group alone and matches the cluster."""
        problems: list[Problem] = []
        scaler = self.cluster_autoscaler
        system = self.node_groups.system
        if not system.min_size == system.desired_size == system.max_size:
            # EKS tags every managed group's Auto Scaling group for the autoscaler's
            # discovery (k8s.io/cluster-autoscaler/enabled and .../<cluster>), the system
            # group's too; a resizable system group would answer the same pending CPU pods
            # as Karpenter's general pools.
            problems.append(
                Problem(
                    "nodeGroups.system.maxSize",
                    system.max_size,
                    f"= minSize = desiredSize ({system.desired_size}): the cluster-autoscaler "
                    "discovers every managed group of the cluster and would resize the "
                    "system group too, beside Karpenter (docs/node-groups.md)",
                )
            )
        minor = self.cluster.kubernetes_version
        if not scaler.image_tag.startswith(f"v{minor}."):
            problems.append(
                Problem(
                    "clusterAutoscaler.imageTag",
                    scaler.image_tag,
                    f"an image of the cluster's Kubernetes minor {minor} "
                    f"(e.g. {IMAGE_FOR_MINOR.get(minor, f'v{minor}.0')}): upstream supports "
                    "the autoscaler only with its own minor",
                )
            )
        return problems

    @model_validator(mode="after")
    def _on_demand_fallback(self) -> StackConfig:
        """Every GPU class of a Karpenter pool has on-demand capacity (a pool or a node group):
        the fallback when spot runs dry or the reservations are full."""
        on_demand = {g.gpu_class for g in self.node_groups.gpu if g.capacity_type == "on-demand"}
        on_demand |= {
            p.resolved_gpu_class
            for p in self.karpenter.pools
            if p.is_gpu and p.capacity_type == "on-demand"
        }
        classes = sorted({p.resolved_gpu_class for p in self.karpenter.pools if p.is_gpu})
        problems: list[Problem] = [
            Problem(
                "karpenter.pools",
                gpu_class,
                "every GPU class needs an on-demand pool or node group (the fallback when spot "
                "runs dry or the reservations are full)",
            )
            for gpu_class in classes
            if gpu_class not in on_demand
        ]
        if problems:
            raise problems_error(problems)
        return self

    def _one_provisioner_problems(self) -> list[Problem]:
        karpenter = {
            (pool.resolved_gpu_class, pool.capacity_type): (index, pool.name)
            for index, pool in enumerate(self.karpenter.pools)
            if pool.is_gpu
        }
        problems: list[Problem] = []
        for index, group in enumerate(self.node_groups.gpu):
            found = karpenter.get((group.gpu_class, group.flavor_capacity_type))
            if found is not None:
                problems.append(
                    Problem(
                        f"nodeGroups.gpu[{index}].capacityType",
                        group.capacity_type,
                        f"a GPU class and capacity type no Karpenter pool serves: "
                        f"karpenter.pools[{found[0]}] ({found[1]}) serves "
                        f"{group.gpu_class} {group.flavor_capacity_type} too, and a pod both "
                        "could serve gets a node from each (one provisioner per flavor)",
                    )
                )
        return problems

    @model_validator(mode="after")
    def _karpenter_pool_names(self) -> StackConfig:
        # Pools and managed groups share the gpu-platform.io/node-pool label: names must differ.
        groups = {"system", *(group.name for group in self.node_groups.gpu)}
        problems: list[Problem] = [
            Problem(
                f"karpenter.pools[{index}].name",
                pool.name,
                "a name no managed node group uses (both set the gpu-platform.io/node-pool label)",
            )
            for index, pool in enumerate(self.karpenter.pools)
            if pool.name in groups
        ]
        if problems:
            raise problems_error(problems)
        return self

    @model_validator(mode="after")
    def _registry_prefixes(self) -> StackConfig:
        # Pull-through cache prefixes are `<cluster>-<prefix>`, at most 30 characters (ECR).
        problems: list[Problem] = [
            Problem(
                f"security.registry.pullThroughCaches[{index}].prefix",
                cache.prefix,
                f"at most {29 - len(self.cluster.name)} characters with cluster "
                f"{self.cluster.name!r} (ECR limits the prefix to 30)",
            )
            for index, cache in enumerate(self.security.registry.pull_through_caches)
            if len(self.cluster.name) + 1 + len(cache.prefix) > 30
        ]
        if problems:
            raise problems_error(problems)
        return self

    @model_validator(mode="after")
    def _fleet_trainer(self) -> StackConfig:
        # A worker that runs its trainer home's trainer runs it where the reference trainer
        # would run (the runtimes, jobs without an image): a default image replaces both.
        fleet = self.fleet
        if fleet is not None and fleet.trainer_home is not None and self.training.default_image:
            raise problems_error(
                [
                    Problem(
                        "fleet.trainerHome",
                        fleet.trainer_home,
                        "left out where training.defaultImage is set: the default image is what "
                        "the runtimes run then (set the same defaultImage on every worker)",
                    )
                ]
            )
        return self

    @model_validator(mode="after")
    def _reference_trainer_repository(self) -> StackConfig:
        # Without a default image by digest the reference trainer is what the runtimes and the
        # jobs without an image run: it is pushed to (or resolved in) the platform's ECR
        # `trainer` repository, which must then exist.
        registry = self.security.registry
        if self.training.default_image is None and not (
            registry.enabled and TRAINER_REPOSITORY in registry.repositories
        ):
            raise problems_error(
                [
                    Problem(
                        "training.defaultImage",
                        None,
                        "an image by digest, or security.registry enabled with a "
                        f"{TRAINER_REPOSITORY!r} repository for the reference trainer "
                        "(images.trainer)",
                    )
                ]
            )
        return self

    @property
    def uses_reference_trainer(self) -> bool:
        """Whether the reference trainer (images.trainer) is what jobs and runtimes default to."""
        return self.training.default_image is None

    @property
    def fsx_team_dirs_image(self) -> str | None:
        """The image of the FSx team-directory Job given by digest: `storage.fsxTeamDirsImage`,
        else `training.defaultImage`; None: the reference trainer the deploy builds (its digest
        is an Output, components/platform/registry/trainer_image.py)."""
        return self.storage.fsx_team_dirs_image or self.training.default_image

    @property
    def bucket_prefix(self) -> str:
        return (self.storage.bucket_prefix or self.cluster.name).lower()

    @property
    def autoscaler_deployed(self) -> bool:
        """Whether the cluster-autoscaler runs: enabled, and there are GPU groups to resize (with
        none it would only find the system group)."""
        return self.cluster_autoscaler.enabled and bool(self.node_groups.gpu)

    @property
    def efa_instance_types(self) -> list[str]:
        """The stack's GPU instance types with EFA devices (catalog counts), over managed groups
        and Karpenter pools: the nodes the EFA device plugin must run on (none: no plugin)."""
        types = {t for group in self.node_groups.gpu for t in group.instance_types}
        types |= {t for pool in self.karpenter.pools for t in pool.resolved_instance_types}
        return sorted(t for t in types if t in catalog.efa_instance_types())

    def autoscaled(self, group: GpuNodeGroup) -> bool:
        """Whether the cluster-autoscaler resizes `group`: it may change size and the
        autoscaler runs (the one definition: capacity, node sources, Kueue's provisioning
        check and the group's `ignoreScalingChanges` read it)."""
        return group.resizable and self.autoscaler_deployed

    def group_max_nodes(self, group: GpuNodeGroup) -> int:
        """Most nodes a managed group holds: maxSize when the cluster-autoscaler resizes it,
        else desiredSize (nothing else changes it)."""
        return group.max_size if self.autoscaled(group) else group.desired_size

    def nccl_targets(self) -> dict[str, int]:
        """Pools the NCCL test may run on and the most nodes each reaches: GPU node groups
        (group_max_nodes) and Karpenter GPU pools (limits.gpus / GPUs per node)."""
        targets = {group.name: self.group_max_nodes(group) for group in self.node_groups.gpu}
        for pool in self.karpenter.pools:
            if pool.is_gpu and pool.limits.gpus is not None:
                targets[pool.name] = pool.limits.gpus // pool.gpus_per_node
        return targets

    def nccl_pool(self) -> GpuNodeGroup | KarpenterPool | None:
        """Where the NCCL test runs: the named pool, else the first on-demand static GPU group,
        else the first non-spot Karpenter GPU pool (no preemption mid-test)."""
        named = self.validation.nccl.pool
        candidates: list[GpuNodeGroup | KarpenterPool] = [
            *self.node_groups.gpu,
            *(pool for pool in self.karpenter.pools if pool.is_gpu),
        ]
        for candidate in candidates:
            if candidate.name == named:
                return candidate
        for candidate in candidates:
            if candidate.capacity_type != "spot":
                return candidate
        return candidates[0] if candidates else None


def nccl_instance_type(pool: GpuNodeGroup | KarpenterPool) -> str:
    """The pool's first instance type: what a GPU smoke Job names (a pool's types share one GPU
    class). The NCCL test's type is the one its pods land on (analysis/nccl.py), which checks
    its bandwidth threshold too."""
    if isinstance(pool, KarpenterPool):
        return pool.resolved_instance_types[0]
    return pool.instance_types[0]
