"""Volcano's gates on capacity that scales from zero (components/analysis/volcano.py): the
model of proportion's enqueue/allocate arithmetic at v1.15.1, a violating and a passing case
per rule on the real stack configs, the rendered queues and PodGroups checked with the same
arithmetic (a test fails if the gate would hold a rendered job), and the CLI contract (exit 2
naming the key)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from components import catalog
from components.analysis import problems, volcano
from components.analysis.facts import build
from components.config import Problem, StackConfig
from components.config.load import namespace_values, parse
from synth.harness import SynthResult
from tests.analysis.judged import verdict_for, verdicts_for
from tests.conftest import config_error_test, stack_values

GPU = catalog.GPU_RESOURCE
EFA = catalog.EFA_RESOURCE


def _cfg(change: Callable[[dict[str, Any]], None] | None = None) -> StackConfig:
    values = namespace_values(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in stack_values("dev").items()}
    )
    values = copy.deepcopy(values)
    if change is not None:
        change(values)
    return parse(values)


def _a10g_only(
    teams: list[dict[str, Any]], jobs: list[dict[str, Any]], groups: list[dict[str, Any]]
) -> None:
    """Drop dev's L4 node-group quota and its job: Volcano guarantees count GPUs of every class
    (a queue's guarantee is per resource), so these cases keep the A10G figures they test. The
    L4 group stays, saying why no queue reaches it (the config check refuses it otherwise)."""
    for team in teams:
        team["quota"] = [q for q in team["quota"] if q["gpuClass"] != "l4-x1"]
    jobs[:] = [j for j in jobs if j["gpuClass"] != "l4-x1"]
    for group in groups:
        group["unqueuedReason"] = "kept out of these cases' queues: A10G figures only"


def _job(cfg: StackConfig, name: str) -> tuple[int, Any]:
    return next((i, j) for i, j in enumerate(cfg.training_jobs) if j.name == name)


def _no_guarantee(values: dict[str, Any]) -> None:
    for team in values["teams"]:
        team.setdefault("volcano", {})["guarantee"] = "none"


# --- proportion's arithmetic (pkg/scheduler/plugins/proportion/proportion.go) ------------------


def test_real_capability_without_nodes_or_guarantee_has_no_gpus() -> None:
    """The deadlock of volcano-sh/volcano#3910: no node, no guarantee -> 0 GPUs, whatever the
    queue's capability says."""
    real = volcano.real_capability({"cpu": 32, GPU: 4}, {}, {}, {})
    assert real[GPU] == 0 and real["cpu"] == 0
    assert volcano.short({GPU: 2}, real) == [f"{GPU} 2 > 0"]


def test_real_capability_is_the_guarantee_capped_by_capability() -> None:
    real = volcano.real_capability({"cpu": 32, GPU: 4}, {"cpu": 24, GPU: 6}, {}, {GPU: 12})
    assert real == {"cpu": 24, GPU: 4}


def test_real_capability_counts_what_exceeds_every_guarantee() -> None:
    # 16 GPUs exist, 12 guaranteed in all (6 of them ours): 4 spare + our 6.
    real = volcano.real_capability({}, {GPU: 6}, {GPU: 16}, {GPU: 12})
    assert real == {GPU: 10}
    # A resource missing from capability is not capped; one missing from the rest is 0.
    assert volcano.real_capability({GPU: 4}, {EFA: 8}, {}, {EFA: 8}) == {GPU: 0, EFA: 8}


# --- the platform's queues ------------------------------------------------------------------


def test_team_guarantee_is_the_nominal_quota() -> None:
    cfg = _cfg()
    team = cfg.teams[0]
    guarantee = volcano.queue_guarantee(team)
    assert guarantee[GPU] == sum(q.gpus for q in team.quota)
    assert guarantee["cpu"] == sum(q.cpu for q in team.quota)
    assert guarantee["memory"] == sum(q.memory_gib for q in team.quota)
    # A10G's smallest type (g5.xlarge) has no EFA: nothing to guarantee.
    assert EFA not in guarantee


def test_team_guarantee_of_an_efa_class_carries_its_devices() -> None:
    values = namespace_values(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in stack_values("prod").items()}
    )
    cfg = parse(values)
    pretrain = next(t for t in cfg.teams if t.name == "pretrain")
    h100 = sum(q.gpus for q in pretrain.quota if q.gpu_class == "h100-x8")
    # p5.48xlarge: 32 EFA devices for 8 GPUs.
    assert volcano.queue_guarantee(pretrain)[EFA] == h100 * 32 / 8


