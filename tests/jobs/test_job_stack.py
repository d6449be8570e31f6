"""Team job stacks (jobs/): synthesized against the platform's own synth, judged by the
platform's job rules, confined to the team's namespace."""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.config import ConfigError
from components.contract.job_platform import PlatformContract
from synth import __main__ as synth_cli
from synth import output, policy
from synth.harness import PROJECT_ROOT, Registration, SynthResult
from synth.jobs import JOBS_ROOT, run_job_stack
from synth.report import PLATFORM_SECTIONS, report
from tests.jobs.conftest import JOB_STACKS, job_stack_values

K8S_JOB = "kubernetes:batch/v1:Job"
LAUNCHERS = {
    K8S_JOB,
    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",
    "kubernetes:batch.volcano.sh/v1alpha1:Job",
}


def _stack(name: str, request: pytest.FixtureRequest) -> SynthResult:
    return request.getfixturevalue(name.replace("-", "_"))


@pytest.fixture(params=sorted(JOB_STACKS))
def job_stack(request: pytest.FixtureRequest) -> tuple[str, SynthResult]:
    return request.param, _stack(request.param, request)


def _kubernetes(result: SynthResult) -> list[Registration]:
    return [r for r in result.resources if r.type.startswith("kubernetes:")]


def test_every_committed_job_stack_is_tested() -> None:
    stacks = {p.stem.removeprefix("Pulumi.") for p in JOBS_ROOT.glob("Pulumi.*.yaml")}
    assert stacks == set(JOB_STACKS)


def test_job_stacks_deploy_their_jobs(job_stack: tuple[str, SynthResult]) -> None:
    name, result = job_stack
    jobs = job_stack_values(name)["trainingJobs"]
    components = result.of_type("gpu-platform:training:TrainingJob")
    assert sorted(c.name for c in components) == sorted(
        f"jobs-{JOB_STACKS[name][1]}-{job['name']}" for job in jobs
    )
    launchers = [r for r in result.resources if r.type in LAUNCHERS]
    assert len(launchers) == len(jobs)
    assert result.outputs["namespace"] == JOB_STACKS[name][2]


def test_rendered_objects_are_all_in_the_team_namespace(
    job_stack: tuple[str, SynthResult],
) -> None:
    name, result = job_stack
    namespace = JOB_STACKS[name][2]
    objects = _kubernetes(result)
    assert objects
    assert {r.inputs["metadata"].get("namespace") for r in objects} == {namespace}
    # Nothing but the jobs' objects, their components and the provider: no cloud resources.
    others = {r.type for r in result.resources if not r.type.startswith("kubernetes:")}
    assert others == {
        "gpu-platform:training:TeamJobs",
        "gpu-platform:training:TrainingJob",
        "pulumi:providers:kubernetes",
    }
    (provider,) = result.of_type("pulumi:providers:kubernetes")
    assert provider.inputs["namespace"] == namespace
    assert all(r.provider.startswith(provider.urn) for r in objects)


def test_job_stacks_pass_the_policy_pack_with_their_config(
    job_stack: tuple[str, SynthResult],
) -> None:
    name, result = job_stack
    from policies.rules import all_policies

    policies = all_policies()
    config = policy.load_config(policy.config_path(JOBS_ROOT, name), policies)
    assert config["gpu-platform-job-stack-confined"]["teamNamespace"] == JOB_STACKS[name][2]
    violations = policy.evaluate(result, policies, config)
    assert [v for v in violations if policy.is_mandatory(v)] == []


def test_confinement_rule_refuses_a_cluster_scoped_object_in_a_job_stack(
    research_dev: SynthResult,
) -> None:
    from policies.rules import all_policies

    policies = all_policies()
    config = policy.load_config(policy.config_path(JOBS_ROOT, "research-dev"), policies)
    job = research_dev.of_type(K8S_JOB)[0]
    stray = [
        Registration(
            urn=job.urn.replace("batch/v1:Job", "rbac.authorization.k8s.io/v1:ClusterRole"),
            type="kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
            name="stray",
            parent=job.parent,
            provider=job.provider,
            dependencies=(),
            custom=True,
            inputs={"metadata": {"name": "stray"}},
        ),
        Registration(
            urn=job.urn + "-other",
            type=K8S_JOB,
            name="other",
            parent=job.parent,
            provider=job.provider,
            dependencies=(),
            custom=True,
            inputs={**job.inputs, "metadata": {"name": "x", "namespace": "team-applied"}},
        ),
    ]
    doctored = SynthResult(stack="research-dev", resources=[*research_dev.resources, *stray])
    found = [
        v
        for v in policy.evaluate(doctored, policies, config)
        if v.policy == "gpu-platform-job-stack-confined"
    ]
    assert sorted(v.urn for v in found) == sorted(s.urn for s in stray)
    assert all(policy.is_mandatory(v) for v in found)


