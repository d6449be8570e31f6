"""Facts once: during one synth of the dev stack the config is parsed once, the pool capacity and
the node sources are computed once, and each training job's pod resources once per job — every
rule, component and the report read components/analysis/facts.py. Per job also its instance
types, placement, zone pin, fitting node sources, quota problems, checkpoint interval and
planned waste, and model-state memory; the team rules once. Counted with a
profiler hook on the functions' code objects, so a caller that imported a function by name is
counted too."""

from __future__ import annotations

import importlib
import sys
from collections import Counter
from collections.abc import Callable
from types import FrameType
from typing import Any

from components.analysis import (
    capacity,
    checkpoint,
    facts,
    fit,
    memory,
    nodes,
    placement,
    quota,
    resources,
    willrun,
)
from synth import report_plan
from synth.harness import SynthResult, run_program

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
    "gpu_capacity": capacity.gpu_capacity,
    "node_sources": nodes.node_sources,
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
    "flavor_provisioners": capacity.flavor_provisioners,
}


def test_one_dev_synth_computes_each_fact_once() -> None:
    result, counts = _count_calls(lambda: run_program("dev"), COUNTED)
    assert isinstance(result, SynthResult)
    jobs = len(result.config.training_jobs)
    assert jobs >= 3
    assert counts == Counter(
        parse=1,
        gpu_capacity=1,
        node_sources=1,
        flavor_provisioners=1,
        check_teams=1,
        job_instance_types=jobs,
        job_resources=jobs,
        job_quota=jobs,
        job_placement=jobs,
        zone_pin=jobs,
        fit=jobs,
        model_state=jobs,
        waste=jobs,
        # Young/Daly only for the jobs that do not set their own interval.
        young_daly=sum(j.checkpoint.interval_seconds is None for j in result.config.training_jobs),
    ), counts


def test_the_verdicts_are_judged_once_for_the_check_and_the_report() -> None:
    """The config check (analysis.check) and the report's "Will it run" section read one set of
    verdicts: each training job is judged once per synth."""

    def synth_and_report() -> tuple[SynthResult, str]:
        result = run_program("dev")
        assert isinstance(result, SynthResult)
        return result, report_plan.will_it_run(result)

    (result, section), counts = _count_calls(
        synth_and_report, {"verdict": willrun.training_verdict}
    )
    jobs = result.config.training_jobs
    assert counts["verdict"] == len(jobs), counts
    assert all(f"`trainingJobs[{i}]`" in section for i in range(len(jobs))), section


def test_the_report_reads_the_config_the_program_judged() -> None:
    result = run_program("dev")
    assert result.config is load.loaded()
    assert facts.stack_facts(result.config) is facts.stack_facts(result.config)


def test_the_counter_sees_repeated_computation(dev: SynthResult) -> None:
    """The count above can fail: computing a job's resources outside the facts is seen."""
    cfg = dev.config
    job = cfg.training_jobs[0]

    def twice() -> None:
        resources.job_resources(cfg, job)
        resources.job_resources(cfg, job)

    _, counts = _count_calls(twice, COUNTED)
    assert counts["job_resources"] == 2


def test_a_job_outside_the_config_is_computed_not_cached(dev: SynthResult) -> None:
    cfg = dev.config
    job = cfg.training_jobs[0]
    variant = job.model_copy(update={"nodes": job.nodes + 1})
    found = facts.stack_facts(cfg)
    assert found.resources(job) is found.resources(job)
    assert found.resources(variant) == resources.job_resources(cfg, variant)
    assert found.job(job) is found.job(job)
    assert found.job(variant) is not found.job(variant)
    assert found.job(variant).resources == found.resources(variant)
    team = next(t for t in cfg.teams if t.name == job.team)
    # The variant asks for one more node than the job: its quota problems are its own.
    bigger = job.model_copy(update={"nodes": 10_000})
    own = found.quota_problems(0, job, team)
    assert own == found.quota_problems(0, job, team) == []
    assert found.quota_problems(0, bigger, team), "a 10,000-node variant must be over quota"
    assert found.quota_problems(0, job, team) == own, "the variant must not replace the cache"
