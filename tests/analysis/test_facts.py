"""Facts as a value: during one synth of the dev stack the config is parsed once, the pool
capacity and the node sources are computed once, each training job's derived figures once per
job, each job planned once — all built at the composition root (`analysis.check`: validate,
build, judge) and passed down, never looked up from a cache. Counted with a profiler hook on the
functions' code objects, so a caller that imported a function by name is counted too."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import sys
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

import pytest

from components.analysis import (
    capacity,
    checkpoint,
    costs,
    efa_placement,
    facts,
    fit,
    memory,
    nodes,
    placement,
    quota,
    resources,
    startup,
    topology,
    willrun,
)
from components.training_jobs import plan as job_plan
from synth import report_plan
from synth.harness import PROJECT_ROOT, SynthResult, run_program

#: The module (components.config re-exports its `load` function under the same name).
load = importlib.import_module("components.config.load")


def _count_calls(run: Callable[[], Any], functions: dict[str, Any]) -> tuple[Any, Counter[str]]:
    codes = {fn.__code__: name for name, fn in functions.items()}
    counts: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, _arg: Any) -> None:
        if event == "call" and frame.f_code in codes:
            counts[codes[frame.f_code]] += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        result = run()
    finally:
        sys.setprofile(previous)
    return result, counts


COUNTED = {
    "parse": load.parse,
    "build": facts.build,
    "gpu_capacity": capacity.gpu_capacity,
    "node_sources": nodes.node_sources,
    "memberships": efa_placement.memberships,
    "job_instance_types": capacity.job_instance_types,
    "job_resources": resources.resources_on,
    "check_teams": quota.check_teams,
    "job_quota": quota.job_quota_problems,
    "job_placement": placement.job_placement,
    "zone_pin": placement.zone_pin_index,
    "fit": fit.fit_sources,
    "model_state": memory.model_state_gib,
    "waste": checkpoint.wasted_fraction,
    "young_daly": checkpoint.young_daly_interval_s,
    "startup": startup.estimate,
    "hourly": costs.job_hourly_cost,
    "platform_costs": costs.platform_costs,
    "flavor_provisioners": capacity.flavor_provisioners,
    "reservations": capacity.reservations,
    "unreachable_sources": quota.unreachable_sources,
    "plan_job": job_plan.plan_job,
    "verdict": willrun.training_verdict,
    "opted_in": topology.opted_in,
    "job_topology": topology.job_topology,
}


def test_one_dev_synth_computes_each_fact_once() -> None:
    def synth_and_report() -> tuple[SynthResult, str]:
        result = run_program("dev")
        assert isinstance(result, SynthResult)
        return result, report_plan.will_it_run(result)

    (result, section), counts = _count_calls(synth_and_report, COUNTED)
    cfg = result.config
    jobs = len(cfg.training_jobs)
    kueue = sum(job.scheduler == "kueue" for job in cfg.training_jobs)
    assert jobs >= 3 and 0 < kueue < jobs
    assert counts == Counter(
        parse=1,
        build=1,
        gpu_capacity=1,
        node_sources=1,
        memberships=1,
        flavor_provisioners=1,
        check_teams=1,
        # Read by the config check and the report alike (StackFacts.unqueued, .reservations).
        reservations=1,
        unreachable_sources=1,
        # Groups, NodePools, idle and storage: the report's cost sections read these.
        platform_costs=1,
        job_instance_types=jobs,
        job_resources=jobs,
        # The quota rule judges Kueue jobs (Volcano queues have their own).
        job_quota=kueue,
        job_placement=jobs,
        zone_pin=jobs,
        fit=jobs,
        model_state=jobs,
        waste=jobs,
        # The time to first step the report prints, estimated with the facts.
        startup=jobs,
        hourly=jobs,
        # Young/Daly only for the jobs that do not set their own interval.
        young_daly=sum(j.checkpoint.interval_seconds is None for j in cfg.training_jobs),
        # One plan per job per synth (the components and the report read the same plans), one
        # verdict per job (the config check and the report read the same judgement).
        plan_job=jobs,
        verdict=jobs,
        # The classes placed by the network once, each job's request on them once.
        opted_in=1,
        job_topology=jobs,
    ), counts
    assert all(f"`trainingJobs[{i}]`" in section for i in range(jobs)), section


def test_the_report_reads_what_the_program_built() -> None:
    result = run_program("dev")
    assert isinstance(result.facts, facts.StackFacts)
    assert result.config is result.facts.cfg
    assert [p.facts for p in result.plans] == list(result.facts.jobs)
    assert [v.key for v in result.judgement.verdicts][: len(result.facts.jobs)] == [
        jf.key for jf in result.facts.jobs
    ]


def test_the_counter_sees_repeated_computation(dev: SynthResult) -> None:
    """The count above can fail: computing a job's resources outside the facts is seen."""
    cfg = dev.config
    job = cfg.training_jobs[0]

    def twice() -> None:
        resources.job_resources(cfg, job)
        resources.job_resources(cfg, job)

    _, counts = _count_calls(twice, COUNTED)
    assert counts["job_resources"] == 2


def test_facts_are_a_frozen_value_built_from_the_config(dev: SynthResult) -> None:
    built = facts.build(dev.config)
    assert built == dev.facts and built is not dev.facts, "a value: equal, not cached"
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.capacity = {}  # type: ignore[misc]
    assert [jf.index for jf in built.jobs] == list(range(len(dev.config.training_jobs)))
    assert all(jf.team.name == jf.job.team for jf in built.jobs)
    # A variant of a job is facts of its own: built on the spot, nothing replaced.
    job = dev.config.training_jobs[0]
    variant = job.model_copy(update={"nodes": job.nodes + 1})
    jf = facts.job_facts(
        dev.config,
        0,
        variant,
        built.teams[job.team],
        sources=built.sources,
        provisioners=built.provisioners,
    )
    assert jf.job is variant and built.jobs[0].job is job


#: The process-wide hand-offs and caches facts-as-a-value removed; none may come back.
GONE = ("stack_facts", "_FACTS", "_loaded", "_judged", "loaded", "judged", "forget_judged")


def test_no_process_wide_cache_or_hand_off_remains() -> None:
    found = []
    for path in sorted((PROJECT_ROOT / "components").rglob("*.py")):
        tree = ast.parse(path.read_text())
        # Functions anywhere, assignments at module level: a local named
        # ``loaded`` is no hand-off, a module global of that name is.
        nodes = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)] + tree.body
        for node in nodes:
            names = []
            if isinstance(node, ast.FunctionDef):
                names = [node.name]
            elif isinstance(node, ast.Assign | ast.AnnAssign):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [t.id for t in targets if isinstance(t, ast.Name)]
            found += [f"{path.relative_to(PROJECT_ROOT)}: {n}" for n in names if n in GONE]
    assert not found, found
