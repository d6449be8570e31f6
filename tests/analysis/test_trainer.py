"""TrainJobs on the path Kueue v0.19.2 takes (components/analysis/trainer.py, issue #36 finding
5): a runtime patch keeps only Trainer v2.2.1's fields, the grace period lives in the
ClusterTrainingRuntime each TrainJob names, that runtime exists wherever the TrainJob can be
created (dev, prod and its job stacks, the fleet's manager and workers), the manager's runtimes
are the workers', and the trainer's shutdown arguments fit the grace its pods get."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from components import catalog
from components.analysis import trainer
from components.config import (
    MAX_SAVE_SECONDS,
    POD_GRACE_SECONDS,
    SPOT_NOTICE_SECONDS,
    ConfigError,
    GraceSeconds,
    Problem,
    StackConfig,
    TrainingJobConfig,
    trainer_runtime_names,
)
from components.config.load import namespace_values, parse
from components.training_jobs import manifests
from components.training_jobs import plan as job_plan
from components.training_jobs.training import trainjob_patch_problems
from synth.harness import SynthResult
from synth.jobs import run_job_stack
from tests.analysis.judged import facts_of
from tests.conftest import stack_values

TRAIN_JOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
IMAGE = job_plan.digest_image(
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/gpu-dev/trainer@sha256:" + "a" * 64
)


def _dev() -> StackConfig:
    raw = stack_values("dev")
    return parse(
        namespace_values({k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()})
    )


def _plan(cfg: StackConfig, job: TrainingJobConfig) -> job_plan.JobPlan:
    return job_plan.plan_job(cfg, facts_of(cfg, job), "123456789012", image=IMAGE)


def _trainjob(save_seconds: float | None = None) -> tuple[job_plan.JobPlan, dict[str, Any]]:
    """Dev's TrainJob (`trainingJobs[2]`), optionally with another save time."""
    cfg = _dev()
    job = next(j for j in cfg.training_jobs if j.launcher == "kubeflow")
    if save_seconds is not None:
        job = job.model_copy(
            update={
                "capacity": "on-demand",
                "checkpoint": job.checkpoint.model_copy(update={"save_seconds": save_seconds}),
            }
        )
    plan = _plan(cfg, job)
    return plan, manifests.train_job(plan)


def _patched_pod(train_job: dict[str, Any]) -> dict[str, Any]:
    patch = train_job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    pod: dict[str, Any] = patch["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    return pod


def _runtime_pod(runtime: dict[str, Any]) -> dict[str, Any]:
    (node,) = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    pod: dict[str, Any] = node["template"]["spec"]["template"]["spec"]
    return pod


# --- the runtime patch: Trainer v2.2.1's fields only ------------------------------------------


def test_a_runtime_patch_with_a_grace_period_is_refused_naming_the_key() -> None:
    plan, job = _trainjob()
    assert trainer.patch_problems(plan.facts.key, job) == []
    _patched_pod(job)["terminationGracePeriodSeconds"] = plan.grace.termination
    (problem,) = trainer.patch_problems(plan.facts.key, job)
    assert problem.key == "trainingJobs[2].launcher"
    assert (
        "runtimePatches[0].trainingRuntimeSpec.template.spec.replicatedJobs[node].template.spec"
        ".template.spec.terminationGracePeriodSeconds would never reach the pods"
    ) in problem.allowed
    assert "Trainer v2.2.1" in problem.allowed


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (
            lambda pod, jobspec: pod["containers"][0].update(resources={}),
            "containers[node].resources",
        ),
        (lambda pod, jobspec: pod.update(priorityClassName="dev"), "spec.priorityClassName"),
        (lambda pod, jobspec: jobspec.update(backoffLimit=3), "template.spec.backoffLimit"),
        (lambda pod, jobspec: pod.update(tolerations=[]), None),
        (lambda pod, jobspec: pod["containers"][0].update(env=[]), None),
    ],
    ids=["container-resources", "pod-priority", "job-backoff", "tolerations", "container-env"],
)
def test_only_fields_of_trainer_v221s_patch_types_pass(
    change: Callable[[dict[str, Any], dict[str, Any]], None], field: str | None
) -> None:
    plan, job = _trainjob()
    node = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"][
        "replicatedJobs"
    ][0]
    change(_patched_pod(job), node["template"]["spec"])
    found = trainer.patch_problems(plan.facts.key, job)
    if field is None:
        assert found == []
    else:
        (problem,) = found
        assert field in problem.allowed


