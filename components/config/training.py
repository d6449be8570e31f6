"""Training slice: stack-wide training settings and `trainingJobs[]` entries."""

from __future__ import annotations

import math
import re
from typing import Annotated, Final, Literal, get_args

from pydantic import Field, StringConstraints, field_validator, model_validator

from components import catalog
from components.config.base import (
    GPU_CLASS_PATTERN,
    DigestImage,
    Model,
    Name,
    Problem,
    S3Prefix,
    problems_error,
)
from components.config.topology import TopologyRequest

#: An image reference, by tag and/or digest (`repo[:tag][@sha256:<64 hex>]`).
ImageRef = Annotated[
    str,
    StringConstraints(pattern=r"^[a-z0-9][a-z0-9./_-]*(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?$"),
]
#: An AWS region name (`us-east-1`, `ap-southeast-2`, `us-gov-west-1`).
AwsRegion = Annotated[str, StringConstraints(pattern=r"^[a-z]{2}(-gov)?-[a-z]+-[0-9]$")]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)]
#: Seconds between the spot interruption notice and the instance's reclaim (EC2 user guide).
SPOT_NOTICE_SECONDS: Final = 120
#: The longest synchronous checkpoint save a job may declare (`checkpoint.saveSeconds`).
MAX_SAVE_SECONDS: Final = 3600
#: A job's priority: its Kueue WorkloadPriorityClass, pod PriorityClass and runtime.
JobPriority = Literal["production", "research", "dev"]
JOB_PRIORITIES: Final[tuple[JobPriority, ...]] = get_args(JobPriority)


class TrainingConfig(Model):
    """Stack-wide settings of the training-job layer (docs/training-jobs.md)."""

    #: Jobs must reference their image by digest (`@sha256:`): what ran is then known exactly.
    #: The prod-safe default; dev relaxes it to iterate on tags.
    require_image_digest: bool = True
    #: Image of jobs that name none, by digest. None (the default): the reference trainer as
    #: `images.trainer` makes it exist (built and pushed by `pulumi up`, or a published tag
    #: resolved at deploy time); its digest comes from the registry, never from config.
    default_image: DigestImage | None = None
    #: torchrun's c10d rendezvous port on node 0.
    rendezvous_port: Annotated[int, Field(ge=1024, le=65535)] = 29400
    #: Unpacked size (GiB) of a job's image when the job names none: the reference trainer
    #: (pytorch/pytorch CUDA runtime base + trainer; planning figure, measure with
    #: `docker image inspect --format '{{.Size}}'`). Feeds the time-to-first-step estimate.
    image_size_gib: Annotated[float, Field(gt=0, le=200)] = 8


class DeepSpeedSettings(Model):
    """The typed model a job's `ds_config.json` is generated from (never hand-written JSON)."""

    zero_stage: Annotated[int, Field(ge=0, le=3)] = 2
    #: Optimizer state (ZeRO >= 1) and parameters (ZeRO-3 only) offloaded to host memory.
    offload_optimizer: Literal["none", "cpu"] = "none"
    offload_param: Literal["none", "cpu"] = "none"
    bf16: bool = True
    fp16: bool = False
    micro_batch_per_gpu: Annotated[int, Field(ge=1, le=4096)]
    gradient_accumulation_steps: Annotated[int, Field(ge=1, le=4096)] = 1
    #: Optional: when given it must equal micro x accumulation x world size (else derived).
    train_batch_size: Annotated[int, Field(ge=1)] | None = None
    gradient_clipping: Annotated[float, Field(ge=0)] = 1.0
    reduce_bucket_size: Annotated[int, Field(ge=1)] = 500_000_000
    allgather_bucket_size: Annotated[int, Field(ge=1)] = 500_000_000

    @model_validator(mode="after")
    def _check(self) -> DeepSpeedSettings:
        problems: list[Problem] = []
        if self.fp16 and self.bf16:
            problems.append(Problem("fp16", True, "fp16 and bf16 are exclusive: turn one off"))
        if self.offload_param != "none" and self.zero_stage != 3:
            problems.append(
                Problem("offloadParam", self.offload_param, "parameter offload needs zeroStage 3")
            )
        if self.offload_optimizer != "none" and self.zero_stage == 0:
            problems.append(
                Problem(
                    "offloadOptimizer", self.offload_optimizer, "optimizer offload needs ZeRO >= 1"
                )
            )
        if problems:
            raise problems_error(problems)
        return self

    def effective_batch(self, world_size: int) -> int:
        """train_batch_size = micro x accumulation x world size (DeepSpeed's own rule)."""
        return self.micro_batch_per_gpu * self.gradient_accumulation_steps * world_size


