"""Cost arithmetic: what a NodePool can cost at most under its limits (catalog planning prices).
The report asks here instead of computing costs itself."""

from __future__ import annotations

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