def test_dev_volcano_job_passes_enqueue_with_the_guarantee() -> None:
    cfg = _cfg()
    index, job = _job(cfg, "ds-zero2")
    verdict = verdict_for(cfg, index, job)
    assert verdict is not None and verdict.runnable, verdict
    assert "enqueue: PodGroup minResources" in verdict.admission
    assert "guarantee with no node up" in verdict.admission


def test_enqueue_without_guarantee_deadlocks_and_names_the_keys() -> None:
    cfg = _cfg(_no_guarantee)
    found = problems(cfg)
    keys = {p[0] for p in found}
    assert {"teams[0].volcano.guarantee", "teams[1].volcano.guarantee"} <= keys
    assert any("never gets a pod" in p[2] for p in found)
    index, job = _job(cfg, "ds-zero2")
    verdict = verdict_for(cfg, index, job)
    assert verdict is not None and not verdict.runnable
    key, value, reason = verdict.problems[0]
    assert (key, value) == (f"trainingJobs[{index}].scheduler", "volcano")
    assert "real capability is empty" in reason or f"{GPU} 2 > 0" in reason


def test_no_enqueue_and_no_guarantee_anywhere_runs() -> None:
    def change(values: dict[str, Any]) -> None:
        _no_guarantee(values)
        values.setdefault("scheduling", {})["volcanoEnqueue"] = False

    cfg = _cfg(change)
    assert problems(cfg) == []
    index, job = _job(cfg, "ds-zero2")
    verdict = verdict_for(cfg, index, job)
    assert verdict is not None and verdict.runnable
    assert "no enqueue action" in verdict.admission
    # No queue has a guarantee: the NCCL test shares all capacity in Volcano's default queue.
    assert volcano.validation_guarantee(cfg, build(cfg).nccl_host) == {}


def test_a_queue_without_guarantee_beside_guaranteed_ones_is_never_placed() -> None:
    def change(values: dict[str, Any]) -> None:
        values["teams"][1].setdefault("volcano", {})["guarantee"] = "none"
        values.setdefault("scheduling", {})["volcanoEnqueue"] = False

    cfg = _cfg(change)
    assert [p[0] for p in problems(cfg)] == ["teams[1].volcano.guarantee"]
    team = cfg.teams[1]
    _, job = _job(cfg, "ds-zero2")
    assert job.team == team.name
    path = volcano.admission(cfg, team, {GPU: 2, "cpu": 4, "memory": 24}, build(cfg).nccl_host)
    assert path.blockers and "allocate" in path.blockers[0]


def test_a_gang_over_the_guarantee_names_the_job_nodes() -> None:
    def bigger(values: dict[str, Any]) -> None:
        _a10g_only(values["teams"], values["trainingJobs"], values["nodeGroups"]["gpu"])
        job = next(j for j in values["trainingJobs"] if j["name"] == "ds-zero2")
        job["nodes"] = 4

    cfg = _cfg(bigger)
    index, _ = _job(cfg, "ds-zero2")
    found = [p for p in problems(cfg) if p[0] == f"trainingJobs[{index}].nodes"]
    assert found and f"{GPU} 4 > 3" in found[0][2] and "teams[1].quota" in found[0][2]

    def with_room(values: dict[str, Any]) -> None:
        bigger(values)
        # More nominal spot GPUs (the pool holds 4) make the gang fit the guarantee.
        values["teams"][1]["quota"][0]["gpus"] = 3
        values["teams"][0]["quota"][0]["gpus"] = 1

    passing = _cfg(with_room)
    assert not [p for p in problems(passing) if p[0] == f"trainingJobs[{index}].nodes"]


def test_a_volcano_refusal_names_the_value_to_change_and_the_blocker() -> None:
    """Without a guarantee the way out is Kueue or a guarantee (`scheduler`); over a guarantee
    it is fewer nodes (`nodes`, the job's count). Each ends with the blocker's own words."""
    from components.analysis.willrun import _volcano_admission

    def without(values: dict[str, Any]) -> None:
        values["teams"][1].setdefault("volcano", {})["guarantee"] = "none"
        values.setdefault("scheduling", {})["volcanoEnqueue"] = False

    cfg = _cfg(without)
    facts = build(cfg)
    (jf,) = (jf for jf in facts.jobs if jf.job.name == "ds-zero2")
    admission, found = _volcano_admission(facts, jf)
    (blocker,) = admission.path.blockers
    assert found == [
        Problem(
            f"{jf.key}.scheduler",
            "volcano",
            "kueue, or a Volcano queue with a guarantee (teams[1].volcano.guarantee: nominal): "
            + blocker,
        )
    ]

    def bigger(values: dict[str, Any]) -> None:
        _a10g_only(values["teams"], values["trainingJobs"], values["nodeGroups"]["gpu"])
        job = next(j for j in values["trainingJobs"] if j["name"] == "ds-zero2")
        job["nodes"] = 4

    facts = build(_cfg(bigger))
    (jf,) = (jf for jf in facts.jobs if jf.job.name == "ds-zero2")
    admission, found = _volcano_admission(facts, jf)
    assert admission.min_available == 4
    assert found and all(p.key == f"{jf.key}.nodes" and p.value == 4 for p in found)
    assert found[0].allowed.startswith(
        "a gang within team applied's Volcano queue guarantee (its nominal quota, teams[1].quota): "
    )