class FsdpSettings(Model):
    """PyTorch FSDP (full shard): parameters, gradients and optimizer state sharded over all
    ranks. The batch arithmetic is DeepSpeed's: global = micro x accumulation x world size."""

    micro_batch_per_gpu: Annotated[int, Field(ge=1, le=4096)]
    gradient_accumulation_steps: Annotated[int, Field(ge=1, le=4096)] = 1
    #: Optional: when given it must equal micro x accumulation x world size.
    train_batch_size: Annotated[int, Field(ge=1)] | None = None

    def effective_batch(self, world_size: int) -> int:
        return self.micro_batch_per_gpu * self.gradient_accumulation_steps * world_size


class JobCheckpoint(Model):
    """Where a job checkpoints and how often (docs/training-jobs.md, Young/Daly)."""

    #: Mount the team's RWX checkpoint PVC (`<team>-checkpoints`) and write under `path`.
    volume: bool = True
    #: Directory inside the PVC; defaults to the job name.
    path: Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._/-]*$")] | None = None
    #: Also replicate to `s3://<checkpoints bucket>/<team>/<s3Prefix>`; null = PVC only.
    s3_prefix: S3Prefix | None = None
    #: Time one synchronous save takes (measured: trainer_checkpoint_save_duration_seconds);
    #: the SIGTERM path must finish one within the grace period.
    save_seconds: Annotated[float, Field(gt=0, le=MAX_SAVE_SECONDS)] = 30.0
    #: Time a periodic save blocks the loop (async saves: far below saveSeconds); Young/Daly's
    #: delta. Defaults to saveSeconds.
    blocking_seconds: Annotated[float, Field(gt=0, le=3600)] | None = None
    #: Mean time between *ungraceful* failures of the whole job (hardware, OOM, lost nodes).
    mtbf_seconds: Annotated[float, Field(gt=0)] = 21600.0
    #: Time a restart costs: rescheduling, image pull, resume.
    restart_seconds: Annotated[float, Field(ge=0)] = 300.0
    #: Override of the Young/Daly interval (seconds of compute between periodic saves).
    interval_seconds: Annotated[int, Field(ge=1)] | None = None
    every_steps: Annotated[int, Field(ge=0)] = 0
    keep_last: Annotated[int, Field(ge=1, le=100)] = 3

    @property
    def blocking(self) -> float:
        return self.blocking_seconds if self.blocking_seconds is not None else self.save_seconds

    @property
    def has_storage(self) -> bool:
        return self.volume or self.s3_prefix is not None


class SecretEnv(Model):
    """An environment variable read from a key of a Secret in the team's namespace."""

    name: EnvName
    secret_name: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")]
    key: Annotated[str, StringConstraints(pattern=r"^[-._a-zA-Z0-9]+$")]


#: Env var names that carry credentials (WANDB_API_KEY, HF_TOKEN, DB_PASSWORD, ...).
SECRET_ENV_NAME: Final = re.compile(
    r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIAL|PRIVATE_KEY)"
)
SecretProperty = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]{1,64}$")]


class JobSecret(Model):
    """A secret the job declares by name: AWS Secrets Manager `teams/<team>/<name>` (a JSON
    object), synced by External Secrets Operator into the team namespace; only the properties
    named here reach the pod, as env vars (`env: {VAR: property}`) or read-only files under
    /var/run/secrets/gpu-platform/<name>/ (`files: [property]`). No value is ever in config."""

    name: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")]
    env: dict[EnvName, SecretProperty] = {}
    files: list[SecretProperty] = []

    @model_validator(mode="after")
    def _used(self) -> JobSecret:
        if not self.env and not self.files:
            raise problems_error([Problem("env", None, "at least one env var or file")])
        return self


HyperValue = str | int | float | bool


