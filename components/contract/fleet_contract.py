"""The `jobPlatform` a fleet's manager exports (docs/fleet.md), and how a job stack on it judges
its jobs.

A team's job stack names the manager stack as its `platformStack` and submits its jobs there,
once. The manager's `jobPlatform` carries the same keys a platform's do where a job stack reads them
(`version`, `teams`, `cluster`, `accountId`) plus `fleet`: the manager's own config and, per
worker, exactly what the manager read of it (`fleetWorker`, `jobPlatform`). The job stack
rebuilds the fleet (its FleetFacts) from them with the manager's own code (analysis/fleet.py
read_workers) and judges every job on every worker, so its "will it run" is the one the manager
and each worker would give, naming the regions that can run the job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components import catalog
from components.analysis.fleet import FleetFacts, WorkerInput, read_workers
from components.analysis.fleet_jobs import FleetJudgement, judge_fleet_jobs
from components.config import ConfigError
from components.config.errors import problem_lines
from components.config.fleet import WorkerRef
from components.config.fleet_stack import parse_fleet
from components.config.job_stack import JOBS_NAMESPACE, JobStackConfig, jobs_lines
from components.contract.platform_contract import (
    KUBECONFIG_OUTPUT,
    contract_version,
    deploy_role_name,
    preview_role_name,
)


def fleet_contract(
    fleet: FleetFacts, inputs: Sequence[WorkerInput], *, account_id: str
) -> dict[str, Any]:
    """The manager's `jobPlatform` output (plain JSON once resolved)."""
    cfg = fleet.cfg
    return {
        "version": contract_version(),
        "environment": cfg.environment,
        "accountId": account_id,
        "cluster": {"name": cfg.cluster.name, "kubeconfigOutput": KUBECONFIG_OUTPUT},
        "teams": {
            team.name: {
                "namespace": team.namespace,
                "localQueue": team.name,
                "serviceAccount": catalog.TRAINER_SERVICE_ACCOUNT,
                "group": team.group,
                "quota": [
                    {
                        "flavor": q.flavor,
                        "gpus": q.gpus,
                        "borrowingLimitGpus": q.borrowing_limit_gpus,
                    }
                    for q in team.quota
                ],
                # The team's CI roles on the manager (fleet config `teamDeploy`), if any.
                **{
                    f"{kind}RoleArn": (
                        f"arn:aws:iam::{account_id}:role/{name(cfg.cluster.name, team.name)}"
                        if team.name in cfg.team_deploy
                        else None
                    )
                    for kind, name in (("deploy", deploy_role_name), ("preview", preview_role_name))
                },
            }
            for team in fleet.teams
        },
        "platformJobs": {},
        "fleet": {
            "name": cfg.name,
            "region": fleet.region,
            "config": cfg.model_dump(mode="json", by_alias=True),
            "workers": [
                {
                    "name": given.ref.name,
                    "stack": given.ref.stack,
                    "fleetWorker": dict(given.fleet_worker or {}),
                    "jobPlatform": dict(given.job_platform or {}),
                }
                for given in inputs
            ],
        },
    }


@dataclass(frozen=True)
class FleetJobs:
    """A job stack's jobs on a fleet: the fleet's facts and every job's judgement."""

    fleet: FleetFacts
    judgement: FleetJudgement


def is_fleet(contract: Mapping[str, Any] | None) -> bool:
    """The `jobPlatform` is a fleet manager's."""
    return isinstance(contract, Mapping) and isinstance(contract.get("fleet"), Mapping)


def fleet_job_stack(contract: Mapping[str, Any], jobs: JobStackConfig) -> FleetJobs:
    """The fleet rebuilt from its manager's `jobPlatform` and this stack's jobs judged on it;
    `ConfigError` (keys in the job project's namespace) when a job cannot run on any worker or
    is something MultiKueue cannot carry."""
    teams = contract.get("teams") or {}
    if jobs.team not in teams:
        raise ConfigError(
            [
                f"{JOBS_NAMESPACE}:team: got {jobs.team!r}; a team of {jobs.platform_stack} "
                f"({', '.join(sorted(teams))})"
            ]
        )
    block = contract["fleet"]
    cfg = parse_fleet(block["config"])
    inputs = [
        WorkerInput(
            WorkerRef(name=w["name"], stack=w["stack"]), w.get("fleetWorker"), w.get("jobPlatform")
        )
        for w in block["workers"]
    ]
    fleet = read_workers(cfg, str(block["region"]), inputs, contract_version())
    judgement = judge_fleet_jobs(fleet, jobs.training_jobs)
    if judgement.problems:
        raise ConfigError(jobs_lines(problem_lines(list(judgement.problems))))
    return FleetJobs(fleet, judgement)
