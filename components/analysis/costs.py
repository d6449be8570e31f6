"""Cost arithmetic at the catalog's planning prices: what each managed node group costs idle and
at its maximum, what a NodePool can cost at most under its limits, what runs with no job (the
idle cost), the storage that is paid for before any data, what a training job's nodes cost per
hour and what a fleet job's checkpoints cost to replicate across regions. The analysis calls
these once and holds the results (`StackFacts.costs`, `JobFacts.hourly`; a fleet manager's
`FleetFacts.costs`, a fleet job's `FleetJob.replication`); the report renders those values and
computes no cost itself. What only the rendered stack knows — how many control planes, NAT
gateways and KMS keys Pulumi creates — the report counts and hands to the value's methods
(`PlatformCosts.idle_cost`, `StorageCost.fixed_usd_per_month`), which price it here."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from components import catalog
from components.analysis.capacity import ReservationRow
from components.config import KarpenterPool, NodeGroupsConfig, RwxConfig, SystemNodeGroup

#: GiB per TiB: the per-TiB figures a reviewer compares stored volumes with.
GIB_PER_TIB = 1024


@dataclass(frozen=True)
class GroupCost:
    """A managed node group as report.md lists it: its shape, who scales it, and what it costs
    idle and at its maximum."""

    #: Its node-pool label (the group's name; `system` for the system group).
    name: str
    #: The GPU class its nodes carry; `cpu` for the system group.
    gpu_class: str
    capacity_type: catalog.CapacityType
    instance_types: tuple[str, ...]
    min_size: int
    desired_size: int
    max_size: int
    #: The cluster-autoscaler resizes it (Pulumi ignores its desiredSize changes).
    autoscaled: bool
    auto_repair: bool
    #: GPUs per node of its first instance type (the type the autoscaler sizes nodes from).
    gpus_per_node: int
    #: Every node at maxSize.
    max_gpus: int
    #: The nodes it holds with no job: desiredSize x its first type (EKS fills on-demand groups
    #: in the order the types are listed).
    idle_usd_per_hour: float
    #: Every node at maxSize on its dearest type.
    max_usd_per_hour: float


def group_cost(
    name: str,
    *,
    gpu_class: str,
    capacity_type: catalog.CapacityType,
    instance_types: Sequence[str],
    sizes: tuple[int, int, int],
    autoscaled: bool,
    auto_repair: bool,
) -> GroupCost:
    """One managed group's figures; `sizes`: (minSize, desiredSize, maxSize)."""
    minimum, desired, maximum = sizes
    first = instance_types[0]
    gpus = catalog.instance(first).gpus
    dearest = max(catalog.price_per_hour(t, capacity_type) for t in instance_types)
    return GroupCost(
        name=name,
        gpu_class=gpu_class,
        capacity_type=capacity_type,
        instance_types=tuple(instance_types),
        min_size=minimum,
        desired_size=desired,
        max_size=maximum,
        autoscaled=autoscaled,
        auto_repair=auto_repair,
        gpus_per_node=gpus,
        max_gpus=gpus * maximum,
        idle_usd_per_hour=desired * catalog.price_per_hour(first, capacity_type),
        max_usd_per_hour=dearest * maximum,
    )


def node_group_costs(groups: NodeGroupsConfig, autoscaled: frozenset[str]) -> tuple[GroupCost, ...]:
    """The system group and every managed GPU group (a Capacity Block group's one type lives in
    its launch template, not on the node group: the config names it either way), by name;
    `autoscaled`: the GPU groups the cluster-autoscaler resizes (StackConfig.autoscaled)."""
    system = groups.system
    found = [
        group_cost(
            "system",
            gpu_class="cpu",
            capacity_type="on-demand",
            instance_types=system.instance_types,
            sizes=(system.min_size, system.desired_size, system.max_size),
            autoscaled=False,
            auto_repair=system.auto_repair,
        ),
        *(
            group_cost(
                group.name,
                gpu_class=group.gpu_class,
                capacity_type=group.flavor_capacity_type,
                instance_types=group.instance_types,
                sizes=(group.min_size, group.desired_size, group.max_size),
                autoscaled=group.name in autoscaled,
                auto_repair=group.auto_repair,
            )
            for group in groups.gpu
        ),
    ]
    return tuple(sorted(found, key=lambda g: g.name))


@dataclass(frozen=True)
class PoolCost:
    """The most nodes a NodePool can hold under its limits and what they cost per hour."""

    nodes: int
    usd_per_hour: float