class TrainingJobConfig(Model):
    """One `trainingJobs[]` entry: a multi-node DDP or DeepSpeed run under torchrun."""

    name: Name
    team: str
    mode: Literal["ddp", "deepspeed", "fsdp"] = "ddp"
    #: native = Indexed Job + headless Service; kubeflow = TrainJob (Trainer v2); volcano =
    #: Volcano Job.
    launcher: Literal["native", "kubeflow", "volcano"] = "native"
    scheduler: Literal["kueue", "volcano"] = "kueue"
    priority: JobPriority = "research"
    #: The job's own image: by digest (`repo[:tag]@sha256:...`), or, where
    #: `training.requireImageDigest` is false, a tag in an ECR registry
    #: (`<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>`) that the deploy resolves to its
    #: digest. None: `training.defaultImage`, else the reference trainer (`images.trainer`).
    image: ImageRef | None = None
    #: Unpacked image size (GiB) for the time-to-first-step estimate; None = training.imageSizeGib.
    image_size_gib: Annotated[float, Field(gt=0, le=200)] | None = None
    #: PID 1 (exec form): a torchrun-compatible launcher (`torch.distributed.run` CLI).
    entrypoint: Annotated[list[str], Field(min_length=1)] = [
        "python",
        "-m",
        "gpt_trainer.launch",
    ]
    #: The per-rank worker: a module (`-m`) or a script path; exactly one.
    module: str | None = "gpt_trainer.train"
    script: str | None = None
    args: list[str] = []
    #: Rendered as `--<key> <value>` worker flags (true: `--<key>`; false: omitted).
    hyperparameters: dict[
        Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]*$")], HyperValue
    ] = {}
    nodes: Annotated[int, Field(ge=1, le=256)] = 1
    #: Defaults to the GPU class's GPUs per node; when given it must equal them.
    gpus_per_node: Annotated[int, Field(ge=1, le=16)] | None = None
    gpu_class: str
    #: `reserved`: the stack's capacity reservations first, on-demand when they are full (Kueue
    #: tries the reserved flavor first; an ODCR can be interrupted and a Capacity Block ends, so
    #: the spot checkpoint rules apply).
    capacity: Literal["spot", "on-demand", "reserved", "either"] = "on-demand"
    checkpoint: JobCheckpoint = Field(default_factory=JobCheckpoint)
    deepspeed: DeepSpeedSettings | None = None
    fsdp: FsdpSettings | None = None
    #: Model size in parameters (e.g. 7e9): when given, the "will it run" analysis checks that
    #: the per-rank model states (parameters, gradients, optimizer) fit the GPU's memory.
    model_parameters: Annotated[float, Field(gt=0, le=1e13)] | None = None
    #: Per-pod CPU cores / memory; defaults derive from the smallest instance of the class.
    cpu: Annotated[float, Field(gt=0)] | None = None
    memory_gib: Annotated[int, Field(ge=1)] | None = None
    shm_gib: Annotated[int, Field(ge=1)] | None = None
    #: EFA: null = on when the instance type has EFA devices and the job spans nodes.
    efa: bool | None = None
    #: EFA devices per pod (`vpc.amazonaws.com/efa`); null = every EFA device of the instance
    #: type (catalog). Fewer devices mean fewer NICs for NCCL, so less bus bandwidth; more than
    #: the type has can never be scheduled (the analysis refuses it, naming this key).
    efa_devices: Annotated[int, Field(ge=1, le=64)] | None = None
    #: Availability zones the job's pods may span: `single` confines them to one zone (a required
    #: podAffinity on topology.kubernetes.io/zone, components/analysis/placement.py); `any` lets
    #: them spread. null = `single` for a multi-node EFA job (EFA traffic does not cross zones),
    #: `any` otherwise. `any` on a multi-node EFA job is refused; `single` on a multi-node TCP
    #: job keeps its gradient traffic off the cross-AZ data-transfer bill.
    zones: Literal["single", "any"] | None = None
    #: AWS regions the job may run in, for a job submitted to a fleet's manager (docs/fleet.md):
    #: a required node affinity on topology.kubernetes.io/region, which each worker's
    #: ResourceFlavors carry, so no worker of another region admits it. null = any worker.
    regions: Annotated[list[AwsRegion], Field(min_length=1)] | None = None
    #: The network block the gang asks for, on a GPU class placed by the network-node labels
    #: (`scheduling.topology.gpuClasses`): Kueue's podset topology annotation, a Volcano Job's
    #: `networkTopology`. null = chosen from the job's size and EFA use (docs/topology.md);
    #: on any other class it must stay null.
    topology: TopologyRequest | None = None
    nccl_debug: Literal["WARN", "INFO", "TRACE", "VERSION"] = "WARN"
    env: dict[EnvName, str] = {}
    secret_env: list[SecretEnv] = []
    #: Secrets from AWS Secrets Manager (docs/security.md#secrets).
    secrets: list[JobSecret] = []
    max_runtime_seconds: Annotated[int, Field(ge=60)] | None = None
    ttl_seconds_after_finished: Annotated[int, Field(ge=0)] = 86400
    #: Ungraceful failures tolerated per node before the job fails (preemptions never count).
    max_failures_per_node: Annotated[int, Field(ge=0, le=100)] = 3
    #: Provenance: the training code's commit (recorded as GIT_SHA).
    git_sha: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{7,40}$")] | None = None

    @field_validator("env")
    @classmethod
    def _no_reserved_env(cls, value: dict[str, str]) -> dict[str, str]:
        reserved = {"RUN_ID", "GIT_SHA", "IMAGE_DIGEST", "CONFIG_HASH", "TEAM"}
        clash = sorted(reserved & set(value))
        if clash:
            raise ValueError(f"{', '.join(clash)} are set by the platform (run metadata)")
        return value

    @field_validator("env")
    @classmethod
    def _no_secret_values(cls, value: dict[str, str]) -> dict[str, str]:
        # A secret's value in stack config ends up in the state, the manifests and the report.
        secretish = sorted(k for k in value if SECRET_ENV_NAME.search(k))
        if secretish:
            raise ValueError(
                f"{', '.join(secretish)} look like secrets: declare them under `secrets` "
                "(AWS Secrets Manager teams/<team>/<name>), never as a value in config"
            )
        return value

    @model_validator(mode="after")
    def _check(self) -> TrainingJobConfig:
        problems: list[Problem] = []
        if (self.module is None) == (self.script is None):
            problems.append(Problem("module", self.module, "exactly one of module and script"))
        if self.mode == "deepspeed" and self.deepspeed is None:
            problems.append(Problem("deepspeed", None, "a deepspeed section (mode is deepspeed)"))
        if self.mode != "deepspeed" and self.deepspeed is not None:
            problems.append(Problem("deepspeed", "...", "only for mode: deepspeed"))
        if self.mode != "fsdp" and self.fsdp is not None:
            problems.append(Problem("fsdp", "...", "only for mode: fsdp"))
        if self.efa is False and self.efa_devices is not None:
            problems.append(Problem("efaDevices", self.efa_devices, "only with EFA (efa is false)"))
        if self.launcher == "volcano" and self.scheduler != "volcano":
            problems.append(
                Problem(
                    "scheduler", self.scheduler, "volcano (the Volcano launcher is scheduled by it)"
                )
            )
        if self.launcher != "volcano" and self.scheduler == "volcano":
            problems.append(
                Problem(
                    "launcher",
                    self.launcher,
                    "volcano when scheduler is volcano (native and kubeflow jobs queue in Kueue)",
                )
            )
        if self.capacity != "on-demand" and not self.checkpoint.has_storage:
            problems.append(
                Problem(
                    "checkpoint",
                    {"volume": False, "s3Prefix": None},
                    "a spot job needs checkpoint storage (volume: true and/or s3Prefix)",
                )
            )
        if self.capacity != "on-demand":
            grace = job_grace_seconds(self.checkpoint)
            if grace.needed > SPOT_NOTICE_SECONDS:
                problems.append(
                    Problem(
                        "checkpoint.saveSeconds",
                        self.checkpoint.save_seconds,
                        f"a save that fits the {SPOT_NOTICE_SECONDS} s spot interruption notice "
                        f"(needs a {grace.needed} s grace period); save faster or use "
                        "on-demand",
                    )
                )
        if problems:
            raise problems_error(problems)
        return self

    @property
    def trainer_runtime(self) -> str:
        """The ClusterTrainingRuntime a TrainJob of this job names: its priority's, with its
        pods' grace period (GraceSeconds.termination) in the runtime's pod template."""
        return catalog.trainer_runtime_name(
            self.priority, job_grace_seconds(self.checkpoint).termination
        )

    @property
    def capacity_types(self) -> tuple[catalog.CapacityType, ...]:
        if self.capacity == "either":
            return ("spot", "on-demand")
        if self.capacity == "reserved":
            return ("reserved", "on-demand")
        return (self.capacity,)

    @property
    def node_gpus(self) -> int:
        """GPUs of one pod (one node): `gpusPerNode` when given (validated equal to the class's),
        else the class's; 0 for an unknown class (analysis/jobs.py reports that). The one
        formula every rule, the plan and the report use."""
        return self.gpus_per_node or gpus_of_class(self.gpu_class) or 0

    @property
    def world_size(self) -> int:
        """Ranks of the run: nodes x GPUs per node (one rank per GPU)."""
        return self.nodes * self.node_gpus


