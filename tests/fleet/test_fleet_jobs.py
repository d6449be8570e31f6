"""A team submits once, to the fleet's manager (jobs/Pulumi.pretrain-fleet.yaml): what the job
stack renders for MultiKueue, "will it run" per worker and region, and every job MultiKueue
cannot carry refused naming its key (components/analysis/fleet.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components import catalog
from components.analysis import costs
from components.config import ConfigError
from synth.harness import SynthResult
from synth.jobs import run_job_stack
from synth.report import report
from tests.jobs.conftest import job_stack_values

TRAIN_JOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"


def _jobs(result: SynthResult) -> dict[str, dict[str, Any]]:
    return {j.inputs["metadata"]["name"]: j.inputs for j in result.of_type(TRAIN_JOB)}


def test_fleet_jobs_are_multikueues_and_read_their_regions_data(
    pretrain_fleet: SynthResult, prod_use1: SynthResult
) -> None:
    jobs = _jobs(pretrain_fleet)
    assert set(jobs) == {"pretrain-7b", "eval-l4", "sft-7b"}
    # The fleet's one trainer: the home's (prod-use1) reference, in every job and every runtime.
    trainer = prod_use1.outputs["trainerImage"]
    assert ".us-east-1." in trainer and "@sha256:" in trainer
    for spec in (j["spec"] for j in jobs.values()):
        assert spec["managedBy"] == catalog.MULTIKUEUE_CONTROLLER
        assert spec["trainer"]["image"] == trainer
        env = spec["trainer"]["env"]
        assert env[0] == {
            "name": "CHECKPOINT_BUCKET",
            "valueFrom": {
                "configMapKeyRef": {
                    "name": catalog.FLEET_DATA_CONFIGMAP,
                    "key": "checkpointsBucket",
                }
            },
        }
        values = {e["name"]: e.get("value") for e in env}
        assert values["IMAGE_DIGEST"] == trainer.rsplit("@", 1)[1]
        assert any(
            a.startswith("s3://$(CHECKPOINT_BUCKET)/pretrain/") for a in spec["trainer"]["args"]
        )
    pretrain = jobs["pretrain-7b"]["spec"]
    args = pretrain["trainer"]["args"]
    config = json.loads(args[args.index("--ds-config-json") + 1])
    assert config["zero_optimization"]["stage"] == 3
    assert "--ds-config" not in args
    # No object but the jobs: a ConfigMap or Secret would stay on the manager.
    assert {r.type for r in pretrain_fleet.resources if r.type.startswith("kubernetes:")} == {
        TRAIN_JOB
    }
    pod = pretrain["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    affinity = pod["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["affinity"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expressions = terms["nodeSelectorTerms"][0]["matchExpressions"]
    assert {"key": catalog.REGION_LABEL, "operator": "In", "values": ["us-east-1"]} in expressions


def test_will_it_run_names_the_regions_that_can_and_cannot(pretrain_fleet: SynthResult) -> None:
    judged = {fj.job.name: fj for fj in pretrain_fleet.fleet_jobs.judgement.jobs}
    pretrain = judged["pretrain-7b"]
    assert [r.label for r in pretrain.runnable_on] == ["use1 (us-east-1)"]
    (west,) = [r for r in pretrain.regions if not r.runnable]
    assert west.problems[0].key == "trainingJobs[0].regions"
    assert [r.label for r in judged["eval-l4"].runnable_on] == [
        "use1 (us-east-1)",
        "usw2 (us-west-2)",
    ]
    section = report(pretrain_fleet).split("## Will it run", 1)[1].split("\n## ", 1)[0]
    assert "— **runs in 1 of 2 regions**: use1 (us-east-1)" in section
    assert "- not on usw2 (us-west-2): `trainingJobs[0].regions`" in section
    assert "≈ $" in section and "cross-region transfer" in section


def test_a_fleet_jobs_replication_is_sized_once_on_its_home_worker(
    pretrain_fleet: SynthResult,
) -> None:
    """The analysis sizes it (FleetJob.replication, analysis/costs.py replication) from the
    home worker's facts; the report prints that value."""
    judged = {fj.job.name: fj for fj in pretrain_fleet.fleet_jobs.judgement.jobs}
    pretrain, evaluation = judged["pretrain-7b"], judged["eval-l4"]
    home = pretrain.home.job if pretrain.home is not None else None
    assert home is not None and home.model_state_gib is not None
    assert pretrain.replication == costs.replication(
        home.model_state_gib, home.checkpoint_interval_s, len(pretrain.regions) - 1
    )
    assert evaluation.replication is not None and evaluation.replication.gib_per_hour is None
    section = report(pretrain_fleet)
    assert f"≈ {pretrain.replication.gib_per_hour:.0f} GiB/h" in section


def test_the_pod_is_pinned_to_what_every_capable_worker_offers(pretrain_fleet: SynthResult) -> None:
    judged = {fj.job.name: fj for fj in pretrain_fleet.fleet_jobs.judgement.jobs}
    eval_l4 = judged["eval-l4"]
    capable = [r.job for r in eval_l4.runnable_on if r.job is not None]
    assert eval_l4.job.cpu == min(jf.resources.cpu for jf in capable)
    assert eval_l4.job.memory_gib == min(jf.resources.memory_gib for jf in capable)
    assert eval_l4.job.efa is False


def _submit(fleet: SynthResult, job: dict[str, Any]) -> SynthResult:
    base = job_stack_values("pretrain-fleet")["trainingJobs"][1]
    return run_job_stack(
        "pretrain-fleet", overrides={"trainingJobs": [{**base, **job}]}, platform=fleet
    )


