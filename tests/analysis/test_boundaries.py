"""The edges of the analysis' rules: for each comparison that decides a Problem or a verdict, the
value that just passes and the one that just fails (issue #39).

A rule tested only far from its edge lets an off-by-one through: before this module an `>`
turned into `>=`, or a limit compared with one more than it is, survived the whole suite in the
namespace GPU limit of quota.py. Each test here calls the rule itself (pure: values in, problems
out), on the smallest input that sits exactly on the edge, then one step past it. They are fast
on purpose: they are also what the mutation run (tests/analysis/mutation-survivors.md,
`.ci/mutation`) leans on to kill mutants of components/analysis/.

Why this module is long: it is the one table of edges for every module of components/analysis/
(quota, capacity, fit, nodes, resources, placement, willrun, readiness, Volcano, NCCL, costs,
checkpoint, memory, jobs, efa_placement), kept together because the mutation run orders it first
(tests/conftest.py): one quick module that stops most mutants at their first failing test.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace
from typing import Any

import pytest

from components import catalog
from components import config as stack_config
from components.analysis import (
    checkpoint,
    costs,
    efa_placement,
    memory,
    nccl,
    nodes,
    readiness,
    resources,
    storage,
    volcano,
)
from components.analysis.capacity import gpu_capacity
from components.analysis.capacity import reservations as capacity_reservations
from components.analysis.facts import JobFacts, StackFacts, build
from components.analysis.fit import shortfall
from components.analysis.jobs import judge_training_jobs, validate_training_jobs
from components.analysis.nodes import Allocatable, NodeSource, tolerates
from components.analysis.placement import needs_single_zone
from components.analysis.quota import (
    check_reachable_sources,
    check_teams,
    job_quota_problems,
    unreachable_sources,
)
from components.analysis.resources import JobResources, efa_on, resources_on
from components.analysis.willrun import (
    Awaits,
    Claim,
    Gang,
    KueueAdmission,
    Memory,
    Placed,
    Provisioning,
    ScaleUp,
    ValidationAdmission,
    Verdict,
    VolcanoAdmission,
    Zone,
    _kueue_admission,
    _memory,
    _mixed_provisioners,
    _namespace_limits,
    _nccl_problems,
    _placement,
    _ready,
    _scale_and_gang,
    _smoke_verdicts,
    _storage,
    _zone,
    scale_up_path,
    scattered,
    scattered_text,
    training_verdict,
    validation_verdicts,
    verdicts,
)
from components.config import Problem
from tests.conftest import stack_values

# --- helpers -----------------------------------------------------------------------------------


def _parse(values: dict[str, Any]) -> stack_config.StackConfig:
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return stack_config.parse(stack_config.namespace_values(raw))


def _dev() -> StackFacts:
    """The dev stack's facts. Built anew on each call (about a millisecond): a cache kept across
    tests would hide a mutant of the rules that build them from the mutation run, whose
    workers fork from a process that already ran the tests on the unmutated code."""
    return build(_parse(stack_values("dev")))


def _jf(name: str = "ddp-smoke") -> JobFacts:
    """A dev job's facts (`ddp-smoke`: research, a10g-x1 on spot, 2 nodes, Kueue)."""
    return next(jf for jf in _dev().jobs if jf.job.name == name)


def _job(**fields: Any) -> stack_config.TrainingJobConfig:
    return stack_config.TrainingJobConfig.model_validate(
        {"name": "edge", "team": "team0", "gpuClass": "a10g-x1", "capacity": "on-demand", **fields}
    )


def _entry(gpus: int, *, capacity: str = "on-demand", **extra: Any) -> dict[str, Any]:
    return {
        "gpuClass": "a10g-x1",
        "capacityType": capacity,
        "gpus": gpus,
        "cpu": 64,
        "memoryGib": 256,
        **extra,
    }


def _team(
    quota: list[dict[str, Any]],
    *,
    gpus: int,
    cpu: int = 4096,
    memory_gib: int = 65536,
    index: int = 0,
) -> stack_config.TeamConfig:
    return stack_config.TeamConfig.model_validate(
        {
            "name": f"team{index}",
            "namespace": f"team-{index}",
            "group": f"gpu-platform:team-{index}",
            "datasetPrefix": f"team{index}",
            "quota": quota,
            "limits": {"gpus": gpus, "cpu": cpu, "memoryGib": memory_gib},
        }
    )


#: Another team of the one cohort, lending 64 GPUs of each a10g flavor and far more CPU and
#: memory than any job here asks: what a team may borrow in the quota tests below (Kueue lends
#: only what other ClusterQueues hold: quota.py `_entry_fit`).
LENDER = _team(
    [
        _entry(64, cpu=100_000, memoryGib=10_000_000),
        _entry(64, capacity="spot", cpu=100_000, memoryGib=10_000_000),
    ],
    gpus=128,
    index=9,
)

#: One pod's requests small enough that no CPU or memory bound is near.
POD = JobResources("g5.xlarge", 1.0, 1, 1, 0)
FLAVOR = ("a10g-x1", "on-demand")


def _limit_problems(problems: list[Any]) -> list[Any]:
    return [p for p in problems if "namespace limit" in p[2]]


# --- quota.py: the namespace GPU limit ------------------------------------------------------------


def test_a_job_with_exactly_the_namespace_gpu_limit_passes_one_gpu_less_fails() -> None:
    """The planted off-by-one of issue #39 (`gpus > limits.gpus + 1`) passed the whole suite:
    a 2-GPU job under a 1-GPU namespace limit must be refused, under a 2-GPU one admitted."""
    job = _job(nodes=2)
    assert job.world_size == 2
    capacity = {FLAVOR: 8}
    at = _team([_entry(1, borrowingLimitGpus=1)], gpus=2)
    assert job_quota_problems("trainingJobs[0]", job, at, capacity, POD, cohort=[at, LENDER]) == []
    below = _team([_entry(1, borrowingLimitGpus=1)], gpus=1)
    (problem,) = job_quota_problems(
        "trainingJobs[0]", job, below, capacity, POD, cohort=[below, LENDER]
    )
    assert problem.key == "trainingJobs[0].nodes"
    assert problem.value == 2
    assert "nodes x GPUs = 2 is over team team0's namespace limit (1 GPUs)" in problem.allowed


# --- quota.py: the pools' capacity --------------------------------------------------------------


def test_a_job_with_exactly_the_largest_pools_gpus_passes_one_gpu_more_fails() -> None:
    team = _team([_entry(4, borrowingLimitGpus=8)], gpus=16)
    job = _job(nodes=4)
    cohort = [team, LENDER]
    assert job_quota_problems("trainingJobs[0]", job, team, {FLAVOR: 4}, POD, cohort=cohort) == []
    (problem,) = job_quota_problems("trainingJobs[0]", job, team, {FLAVOR: 3}, POD, cohort=cohort)
    assert "nodes x GPUs = 4 is over the 3 GPUs the a10g-x1 on-demand pools provide" in (
        problem.allowed
    )


def test_either_capacity_is_measured_against_its_largest_pool() -> None:
    team = _team(
        [_entry(4, borrowingLimitGpus=0), _entry(4, capacity="spot", borrowingLimitGpus=0)],
        gpus=8,
    )
    job = _job(nodes=4, capacity="either")
    spot = ("a10g-x1", "spot")
    assert job_quota_problems("k", job, team, {FLAVOR: 3, spot: 4}, POD, cohort=[team]) == []
    (problem,) = job_quota_problems("k", job, team, {FLAVOR: 3, spot: 3}, POD, cohort=[team])
    assert "over the 3 GPUs the a10g-x1 spot/on-demand pools provide" in problem.allowed


# --- quota.py: nominal + borrowing, CPU and memory ---------------------------------------------


def _quota_misses(problems: list[Any]) -> list[Any]:
    return [p for p in problems if "fits no quota" in p.allowed]


def _fits_quota(
    team: stack_config.TeamConfig,
    job: Any,
    pod: JobResources = POD,
    cohort: tuple[stack_config.TeamConfig, ...] | None = None,
) -> bool:
    """Whether a quota of `team` fits `job`, with LENDER in its cohort unless `cohort` says
    otherwise (pools of 64 GPUs per flavor: never the bound here)."""
    capacity = {FLAVOR: 64, ("a10g-x1", "spot"): 64}
    found = job_quota_problems(
        "k", job, team, capacity, pod, cohort=(team, LENDER) if cohort is None else cohort
    )
    return not [p for p in found if "fits no quota" in p.allowed]


def test_a_job_of_exactly_nominal_plus_borrowing_gpus_fits_one_more_does_not() -> None:
    team = _team([_entry(2, borrowingLimitGpus=2)], gpus=16)
    assert _fits_quota(team, _job(nodes=4))
    assert not _fits_quota(team, _job(nodes=5))
    (problem,) = [
        p
        for p in job_quota_problems(
            "k", _job(nodes=5), team, {FLAVOR: 64}, POD, cohort=[team, LENDER]
        )
        if "fits no quota" in p.allowed
    ]
    assert (
        "a10g-x1-on-demand: 4 GPUs, 128 CPU, 512 GiB with what the cohort lends" in problem.allowed
    )
    assert "the job (5 GPUs, 5 CPU, 5 GiB)" in problem.allowed


def test_without_borrowing_the_nominal_quota_is_the_edge() -> None:
    team = _team([_entry(3, borrowingLimitGpus=0)], gpus=16)
    assert _fits_quota(team, _job(nodes=3))
    assert not _fits_quota(team, _job(nodes=4))


def test_unbounded_borrowing_reaches_what_the_cohort_lends_not_the_pool() -> None:
    """Kueue lends quota, not capacity (kueue v0.19.2 pkg/cache/scheduler/resource_node.go
    `potentialAvailable`): a ClusterQueue with 2 nominal GPUs and no borrowing limit reaches 2
    plus what the other teams' queues lend — however large the pool. Alone in its cohort, a
    6-GPU job over a 6-GPU pool never fits (the old model admitted it: it waited forever)."""
    team = _team([_entry(2)], gpus=16)
    job = _job(nodes=6)
    (alone,) = _quota_misses(job_quota_problems("k", job, team, {FLAVOR: 6}, POD, cohort=[team]))
    assert "a10g-x1-on-demand: 2 GPUs, 64 CPU, 256 GiB with what the cohort lends" in (
        alone.allowed
    )
    lends_four = _team([_entry(4)], gpus=4, index=1)
    assert not _quota_misses(
        job_quota_problems("k", job, team, {FLAVOR: 6}, POD, cohort=[team, lends_four])
    )
    lends_three = _team([_entry(3)], gpus=3, index=1)
    (short,) = _quota_misses(
        job_quota_problems("k", job, team, {FLAVOR: 6}, POD, cohort=[team, lends_three])
    )
    assert "a10g-x1-on-demand: 5 GPUs" in short.allowed


def test_a_lending_limit_bounds_what_a_queue_puts_into_the_cohort() -> None:
    """The other queue lends its nominal quota up to its lending limit (resource_node.go
    `accumulateFromChild`: SubtreeQuota - localQuota); another flavor's quota lends nothing."""
    team = _team([_entry(2)], gpus=16)
    job = _job(nodes=6)
    lends_four_of_eight = _team([_entry(8, lendingLimitGpus=4)], gpus=8, index=1)
    assert _fits_quota(team, job, cohort=(team, lends_four_of_eight))
    lends_three_of_eight = _team([_entry(8, lendingLimitGpus=3)], gpus=8, index=1)
    assert not _fits_quota(team, job, cohort=(team, lends_three_of_eight))
    other_flavor = _team([_entry(64, capacity="spot")], gpus=64, index=1)
    assert not _fits_quota(team, job, cohort=(team, other_flavor))


def test_a_borrowing_limit_caps_what_the_cohort_would_lend() -> None:
    team = _team([_entry(2, borrowingLimitGpus=1)], gpus=16)
    assert _fits_quota(team, _job(nodes=3))
    assert not _fits_quota(team, _job(nodes=4))
    assert not _fits_quota(team, _job(nodes=3), cohort=(team,))


def test_a_nominal_quota_over_a_smaller_pool_is_still_the_quotas_reach() -> None:
    # The pools' own rule reports the capacity; the quota's reach stays its nominal quota.
    team = _team([_entry(4)], gpus=16)
    cohort = [team]
    assert not _quota_misses(
        job_quota_problems("k", _job(nodes=4), team, {FLAVOR: 2}, POD, cohort=cohort)
    )
    (problem,) = _quota_misses(
        job_quota_problems("k", _job(nodes=5), team, {FLAVOR: 2}, POD, cohort=cohort)
    )
    assert "a10g-x1-on-demand: 4 GPUs" in problem.allowed