def _grace_chain(save_seconds: float) -> tuple[int, int, int]:
    """Worker --grace-s (one step to reach a boundary plus the synchronous save, with a margin),
    torchrun --shutdown-timeout, and what the shutdown needs of the pod (torchrun's timeout and a
    margin; at least the spot notice: that time is there anyway, and a slow save gets all of
    it)."""
    worker = math.ceil(save_seconds) + 20
    shutdown_timeout = worker + 10
    return worker, shutdown_timeout, max(shutdown_timeout + 10, SPOT_NOTICE_SECONDS)


def _pod_grace_seconds() -> tuple[int, ...]:
    """The spot notice, doubled until the last holds the longest save's shutdown: every job's
    grace is then at most twice what it needs (a longer grace costs nothing on a clean exit: the
    pod ends when its trainer does; only a hung shutdown waits it out)."""
    longest = _grace_chain(MAX_SAVE_SECONDS)[2]
    out = [SPOT_NOTICE_SECONDS]
    while out[-1] < longest:
        out.append(out[-1] * 2)
    return tuple(out)


#: The pod grace periods a job can get (GraceSeconds.termination): 120, 240, ... 3840 s. Each
#: priority has one ClusterTrainingRuntime per value (docs/training-jobs.md, "Grace periods").
POD_GRACE_SECONDS: Final = _pod_grace_seconds()