def test_the_rules_pod_fields_are_trainer_v221s() -> None:
    # kubeflow/trainer@v2.2.1 PodSpecPatch and ContainerPatch, as catalog records them.
    assert set(trainer.RUNTIME_PATCH) == {"manager", "time", "trainingRuntimeSpec"}
    assert "terminationGracePeriodSeconds" not in catalog.TRAINER_V221_POD_SPEC_PATCH_FIELDS
    assert set(manifests.PATCHED_POD_FIELDS) <= catalog.TRAINER_V221_POD_SPEC_PATCH_FIELDS


def test_a_renderer_that_patched_the_grace_would_exit_2_naming_the_job(
    monkeypatch: pytest.MonkeyPatch,
    expect_config_error: Callable[[dict[str, Any], str, str], None],
) -> None:
    # What this commit removed, put back: the program refuses it before registering the job.
    monkeypatch.setattr(
        manifests,
        "PATCHED_POD_FIELDS",
        (*manifests.PATCHED_POD_FIELDS, "terminationGracePeriodSeconds"),
    )
    plan, _ = _trainjob()
    (problem,) = trainjob_patch_problems([plan])
    assert problem.key == "trainingJobs[2].launcher"
    expect_config_error(
        stack_values("dev"),
        "gpu-platform:trainingJobs[2].launcher",
        "terminationGracePeriodSeconds would never reach the pods",
    )


# --- the grace period: in the runtime, never in the patch -------------------------------------


@pytest.mark.parametrize(("save", "grace"), [(None, 120), (100, 240), (3000, 3840)])
def test_the_trainjobs_runtime_carries_its_planned_grace(save: float | None, grace: int) -> None:
    plan, job = _trainjob(save)
    assert plan.grace.termination == grace
    assert "terminationGracePeriodSeconds" not in _patched_pod(job)
    name = job["spec"]["runtimeRef"]["name"]
    assert name == plan.job.trainer_runtime == f"gpu-platform-torch-research-g{grace}"
    runtime = manifests.cluster_training_runtime(plan.job.priority, grace, "img")
    assert runtime["metadata"]["name"] == name
    assert _runtime_pod(runtime)["terminationGracePeriodSeconds"] == grace
    assert catalog.trainer_runtime_grace(name) == grace
    # The trainer's own shutdown fits inside it.
    args = job["spec"]["trainer"]["args"]
    worker = int(args[args.index("--grace-s") + 1])
    shutdown = int(args[args.index("--shutdown-timeout") + 1])
    assert worker == plan.grace.worker < shutdown == plan.grace.shutdown_timeout
    assert shutdown + 10 <= plan.grace.needed <= grace


@given(st.floats(min_value=0.01, max_value=MAX_SAVE_SECONDS))
def test_every_save_time_gets_a_rendered_grace_at_most_twice_what_it_needs(save: float) -> None:
    grace = GraceSeconds(save)
    assert save < grace.worker < grace.shutdown_timeout < grace.needed <= grace.termination
    assert grace.termination in POD_GRACE_SECONDS
    assert grace.termination == SPOT_NOTICE_SECONDS or grace.termination < 2 * grace.needed


def test_the_platform_renders_one_runtime_per_priority_and_grace() -> None:
    rendered = manifests.cluster_training_runtimes("img")
    assert [r["metadata"]["name"] for r in rendered] == list(trainer_runtime_names())
    assert len(rendered) == 3 * len(POD_GRACE_SECONDS)
    for runtime in rendered:
        name = runtime["metadata"]["name"]
        pod = _runtime_pod(runtime)
        assert pod["terminationGracePeriodSeconds"] == catalog.trainer_runtime_grace(name)
        priority = name.removeprefix("gpu-platform-torch-").split("-g")[0]
        assert pod["priorityClassName"] == job_plan.POD_PRIORITY_CLASS[priority]


