"""Kueue lends quota, not capacity, on the real engines (quota.py `_entry_fit`).

A team's ClusterQueue reaches its nominal quota plus what the other ClusterQueues of its cohort
lend, within its borrowing limit (kueue v0.19.2 pkg/cache/scheduler/resource_node.go
`potentialAvailable`); the platform's Cohort holds no quota of its own. Our analysis once let an
entry with unbounded borrowing reach the pool's capacity. Here dev runs with research the only
team holding a10g on-demand (1 nominal GPU, no borrowing limit) over a pool of 2 GPUs: a 2-node
job is kept pending by the real Kueue ("insufficient unused quota"), whatever the pool holds,
and admitted — its pods bound — the moment applied's ClusterQueue lends one GPU of that flavor.
The analysis agrees on both sides: refused alone, fitting with the lender.

Each run's record goes to build/e2e/quota.json."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest

from components import config as stack_config
from components.analysis.quota import job_quota_problems
from components.platform.tenancy.team_queues import flavor_resources
from synth.engines.client import wait_for
from synth.engines.driver import workload_of
from synth.engines.run import Cluster, ClusterRun, Toolkit
from synth.engines.workloads import (
    WorkloadRun,
    admission,
    apply_all,
    as_submitted,
    placements,
    remove,
)
from synth.harness import SynthResult, run_program
from tests.conftest import stack_values
from tests.e2e.conftest import one_plane

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

FLAVOR = "a10g-x1-on-demand"
LONE_JOB = {
    "name": "lone-od",
    "team": "research",
    "gpuClass": "a10g-x1",
    "capacity": "on-demand",
    "nodes": 1,
    "hyperparameters": {"max-steps": 10},
}
#: applied's a10g on-demand entry as Pulumi.dev.yaml has it: what it lends once given back.
LENT = {"gpuClass": "a10g-x1", "capacityType": "on-demand", "gpus": 1, "cpu": 8, "memoryGib": 32}


def _values() -> dict[str, Any]:
    """dev with applied's a10g on-demand quota taken away (research alone holds the flavor)
    and one research job of one node on it: what the analysis accepts."""
    values = copy.deepcopy(stack_values("dev"))
    for team in values["gpu-platform:teams"]:
        if team["name"] == "applied":
            team["quota"] = [
                q
                for q in team["quota"]
                if (q["gpuClass"], q["capacityType"]) != ("a10g-x1", "on-demand")
            ]
    values["gpu-platform:trainingJobs"] = [LONE_JOB]
    return values


@pytest.fixture(scope="module")
def stack() -> SynthResult:
    return run_program("dev", overrides=_values())


@pytest.fixture(scope="module")
def cluster(kit: Toolkit, stack: SynthResult) -> Iterator[tuple[Cluster, ClusterRun]]:
    described = "dev (research alone on a10g on-demand)"
    with one_plane(kit, "quota", stack, described) as booted:
        yield booted


def _two_nodes(cluster: Cluster) -> dict[str, Any]:
    """The rendered one-node Job, made a 2-node gang: what the analysis now refuses."""
    rendered = next(
        obj
        for _, obj in cluster.walks[0].deferred
        if obj["kind"] == "Job"
        and obj["metadata"]["name"] == LONE_JOB["name"]
        and obj["metadata"].get("namespace") == "team-research"
    )
    job = copy.deepcopy(rendered)
    job["spec"]["parallelism"] = job["spec"]["completions"] = 2
    return job


def _quota_verdict(stack: SynthResult, lender_lends: bool) -> list[Any]:
    """The analysis' quota problems of the 2-node job, with applied lending or not."""
    assert stack.config is not None
    cfg = stack.config
    research = next(t for t in cfg.teams if t.name == "research")
    applied = next(t for t in cfg.teams if t.name == "applied")
    if lender_lends:
        quota = [*applied.quota, stack_config.FlavorQuota.model_validate(LENT)]
        applied = applied.model_copy(update={"quota": quota})
    job = stack_config.TrainingJobConfig.model_validate({**LONE_JOB, "nodes": 2})
    assert stack.facts is not None
    jf = next(j for j in stack.facts.jobs if j.job.name == LONE_JOB["name"])
    found = job_quota_problems(
        "trainingJobs[0]",
        job,
        research,
        stack.facts.capacity,
        jf.resources,
        cohort=[research, applied],
    )
    return [p for p in found if "fits no quota" in p.allowed]


def _queues_active(client: Any) -> bool | None:
    """research's ClusterQueue and LocalQueue both say Active."""
    for kind, namespace in (("ClusterQueue", ""), ("LocalQueue", "team-research")):
        found = client.find("kueue.x-k8s.io/v1beta1", kind, "research", namespace)
        conditions = ((found or {}).get("status") or {}).get("conditions") or []
        if not any(c["type"] == "Active" and c["status"] == "True" for c in conditions):
            return None
    return True