def pool_max_cost(pool: KarpenterPool) -> PoolCost:
    """Most nodes and most $/h a pool can reach before a limit stops it: for each allowed type,
    the nodes that fit under every limit (GPUs, vCPUs, GiB), at that type's price on the pool's
    capacity type; the dearest type wins (the first in name order on a tie)."""
    limits = pool.limits
    worst = PoolCost(0, 0.0)
    for name in sorted(pool.resolved_instance_types):
        row = catalog.instance(name)
        fits = [
            int(limit // per_node)
            for limit, per_node in (
                (limits.gpus, row.gpus),
                (limits.cpu, row.vcpu),
                (limits.memory_gib, row.memory_gib),
            )
            if limit is not None and per_node > 0
        ]
        if not fits:
            continue
        nodes = min(fits)
        cost = nodes * catalog.price_per_hour(name, pool.capacity_type)
        if cost > worst.usd_per_hour:
            worst = PoolCost(nodes, cost)
    return worst


@dataclass(frozen=True)
class IdleItem:
    """Something that runs, and bills, with no job: how many and the $/h of one."""

    item: str
    count: int
    usd_each: float

    @property
    def usd_per_hour(self) -> float:
        return self.count * self.usd_each


@dataclass(frozen=True)
class IdleCost:
    """Everything that bills with no job, and the total $/h."""

    items: tuple[IdleItem, ...]

    @property
    def usd_per_hour(self) -> float:
        return sum(item.usd_per_hour for item in self.items)


def idle_items(
    groups: Sequence[GroupCost], reservations: Sequence[ReservationRow]
) -> tuple[IdleItem, ...]:
    """What the config makes bill with no job: managed groups at their desired size (first
    type) and every capacity reservation (billed used or not, analysis/capacity.py)."""
    items = [
        IdleItem(
            f"node group {g.name} ({g.instance_types[0]}, desired size)",
            g.desired_size,
            catalog.price_per_hour(g.instance_types[0], g.capacity_type),
        )
        for g in groups
        if g.desired_size
    ]
    items += [
        IdleItem(
            f"capacity reservation {r.name} ({r.instance_type}, {r.type})",
            r.count,
            r.usd_per_hour / r.count,
        )
        for r in reservations
    ]
    return tuple(items)


@dataclass(frozen=True)
class StorageRate:
    """A per-GB-month price and the same per TiB."""

    usd_per_gb_month: float

    @property
    def usd_per_tib_month(self) -> float:
        return self.usd_per_gb_month * GIB_PER_TIB


@dataclass(frozen=True)
class FsxCost:
    """An FSx for Lustre file system: provisioned SSD at its throughput tier."""

    deployment: str
    capacity_gib: int
    #: MB/s per TiB of storage.
    tier: int
    rate: StorageRate

    @property
    def throughput_mbps(self) -> float:
        """Aggregate throughput: capacity in TiB x the tier."""
        return self.capacity_gib / GIB_PER_TIB * self.tier

    @property
    def usd_per_month(self) -> float:
        return self.capacity_gib * self.rate.usd_per_gb_month


@dataclass(frozen=True)
class EfsCost:
    """An EFS file system: per GB stored, plus provisioned throughput where configured."""

    #: MiB/s, with `throughputMode: provisioned` only.
    provisioned_mibps: float | None
    rate: StorageRate = StorageRate(catalog.EFS_STANDARD_USD_PER_GB_MONTH)

    @property
    def throughput_usd_per_month(self) -> float:
        if self.provisioned_mibps is None:
            return 0.0
        return self.provisioned_mibps * catalog.EFS_PROVISIONED_USD_PER_MIBPS_MONTH


@dataclass(frozen=True)
class StorageCost:
    """The stack's storage prices: S3 per GB stored, and the RWX file system (`storage.rwx`,
    none on a fleet's manager) with what it costs before any data."""

    fsx: FsxCost | None = None
    efs: EfsCost | None = None
    s3_standard: StorageRate = StorageRate(catalog.S3_USD_PER_GB_MONTH["STANDARD"])
    s3_standard_ia: StorageRate = StorageRate(catalog.S3_USD_PER_GB_MONTH["STANDARD_IA"])

    @staticmethod
    def kms_usd_per_month(keys: int) -> float:
        return keys * catalog.KMS_KEY_USD_PER_MONTH

    def fixed_usd_per_month(self, kms_keys: int) -> float:
        """What is paid before any data: `kms_keys` customer keys (every area's: a count of the
        rendered stack), FSx's provisioned capacity, EFS's provisioned throughput."""
        fixed = self.kms_usd_per_month(kms_keys)
        if self.fsx is not None:
            fixed += self.fsx.usd_per_month
        if self.efs is not None:
            fixed += self.efs.throughput_usd_per_month
        return fixed


def storage_cost(rwx: RwxConfig | None) -> StorageCost:
    """The storage prices of a stack whose RWX file system is `rwx` (None: it has none)."""
    if rwx is None:
        return StorageCost()
    if rwx.type == "fsx":
        deployment, tier = rwx.fsx_deployment_type, rwx.fsx_throughput
        rate = StorageRate(catalog.FSX_LUSTRE_USD_PER_GB_MONTH[(deployment, tier)])
        return StorageCost(fsx=FsxCost(deployment, rwx.fsx_capacity_gib, tier, rate))
    # Set only with `throughputMode: provisioned`: RwxConfig refuses it with any other mode.
    provisioned = rwx.provisioned_throughput_mibps
    return StorageCost(efs=EfsCost(float(provisioned) if provisioned is not None else None))


@dataclass(frozen=True)
class PlatformCosts:
    """A stack's cost figures, built once (`platform_costs`): the managed groups, each
    NodePool at its limits, what the config makes bill with no job, and storage."""

    node_groups: tuple[GroupCost, ...]
    #: NodePool name -> its most nodes and $/h at its limits.
    pools: Mapping[str, PoolCost]
    #: Groups at desired size and reservations (`idle_items`).
    idle: tuple[IdleItem, ...]
    storage: StorageCost

    def idle_cost(self, *, control_planes: int, nat_gateways: int) -> IdleCost:
        """The idle cost with the EKS control planes and NAT gateways the rendered stack
        creates (resource counts only synth knows), at their hourly prices."""
        return IdleCost(
            (
                IdleItem(
                    "EKS control plane", control_planes, catalog.EKS_CONTROL_PLANE_USD_PER_HOUR
                ),
                *self.idle,
                IdleItem("NAT gateways", nat_gateways, catalog.NAT_GATEWAY_USD_PER_HOUR),
            )
        )


def platform_costs(
    groups: NodeGroupsConfig,
    *,
    autoscaled: frozenset[str],
    pools: Sequence[KarpenterPool],
    reservations: Sequence[ReservationRow],
    rwx: RwxConfig | None,
) -> PlatformCosts:
    """The cost figures of a stack with these managed groups (`autoscaled`: the GPU groups the
    cluster-autoscaler resizes), Karpenter pools, reservations and RWX file system."""
    group_costs = node_group_costs(groups, autoscaled)
    return PlatformCosts(
        node_groups=group_costs,
        pools={pool.name: pool_max_cost(pool) for pool in pools},
        idle=idle_items(group_costs, reservations),
        storage=storage_cost(rwx),
    )


def manager_costs(system: SystemNodeGroup) -> PlatformCosts:
    """A fleet manager's cost figures: its system group only (no GPU group, NodePool,
    reservation nor RWX file system: fleet/__main__.py)."""
    return platform_costs(
        NodeGroupsConfig(system=system), autoscaled=frozenset(), pools=(), reservations=(), rwx=None
    )


@dataclass(frozen=True)
class HourlyCost:
    """What a job's nodes cost per hour on spot and on-demand capacity."""

    spot: float
    on_demand: float


def job_hourly_cost(nodes: int, instance_type: str) -> HourlyCost:
    """`nodes` x the planning price of `instance_type` (the smallest type the pools launch for
    the job's class: the one its pods are sized for), on each capacity type."""
    return HourlyCost(
        spot=nodes * catalog.price_per_hour(instance_type, "spot"),
        on_demand=nodes * catalog.price_per_hour(instance_type, "on-demand"),
    )


@dataclass(frozen=True)
class Replication:
    """What keeping a fleet job's checkpoints in every other worker's region moves and costs
    (docs/fleet.md: S3 replicates each worker's checkpoints to every other)."""

    #: The workers its checkpoints are copied to.
    other_workers: int
    #: Its model states per checkpoint x checkpoints per hour x other workers; None without
    #: `modelParameters` (no size to plan with).
    gib_per_hour: float | None
    #: That volume at the inter-region transfer price (GiB -> GB); None with it.
    usd_per_hour: float | None


def replication(
    model_state_gib: float | None, checkpoint_interval_s: float, other_workers: int
) -> Replication:
    """The replication of a job whose ranks hold `model_state_gib` (the ZeRO/FSDP figure,
    memory.model_state_gib) and checkpoint every `checkpoint_interval_s`, to `other_workers`."""
    if model_state_gib is None:
        return Replication(other_workers, None, None)
    per_hour = 3600 / checkpoint_interval_s
    gib = model_state_gib * per_hour * other_workers
    return Replication(other_workers, gib, gib * catalog.INTER_REGION_USD_PER_GB * (1024**3 / 1e9))