def test_a_queue_without_guarantee_is_told_what_it_lacks_at_each_gate() -> None:
    """With enqueue on, the PodGroup waits on the real capability (empty: every other queue's
    guarantee takes it all); with enqueue off, allocate never gives the gang what it asks.
    Each gate names every resource it is short of."""
    gang = {GPU: 2, "cpu": 4, "memory": 24}
    short = "cpu 4 > 0; memory 24Gi > 0Gi; nvidia.com/gpu 2 > 0"

    def without(values: dict[str, Any]) -> None:
        values["teams"][1].setdefault("volcano", {})["guarantee"] = "none"

    cfg = _cfg(without)
    assert cfg.scheduling.volcano_enqueue
    path = volcano.admission(cfg, cfg.teams[1], gang, build(cfg).nccl_host)
    assert path.blockers == (
        "Volcano's enqueue (proportion) keeps the PodGroup Pending: with no node up queue "
        f"applied's real capability is empty ({short}); no pod is created, so nothing scales up",
    )

    def no_enqueue(values: dict[str, Any]) -> None:
        without(values)
        values.setdefault("scheduling", {})["volcanoEnqueue"] = False

    cfg = _cfg(no_enqueue)
    path = volcano.admission(cfg, cfg.teams[1], gang, build(cfg).nccl_host)
    assert path.blockers == (
        "Volcano's allocate (proportion) never places the gang: once its nodes exist queue "
        f"applied deserves {short} (every other queue's guarantee comes first)",
    )


def test_resources_are_described_with_units_and_without_zeros() -> None:
    assert volcano.describe({GPU: 2, "memory": 24.0, "cpu": 4, "example.com/x": 0}) == (
        "cpu 4, memory 24Gi, nvidia.com/gpu 2"
    )


def test_guarantee_over_capability_is_refused_like_volcanos_webhook() -> None:
    def small_limits(values: dict[str, Any]) -> None:
        values["teams"][0]["limits"]["cpu"] = 20

    found = problems(_cfg(small_limits))
    assert ("teams[0].limits.cpu", 20) in [(p[0], p[1]) for p in found]
    assert not [p for p in problems(_cfg()) if p[0].startswith("teams[")]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_volcano_verdict_of_the_stacks_names_its_path(stack: str) -> None:
    values = namespace_values(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in stack_values(stack).items()}
    )
    volcano = [v for v in verdicts_for(parse(values)) if v.kind == "Volcano Job"]
    # Prod's own config declares no job (its teams' job stacks do): nothing to name there.
    assert len(volcano) == {"dev": 1, "prod": 0}[stack]
    for verdict in volcano:
        assert verdict.runnable and "-> Inqueue -> the job controller creates" in (
            verdict.admission
        )


# --- the rendered objects, judged with the same arithmetic ------------------------------------


def quantity(value: str) -> float:
    units = {"Gi": 1.0, "Mi": 1 / 1024, "Ki": 1 / 1024**2}
    for suffix, factor in units.items():
        if value.endswith(suffix):
            return float(value[: -len(suffix)]) * factor
    if value.endswith("m"):
        return float(value[:-1]) / 1000
    return float(value)


def resources(spec: dict[str, str] | None) -> dict[str, float]:
    return {name: quantity(str(amount)) for name, amount in (spec or {}).items()}


def min_resources(vcjob: dict[str, Any]) -> dict[str, float]:
    """calcPGMinResources (job_controller_actions.go): the requests of minAvailable pods."""
    total: dict[str, float] = {}
    left = vcjob["spec"]["minAvailable"]
    for task in vcjob["spec"]["tasks"]:
        take = min(left, task.get("minAvailable", task["replicas"]))
        left -= take
        for container in task["template"]["spec"]["containers"]:
            for name, amount in resources(container["resources"].get("requests")).items():
                total[name] = total.get(name, 0.0) + take * amount
    return total


def queues_of(result: SynthResult) -> dict[str, dict[str, Any]]:
    queues = [
        reg.inputs
        for reg in result.resources
        if reg.type == "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
    ]
    return {q["metadata"]["name"]: q for q in queues}


