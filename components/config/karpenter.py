"""Karpenter slice: controller chart, EC2NodeClasses and GPU/CPU NodePools."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import Field, StringConstraints, model_validator

from components import catalog
from components.config.base import (
    GPU_CLASS_PATTERN,
    GoDuration,
    Model,
    Name,
    Problem,
    UnqueuedReason,
    problems_error,
)

#: An AL2023 alias: a pinned EKS AMI release (`al2023@v20251023`) or `al2023@latest`.
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
    #: SOCI parallel pull and unpack on AL2023 (nodeadm feature gate `FastImagePull`): layers are
    #: fetched over several connections and unpacked concurrently; nodeadm turns it on only on
    #: nodes with >= 4 vCPU and >= 7 GiB (components/platform/capacity/karpenter_builders.py).
    fast_image_pull: bool = True
    #: `instanceStorePolicy: RAID0` on node classes whose instance types all have NVMe instance
    #: store (catalog `nvme_disks`): nodeadm builds one RAID0 array over the disks and bind-mounts
    #: /var/lib/containerd, /var/lib/kubelet, /var/lib/soci-snapshotter-grpc and /var/log/pods
    #: onto it (awslabs/amazon-eks-ami@81fec2e8:templates/al2023/runtime/bin/setup-local-disks
    #: #L31-33,#L95-110; aws/karpenter-provider-aws@v1.14.1:pkg/providers/amifamily/bootstrap/
    #: nodeadm.go#L87-88), so image layers unpack onto NVMe, not the gp3 root, and Karpenter
    #: counts the array as the node's ephemeral-storage (pkg/providers/instancetype/types.go
    #: #L368-375). Off: the disks stay unused (Karpenter's default).
    instance_store_raid0: bool = True


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
                    Problem(
                        "freezeDuration",
                        self.freeze_duration,
                        "freezeSchedule and freezeDuration must be set together",
                    )
                ]
            )
        return self


#: Default NodePool weights: reservations (already paid for) first, then spot, on-demand last.
DEFAULT_POOL_WEIGHT: Final[dict[catalog.CapacityType, int]] = {
    "reserved": 90,
    "spot": 50,
    "on-demand": 10,
}

#: UTC timestamp of a Capacity Block window edge, e.g. `2026-12-01T11:30:00Z`.
UtcTimestamp = Annotated[str, StringConstraints(pattern=r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")]


class KarpenterReservation(Model):
    """EC2 capacity held for this cluster: an On-Demand Capacity Reservation or a Capacity
    Block. Karpenter launches into it as capacity type `reserved` through the GPU EC2NodeClass's
    `capacityReservationSelectorTerms` (aws/karpenter-provider-aws@v1.14.1:
    pkg/apis/v1/ec2nodeclass.go#L49-55, #L203-222: a term is an `id` or `tags`)."""

    name: Name
    #: `cr-…` (the reservation's id); or select it by `tags` instead.
    id: Annotated[str, StringConstraints(pattern=r"^cr-[0-9a-z]+$")] | None = None
    tags: dict[str, str] | None = None
    #: Capacity Blocks are reservations too ("modeled as on-demand capacity reservations",
    #: website/content/en/docs/tasks/odcrs.md#L31-32); Karpenter drains their nodes 40 min
    #: before the block ends (pkg/controllers/capacityreservation/expiration/controller.go).
    type: Literal["on-demand-reservation", "capacity-block"] = "on-demand-reservation"
    instance_type: str
    count: Annotated[int, Field(ge=1, le=256)]
    #: Capacity Block window (UTC); informational for the report, EC2 enforces it.
    start: UtcTimestamp | None = None
    end: UtcTimestamp | None = None
    #: $/h per instance. An ODCR bills the on-demand rate used or not (the catalog's price when
    #: unset); a Capacity Block has its own prepaid price (required for capacity-block).
    price_usd_per_hour: Annotated[float, Field(gt=0)] | None = None
    #: The reservation was created IN the stack's EFA cluster placement group
    #: (`network.efaPlacementGroup`; `CreateCapacityReservation --placement-group-arn`, output
    #: `efaPlacementGroupArn`). Only then does the reserved node class launch into the group: an
    #: ODCR cannot be moved into a placement group after creation ("To reserve capacity in a
    #: placement group, you must create the Capacity Reservation in the placement group",
    #: https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html), and capacity reserved
    #: outside the group is not promised inside it. Never for Capacity Blocks: they are already
    #: placed in EC2 UltraClusters, "so there is no need to use a cluster placement group with a
    #: Capacity Block" (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/
    #: capacity-blocks-using.html).
    in_placement_group: bool = False

    @property
    def gpus(self) -> int:
        return self.count * catalog.instance(self.instance_type).gpus

    @property
    def effective_price_usd_per_hour(self) -> float:
        if self.price_usd_per_hour is not None:
            return self.price_usd_per_hour
        return catalog.price_per_hour(self.instance_type, "reserved")

    def selector_term(self) -> dict[str, Any]:
        """The EC2NodeClass `capacityReservationSelectorTerms` entry selecting it."""
        return {"id": self.id} if self.id is not None else {"tags": dict(self.tags or {})}

    @model_validator(mode="after")
    def _check(self) -> KarpenterReservation:
        problems: list[Problem] = []
        if (self.id is None) == (self.tags is None):
            problems.append(Problem("id", self.id, "set exactly one of id (cr-…) or tags"))
        if self.tags is not None and not 1 <= len(self.tags) <= 20:
            problems.append(Problem("tags", self.tags, "1 to 20 tags (EC2NodeClass limit)"))
        if self.instance_type not in catalog.GPU_INSTANCE_TYPES:
            problems.append(
                Problem(
                    "instanceType",
                    self.instance_type,
                    f"a GPU instance type from components/catalog.py "
                    f"({', '.join(sorted(catalog.GPU_INSTANCE_TYPES))})",
                )
            )
        if self.type == "capacity-block":
            if self.start is None or self.end is None:
                problems.append(
                    Problem("end", self.end, "a capacity-block needs start and end (UTC)")
                )
            elif self.start >= self.end:
                problems.append(Problem("end", self.end, f"after start ({self.start})"))
            if self.price_usd_per_hour is None:
                problems.append(
                    Problem("priceUsdPerHour", None, "the Capacity Block's price per instance-hour")
                )
            if self.in_placement_group:
                problems.append(
                    Problem(
                        "inPlacementGroup",
                        True,
                        "false for a capacity-block (Capacity Blocks are placed in UltraClusters "
                        "and need no cluster placement group)",
                    )
                )
        elif self.start is not None or self.end is not None:
            problems.append(Problem("start", self.start, "start/end only for type capacity-block"))
        if problems:
            raise problems_error(problems)
        return self


class KarpenterFeatureGates(Model):
    """Karpenter feature gates (chart `settings.featureGates`, v1.14.1 values.yaml#L230-248)."""

    #: Beta, on by default since v1.6 (website/content/en/docs/reference/settings.md#L62-63);
    #: set explicitly because `reserved` pools depend on it.
    reserved_capacity: Literal[True] = True
    #: Alpha, off by default (settings.md#L61). Off here: it force-terminates a node whose
    #: AcceleratedHardwareReady condition is False for 10 min, bypassing drain and
    #: do-not-disrupt (concepts/disruption.md#L227-256, #L422) - on a multi-node run that is an
    #: un-checkpointed kill of the whole gang. The GPU alerts page a human instead
    #: (docs/runbooks.md#node-repair); turn it on per stack once jobs checkpoint often.
    node_repair: bool = False


class KarpenterPool(Model):
    """One Karpenter NodePool: a GPU class (or CPU instance types) on one capacity type."""

    name: Name
    #: `reserved` launches only into `karpenter.reservations` of the pool's instance types.
    capacity_type: catalog.CapacityType
    #: `<model>-x<GPUs per node>` (e.g. `l4-x1`): every catalog type of that shape, unless
    #: `instanceTypes` narrows it down.
    gpu_class: str | None = None
    instance_types: list[str] = []
    #: Higher is tried first; defaults: reserved 90, spot 50, on-demand 10.
    weight: Annotated[int, Field(ge=1, le=100)] | None = None
    workload_type: Literal["training", "general"] = "training"
    limits: KarpenterLimits
    disruption: KarpenterDisruption = Field(default_factory=KarpenterDisruption)
    #: GPU pools: why the pool exists when no team's quota lists its GPU class and capacity type
    #: (no Kueue ClusterQueue offers its flavor); the report prints it. Unset, such a pool is a
    #: config error (analysis/quota.py check_reachable_sources).
    unqueued_reason: UnqueuedReason | None = None

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
    def is_efa(self) -> bool:
        """A GPU pool whose every instance type has EFA devices (catalog): its nodes can carry
        `vpc.amazonaws.com/efa`, so it is the pool a cluster placement group is for."""
        types = self.resolved_instance_types
        return (
            self.is_gpu
            and bool(types)
            and all(
                t in catalog.INSTANCE_TYPES and catalog.instance(t).efa_devices > 0 for t in types
            )
        )

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
        problems = self._instance_type_problems()
        unknown = any(name not in catalog.INSTANCE_TYPES for name in self.instance_types)
        problems += self._gpu_class_problems(unknown)
        types = self.resolved_instance_types
        if not unknown and not problems and types:
            problems += self._shape_problems(types)
        problems += self._limit_problems()
        if problems:
            raise problems_error(problems)
        return self

    def _instance_type_problems(self) -> list[Problem]:
        """Listed types must be catalog types, each once: everything else reads their rows."""
        problems: list[Problem] = []
        for index, name in enumerate(self.instance_types):
            if name not in catalog.INSTANCE_TYPES:
                problems.append(
                    Problem(
                        f"instanceTypes[{index}]",
                        name,
                        "an instance type from components/catalog.py "
                        f"({', '.join(sorted(catalog.INSTANCE_TYPES))})",
                    )
                )
        if len(set(self.instance_types)) != len(self.instance_types):
            problems.append(Problem("instanceTypes", self.instance_types, "must not repeat a type"))
        return problems

    def _gpu_class_problems(self, unknown: bool) -> list[Problem]:
        """The GPU class must exist and contain every listed type (or the pool lists types)."""
        problems: list[Problem] = []
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
                problems.append(Problem("gpuClass", self.gpu_class, f"one of {', '.join(known)}"))
            elif not unknown:
                for index, name in enumerate(self.instance_types):
                    if name not in members:
                        problems.append(
                            Problem(
                                f"instanceTypes[{index}]",
                                name,
                                f"a type of GPU class {self.gpu_class} ({', '.join(members)})",
                            )
                        )
        elif not self.instance_types:
            problems.append(Problem("instanceTypes", [], "set gpuClass or list instance types"))
        return problems

    def _shape_problems(self, types: list[str]) -> list[Problem]:
        """One node shape per pool (queue flavors depend on it) and enough spot diversity."""
        problems: list[Problem] = []
        kinds = {catalog.instance(t).gpus > 0 for t in types}
        shapes = {(catalog.instance(t).gpu_model, catalog.instance(t).gpus) for t in types}
        if len(kinds) > 1 or (self.is_gpu and len(shapes) > 1):
            problems.append(
                Problem(
                    "instanceTypes",
                    types,
                    "one GPU model and GPU count per pool (or CPU types only): queue "
                    "flavors and --nproc-per-node depend on it",
                )
            )
        if self.capacity_type == "spot" and len(types) < 3:
            problems.append(
                Problem(
                    "instanceTypes" if self.instance_types else "gpuClass",
                    types,
                    "spot pools need at least 3 instance types (spot pools run dry)",
                )
            )
        return problems

    def _limit_problems(self) -> list[Problem]:
        """GPU pools cap GPUs and CPU pools cap CPUs: an uncapped pool is unbounded spend."""
        problems: list[Problem] = []
        if self.is_gpu and self.limits.gpus is None:
            problems.append(
                Problem(
                    "limits.gpus", None, "required for a GPU pool (caps nvidia.com/gpu and spend)"
                )
            )
        if not self.is_gpu:
            if self.limits.gpus is not None:
                problems.append(Problem("limits.gpus", self.limits.gpus, "only for GPU pools"))
            if self.limits.cpu is None:
                problems.append(Problem("limits.cpu", None, "required for a CPU pool (caps spend)"))
        return problems


class KarpenterConfig(Model):
    """The Karpenter controller, its node classes and NodePools."""

    #: Published chart version (oci://public.ecr.aws/karpenter/karpenter and karpenter-crd).
    #: The chart's values.yaml/Chart.yaml at git tag v1.14.1 still read 1.13.0 (the release
    #: script rewrites them; schemas/SOURCES.md): we pin the chart, never an image tag.
    chart_version: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")] = "1.14.1"
    #: kube-system: upstream's default since v0.33; API Priority and Fairness gives that
    #: namespace's controllers their own flow (leader election keeps working under load).
    namespace: Literal["kube-system", "karpenter"] = "kube-system"
    replicas: Annotated[int, Field(ge=1, le=3)] = 2
    #: Pinned AL2023 EKS AMI release (a tag in catalog.EKS_AMI_RELEASES); the NVIDIA variant is
    #: chosen per GPU instance type.
    ami_alias: AmiAlias
    #: `@latest` rolls every node whenever AWS publishes an AMI: only where a stack allows it.
    allow_latest_ami: bool = False
    gpu_node_class: KarpenterNodeClass = Field(default_factory=_gpu_node_class)
    cpu_node_class: KarpenterNodeClass = Field(default_factory=_cpu_node_class)
    pools: Annotated[list[KarpenterPool], Field(min_length=3)]
    #: Capacity reservations and Capacity Blocks `reserved` pools launch into.
    reservations: list[KarpenterReservation] = []
    feature_gates: KarpenterFeatureGates = Field(default_factory=KarpenterFeatureGates)

    def reserved_gpus(self, instance_types: list[str]) -> int:
        """GPUs the reservations of these instance types hold."""
        return sum(r.gpus for r in self.reservations if r.instance_type in instance_types)

    @model_validator(mode="after")
    def _check(self) -> KarpenterConfig:
        problems = self._ami_problems()
        problems += self._pool_name_problems()
        problems += self._weight_problems()
        problems += self._reservation_problems()
        if not any(not pool.is_gpu for pool in self.pools):
            problems.append(
                Problem("pools", len(self.pools), "at least one CPU pool for general work")
            )
        if problems:
            raise problems_error(problems)
        return self

    def _ami_problems(self) -> list[Problem]:
        """The AMI alias names a real release, and `@latest` only where the stack allows it."""
        problems: list[Problem] = []
        release = self.ami_alias.split("@", 1)[1]
        if release != "latest" and release not in catalog.EKS_AMI_RELEASES:
            known = sorted(catalog.EKS_AMI_RELEASES)
            problems.append(
                Problem(
                    "amiAlias",
                    self.ami_alias,
                    f"an existing amazon-eks-ami release (catalog.EKS_AMI_RELEASES: "
                    f"{known[0]} … {known[-1]}); {release} was never released",
                )
            )
        if self.ami_alias.endswith("@latest") and not self.allow_latest_ami:
            problems.append(
                Problem(
                    "amiAlias",
                    self.ami_alias,
                    "a pinned al2023@vYYYYMMDD release; @latest only where "
                    "allowLatestAmi is true (dev)",
                )
            )
        return problems

    def _pool_name_problems(self) -> list[Problem]:
        """Pool names are unique: each names a NodePool."""
        problems: list[Problem] = []
        seen: dict[str, int] = {}
        for index, pool in enumerate(self.pools):
            if pool.name in seen:
                problems.append(
                    Problem(
                        f"pools[{index}].name",
                        pool.name,
                        f"a unique name (pools[{seen[pool.name]}] already uses it)",
                    )
                )
            seen.setdefault(pool.name, index)
        return problems

    def _weight_problems(self) -> list[Problem]:
        """Within a GPU class, reserved pools outweigh spot ones and spot outweighs on-demand,
        so Karpenter tries capacity already paid for first."""
        problems: list[Problem] = []
        by_class: dict[str, list[KarpenterPool]] = {}
        for pool in self.pools:
            if pool.is_gpu:
                by_class.setdefault(pool.resolved_gpu_class, []).append(pool)
        for gpu_class, pools in sorted(by_class.items()):
            weights = {
                capacity: [p.effective_weight for p in pools if p.capacity_type == capacity]
                for capacity in catalog.CAPACITY_ORDER
            }
            # The on-demand fallback may be a managed node group: StackConfig checks it.
            # Higher weight first: reserved > spot > on-demand (catalog.CAPACITY_ORDER).
            ordered = sorted(catalog.CAPACITY_ORDER, key=catalog.CAPACITY_ORDER.__getitem__)
            pairs = [(a, b) for i, a in enumerate(ordered) for b in ordered[i + 1 :]]
            for first, then in pairs:
                if weights[first] and weights[then] and min(weights[first]) <= max(weights[then]):
                    problems.append(
                        Problem(
                            "pools",
                            gpu_class,
                            f"{first} pools of {gpu_class} need a higher weight than its {then} "
                            f"pools ({first} {min(weights[first])} <= {then} "
                            f"{max(weights[then])})",
                        )
                    )
        return problems

    def _reservation_problems(self) -> list[Problem]:
        """Reserved pools launch only into reservations of their types, their GPU limit is what
        those hold (a flavor counting more would admit jobs no instance can run), and every
        reservation is used by a pool (an unused ODCR is billed for nothing)."""
        reserved_types = {
            name
            for pool in self.pools
            if pool.capacity_type == "reserved"
            for name in pool.resolved_instance_types
        }
        return [
            *self._reservation_name_problems(),
            *self._reserved_pool_problems(),
            *self._placement_group_problems(),
            *self._unused_reservation_problems(reserved_types),
        ]

    def _reservation_name_problems(self) -> list[Problem]:
        """Reservation names are unique: the report names each reservation by it."""
        problems: list[Problem] = []
        names: dict[str, int] = {}
        for index, reservation in enumerate(self.reservations):
            if reservation.name in names:
                problems.append(
                    Problem(
                        f"reservations[{index}].name",
                        reservation.name,
                        f"a unique name (reservations[{names[reservation.name]}] uses it)",
                    )
                )
            names.setdefault(reservation.name, index)
        return problems

    def _reserved_pool_problems(self) -> list[Problem]:
        """A reserved pool is a GPU pool with a reservation of its types, capped at its GPUs."""
        problems: list[Problem] = []
        for index, pool in enumerate(self.pools):
            if pool.capacity_type != "reserved":
                continue
            types = pool.resolved_instance_types
            if not pool.is_gpu:
                problems.append(
                    Problem(
                        f"pools[{index}].capacityType", "reserved", "reserved pools are GPU pools"
                    )
                )
                continue
            held = self.reserved_gpus(types)
            if held == 0:
                problems.append(
                    Problem(
                        f"pools[{index}].capacityType",
                        "reserved",
                        f"a karpenter.reservations entry for one of {', '.join(types)}",
                    )
                )
            elif pool.limits.gpus is not None and pool.limits.gpus > held:
                problems.append(
                    Problem(
                        f"pools[{index}].limits.gpus",
                        pool.limits.gpus,
                        f"at most the {held} GPUs the reservations of {', '.join(types)} hold",
                    )
                )
        return problems

    def _placement_group_problems(self) -> list[Problem]:
        """All reservations agree on the placement group: they share one reserved node class."""
        in_group = {r.in_placement_group for r in self.reservations}
        if len(in_group) <= 1:
            return []
        first = next(i for i, r in enumerate(self.reservations) if r.in_placement_group)
        return [
            Problem(
                f"reservations[{first}].inPlacementGroup",
                True,
                "the same for every reservation: they share one reserved EC2NodeClass, which "
                "launches into the placement group or not (one placementGroupSelector)",
            )
        ]

    def _unused_reservation_problems(self, reserved_types: set[str]) -> list[Problem]:
        """Every reservation is of a type a reserved pool launches (else it is billed idle)."""
        problems: list[Problem] = []
        for index, reservation in enumerate(self.reservations):
            if reservation.instance_type not in reserved_types:
                problems.append(
                    Problem(
                        f"reservations[{index}].instanceType",
                        reservation.instance_type,
                        "a type a pool with capacityType reserved launches (an unused "
                        "reservation is billed for nothing)",
                    )
                )
        return problems
