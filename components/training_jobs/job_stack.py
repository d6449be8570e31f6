"""A team's job stack (jobs/): read the platform stack, judge the jobs, deploy them in the team's
namespace with the team's identity.

`read_platform` reads the platform stack's `jobPlatform` facts through a StackReference before
anything is registered: `StackReference.get_output_details` is a coroutine, awaited here the way
the SDK awaits a synchronous invoke (`pulumi.runtime.sync_await._sync_await`, private API of the
pinned SDK; tests/jobs covers it). A StackReference is a read of another stack's outputs, known
during `pulumi preview` too (pulumi/pulumi sdk/python/lib/pulumi/stack_reference.py@v3.272.0).

`TeamJobs` creates one `TrainingJob` (the platform's component) per job, on a Kubernetes
provider built from the platform's kubeconfig with the team's namespace as its default, and
refuses — before registering — any manifest that is cluster-scoped or in another namespace:
the cluster would refuse it too (the team identity is namespace-scoped), but at `pulumi up`,
after other objects were created.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.analysis.facts import stack_facts
from components.analysis.images import ImageSource
from components.config import ConfigError, StackConfig
from components.config.job_stack import JOBS_NAMESPACE, JobStackConfig
from components.contract.platform_facts import FACTS_OUTPUT, KUBECONFIG_OUTPUT
from components.resource_options import child_options
from components.training_jobs.manifests import job_manifests
from components.training_jobs.plan import JobImage, deploy_provenance, digest_image, plan_job
from components.training_jobs.training import TrainingJob, TrainingJobArgs


@dataclass(frozen=True)
class PlatformStack:
    """What the job stack reads from the platform stack."""

    facts: Mapping[str, Any] | None
    kubeconfig: pulumi.Output[Any]


def read_platform(jobs: JobStackConfig) -> PlatformStack:
    """The platform stack's facts (plain, before any resource) and its kubeconfig (secret)."""
    from pulumi.runtime.sync_await import _sync_await

    ref = pulumi.StackReference("platform", stack_name=jobs.platform_stack)
    details = _sync_await(ref.get_output_details(FACTS_OUTPUT))
    facts = details.value if details.value is not None else details.secret_value
    return PlatformStack(facts=facts, kubeconfig=ref.get_output(KUBECONFIG_OUTPUT))


def _runs_trainer(source: ImageSource | None) -> bool:
    return source is not None and source.trainer


def namespace_problems(manifests: list[dict[str, Any]], namespace: str) -> list[str]:
    """`kind/name` of each manifest that is cluster-scoped or outside `namespace`."""
    return [
        f"{m['kind']}/{m['metadata'].get('name')} in "
        f"{m['metadata'].get('namespace') or 'no namespace (cluster-scoped)'}"
        for m in manifests
        if m["metadata"].get("namespace") != namespace
    ]


@dataclass(frozen=True)
class TeamJobsArgs:
    """Inputs of a job stack's jobs."""

    jobs: JobStackConfig
    #: The platform's config with this stack's jobs (platform_facts.job_stack_config).
    config: StackConfig
    account_id: str
    kubeconfig: pulumi.Input[Any]
    #: The platform's reference trainer (`jobPlatform.trainerImage`, pinned by the digest its
    #: deploy pushed or resolved); None when the platform publishes none.
    trainer_image: JobImage | None = None


def trainer_image(facts: Mapping[str, Any] | None) -> JobImage | None:
    """The platform's reference trainer from its `jobPlatform` facts (`repo@sha256:...`)."""
    reference = (facts or {}).get("trainerImage")
    return digest_image(reference) if isinstance(reference, str) and "@" in reference else None


class TeamJobs(pulumi.ComponentResource):
    """One team's training jobs, in its namespace only."""

    jobs: dict[str, TrainingJob]

    def __init__(
        self, name: str, args: TeamJobsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        cfg = args.config
        team = next(t for t in cfg.teams if t.name == args.jobs.team)
        provenance = deploy_provenance(os.environ)
        facts = stack_facts(cfg)
        # A job stack resolves no tags (job_problems refuses them): the trainer or a digest.
        plans = [
            plan_job(
                cfg,
                job,
                args.account_id,
                provenance,
                image=args.trainer_image if _runs_trainer(facts.job(job).image) else None,
            )
            for job in cfg.training_jobs
        ]
        outside = [
            f"{JOBS_NAMESPACE}:trainingJobs[{index}]: renders {problem}; only objects in "
            f"namespace {team.namespace}"
            for index, plan in enumerate(plans)
            for problem in namespace_problems(job_manifests(plan), team.namespace)
        ]
        if outside:
            raise ConfigError(outside)
        super().__init__("gpu-platform:training:TeamJobs", name, None, opts)
        provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=args.kubeconfig,
            # Objects without a namespace would land here rather than in `default`.
            namespace=team.namespace,
            opts=child_options(self),
        )
        self.jobs = {
            plan.name: TrainingJob(
                f"{name}-{plan.name}",
                TrainingJobArgs(plan=plan, k8s_provider=provider),
                opts=child_options(self),
            )
            for plan in plans
        }
        self.register_outputs({"namespace": team.namespace, "jobs": sorted(self.jobs)})
