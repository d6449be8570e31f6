"""A team's job stack's composition root (`jobs/__main__.py`): one team's training jobs on a
platform stack or on a fleet's manager.

Reads `gpu-platform-jobs:` config (platformStack, team, trainingJobs — the platform's job
schema), reads the platform stack's `jobPlatform` output and kubeconfig through a StackReference,
judges every job against the platform's real capacity and quotas (the platform's own rules, and
the will-it-run hook in components/contract/platform_contract.py) before registering anything, and
creates the jobs in the team's namespace only. docs/training-jobs.md describes the path.
"""

from __future__ import annotations

import os

import pulumi

from components.config.job_stack import load_job_stack
from components.contract.fleet_contract import fleet_job_stack
from components.contract.fleet_platform import FleetContract
from components.contract.platform_contract import job_stack_config
from components.roots.results import FleetJobsRoot, TeamJobsRoot
from components.training_jobs.job_stack import (
    TeamJobs,
    TeamJobsArgs,
    plan_fleet_jobs,
    plan_team_jobs,
    read_platform,
    trainer_image,
)
from components.training_jobs.plan import deploy_provenance


def team_jobs() -> TeamJobsRoot | FleetJobsRoot:
    """Judge, plan and create one team's jobs; the result says on which kind of platform."""
    jobs = load_job_stack()
    # The platform's `jobPlatform`, parsed where it is read (another version is refused there).
    platform = read_platform(jobs)
    # Every job validated, its facts built and judged by the platform's own rules before the
    # first resource is registered: a job that cannot run deploys nothing.
    result: TeamJobsRoot | FleetJobsRoot
    if isinstance(platform.contract, FleetContract):
        # A fleet's manager (docs/fleet.md): each job judged on every worker, submitted once.
        fleet_jobs = fleet_job_stack(platform.contract, jobs)
        result = FleetJobsRoot(
            fleet_jobs=fleet_jobs,
            plans=plan_fleet_jobs(
                fleet_jobs.fleet, fleet_jobs.judgement, provenance=deploy_provenance(os.environ)
            ),
            namespace=next(t.namespace for t in fleet_jobs.fleet.teams if t.name == jobs.team),
        )
    else:
        judged = job_stack_config(platform.contract, jobs)
        result = TeamJobsRoot(
            facts=judged.facts,
            judgement=judged.judgement,
            plans=plan_team_jobs(
                judged.facts,
                # The platform's reference trainer, by the digest its deploy pushed (or resolved).
                trainer=trainer_image(platform.contract),
                # The platform's account (bucket names); the job stack makes no AWS calls itself.
                account_id=platform.contract.account_id,
                provenance=deploy_provenance(os.environ),
            ),
            namespace=judged.facts.teams[jobs.team].namespace,
        )

    created = TeamJobs(
        f"jobs-{jobs.team}",
        TeamJobsArgs(
            namespace=result.namespace, plans=result.plans, kubeconfig=platform.kubeconfig
        ),
    )

    pulumi.export("team", jobs.team)
    pulumi.export("namespace", result.namespace)
    pulumi.export("jobs", sorted(created.jobs))
    return result
