"""gpu-platform-jobs composition root: one team's training jobs on a platform stack.

Reads `gpu-platform-jobs:` config (platformStack, team, trainingJobs — the platform's job
schema), reads the platform stack's `jobPlatform` output and kubeconfig through a StackReference,
judges every job against the platform's real capacity and quotas (the platform's own rules, and
the will-it-run hook in components/contract/platform_contract.py) before registering anything, and
creates the jobs in the team's namespace only. docs/training-jobs.md describes the path.
"""

import sys
from pathlib import Path

# `pulumi up` runs the project directory with `runpy.run_path` (pulumi/pulumi
# sdk/python/cmd/pulumi-language-python-exec): jobs/ is on sys.path and `__file__` is this file.
# The platform's packages (components/) live one level up, in the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import os

import pulumi

from components.config.job_stack import load_job_stack
from components.contract.fleet_contract import fleet_job_stack
from components.contract.fleet_platform import FleetContract
from components.contract.platform_contract import job_stack_config
from components.training_jobs.job_stack import (
    TeamJobs,
    TeamJobsArgs,
    plan_fleet_jobs,
    plan_team_jobs,
    read_platform,
    trainer_image,
)
from components.training_jobs.plan import deploy_provenance

jobs = load_job_stack()
# The platform's `jobPlatform`, parsed where it is read (another version is refused there).
platform = read_platform(jobs)
# Every job validated, its facts built and judged by the platform's own rules before the first
# resource is registered: a job that cannot run deploys nothing.
if isinstance(platform.contract, FleetContract):
    # A fleet's manager (docs/fleet.md): each job judged on every worker, submitted once.
    fleet_jobs = fleet_job_stack(platform.contract, jobs)
    judgement = fleet_jobs.judgement
    namespace = next(t.namespace for t in fleet_jobs.fleet.teams if t.name == jobs.team)
    plans = plan_fleet_jobs(fleet_jobs.fleet, judgement, provenance=deploy_provenance(os.environ))
else:
    judged = job_stack_config(platform.contract, jobs)
    config, facts, judgement = judged.config, judged.facts, judged.judgement
    namespace = facts.teams[jobs.team].namespace
    plans = plan_team_jobs(
        facts,
        # The platform's reference trainer, by the digest its deploy pushed (or resolved).
        trainer=trainer_image(platform.contract),
        # The platform's account (bucket names); the job stack makes no AWS calls of its own.
        account_id=platform.contract.account_id,
        provenance=deploy_provenance(os.environ),
    )

team_jobs = TeamJobs(
    f"jobs-{jobs.team}",
    TeamJobsArgs(namespace=namespace, plans=plans, kubeconfig=platform.kubeconfig),
)

pulumi.export("team", jobs.team)
pulumi.export("namespace", namespace)
pulumi.export("jobs", sorted(team_jobs.jobs))