def volcano_jobs(result: SynthResult) -> list[dict[str, Any]]:
    return [
        reg.inputs
        for reg in result.resources
        if reg.type == "kubernetes:batch.volcano.sh/v1alpha1:Job"
    ]


def assert_enqueues(vcjob: dict[str, Any], queues: dict[str, dict[str, Any]]) -> None:
    queue = queues[vcjob["spec"]["queue"]]["spec"]
    guarantees: dict[str, float] = {}
    for other in queues.values():
        for name, amount in resources(other["spec"].get("guarantee", {}).get("resource")).items():
            guarantees[name] = guarantees.get(name, 0.0) + amount
    real = volcano.real_capability(
        resources(queue["capability"]),
        resources(queue.get("guarantee", {}).get("resource")),
        {},
        guarantees,
    )
    need = min_resources(vcjob)
    assert volcano.short(need, real) == [], (vcjob["metadata"]["name"], need, real)


def test_rendered_dev_volcano_job_fits_its_rendered_queue_with_no_node(dev: SynthResult) -> None:
    jobs = volcano_jobs(dev)
    assert [j["metadata"]["name"] for j in jobs] == ["ds-zero2"]
    queues = queues_of(dev)
    for vcjob in jobs:
        assert_enqueues(vcjob, queues)


def test_the_gate_check_fails_for_a_queue_without_guarantee(dev: SynthResult) -> None:
    """The rendered-object check is not vacuous: the queue as it was before (capability only)
    holds the job."""
    queues = copy.deepcopy(queues_of(dev))
    for queue in queues.values():
        queue["spec"].pop("guarantee", None)
    with pytest.raises(AssertionError):
        assert_enqueues(volcano_jobs(dev)[0], queues)


def test_rendered_queues_satisfy_volcanos_queue_webhook(
    dev: SynthResult, prod: SynthResult
) -> None:
    """guarantee <= deserved <= capability (validate_queue.go), and `up` waits until Open."""
    for result in (dev, prod):
        # One per team, and the NCCL test's where it runs (dev).
        assert set(queues_of(result)) >= {t.name for t in result.config.teams} != set()
        for queue in queues_of(result).values():
            spec = queue["spec"]
            guarantee = resources(spec["guarantee"]["resource"])
            deserved = resources(spec["deserved"])
            capability = resources(spec["capability"])
            assert guarantee and guarantee.keys() <= deserved.keys()
            assert all(deserved[k] >= v for k, v in guarantee.items())
            assert all(v <= capability.get(k, v) for k, v in deserved.items())
            annotations = queue["metadata"]["annotations"]
            assert annotations["pulumi.com/waitFor"] == "jsonpath={.status.state}=Open"