def test_job_stack_policy_configs_name_the_teams_namespace(dev: SynthResult) -> None:
    # Each job stack's pack config confines it to the namespace its platform gives its team.
    for name, (_, _team, namespace) in JOB_STACKS.items():
        config = json.loads((JOBS_ROOT / "policies" / f"config.{name}.json").read_text())
        assert config["gpu-platform-job-stack-confined"] == {"teamNamespace": namespace}
    assert dev.outputs["jobPlatform"]["teams"]["research"]["namespace"] == "team-research"


# --- jobs that cannot run: exit 2 naming the key ------------------------------------------------


def _with_job(stack: str, **changes: Any) -> list[dict[str, Any]]:
    jobs = copy.deepcopy(job_stack_values(stack)["trainingJobs"])
    jobs[0].update(changes)
    return jobs


@pytest.mark.parametrize(
    ("stack", "changes", "key", "allowed"),
    [
        # dev has no H100s at all.
        (
            "research-dev",
            {"gpuClass": "h100-x8"},
            "trainingJobs[0].gpuClass",
            "a GPU class the pools provide (a10g-x1, l4-x1)",
        ),
        # research may use 2 spot A10Gs + 2 borrowed: 8 nodes x 1 GPU is over its quota.
        ("research-dev", {"nodes": 8}, "trainingJobs[0].nodes", "fits no quota of team research"),
        # pretrain's on-demand H100 quota is 24 GPUs (no borrowing bound: the pools' capacity).
        ("pretrain-prod", {"nodes": 64}, "trainingJobs[0].nodes", "GPUs the h100-x8"),
        # issue 15: an EFA job spread across zones, or more EFA devices than a p5 has (32).
        ("pretrain-prod", {"zones": "any"}, "trainingJobs[0].zones", "single (or leave it out)"),
        ("pretrain-prod", {"efaDevices": 33}, "trainingJobs[0].efaDevices", "at most 32"),
        # issue 16: images prod admission (Deny) would reject, refused before deploy.
        (
            "research-prod",
            {"image": "docker.io/library/python:3.11@sha256:" + "a" * 64},
            "trainingJobs[0].image",
            "the trusted-images admission policy denies",
        ),
        (
            "research-prod",
            {"image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1@sha256:" + "a" * 64},
            "trainingJobs[0].image",
            "a repository the platform key",
        ),
        # issue 30: a job stack resolves no tags (it makes no AWS call of its own).
        (
            "research-dev",
            {"image": "123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1"},
            "trainingJobs[0].image",
            "a job stack resolves no tags",
        ),
        ("research-dev", {"team": "applied"}, "trainingJobs[0].team", "research (a job stack"),
        # The platform stack's own smoke job holds this name in team-research.
        ("research-dev", {"name": "ddp-smoke"}, "trainingJobs[0].name", "platform stack's own"),
    ],
)
def test_a_job_that_cannot_run_is_a_config_error_naming_its_key(
    stack: str,
    changes: dict[str, Any],
    key: str,
    allowed: str,
    request: pytest.FixtureRequest,
) -> None:
    platform = request.getfixturevalue(JOB_STACKS[stack][0])
    with pytest.raises(ConfigError) as caught:
        run_job_stack(
            stack,
            overrides={"trainingJobs": _with_job(stack, **changes)},
            platform=platform,
        )
    lines = [line for line in caught.value.lines if line.startswith(f"gpu-platform-jobs:{key}:")]
    assert lines, caught.value.lines
    assert any(allowed in line for line in lines), lines