class GraceSeconds:
    """The nested shutdown budget: worker --grace-s < torchrun --shutdown-timeout < pod
    terminationGracePeriodSeconds, all above the checkpoint's save time."""

    def __init__(self, save_seconds: float) -> None:
        self.worker, self.shutdown_timeout, needed = _grace_chain(save_seconds)
        #: What the shutdown needs of the pod (at least the spot notice).
        self.needed = needed
        #: The pods' terminationGracePeriodSeconds, every launcher's: the smallest of
        #: POD_GRACE_SECONDS that holds `needed`. A TrainJob's pods take theirs from the
        #: ClusterTrainingRuntime it names (Kueue v0.19.2 drops it from a runtime patch:
        #: components/analysis/trainer.py), and the platform renders runtimes for those values
        #: only (`trainer_runtime_names`); beyond the last, `needed` itself (no runtime has it,
        #: and will-it-run refuses such a TrainJob).
        self.termination = next((g for g in POD_GRACE_SECONDS if g >= needed), needed)


def job_grace_seconds(checkpoint: JobCheckpoint) -> GraceSeconds:
    return GraceSeconds(checkpoint.save_seconds)


def trainer_runtime_names() -> tuple[str, ...]:
    """Every ClusterTrainingRuntime a platform (and a fleet's manager) renders: one per job
    priority and pod grace period, in that order."""
    return tuple(
        catalog.trainer_runtime_name(priority, grace)
        for priority in JOB_PRIORITIES
        for grace in POD_GRACE_SECONDS
    )


def gpus_of_class(gpu_class: str) -> int | None:
    """GPUs per node a GPU class (`a10g-x4`) stands for, None if it does not parse."""
    match = GPU_CLASS_PATTERN.match(gpu_class)
    return int(match["gpus"]) if match else None
