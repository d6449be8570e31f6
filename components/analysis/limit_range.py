"""A namespace's LimitRange as Kueue applies it to a Workload, and the containers we render.

Kueue adjusts an in-memory copy of every Workload's pod sets before it admits it and refuses one
whose adjusted containers break a rule (kubernetes-sigs/kueue@v0.19.2 pkg/workload/resources.go):
1. `handlePodLimitRange` (L75-114): for every init container and container, `limits` gain the
   LimitRange's `default` and `requests` its `defaultRequest`, for the keys the container does
   not set (`MergeResourceListKeepFirst`); several LimitRanges are summarised first (the first
   `default`/`defaultRequest` found; pkg/util/limitrange/limitrange.go L38-57);
2. `handleLimitsToRequests` (L116-138): a resource with a limit and no request gets request =
   limit;
3. `ValidateAdmissibility` (L231-260), called by the scheduler for the head workload before any
   flavor is tried (pkg/scheduler/scheduler.go ~L683): per container, no request above its limit
   for the same key ("resources validation failed: ... requests must not exceed its limits"),
   and `max`/`min` of `type: Container` items ("resources didn't satisfy LimitRange
   constraints"). The Workload stays `QuotaReserved=False` and, on a MultiKueue manager, is
   never dispatched (multikueue/workload.go L380-394). ResourceQuota is never read by Kueue.
The same algorithm and messages hold in v0.13.1 (the real-engine tier reproduced the refusal:
docs/real-engines.md).

The platform renders one LimitRange per team namespace (`limit_range_spec`) — on a platform, on
each fleet worker and, since Kueue judges the manager's copy of a fleet job there too, on the
fleet's manager — and one resources block per training container (`container_resources`); the
will-it-run rule replays Kueue over both (`kueue_refusals`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from components import catalog
from components.config import ContainerDefaults
from components.config.base import quantity


def limit_range_spec(defaults: ContainerDefaults) -> dict[str, Any]:
    """The LimitRange of a team namespace: defaults for containers that declare nothing; a
    default CPU limit only when the platform asks for one (CFS throttling stalls data loaders
    and NCCL progress threads of training pods, which declare their CPU without a limit)."""
    default = {"memory": defaults.memory_limit}
    if defaults.cpu_limit is not None:
        default = {"cpu": defaults.cpu_limit, **default}
    return {
        "limits": [
            {
                "type": "Container",
                "defaultRequest": {"cpu": defaults.cpu_request, "memory": defaults.memory_request},
                "default": default,
            }
        ]
    }


def container_resources(
    cpu: float, memory_gib: int, gpus: int, efa_devices: int
) -> dict[str, dict[str, str]]:
    """A training container's resources: GPU limits = GPUs per node (requests equal); memory
    limit = request (memory is not compressible); no CPU limit (CFS throttling stalls data
    loaders and NCCL progress threads)."""
    memory = f"{memory_gib}Gi"
    requests = {"cpu": f"{cpu:g}", "memory": memory, catalog.GPU_RESOURCE: str(gpus)}
    limits = {"memory": memory, catalog.GPU_RESOURCE: str(gpus)}
    if efa_devices:
        requests[catalog.EFA_RESOURCE] = limits[catalog.EFA_RESOURCE] = str(efa_devices)
    return {"requests": requests, "limits": limits}


def _summary(spec: Mapping[str, Any]) -> dict[str, dict[str, str]]:
    """The `type: Container` items summarised as Kueue does (first default wins; the tightest
    max and min)."""
    out: dict[str, dict[str, str]] = {"default": {}, "defaultRequest": {}, "max": {}, "min": {}}
    for item in spec.get("limits") or []:
        if item.get("type") != "Container":
            continue
        for field in ("default", "defaultRequest"):
            for name, value in (item.get(field) or {}).items():
                out[field].setdefault(name, str(value))
        for name, value in (item.get("max") or {}).items():
            if name not in out["max"] or quantity(value) < quantity(out["max"][name]):
                out["max"][name] = str(value)
        for name, value in (item.get("min") or {}).items():
            if name not in out["min"] or quantity(value) > quantity(out["min"][name]):
                out["min"][name] = str(value)
    return out


def adjusted(
    resources: Mapping[str, Mapping[str, str]], spec: Mapping[str, Any]
) -> dict[str, dict[str, str]]:
    """A container's resources as Kueue sees them after the LimitRange defaults and
    limits-to-requests (steps 1 and 2 of the module docstring)."""
    summary = _summary(spec)
    limits = {**summary["default"], **dict(resources.get("limits") or {})}
    requests = {**summary["defaultRequest"], **dict(resources.get("requests") or {})}
    for name, value in limits.items():
        requests.setdefault(name, value)
    return {"requests": requests, "limits": limits}


def kueue_refusals(
    containers: Sequence[Mapping[str, Mapping[str, str]]], spec: Mapping[str, Any]
) -> list[str]:
    """Why Kueue would refuse a pod set with these containers in a namespace with LimitRange
    `spec` (step 3 of the module docstring); empty when it admits it."""
    summary = _summary(spec)
    found: list[str] = []
    for index, resources in enumerate(containers):
        adjusted_ = adjusted(resources, spec)
        requests, limits = adjusted_["requests"], adjusted_["limits"]
        over = sorted(
            n for n in requests if n in limits and quantity(requests[n]) > quantity(limits[n])
        )
        if over:
            found.append(
                f"containers[{index}]: requests of {', '.join(over)} "
                f"({', '.join(f'{requests[n]} > {limits[n]}' for n in over)}) exceed the limits "
                "the namespace LimitRange gives them"
            )
        for name, cap in summary["max"].items():
            biggest = max((quantity(v[name]) for v in (requests, limits) if name in v), default=0.0)
            if biggest > quantity(cap):
                found.append(f"containers[{index}]: {name} above the LimitRange max {cap}")
        for name, floor in summary["min"].items():
            smallest = min(
                (quantity(v[name]) for v in (requests, limits) if name in v), default=math.inf
            )
            if smallest < quantity(floor):
                found.append(f"containers[{index}]: {name} below the LimitRange min {floor}")
    return found
