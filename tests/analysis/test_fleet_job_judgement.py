"""Judging a fleet job, continued (components/analysis/fleet_jobs.py): the manager's LimitRange,
and what the first judgement decides — which workers size the pod, EFA, the team, the image's
regions. Inputs as tests/analysis/test_fleet_job_rules.py builds them (fleet_inputs.py)."""

from __future__ import annotations

from components.analysis.costs import Replication
from components.analysis.fleet_jobs import (
    FleetJob,
    Region,
    _team_namespace,
    fleet_job_errors,
    fleet_job_problems,
    judge_fleet_job,
    judge_fleet_jobs,
    judge_on,
    pinned,
)
from components.config import Problem
from tests.analysis.fleet_inputs import (
    VOLCANO_ALLOWED,
    committed_input,
    fleet_job,
    fleet_jobs,
    manager_config,
    read,
    three_workers,
    worker_values,
)

# --- the manager's LimitRange ----------------------------------------------------------------


def test_the_managers_limit_range_is_its_first_workers_and_refuses_once() -> None:
    """The manager's team is the first worker's (its LimitRange); a job that only the other
    workers' LimitRanges admit is refused on the manager, one line however many run it."""
    teams = worker_values("prod-use1", "teams")
    for team in teams:
        team["containerDefaults"] = {"cpuLimit": "1"}
    fleet = three_workers(teams=teams)
    judged = judge_fleet_job(fleet, 6, fleet_job())
    assert [r.runnable for r in judged.regions] == [False, True, True]
    assert judged.auto_pinned == ("us-west-2",)
    assert judged.index == 6
    (problem,) = judged.problems
    assert problem.key == "trainingJobs[6].cpu" and problem.value == 2.0
    assert problem.allowed.startswith(
        "requests within the limits team pretrain's LimitRange gives its containers in the "
        "fleet's manager (containerDefaults.cpuLimit 1, memoryLimit 16Gi)"
    )
    assert judged.replication is None
    assert judged.job.regions == ["us-west-2"]


def test_team_namespace_is_the_judged_jobs_else_the_first_teams() -> None:
    fleet = read()
    research = judge_fleet_job(fleet, 1, fleet_job(team="research"))
    assert research.runnable_on
    assert _team_namespace(fleet, research.regions) == "team-research"
    assert _team_namespace(fleet, [Region("a", "us-east-1", False)]) == "team-pretrain"
    assert _team_namespace(fleet, []) == "team-pretrain"


def test_fleet_job_errors_are_a_jobs_own_or_every_workers_when_none_runs() -> None:
    own = Problem("trainingJobs[0].launcher", "volcano", "kubeflow")
    west = Problem("trainingJobs[1].gpus", 40, "fewer [worker w]")
    east = Problem("trainingJobs[1].gpus", 40, "fewer [worker e]")
    job = fleet_job()
    refused = FleetJob(0, job, (own,), (Region("e", "us-east-1", False, (east,)),))
    none_runs = FleetJob(
        1,
        job,
        (),
        (Region("e", "us-east-1", False, (east,)), Region("w", "us-west-2", False, (west,))),
    )
    some_run = FleetJob(
        2, job, (), (Region("e", "us-east-1", False, (east,)), Region("w", "us-west-2", True))
    )
    assert fleet_job_errors([refused, none_runs, some_run]) == [own, east, west]
    assert fleet_job_errors([]) == []


def test_judge_fleet_jobs_judges_each_job_at_its_index() -> None:
    fleet = read()
    judged = judge_fleet_jobs(
        fleet, [fleet_job(launcher="volcano", scheduler="volcano"), fleet_job()]
    )
    assert [fj.index for fj in judged.jobs] == [0, 1]
    assert judged.problems == (Problem("trainingJobs[0].launcher", "volcano", VOLCANO_ALLOWED),)
    assert judge_fleet_jobs(fleet, []).jobs == ()


# --- what the first judgement decides --------------------------------------------------------


