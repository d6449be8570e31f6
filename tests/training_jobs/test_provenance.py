"""Who deployed a run: the deploy workflow's actor and run URL become annotations on the
launcher objects (Job, TrainJob, Volcano Job) and nowhere in the pod template, so that another
person running `up` updates metadata in place instead of replacing a running job."""

from __future__ import annotations

import os
from typing import Any

import pytest

from components.training_jobs import plan as job_plan
from synth.harness import SynthResult, run_program
from synth.jobs import run_job_stack

BY = job_plan.DEPLOYED_BY_ANNOTATION
RUN = job_plan.DEPLOY_RUN_ANNOTATION
URL = "https://github.com/gpu-platform/gpu-platform/actions/runs/123456789"
LAUNCHERS = ("kubernetes:batch/v1:Job", "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob")


def _launchers(result: SynthResult) -> dict[str, dict[str, Any]]:
    out = {
        r.name: r.inputs
        for r in result.resources
        if r.type in LAUNCHERS or r.type.startswith("kubernetes:batch.volcano.sh/")
    }
    # Validation Jobs are platform objects, not training runs.
    return {
        name: inputs
        for name, inputs in out.items()
        if "training-job" in str(inputs["metadata"].get("labels", {}))
    }


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, {BY: "unknown"}),
        ({job_plan.DEPLOYED_BY_ENV: "octocat"}, {BY: "octocat"}),
        ({job_plan.DEPLOYED_BY_ENV: "dependabot[bot]"}, {BY: "dependabot[bot]"}),
        ({job_plan.DEPLOYED_BY_ENV: "  "}, {BY: "unknown"}),
        ({job_plan.DEPLOYED_BY_ENV: "a b\nc;$(x)"}, {BY: "a_b_c___x_"}),
        ({job_plan.DEPLOYED_BY_ENV: "x" * 500}, {BY: "x" * 128}),
        (
            {job_plan.DEPLOYED_BY_ENV: "octocat", job_plan.DEPLOY_RUN_ENV: URL},
            {BY: "octocat", RUN: URL},
        ),
        # Only an https URL without spaces is kept as the run link.
        ({job_plan.DEPLOY_RUN_ENV: "javascript:alert(1)"}, {BY: "unknown"}),
        ({job_plan.DEPLOY_RUN_ENV: "https://x/ y"}, {BY: "unknown"}),
    ],
)
def test_deploy_provenance_from_the_environment(
    environ: dict[str, str], expected: dict[str, str]
) -> None:
    assert job_plan.deploy_provenance(environ) == expected


def test_launchers_carry_who_deployed_and_pod_templates_do_not(dev: SynthResult) -> None:
    env = {job_plan.DEPLOYED_BY_ENV: "octocat", job_plan.DEPLOY_RUN_ENV: URL}
    alice = run_program("dev", deploy_env=env)
    launchers = _launchers(alice)
    assert launchers
    before = _launchers(dev)
    assert set(before) == set(launchers)
    for name, inputs in launchers.items():
        annotations = inputs["metadata"]["annotations"]
        assert annotations[BY] == "octocat" and annotations[RUN] == URL
        # The session synth ran without a deploy env: same objects, "unknown" deployer.
        assert before[name]["metadata"]["annotations"][BY] == "unknown"
        # Nothing under `spec` differs: `replace_on_changes` (spec.template, spec.trainer, ...)
        # sees no change, so another deployer never restarts a running job.
        assert inputs["spec"] == before[name]["spec"], name
        assert "octocat" not in str(inputs["spec"])


def test_synth_ignores_the_callers_environment(
    monkeypatch: pytest.MonkeyPatch, dev: SynthResult
) -> None:
    monkeypatch.setenv(job_plan.DEPLOYED_BY_ENV, "someone-local")
    result = run_program("dev")
    assert _launchers(result)
    for inputs in _launchers(result).values():
        assert inputs["metadata"]["annotations"][BY] == "unknown"
    # ...and restores it afterwards.
    assert os.environ[job_plan.DEPLOYED_BY_ENV] == "someone-local"


def test_job_stacks_record_who_deployed(prod: SynthResult) -> None:
    result = run_job_stack(
        "pretrain-prod", platform=prod, deploy_env={job_plan.DEPLOYED_BY_ENV: "octocat"}
    )
    launchers = _launchers(result)
    assert launchers
    for inputs in launchers.values():
        assert inputs["metadata"]["annotations"][BY] == "octocat"
