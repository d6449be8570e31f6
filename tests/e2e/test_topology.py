"""Gangs placed by the network on the real engines (#38, docs/topology.md): prod with a fixed
group of six p5 nodes, labelled as EKS labels them (synth/engines/nodes.py NetworkLayout: one
zone, two layer-2 network nodes, four layer-3 blocks, the nodes spread over the blocks 2/2/1/1),
h100-x8 and l40s-x1 placed by the network, and research's gangs asking for blocks. The real
kube-apiserver, kube-scheduler, controller-manager and Kueue (v0.13.1, TopologyAwareScheduling
gate on: kueue_v1beta1.feature_gates) decide; the harness only submits, waits and reads where
the pods went. A gang that requires one layer-3 block lands in one; one no block can hold waits
with Kueue's own "allows to fit only 2 out of 3 pod(s)"; one that prefers a block is relaxed to
one layer-2 domain. The committed prod group's finetune-l40s (preferred, autoscaled groups
behind the ProvisioningRequest check) runs in test_real_engines.py.

Each run's record goes to build/e2e/topology.json (the figures in docs/real-engines.md)."""

from __future__ import annotations

import copy
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest

from components import catalog
from synth.engines.client import wait_for
from synth.engines.driver import pods_of, workload_of
from synth.engines.run import Cluster, ClusterRun, Toolkit, _verdicts
from synth.engines.workloads import WorkloadRun, apply_all, as_submitted, remove, submit
from synth.harness import SynthResult, run_program
from tests.conftest import h100_static_values
from tests.e2e.conftest import one_plane

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

LAYER3 = catalog.network_node_label(3)
LAYER2 = catalog.network_node_label(2)


def _job(name: str, nodes: int, request: dict[str, Any] | None, **extra: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "name": name,
        "team": "research",
        "gpuClass": "h100-x8",
        "nodes": nodes,
        "hyperparameters": {"max-steps": 10},
        **extra,
    }
    if request is not None:
        job["topology"] = request
    return job


JOBS = [
    _job("block-2", 2, {"mode": "required", "level": "layer-3"}),
    _job("block-3", 3, {"mode": "required", "level": "layer-3"}),
    _job("spine-3", 3, {"mode": "required", "level": "layer-2"}),
    _job("near-3", 3, {"mode": "preferred", "level": "layer-3"}),
    _job("block-trainjob", 2, {"mode": "required", "level": "layer-3"}, launcher="kubeflow"),
    _job("zone-2", 2, {"mode": "required", "level": "zone"}),
    _job("default-2", 2, None),
]


@pytest.fixture(scope="module")
def stack() -> SynthResult:
    values = copy.deepcopy(h100_static_values())
    values["gpu-platform:trainingJobs"] = JOBS
    return run_program("prod", overrides=values)


@pytest.fixture(scope="module")
def cluster(kit: Toolkit, stack: SynthResult) -> Iterator[tuple[Cluster, ClusterRun]]:
    with one_plane(
        kit, "topology", stack, "prod (fixed H100 group, h100-x8 by the network)"
    ) as booted:
        yield booted


def _rendered(cluster: Cluster, name: str) -> dict[str, Any]:
    return next(
        obj
        for _, obj in cluster.walks[0].deferred
        if obj["metadata"]["name"] == name and obj["metadata"].get("namespace") == "team-research"
    )


def _run(cluster: Cluster, out: ClusterRun, stack: SynthResult, name: str) -> WorkloadRun:
    verdict = _verdicts(stack)[f"team-research/{name}"]
    run = submit(cluster.driver, stack.stack, _rendered(cluster, name), verdict)
    out.workloads.append(run)
    return run


def _levels(cluster: Cluster, run: WorkloadRun, label: str) -> Counter[str]:
    return Counter(cluster.driver.fleet.labels[p.node][label] for p in run.pods)


def _refusal(message: str) -> bool:
    """Kueue's TAS refusal of a podset no domain of the required level holds (v0.13.1
    pkg/cache/tas_flavor_snapshot.go L1341-1343: "topology %q doesn't allow to fit any of %d
    pod(s)" / "allows to fit only %d out of %d pod(s)")."""
    return 'topology "h100-x8"' in message and "to fit" in message


def test_the_nodes_carry_the_network_labels_as_eks_sets_them(
    cluster: tuple[Cluster, ClusterRun],
) -> None:
    booted, _ = cluster
    h100 = {
        name: labels
        for name, labels in booted.driver.fleet.labels.items()
        if labels.get(catalog.LABEL_GPU_CLASS) == "h100-x8"
    }
    assert len(h100) == 6
    blocks = Counter(labels[LAYER3] for labels in h100.values())
    assert sorted(blocks.values()) == [1, 1, 2, 2]
    assert len({labels[catalog.network_node_label(1)] for labels in h100.values()}) == 1
    assert all(labels[LAYER3].startswith("nn-") for labels in h100.values())
    # System (m6i) nodes get none: EC2 gives them no topology.
    system = [
        lb for lb in booted.driver.fleet.labels.values() if "gpu-platform.io/gpu-class" not in lb
    ]
    assert system and not any(LAYER3 in lb for lb in system)