def test_only_the_workers_that_can_run_a_job_size_its_pod() -> None:
    """use1 judges the job (its pod is sized: g6.xlarge) but cannot run it (its l4 spot pools
    hold 12 GPUs, the job takes 13); usw2, whose l4 spot pool launches g6.2xlarge and larger, can:
    the pod is usw2's."""
    cfg = manager_config()
    use1_pools = worker_values("prod-use1", "karpenter")
    for pool in use1_pools["pools"]:
        if pool["name"] == "kp-l4-spot":
            pool["limits"] = {"gpus": 12}
    usw2_pools = worker_values("prod-usw2", "karpenter")
    for pool in usw2_pools["pools"]:
        if pool["name"] == "kp-l4-spot":
            pool["instanceTypes"] = ["g6.2xlarge", "g6.4xlarge", "g6.8xlarge"]
    fleet = read(
        cfg=cfg,
        inputs=[
            committed_input(cfg.workers[0], karpenter=use1_pools),
            committed_input(cfg.workers[1], karpenter=usw2_pools),
        ],
    )
    job = fleet_job(nodes=13)
    first = [judge_on(w, 1, job) for w in fleet.workers]
    assert [r.runnable for r in first] == [False, True]
    use1_pod, usw2_pod = (r.job for r in first)
    assert use1_pod is not None and usw2_pod is not None
    assert use1_pod.resources.cpu < usw2_pod.resources.cpu
    judged = judge_fleet_job(fleet, 1, job)
    assert judged.auto_pinned == ("us-west-2",)
    assert (judged.job.cpu, judged.job.memory_gib) == (
        usw2_pod.resources.cpu,
        usw2_pod.resources.memory_gib,
    )


def test_one_efa_device_is_efa() -> None:
    use1 = read().workers[0]
    one = judge_on(use1, 0, fleet_job(0, efaDevices=1)).job
    assert one is not None and one.resources.efa_devices == 1
    job = pinned(fleet_jobs()[0], [one])
    assert (job.efa, job.efa_devices) == (True, 1)


def test_a_job_no_worker_takes_is_judged_against_the_first_team() -> None:
    """A team no worker has: every worker's config refuses it, no worker sizes a pod, and the
    manager's LimitRange is the first team's (nothing to check it against)."""
    judged = judge_fleet_job(read(), 2, fleet_job(team="vision"))
    assert judged.index == 2 and judged.problems == ()
    assert [r.job for r in judged.regions] == [None, None]
    errors = fleet_job_errors([judged])
    assert errors and all(p.key.startswith("trainingJobs[2].") for p in errors)


def test_an_image_is_judged_only_on_the_workers_of_its_regions() -> None:
    """use1's own registry: use1 admits it, usw2 (another region's registry) does not."""
    image = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gpu-prod-use1/eval@sha256:" + "1" * 64
    fleet = read()
    assert fleet_job_problems(fleet, 1, fleet_job(image=image, regions=["us-east-1"])) == []
    (problem,) = fleet_job_problems(fleet, 1, fleet_job(image=image))
    assert problem.allowed.startswith(
        "an image every worker the job may be dispatched to admits (worker usw2 (us-west-2) "
        "refuses it: "
    )
    assert problem.allowed.endswith(
        "pin it with regions: [us-east-1] (the workers that admit it), or push it where every "
        "worker admits it"
    )


def test_the_managers_limit_range_is_not_judged_on_workers_that_cannot_run_the_job() -> None:
    """No worker can run it (40 nodes): each worker's own findings stop it, not the manager's
    LimitRange (which would refuse its pod: cpuLimit 1)."""
    teams = worker_values("prod-use1", "teams")
    for team in teams:
        team["containerDefaults"] = {"cpuLimit": "1"}
    cfg = manager_config()
    fleet = read(
        cfg=cfg,
        inputs=[committed_input(cfg.workers[0], teams=teams), committed_input(cfg.workers[1])],
    )
    judged = judge_fleet_job(fleet, 1, fleet_job(nodes=40))
    assert [r.runnable for r in judged.regions] == [False, False]
    assert all(r.job is not None for r in judged.regions)
    assert judged.problems == ()
    assert judged.replication == Replication(1, None, None)
