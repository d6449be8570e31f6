"""gpu-platform-jobs composition root: one team's training jobs on a platform stack.

Reads `gpu-platform-jobs:` config (platformStack, team, trainingJobs — the platform's job
schema), reads the platform stack's `jobPlatform` facts and kubeconfig through a StackReference,
judges every job against the platform's real capacity and quotas (the platform's own rules, and
the will-it-run hook in components/contract/platform_facts.py) before registering anything, and
creates the jobs in the team's namespace only. docs/training-jobs.md describes the path.
"""

import sys
from pathlib import Path

# `pulumi up` runs the project directory with `runpy.run_path` (pulumi/pulumi
# sdk/python/cmd/pulumi-language-python-exec): jobs/ is on sys.path and `__file__` is this file.
# The platform's packages (components/) live one level up, in the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pulumi

from components.config.job_stack import load_job_stack
from components.contract.platform_facts import job_stack_config
from components.training_jobs.job_stack import TeamJobs, TeamJobsArgs, read_platform, trainer_image

jobs = load_job_stack()
platform = read_platform(jobs)
# Every job judged before the first resource is registered: a job that cannot run deploys nothing.
cfg = job_stack_config(platform.facts, jobs)

team_jobs = TeamJobs(
    f"jobs-{jobs.team}",
    TeamJobsArgs(
        jobs=jobs,
        config=cfg,
        # The platform's account (bucket names); the job stack makes no AWS calls of its own.
        account_id=str(platform.facts["accountId"]) if platform.facts else "",
        kubeconfig=platform.kubeconfig,
        # The platform's reference trainer, by the digest its deploy pushed (or resolved).
        trainer_image=trainer_image(platform.facts),
    ),
)

pulumi.export("team", jobs.team)
pulumi.export("namespace", next(t.namespace for t in cfg.teams if t.name == jobs.team))
pulumi.export("jobs", sorted(team_jobs.jobs))
