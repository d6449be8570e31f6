"""A team's job stack (jobs/): read the platform stack, judge the jobs, deploy them in the team's
namespace with the team's identity.

`read_platform` reads the platform stack's `jobPlatform` output through a StackReference before
anything is registered, and parses it there, once (components/contract/platform_contract.py
read_job_platform: a platform's `PlatformContract` or a fleet manager's `FleetContract`).
`StackReference.get_output_details` is a coroutine, awaited here the way the SDK awaits a
synchronous invoke (`pulumi.runtime.sync_await._sync_await`, private API of the pinned SDK;
tests/jobs covers it). A StackReference is a read of another stack's outputs, known
during `pulumi preview` too (pulumi/pulumi sdk/python/lib/pulumi/stack_reference.py@v3.272.0).

`TeamJobs` creates one `TrainingJob` (the platform's component) per job, on a Kubernetes
provider built from the platform's kubeconfig with the team's namespace as its default, and
refuses — before registering — any manifest that is cluster-scoped or in another namespace:
the cluster would refuse it too (the team identity is namespace-scoped), but at `pulumi up`,
after other objects were created.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.analysis.facts import StackFacts, job_facts
from components.analysis.fleet import FleetFacts
from components.analysis.fleet_jobs import FleetJudgement
from components.config import ConfigError
from components.config.errors import problem_lines
from components.config.job_stack import JOBS_NAMESPACE, JobStackConfig, jobs_lines
from components.contract.fleet_platform import FleetContract
from components.contract.job_platform import KUBECONFIG_OUTPUT, PlatformContract
from components.contract.platform_contract import read_job_platform
from components.resource_options import child_options
from components.training_jobs.manifests import job_manifests
from components.training_jobs.plan import (
    JobImage,
    JobPlan,
    digest_image,
    plan_job,
)
from components.training_jobs.training import (
    TrainingJob,
    TrainingJobArgs,
    trainjob_patch_problems,
)


@dataclass(frozen=True)
class PlatformStack:
    """What the job stack reads from the platform stack."""

    contract: PlatformContract | FleetContract
    kubeconfig: pulumi.Output[Any]


def read_platform(jobs: JobStackConfig) -> PlatformStack:
    """The platform stack's `jobPlatform`, parsed (before any resource), and its kubeconfig
    (secret); `ConfigError` naming `platformStack` when the output is missing or of another
    version."""
    from pulumi.runtime.sync_await import _sync_await

    ref = pulumi.StackReference("platform", stack_name=jobs.platform_stack)
    details = _sync_await(ref.get_output_details(PlatformContract.OUTPUT))
    value = details.value if details.value is not None else details.secret_value
    return PlatformStack(
        contract=read_job_platform(value, jobs), kubeconfig=ref.get_output(KUBECONFIG_OUTPUT)
    )


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
    """Inputs of a job stack's jobs: the team's namespace, the plans, the kubeconfig."""

    #: The team's namespace: the only one the stack's identity may create objects in.
    namespace: str
    #: One per job of the stack (`plan_team_jobs`, built at jobs/__main__.py).
    plans: Sequence[JobPlan]
    kubeconfig: pulumi.Input[Any]


def trainer_image(contract: PlatformContract) -> JobImage | None:
    """The platform's reference trainer from its `jobPlatform` (`repo@sha256:...`)."""
    reference = contract.trainer_image
    return digest_image(reference) if reference is not None and "@" in reference else None


def plan_team_jobs(
    facts: StackFacts, *, trainer: JobImage | None, account_id: str, provenance: Mapping[str, str]
) -> tuple[JobPlan, ...]:
    """The plans of a job stack's jobs: the platform's trainer (`trainer`) for a job without an
    image of its own, else the digest it gives (a job stack resolves no tags: the contract's
    rules refuse them)."""
    return tuple(
        plan_job(
            facts.cfg,
            jf,
            account_id,
            provenance,
            image=trainer if jf.image is not None and jf.image.trainer else None,
        )
        for jf in facts.jobs
    )


def plan_fleet_jobs(
    fleet: FleetFacts, judgement: FleetJudgement, *, provenance: Mapping[str, str]
) -> tuple[JobPlan, ...]:
    """The plans of a job stack's jobs on a fleet's manager: each from the facts of the first
    worker that can run it (every capable worker gets the same pinned pod), by its own digest
    or the fleet's one trainer's — the same reference in every region, which Kueue compares
    (components/analysis/fleet_trainer.py)."""
    plans = []
    for judged in judgement.jobs:
        home = judged.home
        assert home is not None and home.stack is not None  # judged: a worker can run it
        stack = home.stack
        job = judged.job
        derived = job_facts(
            stack.cfg.model_copy(update={"training_jobs": [job]}),
            judged.index,
            job,
            stack.teams[job.team],
            sources=stack.sources,
            provisioners=stack.provisioners,
        )
        image = digest_image(job.image or fleet.trainer_image)
        worker = next(w for w in fleet.workers if w.name == home.worker)
        plans.append(
            plan_job(
                stack.cfg,
                derived,
                worker.account_id,
                provenance,
                image=image,
                fleet=True,
            )
        )
    return tuple(plans)


class TeamJobs(pulumi.ComponentResource):
    """One team's training jobs, in its namespace only."""

    jobs: dict[str, TrainingJob]

    def __init__(
        self, name: str, args: TeamJobsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        outside = [
            f"{JOBS_NAMESPACE}:{plan.facts.key}: renders {problem}; only objects in "
            f"namespace {args.namespace}"
            for plan in args.plans
            for problem in namespace_problems(job_manifests(plan), args.namespace)
        ]
        outside += jobs_lines(problem_lines(trainjob_patch_problems(args.plans)))
        if outside:
            raise ConfigError(outside)
        super().__init__("gpu-platform:training:TeamJobs", name, None, opts)
        provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=args.kubeconfig,
            # Objects without a namespace would land here rather than in `default`.
            namespace=args.namespace,
            opts=child_options(self),
        )
        self.jobs = {
            plan.name: TrainingJob(
                f"{name}-{plan.name}",
                TrainingJobArgs(plan=plan, k8s_provider=provider),
                opts=child_options(self),
            )
            for plan in args.plans
        }
        self.register_outputs({"namespace": args.namespace, "jobs": sorted(self.jobs)})