@pytest.mark.parametrize(
    ("job", "expected"),
    [
        (
            {"launcher": "volcano", "scheduler": "volcano"},
            'gpu-platform-jobs:trainingJobs[0].launcher: got "volcano"; kubeflow (or native) '
            "with scheduler kueue: Kueue's MultiKueue has no adapter for Volcano Jobs",
        ),
        (
            {"launcher": "native"},
            'gpu-platform-jobs:trainingJobs[0].launcher: got "native"; kubeflow for a '
            "multi-node fleet job",
        ),
        (
            {"secrets": [{"name": "wandb", "files": ["api_key"]}]},
            'gpu-platform-jobs:trainingJobs[0].secrets: got ["wandb"]; left out of a fleet job',
        ),
        (
            {"regions": ["eu-west-1"]},
            'gpu-platform-jobs:trainingJobs[0].regions: got ["eu-west-1"]; regions of the '
            "fleet's workers (us-east-1, us-west-2)",
        ),
        (
            {"checkpoint": {"volume": True, "saveSeconds": 20}},
            'gpu-platform-jobs:trainingJobs[0].checkpoint: got {"s3Prefix": null, "volume": '
            "true}; an s3Prefix",
        ),
    ],
    ids=["volcano", "native-multi-node", "secrets", "unknown-region", "volume-only"],
)
def test_what_multikueue_cannot_carry_is_refused(
    fleet_prod: SynthResult, job: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        _submit(fleet_prod, job)
    assert any(line.startswith(expected) for line in caught.value.lines), caught.value.lines


def test_a_volume_checkpoint_runs_when_pinned_to_one_region(fleet_prod: SynthResult) -> None:
    result = _submit(
        fleet_prod, {"checkpoint": {"volume": True, "saveSeconds": 20}, "regions": ["us-west-2"]}
    )
    (judged,) = result.fleet_jobs.judgement.jobs
    assert [r.label for r in judged.runnable_on] == ["usw2 (us-west-2)"]


def test_a_job_no_worker_can_run_names_every_worker(fleet_prod: SynthResult) -> None:
    with pytest.raises(ConfigError) as caught:
        _submit(fleet_prod, {"nodes": 40})
    lines = caught.value.lines
    assert any("[worker use1 (us-east-1)]" in line for line in lines), lines
    assert any("[worker usw2 (us-west-2)]" in line for line in lines), lines
    assert all(line.startswith("gpu-platform-jobs:trainingJobs[0].") for line in lines), lines


def test_a_job_only_some_workers_can_run_is_pinned_to_their_regions(
    fleet_prod: SynthResult,
) -> None:
    # Two on-demand p5 nodes: team pretrain's on-demand H100 quota is 8 GPUs on use1 and 16 on
    # usw2. use1 would still get the Workload from MultiKueue, so the job is pinned (issue #36).
    result = _submit(
        fleet_prod,
        {"gpuClass": "h100-x8", "capacity": "on-demand", "nodes": 2, "regions": None},
    )
    (judged,) = result.fleet_jobs.judgement.jobs
    assert judged.auto_pinned == ("us-west-2",)
    assert judged.job.regions == ["us-west-2"]
    assert [r.label for r in judged.runnable_on] == ["usw2 (us-west-2)"]
    (job,) = _jobs(result).values()
    pod = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    affinity = pod["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["affinity"]
    terms = affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    region = {"key": catalog.REGION_LABEL, "operator": "In", "values": ["us-west-2"]}
    assert region in terms["nodeSelectorTerms"][0]["matchExpressions"]
    assert "- pinned to us-west-2" in report(result)


def test_a_job_every_worker_can_run_is_not_pinned(pretrain_fleet: SynthResult) -> None:
    judged = {fj.job.name: fj for fj in pretrain_fleet.fleet_jobs.judgement.jobs}
    assert judged["eval-l4"].auto_pinned == () and judged["eval-l4"].job.regions is None


def test_a_region_pin_that_cannot_tell_workers_apart_is_refused() -> None:
    from components.analysis.fleet_jobs import Region, region_pin
    from components.config import Problem

    job = job_stack_values("pretrain-fleet")["trainingJobs"][1]
    from components.config.training import TrainingJobConfig

    config = TrainingJobConfig.model_validate({**job, "team": "pretrain"})
    no_efa = (Problem("trainingJobs[0].efa", True, "EFA devices"),)
    judged = [
        Region("a", "us-east-1", True),
        Region("b", "us-east-1", False, no_efa),
        Region("c", "us-west-2", True),
    ]
    pin, problems = region_pin(config, 3, judged)
    assert pin == ()
    (problem,) = problems
    assert problem.key == "trainingJobs[3].regions"
    assert "worker b (us-east-1) cannot (EFA devices)" in problem.allowed
    assert region_pin(config, 3, [judged[0], judged[2]]) == ((), [])
    assert region_pin(config, 3, [judged[0], Region("d", "us-west-2", False, no_efa)]) == (
        ("us-east-1",),
        [],
    )


def test_regions_are_refused_on_a_platform_that_is_no_fleet(dev: SynthResult) -> None:
    from components.analysis import validate

    job = dev.config.training_jobs[0].model_copy(update={"regions": ["us-east-1"]})
    cfg = dev.config.model_copy(update={"training_jobs": [job]})
    (problem,) = [p for p in validate(cfg) if p.key == "trainingJobs[0].regions"]
    assert problem.allowed.startswith("left out: a platform stack is one region")