def _by_name(result: SynthResult, token: str) -> dict[str, dict[str, Any]]:
    return {r.inputs["metadata"]["name"]: r.inputs for r in result.of_type(token)}


#: Each stack that declares TrainJobs, and where the runtimes they name live: the stack itself,
#: the job stack's platform, the fleet's manager and every worker.
STACKS = ["dev", "prod_jobs", "research_prod", "pretrain_fleet"]


def _runtime_holders(result: SynthResult) -> list[SynthResult]:
    if result.platform is None:
        return [result]
    platform = result.platform
    return [platform, *platform.workers.values()]


@pytest.mark.parametrize("stack", STACKS)
def test_every_rendered_trainjob_names_a_runtime_with_its_grace_everywhere_it_can_run(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    jobs = _by_name(result, TRAIN_JOB)
    plans = [p for p in result.plans if p.job.launcher == "kubeflow"]
    assert plans and len(plans) == len(jobs)
    holders = _runtime_holders(result)
    for plan in plans:
        job = jobs[plan.name]
        assert trainer.patch_problems(plan.facts.key, job) == []
        for patch in job["spec"]["runtimePatches"]:
            assert "terminationGracePeriodSeconds" not in json.dumps(patch)
        name = job["spec"]["runtimeRef"]["name"]
        for holder in holders:
            runtime = _by_name(holder, RUNTIME)[name]
            assert _runtime_pod(runtime)["terminationGracePeriodSeconds"] == plan.grace.termination
        args = job["spec"]["trainer"]["args"]
        assert int(args[args.index("--shutdown-timeout") + 1]) + 10 <= plan.grace.termination


def test_the_managers_runtimes_are_every_workers(fleet_prod: SynthResult) -> None:
    """Kueue compares the containers of a worker's recomputed pod sets with the manager's
    Workload (notes: pkg/util/equality/podset.go); the runtimes are rendered by one function
    from the same inputs. The trainer image is the one field that differs today (issue #36
    finding 2, the per-region image, owned elsewhere): masked here, and equal to the worker
    whose trainer the manager took."""
    manager = _by_name(fleet_prod, RUNTIME)
    assert sorted(manager) == sorted(trainer_runtime_names())

    def canonical(runtime: dict[str, Any], *, image: bool) -> str:
        runtime = copy.deepcopy(runtime)
        if not image:
            for container in _runtime_pod(runtime)["containers"]:
                container["image"] = "<regional>"
        return json.dumps(runtime, sort_keys=True)

    workers = list(fleet_prod.workers.values())
    assert workers
    for worker in workers:
        theirs = _by_name(worker, RUNTIME)
        assert sorted(theirs) == sorted(manager)
        for name, runtime in manager.items():
            assert canonical(theirs[name], image=False) == canonical(runtime, image=False), name
    first = _by_name(workers[0], RUNTIME)
    assert all(
        canonical(first[n], image=True) == canonical(r, image=True) for n, r in manager.items()
    )


def test_policy_reads_a_trainjobs_grace_from_its_runtime_never_its_patch(dev: SynthResult) -> None:
    """The pods' grace period is the runtime's (Kueue v0.19.2 drops a patch's): a spot TrainJob
    on a runtime whose grace the policy cannot know is refused, whatever its patch says."""
    from policies.rules import compute as platform
    from policies.rules.common import Resource

    config = {"minGracePeriodSeconds": 120}
    job = copy.deepcopy(_by_name(dev, TRAIN_JOB)["ddp-trainjob"])
    assert job["spec"]["runtimeRef"]["name"] == "gpu-platform-torch-research-g120"
    assert list(platform._check_spot_jobs(Resource(TRAIN_JOB, "t", "urn:t", job), config)) == []
    job["spec"]["runtimeRef"]["name"] = "someone-elses-runtime"
    patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    patch["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"
    ] = 300
    found = list(platform._check_spot_jobs(Resource(TRAIN_JOB, "t", "urn:t", job), config))
    assert any("terminationGracePeriodSeconds None < 120" in m for m in found), found


def test_dropped_fields_labels_list_items_by_name_else_index_and_skips_what_is_no_mapping() -> None:
    schema = [{"name": None, "kept": None}]
    items = [{"name": "node", "extra": 1}, {"extra": 2}, 5, "text"]
    assert list(trainer.dropped_fields(items, schema, "jobs")) == [
        "jobs[node].extra",
        "jobs[1].extra",
    ]
    # A value that is no list where the schema has one (a malformed patch) is no dropped field.
    assert list(trainer.dropped_fields(5, schema, "jobs")) == []


def test_a_patch_problem_names_the_launcher_and_every_dropped_field_of_each_patch() -> None:
    job = {"spec": {"runtimePatches": [{"manager": "m"}, {"manager": "m", "extra": 1, "more": {}}]}}
    assert trainer.patch_problems("trainingJobs[4]", job) == [
        Problem(
            "trainingJobs[4].launcher",
            "kubeflow",
            "a TrainJob whose runtime patches set only fields of Trainer v2.2.1's RuntimePatch, "
            "the types Kueue v0.19.2 writes TrainJobs back with (a field they lack is dropped on "
            "admission and on MultiKueue's copy, kubeflow/trainer@v2.2.1 "
            "pkg/apis/trainer/v1alpha1/trainjob_types.go L287-481): runtimePatches[1].extra, "
            "runtimePatches[1].more would never reach the pods (the pod's grace period belongs "
            "in the ClusterTrainingRuntime)",
        )
    ]


# --- the runtime must exist -------------------------------------------------------------------


def test_a_trainjob_whose_runtime_is_not_rendered_is_refused() -> None:
    plan, _ = _trainjob()
    key, job = plan.facts.key, plan.job
    assert trainer.runtime_problems(key, job, trainer_runtime_names()) == []
    others = [n for n in trainer_runtime_names() if n != job.trainer_runtime]
    (problem,) = trainer.runtime_problems(key, job, others)
    assert problem.key == "trainingJobs[2].checkpoint.saveSeconds"
    assert f"runtime {job.trainer_runtime}" in problem.allowed
    native = job.model_copy(update={"launcher": "native"})
    assert trainer.runtime_problems(key, native, []) == []


def test_a_missing_runtime_names_the_save_time_the_grace_and_the_platforms_runtimes() -> None:
    plan, _ = _trainjob()
    key, job = plan.facts.key, plan.job
    runtimes = ["gpu-platform-torch-dev-g240", "other-runtime", "gpu-platform-torch-dev-g120"]
    tail = "(save faster, or use launcher native)"
    head = (
        "a save whose shutdown fits a grace period of a ClusterTrainingRuntime the platform "
        "renders: the pods need 120 s (runtime gpu-platform-torch-research-g120), and the "
        "platform has"
    )
    assert trainer.runtime_problems(key, job, runtimes) == [
        Problem(
            "trainingJobs[2].checkpoint.saveSeconds",
            20.0,
            f"{head} gpu-platform-torch-dev-g120, gpu-platform-torch-dev-g240 {tail}",
        )
    ]
    assert trainer.runtime_problems(key, job, ["other-runtime"]) == [
        Problem("trainingJobs[2].checkpoint.saveSeconds", 20.0, f"{head} none {tail}")
    ]


def test_a_job_stack_refuses_a_trainjob_its_platform_has_no_runtime_for(prod: SynthResult) -> None:
    platform = prod.outputs["jobPlatform"]
    assert platform["trainingRuntimes"] == list(trainer_runtime_names())
    older = {**platform, "trainingRuntimes": ["gpu-platform-torch-research"]}
    stale = SynthResult(stack="prod", outputs={**prod.outputs, "jobPlatform": older})
    with pytest.raises(ConfigError) as caught:
        run_job_stack("research-prod", platform=stale)
    (line,) = caught.value.lines
    assert line.startswith("gpu-platform-jobs:trainingJobs[0].checkpoint.saveSeconds: got 30")
    assert "runtime gpu-platform-torch-research-g120" in line