@pytest.mark.parametrize("field", ["cpu", "memoryGib"])
def test_a_gang_of_exactly_the_quotas_cpu_or_memory_fits_one_more_does_not(field: str) -> None:
    """CPU and memory scale with the GPUs borrowed: reach = nominal x (nominal + borrowing) /
    nominal. Two GPUs nominal, two borrowed: twice the entry's CPU and memory."""
    team = _team([_entry(2, borrowingLimitGpus=2, cpu=10, memoryGib=20)], gpus=16)
    job = _job(nodes=4)
    reach = {"cpu": 20, "memoryGib": 40}[field]
    per_pod = reach / 4
    at = JobResources("g5.xlarge", per_pod if field == "cpu" else 1.0, 1, 1, 0)
    if field == "memoryGib":
        at = JobResources("g5.xlarge", 1.0, int(per_pod), 1, 0)
    assert _fits_quota(team, job, at)
    over = (
        replace(at, cpu=at.cpu + 0.25)
        if field == "cpu"
        else replace(at, memory_gib=at.memory_gib + 1)
    )
    assert not _fits_quota(team, job, over)


def test_a_borrow_only_entry_bounds_gpus_and_leaves_cpu_and_memory_to_the_cohort() -> None:
    """No nominal GPUs: its ClusterQueue sets no CPU/memory borrowing limit (no GPU share to
    scale one by), so CPU and memory reach what the cohort lends; the GPUs its limit."""
    team = _team([_entry(0, borrowingLimitGpus=2, cpu=1, memoryGib=1)], gpus=2)
    huge = JobResources("g5.xlarge", 1000.0, 100000, 1, 0)
    assert _fits_quota(team, _job(nodes=2), huge)
    assert not _fits_quota(team, _job(nodes=3), huge)
    (problem,) = _quota_misses(
        job_quota_problems("k", _job(nodes=3), team, {FLAVOR: 64}, huge, cohort=[team, LENDER])
    )
    assert (
        "a10g-x1-on-demand: 2 GPUs, 100001 CPU, 10000001 GiB with what the cohort lends"
        in problem.allowed
    )
    assert not _fits_quota(team, _job(nodes=1), huge, cohort=(team,))


def test_a_job_fits_if_one_of_its_flavors_fits_and_names_each_that_does_not() -> None:
    team = _team(
        [_entry(1, borrowingLimitGpus=0), _entry(3, capacity="spot", borrowingLimitGpus=0)],
        gpus=8,
    )
    assert _fits_quota(team, _job(nodes=3, capacity="either"))
    assert not _fits_quota(team, _job(nodes=4, capacity="either"))
    only_spot = _team([_entry(3, capacity="spot", borrowingLimitGpus=0)], gpus=8)
    job = _job(nodes=4, capacity="either")
    found = job_quota_problems("k", job, only_spot, {FLAVOR: 9}, POD, cohort=[only_spot, LENDER])
    (problem,) = [p for p in found if "fits no quota" in p.allowed]
    assert "no quota for a10g-x1-on-demand" in problem.allowed
    assert "a10g-x1-spot: 3 GPUs" in problem.allowed


# --- quota.py: team quotas against the pools --------------------------------------------------


def _teams_cfg(*quotas: list[dict[str, Any]]) -> stack_config.StackConfig:
    cfg = _dev().cfg
    teams = [
        _team(quota, gpus=sum(q["gpus"] for q in quota), index=i) for i, quota in enumerate(quotas)
    ]
    return cfg.model_copy(update={"teams": teams})


def test_nominal_quotas_adding_up_to_exactly_the_capacity_pass_one_more_fails() -> None:
    capacity = {FLAVOR: 4}
    assert check_teams(_teams_cfg([_entry(3)], [_entry(1)]), capacity) == []
    (problem,) = check_teams(_teams_cfg([_entry(3)], [_entry(2)]), capacity)
    assert problem.key == "teams[1].quota[0].gpus"
    assert problem.value == 2
    assert "add up to 5 here, over the 4 GPUs its pools provide" in problem.allowed


def test_a_flavor_already_over_capacity_is_named_once_at_the_entry_that_crossed() -> None:
    capacity = {FLAVOR: 4}
    found = check_teams(_teams_cfg([_entry(4)], [_entry(1)], [_entry(1)]), capacity)
    assert [p.key for p in found] == ["teams[1].quota[0].gpus"]
    found = check_teams(_teams_cfg([_entry(5)], [_entry(1)]), capacity)
    assert [p.key for p in found] == ["teams[0].quota[0].gpus"]


def test_a_quota_for_a_class_or_capacity_no_pool_provides_is_named() -> None:
    cfg = _teams_cfg([_entry(1), _entry(1, capacity="spot")])
    found = check_teams(cfg, {FLAVOR: 4, ("l4-x1", "spot"): 1})
    assert [(p.key, p.value) for p in found] == [("teams[0].quota[1].capacityType", "spot")]
    assert found[0].allowed == "no spot pool provides a10g-x1"
    found = check_teams(cfg, {("l4-x1", "spot"): 1})
    assert [p.key for p in found] == ["teams[0].quota[0].gpuClass", "teams[0].quota[1].gpuClass"]
    assert found[0].allowed == "a GPU class the pools provide (l4-x1)"


def test_team_names_and_namespaces_are_unique() -> None:
    cfg = _dev().cfg
    first, second = cfg.teams[0], cfg.teams[1]
    clash = second.model_copy(update={"name": first.name, "namespace": first.namespace})
    found = check_teams(cfg.model_copy(update={"teams": [first, clash]}), _dev().capacity)
    assert [(p.key, p.allowed) for p in found] == [
        ("teams[1].name", "a unique name (teams[0] already uses it)"),
        ("teams[1].namespace", "a unique namespace (teams[0] already uses it)"),
    ]
    assert check_teams(cfg, _dev().capacity) == []


def test_a_repeated_team_name_is_named_with_its_value() -> None:
    cfg = _dev().cfg
    first, second = cfg.teams[0], cfg.teams[1]
    clash = second.model_copy(update={"name": first.name})
    found = check_teams(cfg.model_copy(update={"teams": [first, clash]}), _dev().capacity)
    assert found == [
        Problem("teams[1].name", first.name, "a unique name (teams[0] already uses it)")
    ]


def test_a_quota_entry_of_an_unknown_class_names_the_class_and_every_class_provided() -> None:
    cfg = _teams_cfg([_entry(1), _entry(1, gpuClass="h100-x8")])
    found = check_teams(cfg, {FLAVOR: 4, ("l4-x1", "spot"): 1})
    assert found == [
        Problem(
            "teams[0].quota[1].gpuClass",
            "h100-x8",
            "a GPU class the pools provide (a10g-x1, l4-x1)",
        )
    ]


def test_a_refused_quota_entry_does_not_end_the_teams_check() -> None:
    """Each entry is judged on its own: an unknown class or capacity type is named and the
    entries after it are still checked (here: one over the capacity)."""
    capacity = {FLAVOR: 4}
    cfg = _teams_cfg([_entry(1, gpuClass="h100-x8"), _entry(1, capacity="spot"), _entry(5)])
    found = check_teams(cfg, capacity)
    assert [p.key for p in found] == [
        "teams[0].quota[0].gpuClass",
        "teams[0].quota[1].capacityType",
        "teams[0].quota[2].gpus",
    ]


def test_a_job_over_the_pools_and_every_quota_names_its_nodes_and_each_flavors_reach() -> None:
    """Both refusals carry the job's `nodes` (the value to change) and the second one names
    every flavor the job may use, in the job's order (spot first for `either`)."""
    team = _team([_entry(1, borrowingLimitGpus=0)], gpus=16)
    job = _job(nodes=2, capacity="either")
    assert job_quota_problems("trainingJobs[3]", job, team, {FLAVOR: 1}, POD, cohort=[team]) == [
        Problem(
            "trainingJobs[3].nodes",
            2,
            "nodes x GPUs = 2 is over the 1 GPUs the a10g-x1 spot/on-demand pools provide",
        ),
        Problem(
            "trainingJobs[3].nodes",
            2,
            "the job (2 GPUs, 2 CPU, 2 GiB) fits no quota of team team0 (no quota for "
            "a10g-x1-spot; a10g-x1-on-demand: 1 GPUs, 64 CPU, 256 GiB with what the cohort "
            "lends)",
        ),
    ]


def test_a_flavor_without_a_quota_entry_does_not_end_the_search() -> None:
    """`either` tries spot first: no spot entry is skipped, and the on-demand one still fits."""
    team = _team([_entry(2, borrowingLimitGpus=0)], gpus=16)
    job = _job(nodes=2, capacity="either")
    assert job.capacity_types == ("spot", "on-demand")
    assert job_quota_problems("k", job, team, {FLAVOR: 8}, POD, cohort=[team]) == []


def test_a_flavor_no_pool_provides_has_no_capacity_to_borrow_or_run_on() -> None:
    """A flavor missing from the capacity counts 0 GPUs: a one-GPU job is over the pools, and a
    borrow-only entry with unbounded borrowing, alone in its cohort, reaches nothing there."""
    team = _team([_entry(0)], gpus=16)
    job = _job(nodes=1)
    assert job_quota_problems("k", job, team, {}, POD, cohort=[team]) == [
        Problem(
            "k.nodes", 1, "nodes x GPUs = 1 is over the 0 GPUs the a10g-x1 on-demand pools provide"
        ),
        Problem(
            "k.nodes",
            1,
            "the job (1 GPUs, 1 CPU, 1 GiB) fits no quota of team team0 "
            "(a10g-x1-on-demand: 0 GPUs, 64 CPU, 256 GiB with what the cohort lends)",
        ),
    ]


def test_an_unqueued_source_is_told_every_way_out() -> None:
    source = replace(_source("karpenter", {"g6.xlarge": NODE}), key="karpenter.pools[4]")
    assert check_reachable_sources([source]) == [
        Problem(
            "karpenter.pools[4].unqueuedReason",
            None,
            "src serves l4-x1 on-demand, which no team's quota lists, so no ClusterQueue offers "
            "flavor l4-x1-on-demand and no queued job can land there: add a quota entry for it "
            "to a team, remove the source, or say here what it is for",
        )
    ]
    assert check_reachable_sources([replace(source, unqueued_reason="validation only")]) == []


# --- capacity.py ---------------------------------------------------------------------------------


def _dev_values() -> dict[str, Any]:
    return stack_values("dev")


def _pool_limit(gpus: int) -> stack_config.StackConfig:
    """Dev with `kp-a10g-od`'s GPU limit at `gpus` (one GPU per g5 node)."""
    values = _dev_values()
    for pool in values["gpu-platform:karpenter"]["pools"]:
        if pool["name"] == "kp-a10g-od":
            pool["limits"]["gpus"] = gpus
    return _parse(values)


def test_a_pool_limit_counts_whole_nodes_only() -> None:
    """Karpenter launches no node past its limit: an 8-GPU node under a 15-GPU limit is one node
    (8 GPUs), at 16 two (16 GPUs)."""
    values = stack_values("prod")
    for pool in values["gpu-platform:karpenter"]["pools"]:
        if pool["name"] == "kp-h100-reserved":
            pool["limits"]["gpus"] = 15
    cfg = _parse(values)
    assert gpu_capacity(cfg)[("h100-x8", "reserved")] == 8
    (source,) = [s for s in build(cfg).sources if s.name == "kp-h100-reserved"]
    assert source.max_nodes == 1
    for pool in values["gpu-platform:karpenter"]["pools"]:
        if pool["name"] == "kp-h100-reserved":
            pool["limits"]["gpus"] = 16
    cfg = _parse(values)
    assert gpu_capacity(cfg)[("h100-x8", "reserved")] == 16
    (source,) = [s for s in build(cfg).sources if s.name == "kp-h100-reserved"]
    assert source.max_nodes == 2


def test_a_managed_group_counts_max_size_nodes_times_its_gpus() -> None:
    cfg = _dev().cfg
    (group,) = cfg.node_groups.gpu
    assert cfg.autoscaled(group)
    assert gpu_capacity(cfg)[(group.gpu_class, group.flavor_capacity_type)] == (
        group.max_size * group.gpus_per_node
    )


# --- fit.py and nodes.py -------------------------------------------------------------------------


def _source(kind: Any, allocatable: dict[str, Allocatable], **extra: Any) -> NodeSource:
    return NodeSource(
        name="src",
        kind=kind,
        key="test.src",
        gpu_class="l4-x1",
        capacity_type="on-demand",
        instance_types=tuple(allocatable),
        labels={},
        taints=(),
        zones=1,
        allocatable=allocatable,
        scaler="karpenter" if kind == "karpenter" else "autoscaler",
        max_nodes=1,
        limit_text="",
        **extra,
    )


NODE = Allocatable(cpu=4.0, memory_gib=16, gpus=1, efa=2)


