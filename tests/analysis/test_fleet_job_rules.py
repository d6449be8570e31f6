"""Judging a job submitted to a fleet's manager (components/analysis/fleet_jobs.py), on inputs
built as the program builds them and without a synth (tests/analysis/fleet_inputs.py): what
MultiKueue cannot carry, each worker's own judgement, the pod pinned to what every capable worker
offers, the region pin, and the manager's LimitRange. The whole-stack counterparts are
tests/fleet/test_fleet_jobs.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from components.analysis.costs import Replication, replication
from components.analysis.fleet_jobs import (
    Region,
    _one_region,
    _rekeyed,
    fleet_job_errors,
    fleet_job_problems,
    judge_fleet_job,
    judge_fleet_jobs,
    judge_on,
    pinned,
    region_pin,
)
from components.config import Problem
from tests.analysis.fleet_inputs import (
    TEST_TRAINER_IMAGE,
    VOLCANO_ALLOWED,
    fleet_job,
    fleet_jobs,
    read,
    three_workers,
)

# --- the committed jobs ----------------------------------------------------------------------


def test_the_committed_jobs_run_where_they_are_pinned_or_everywhere() -> None:
    fleet = read()
    judged = judge_fleet_jobs(fleet, fleet_jobs())
    assert judged.problems == ()
    assert [(fj.index, fj.key, fj.job.name) for fj in judged.jobs] == [
        (0, "trainingJobs[0]", "pretrain-7b"),
        (1, "trainingJobs[1]", "eval-l4"),
        (2, "trainingJobs[2]", "sft-7b"),
    ]
    pretrain, evaluation, sft = judged.jobs
    assert [r.label for r in pretrain.runnable_on] == ["use1 (us-east-1)"]
    assert [r.label for r in evaluation.runnable_on] == ["use1 (us-east-1)", "usw2 (us-west-2)"]
    assert [r.label for r in sft.runnable_on] == ["usw2 (us-west-2)"]
    assert [fj.auto_pinned for fj in judged.jobs] == [(), (), ()]
    assert [fj.job.regions for fj in judged.jobs] == [["us-east-1"], None, ["us-west-2"]]
    assert sft.regions[0] == Region(
        "use1",
        "us-east-1",
        False,
        (
            Problem(
                "trainingJobs[2].regions",
                ["us-west-2"],
                "pinned elsewhere [worker use1 (us-east-1)]",
            ),
        ),
    )
    assert sft.home is sft.regions[1]
    assert pretrain.home is pretrain.regions[0]
    # Each runnable worker's verdict and facts are its own.
    home = pretrain.regions[0]
    assert home.verdict is not None and home.verdict.key == "trainingJobs[0]"
    assert home.stack is not None and home.stack.cfg.cluster.name == "gpu-prod-use1"
    assert home.job is not None and home.job.job.name == "pretrain-7b"


def test_a_jobs_replication_is_sized_on_its_home_worker() -> None:
    fleet = read()
    pretrain, evaluation, _ = judge_fleet_jobs(fleet, fleet_jobs()).jobs
    home = pretrain.regions[0].job
    assert home is not None and home.model_state_gib is not None
    assert pretrain.replication == replication(home.model_state_gib, home.checkpoint_interval_s, 1)
    assert pretrain.replication is not None
    assert pretrain.replication.gib_per_hour == pytest.approx(35.889, abs=1e-3)
    # No modelParameters: nothing to size.
    assert evaluation.replication == Replication(1, None, None)


def test_the_pod_is_pinned_to_what_every_capable_worker_offers() -> None:
    fleet = read()
    evaluation = judge_fleet_job(fleet, 1, fleet_job())
    assert (
        evaluation.job.cpu,
        evaluation.job.memory_gib,
        evaluation.job.shm_gib,
        evaluation.job.efa,
        evaluation.job.efa_devices,
    ) == (2.0, 12, 3, False, None)
    pretrain = judge_fleet_job(fleet, 0, fleet_jobs()[0])
    assert (
        pretrain.job.cpu,
        pretrain.job.memory_gib,
        pretrain.job.shm_gib,
        pretrain.job.efa,
        pretrain.job.efa_devices,
    ) == (183.0, 1841, 64, True, 32)


def test_pinned_takes_the_least_of_every_capable_pod() -> None:
    use1 = read().workers[0]
    big = judge_on(use1, 0, fleet_jobs()[0]).job
    small = judge_on(use1, 0, fleet_job()).job
    assert big is not None and small is not None
    job = fleet_jobs()[0]
    assert pinned(job, []) is job
    both = pinned(job, [big, small])
    assert (both.cpu, both.memory_gib, both.shm_gib, both.efa, both.efa_devices) == (
        2.0,
        12,
        3,
        False,
        None,
    )
    assert (small.resources.cpu, small.resources.memory_gib, small.resources.shm_gib) == (
        2.0,
        12,
        3,
    )
    alone = pinned(job, [big])
    assert (alone.cpu, alone.memory_gib, alone.shm_gib, alone.efa, alone.efa_devices) == (
        183.0,
        1841,
        64,
        True,
        32,
    )
    assert pinned(job, [big, big]) == alone


def test_a_job_no_worker_can_run_names_every_worker() -> None:
    fleet = read()
    judged = judge_fleet_job(fleet, 4, fleet_job(nodes=40))
    assert judged.problems == () and judged.runnable_on == () and judged.home is None
    assert judged.replication == Replication(1, None, None)
    errors = fleet_job_errors([judged])
    assert errors == [p for r in judged.regions for p in r.problems]
    assert {p.allowed.rsplit(" [worker ", 1)[1] for p in errors} == {
        "use1 (us-east-1)]",
        "usw2 (us-west-2)]",
    }
    assert all(p.key.startswith("trainingJobs[4].") for p in errors)


def test_a_job_only_some_workers_can_run_is_pinned_to_their_regions() -> None:
    # Two on-demand p5 nodes: team pretrain's on-demand H100 quota is 8 GPUs on use1, 16 on
    # usw2 (Pulumi.prod-use1.yaml, Pulumi.prod-usw2.yaml).
    fleet = read()
    job = fleet_job(0, regions=None, capacity="on-demand")
    judged = judge_fleet_job(fleet, 0, job)
    assert judged.problems == ()
    assert judged.auto_pinned == ("us-west-2",)
    assert judged.job.regions == ["us-west-2"]
    assert [r.label for r in judged.runnable_on] == ["usw2 (us-west-2)"]
    assert judged.regions[0].problems == (
        Problem(
            "trainingJobs[0].regions", ["us-west-2"], "pinned elsewhere [worker use1 (us-east-1)]"
        ),
    )


def test_a_region_pin_that_cannot_tell_workers_apart_is_refused() -> None:
    fleet = three_workers()
    assert [w.label for w in fleet.workers] == [
        "use1 (us-east-1)",
        "usw2 (us-west-2)",
        "usw2b (us-west-2)",
    ]
    judged = judge_fleet_job(fleet, 3, fleet_job(0, regions=None, capacity="on-demand"))
    assert [r.runnable for r in judged.regions] == [False, True, False]
    assert judged.index == 3
    assert all(p.key.startswith("trainingJobs[3].") for r in judged.regions for p in r.problems)
    (problem,) = judged.problems
    assert problem.key == "trainingJobs[3].regions" and problem.value is None
    assert problem.allowed.startswith(
        "a fleet whose workers in us-west-2 can all run it: worker usw2b (us-west-2) cannot ("
    )
    assert problem.allowed.endswith(
        "), and a region pin cannot keep MultiKueue from dispatching it there"
    )
    assert judged.auto_pinned == () and judged.replication is None
    assert judged.job.regions is None


def test_region_pin_on_judged_regions() -> None:
    job = fleet_job()
    no_efa = (Problem("trainingJobs[0].efa", True, "EFA devices"),)
    quota = (Problem("trainingJobs[0].gpus", 16, "quota"),)
    a = Region("a", "us-east-1", True)
    b = Region("b", "us-east-1", False, no_efa + quota)
    c = Region("c", "us-west-2", True)
    d = Region("d", "us-west-2", False, no_efa)
    pin, problems = region_pin(job, 3, [a, b, c, d])
    assert pin == ()
    assert problems == [
        Problem(
            "trainingJobs[3].regions",
            None,
            f"a fleet whose workers in {r.region} can all run it: worker {r.label} cannot "
            f"({reasons}), and a region pin cannot keep MultiKueue from dispatching it there",
        )
        for r, reasons in [(b, "EFA devices; quota"), (d, "EFA devices")]
    ]
    assert region_pin(job, 3, [a, c]) == ((), [])
    assert region_pin(job, 3, [b, d]) == ((), [])
    e = Region("e", "eu-west-1", False, quota)
    assert region_pin(job, 3, [c, a, e]) == (("us-east-1", "us-west-2"), [])
    assert region_pin(job, 3, [c, b]) == (("us-west-2",), [])
    assert region_pin(fleet_job(regions=["us-east-1"]), 3, [a, b, c, d]) == ((), [])


# --- what MultiKueue cannot carry ------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        (
            {"launcher": "volcano", "scheduler": "volcano"},
            [Problem("trainingJobs[2].launcher", "volcano", VOLCANO_ALLOWED)],
        ),
        (
            {"launcher": "native", "nodes": 2},
            [
                Problem(
                    "trainingJobs[2].launcher",
                    "native",
                    "kubeflow for a multi-node fleet job: MultiKueue mirrors the Job, not the "
                    "headless Service its pods rendezvous through; a TrainJob's JobSet makes "
                    "its own on the worker",
                )
            ],
        ),
        ({"launcher": "native", "nodes": 1}, []),
        (
            {"secrets": [{"name": "wandb", "files": ["api_key"]}]},
            [
                Problem(
                    "trainingJobs[2].secrets",
                    ["wandb"],
                    "left out of a fleet job: its ExternalSecrets would be created on the "
                    "manager and MultiKueue mirrors only the job",
                )
            ],
        ),
        (
            {"regions": ["us-west-2", "eu-west-1"]},
            [
                Problem(
                    "trainingJobs[2].regions",
                    ["us-west-2", "eu-west-1"],
                    "regions of the fleet's workers (us-east-1, us-west-2)",
                )
            ],
        ),
        (
            {"checkpoint": {"volume": True, "saveSeconds": 20}},
            [
                Problem(
                    "trainingJobs[2].checkpoint",
                    {"volume": True, "s3Prefix": None},
                    "an s3Prefix (the fleet's checkpoints buckets replicate between regions), "
                    "or regions: [one region]: a checkpoint on a region's RWX volume is not in "
                    "any other, so a job dispatched again elsewhere would start over",
                )
            ],
        ),
        ({"checkpoint": {"volume": True, "saveSeconds": 20}, "regions": ["us-west-2"]}, []),
        ({"checkpoint": {"volume": True, "s3Prefix": "x", "saveSeconds": 20}}, []),
        ({}, []),
    ],
    ids=[
        "volcano",
        "native-multi-node",
        "native-one-node",
        "secrets",
        "unknown-region",
        "volume-only",
        "volume-one-region",
        "volume-and-s3",
        "committed",
    ],
)
def test_what_multikueue_cannot_carry(changes: dict[str, Any], expected: list[Problem]) -> None:
    assert fleet_job_problems(read(), 2, fleet_job(**changes)) == expected


def test_secret_env_is_refused_naming_its_key() -> None:
    job = fleet_job(secretEnv=[{"name": "HF_TOKEN", "secretName": "hf", "key": "token"}])
    (problem,) = fleet_job_problems(read(), 0, job)
    assert problem.key == "trainingJobs[0].secretEnv" and problem.value == ["HF_TOKEN"]


def test_a_job_is_judged_by_each_of_its_findings() -> None:
    (volcano, secrets) = fleet_job_problems(
        read(),
        1,
        fleet_job(
            launcher="volcano",
            scheduler="volcano",
            secrets=[{"name": "wandb", "files": ["api_key"]}],
        ),
    )
    assert (volcano.key, secrets.key) == ("trainingJobs[1].launcher", "trainingJobs[1].secrets")
    volcano_job = fleet_job(launcher="volcano", scheduler="volcano")
    judged = judge_fleet_job(read(), 1, volcano_job)
    assert (judged.index, judged.job) == (1, volcano_job)
    assert judged.problems == (Problem("trainingJobs[1].launcher", "volcano", VOLCANO_ALLOWED),)
    assert judged.regions == () and judged.replication is None
    assert fleet_job_errors([judged]) == list(judged.problems)


def test_an_image_a_worker_refuses_is_refused_and_the_fleets_trainer_is_the_default() -> None:
    fleet = read()
    image = "docker.io/library/busybox@sha256:" + "0" * 64
    (problem,) = fleet_job_problems(fleet, 1, fleet_job(image=image))
    assert (problem.key, problem.value) == ("trainingJobs[1].image", image)
    assert problem.allowed.startswith(
        "an image every worker the job may be dispatched to admits (worker use1 (us-east-1) "
        "refuses it: its trusted-images policy admits 123456789012.dkr.ecr.us-east-1."
        "amazonaws.com, ghcr.io/gpu-platform only, by digest; worker usw2 (us-west-2) refuses it"
    )
    # A job without an image runs the fleet's trainer: judged as that image.
    use1 = dataclasses.replace(
        fleet.workers[0],
        job_platform=fleet.workers[0].job_platform.model_copy(update={"trainer_image": image}),
    )
    refusing = dataclasses.replace(fleet, workers=(use1, *fleet.workers[1:]))
    assert refusing.trainer_image == image
    (default,) = fleet_job_problems(refusing, 1, fleet_job())
    assert (default.key, default.value) == ("trainingJobs[1].image", image)
    assert fleet_job_problems(refusing, 1, fleet_job(image=TEST_TRAINER_IMAGE)) == []


def test_one_region_is_a_pin_to_one_or_a_fleet_in_one() -> None:
    fleet = read()
    assert _one_region(fleet_job(regions=["us-west-2"]), fleet)
    assert not _one_region(fleet_job(regions=["us-west-2", "us-east-1"]), fleet)
    assert not _one_region(fleet_job(), fleet)
    single = dataclasses.replace(fleet, workers=fleet.workers[:1])
    assert _one_region(fleet_job(), single)
    assert _one_region(fleet_job(regions=["us-west-2", "us-east-1"]), single)


# --- one worker's judgement ------------------------------------------------------------------


def test_rekeyed_names_the_job_and_the_worker_and_keeps_only_job_keys() -> None:
    found = [
        Problem("trainingJobs[0].gpus", 8, "at most 4"),
        Problem("teams[0].quota", 1, "other"),
        Problem("trainingJobs[0].env.trainingJobs[0]", "x", "y"),
    ]
    assert _rekeyed(found, 7, "usw2 (us-west-2)") == (
        Problem("trainingJobs[7].gpus", 8, "at most 4 [worker usw2 (us-west-2)]"),
        Problem("trainingJobs[7].env.trainingJobs[0]", "x", "y [worker usw2 (us-west-2)]"),
    )


def test_judge_on_a_worker_outside_the_jobs_regions() -> None:
    usw2 = read().workers[1]
    assert judge_on(usw2, 5, fleet_job(regions=["us-east-1"])) == Region(
        "usw2",
        "us-west-2",
        False,
        (
            Problem(
                "trainingJobs[5].regions",
                ["us-east-1"],
                "pinned elsewhere [worker usw2 (us-west-2)]",
            ),
        ),
    )


def test_judge_on_a_job_the_workers_config_refuses() -> None:
    use1 = read().workers[0]
    region = judge_on(use1, 5, fleet_job(team="vision"))
    assert (region.worker, region.region, region.runnable, region.job) == (
        "use1",
        "us-east-1",
        False,
        None,
    )
    assert region.problems
    assert all(p.key.startswith("trainingJobs[5].") for p in region.problems)
    assert all(p.allowed.endswith(" [worker use1 (us-east-1)]") for p in region.problems)


def test_judge_on_a_job_the_worker_cannot_run() -> None:
    use1 = read().workers[0]
    region = judge_on(use1, 5, fleet_job(nodes=40))
    assert (region.runnable, region.job is not None, region.stack is not None) == (
        False,
        True,
        True,
    )
    assert region.problems and all(p.key.startswith("trainingJobs[5].") for p in region.problems)


def test_judge_on_a_job_the_worker_runs() -> None:
    usw2 = read().workers[1]
    region = judge_on(usw2, 5, fleet_job(regions=["us-west-2"]))
    assert (region.worker, region.region, region.runnable, region.problems) == (
        "usw2",
        "us-west-2",
        True,
        (),
    )
    assert region.job is not None and region.job.key == "trainingJobs[0]"
    assert region.verdict is not None and region.verdict.key == "trainingJobs[0]"
    assert region.stack is not None and region.stack.cfg.training_jobs == [region.job.job]
