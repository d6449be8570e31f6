"""Capacity and node sources: what GPU capacity each (GPU class, capacity type) flavor can reach,
and which instance types the pools can launch for a job. Kueue is capacity-blind; these are the
figures its quotas are checked against."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from components import catalog
from components.config import KarpenterPool, StackConfig, TeamConfig, TrainingJobConfig


def gpu_capacity(cfg: StackConfig) -> dict[tuple[str, catalog.CapacityType], int]:
    """GPUs each (GPU class, capacity type) flavor can provide at most: the one capacity figure
    Kueue quotas are checked against (Kueue itself is capacity-blind). Managed GPU node groups
    count the nodes they can hold (`StackConfig.group_max_nodes`: maxSize when the
    cluster-autoscaler resizes them, else desiredSize) x GPUs per node. Karpenter GPU NodePools
    count the whole nodes their `limits.gpus` admits: Karpenter launches no instance type whose
    capacity would exceed what is left of a NodePool's limits (kubernetes-sigs/karpenter
    v1.x pkg/controllers/provisioning/scheduling, `filterByRemainingResources`), so a 12-GPU
    limit over 8-GPU nodes brings one node, 8 GPUs — the nodes.py `max_nodes` figure. Reserved
    pools count at most what the reservations of their types hold, once per flavor: two reserved
    pools of one class draw on the same reservations."""
    capacity: dict[tuple[str, catalog.CapacityType], int] = {}
    for group in cfg.node_groups.gpu:
        key: tuple[str, catalog.CapacityType] = (group.gpu_class, group.flavor_capacity_type)
        capacity[key] = capacity.get(key, 0) + cfg.group_max_nodes(group) * group.gpus_per_node
    reserved_types: dict[tuple[str, catalog.CapacityType], set[str]] = {}
    for pool in _gpu_pools(cfg):
        per_node = max(1, pool.gpus_per_node)
        gpus = (pool.limits.gpus or 0) // per_node * per_node
        key = (pool.resolved_gpu_class, pool.capacity_type)
        if pool.capacity_type == "reserved":
            gpus = min(gpus, cfg.karpenter.reserved_gpus(pool.resolved_instance_types))
            reserved_types.setdefault(key, set()).update(pool.resolved_instance_types)
        capacity[key] = capacity.get(key, 0) + gpus
    for key, types in reserved_types.items():
        capacity[key] = min(capacity[key], cfg.karpenter.reserved_gpus(sorted(types)))
    return capacity


@dataclass(frozen=True)
class FlavorCommitment:
    """One Kueue flavor: the nominal GPUs all teams were promised of it against the GPUs its
    pools can provide (report.md's "Per flavor, against what the pools can provide")."""

    flavor: str
    nominal_gpus: int
    capacity_gpus: int

    @property
    def committed(self) -> float | None:
        """Nominal over capacity; None when no pool provides the flavor."""
        return self.nominal_gpus / self.capacity_gpus if self.capacity_gpus else None


def flavor_commitments(
    teams: Sequence[TeamConfig], capacity: Mapping[tuple[str, catalog.CapacityType], int]
) -> tuple[FlavorCommitment, ...]:
    """Every flavor the pools provide or a team's quota names, by flavor name: the teams'
    nominal GPUs of it added up, and `capacity`'s figure (gpu_capacity: a platform's own pools;
    a fleet's manager adds up its workers')."""
    nominal: dict[tuple[str, catalog.CapacityType], int] = dict.fromkeys(capacity, 0)
    for team in teams:
        for entry in team.quota:
            key = (entry.gpu_class, entry.capacity_type)
            nominal[key] = nominal.get(key, 0) + entry.gpus
    rows = [
        FlavorCommitment(
            flavor=catalog.gpu_flavor_name(gpu_class, capacity_type),
            nominal_gpus=gpus,
            capacity_gpus=capacity.get((gpu_class, capacity_type), 0),
        )
        for (gpu_class, capacity_type), gpus in nominal.items()
    ]
    return tuple(sorted(rows, key=lambda row: row.flavor))


def _gpu_pools(cfg: StackConfig) -> list[KarpenterPool]:
    """The Karpenter pools that count towards GPU capacity: GPU pools with a GPU limit."""
    return [pool for pool in cfg.karpenter.pools if pool.is_gpu and pool.limits.gpus]


def flavors(cfg: StackConfig) -> frozenset[tuple[str, catalog.CapacityType]]:
    """The (GPU class, capacity type) flavors the pools provide — `gpu_capacity`'s keys,
    without counting: what the structural config check (analysis.validate) needs before the
    facts are built."""
    return frozenset(
        [(g.gpu_class, g.flavor_capacity_type) for g in cfg.node_groups.gpu]
        + [(p.resolved_gpu_class, p.capacity_type) for p in _gpu_pools(cfg)]
    )


def flavor_provisioners(
    cfg: StackConfig,
) -> dict[tuple[str, catalog.CapacityType], catalog.Provisioner]:
    """Which provisioner serves each (GPU class, capacity type) flavor: managed node groups or
    Karpenter NodePools, never both (StackConfig refuses a flavor served by both)."""
    out: dict[tuple[str, catalog.CapacityType], catalog.Provisioner] = {}
    for group in cfg.node_groups.gpu:
        out[(group.gpu_class, group.flavor_capacity_type)] = "node-group"
    for pool in cfg.karpenter.pools:
        if pool.is_gpu:
            out.setdefault((pool.resolved_gpu_class, pool.capacity_type), "karpenter")
    return out


def provisioning_checked(cfg: StackConfig) -> frozenset[tuple[str, catalog.CapacityType]]:
    """Flavors whose workloads wait for Kueue's ProvisioningRequest admission check: those of
    managed groups the cluster-autoscaler resizes (docs/node-groups.md#gangs-wait-for-nodes)."""
    if not cfg.cluster_autoscaler.provisioning_requests:
        return frozenset()
    return frozenset(
        (group.gpu_class, group.flavor_capacity_type)
        for group in cfg.node_groups.gpu
        if cfg.autoscaled(group)
    )


@dataclass(frozen=True)
class ReservationRow:
    """One capacity reservation as the report lists it."""

    name: str
    #: `cr-…`, or the tag selector as `key=value,…`.
    selector: str
    type: str
    instance_type: str
    count: int
    gpus: int
    #: `start … end` (UTC) for a Capacity Block, empty for an open-ended ODCR.
    window: str
    #: What the reservation costs per hour, used or not (count x price per instance-hour).
    usd_per_hour: float


def reservations(cfg: StackConfig) -> list[ReservationRow]:
    """The stack's capacity reservations: billed whether or not a node runs in them, so their
    $/h belongs to the idle cost."""
    rows = []
    for r in cfg.karpenter.reservations:
        selector = r.id or ",".join(f"{k}={v}" for k, v in sorted((r.tags or {}).items()))
        window = f"{r.start} … {r.end}" if r.start and r.end else ""
        rows.append(
            ReservationRow(
                name=r.name,
                selector=selector,
                type=r.type,
                instance_type=r.instance_type,
                count=r.count,
                gpus=r.gpus,
                window=window,
                usd_per_hour=round(r.count * r.effective_price_usd_per_hour, 2),
            )
        )
    return rows


def job_instance_types(cfg: StackConfig, job: TrainingJobConfig) -> list[str]:
    """Instance types the pools can launch for a job's GPU class and capacity types."""
    found: set[str] = set()
    for group in cfg.node_groups.gpu:
        if group.gpu_class == job.gpu_class and group.flavor_capacity_type in job.capacity_types:
            found.update(group.instance_types)
    for pool in cfg.karpenter.pools:
        if (
            pool.is_gpu
            and pool.resolved_gpu_class == job.gpu_class
            and pool.capacity_type in job.capacity_types
        ):
            found.update(pool.resolved_instance_types)
    return sorted(found)


def smallest_instance_type(names: Sequence[str]) -> str:
    """The instance every pod must fit on (a managed group may launch any of its types)."""
    return min(names, key=lambda n: (catalog.instance(n).vcpu, catalog.instance(n).memory_gib, n))