@pytest.mark.parametrize("kind", ["karpenter", "managed"])
@pytest.mark.parametrize(
    ("resource", "exact"),
    [
        ("cpu", 4.0),
        ("memory", 16.0),
        (catalog.GPU_RESOURCE, 1),
        (catalog.EFA_RESOURCE, 2),
    ],
)
def test_a_pod_of_exactly_a_nodes_allocatable_fits_a_bit_more_does_not(
    kind: str, resource: str, exact: float
) -> None:
    source = _source(kind, {"g6.xlarge": NODE})
    assert shortfall(source, {resource: exact}) is None
    over = exact + (0.5 if resource == "cpu" else 1)
    assert shortfall(source, {resource: over}) == (f"{resource} {over:g} > {exact:g} on g6.xlarge")


def test_a_resource_a_node_does_not_offer_counts_as_zero() -> None:
    source = _source("karpenter", {"g6.xlarge": NODE})
    assert shortfall(source, {"example.com/fpga": 0}) is None
    assert shortfall(source, {"example.com/fpga": 1}) == "example.com/fpga 1 > 0 on g6.xlarge"


def test_a_managed_group_needs_every_type_to_fit_karpenter_one() -> None:
    small = Allocatable(cpu=2.0, memory_gib=8, gpus=1, efa=0)
    both = {"g6.xlarge": small, "g6.2xlarge": NODE}
    pod = {"cpu": 3.0}
    assert shortfall(_source("karpenter", both), pod) is None
    assert shortfall(_source("managed", both), pod) == "cpu 3 > 2 on g6.xlarge"
    # Karpenter with no type that fits names every type's miss.
    assert shortfall(_source("karpenter", both), {"cpu": 5.0}) == (
        "cpu 5 > 2 on g6.xlarge; cpu 5 > 4 on g6.2xlarge"
    )


TAINT = {"key": "example.com/dedicated", "value": "a", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "tolerated"),
    [
        ({"key": "example.com/dedicated", "operator": "Equal", "value": "a"}, True),
        ({"key": "example.com/dedicated", "value": "a"}, True),  # Equal is the default
        ({"key": "example.com/dedicated", "operator": "Equal", "value": "b"}, False),
        ({"key": "example.com/dedicated", "operator": "Exists"}, True),
        ({"key": "example.com/other", "operator": "Exists"}, False),
        ({"operator": "Exists"}, True),  # an empty key tolerates every taint
        ({"key": "", "operator": "Exists"}, True),
        ({"key": "example.com/dedicated", "operator": "Exists", "effect": "NoSchedule"}, True),
        ({"key": "example.com/dedicated", "operator": "Exists", "effect": ""}, True),
        ({"key": "example.com/dedicated", "operator": "Exists", "effect": "NoExecute"}, False),
    ],
)
def test_toleration_matching(toleration: dict[str, str], tolerated: bool) -> None:
    assert tolerates(TAINT, (toleration,)) is tolerated
    # One matching toleration among others is enough; none at all tolerates nothing.
    assert tolerates(TAINT, ({"key": "x", "operator": "Exists"}, toleration)) is tolerated
    assert tolerates(TAINT, ()) is False


def test_a_toleration_of_another_effect_does_not_stop_the_search() -> None:
    """A toleration whose key matches but whose effect does not is skipped, not the end of the
    list: one further on may still tolerate the taint."""
    other_effect = {"key": "example.com/dedicated", "operator": "Exists", "effect": "NoExecute"}
    match = {"key": "example.com/dedicated", "operator": "Exists", "effect": "NoSchedule"}
    assert tolerates(TAINT, (other_effect, match)) is True
    assert tolerates(TAINT, (other_effect,)) is False


# --- resources.py and placement.py ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("vcpu", "cpu"), [(1, 1.0), (2, 1.0), (4, 2.0), (25, 23.0), (26, 23.0), (192, 183.0)]
)
def test_default_cpu_leaves_four_percent_and_a_core(vcpu: int, cpu: float) -> None:
    assert resources.default_cpu(vcpu) == cpu


@pytest.mark.parametrize(
    ("memory_gib", "allocatable"), [(1, 1), (3, 1), (4, 1), (16, 12), (20, 16), (2048, 1841)]
)
def test_default_memory_leaves_ten_percent_and_two_gib(memory_gib: int, allocatable: int) -> None:
    assert resources.default_memory_gib(memory_gib) == allocatable


def test_shm_is_a_quarter_of_memory_between_one_and_64_gib() -> None:
    assert resources_on(_job(memoryGib=7), ["g5.xlarge"]).shm_gib == 1
    assert resources_on(_job(memoryGib=8), ["g5.xlarge"]).shm_gib == 2
    assert resources_on(_job(memoryGib=256), ["g5.xlarge"]).shm_gib == 64
    assert resources_on(_job(memoryGib=260), ["g5.xlarge"]).shm_gib == 64
    assert resources_on(_job(memoryGib=252), ["g5.xlarge"]).shm_gib == 63
    assert resources_on(_job(memoryGib=8, shmGib=5), ["g5.xlarge"]).shm_gib == 5


def test_a_pod_gets_the_least_of_every_type_it_may_land_on() -> None:
    got = resources_on(_job(gpuClass="h200-x8", nodes=2), ["p5e.48xlarge", "p5en.48xlarge"])
    assert got.efa_devices == min(
        catalog.instance(t).efa_devices for t in ("p5e.48xlarge", "p5en.48xlarge")
    )
    small = resources_on(_job(), ["g5.xlarge", "g5.2xlarge"])
    assert small.instance_type == "g5.xlarge"
    assert small.cpu == resources.default_cpu(catalog.instance("g5.xlarge").vcpu)
    assert small.memory_gib == resources.default_memory_gib(
        catalog.instance("g5.xlarge").memory_gib
    )
    # No type known at all: the job's own figures, else one of each.
    bare = resources_on(_job(gpuClass="no-such-x1"), [])
    assert bare == JobResources("", 1.0, 1, 1, 0)


def test_efa_is_requested_from_two_nodes_on_a_type_with_efa() -> None:
    assert efa_on(_job(nodes=2), 1) is True
    assert efa_on(_job(nodes=1), 1) is False
    assert efa_on(_job(nodes=2), 0) is False
    assert efa_on(_job(nodes=1, efaDevices=1), 0) is True
    assert efa_on(_job(nodes=2, efa=False), 4) is False
    assert efa_on(_job(nodes=1, efa=True), 0) is True


def test_the_node_affinity_a_pod_template_gets_word_for_word() -> None:
    """Required: the class, the capacity types and (a fleet job) the regions; `either` also
    prefers spot. What the API server reads, so every key and value is pinned."""
    from components.analysis.placement import node_affinity

    job = _job(capacity="either", regions=["us-east-1", "us-west-2"])
    assert node_affinity(job) == {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "gpu-platform.io/gpu-class",
                            "operator": "In",
                            "values": ["a10g-x1"],
                        },
                        {
                            "key": "gpu-platform.io/capacity-type",
                            "operator": "In",
                            "values": ["spot", "on-demand"],
                        },
                        {
                            "key": "topology.kubernetes.io/region",
                            "operator": "In",
                            "values": ["us-east-1", "us-west-2"],
                        },
                    ]
                }
            ]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "preference": {
                    "matchExpressions": [
                        {
                            "key": "gpu-platform.io/capacity-type",
                            "operator": "In",
                            "values": ["spot"],
                        }
                    ]
                },
            }
        ],
    }
    # One capacity type and no regions: neither the preference nor the region term.
    plain = node_affinity(_job(capacity="spot"))
    assert list(plain) == ["requiredDuringSchedulingIgnoredDuringExecution"]
    (term,) = plain["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [e["key"] for e in term["matchExpressions"]] == [
        "gpu-platform.io/gpu-class",
        "gpu-platform.io/capacity-type",
    ]


def test_a_single_zone_job_is_pinned_to_the_fsx_subnet_else_the_first_zone() -> None:
    from components.analysis.placement import zone_pin_index

    cfg = _dev().cfg
    job = _job(nodes=2)

    def with_rwx(kind: str, index: int | None) -> stack_config.StackConfig:
        rwx = cfg.storage.rwx.model_copy(update={"type": kind, "subnet_index": index})
        return cfg.model_copy(update={"storage": cfg.storage.model_copy(update={"rwx": rwx})})

    assert zone_pin_index(with_rwx("fsx", 1), job, 1) == 1
    assert zone_pin_index(with_rwx("efs", None), job, 1) == 0  # EFS spans every zone
    assert zone_pin_index(with_rwx("fsx", 1), _job(nodes=1), 1) is None  # may span zones


_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


@pytest.mark.parametrize(
    "affinity",
    [
        {},
        {"nodeAffinity": {}},
        {"nodeAffinity": {_REQUIRED: {}}},
        {"nodeAffinity": {_REQUIRED: {"nodeSelectorTerms": [{}]}}},
    ],
)
def test_a_pod_without_node_affinity_reads_back_as_requiring_nothing(
    affinity: dict[str, Any],
) -> None:
    from components.analysis.placement import placement_of

    where = placement_of(affinity, [])
    assert (where.required, where.tolerations, where.single_zone) == ({}, (), False)


def test_an_efa_gang_keeps_to_the_zone_of_its_own_pods() -> None:
    """The single-zone term selects the job's own pods by the training-job label."""
    from components.analysis.placement import pod_affinity

    job = _job(nodes=2)
    assert pod_affinity(job, 1)["podAffinity"] == {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"gpu-platform.io/training-job": "edge"}},
                "topologyKey": "topology.kubernetes.io/zone",
            }
        ]
    }
    assert "podAffinity" not in pod_affinity(job, 0)


def test_the_nccl_host_needs_validation_and_its_nccl_test_both_on() -> None:
    facts = _dev()
    assert nccl.nccl_host(facts.cfg, facts.sources) is not None
    validation = facts.cfg.validation
    for off in ({"enabled": False}, {"nccl_test": False}):
        cfg = facts.cfg.model_copy(update={"validation": validation.model_copy(update=off)})
        assert nccl.nccl_host(cfg, facts.sources) is None, off


def test_the_single_zone_term_word_for_word() -> None:
    from components.analysis.placement import single_zone_affinity

    selector = {"matchLabels": {"job": "edge"}}
    assert single_zone_affinity(selector) == {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": "topology.kubernetes.io/zone"}
        ]
    }