def test_a_gang_requiring_one_block_lands_in_one_block(
    cluster: tuple[Cluster, ClusterRun], stack: SynthResult
) -> None:
    booted, out = cluster
    run = _run(booted, out, stack, "block-2")
    assert run.ok, run.problems
    assert len(run.pods) == 2 and len(_levels(booted, run, LAYER3)) == 1
    assert run.topology, "Kueue assigned no topology"


def test_a_gang_no_block_can_hold_waits(
    cluster: tuple[Cluster, ClusterRun], stack: SynthResult
) -> None:
    """Three pods, blocks of at most two: Kueue keeps the workload pending, no pod is bound."""
    booted, out = cluster
    client, driver = booted.client, booted.driver
    obj = _rendered(booted, "block-3")
    sub = as_submitted(client, obj)
    run = WorkloadRun(stack=stack.stack, ref="Job team-research/block-3", kind="Job")
    run.expected_pods = sub.pods
    began = time.monotonic()
    assert apply_all(client, sub, run, "the API server")
    said: list[str] = []

    def refused() -> bool:
        driver.tick()
        workload = workload_of(client, sub.namespace, sub.owner)
        conditions = ((workload or {}).get("status") or {}).get("conditions") or []
        said[:] = [str(c.get("message", "")) for c in conditions]
        return any(_refusal(m) for m in said) or None  # type: ignore[return-value]

    try:
        try:
            wait_for("block-3 refused by Kueue's topology", refused, timeout=90, interval=1)
        except TimeoutError:
            workload = workload_of(client, sub.namespace, sub.owner)
            pytest.fail(f"Kueue said: {said}; workload status {(workload or {}).get('status')}")
        # Still pending a while later, with no pod bound: it waits, it is not placed elsewhere.
        time.sleep(5)
        workload = workload_of(client, sub.namespace, sub.owner)
        assert not ((workload or {}).get("status") or {}).get("admission"), workload
        assert not [
            p for p in pods_of(client, sub.namespace, sub.selector) if p["spec"].get("nodeName")
        ]
    finally:
        run.problems = [] if any(_refusal(m) for m in said) else said
        run.stand_in = "waits: " + "; ".join(m for m in said if m)
        run.seconds = time.monotonic() - began
        out.workloads.append(run)
        remove(client, sub, [driver])
    assert any("allows to fit only 2 out of 3" in m for m in said), said


def test_a_gang_requiring_one_layer_2_domain_lands_in_one(
    cluster: tuple[Cluster, ClusterRun], stack: SynthResult
) -> None:
    booted, out = cluster
    run = _run(booted, out, stack, "spine-3")
    assert run.ok, run.problems
    assert len(run.pods) == 3 and len(_levels(booted, run, LAYER2)) == 1


def test_a_gang_preferring_a_block_is_relaxed_to_the_closest_level_that_holds_it(
    cluster: tuple[Cluster, ClusterRun], stack: SynthResult
) -> None:
    booted, out = cluster
    run = _run(booted, out, stack, "near-3")
    assert run.ok, run.problems
    assert len(run.pods) == 3
    assert len(_levels(booted, run, LAYER3)) == 2, "no block holds 3: two blocks"
    assert len(_levels(booted, run, LAYER2)) == 1, "one layer-2 domain holds them"


def test_a_trainjob_requiring_one_block_lands_in_one_block(
    cluster: tuple[Cluster, ClusterRun], stack: SynthResult
) -> None:
    """The annotation rides in the TrainJob's runtime patch; the stand-in Job Trainer's JobSet
    would create carries it to Kueue (synth/engines/trainjob.py)."""
    booted, out = cluster
    run = _run(booted, out, stack, "block-trainjob")
    assert run.ok, run.problems
    assert len(run.pods) == 2 and len(_levels(booted, run, LAYER3)) == 1


def test_a_gang_requiring_its_zone_is_packed_greedily(
    cluster: tuple[Cluster, ClusterRun], stack: SynthResult
) -> None:
    """Required at the zone, Kueue's BestFit descent picks the smallest layer-2 domain that holds
    the gang (two blocks of one node) over the one whose blocks hold two: the gang stays in its
    zone but spans two blocks while a whole free block exists. Why the default for an EFA gang
    on one-zone flavors is `preferred` at layer-3 (components/analysis/topology.py)."""
    booted, out = cluster
    run = _run(booted, out, stack, "zone-2")
    assert run.ok, run.problems
    assert len(_levels(booted, run, catalog.ZONE_LABEL)) == 1
    assert len(_levels(booted, run, LAYER3)) == 2


def test_an_efa_gang_by_default_takes_one_free_block(
    cluster: tuple[Cluster, ClusterRun], stack: SynthResult
) -> None:
    booted, out = cluster
    run = _run(booted, out, stack, "default-2")
    assert run.ok, run.problems
    assert run.predicted_topology == ("preferred", LAYER3)
    assert len(_levels(booted, run, LAYER3)) == 1
