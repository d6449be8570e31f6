"""A fleet manager's `jobPlatform` (contract/fleet_platform.py `FleetContract`, docs/fleet.md):
how the manager writes it, and how a job stack on the fleet judges its jobs.

A team's job stack names the manager stack as its `platformStack` and submits its jobs there,
once. The manager's `jobPlatform` carries the same keys a platform's does where a job stack
reads them (`version`, `teams`, `cluster`, `accountId`) plus `fleet`: the manager's own config
and, per worker, exactly what the manager read of it (its `fleetWorker` and `jobPlatform`, the
parsed models). The job stack rebuilds the fleet (its FleetFacts) from them with the manager's
own code (analysis/fleet.py read_workers) and judges every job on every worker, so its "will it
run" is the one the manager and each worker would give, naming the regions that can run the job.
"""

from __future__ import annotations

from dataclasses import dataclass

from components import catalog
from components.analysis.fleet import FleetFacts, WorkerInput, read_workers
from components.analysis.fleet_jobs import FleetJudgement, judge_fleet_jobs
from components.config import ConfigError
from components.config.errors import problem_lines
from components.config.fleet import WorkerRef
from components.config.job_stack import JOBS_NAMESPACE, JobStackConfig, jobs_lines
from components.contract.fleet_platform import (
    FleetBlock,
    FleetContract,
    FleetMember,
    FleetQuota,
    FleetTeam,
)
from components.contract.job_platform import KUBECONFIG_OUTPUT, ClusterRef
from components.contract.platform_contract import role_arns


def fleet_contract(fleet: FleetFacts, *, account_id: str) -> FleetContract:
    """The manager's `jobPlatform` output: its teams (the workers' summed quota), its config
    and every worker as the manager read it."""
    cfg = fleet.cfg
    teams = {}
    for team in fleet.teams:
        deploy_role, preview_role = role_arns(
            account_id, cfg.cluster.name, team.name, team.name in cfg.team_deploy
        )
        teams[team.name] = FleetTeam(
            namespace=team.namespace,
            local_queue=team.name,
            service_account=catalog.TRAINER_SERVICE_ACCOUNT,
            group=team.group,
            quota=[
                FleetQuota(
                    flavor=q.flavor, gpus=q.gpus, borrowing_limit_gpus=q.borrowing_limit_gpus
                )
                for q in team.quota
            ],
            deploy_role_arn=deploy_role,
            preview_role_arn=preview_role,
        )
    return FleetContract(
        version=FleetContract.current_version(),
        environment=cfg.environment,
        account_id=account_id,
        cluster=ClusterRef(name=cfg.cluster.name, kubeconfig_output=KUBECONFIG_OUTPUT),
        teams=teams,
        platform_jobs={},
        fleet=FleetBlock(
            name=cfg.name,
            region=fleet.region,
            config=cfg,
            workers=[
                FleetMember(
                    name=w.name,
                    stack=w.stack_ref,
                    fleet_worker=w.fleet_worker,
                    job_platform=w.job_platform,
                )
                for w in fleet.workers
            ],
        ),
    )


@dataclass(frozen=True)
class FleetJobs:
    """A job stack's jobs on a fleet: the fleet's facts and every job's judgement."""

    fleet: FleetFacts
    judgement: FleetJudgement


def fleet_job_stack(contract: FleetContract, jobs: JobStackConfig) -> FleetJobs:
    """The fleet rebuilt from its manager's `jobPlatform` and this stack's jobs judged on it;
    `ConfigError` (keys in the job project's namespace) when a job cannot run on any worker or
    is something MultiKueue cannot carry."""
    if jobs.team not in contract.teams:
        raise ConfigError(
            [
                f"{JOBS_NAMESPACE}:team: got {jobs.team!r}; a team of {jobs.platform_stack} "
                f"({', '.join(sorted(contract.teams))})"
            ]
        )
    block = contract.fleet
    inputs = [
        WorkerInput(WorkerRef(name=m.name, stack=m.stack), m.fleet_worker, m.job_platform)
        for m in block.workers
    ]
    fleet = read_workers(block.config, block.region, inputs)
    judgement = judge_fleet_jobs(fleet, jobs.training_jobs)
    if judgement.problems:
        raise ConfigError(jobs_lines(problem_lines(list(judgement.problems))))
    return FleetJobs(fleet, judgement)
