"""Karpenter slice: controller chart, EC2NodeClasses and GPU/CPU NodePools."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints, model_validator

from components import catalog
from components.config.base import (
    GPU_CLASS_PATTERN,
    GoDuration,
    Model,
    Name,
    Problem,
    problems_error,
)

#: An AL2023 alias: a pinned EKS AMI release (`al2023@v20251020`) or `al2023@latest`.
AmiAlias = Annotated[str, StringConstraints(pattern=r"^al2023@(latest|v[0-9]{8})$")]


def gpu_class_instance_types(gpu_class: str) -> list[str]:
    """Catalog instance types whose GPU model and count make up `gpu_class` (`l4-x1`)."""
    match = GPU_CLASS_PATTERN.match(gpu_class)
    if match is None:
        return []
    model, gpus = match["model"], int(match["gpus"])
    return sorted(
        name
        for name, row in catalog.INSTANCE_TYPES.items()
        if row.gpu_model == model and row.gpus == gpus
    )


class KarpenterNodeClass(Model):
    """Root volume of the nodes an EC2NodeClass launches (encrypted gp3)."""

    disk_size_gib: Annotated[int, Field(ge=20, le=16000)]
    disk_throughput_mibps: Annotated[int, Field(ge=125, le=1000)] = 125
    disk_iops: Annotated[int, Field(ge=3000, le=16000)] = 3000


def _gpu_node_class() -> KarpenterNodeClass:
    # Multi-GB training images: pulls and unpacking are bound by root-volume throughput.
    return KarpenterNodeClass(disk_size_gib=300, disk_throughput_mibps=500, disk_iops=6000)


def _cpu_node_class() -> KarpenterNodeClass:
    return KarpenterNodeClass(disk_size_gib=100)


class KarpenterLimits(Model):
    """Upper bounds of what a NodePool may launch in all (Karpenter `spec.limits`)."""

    #: `nvidia.com/gpu`; required for GPU pools (unbounded GPU spend otherwise).
    gpus: Annotated[int, Field(ge=1)] | None = None
    cpu: Annotated[int, Field(ge=1)] | None = None
    memory_gib: Annotated[int, Field(ge=1)] | None = None


class KarpenterDisruption(Model):
    """When Karpenter may take nodes away. Defaults suit training: only empty nodes go."""

    #: `WhenEmpty` never evicts running pods to consolidate (in-flight GPU work survives).
    consolidation_policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized"] = "WhenEmpty"
    consolidate_after: GoDuration = "30m"
    #: Nodes are replaced after this age (new AMI, patched kernel); `Never` keeps them.
    expire_after: GoDuration | Literal["Never"] = "720h"
    #: How long a draining node waits for pods (checkpointing jobs) before it is terminated.
    termination_grace_period: GoDuration = "24h"
    #: Share of the pool's nodes that may be disrupted at once.
    max_disrupted_percent: Annotated[int, Field(ge=0, le=100)] = 10
    #: Optional cron window (UTC) in which no node is disrupted voluntarily, e.g. `0 8 * * 1-5`.
    freeze_schedule: (
        Annotated[str, StringConstraints(pattern=r"^(\S+\s){4}\S+$|^@(daily|weekly|hourly)$")]
        | None
    ) = None
    freeze_duration: Annotated[str, StringConstraints(pattern=r"^([0-9]+h)?([0-9]+m)?$")] | None = (
        None
    )

    @model_validator(mode="after")
    def _window(self) -> KarpenterDisruption:
        if (self.freeze_schedule is None) != (self.freeze_duration is None):
            raise problems_error(
                [
                    (
                        "freezeDuration",
                        self.freeze_duration,
                        "freezeSchedule and freezeDuration must be set together",
                    )
                ]
            )
        return self


#: Default NodePool weights: spot is tried first, on-demand is the fallback.
DEFAULT_POOL_WEIGHT: Final[dict[catalog.CapacityType, int]] = {"spot": 50, "on-demand": 10}


class KarpenterPool(Model):
    """One Karpenter NodePool: a GPU class (or CPU instance types) on one capacity type."""

    name: Name
    capacity_type: catalog.CapacityType
    #: `<model>-x<GPUs per node>` (e.g. `l4-x1`): every catalog type of that shape, unless
    #: `instanceTypes` narrows it down.
    gpu_class: str | None = None
    instance_types: list[str] = []
    #: Higher is tried first; defaults: spot 50, on-demand 10.
    weight: Annotated[int, Field(ge=1, le=100)] | None = None
    workload_type: Literal["training", "general"] = "training"
    limits: KarpenterLimits
    disruption: KarpenterDisruption = Field(default_factory=KarpenterDisruption)

    @property
    def resolved_instance_types(self) -> list[str]:
        if self.instance_types:
            return list(self.instance_types)
        return gpu_class_instance_types(self.gpu_class) if self.gpu_class else []

    @property
    def is_gpu(self) -> bool:
        types = self.resolved_instance_types
        return self.gpu_class is not None or any(t in catalog.GPU_INSTANCE_TYPES for t in types)

    @property
    def effective_weight(self) -> int:
        return self.weight if self.weight is not None else DEFAULT_POOL_WEIGHT[self.capacity_type]

    @property
    def gpu_model(self) -> str:
        return catalog.instance(self.resolved_instance_types[0]).gpu_model or ""

    @property
    def gpus_per_node(self) -> int:
        return catalog.instance(self.resolved_instance_types[0]).gpus

    @property
    def resolved_gpu_class(self) -> str:
        return f"{self.gpu_model}-x{self.gpus_per_node}"

    @model_validator(mode="after")
    def _check(self) -> KarpenterPool:
        problems: list[Problem] = []
        unknown = False
        for index, name in enumerate(self.instance_types):
            if name not in catalog.INSTANCE_TYPES:
                unknown = True
                problems.append(
                    (
                        f"instanceTypes[{index}]",
                        name,
                        "an instance type from components/catalog.py "
                        f"({', '.join(sorted(catalog.INSTANCE_TYPES))})",
                    )
                )
        if len(set(self.instance_types)) != len(self.instance_types):
            problems.append(("instanceTypes", self.instance_types, "must not repeat a type"))
        if self.gpu_class is not None:
            members = gpu_class_instance_types(self.gpu_class)
            if not members:
                known = sorted(
                    {
                        f"{row.gpu_model}-x{row.gpus}"
                        for row in catalog.INSTANCE_TYPES.values()
                        if row.gpus
                    }
                )
                problems.append(("gpuClass", self.gpu_class, f"one of {', '.join(known)}"))
            elif not unknown:
                for index, name in enumerate(self.instance_types):
                    if name not in members:
                        problems.append(
                            (
                                f"instanceTypes[{index}]",
                                name,
                                f"a type of GPU class {self.gpu_class} ({', '.join(members)})",
                            )
                        )
        elif not self.instance_types:
            problems.append(("instanceTypes", [], "set gpuClass or list instance types"))
        types = self.resolved_instance_types
        if not unknown and not problems and types:
            kinds = {catalog.instance(t).gpus > 0 for t in types}
            shapes = {(catalog.instance(t).gpu_model, catalog.instance(t).gpus) for t in types}
            if len(kinds) > 1 or (self.is_gpu and len(shapes) > 1):
                problems.append(
                    (
                        "instanceTypes",
                        types,
                        "one GPU model and GPU count per pool (or CPU types only): queue "
                        "flavors and --nproc-per-node depend on it",
                    )
                )
            if self.capacity_type == "spot" and len(types) < 3:
                problems.append(
                    (
                        "instanceTypes" if self.instance_types else "gpuClass",
                        types,
                        "spot pools need at least 3 instance types (spot pools run dry)",
                    )
                )
        if self.is_gpu and self.limits.gpus is None:
            problems.append(
                ("limits.gpus", None, "required for a GPU pool (caps nvidia.com/gpu and spend)")
            )
        if not self.is_gpu:
            if self.limits.gpus is not None:
                problems.append(("limits.gpus", self.limits.gpus, "only for GPU pools"))
            if self.limits.cpu is None:
                problems.append(("limits.cpu", None, "required for a CPU pool (caps spend)"))
        if problems:
            raise problems_error(problems)
        return self


class KarpenterConfig(Model):
    """The Karpenter controller, its node classes and NodePools."""

    #: Published chart version (oci://public.ecr.aws/karpenter/karpenter and karpenter-crd).
    #: The chart's values.yaml/Chart.yaml at git tag v1.14.1 still read 1.13.0 (the release
    #: script rewrites them; ../shared/schemas/SOURCES.md): we pin the chart, never an image tag.
    chart_version: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")] = "1.14.1"
    #: kube-system: upstream's default since v0.33; API Priority and Fairness gives that
    #: namespace's controllers their own flow (leader election keeps working under load).
    namespace: Literal["kube-system", "karpenter"] = "kube-system"
    replicas: Annotated[int, Field(ge=1, le=3)] = 2
    #: Pinned AL2023 EKS AMI release; the NVIDIA variant is chosen per GPU instance type.
    ami_alias: AmiAlias
    #: `@latest` rolls every node whenever AWS publishes an AMI: only where a stack allows it.
    allow_latest_ami: bool = False
    gpu_node_class: KarpenterNodeClass = Field(default_factory=_gpu_node_class)
    cpu_node_class: KarpenterNodeClass = Field(default_factory=_cpu_node_class)
    pools: Annotated[list[KarpenterPool], Field(min_length=3)]

    @model_validator(mode="after")
    def _check(self) -> KarpenterConfig:
        problems: list[Problem] = []
        if self.ami_alias.endswith("@latest") and not self.allow_latest_ami:
            problems.append(
                (
                    "amiAlias",
                    self.ami_alias,
                    "a pinned al2023@vYYYYMMDD release; @latest only where "
                    "allowLatestAmi is true (dev)",
                )
            )
        seen: dict[str, int] = {}
        for index, pool in enumerate(self.pools):
            if pool.name in seen:
                problems.append(
                    (
                        f"pools[{index}].name",
                        pool.name,
                        f"a unique name (pools[{seen[pool.name]}] already uses it)",
                    )
                )
            seen.setdefault(pool.name, index)
        by_class: dict[str, list[KarpenterPool]] = {}
        for pool in self.pools:
            if pool.is_gpu:
                by_class.setdefault(pool.resolved_gpu_class, []).append(pool)
        for gpu_class, pools in sorted(by_class.items()):
            spot = [p.effective_weight for p in pools if p.capacity_type == "spot"]
            on_demand = [p.effective_weight for p in pools if p.capacity_type == "on-demand"]
            # On-demand alone is fine (p5: one type, no spot diversity; reserved capacity).
            if spot and not on_demand:
                problems.append(
                    (
                        "pools",
                        gpu_class,
                        "a GPU class on spot needs a spot pool and an on-demand pool "
                        "(spot first, on-demand fallback)",
                    )
                )
            elif not spot:
                continue
            elif min(spot) <= max(on_demand):
                problems.append(
                    (
                        "pools",
                        gpu_class,
                        f"spot pools of {gpu_class} need a higher weight than its on-demand "
                        f"pools (spot {min(spot)} <= on-demand {max(on_demand)})",
                    )
                )
        if not any(not pool.is_gpu for pool in self.pools):
            problems.append(("pools", len(self.pools), "at least one CPU pool for general work"))
        if problems:
            raise problems_error(problems)
        return self