def test_nccl_podgroup_has_its_own_guaranteed_queue(dev: SynthResult) -> None:
    groups = [
        reg
        for reg in dev.resources
        if reg.type == "kubernetes:scheduling.volcano.sh/v1beta1:PodGroup"
    ]
    assert len(groups) == 1
    group = groups[0].inputs
    assert group["spec"]["queue"] == volcano.VALIDATION_QUEUE
    # No minResources: enqueue passes it before its nodes exist.
    assert "minResources" not in group["spec"]
    queue = queues_of(dev)[volcano.VALIDATION_QUEUE]["spec"]
    job = next(
        reg
        for reg in dev.resources
        if reg.type == "kubernetes:batch/v1:Job"
        and reg.inputs["metadata"]["name"] == group["metadata"]["name"]
    )
    pods = job.inputs["spec"]["parallelism"]
    per_pod = resources(
        job.inputs["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    )
    need = {k: v * pods for k, v in per_pod.items()}
    assert volcano.short(need, resources(queue["guarantee"]["resource"])) == []
    # Queue -> PodGroup -> Job: the webhook refuses a PodGroup for a queue not yet Open.
    queue_urn = next(
        r.urn
        for r in dev.resources
        if r.type == "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
        and r.inputs["metadata"]["name"] == volcano.VALIDATION_QUEUE
    )
    assert queue_urn in groups[0].dependencies
    assert groups[0].urn in job.dependencies


# --- the CLI contract -----------------------------------------------------------------------


def _dev_raw() -> dict[str, Any]:
    return copy.deepcopy(stack_values("dev"))


def _raw_no_guarantee(values: dict[str, Any]) -> None:
    for team in values["gpu-platform:teams"]:
        team.setdefault("volcano", {})["guarantee"] = "none"


def _raw_big_gang(values: dict[str, Any]) -> None:
    _a10g_only(
        values["gpu-platform:teams"],
        values["gpu-platform:trainingJobs"],
        values["gpu-platform:nodeGroups"]["gpu"],
    )
    job = next(j for j in values["gpu-platform:trainingJobs"] if j["name"] == "ds-zero2")
    job["nodes"] = 4


INVALID = [
    (
        "enqueue-without-guarantee",
        _raw_no_guarantee,
        "gpu-platform:teams[0].volcano.guarantee",
        "nominal",
    ),
    ("gang-over-guarantee", _raw_big_gang, "gpu-platform:trainingJobs[1].nodes", "guarantee"),
]

test_volcano_deadlocks_exit_2_naming_the_key = config_error_test(INVALID, _dev_raw)


def test_the_scheduler_runs_enqueue_only_when_asked() -> None:
    assert volcano.scheduler_actions(True) == "enqueue, allocate, backfill"
    assert volcano.scheduler_actions(False) == "allocate, backfill"


def test_quantities_put_memory_in_gib() -> None:
    assert volcano.quantities({"cpu": 4.0, "memory": 24.0, GPU: 2}) == {
        "cpu": "4",
        "memory": "24Gi",
        GPU: "2",
    }


def test_a_queue_without_guarantee_is_refused_in_words_that_depend_on_enqueue() -> None:
    def without(values: dict[str, Any]) -> None:
        values["teams"][1].setdefault("volcano", {})["guarantee"] = "none"

    cfg = _cfg(without)
    assert cfg.scheduling.volcano_enqueue
    assert volcano.check_queues(cfg) == [
        Problem(
            "teams[1].volcano.guarantee",
            "none",
            "nominal: with Volcano's enqueue action (scheduling.volcanoEnqueue) a queue without "
            "a guarantee admits no PodGroup until its GPUs exist, so a Volcano job on a pool "
            "that scales from zero never gets a pod",
        )
    ]

    def no_enqueue(values: dict[str, Any]) -> None:
        without(values)
        values.setdefault("scheduling", {})["volcanoEnqueue"] = False

    assert volcano.check_queues(_cfg(no_enqueue)) == [
        Problem(
            "teams[1].volcano.guarantee",
            "none",
            "nominal: a queue without a guarantee deserves only what exceeds the other queues' "
            "guarantees, so its gangs are never placed",
        )
    ]


def test_a_namespace_limit_under_the_guarantee_names_the_limit_and_the_quota() -> None:
    def small_limits(values: dict[str, Any]) -> None:
        values["teams"][0]["limits"]["cpu"] = 20

    cfg = _cfg(small_limits)
    wanted = volcano.queue_guarantee(cfg.teams[0])["cpu"]
    assert wanted > 20
    assert volcano.check_queues(cfg) == [
        Problem(
            "teams[0].limits.cpu",
            20,
            f"at least the nominal quota's {wanted:g} (the Volcano queue's guarantee and "
            "deserved; Volcano rejects deserved over capability)",
        )
    ]


def test_the_nccl_tests_guarantee_comes_before_a_queue_without_one() -> None:
    """Without a guarantee a queue deserves what exceeds every other guarantee, the validation
    queue's for the NCCL test (its 2 nodes x 1 GPU on dev) included: a 7-GPU gang deserves
    7 - (3 of the team queues + 2 of the NCCL test) = 2 GPUs, in the refusal's own words."""
    from dataclasses import replace

    from components.analysis.willrun import _volcano_admission

    def no_enqueue(values: dict[str, Any]) -> None:
        values["teams"][1].setdefault("volcano", {})["guarantee"] = "none"
        values.setdefault("scheduling", {})["volcanoEnqueue"] = False

    cfg = _cfg(no_enqueue)
    facts = build(cfg)
    assert facts.nccl_host is not None
    assert volcano.total_guarantee(cfg, facts.nccl_host)[GPU] == 5
    assert volcano.total_guarantee(cfg, None)[GPU] == 3
    path = volcano.admission(cfg, cfg.teams[1], {GPU: 7}, facts.nccl_host)
    assert path.blockers == (
        "Volcano's allocate (proportion) never places the gang: once its nodes exist queue "
        "applied deserves nvidia.com/gpu 7 > 2 (every other queue's guarantee comes first)",
    )
    (jf,) = (jf for jf in facts.jobs if jf.job.name == "ds-zero2")
    seven = replace(jf, job=jf.job.model_copy(update={"nodes": 7}))
    admission, _ = _volcano_admission(facts, seven)
    (blocker,) = admission.path.blockers
    assert "; nvidia.com/gpu 7 > 2 (every other queue's guarantee comes first)" in blocker
