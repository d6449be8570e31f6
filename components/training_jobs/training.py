"""Training jobs: multi-node DDP and DeepSpeed runs under torchrun, one per `trainingJobs[]` entry.

Everything a job's pods need is derived here from the stack config, never hand-written per job:
placement (GPU toleration + node affinity on the GPU-class and capacity-type labels of
components/catalog.py, the labels managed node groups and Karpenter pools carry), GPU limits =
GPUs per node, CPU/memory from the smallest instance type the pools can launch for the class
(minus headroom for kubelet and daemons), a memory-backed /dev/shm, NCCL/EFA settings from the
instance table, run metadata (run id, git sha, image digest, config hash, team) on the pods and
in their env, the spot-safety chain (grace periods, do-not-disrupt, podFailurePolicy) and the
DeepSpeed config (a ConfigMap generated from a typed model).

Three launchers, one torchrun command line (`launch_args`):
- native: Indexed Job (completions = parallelism = nodes) + headless Service named as the pods'
  subdomain; rendezvous at `<job>-0.<service>:<port>`; node rank = completion index.
- kubeflow: Kubeflow Trainer v2 TrainJob (this platform installs Trainer v2, which has no
  PyTorchJob) on a platform ClusterTrainingRuntime; JobSet names pod 0 `<job>-node-0-0` in the
  `<job>` subdomain.
- volcano: Volcano Job (minAvailable = nodes) in the team's Volcano queue; the `svc` plugin makes
  the headless Service `<job>` and pod 0 is `<job>-worker-0`.
Kueue jobs (native, kubeflow) carry the LocalQueue and WorkloadPriorityClass labels and are
created suspended; Kueue unsuspends them at admission. Volcano jobs never touch Kueue.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import catalog
from components.analysis import trainer
from components.config import ConfigError, Problem
from components.config.errors import problem_lines
from components.resource_options import child_options
from components.training_jobs.manifests import (
    cluster_training_runtimes,
    job_manifests,
    rendezvous_endpoint,
)
from components.training_jobs.plan import JobPlan

if TYPE_CHECKING:
    from components.platform.cluster.handles import ClusterHandles
    from components.platform.scheduling.scheduling import SchedulingHandles


#: Changing a training job replaces its launcher object. A Job's pod template is immutable
#: (the API server answers "field is immutable" for spec.template), TrainJob and Volcano Job
#: specs are not edited under a running gang, and every object has a fixed name: so a change to
#: what the run is becomes a replacement (`replace_on_changes`) with the old object deleted
#: first (`delete_before_replace`), or the create hits "already exists". The new run resumes
#: from the last checkpoint on the team's volume (docs/day2.md). The paths leave out
#: `spec.suspend`, which Kueue flips at admission: a `pulumi up --refresh` must not read that
#: as a change and restart every running job.
REPLACE_ON_CHANGES: Final[dict[str, list[str]]] = {
    "Job": ["spec.template", "spec.completions", "spec.parallelism", "spec.completionMode"],
    "TrainJob": ["spec.trainer", "spec.runtimeRef", "spec.runtimePatches"],
    "VolcanoJob": ["spec.tasks", "spec.minAvailable", "spec.queue", "spec.plugins"],
}


def trainjob_patch_problems(plans: Sequence[JobPlan]) -> list[Problem]:
    """What Kueue v0.19.2 would drop of the runtime patches of the TrainJobs `plans` render
    (components/analysis/trainer.py patch_problems): checked before anything is registered."""
    return [
        problem
        for plan in plans
        for manifest in job_manifests(plan)
        if manifest["kind"] == "TrainJob"
        for problem in trainer.patch_problems(plan.facts.key, manifest)
    ]


def launcher_replacement(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """Resource options of a launcher object (see REPLACE_ON_CHANGES)."""
    kind = manifest["kind"]
    if manifest["apiVersion"].startswith("batch.volcano.sh/"):
        kind = "VolcanoJob"
    return {"replace_on_changes": REPLACE_ON_CHANGES[kind], "delete_before_replace": True}


@dataclass(frozen=True)
class TrainingJobArgs:
    """Inputs of one TrainingJob."""

    #: The job's derived plan (`plan_job`).
    plan: JobPlan
    k8s_provider: k8s.Provider
    #: What must exist first: the team (namespace, queues, service account), its volumes, the
    #: scheduler releases and, for TrainJobs, the runtimes.
    depends_on: Sequence[pulumi.Resource] = ()


class TrainingJob(pulumi.ComponentResource):
    """One training run: its DeepSpeed ConfigMap, headless Service and launcher object."""

    objects: list[pulumi.Resource]

    def __init__(
        self, name: str, args: TrainingJobArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:training:TrainingJob", name, None, opts)
        plan = args.plan
        self.objects = []
        for manifest in job_manifests(plan):
            kind = manifest["kind"]
            role = {"ConfigMap": "deepspeed", "Service": "service"}.get(kind, "job")
            if kind == "ExternalSecret":
                role = f"secret-{manifest['metadata']['name']}"
            child_opts = child_options(
                self,
                provider=args.k8s_provider,
                depends_on=[*args.depends_on, *self.objects],
                **(launcher_replacement(manifest) if role == "job" else {}),
            )
            child = f"{name}-{role}"
            resource: pulumi.Resource
            if kind == "ConfigMap":
                resource = k8s.core.v1.ConfigMap(
                    child, metadata=manifest["metadata"], data=manifest["data"], opts=child_opts
                )
            elif kind == "Service":
                resource = k8s.core.v1.Service(
                    child, metadata=manifest["metadata"], spec=manifest["spec"], opts=child_opts
                )
            elif manifest["apiVersion"] == "batch/v1":
                resource = k8s.batch.v1.Job(
                    child, metadata=manifest["metadata"], spec=manifest["spec"], opts=child_opts
                )
            else:
                resource = k8s.apiextensions.CustomResource(
                    child,
                    api_version=manifest["apiVersion"],
                    kind=kind,
                    metadata=manifest["metadata"],
                    spec=manifest["spec"],
                    opts=child_opts,
                )
            self.objects.append(resource)
        self.register_outputs(
            {
                "namespace": plan.namespace,
                "runId": plan.run_id,
                "configHash": plan.config_hash,
                "worldSize": plan.world_size,
                "rendezvousEndpoint": rendezvous_endpoint(plan),
            }
        )


@dataclass(frozen=True)
class TrainingJobsArgs:
    """Inputs of the training layer: the jobs' plans, the runtimes' image and what the jobs
    depend on."""

    #: One per `trainingJobs` entry (job_images.plan_jobs, built at the composition root).
    plans: Sequence[JobPlan]
    #: The ClusterTrainingRuntimes' image: `training.defaultImage`, else the trainer the deploy
    #: pinned (an Output).
    runtime_image: pulumi.Input[str]
    k8s_provider: k8s.Provider
    #: team name -> what its jobs need first (Team component, its PVCs).
    team_resources: Mapping[str, Sequence[pulumi.Resource]]
    kueue_release: pulumi.Resource
    volcano_release: pulumi.Resource
    trainer_release: pulumi.Resource
    #: The cluster-autoscaler: a job that can land on a managed node group comes after it (its
    #: ProvisioningRequest, or its pending pods, need someone to grow the group).
    autoscaler: pulumi.Resource | None = None

    @classmethod
    def of(
        cls,
        plans: Sequence[JobPlan],
        runtime_image: pulumi.Input[str],
        cluster: ClusterHandles,
        scheduling: SchedulingHandles,
        team_resources: Mapping[str, Sequence[pulumi.Resource]],
        *,
        autoscaler: pulumi.Resource | None = None,
    ) -> TrainingJobsArgs:
        """The plans, the runtimes' image, the schedulers the jobs use, and each team's
        objects."""
        return cls(
            plans=plans,
            runtime_image=runtime_image,
            k8s_provider=cluster.k8s_provider,
            team_resources=team_resources,
            kueue_release=scheduling.kueue,
            volcano_release=scheduling.volcano,
            trainer_release=scheduling.trainer,
            autoscaler=autoscaler,
        )


class TrainingJobs(pulumi.ComponentResource):
    """The platform's ClusterTrainingRuntimes and one TrainingJob per `trainingJobs[]` entry."""

    jobs: dict[str, TrainingJob]
    #: The ClusterTrainingRuntimes as rendered (a fleet worker exports what Kueue compares of
    #: them: manifests.runtime_pod_sets).
    runtime_manifests: list[dict[str, Any]]

    def __init__(
        self, name: str, args: TrainingJobsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        dropped = trainjob_patch_problems(args.plans)
        if dropped:
            raise ConfigError(problem_lines(dropped))
        super().__init__("gpu-platform:training:TrainingJobs", name, None, opts)
        runtimes: dict[str, pulumi.Resource] = {}
        self.runtime_manifests = []
        # Always, all of them: team job stacks (jobs/) run TrainJobs on these runtimes without
        # owning them (they are cluster-scoped; a job stack creates objects in its team's
        # namespace only), and a job's save time picks its grace period's runtime.
        for manifest in cluster_training_runtimes(args.runtime_image):
            self.runtime_manifests.append(manifest)
            runtime = manifest["metadata"]["name"]
            runtimes[runtime] = k8s.apiextensions.CustomResource(
                f"{name}-runtime-{runtime.removeprefix(catalog.TRAINER_RUNTIME_PREFIX + '-')}",
                api_version=manifest["apiVersion"],
                kind=manifest["kind"],
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=child_options(
                    self,
                    provider=args.k8s_provider,
                    depends_on=[args.trainer_release],
                ),
            )
        self.jobs = {}
        for plan in args.plans:
            job = plan.job
            scheduler = {
                "native": [args.kueue_release],
                "kubeflow": [
                    args.kueue_release,
                    args.trainer_release,
                    runtimes[job.trainer_runtime],
                ],
                "volcano": [args.volcano_release],
            }[job.launcher]
            if args.autoscaler is not None and "node-group" in plan.facts.provisioners:
                scheduler.append(args.autoscaler)
            self.jobs[f"{job.team}/{job.name}"] = TrainingJob(
                f"{name}-{job.team}-{job.name}",
                TrainingJobArgs(
                    plan=plan,
                    k8s_provider=args.k8s_provider,
                    depends_on=[*args.team_resources.get(job.team, ()), *scheduler],
                ),
                opts=child_options(self),
            )
        self.register_outputs({"jobs": sorted(self.jobs)})
