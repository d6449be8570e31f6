"""A training job's plan: everything its builders need, derived once from the stack config and
the analysis (resources, checkpoint interval, grace periods, run metadata), plus the constants
its pods share. Pure: no Pulumi resources."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from components import catalog
from components.analysis import placement
from components.analysis.facts import JobFacts
from components.analysis.resources import JobResources
from components.config import (
    GraceSeconds,
    StackConfig,
    TeamConfig,
    TrainingJobConfig,
    job_grace_seconds,
)

#: Trainer v2's torch runtime addresses the trainer container by this name; the native and
#: Volcano launchers use it too so one podFailurePolicy and one set of tests fit all three.
TRAINER_CONTAINER: Final = "node"
KUEUE_PRIORITY_LABEL: Final = "kueue.x-k8s.io/priority-class"
DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
#: The cluster-autoscaler's equivalent: its scale-down never removes a node running a pod with
#: this annotation set to "false" (kubernetes/autoscaler@cluster-autoscaler-1.33.6 FAQ.md, "What
#: types of pods can prevent CA from removing a node?"); it ignores Karpenter's annotation.
SAFE_TO_EVICT: Final = "cluster-autoscaler.kubernetes.io/safe-to-evict"
EFA_RESOURCE: Final = catalog.EFA_RESOURCE
JOB_LABEL: Final = placement.JOB_LABEL
TEAM_LABEL: Final = f"{catalog.LABEL_DOMAIN}/team"
RUN_ID_LABEL: Final = f"{catalog.LABEL_DOMAIN}/run-id"
#: The reference trainer's exit code for "preempted after a committed checkpoint".
PREEMPTED_EXIT_CODE: Final = 75
METRICS_PORT: Final = 9401
SHM_MOUNT: Final = "/dev/shm"
CHECKPOINT_MOUNT: Final = "/mnt/checkpoints"
DS_CONFIG_MOUNT: Final = "/etc/deepspeed"
DS_CONFIG_KEY: Final = "ds_config.json"
TRAINER_API: Final = "trainer.kubeflow.org/v1alpha1"
VOLCANO_JOB_API: Final = "batch.volcano.sh/v1alpha1"
VOLCANO_TASK: Final = "worker"
KUBEFLOW_REPLICATED_JOB: Final = "node"
#: Pod PriorityClass per job priority (components/platform/scheduling/scheduling.py
#: PRIORITY_CLASSES).
POD_PRIORITY_CLASS: Final[dict[str, str]] = {
    "production": "production-training",
    "research": "research-training",
    "dev": "dev",
}
#: GPUs with GPUDirect RDMA over EFA (p4d/p5/p6); other EFA instances use EFA without it.
EFA_RDMA_GPU_MODELS: Final = catalog.EFA_RDMA_GPU_MODELS


@dataclass(frozen=True)
class JobImage:
    """The image a job's pods run. `reference` (`repo@sha256:...`) and `digest` are Pulumi
    Outputs where the registry returns the digest at deploy time (the reference trainer this
    stack builds, a tag resolved in ECR), plain strings for an image given by digest; the plan
    passes them through untouched. `identity` is known before the deploy and is what the run's
    config hash reads (images.ImageSource.identity; the build context's tag for a build)."""

    reference: Any
    digest: Any
    identity: str


#: The env var a fleet job's pods read their region's checkpoints bucket from (the worker's
#: `gpu-platform-data` ConfigMap); Kubernetes expands `$(VAR)` in later env values and in args
#: from vars defined before them.
FLEET_BUCKET_VAR: Final = "CHECKPOINT_BUCKET"


def digest_image(reference: str) -> JobImage:
    """A JobImage of a reference that carries its digest (`repo[:tag]@sha256:...`)."""
    if "@" not in reference:
        raise ValueError(f"{reference!r} is not pinned by digest")
    return JobImage(reference=reference, digest=reference.split("@", 1)[1], identity=reference)


def ds_config(job: TrainingJobConfig, world_size: int) -> dict[str, Any]:
    """DeepSpeed JSON from the typed model; train_batch_size = micro x accumulation x world."""
    ds = job.deepspeed
    if ds is None:
        raise ValueError(f"job {job.name} is not a DeepSpeed job")
    zero: dict[str, Any] = {
        "stage": ds.zero_stage,
        "overlap_comm": True,
        "contiguous_gradients": True,
        "reduce_bucket_size": ds.reduce_bucket_size,
    }
    if ds.zero_stage in (1, 2):
        zero["allgather_bucket_size"] = ds.allgather_bucket_size
    if ds.offload_optimizer != "none":
        zero["offload_optimizer"] = {"device": ds.offload_optimizer, "pin_memory": True}
    if ds.offload_param != "none":
        zero["offload_param"] = {"device": ds.offload_param, "pin_memory": True}
    config: dict[str, Any] = {
        "train_batch_size": ds.effective_batch(world_size),
        "train_micro_batch_size_per_gpu": ds.micro_batch_per_gpu,
        "gradient_accumulation_steps": ds.gradient_accumulation_steps,
        "gradient_clipping": ds.gradient_clipping,
        "bf16": {"enabled": ds.bf16},
        "fp16": {"enabled": ds.fp16},
        "zero_optimization": zero,
        "steps_per_print": 100,
        "wall_clock_breakdown": False,
    }
    if ds.fp16:
        # Dynamic loss scaling (loss_scale 0), DeepSpeed's documented default for fp16.
        config["fp16"].update({"loss_scale": 0, "initial_scale_power": 16})
    return config


def semantic_parameters(job: TrainingJobConfig, image: str, world_size: int) -> dict[str, Any]:
    """What determines the trained result: code, data flags, topology, optimizer batch math,
    checkpoint cadence. Placement, priority, launcher and TTLs are left out on purpose: moving a
    run from spot to on-demand or from Kueue to Volcano must not change its config hash."""
    return {
        "mode": job.mode,
        "image": image,
        "entrypoint": job.entrypoint,
        "module": job.module,
        "script": job.script,
        "args": job.args,
        "hyperparameters": job.hyperparameters,
        "nodes": job.nodes,
        "worldSize": world_size,
        "gpuClass": job.gpu_class,
        "deepspeed": ds_config(job, world_size) if job.deepspeed else None,
        "checkpointEverySteps": job.checkpoint.every_steps,
    }


#: Who ran the deploy and from which CI run: the deploy workflows set these on the `pulumi up`
#: step from `${{ github.actor }}` and the run's URL (.github/workflows/deploy.yml,
#: deploy-jobs.yml); a local `pulumi up` without them records `unknown`. The EKS audit log
#: cannot answer "which person" for CI deploys: its `user.username` is the deploy role's session.
DEPLOYED_BY_ENV: Final = "GPU_PLATFORM_DEPLOYED_BY"
DEPLOY_RUN_ENV: Final = "GPU_PLATFORM_DEPLOY_RUN"
UNKNOWN_DEPLOYER: Final = "unknown"
DEPLOYED_BY_ANNOTATION: Final = f"{catalog.LABEL_DOMAIN}/deployed-by"
DEPLOY_RUN_ANNOTATION: Final = f"{catalog.LABEL_DOMAIN}/deploy-run"
_UNSAFE = re.compile(r"[^A-Za-z0-9._@\[\]/:+=-]")


def deploy_provenance(environ: Mapping[str, str]) -> dict[str, str]:
    """The deploy's provenance annotations from the environment `pulumi up` runs in: a GitHub
    login (`[bot]` suffixes kept) and an https run URL; anything else is reduced to a safe,
    bounded string (annotation values are free text, but a log query should not meet spaces or
    control characters). Deterministic for a given environment."""
    who = _UNSAFE.sub("_", environ.get(DEPLOYED_BY_ENV, "").strip())[:128]
    out = {DEPLOYED_BY_ANNOTATION: who or UNKNOWN_DEPLOYER}
    run = environ.get(DEPLOY_RUN_ENV, "").strip()
    if run.startswith("https://") and not _UNSAFE.search(run) and len(run) <= 256:
        out[DEPLOY_RUN_ANNOTATION] = run
    return out


def config_hash(parameters: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of `parameters` (sorted keys, no whitespace)."""
    canonical = json.dumps(parameters, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class JobPlan:
    """Everything the builders need about one job: its facts (what its pods are and where they
    go, components/analysis/facts.py JobFacts) and what the deploy adds — the image it pins,
    the checkpoint bucket, the run's identity and who deployed it."""

    facts: JobFacts
    #: What its pods run; None in a plan made without the deploy's images, which no manifest is
    #: rendered from.
    image: JobImage | None
    grace: GraceSeconds
    checkpoint_bucket: str
    rendezvous_port: int
    config_hash: str
    labels: dict[str, str] = field(default_factory=dict)
    #: `deploy_provenance`: on the launcher object's metadata only, never on the pod template
    #: (a different deployer must not change `spec.template`: that replaces the running Job).
    provenance: Mapping[str, str] = field(
        default_factory=lambda: {DEPLOYED_BY_ANNOTATION: UNKNOWN_DEPLOYER}
    )
    #: Submitted to a fleet's manager (docs/fleet.md): MultiKueue runs it on a worker, so it
    #: names its region's data through the worker's `gpu-platform-data` ConfigMap.
    fleet: bool = False

    @property
    def job(self) -> TrainingJobConfig:
        return self.facts.job

    @property
    def team(self) -> TeamConfig:
        return self.facts.team

    @property
    def resources(self) -> JobResources:
        return self.facts.resources

    @property
    def interval_s(self) -> float:
        return self.facts.checkpoint_interval_s

    @property
    def gpus_per_node(self) -> int:
        return self.job.node_gpus

    @property
    def gpu_model(self) -> str:
        return self.job.gpu_class.rsplit("-x", 1)[0]

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def pod_image(self) -> JobImage:
        """The image its manifests render; a plan without one renders nothing."""
        if self.image is None:
            raise ValueError(f"job {self.job.name}: planned without its image")
        return self.image

    @property
    def namespace(self) -> str:
        return self.team.namespace

    @property
    def world_size(self) -> int:
        return self.job.world_size

    @property
    def run_id(self) -> str:
        return f"{self.job.name}-{self.config_hash[:10]}"

    @property
    def effective_batch(self) -> int | None:
        ds = self.job.deepspeed
        return ds.effective_batch(self.world_size) if ds else None

    @property
    def checkpoint_dir(self) -> str:
        if self.job.checkpoint.volume:
            return f"{CHECKPOINT_MOUNT}/{self.job.checkpoint.path or self.job.name}"
        # S3 only: a node-local scratch dir the trainer replicates from (emptyDir below).
        return f"{CHECKPOINT_MOUNT}/{self.job.name}"

    @property
    def s3_uri(self) -> str | None:
        prefix = self.job.checkpoint.s3_prefix
        if prefix is None:
            return None
        return f"s3://{self.checkpoint_bucket}/{self.team.name}/{prefix}"

    @property
    def ds_config_map(self) -> str:
        return f"{self.job.name}-deepspeed"

    @property
    def uses_kueue(self) -> bool:
        return self.job.scheduler == "kueue"


def plan_job(
    cfg: StackConfig,
    derived: JobFacts,
    account_id: str,
    provenance: Mapping[str, str] | None = None,
    image: JobImage | None = None,
    *,
    fleet: bool = False,
) -> JobPlan:
    """A job's plan from its facts. `provenance`: `deploy_provenance(os.environ)` when the
    program runs (default: unknown). `image`: what its pods run (job_images.py); without it, an
    image the config gives by digest, else none (a plan that renders no manifest). `fleet`:
    submitted to a fleet's manager (its bucket is whichever region runs it)."""
    job = derived.job
    if image is None and derived.image is not None and derived.image.kind == "digest":
        image = digest_image(derived.image.identity)
    identity = (
        image.identity
        if image is not None
        else (derived.image.identity if derived.image is not None else "")
    )
    return JobPlan(
        facts=derived,
        image=image,
        grace=job_grace_seconds(job.checkpoint),
        checkpoint_bucket=(
            f"$({FLEET_BUCKET_VAR})"
            if fleet
            else catalog.bucket_name(cfg.bucket_prefix, "checkpoints", account_id)
        ),
        rendezvous_port=cfg.training.rendezvous_port,
        config_hash=config_hash(semantic_parameters(job, identity, job.world_size)),
        provenance=dict(provenance or deploy_provenance({})),
        fleet=fleet,
    )
