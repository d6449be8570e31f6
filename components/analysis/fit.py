"""Which node sources a pod can go to: those whose labels satisfy its required node affinity and
whose taints it tolerates (candidates), and of those the ones whose allocatable holds one pod
(fitting) — the kube-scheduler's NodeAffinity, TaintToleration and NodeResourcesFit filters
applied to the nodes a source can bring. Pure: facts.py computes one `SourceFit` per training
job, the will-it-run verdicts read it (and the validation workloads use the same helpers)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from components import catalog
from components.analysis.nodes import NodeSource, tolerates
from components.analysis.placement import Placement


def matches(source: NodeSource, placement: Placement) -> bool:
    """Labels satisfy the required node affinity and every taint is tolerated."""
    labels_ok = all(source.labels.get(k) in values for k, values in placement.required.items())
    return labels_ok and all(tolerates(t, placement.tolerations) for t in source.taints)


def shortfall(source: NodeSource, requests: Mapping[str, float]) -> str | None:
    """What does not fit: a managed group may launch any of its types (the smallest must fit);
    Karpenter picks a type that fits (one is enough)."""
    misses: list[str] = []
    for name, alloc in source.allocatable.items():
        offered = {
            "cpu": alloc.cpu,
            "memory": float(alloc.memory_gib),
            catalog.GPU_RESOURCE: alloc.gpus,
            catalog.EFA_RESOURCE: alloc.efa,
        }
        miss = [
            f"{resource} {amount:g} > {offered.get(resource, 0):g} on {name}"
            for resource, amount in requests.items()
            if amount > offered.get(resource, 0)
        ]
        if source.kind == "karpenter" and not miss:
            return None
        misses += miss
    return "; ".join(misses) if misses else None


@dataclass(frozen=True)
class SourceFit:
    """Where one pod can go."""

    #: Sources whose labels and taints admit the pod.
    candidates: tuple[NodeSource, ...]
    #: What does not fit on each candidate (None: it fits), by source name.
    misses: Mapping[str, str | None]

    @property
    def fitting(self) -> tuple[NodeSource, ...]:
        """Candidates whose allocatable holds the pod."""
        return tuple(s for s in self.candidates if self.misses[s.name] is None)


def fit_sources(
    sources: Sequence[NodeSource], placement: Placement, requests: Mapping[str, float]
) -> SourceFit:
    """The candidates among `sources` for a pod with `placement` and `requests`."""
    candidates = tuple(s for s in sources if matches(s, placement))
    return SourceFit(candidates, {s.name: shortfall(s, requests) for s in candidates})