def test_a_lone_teams_gang_past_its_quota_waits_until_another_team_lends(
    cluster: tuple[Cluster, ClusterRun], stack: SynthResult
) -> None:
    booted, out = cluster
    client, driver = booted.client, booted.driver
    assert stack.facts is not None
    # The pool could hold the gang: only quota stands in its way.
    assert stack.facts.capacity[("a10g-x1", "on-demand")] >= 2
    assert _quota_verdict(stack, lender_lends=False), "the analysis should refuse it alone"
    assert not _quota_verdict(stack, lender_lends=True), "and accept it with the lender"

    # Kueue's queues ready before the first submission (the platform's Jobs come minutes after
    # a deploy; here the gang follows the deploy at once).
    wait_for("research's queues active", lambda: _queues_active(client), timeout=120, interval=1)
    sub = as_submitted(client, _two_nodes(booted))
    run = WorkloadRun(stack=stack.stack, ref="Job team-research/lone-od (2 nodes)", kind="Job")
    run.expected_pods = sub.pods
    began = time.monotonic()
    assert sub.pods == 2 and apply_all(client, sub, run, "the API server")
    said: list[str] = []

    def pending_for_quota() -> bool | None:
        driver.tick()
        workload = workload_of(client, sub.namespace, sub.owner)
        conditions = ((workload or {}).get("status") or {}).get("conditions") or []
        said[:] = [str(c.get("message", "")) for c in conditions]
        # Kueue's verdict is its Warning event on the Workload too: its status write can lose a
        # race with the Job reconciler's PodsReady update ("the object has been modified"), and
        # an inadmissible workload is written again only on the next cluster event.
        name = ((workload or {}).get("metadata") or {}).get("name")
        said.extend(
            str(e.get("message", ""))
            for e in client.list("v1", "Event", sub.namespace)
            if name and (e.get("involvedObject") or {}).get("name") == name
        )
        # v0.13.1's words (pkg/scheduler/flavorassigner/flavorassigner.go L859): "insufficient
        # quota for nvidia.com/gpu in flavor a10g-x1-on-demand, request > maximum capacity
        # (2 > 1)"; v0.19.2 refuses on the same PotentialAvailable (L1342-1356), in other words.
        return any("insufficient quota for nvidia.com/gpu" in m for m in said) or None

    try:
        try:
            wait_for("Kueue's quota refusal", pending_for_quota, timeout=180, interval=1)
        except TimeoutError:
            # Kueue's own words, and where its queue stood, to tell a slow start from a verdict.
            workload = workload_of(client, sub.namespace, sub.owner) or {}
            queue = client.get("kueue.x-k8s.io/v1beta1", "ClusterQueue", "research")
            pytest.fail(
                f"Kueue said: {said}; workload status {workload.get('status')}; "
                f"research ClusterQueue status {queue.get('status')}"
            )
        time.sleep(5)
        workload = workload_of(client, sub.namespace, sub.owner)
        assert not ((workload or {}).get("status") or {}).get("admission"), workload
        waited = "; ".join(dict.fromkeys(m for m in said if m))

        # applied's ClusterQueue lends one GPU of the flavor (its entry as the builder renders
        # it): the cohort now holds 2, and Kueue admits the gang.
        queue = client.get("kueue.x-k8s.io/v1beta1", "ClusterQueue", "applied")
        groups = copy.deepcopy(queue["spec"]["resourceGroups"])
        lent = stack_config.FlavorQuota.model_validate(LENT)
        groups[0]["flavors"].append({"name": FLAVOR, "resources": flavor_resources(lent)})
        client.merge_patch(
            "kueue.x-k8s.io/v1beta1",
            "ClusterQueue",
            "applied",
            {"spec": {"resourceGroups": groups}},
        )

        def bound() -> bool:
            driver.tick()
            if not run.admitted_queue:
                admitted = admission(workload_of(client, sub.namespace, sub.owner))
                if admitted is None:
                    return False
                run.admitted_queue, run.admitted_flavors = admitted
            run.pods = placements(driver, sub)
            return len(run.pods) == 2

        try:
            wait_for("the gang admitted once applied lends", bound, timeout=120, interval=0.5)
        except TimeoutError:
            workload = workload_of(client, sub.namespace, sub.owner)
            pytest.fail(f"not admitted after the loan: {(workload or {}).get('status')}")
        assert run.admitted_queue == "research" and run.admitted_flavors == (FLAVOR,)
        run.stand_in = f"waited ({waited}), then admitted when applied lent 1 GPU"
    finally:
        run.seconds = time.monotonic() - began
        out.workloads.append(run)
        remove(client, sub, [driver])
