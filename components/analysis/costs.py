"""Cost arithmetic at the catalog's planning prices: what a NodePool can cost at most under its
limits, what a training job's nodes cost per hour. The facts (facts.build / facts.job_facts)
call these once and hold the results; the report renders those values and computes no cost
itself."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components import catalog

QUANTITY_SUFFIX_GIB = {"Gi": 1.0, "Mi": 1 / 1024, "Ti": 1024.0}


def limit_value(resource: str, raw: Any) -> float:
    """A NodePool limit in the catalog's units: GPUs, vCPUs, GiB."""
    text = str(raw)
    if resource == "memory":
        for suffix, factor in QUANTITY_SUFFIX_GIB.items():
            if text.endswith(suffix):
                return float(text[: -len(suffix)]) * factor
        return float(text) / 2**30
    if text.endswith("m"):
        return float(text[:-1]) / 1000
    return float(text)


def nodepool_max_cost(
    instance_types: list[str], capacity: catalog.CapacityType, limits: dict[str, Any]
) -> tuple[int, float]:
    """Most nodes and most $/h a pool can reach before a limit stops it: for each allowed type,
    the nodes that fit under every limit, at that type's price; the dearest type wins."""
    per_node = {
        catalog.GPU_RESOURCE: lambda row: row.gpus,
        "cpu": lambda row: row.vcpu,
        "memory": lambda row: row.memory_gib,
    }
    worst_nodes, worst_cost = 0, 0.0
    for name in instance_types:
        row = catalog.instance(name)
        fits = [
            int(limit_value(resource, raw) // per_node[resource](row))
            for resource, raw in limits.items()
            if resource in per_node and per_node[resource](row) > 0
        ]
        if not fits:
            continue
        nodes = min(fits)
        cost = nodes * catalog.price_per_hour(name, capacity)
        if cost > worst_cost:
            worst_nodes, worst_cost = nodes, cost
    return worst_nodes, worst_cost


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