def test_unknown_team_and_a_missing_contract_name_the_key(dev: SynthResult) -> None:
    with pytest.raises(ConfigError) as caught:
        run_job_stack(
            "research-dev",
            overrides={"team": "nobody", "trainingJobs": _with_job("research-dev", team="nobody")},
            platform=dev,
        )
    assert caught.value.lines == [
        "gpu-platform-jobs:team: got 'nobody'; a team of gpu-platform/gpu-platform/dev "
        "(applied, research)"
    ]
    with pytest.raises(ConfigError) as caught:
        run_job_stack("research-dev", platform=SynthResult(stack="dev"))
    assert caught.value.lines[0].startswith("gpu-platform-jobs:platformStack: got ")
    assert caught.value.lines == [
        "gpu-platform-jobs:platformStack: got 'gpu-platform/gpu-platform/dev'; a deployed "
        "platform stack exporting `jobPlatform`"
    ]
    # A platform deployed before the contracts were typed exported version "3-<hash>".
    stale = {**dev.outputs, "jobPlatform": {**dev.outputs["jobPlatform"], "version": "3-0"}}
    with pytest.raises(ConfigError) as caught:
        run_job_stack("research-dev", platform=SynthResult(stack="dev", outputs=stale))
    assert caught.value.lines == [
        "gpu-platform-jobs:platformStack: got 'gpu-platform/gpu-platform/dev'; `jobPlatform` "
        f"version {PlatformContract.current_version()} (it has 3-0): deploy the platform stack "
        "from this repository's revision first (the version follows the contract's models, the "
        "config model included)"
    ]
    # Of this version but another shape: the field is named.
    teams = dev.outputs["jobPlatform"]["teams"]
    odd = {**teams, "research": {**teams["research"], "claims": {"checkpoints": "c"}}}
    broken = {**dev.outputs, "jobPlatform": {**dev.outputs["jobPlatform"], "teams": odd}}
    with pytest.raises(ConfigError) as caught:
        run_job_stack("research-dev", platform=SynthResult(stack="dev", outputs=broken))
    assert caught.value.lines[0].startswith(
        "gpu-platform-jobs:platformStack: got 'gpu-platform/gpu-platform/dev'; `jobPlatform` as "
        "this revision reads it (jobPlatform.teams.research.claims.datasets: required key is "
        "missing): deploy the platform stack"
    )


def _containers(value: Any) -> list[dict[str, Any]]:
    """Every entry of every `containers` list in a manifest (pod templates at any depth)."""
    if isinstance(value, dict):
        own = [c for c in value.get("containers") or [] if isinstance(c, dict)]
        return own + [c for item in value.values() for c in _containers(item)]
    if isinstance(value, list):
        return [c for item in value for c in _containers(item)]
    return []


def test_a_job_without_an_image_runs_the_platforms_trainer_by_its_pushed_digest(
    dev: SynthResult, research_dev: SynthResult
) -> None:
    trainer = dev.outputs["trainerImage"]
    assert trainer == dev.outputs["jobPlatform"]["trainerImage"]
    assert trainer.startswith(
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/gpu-dev/trainer@sha256:"
    )
    images = {
        container["image"] for m in output.manifests(research_dev) for container in _containers(m)
    }
    assert images == {trainer}
    # A platform that publishes no trainer: a job without an image cannot run.
    contract = {**dev.outputs["jobPlatform"], "trainerImage": None}
    with pytest.raises(ConfigError) as caught:
        run_job_stack(
            "research-dev",
            platform=SynthResult(stack="dev", outputs={**dev.outputs, "jobPlatform": contract}),
        )
    assert any("publishes no trainerImage" in line for line in caught.value.lines)


