"""Capacity and node sources: what GPU capacity each (GPU class, capacity type) flavor can reach,
and which instance types the pools can launch for a job. Kueue is capacity-blind; these are the
figures its quotas are checked against."""

from __future__ import annotations

from collections.abc import Sequence

from components import catalog
from components.config import StackConfig, TrainingJobConfig


def gpu_capacity(cfg: StackConfig) -> dict[tuple[str, catalog.CapacityType], int]:
    """GPUs each (GPU class, capacity type) flavor can provide at most: the one capacity figure
    Kueue quotas are checked against (Kueue itself is capacity-blind). Managed GPU node groups
    count `maxSize` x GPUs per node; Karpenter GPU NodePools count their `limits.gpus`."""
    capacity: dict[tuple[str, catalog.CapacityType], int] = {}
    for group in cfg.node_groups.gpu:
        key = (group.gpu_class, group.capacity_type)
        capacity[key] = capacity.get(key, 0) + group.max_size * group.gpus_per_node
    for pool in cfg.karpenter.pools:
        if pool.is_gpu and pool.limits.gpus:
            key = (pool.resolved_gpu_class, pool.capacity_type)
            capacity[key] = capacity.get(key, 0) + pool.limits.gpus
    return capacity


def job_instance_types(cfg: StackConfig, job: TrainingJobConfig) -> list[str]:
    """Instance types the pools can launch for a job's GPU class and capacity types."""
    found: set[str] = set()
    for group in cfg.node_groups.gpu:
        if group.gpu_class == job.gpu_class and group.capacity_type in job.capacity_types:
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