def test_each_pod_template_gets_its_own_copy_of_the_affinity_and_tolerations() -> None:
    """A template that changes its affinity (however deep) or tolerations changes no other
    template's, nor the Placement they came from."""
    where = _jf().placement
    assert where.affinity
    first = where.pod_affinity()
    assert first == dict(where.affinity)
    first["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = "changed"
    assert where.pod_affinity() == dict(where.affinity) != first
    tolerations = where.pod_tolerations()
    assert tolerations == [dict(t) for t in where.tolerations] != []
    tolerations[0]["key"] = "changed"
    assert where.pod_tolerations()[0]["key"] != "changed"


def test_a_job_is_kept_in_one_zone_from_two_nodes_over_efa() -> None:
    assert needs_single_zone(_job(nodes=2), 1) is True
    assert needs_single_zone(_job(nodes=1), 1) is False
    assert needs_single_zone(_job(nodes=2), 0) is False
    assert needs_single_zone(_job(nodes=2, zones="single"), 0) is True
    assert needs_single_zone(_job(nodes=2, zones="any"), 1) is False
    assert needs_single_zone(_job(nodes=1, zones="single"), 0) is False


# --- willrun.py: namespace CPU and memory, gang, memory, storage, zone -------------------------


def _with_limits(jf: JobFacts, **limits: int) -> JobFacts:
    team = jf.team.model_copy(update={"limits": jf.team.limits.model_copy(update=limits)})
    return replace(jf, team=team)


@pytest.mark.parametrize(("resource", "field"), [("cpu", "cpu"), ("memory", "memory_gib")])
def test_a_gang_of_exactly_the_namespace_cpu_or_memory_passes_a_bit_more_fails(
    resource: str, field: str
) -> None:
    jf = _with_limits(_jf(), **{field: 10})
    assert jf.job.nodes == 2
    requests = {"cpu": 1.0, "memory": 1.0}
    assert _namespace_limits(jf, {**requests, resource: 5.0}) == []
    (problem,) = _namespace_limits(jf, {**requests, resource: 5.5})
    what = "CPU" if resource == "cpu" else "memory GiB"
    assert problem.key == f"{jf.key}.nodes"
    assert f"the gang requests 11 {what}, over team research's namespace limit of 10" in (
        problem.allowed
    )
    assert problem.allowed.endswith("(ResourceQuota)")
    volcano_jf = replace(jf, job=jf.job.model_copy(update={"scheduler": "volcano"}))
    (problem,) = _namespace_limits(volcano_jf, {**requests, resource: 5.5})
    assert problem.allowed.endswith("(ResourceQuota and Volcano queue capability)")


def _sized(source: NodeSource, max_nodes: int, capacity: str = "spot") -> NodeSource:
    return replace(source, max_nodes=max_nodes, capacity_type=capacity, name=f"{source.name}-x")


def test_a_gang_of_exactly_the_nodes_its_sources_reach_passes_one_more_fails() -> None:
    jf = _jf()
    assert jf.job.nodes == 2 and jf.job.capacity_types == ("spot",)
    (source,) = jf.fit.fitting
    gang, found = _scale_and_gang(jf, [_sized(source, 2)])
    assert found == [] and gang.reach == (("spot", 2),)
    # Two sources of the job's capacity type add up.
    assert _scale_and_gang(jf, [_sized(source, 1), _sized(source, 1)])[1] == []
    gang, (problem,) = _scale_and_gang(jf, [_sized(source, 1)])
    assert problem.key == f"{jf.key}.nodes"
    assert "a gang of 2 pods needs 2 nodes at once; the a10g-x1 sources reach at most 1" in (
        problem.allowed
    )
    # Another capacity type's nodes do not count towards this one's.
    assert _scale_and_gang(jf, [_sized(source, 1), _sized(source, 4, "on-demand")])[1]


def test_a_source_that_can_hold_no_node_brings_none() -> None:
    jf = _jf()
    (source,) = jf.fit.fitting
    _, (problem,) = _scale_and_gang(jf, [_sized(source, 0)])
    assert problem.key == f"{jf.key}.gpuClass"
    assert problem.allowed.startswith("nothing brings a node: ")
    assert _scale_and_gang(jf, []) == (_scale_and_gang(jf, [])[0], [])


def test_model_states_of_exactly_one_gpus_memory_pass_more_fail() -> None:
    jf = _jf()
    row = catalog.instance(jf.resources.instance_type)
    per_gpu = row.gpu_memory_mib / 1024  # a one-GPU type
    assert row.gpus == 1
    found, problems = _memory(replace(jf, model_state_gib=per_gpu))
    assert problems == [] and found is not None and found.per_gpu_gib == per_gpu
    _, (problem,) = _memory(replace(jf, model_state_gib=per_gpu + 0.01))
    assert problem.key == f"{jf.key}.modelParameters"
    assert _memory(replace(jf, model_state_gib=None)) == (None, [])


def test_a_checkpoint_claim_must_be_read_write_many_from_two_nodes() -> None:
    jf = _jf()
    one = replace(jf, job=jf.job.model_copy(update={"nodes": 1}))
    assert _storage(_dev(), one, "ReadWriteOnce")[1] == []
    claim, (problem,) = _storage(_dev(), jf, "ReadWriteOnce")
    assert claim is not None and claim.claim == "research-checkpoints"
    assert problem.key == f"{jf.key}.checkpoint.volume"
    assert _storage(_dev(), jf, "ReadWriteMany")[1] == []


def test_a_group_spans_zones_from_two_and_only_when_the_autoscaler_sizes_it() -> None:
    group = _source("managed", {"g6.xlarge": NODE})
    assert scattered([replace(group, zones=1)]) == []
    assert scattered([replace(group, zones=2)]) == [replace(group, zones=2)]
    pool = replace(_source("karpenter", {"g6.xlarge": NODE}), zones=3)
    assert scattered([pool]) == []


def test_a_single_zone_gang_of_one_pod_is_not_stranded_by_a_scattered_group() -> None:
    jf = _jf()
    group = replace(_source("managed", {"g6.xlarge": NODE}), zones=2)
    where = replace(jf.placement, single_zone=True)
    placed = replace(_placed(jf), fitting=(group,))
    _, found = _zone(_dev(), jf, where=where, placed=placed)
    assert [p.key for p in found] == [f"{jf.key}.zones"]
    one = replace(jf, job=jf.job.model_copy(update={"nodes": 1}))
    assert _zone(_dev(), one, where=where, placed=placed)[1] == []


def _placed(jf: JobFacts) -> Placed:
    return Placed(jf.fit.candidates, jf.fit.fitting, jf.resources.efa_devices)


# --- willrun.py: each refusal in the words the report prints --------------------------------
# The rules above are pinned at their edges; these pin what a refusal says — the key path, the
# value to change and the allowed text, which names the sources and figures involved.


def _job_of(jf: JobFacts, **changes: Any) -> JobFacts:
    return replace(jf, job=jf.job.model_copy(update=changes))


def test_a_gang_over_the_namespace_limit_is_refused_at_its_nodes_count() -> None:
    jf = _with_limits(_jf(), cpu=10)
    assert _namespace_limits(jf, {"cpu": 5.5, "memory": 1.0}) == [
        Problem(
            f"{jf.key}.nodes",
            2,
            "the gang requests 11 CPU, over team research's namespace limit of 10 (ResourceQuota)",
        )
    ]


def test_sources_that_bring_no_node_are_each_named_with_their_limit() -> None:
    jf = _jf()
    (source,) = jf.fit.fitting
    a = replace(_sized(source, 0), name="a", key="karpenter.pools[0]", limit_text="limits.gpus 0")
    b = replace(a, name="b", key="nodeGroups.gpu[1]", limit_text="desiredSize 0, fixed")
    _, found = _scale_and_gang(jf, [a, b])
    assert found == [
        Problem(
            f"{jf.key}.gpuClass",
            "a10g-x1",
            "nothing brings a node: a (karpenter.pools[0]) limits.gpus 0, b (nodeGroups.gpu[1]) "
            "desiredSize 0, fixed; give the class a Karpenter pool or a managed group with "
            "desiredSize > 0",
        )
    ]


def test_a_gang_over_what_its_sources_reach_names_each_ones_scale_up() -> None:
    jf = _jf()
    (source,) = jf.fit.fitting
    a = replace(_sized(source, 1), name="a", limit_text="limits.gpus 1", scale_up_seconds=250)
    b = replace(a, name="b", max_nodes=0, limit_text="limits.gpus 0")
    _, found = _scale_and_gang(jf, [a, b])
    assert found == [
        Problem(
            f"{jf.key}.nodes",
            2,
            "a gang of 2 pods needs 2 nodes at once; the a10g-x1 sources reach at most 1 "
            "(Karpenter NodePool `a` launches nodes, ≈ 250 s, up to 1 nodes (limits.gpus 1); "
            "Karpenter NodePool `b` launches nodes, ≈ 250 s, up to 0 nodes (limits.gpus 0))",
        )
    ]


def test_model_states_over_a_gpu_name_the_parameters_mode_and_gpu() -> None:
    jf = _job_of(_jf(), model_parameters=7_000_000_000)
    _, found = _memory(replace(jf, model_state_gib=100.0))
    assert found == [
        Problem(
            f"{jf.key}.modelParameters",
            7_000_000_000,
            "ddp: parameters + gradients + optimizer state need 100.0 GiB per rank, over the "
            "22.3516 GiB of a a10g GPU (before activations); shard (fsdp, ZeRO-3), offload, or "
            "add ranks",
        )
    ]


def test_a_shared_checkpoint_claim_not_read_write_many_names_claim_and_mode() -> None:
    jf = _jf()
    claim, found = _storage(_dev(), jf, "ReadWriteOnce")
    rwx = _dev().cfg.storage.rwx.type
    assert claim == Claim(
        "team-research", "research-checkpoints", "ReadWriteOnce", storage.RWX_STORAGE_CLASS[rwx]
    )
    assert found == [
        Problem(
            f"{jf.key}.checkpoint.volume",
            True,
            "pods on 2 nodes share research-checkpoints, which is ReadWriteOnce: it must be "
            "ReadWriteMany",
        )
    ]


def _fit(candidates: tuple[NodeSource, ...], **misses: str | None) -> Any:
    from components.analysis.fit import SourceFit

    return SourceFit(candidates, {s.name: misses.get(s.name) for s in candidates})


def test_a_pod_no_source_admits_names_the_affinity_it_asked_for() -> None:
    jf = _jf()
    where = replace(jf.placement, required={"b": ("x", "y"), "a": ("z",)})
    placed, found = _placement(jf, where=where, fit=_fit(()))
    assert found == [
        Problem(
            f"{jf.key}.gpuClass",
            "a10g-x1",
            "no node source matches the pod's node affinity (a in z, b in x/y) and taints",
        )
    ]
    assert placed == Placed((), (), 0)


def test_a_pod_that_fits_no_candidate_names_each_ones_miss() -> None:
    jf = _jf()
    one, two = (replace(_source("karpenter", {"g6.xlarge": NODE}), name=n) for n in "ab")
    fit = _fit((one, two), a="cpu 3 > 2 on g6.xlarge", b="memory 9 > 8 on g6.xlarge")
    placed, found = _placement(jf, where=jf.placement, fit=fit)
    assert found == [
        Problem(
            f"{jf.key}.gpuClass",
            "a10g-x1",
            "the pod fits no matching node source: a: cpu 3 > 2 on g6.xlarge; "
            "b: memory 9 > 8 on g6.xlarge",
        )
    ]
    assert (placed.candidates, placed.fitting) == ((one, two), ())


def test_efa_asked_of_sources_without_enough_devices_is_refused_at_efa() -> None:
    """NODE offers 2 EFA devices: a pod asking for 3 is short of EFA on every candidate (the
    refusal names `efa`), one asking for 2 misses something else (it names the class)."""
    jf = _job_of(_jf(), efa=True)
    source = replace(_source("karpenter", {"g6.xlarge": NODE}), name="a")
    fit = _fit((source,), a="vpc.amazonaws.com/efa 3 > 2 on g6.xlarge")
    asking = replace(jf, resources=replace(jf.resources, efa_devices=3))
    placed, found = _placement(asking, where=jf.placement, fit=fit)
    assert found == [
        Problem(
            f"{jf.key}.efa",
            True,
            "EFA requested (3 per pod) but no matching node source provides EFA devices (only "
            "managed groups and Karpenter pools of EFA-capable types do): a: "
            "vpc.amazonaws.com/efa 3 > 2 on g6.xlarge",
        )
    ]
    assert placed.efa_devices == 3
    enough = replace(jf, resources=replace(jf.resources, efa_devices=2))
    _, (problem,) = _placement(enough, where=jf.placement, fit=_fit((source,), a="cpu"))
    assert (problem.key, problem.value) == (f"{jf.key}.gpuClass", "a10g-x1")


def test_pods_outside_kueue_both_provisioners_serve_name_every_source() -> None:
    jf = _job_of(_jf(), scheduler="volcano")
    pools = [replace(_source("karpenter", {"g6.xlarge": NODE}), name=n) for n in ("p1", "p2")]
    groups = [replace(_source("managed", {"g6.xlarge": NODE}), name=n) for n in ("g1", "g2")]
    assert _mixed_provisioners(jf, [*pools, *groups]) == [
        Problem(
            f"{jf.key}.capacity",
            jf.job.capacity,
            "capacity one provisioner serves: the pods match managed node groups (g1, g2) and "
            "Karpenter NodePools (p1, p2); the cluster-autoscaler and Karpenter would each "
            "bring a node for the same pending pod (or queue it with Kueue: each flavor selects "
            "one)",
        )
    ]


def test_resources_kueue_neither_covers_nor_excludes_are_named_with_the_queues_cover() -> None:
    facts, jf = _dev(), _job_of(_jf(), efa=True)
    requests = {"cpu": 1.0, "example.com/a": 1.0, catalog.EFA_RESOURCE: 1.0}
    _, found = _kueue_admission(
        facts, jf, requests=requests, over_quota=False, covered=("cpu", "memory"), excluded=()
    )
    assert found == [
        Problem(
            f"{jf.key}.efa",
            True,
            "Kueue would keep the job pending: it requests example.com/a, "
            f"{catalog.EFA_RESOURCE}, which ClusterQueue research does not cover (cpu, memory) "
            "and the Kueue config does not exclude (resources.excludeResourcePrefixes)",
        )
    ]
    # Without EFA among them the refusal is the job's own.
    _, (problem,) = _kueue_admission(
        facts, jf, requests={"example.com/a": 1.0}, over_quota=False, covered=(), excluded=()
    )
    assert problem.key == jf.key


def _efa(jf: JobFacts, pin: int | None, efa: int = 1) -> JobFacts:
    return replace(jf, zone_pin=pin, resources=replace(jf.resources, efa_devices=efa))


SPREAD = (
    "a multi-node EFA job must keep its pods in one availability zone (EFA does not cross "
    "zones); the pod template does not confine them"
)


def test_pods_not_confined_to_one_zone_are_refused_when_pinned_or_multi_node_efa() -> None:
    jf = _job_of(_jf(), zones="any")
    assert jf.job.nodes == 2
    spread = replace(jf.placement, single_zone=False)
    placed = _placed(jf)
    # Pinned to a zone (EFA or not, one node or two), or EFA over two nodes: one refusal.
    for case in (_efa(jf, 0, efa=0), _efa(_job_of(jf, nodes=1), 0), _efa(jf, None)):
        _, found = _zone(_dev(), case, where=spread, placed=placed)
        assert found == [Problem(f"{jf.key}.zones", "any", SPREAD)], case
    # EFA on one node, or two nodes over TCP: nothing to keep together.
    for case in (_efa(_job_of(jf, nodes=1), None), _efa(jf, None, efa=0)):
        assert _zone(_dev(), case, where=spread, placed=placed)[1] == []


def test_the_zone_record_says_whether_pinned_and_which_sources_carry_efa() -> None:
    jf = _jf()
    group = replace(_source("managed", {"g6.xlarge": NODE}), name="fits")
    other = replace(group, name="admits only")
    placed = Placed((group, other), (group,), 1)
    where = replace(jf.placement, single_zone=True)
    zone, _ = _zone(_dev(), _efa(jf, 0), where=where, placed=placed)
    assert (zone.single, zone.pin, zone.efa_sources, zone.efa) == (True, 0, (group,), True)
    # Nothing fits: the candidates are the sources the EFA job would land on.
    zone, _ = _zone(_dev(), _efa(jf, 0), where=where, placed=replace(placed, fitting=()))
    assert zone.efa_sources == (group, other)
    # Not pinned, or pinned over TCP: no EFA sources.
    zone, _ = _zone(_dev(), _efa(jf, None), where=where, placed=placed)
    assert (zone.single, zone.efa_sources) == (False, ())
    assert _zone(_dev(), _efa(jf, 0, efa=0), where=where, placed=placed)[0].efa_sources == ()


def test_a_gang_kept_in_one_zone_names_each_scattered_group_and_the_fix() -> None:
    jf = _job_of(_jf(), zones="single")
    group = replace(
        _source("managed", {"g6.xlarge": NODE}), name="ng-x", key="nodeGroups.gpu[0]", zones=2
    )
    where = replace(jf.placement, single_zone=True)
    _, found = _zone(_dev(), jf, where=where, placed=replace(_placed(jf), fitting=(group,)))
    assert found == [
        Problem(
            f"{jf.key}.zones",
            "single",
            "`any` (a TCP job) or node sources confined to one zone: the 2 pods must share one "
            "zone, but node group `ng-x` (nodeGroups.gpu[0]) spans 2 zones: the "
            "cluster-autoscaler sizes the gang in its Auto Scaling group's first zone while the "
            "group spreads the new nodes across all of them, so pods whose node lands in another "
            "zone stay Pending; confine the group to one zone with nodeGroups.gpu[0].zoneIndex",
        )
    ]


# --- willrun.py and readiness.py: waitForPodsReady ------------------------------------------


def test_a_job_ready_in_exactly_the_timeout_passes_one_second_longer_fails() -> None:
    facts, jf = _dev(), _jf()
    image = jf.job.image_size_gib or facts.cfg.training.image_size_gib
    total = max(readiness.ready_path(facts.cfg, s, image).total_s for s in jf.fit.fitting)

    def with_timeout(seconds: int) -> StackFacts:
        return replace(facts, pods_ready=replace(facts.pods_ready, timeout=f"{seconds}s"))

    ready, found = _ready(with_timeout(total), jf, jf.fit.fitting)
    assert found == [] and ready is not None and ready.slowest.total_s == total
    _, (problem,) = _ready(with_timeout(total - 1), jf, jf.fit.fitting)
    assert problem.key == f"{jf.key}.imageSizeGib"
    assert _ready(with_timeout(1), jf, ()) == (None, [])
    volcano_jf = replace(jf, job=jf.job.model_copy(update={"scheduler": "volcano"}))
    assert _ready(with_timeout(1), volcano_jf, jf.fit.fitting) == (None, [])


def test_a_job_not_ready_within_the_timeout_names_its_image_size_and_both_fixes() -> None:
    facts = _dev()
    jf = _job_of(_jf(), image_size_gib=200.0)
    slow = replace(facts, pods_ready=replace(facts.pods_ready, timeout="60s"))
    ready, found = _ready(slow, jf, jf.fit.fitting)
    assert ready is not None
    assert found == [
        Problem(
            f"{jf.key}.imageSizeGib",
            200.0,
            "an image Ready within the platform's waitForPodsReady.timeout (60s): "
            f"{ready.slowest.text()}, so Kueue would evict and requeue the job on every start "
            "that takes that long (raise the platform's training.imageSizeGib, which the "
            "timeout is derived from, or its scheduling.waitForPodsReady.timeout)",
        )
    ]


def _ready_cfg(**ready: str) -> stack_config.StackConfig:
    cfg = _dev().cfg
    wait = cfg.scheduling.wait_for_pods_ready.model_copy(update=ready)
    scheduling = cfg.scheduling.model_copy(update={"wait_for_pods_ready": wait})
    return cfg.model_copy(update={"scheduling": scheduling})


@pytest.mark.parametrize("field", ["timeout", "recovery_timeout"])
def test_a_configured_timeout_of_exactly_the_required_figure_passes_one_second_less_fails(
    field: str,
) -> None:
    sources = _dev().sources
    required = readiness.pods_ready(_dev().cfg, sources).required_s
    assert required == 1085  # dev: ng-l4-spot, 910 s + 55 s pull + 120 s margin
    assert readiness.check_pods_ready(_ready_cfg(**{field: f"{required}s"}), sources) == []
    (problem,) = readiness.check_pods_ready(_ready_cfg(**{field: f"{required - 1}s"}), sources)
    key = "timeout" if field == "timeout" else "recoveryTimeout"
    assert problem.key == f"scheduling.waitForPodsReady.{key}"
    assert problem.value == f"{required - 1}s"
    assert problem.allowed.startswith("at least 19m (unset derives it)")
    # "0s" turns the check off (Kueue's own meaning), it is never too short.
    assert readiness.check_pods_ready(_ready_cfg(**{field: "0s"}), sources) == []


def test_a_short_timeout_is_told_the_longest_path_or_that_there_is_none() -> None:
    facts = _dev()
    figures = readiness.pods_ready(facts.cfg, facts.sources)
    assert figures.longest is not None
    (problem,) = readiness.check_pods_ready(_ready_cfg(timeout="60s"), facts.sources)
    assert problem.allowed == (
        f"at least 19m (unset derives it): the longest path from admission to Ready pods is "
        f"{figures.longest.text()}; a shorter timeout evicts and requeues workloads whose "
        "nodes are still coming"
    )
    # No GPU source: no path at all (the margin alone is required), and the message says so.
    assert readiness.pods_ready(facts.cfg, ()).required_s > 60
    (problem,) = readiness.check_pods_ready(_ready_cfg(timeout="60s"), ())
    assert "the longest path from admission to Ready pods is none; " in problem.allowed


def test_an_autoscaler_give_up_time_of_exactly_the_launch_passes_one_second_less_fails() -> None:
    facts = _dev()
    slowest = max(
        (s for s in facts.sources if s.scaler == "autoscaler"), key=lambda s: s.scale_up_seconds
    )
    launch = slowest.scale_up_seconds - readiness.AUTOSCALER_SCAN_SECONDS

    def with_give_up(seconds: int) -> stack_config.StackConfig:
        scaler = facts.cfg.cluster_autoscaler.model_copy(
            update={"max_node_provision_time": f"{seconds}s"}
        )
        return facts.cfg.model_copy(update={"cluster_autoscaler": scaler})

    assert readiness.check_pods_ready(with_give_up(launch), facts.sources) == []
    found = readiness.check_pods_ready(with_give_up(launch - 1), facts.sources)
    (problem,) = [p for p in found if p.key == "clusterAutoscaler.maxNodeProvisionTime"]
    assert problem.value == f"{launch - 1}s"
    assert problem.allowed == (
        f"at least {readiness.minutes(launch)}: a {slowest.instance_types[0]} node of "
        f"{slowest.name} takes about {launch} s to become Ready (planning figure, "
        "catalog.NODE_LAUNCH_SECONDS), and the autoscaler would count it failed"
    )
    # Only the groups the autoscaler resizes count: Karpenter's pools have no such give-up.
    pools = [s for s in facts.sources if s.scaler != "autoscaler"]
    assert pools
    assert readiness.check_pods_ready(with_give_up(1), pools) == []


@pytest.mark.parametrize(
    ("seconds", "text"), [(0, "1m"), (1, "1m"), (60, "1m"), (61, "2m"), (1085, "19m")]
)
def test_minutes_round_up_to_at_least_one(seconds: int, text: str) -> None:
    assert readiness.minutes(seconds) == text


def test_go_durations_add_up_their_parts() -> None:
    assert readiness.duration_s("1h30m15s") == 5415
    assert readiness.duration_s("15m") == 900
    assert readiness.duration_s("0s") == 0


def test_a_providers_bound_is_never_below_its_own_launch_time() -> None:
    facts = _dev()
    (pool,) = [s for s in facts.sources if s.name == "kp-a10g-od"]
    bound, what = readiness.provision_bound_s(facts.cfg, pool)
    assert bound == readiness.KARPENTER_BATCH_SECONDS + readiness.KARPENTER_REGISTRATION_TIMEOUT_S
    assert what == "Karpenter batch + registration timeout"
    slow = replace(pool, scale_up_seconds=bound + 1)
    assert readiness.provision_bound_s(facts.cfg, slow)[0] == bound + 1
    fixed = replace(pool, scaler="static")
    assert readiness.provision_bound_s(facts.cfg, fixed) == (0, "fixed group (nodes exist)")


def test_an_autoscaled_groups_bound_is_the_scan_and_its_provision_time() -> None:
    facts = _dev()
    (group,) = [s for s in facts.sources if s.scaler == "autoscaler"]
    bound, what = readiness.provision_bound_s(facts.cfg, group)
    assert what == "cluster-autoscaler scan + maxNodeProvisionTime"
    assert bound == readiness.AUTOSCALER_SCAN_SECONDS + readiness.duration_s(
        facts.cfg.cluster_autoscaler.max_node_provision_time
    )


def _prod_cfg(**gpu_node_class: Any) -> stack_config.StackConfig:
    values = stack_values("prod")
    node_class = values["gpu-platform:karpenter"].setdefault("gpuNodeClass", {})
    node_class.update(gpu_node_class)
    return _parse(values)


def test_a_managed_group_pulls_onto_its_own_root_volume() -> None:
    """Prod's ng-h100-od has a 1000 MiB/s root, the L40S groups the default: each pulls with
    containerd's default onto its own; a name no group has falls back to the default pull."""
    cfg = _prod_cfg()
    disks = {g.name: g.disk_throughput_mibps for g in cfg.node_groups.gpu}
    assert disks["ng-h100-od"] == 1000 != disks["ng-l40s-spot"]
    spot_disk = disks["ng-l40s-spot"]
    assert readiness.pull_rate(cfg, "managed", "ng-l40s-spot", "g6e.xlarge") == (
        readiness.PullRate(min(readiness.PULL_MIBPS, spot_disk), f"gp3 {spot_disk} MiB/s", False)
    )
    assert readiness.pull_rate(cfg, "managed", "ng-h100-od", "p5.48xlarge") == (
        readiness.PullRate(readiness.PULL_MIBPS, "gp3 1000 MiB/s", False)
    )
    pull = readiness.PULL_MIBPS
    assert readiness.pull_rate(cfg, "managed", "no-such-group", "g6e.xlarge") == (
        readiness.PullRate(pull, f"gp3 {pull} MiB/s", False)
    )


def test_soci_pulls_in_parallel_from_four_vcpus_onto_the_gp3_root_without_raid0() -> None:
    cfg = _prod_cfg(instanceStoreRaid0=False, diskThroughputMibps=1000)
    parallel = readiness.PullRate(readiness.PARALLEL_PULL_MIBPS, "gp3 1000 MiB/s", True)
    assert catalog.instance("g6.xlarge").vcpu == 4
    assert readiness.pull_rate(cfg, "karpenter", "kp-l4-spot", "g6.xlarge") == parallel
    assert catalog.instance("m6i.large").vcpu == 2
    assert readiness.pull_rate(cfg, "karpenter", "", "m6i.large") == (
        readiness.PullRate(readiness.PULL_MIBPS, "gp3 1000 MiB/s", False)
    )


def test_a_sources_ready_path_is_its_slowest_types_pull() -> None:
    """With RAID0 a type with NVMe (g6.xlarge) pulls at SOCI's rate, one without (c6i.2xlarge)
    at the gp3 root's 125 MiB/s: the path is the slowest type's pull, whatever the names'
    order; a managed group's types pull onto its own root."""
    cfg = _prod_cfg(instanceStoreRaid0=True, diskThroughputMibps=125)
    facts = build(cfg)
    (pool,) = [s for s in facts.sources if s.name == "kp-l4-spot"]
    both = replace(pool, allocatable={"g6.xlarge": NODE, "c6i.2xlarge": NODE})
    fast, slow = (readiness.pull_rate(cfg, "karpenter", pool.name, t) for t in both.allocatable)
    assert (fast.mibps, slow.mibps) == (readiness.PARALLEL_PULL_MIBPS, 125)
    bound, what = readiness.provision_bound_s(cfg, pool)
    assert readiness.ready_path(cfg, both, 100.0) == readiness.ReadyPath(
        "kp-l4-spot", bound, what, round(100.0 * 1024 / 125), "c6i.2xlarge", 100.0
    )
    # A managed group's root at gp3's 125 MiB/s baseline, below containerd's default pull.
    (group,) = [s for s in facts.sources if s.name == "ng-h100-od"]
    slow_root = [
        g.model_copy(update={"disk_throughput_mibps": 125}) if g.name == group.name else g
        for g in cfg.node_groups.gpu
    ]
    cfg = cfg.model_copy(
        update={"node_groups": cfg.node_groups.model_copy(update={"gpu": slow_root})}
    )
    path = readiness.ready_path(cfg, group, 100.0)
    assert (path.source, path.instance_type) == ("ng-h100-od", "p5.48xlarge")
    assert path.pull_s == round(100.0 * 1024 / 125)


# --- willrun.py: validation workloads ------------------------------------------------------------


def test_a_smoke_test_needs_a_source_that_holds_one_node() -> None:
    facts = _dev()
    source = facts.sources[0]
    (one,) = _smoke_verdicts(facts.cfg, {source.name: replace(source, max_nodes=1)})
    assert one.problems == ()
    (none,) = _smoke_verdicts(facts.cfg, {source.name: replace(source, max_nodes=0)})
    assert [p.key for p in none.problems] == ["validation.smokeTest"]


def test_the_nccl_test_needs_exactly_its_nodes_from_its_pool() -> None:
    cfg = _dev().cfg
    pool = cfg.nccl_pool()
    assert pool is not None
    (source,) = [s for s in _dev().sources if s.name == pool.name]
    nodes = cfg.validation.nccl.nodes

    def reach_problems(max_nodes: int) -> list[Any]:
        found = _nccl_problems(cfg, pool, replace(source, max_nodes=max_nodes))[1]
        return [p for p in found if p.key == "validation.nccl.nodes"]

    assert reach_problems(nodes) == []
    (problem,) = reach_problems(nodes - 1)
    assert f"the NCCL test needs {nodes} nodes of {pool.name} at once; it can hold " in (
        problem.allowed
    )


def _nccl_setup(override: float | None = 2.0) -> tuple[Any, Any, NodeSource]:
    """Dev's NCCL pool (kp-a10g-od: g5 types, no EFA, 2 nodes), its threshold override set."""
    cfg = _dev().cfg
    nccl_cfg = cfg.validation.nccl.model_copy(update={"min_bus_bandwidth_gbps": override})
    cfg = cfg.model_copy(
        update={"validation": cfg.validation.model_copy(update={"nccl": nccl_cfg})}
    )
    pool = cfg.nccl_pool()
    (source,) = [s for s in build(cfg).sources if s.name == pool.name]
    return cfg, pool, source


def test_an_nccl_host_type_without_a_published_figure_needs_a_threshold() -> None:
    cfg, pool, source = _nccl_setup(override=None)
    host, found = _nccl_problems(cfg, pool, source)
    assert host is not None and host.instance_type == "g5.xlarge"
    assert found == [
        Problem(
            "validation.nccl.minBusBandwidthGbps",
            None,
            "a threshold in GB/s: the catalog has no published all-reduce figure for "
            "g5.xlarge (pool kp-a10g-od, the type its pods land on)",
        )
    ]
    # A type with a published figure needs none.
    p5 = replace(source, allocatable={"p5.48xlarge": nodes.allocatable("p5.48xlarge", efa=False)})
    assert _nccl_problems(cfg, pool, p5)[1] == []


def test_an_nccl_pool_whose_types_hold_no_test_pod_names_each_types_allocatable() -> None:
    cfg, pool, source = _nccl_setup()
    small = Allocatable(cpu=1.0, memory_gib=4, gpus=1, efa=0)
    smaller = Allocatable(cpu=0.5, memory_gib=2, gpus=1, efa=0)
    tiny = replace(source, allocatable={"g5.xlarge": small, "g5.2xlarge": smaller})
    host, found = _nccl_problems(cfg, pool, tiny)
    assert host is None
    assert found == [
        Problem(
            "validation.nccl.pool",
            "kp-a10g-od",
            "a GPU source with an instance type whose allocatable holds one NCCL test pod (all "
            f"its GPUs, {catalog.NCCL_POD_CPU} CPU, at least {catalog.NCCL_POD_MIN_MEMORY_GIB} "
            "GiB): g5.xlarge: 1 CPU / 4 GiB allocatable; g5.2xlarge: 0.5 CPU / 2 GiB "
            "allocatable; its pods would stay Pending until the Job's deadline",
        )
    ]


def test_an_nccl_test_short_of_nodes_names_its_count_and_the_sources_limit() -> None:
    cfg, pool, source = _nccl_setup()
    _, found = _nccl_problems(cfg, pool, replace(source, max_nodes=1))
    assert found == [
        Problem(
            "validation.nccl.nodes",
            2,
            "the NCCL test needs 2 nodes of kp-a10g-od at once; it can hold 1 (limits.gpus 2)",
        )
    ]
    host, found = _nccl_problems(cfg, pool, None)
    assert host is None
    assert found == [
        Problem(
            "validation.nccl.nodes",
            2,
            "the NCCL test needs 2 nodes of kp-a10g-od at once; it can hold 0 (unknown source)",
        )
    ]


def test_an_nccl_gang_over_efa_on_a_scattered_group_is_told_to_confine_it() -> None:
    """The test keeps its ranks in one zone over EFA only: a scattered group is named for an
    EFA host, not for one without EFA, and alongside any other refusal."""
    cfg, pool, source = _nccl_setup()
    efa_alloc = replace(source.allocatable["g5.2xlarge"], efa=1)
    group = replace(
        source,
        kind="managed",
        scaler="autoscaler",
        zones=2,
        key="nodeGroups.gpu[0]",
        allocatable={"g5.2xlarge": efa_alloc},
    )
    _, found = _nccl_problems(cfg, pool, replace(group, max_nodes=1))
    assert found == [
        Problem(
            "nodeGroups.gpu[0].zoneIndex",
            None,
            "a private-subnet index: " + scattered_text(group, 2),
        ),
        Problem(
            "validation.nccl.nodes",
            2,
            "the NCCL test needs 2 nodes of kp-a10g-od at once; it can hold 1 (limits.gpus 2)",
        ),
    ]
    without_efa = replace(group, allocatable=source.allocatable)
    assert _nccl_problems(cfg, pool, without_efa)[1] == []
    # After a missing threshold, both are named.
    no_threshold, _, _ = _nccl_setup(override=None)
    found = _nccl_problems(no_threshold, pool, group)[1]
    assert [p.key for p in found] == [
        "validation.nccl.minBusBandwidthGbps",
        "nodeGroups.gpu[0].zoneIndex",
    ]


def test_an_nccl_verdict_records_its_efa_sources_and_what_no_source_brings() -> None:
    from components.analysis.willrun import _nccl_verdict

    cfg, pool, source = _nccl_setup()
    facts = replace(_dev(), cfg=cfg)
    efa = replace(
        source, allocatable={"g5.2xlarge": replace(source.allocatable["g5.2xlarge"], efa=1)}
    )
    verdict = _nccl_verdict(facts, pool, efa)
    assert verdict.zone == Zone(single=True, efa_sources=(efa,), efa=True)
    assert verdict.scale_up == ScaleUp(max_nodes=source.max_nodes)
    # No source for the pool: no node, no placement, no zone to keep.
    verdict = _nccl_verdict(facts, pool, None)
    assert verdict.scale_up == ScaleUp(max_nodes=0)
    assert verdict.placement == Placed((), (), nccl=None, pool=pool.name)
    assert verdict.zone == Zone(single=False, efa_sources=(), efa=False)


@pytest.mark.parametrize(
    ("cpu", "memory_gib", "fits"),
    [
        (catalog.NCCL_POD_CPU, catalog.NCCL_POD_MIN_MEMORY_GIB, True),
        (catalog.NCCL_POD_CPU - 0.5, catalog.NCCL_POD_MIN_MEMORY_GIB, False),
        (catalog.NCCL_POD_CPU, catalog.NCCL_POD_MIN_MEMORY_GIB - 1, False),
    ],
)
def test_an_nccl_host_holds_at_least_the_tests_cpu_and_least_memory(
    cpu: float, memory_gib: int, fits: bool
) -> None:
    alloc = Allocatable(cpu=cpu, memory_gib=memory_gib, gpus=1, efa=0)
    host = nccl.host(_source("karpenter", {"g6.xlarge": alloc}))
    assert (host is not None) is fits
    if host is not None:
        assert host.memory_gib == memory_gib  # all the node has, under the test's figure


def test_an_nccl_pod_asks_for_its_figure_or_all_a_smaller_node_has() -> None:
    top = catalog.NCCL_POD_MEMORY_GIB
    assert nccl.pod_memory_gib(top + 1) == top
    assert nccl.pod_memory_gib(top) == top
    assert nccl.pod_memory_gib(top - 1) == top - 1


# --- volcano.py ----------------------------------------------------------------------------------


def test_a_request_of_exactly_what_a_queue_offers_is_not_short() -> None:
    assert volcano.short({"cpu": 4.0}, {"cpu": 4.0}) == []
    assert volcano.short({"cpu": 4.5}, {"cpu": 4.0}) == ["cpu 4.5 > 4"]
    assert volcano.short({"memory": 2.0}, {}) == ["memory 2Gi > 0Gi"]
    assert volcano.short({"cpu": 0.0}, {}) == []


def test_a_guarantee_of_exactly_the_namespace_limit_passes_one_more_fails() -> None:
    cfg = _dev().cfg
    team = cfg.teams[0]
    cpu = sum(q.cpu for q in team.quota)
    memory_gib = sum(q.memory_gib for q in team.quota)

    def with_limits(**limits: int) -> stack_config.StackConfig:
        changed = team.model_copy(update={"limits": team.limits.model_copy(update=limits)})
        return cfg.model_copy(update={"teams": [changed, *cfg.teams[1:]]})

    assert volcano.check_queues(with_limits(cpu=cpu, memory_gib=memory_gib)) == []
    found = volcano.check_queues(with_limits(cpu=cpu - 1, memory_gib=memory_gib - 1))
    assert [(p.key, p.value) for p in found] == [
        ("teams[0].limits.cpu", cpu - 1),
        ("teams[0].limits.memoryGib", memory_gib - 1),
    ]


def test_real_capability_is_what_exceeds_every_guarantee_plus_its_own_capped() -> None:
    assert volcano.real_capability({"cpu": 10.0}, {"cpu": 2.0}, {"cpu": 8.0}, {"cpu": 4.0}) == {
        "cpu": 6.0
    }
    # Guarantees over the total leave the queue its own guarantee, never less.
    assert volcano.real_capability({}, {"cpu": 2.0}, {"cpu": 1.0}, {"cpu": 4.0}) == {"cpu": 2.0}
    assert volcano.real_capability({"cpu": 5.0}, {}, {"cpu": 8.0}, {}) == {"cpu": 5.0}


def test_efa_per_gpu_is_the_smallest_types() -> None:
    assert volcano.efa_per_gpu("h100-x8") == 32 / 8
    assert volcano.efa_per_gpu("a10g-x1") == 0.0
    assert volcano.efa_per_gpu("no-such-x1") == 0.0


# --- checkpoint.py, memory.py, costs.py ------------------------------------------------------


def test_young_daly_falls_back_to_the_mtbf_from_a_save_of_twice_the_mtbf() -> None:
    assert checkpoint.young_daly_interval_s(20.0, 10.0) == 10.0
    below = checkpoint.young_daly_interval_s(19.9, 10.0)
    ratio = 19.9 / 20.0
    assert below == pytest.approx(
        math.sqrt(2 * 19.9 * 10) * (1 + math.sqrt(ratio) / 3 + ratio / 9) - 19.9
    )
    assert checkpoint.young_daly_interval_s(30.0, 21600.0) == pytest.approx(
        math.sqrt(2 * 30 * 21600) * (1 + math.sqrt(30 / 43200) / 3 + 30 / 43200 / 9) - 30
    )


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_checkpoint_figures_must_be_positive_and_finite(bad: float) -> None:
    with pytest.raises(ValueError, match="save_s must be a positive finite number"):
        checkpoint.young_daly_interval_s(bad, 10.0)
    with pytest.raises(ValueError, match="mtbf_s must be a positive finite number"):
        checkpoint.wasted_fraction(10.0, 1.0, bad)


@pytest.mark.parametrize("field", ["interval_s", "save_s", "mtbf_s"])
def test_each_checkpoint_figure_is_checked_on_its_own(field: str) -> None:
    figures = {"interval_s": 600.0, "save_s": 30.0, "mtbf_s": 36000.0}
    with pytest.raises(ValueError, match=f"^{field} must be a positive finite number, got 0"):
        checkpoint.wasted_fraction(**{**figures, field: 0.0})
    if field != "interval_s":
        young = {k: v for k, v in figures.items() if k != "interval_s"}
        with pytest.raises(ValueError, match=f"^{field} must be"):
            checkpoint.young_daly_interval_s(**{**young, field: 0.0})


def test_no_restart_time_is_zero_restart_time() -> None:
    assert checkpoint.wasted_fraction(600.0, 30.0, 36000.0) == checkpoint.wasted_fraction(
        600.0, 30.0, 36000.0, 0.0
    )
    assert checkpoint.wasted_fraction(600.0, 30.0, 36000.0, 1.0) > (
        checkpoint.wasted_fraction(600.0, 30.0, 36000.0)
    )


def test_restart_time_may_be_zero_not_negative() -> None:
    assert checkpoint.wasted_fraction(9.0, 1.0, 100.0, 0.0) == pytest.approx(0.1 + 5.0 / 100)
    assert checkpoint.wasted_fraction(9.0, 1.0, 100.0, 10.0) == pytest.approx(0.1 + 15.0 / 100)
    with pytest.raises(ValueError, match="restart_s must be >= 0"):
        checkpoint.wasted_fraction(9.0, 1.0, 100.0, -0.5)


def _state(mode: str, world: int, **deepspeed: Any) -> float | None:
    extra: dict[str, Any] = {"mode": mode, "modelParameters": 2**30}
    if mode == "deepspeed":
        extra["deepspeed"] = {"microBatchPerGpu": 1, **deepspeed}
    return memory.model_state_gib(_job(**extra), world)


def test_model_state_per_rank_by_mode_and_zero_stage() -> None:
    # 2**30 parameters: 2 GiB parameters, 2 GiB gradients, 12 GiB optimizer state.
    assert _state("ddp", 4) == 16
    assert _state("fsdp", 4) == 4
    assert _state("deepspeed", 4, zeroStage=0) == 16
    assert _state("deepspeed", 4, zeroStage=1) == 2 + 2 + 3
    assert _state("deepspeed", 4, zeroStage=2) == 2 + 0.5 + 3
    assert _state("deepspeed", 4, zeroStage=3) == 0.5 + 0.5 + 3
    assert _state("deepspeed", 4, zeroStage=3, offloadOptimizer="cpu") == 0.5 + 0.5
    assert _state("deepspeed", 4, zeroStage=3, offloadParam="cpu") == 0.5 + 3
    assert _state("ddp", 1) == 16
    assert _state("ddp", 0) is None
    assert memory.model_state_gib(_job(), 4) is None


def _pool(
    types: list[str],
    capacity: str,
    *,
    gpus: int | None = None,
    cpu: int | None = None,
    memory_gib: int | None = None,
) -> Any:
    """A Karpenter pool of `types` on `capacity` with typed limits (gpus, cpu, memory_gib),
    built without the model's pool rules (a GPU limit, three spot types): the arithmetic alone."""
    from components.config import KarpenterPool
    from components.config.karpenter import KarpenterLimits

    return KarpenterPool.model_construct(
        name="p",
        capacity_type=capacity,
        instance_types=types,
        limits=KarpenterLimits.model_construct(gpus=gpus, cpu=cpu, memory_gib=memory_gib),
    )


def _reach(pool: Any) -> tuple[int, float]:
    found = costs.pool_max_cost(pool)
    return found.nodes, found.usd_per_hour


def test_a_pool_reaches_the_whole_nodes_every_limit_admits_at_the_dearest_type() -> None:
    price = catalog.price_per_hour("g5.xlarge", "on-demand")
    # 4 vCPU per node: a 7-CPU limit admits one node, 8 two.
    assert _reach(_pool(["g5.xlarge"], "on-demand", cpu=7)) == (1, price)
    assert _reach(_pool(["g5.xlarge"], "on-demand", cpu=8)) == (2, 2 * price)
    # The tightest limit wins (16 GiB: one 16-GiB g5.xlarge).
    assert _reach(_pool(["g5.xlarge"], "on-demand", cpu=8, memory_gib=16)) == (1, price)
    # 8 CPUs: two g5.xlarge or one g5.2xlarge (8 vCPU); the dearer reach is the pool's.
    dearer = catalog.price_per_hour("g5.2xlarge", "on-demand")
    expected = max([(2, 2 * price), (1, dearer)], key=lambda row: row[1])
    both = _reach(_pool(["g5.xlarge", "g5.2xlarge"], "on-demand", cpu=8))
    assert both == expected
    assert _reach(_pool(["g5.2xlarge", "g5.xlarge"], "on-demand", cpu=8)) == both


# --- jobs.py: EFA asks -----------------------------------------------------------------------


def _efa_problems_of(job_changes: dict[str, Any]) -> list[Any]:
    """The EFA problems of prod's `pretrain-7b` job changed by `job_changes`."""
    from tests.analysis.judged import facts_of
    from tests.conftest import values_with_jobs

    cfg = _parse(values_with_jobs("prod"))
    index, job = next((i, j) for i, j in enumerate(cfg.training_jobs) if j.name == "pretrain-7b")
    changed = job.model_copy(update=job_changes)
    jf = facts_of(cfg, changed, index)
    return judge_training_jobs(replace(build(cfg), jobs=(jf,)))


def test_efa_devices_up_to_the_fewest_of_the_types_pass_one_more_fails() -> None:
    from tests.conftest import values_with_jobs

    cfg = _parse(values_with_jobs("prod"))
    job = next(j for j in cfg.training_jobs if j.name == "pretrain-7b")
    types = next(jf for jf in build(cfg).jobs if jf.job.name == job.name).instance_types
    fewest = min(catalog.instance(t).efa_devices for t in types)
    assert fewest > 1
    assert _efa_problems_of({"efa_devices": fewest}) == []
    (problem,) = _efa_problems_of({"efa_devices": fewest + 1})
    assert problem.key.endswith(".efaDevices")
    assert problem.allowed.startswith(f"at most {fewest} (the EFA devices of ")


def test_a_multi_node_efa_job_may_not_spread_over_zones_a_one_node_job_may() -> None:
    (problem,) = _efa_problems_of({"zones": "any"})
    assert problem.key.endswith(".zones")
    assert _efa_problems_of({"zones": "any", "nodes": 1}) == []
    assert _efa_problems_of({"zones": "any", "efa": False}) == []


def test_whole_nodes_of_the_class_only() -> None:
    cfg = _dev().cfg
    job = cfg.training_jobs[0]
    gpus = catalog.instance(cfg.node_groups.gpu[0].instance_types[0]).gpus
    assert gpus == 1

    def class_problems(**changes: Any) -> list[Any]:
        jobs = [job.model_copy(update=changes)]
        found = validate_training_jobs(cfg.model_copy(update={"training_jobs": jobs}))
        return [p for p in found if p.key.endswith(".gpusPerNode")]

    assert class_problems(gpus_per_node=1) == []
    assert class_problems(gpus_per_node=None) == []
    (problem,) = class_problems(gpus_per_node=2)
    assert problem.allowed.startswith("1: the GPUs of a a10g-x1 instance")


# --- mutants the boundary cases above left alive (tests/analysis/mutation-survivors.md) ---------


def test_a_gpu_limit_counts_whole_nodes_and_skips_types_without_gpus() -> None:
    spot = catalog.price_per_hour("g5.xlarge", "spot")
    assert spot != catalog.price_per_hour("g5.xlarge", "on-demand")
    # One GPU per g5.xlarge: a 2-GPU limit is two nodes, at the spot price.
    assert _reach(_pool(["g5.xlarge"], "spot", gpus=2)) == (2, 2 * spot)
    # A CPU type under a GPU limit: the GPU limit does not bound it (no division by its 0 GPUs),
    # and a type that no limit bounds is passed over, not the end of the search.
    cpu_price = catalog.price_per_hour("m6i.xlarge", "on-demand")
    assert _reach(_pool(["m6i.xlarge"], "on-demand", gpus=8, cpu=8)) == (
        2,
        2 * cpu_price,
    )
    assert _reach(_pool(["m6i.xlarge", "g5.xlarge"], "spot", gpus=2)) == (2, 2 * spot)


def test_a_fraction_of_a_resource_over_nothing_is_short() -> None:
    assert volcano.short({"cpu": 0.5}, {}) == ["cpu 0.5 > 0"]
    assert volcano.short({"cpu": 0.5}, {"cpu": 0.25}) == ["cpu 0.5 > 0.25"]


def test_the_total_guarantee_adds_every_team_queue_and_the_nccl_tests() -> None:
    facts = _dev()
    cfg, host = facts.cfg, facts.nccl_host
    assert host is not None
    teams = [volcano.queue_guarantee(t) for t in cfg.teams]
    nccl_part = volcano.validation_guarantee(cfg, host)
    assert nccl_part and all(teams)
    total = volcano.total_guarantee(cfg, host)
    for name in {n for part in [*teams, nccl_part] for n in part}:
        assert total[name] == sum(part.get(name, 0.0) for part in [*teams, nccl_part]), name
    assert (
        volcano.total_guarantee(cfg, None)
        == {name: sum(part.get(name, 0.0) for part in teams) for name in total} | {}
    )


def test_a_volcano_gang_asking_for_less_than_its_queue_names_only_what_it_asks() -> None:
    facts = _dev()
    team = facts.cfg.teams[0]
    # Only CPU: the queue's other resources (memory, GPUs) are not asked for and not short.
    path = volcano.admission(facts.cfg, team, {"cpu": 1.0}, facts.nccl_host)
    assert path.queue == team.name and path.blockers == ()
    assert path.min_resources == {"cpu": 1.0}


def test_a_reservation_selected_by_tags_names_each_tag() -> None:
    values = stack_values("prod")
    (reservation,) = values["gpu-platform:karpenter"]["reservations"]
    reservation["tags"] = {"team": "pretrain", "gpu-platform/reservation": "h100"}
    (row,) = capacity_reservations(_parse(values))
    assert row.selector == "gpu-platform/reservation=h100,team=pretrain"


def test_a_capacity_block_window_needs_both_ends() -> None:
    values = stack_values("prod")
    karpenter = values["gpu-platform:karpenter"]
    (reservation,) = karpenter["reservations"]
    assert "start" not in reservation and "end" not in reservation
    (row,) = capacity_reservations(_parse(values))
    assert row.window == ""


def test_a_source_no_team_queue_reaches_is_named_at_its_unqueued_reason() -> None:
    cfg = _dev().cfg
    sources = _dev().sources
    teams = [
        t.model_copy(update={"quota": [q for q in t.quota if q.gpu_class != "l4-x1"]})
        for t in cfg.teams
    ]
    bare = cfg.model_copy(update={"teams": teams})
    (problem,) = check_reachable_sources(unreachable_sources(bare, sources))
    assert problem.key == "nodeGroups.gpu[0].unqueuedReason" and problem.value is None
    assert problem.allowed.startswith("ng-l4-spot serves l4-x1 spot, which no team's quota lists")
    assert check_reachable_sources(unreachable_sources(cfg, sources)) == []


def test_job_resources_reads_the_types_its_pools_launch() -> None:
    jf = _jf("ddp-l4-nodegroup")
    assert resources.job_resources(_dev().cfg, jf.job) == jf.resources
    assert jf.resources.instance_type == "g6.xlarge"


def test_job_resources_sizes_a_pod_for_the_pools_types_not_the_whole_class() -> None:
    """A group that launches g6.2xlarge and larger sizes the job's pods for g6.2xlarge, not for
    the class's smallest type (g6.xlarge), which no pool of the job would launch."""
    cfg = _dev().cfg
    (group,) = cfg.node_groups.gpu
    types = ["g6.2xlarge", "g6.4xlarge"]
    larger = group.model_copy(update={"instance_types": types})
    cfg = cfg.model_copy(
        update={"node_groups": cfg.node_groups.model_copy(update={"gpu": [larger]})}
    )
    job = next(j for j in cfg.training_jobs if j.name == "ddp-l4-nodegroup")
    assert "g6.xlarge" in stack_config.gpu_class_instance_types("l4-x1")
    found = resources.job_resources(cfg, job)
    assert found.instance_type == "g6.2xlarge"
    assert found == resources_on(job, types) != resources_on(job, [])


def test_a_jobs_facts_size_its_pods_for_its_pools_and_take_its_checkpoint_interval() -> None:
    """The facts (what the program reads) agree with job_resources on a group of larger types,
    and a configured checkpoint interval is the one the waste is planned with."""
    from components.analysis import checkpoint as checkpointing
    from components.analysis.facts import job_facts

    cfg = _dev().cfg
    (group,) = cfg.node_groups.gpu
    larger = group.model_copy(update={"instance_types": ["g6.2xlarge", "g6.4xlarge"]})
    cfg = cfg.model_copy(
        update={"node_groups": cfg.node_groups.model_copy(update={"gpu": [larger]})}
    )
    index, job = next(
        (i, j) for i, j in enumerate(cfg.training_jobs) if j.name == "ddp-l4-nodegroup"
    )
    set_interval = job.checkpoint.model_copy(update={"interval_seconds": 1234})
    job = job.model_copy(update={"checkpoint": set_interval})
    facts = build(cfg)
    team = facts.teams[job.team]
    jf = job_facts(cfg, index, job, team, sources=facts.sources, provisioners=facts.provisioners)
    assert jf.resources.instance_type == "g6.2xlarge"
    assert jf.resources == resources.job_resources(cfg, job)
    assert jf.checkpoint_interval_s == 1234.0
    assert jf.planned_waste == checkpointing.wasted_fraction(
        1234.0,
        job.checkpoint.blocking,
        job.checkpoint.mtbf_seconds,
        job.checkpoint.restart_seconds,
    )


def test_a_jobs_facts_name_the_provisioners_of_its_flavors() -> None:
    by_name = {jf.job.name: jf for jf in _dev().jobs}
    assert by_name["ddp-l4-nodegroup"].provisioners == frozenset({"node-group"})
    assert by_name["ddp-smoke"].provisioners == frozenset({"karpenter"})


def test_judge_keeps_each_jobs_quota_problems_and_check_raises_them_all() -> None:
    from components.analysis import check, judge
    from components.config import ConfigError

    cfg = _dev().cfg
    index = next(i for i, j in enumerate(cfg.training_jobs) if j.name == "ddp-smoke")
    team = cfg.teams[0]
    small = team.model_copy(update={"limits": team.limits.model_copy(update={"gpus": 1})})
    over = cfg.model_copy(update={"teams": [small, *cfg.teams[1:]]})
    judgement = judge(build(over))
    assert judgement.verdicts == ()
    assert set(judgement.quota) == {index}
    found = judgement.quota[index]
    assert isinstance(found, tuple) and found
    assert all(p in judgement.problems for p in found)
    with pytest.raises(ConfigError) as raised:
        check(over)
    assert raised.value.lines == [
        f"gpu-platform:trainingJobs[{index}].nodes: got 2; nodes x GPUs = 2 is over team "
        "research's namespace limit (1 GPUs)"
    ]
    # A clean config: every verdict, nothing over quota.
    clean = judge(build(cfg))
    assert clean.problems == () and clean.quota == {}
    assert len(clean.verdicts) == len(verdicts(build(cfg)))
    kueue = [v.admission for v in clean.verdicts if hasattr(v.admission, "over_quota")]
    assert kueue and not any(a.over_quota for a in kueue)


# --- willrun.py: the typed record behind each verdict (what the report renders) ------------------


def test_a_kueue_jobs_verdict_records_its_queue_flavors_requests_and_parts() -> None:
    facts = _dev()
    by_key = {v.key: v for v in verdicts(facts)}
    jf = _jf("ddp-smoke")
    verdict = by_key[jf.key]
    assert verdict.workload == "team-research/ddp-smoke" and verdict.kind == "Indexed Job"
    assert verdict.admission == KueueAdmission(
        queue="research",
        flavors=("a10g-x1-spot",),
        over_quota=False,
        uncovered=(),
        requests=("cpu", "memory", catalog.GPU_RESOURCE),
        provisioning=None,
    )
    assert verdict.placement == Placed(jf.fit.candidates, jf.fit.fitting, 0)
    assert verdict.scale_up == ScaleUp(sources=jf.fit.fitting) and verdict.scale_up.sources
    assert verdict.gang == Gang(2, (("spot", 4),))
    assert verdict.awaits == Awaits(launcher="native", config_map=False)
    assert verdict.image == jf.image and verdict.image is not None
    assert verdict.ready is not None and verdict.ready.timeout == facts.pods_ready.timeout
    assert verdict.s3_only is False and verdict.problems == ()
    # The autoscaled group's flavor goes through Kueue's ProvisioningRequest check.
    l4 = by_key[_jf("ddp-l4-nodegroup").key]
    assert l4.admission.provisioning == Provisioning(
        nodes=2,
        max_node_provision_time="15m",
        pods_ready_timeout=facts.pods_ready.timeout,
        scale_down_unneeded_time="10m",
    )
    # A DeepSpeed job's launcher waits for its ConfigMap too.
    zero2 = by_key[_jf("ds-zero2").key]
    assert zero2.awaits == Awaits(launcher="volcano", config_map=True)
    assert zero2.admission == VolcanoAdmission(
        queue="applied", min_available=2, path=zero2.admission.path
    )


def test_a_jobs_model_memory_and_s3_only_checkpoints_are_recorded() -> None:
    facts, jf = _dev(), _jf()
    job = jf.job.model_copy(
        update={
            "checkpoint": jf.job.checkpoint.model_copy(
                update={"volume": False, "s3_prefix": "ckpt/ddp"}
            )
        }
    )
    verdict = training_verdict(facts, replace(jf, job=job, model_state_gib=1.5))
    assert verdict.s3_only is True and verdict.storage is None
    assert verdict.memory == Memory(1.5, verdict.memory.per_gpu_gib, "ddp")
    nothing = jf.job.checkpoint.model_copy(update={"volume": False, "s3_prefix": None})
    bare = training_verdict(
        facts, replace(jf, job=jf.job.model_copy(update={"checkpoint": nothing}))
    )
    assert bare.s3_only is False and bare.storage is None


def test_the_quota_rules_finding_reaches_exactly_the_jobs_it_names() -> None:
    facts = _dev()
    index = _jf().index
    judged = {v.key: v for v in verdicts(facts, over_quota=frozenset({index}))}
    kueue = {k: v.admission for k, v in judged.items() if isinstance(v.admission, KueueAdmission)}
    assert len(kueue) == 3
    assert {k for k, a in kueue.items() if a.over_quota} == {f"trainingJobs[{index}]"}
    assert training_verdict(facts, _jf()).admission.over_quota is False


def test_a_smoke_test_verdict_records_its_source_and_what_holds_no_node() -> None:
    facts = _dev()
    source = facts.sources[0]
    (verdict,) = _smoke_verdicts(facts.cfg, {source.name: source})
    assert verdict == Verdict(
        key="validation.smokeTest",
        workload=f"gpu-validation/gpu-smoke-{source.name}",
        kind="validation Job",
        admission=ValidationAdmission("unqueued"),
        placement=Placed((source,), (source,)),
        scale_up=ScaleUp(scaler=source.scaler, max_nodes=source.max_nodes),
        gang=Gang(1),
        awaits=Awaits("validation"),
    )
    empty = replace(source, max_nodes=0, limit_text="desiredSize 0")
    (verdict,) = _smoke_verdicts(facts.cfg, {source.name: empty})
    assert verdict.problems == (
        Problem(
            "validation.smokeTest",
            True,
            f"gpu-smoke-{source.name} runs on {source.name} ({source.key}), which can hold no "
            "node (desiredSize 0)",
        ),
    )
    validation = facts.cfg.validation
    no_smoke = validation.model_copy(update={"smoke_test": False})
    cfg = facts.cfg.model_copy(update={"validation": no_smoke})
    assert [v.key for v in validation_verdicts(replace(facts, cfg=cfg))] == ["validation.nccl"]


def test_the_nccl_tests_verdict_records_its_pool_host_gang_and_zone() -> None:
    facts = _dev()
    pool = facts.cfg.nccl_pool()
    assert pool is not None
    (source,) = [s for s in facts.sources if s.name == pool.name]
    (verdict,) = [v for v in validation_verdicts(facts) if v.key == "validation.nccl"]
    host = facts.nccl_host
    assert host is not None and host.efa_devices == 0
    assert verdict == Verdict(
        key="validation.nccl",
        # The Job the stack renders (validation.py), which the real-engine tier follows.
        workload=f"gpu-validation/{catalog.nccl_job_name(pool.name)}",
        kind="validation Job",
        admission=ValidationAdmission("nccl", min_member=2, guaranteed=True),
        placement=Placed((source,), (source,), nccl=host, pool=pool.name),
        scale_up=ScaleUp(max_nodes=source.max_nodes),
        gang=Gang(2),
        awaits=Awaits("validation"),
        zone=Zone(single=False, efa_sources=(), efa=False),
    )
    # No GPU source at all: nothing to run on, and the verdict says so.
    cfg = facts.cfg.model_copy(
        update={
            "node_groups": facts.cfg.node_groups.model_copy(update={"gpu": []}),
            "karpenter": facts.cfg.karpenter.model_copy(
                update={"pools": [p for p in facts.cfg.karpenter.pools if not p.is_gpu]}
            ),
        }
    )
    (verdict,) = [v for v in validation_verdicts(replace(facts, cfg=cfg)) if "nccl" in v.key]
    assert verdict == Verdict(
        key="validation.nccl",
        workload="gpu-validation/nccl-all-reduce",
        kind="validation Job",
        admission=ValidationAdmission("no-pool"),
        placement=Placed((), ()),
        scale_up=ScaleUp(),
        gang=Gang(2),
        awaits=Awaits("nothing"),
        problems=(
            Problem(
                "validation.ncclTest", True, "a GPU node group or Karpenter GPU pool to run on"
            ),
        ),
    )


def test_pods_outside_kueue_that_both_provisioners_would_scale_for_are_refused() -> None:
    jf = _jf("ds-zero2")
    group = replace(_source("managed", {"g6.xlarge": NODE}), name="ng-a")
    pool = replace(_source("karpenter", {"g6.xlarge": NODE}), name="kp-b")
    assert _mixed_provisioners(jf, [group, replace(group, name="ng-c")]) == []
    (problem,) = _mixed_provisioners(jf, [group, pool])
    assert problem == Problem(
        f"{jf.key}.capacity",
        jf.job.capacity,
        "capacity one provisioner serves: the pods match managed node groups (ng-a) and "
        "Karpenter NodePools (kp-b); the cluster-autoscaler and Karpenter would each bring a "
        "node for the same pending pod (or queue it with Kueue: each flavor selects one)",
    )
    assert _mixed_provisioners(_jf("ddp-smoke"), [group, pool]) == []


def test_scale_up_paths_name_what_brings_a_node() -> None:
    pool = replace(_source("karpenter", {"g6.xlarge": NODE}), scale_up_seconds=70)
    group = replace(_source("managed", {"g6.xlarge": NODE}), scale_up_seconds=80)
    assert scale_up_path(pool) == "Karpenter NodePool `src` launches nodes, ≈ 70 s"
    assert scale_up_path(group) == "cluster-autoscaler resizes node group `src`, ≈ 80 s"
    assert scale_up_path(replace(group, scaler="static")) == "fixed node group `src` (no scale-up)"


def test_a_sources_placement_is_described_by_its_membership_and_capacity_type() -> None:
    cfg = _dev().cfg
    pg = cfg.network.efa_placement_group
    on = cfg.model_copy(
        update={
            "network": cfg.network.model_copy(
                update={"efa_placement_group": pg.model_copy(update={"enabled": True})}
            )
        }
    )
    off = cfg.model_copy(
        update={
            "network": cfg.network.model_copy(
                update={"efa_placement_group": pg.model_copy(update={"enabled": False})}
            )
        }
    )
    assert efa_placement.describe(on, True, capacity_type="on-demand") == (
        f"cluster placement group `{efa_placement.group_name(on)}`, AZ index {pg.zone_index} "
        "only (network.efaPlacementGroup)"
    )
    assert efa_placement.describe(on, False, capacity_type="reserved") == (
        "no placement group (the reservations are not declared inPlacementGroup)"
    )
    assert efa_placement.describe(on, False, capacity_type="on-demand") == "no placement group"
    assert efa_placement.describe(off, False, capacity_type="reserved") == "no placement group"
