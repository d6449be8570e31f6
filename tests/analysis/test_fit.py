"""fit.py: which node sources admit a pod (labels and taints) and which of them hold one
(allocatable) — the kube-scheduler's NodeAffinity / TaintToleration / NodeResourcesFit filters
over the nodes a source can bring, and the JobFacts field every verdict reads."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from components import catalog
from components.analysis.facts import build
from components.analysis.fit import fit_sources, shortfall
from components.analysis.nodes import Allocatable, NodeSource
from components.analysis.placement import Placement


def _source(name: str, kind: Any, types: dict[str, Allocatable], **labels: str) -> NodeSource:
    return NodeSource(
        name=name,
        kind=kind,
        key=f"test.{name}",
        gpu_class="l4-x1",
        capacity_type="spot",
        instance_types=tuple(types),
        labels={catalog.LABEL_GPU_CLASS: "l4-x1", **labels},
        taints=(catalog.gpu_taint(),),
        zones=2,
        allocatable=types,
        scaler="karpenter" if kind == "karpenter" else "autoscaler",
        max_nodes=2,
        limit_text="",
    )


SMALL = Allocatable(cpu=3.0, memory_gib=12, gpus=1, efa=0)
LARGE = Allocatable(cpu=15.0, memory_gib=56, gpus=1, efa=0)
POD = {"cpu": 6.0, "memory": 20.0, catalog.GPU_RESOURCE: 1}
WHERE = Placement(
    required={catalog.LABEL_GPU_CLASS: ("l4-x1",)},
    tolerations=(catalog.gpu_toleration(),),
    single_zone=False,
)


def test_karpenter_needs_one_type_that_fits_a_managed_group_every_type() -> None:
    # Karpenter picks a type that fits; the autoscaler may bring any type of the group.
    pool = _source("pool", "karpenter", {"g6.xlarge": SMALL, "g6.4xlarge": LARGE})
    group = _source("group", "managed", {"g6.xlarge": SMALL, "g6.4xlarge": LARGE})
    assert shortfall(pool, POD) is None
    miss = shortfall(group, POD)
    assert miss is not None and "cpu 6 > 3 on g6.xlarge" in miss and "g6.4xlarge" not in miss


def test_candidates_match_labels_and_taints_fitting_hold_the_pod() -> None:
    fits = _source("fits", "karpenter", {"g6.4xlarge": LARGE})
    small = _source("small", "karpenter", {"g6.xlarge": SMALL})
    other = replace(
        _source("other", "karpenter", {"g6.4xlarge": LARGE}),
        labels={catalog.LABEL_GPU_CLASS: "a10g-x1"},
    )
    found = fit_sources([fits, small, other], WHERE, POD)
    assert [s.name for s in found.candidates] == ["fits", "small"]
    assert [s.name for s in found.fitting] == ["fits"]
    assert found.misses["small"] is not None and found.misses["fits"] is None
    untolerated = fit_sources([fits], Placement(WHERE.required, (), False), POD)
    assert untolerated.candidates == ()


def test_job_facts_fit_is_the_fit_of_its_own_placement_and_requests(dev: Any) -> None:
    facts = build(dev.config)
    assert len(facts.jobs) == len(dev.config.training_jobs) > 0
    for derived in facts.jobs:
        job = derived.job
        again = fit_sources(facts.sources, derived.placement, derived.requests)
        assert derived.fit == again
        assert derived.fit.fitting, f"{job.name}: the dev stack's jobs all run"


def test_a_sources_efa_per_node_is_the_most_any_of_its_types_offers() -> None:
    """What the report prints as a fitting source's allocatable EFA devices
    (verdict_text.placement_text): a property of the source, never recomputed there."""
    efa = replace(LARGE, efa=4)
    source = _source("mixed", "karpenter", {"g6.xlarge": SMALL, "g6.4xlarge": efa})
    assert source.efa_per_node == 4
    assert _source("plain", "managed", {"g6.xlarge": SMALL}).efa_per_node == 0