def test_cli_job_stack_exit_codes(
    make_job_stack: Callable[[dict[str, Any], str], Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    out = tmp_path / "out"
    assert synth_cli.main(["--project", "jobs", "--stack", "research-dev", "--out", str(out)]) == 0
    assert json.loads((out / "resources.json").read_text())
    config = job_stack_values("research-dev")
    config["trainingJobs"] = _with_job("research-dev", gpuClass="h100-x8")
    project = make_job_stack(config, "research-dev")
    capsys.readouterr()
    rc = synth_cli.main(["--project", "jobs", "--stack", "t", "--project-dir", str(project)])
    err = capsys.readouterr().err
    assert rc == 2
    assert 'gpu-platform-jobs:trainingJobs[0].gpuClass: got "h100-x8"' in err
    assert "Traceback" not in err


def test_python_m_synth_project_jobs_exits_2_naming_the_job(
    make_job_stack: Callable[[dict[str, Any], str], Path],
) -> None:
    config = job_stack_values("research-dev")
    config["trainingJobs"] = _with_job("research-dev", nodes=8)
    project = make_job_stack(config, "research-dev")
    env = {k: v for k, v in os.environ.items() if k != "PULUMI_CONFIG"}
    args = ["--project", "jobs", "--stack", "t", "--project-dir", str(project)]
    proc = subprocess.run(
        [sys.executable, "-m", "synth", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.startswith("gpu-platform-jobs:trainingJobs[0].nodes: got 8; "), proc.stderr
    assert "Traceback" not in proc.stderr


def test_team_jobs_refuse_manifests_outside_the_namespace() -> None:
    from components.training_jobs.job_stack import namespace_problems

    inside = {"kind": "Job", "metadata": {"name": "a", "namespace": "team-research"}}
    other = {"kind": "Job", "metadata": {"name": "b", "namespace": "team-applied"}}
    cluster = {"kind": "ClusterTrainingRuntime", "metadata": {"name": "c"}}
    assert namespace_problems([inside], "team-research") == []
    assert namespace_problems([inside, other, cluster], "team-research") == [
        "Job/b in team-applied",
        "ClusterTrainingRuntime/c in no namespace (cluster-scoped)",
    ]


def test_job_stack_report_says_whether_each_of_its_jobs_will_run(
    job_stack: tuple[str, SynthResult],
) -> None:
    """The ML engineer's preview: "Will it run" for the stack's own jobs (not the platform's
    validation Jobs), judged against the platform's config as jobs/__main__.py judges them."""
    name, result = job_stack
    section = report(result).split("## Will it run", 1)[1].split("\n## ", 1)[0]
    jobs = job_stack_values(name)["trainingJobs"]
    headings = [line for line in section.splitlines() if line.startswith("### ")]
    assert len(headings) == len(jobs), section
    # A fleet job stack's heading names the regions that can run each job (runs in n of m).
    assert all("— **runs**" in h or "— **runs in" in h for h in headings)
    assert all(any(f"/{job['name']}`" in h for h in headings) for job in jobs)


def test_pretrain_report_places_the_efa_gang_in_one_zone(pretrain_prod: SynthResult) -> None:
    section = report(pretrain_prod).split("## Will it run", 1)[1].split("\n## ", 1)[0]
    block = section.split("### `team-pretrain/pretrain-7b`", 1)[1].split("\n### ", 1)[0]
    assert "32 `vpc.amazonaws.com/efa` per pod, allocatable " in block
    assert "32 on `ng-h100-od`" in block
    assert "one zone (required podAffinity on topology.kubernetes.io/zone" in block
    assert "cluster placement group" in block


def test_job_stack_report_points_at_the_platform_for_platform_sections(
    job_stack: tuple[str, SynthResult], dev: SynthResult
) -> None:
    _, result = job_stack
    text = report(result)
    for heading in PLATFORM_SECTIONS:
        assert f"## {heading}\n" not in text
        assert f"## {heading}\n" in report(dev)  # the platform's report keeps them
    assert "in the platform stack's report" in text
    assert "## Will it run" in text
    # The device plugins its pods need are the platform's (no false "stays Pending").
    assert "advertises it" not in text


def test_a_job_stack_synth_judges_its_jobs_once(
    dev: SynthResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    from components import analysis

    calls: list[Any] = []
    original = analysis.judge

    def counted(facts: Any) -> Any:
        calls.append(original(facts))
        return calls[-1]

    monkeypatch.setattr(analysis, "judge", counted)
    result = run_job_stack("research-dev", platform=dev)
    # jobs/__main__.py judges them once; the synth reads that very judgement and its facts.
    assert len(calls) == 1
    assert result.judgement is calls[0]
    assert result.config is result.facts.cfg
    assert [j.name for j in result.config.training_jobs] == ["ddp-lr-sweep", "fsdp-volcano"]
