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

import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import catalog, checkpointing
from components.config import (
    GraceSeconds,
    StackConfig,
    TeamConfig,
    TrainingJobConfig,
    gpu_class_instance_types,
    gpus_of_class,
    job_grace_seconds,
    job_instance_types,
    smallest_instance_type,
)
from components.scheduling import KUEUE_QUEUE_LABEL, VOLCANO_SCHEDULER
from components.teams import TRAINER_SERVICE_ACCOUNT

if TYPE_CHECKING:
    from components.cluster import Cluster
    from components.iam import AwsAccount
    from components.scheduling import Scheduling


#: Trainer v2's torch runtime addresses the trainer container by this name; the native and
#: Volcano launchers use it too so one podFailurePolicy and one set of tests fit all three.
TRAINER_CONTAINER: Final = "node"
KUEUE_PRIORITY_LABEL: Final = "kueue.x-k8s.io/priority-class"
DO_NOT_DISRUPT: Final = "karpenter.sh/do-not-disrupt"
EFA_RESOURCE: Final = "vpc.amazonaws.com/efa"
ZONE_KEY: Final = "topology.kubernetes.io/zone"
JOB_LABEL: Final = f"{catalog.LABEL_DOMAIN}/training-job"
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
#: Pod PriorityClass per job priority (components/scheduling.py PRIORITY_CLASSES).
POD_PRIORITY_CLASS: Final[dict[str, str]] = {
    "production": "production-training",
    "research": "research-training",
    "dev": "dev",
}
#: GPUs with GPUDirect RDMA over EFA (p4d/p5/p6); other EFA instances use EFA without it.
EFA_RDMA_GPU_MODELS: Final = frozenset({"a100", "h100", "h200", "b200"})
#: Memory held back per node for kubelet, eviction threshold and daemons (GPU operator, CNI,
#: CSI, exporters): 10 % plus 2 GiB; CPU: 4 % plus one core.
MEMORY_HEADROOM_FRACTION: Final = 0.10
MEMORY_HEADROOM_GIB: Final = 2
CPU_HEADROOM_FRACTION: Final = 0.04
CPU_HEADROOM_CORES: Final = 1


def runtime_name(priority: str) -> str:
    """ClusterTrainingRuntime of a priority (pod PriorityClass is per runtime in Trainer v2)."""
    return f"gpu-platform-torch-{priority}"


# --- derived facts ------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobResources:
    """Per-pod resources, derived from the instance type unless the job overrides them."""

    instance_type: str
    cpu: float
    memory_gib: int
    shm_gib: int
    efa_devices: int


def default_cpu(vcpu: int) -> float:
    return float(max(1, math.floor(vcpu * (1 - CPU_HEADROOM_FRACTION)) - CPU_HEADROOM_CORES))


def default_memory_gib(memory_gib: int) -> int:
    return max(1, math.floor(memory_gib * (1 - MEMORY_HEADROOM_FRACTION)) - MEMORY_HEADROOM_GIB)


def job_resources(cfg: StackConfig, job: TrainingJobConfig) -> JobResources:
    """CPU, memory, /dev/shm and EFA devices of one pod of `job`."""
    types = job_instance_types(cfg, job) or gpu_class_instance_types(job.gpu_class)
    if not types:
        return JobResources("", job.cpu or 1.0, job.memory_gib or 1, job.shm_gib or 1, 0)
    name = smallest_instance_type(types)
    row = catalog.instance(name)
    memory = job.memory_gib or default_memory_gib(row.memory_gib)
    # /dev/shm is charged to the pod's memory: a quarter of it (NCCL and data loaders).
    shm = job.shm_gib or max(1, min(64, memory // 4))
    efa_on = job.efa if job.efa is not None else (row.efa_devices > 0 and job.nodes > 1)
    return JobResources(
        instance_type=name,
        cpu=job.cpu or default_cpu(row.vcpu),
        memory_gib=memory,
        shm_gib=shm,
        efa_devices=row.efa_devices if efa_on else 0,
    )


def image_digest(image: str) -> str:
    """The `sha256:` digest of an image reference, or `unpinned` for a tag-only reference."""
    return image.split("@", 1)[1] if "@" in image else "unpinned"


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


def config_hash(parameters: Mapping[str, Any]) -> str:
    """sha256 of the canonical JSON of `parameters` (sorted keys, no whitespace)."""
    canonical = json.dumps(parameters, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()


@dataclass(frozen=True)
class JobPlan:
    """Everything the builders need about one job, derived once from the stack config."""

    job: TrainingJobConfig
    team: TeamConfig
    image: str
    resources: JobResources
    gpus_per_node: int
    grace: GraceSeconds
    interval_s: float
    checkpoint_bucket: str
    rendezvous_port: int
    config_hash: str
    gpu_model: str
    labels: dict[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def namespace(self) -> str:
        return self.team.namespace

    @property
    def world_size(self) -> int:
        return self.job.nodes * self.gpus_per_node

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


def plan_job(cfg: StackConfig, job: TrainingJobConfig, account_id: str) -> JobPlan:
    """Derive a job's plan; the config was validated, so the team and class exist."""
    team = next(t for t in cfg.teams if t.name == job.team)
    image = job.image or cfg.training.default_image
    gpus = job.gpus_per_node or gpus_of_class(job.gpu_class) or 1
    checkpoint = job.checkpoint
    interval = (
        float(checkpoint.interval_seconds)
        if checkpoint.interval_seconds is not None
        else checkpointing.young_daly_interval_s(checkpoint.blocking, checkpoint.mtbf_seconds)
    )
    resources = job_resources(cfg, job)
    return JobPlan(
        job=job,
        team=team,
        image=image,
        resources=resources,
        gpus_per_node=gpus,
        grace=job_grace_seconds(checkpoint),
        interval_s=interval,
        checkpoint_bucket=catalog.bucket_name(cfg.bucket_prefix, "checkpoints", account_id),
        rendezvous_port=cfg.training.rendezvous_port,
        config_hash=config_hash(semantic_parameters(job, image, job.nodes * gpus)),
        gpu_model=job.gpu_class.rsplit("-x", 1)[0],
    )


def planned_waste(plan: JobPlan) -> float:
    """Expected fraction of wall time lost to checkpoint saves and rework after failures."""
    checkpoint = plan.job.checkpoint
    return checkpointing.wasted_fraction(
        plan.interval_s, checkpoint.blocking, checkpoint.mtbf_seconds, checkpoint.restart_seconds
    )


# --- torchrun -----------------------------------------------------------------------------------


def rendezvous_endpoint(plan: JobPlan) -> str:
    """Pod 0's DNS name through the launcher's headless Service, with the c10d port."""
    name = plan.name
    pod0 = {
        "native": f"{name}-0.{name}",
        "kubeflow": f"{name}-{KUBEFLOW_REPLICATED_JOB}-0-0.{name}",
        "volcano": f"{name}-{VOLCANO_TASK}-0.{name}",
    }[plan.job.launcher]
    return f"{pod0}:{plan.rendezvous_port}"


#: The env var each launcher puts the node index in (expanded by the kubelet in `args`).
NODE_RANK_ENV: Final = {
    "native": "JOB_COMPLETION_INDEX",
    "kubeflow": "PET_NODE_RANK",
    "volcano": "VC_TASK_INDEX",
}


def torchrun_args(plan: JobPlan) -> list[str]:
    """torchrun's arguments: the same for every launcher but the node-rank variable and the
    pod-0 name. --max-restarts 0: a failed rank fails the pod and the Job controller restarts it,
    so restarts are counted in one place (backoffLimit/podFailurePolicy)."""
    return [
        "--nnodes",
        str(plan.job.nodes),
        "--nproc-per-node",
        str(plan.gpus_per_node),
        "--node-rank",
        f"$({NODE_RANK_ENV[plan.job.launcher]})",
        "--rdzv-backend",
        "c10d",
        "--rdzv-endpoint",
        rendezvous_endpoint(plan),
        "--rdzv-id",
        plan.run_id,
        "--max-restarts",
        "0",
        "--shutdown-timeout",
        str(plan.grace.shutdown_timeout),
    ]


def _flag(key: str, value: Any) -> list[str]:
    if value is True:
        return [f"--{key}"]
    if value is False:
        return []
    return [f"--{key}", str(value)]


def worker_args(plan: JobPlan) -> list[str]:
    """The worker and its flags (the reference trainer's CLI contract, workloads/trainer)."""
    job = plan.job
    checkpoint = job.checkpoint
    out = ["-m", job.module] if job.module else [str(job.script)]
    out += ["--mode", job.mode]
    if job.deepspeed is not None:
        out += ["--ds-config", f"{DS_CONFIG_MOUNT}/{DS_CONFIG_KEY}"]
    out += ["--checkpoint-dir", plan.checkpoint_dir]
    if plan.s3_uri:
        out += ["--s3-uri", plan.s3_uri]
    out += [
        "--checkpoint-interval-s",
        str(round(plan.interval_s)),
        "--checkpoint-every-steps",
        str(checkpoint.every_steps),
        "--mtbf-s",
        str(round(checkpoint.mtbf_seconds)),
        "--keep-last",
        str(checkpoint.keep_last),
        "--metrics-port",
        str(METRICS_PORT),
        "--grace-s",
        str(plan.grace.worker),
    ]
    for key, value in sorted(job.hyperparameters.items()):
        out += _flag(key, value)
    return out + list(job.args)


def launch_args(plan: JobPlan) -> list[str]:
    """Container args after the entrypoint: torchrun's, then the worker's."""
    return torchrun_args(plan) + worker_args(plan)


# --- pod template -------------------------------------------------------------------------------


def run_metadata(plan: JobPlan) -> dict[str, str]:
    """Run metadata as env (the trainer records it in every checkpoint manifest and metric)."""
    return {
        "RUN_ID": plan.run_id,
        "GIT_SHA": plan.job.git_sha or "unknown",
        "IMAGE_DIGEST": image_digest(plan.image),
        "CONFIG_HASH": plan.config_hash,
        "TEAM": plan.team.name,
    }


def run_annotations(plan: JobPlan) -> dict[str, str]:
    return {
        f"{catalog.LABEL_DOMAIN}/{key.lower().replace('_', '-')}": value
        for key, value in run_metadata(plan).items()
    }


def pod_labels(plan: JobPlan) -> dict[str, str]:
    return {JOB_LABEL: plan.name, TEAM_LABEL: plan.team.name, RUN_ID_LABEL: plan.run_id}


def node_affinity(plan: JobPlan) -> dict[str, Any]:
    """Required: the GPU class and the allowed capacity types (the pools' own labels, see
    catalog.gpu_node_labels); `either` prefers spot, the cheaper one, when both have room."""
    affinity: dict[str, Any] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": catalog.LABEL_GPU_CLASS,
                            "operator": "In",
                            "values": [plan.job.gpu_class],
                        },
                        {
                            "key": catalog.LABEL_CAPACITY_TYPE,
                            "operator": "In",
                            "values": list(plan.job.capacity_types),
                        },
                    ]
                }
            ]
        }
    }
    if plan.job.capacity == "either":
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "weight": 100,
                "preference": {
                    "matchExpressions": [
                        {"key": catalog.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["spot"]}
                    ]
                },
            }
        ]
    return affinity


def affinity(plan: JobPlan) -> dict[str, Any]:
    out: dict[str, Any] = {"nodeAffinity": node_affinity(plan)}
    if plan.resources.efa_devices and plan.job.nodes > 1:
        # EFA does not cross availability zones: all pods of the job in pod 0's zone.
        out["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": {"matchLabels": {JOB_LABEL: plan.name}}, "topologyKey": ZONE_KEY}
            ]
        }
    return out


def container_env(plan: JobPlan) -> list[dict[str, Any]]:
    env: dict[str, str] = {
        **run_metadata(plan),
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "NCCL_DEBUG": plan.job.nccl_debug,
        "CHECKPOINT_DIR": plan.checkpoint_dir,
    }
    if plan.s3_uri:
        env["CHECKPOINT_URI"] = plan.s3_uri
    if plan.resources.efa_devices:
        env["FI_PROVIDER"] = "efa"
        if plan.gpu_model in EFA_RDMA_GPU_MODELS:
            env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    env.update(plan.job.env)
    rows: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in env.items()]
    rows += [
        {"name": s.name, "valueFrom": {"secretKeyRef": {"name": s.secret_name, "key": s.key}}}
        for s in plan.job.secret_env
    ]
    return rows


def container_resources(plan: JobPlan) -> dict[str, Any]:
    """GPU limits = GPUs per node (requests equal); memory limit = request (not compressible);
    no CPU limit (CFS throttling stalls data loaders and NCCL progress threads)."""
    res = plan.resources
    memory = f"{res.memory_gib}Gi"
    requests: dict[str, str] = {
        "cpu": f"{res.cpu:g}",
        "memory": memory,
        catalog.GPU_RESOURCE: str(plan.gpus_per_node),
    }
    limits: dict[str, str] = {"memory": memory, catalog.GPU_RESOURCE: str(plan.gpus_per_node)}
    if res.efa_devices:
        requests[EFA_RESOURCE] = limits[EFA_RESOURCE] = str(res.efa_devices)
    return {"requests": requests, "limits": limits}


def volumes(plan: JobPlan) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "name": "dshm",
            "emptyDir": {"medium": "Memory", "sizeLimit": f"{plan.resources.shm_gib}Gi"},
        }
    ]
    if plan.job.checkpoint.volume:
        out.append(
            {
                "name": "checkpoints",
                "persistentVolumeClaim": {"claimName": f"{plan.team.name}-checkpoints"},
            }
        )
    else:
        out.append({"name": "checkpoints", "emptyDir": {}})
    if plan.job.deepspeed is not None:
        out.append({"name": "ds-config", "configMap": {"name": plan.ds_config_map}})
    return out


def volume_mounts(plan: JobPlan) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": SHM_MOUNT},
        {"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT},
    ]
    if plan.job.deepspeed is not None:
        out.append({"name": "ds-config", "mountPath": DS_CONFIG_MOUNT, "readOnly": True})
    return out


def trainer_container(plan: JobPlan) -> dict[str, Any]:
    return {
        "name": TRAINER_CONTAINER,
        "image": plan.image,
        # Exec form: the launcher (torchrun in-process) is PID 1 and receives SIGTERM itself.
        "command": list(plan.job.entrypoint),
        "args": launch_args(plan),
        "env": container_env(plan),
        "resources": container_resources(plan),
        "ports": [
            {"name": "rendezvous", "containerPort": plan.rendezvous_port},
            {"name": "metrics", "containerPort": METRICS_PORT},
        ],
        "volumeMounts": volume_mounts(plan),
    }


def pod_metadata(plan: JobPlan) -> dict[str, Any]:
    return {
        "labels": pod_labels(plan),
        # Karpenter must not consolidate or expire a node under a running training pod.
        "annotations": {DO_NOT_DISRUPT: "true", **run_annotations(plan)},
    }


def pod_spec(plan: JobPlan) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": TRAINER_SERVICE_ACCOUNT,
        "priorityClassName": POD_PRIORITY_CLASS[plan.job.priority],
        "terminationGracePeriodSeconds": plan.grace.termination,
        "tolerations": [catalog.gpu_toleration()],
        "affinity": affinity(plan),
        "containers": [trainer_container(plan)],
        "volumes": volumes(plan),
    }
    if plan.job.max_runtime_seconds and plan.job.launcher == "volcano":
        # Volcano Jobs have no job-level deadline; bound each pod instead.
        spec["activeDeadlineSeconds"] = plan.job.max_runtime_seconds
    return spec


def pod_failure_policy() -> dict[str, Any]:
    """Disruptions (spot reclaim, Karpenter drain, Kueue preemption) and clean preemptions after
    a committed checkpoint (exit 75) do not count against backoffLimit: the retry resumes from
    that checkpoint and loses no work. Counting them would let spot churn fail a healthy run;
    endless retries stay bounded by activeDeadlineSeconds and Kueue's requeue backoff."""
    return {
        "rules": [
            {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]},
            {
                "action": "Ignore",
                "onExitCodes": {
                    "containerName": TRAINER_CONTAINER,
                    "operator": "In",
                    "values": [PREEMPTED_EXIT_CODE],
                },
            },
        ]
    }


def backoff_limit(plan: JobPlan) -> int:
    """One ungraceful failure fails every pod of the job (peers lose their rendezvous), so the
    budget scales with the node count."""
    return plan.job.nodes * plan.job.max_failures_per_node


def plan_annotations(plan: JobPlan) -> dict[str, str]:
    """The job's plan on the top-level object: operators (and the report) read it there."""
    res = plan.resources
    checkpoint = plan.job.checkpoint
    values: dict[str, Any] = {
        "launcher": plan.job.launcher,
        "scheduler": plan.job.scheduler,
        "mode": plan.job.mode,
        "gpu-class": plan.job.gpu_class,
        "capacity": plan.job.capacity,
        "instance-type": res.instance_type,
        "nodes": plan.job.nodes,
        "gpus-per-node": plan.gpus_per_node,
        "world-size": plan.world_size,
        "effective-batch": plan.effective_batch if plan.effective_batch else "",
        "checkpoint-interval-s": round(plan.interval_s),
        "checkpoint-blocking-s": f"{checkpoint.blocking:g}",
        "checkpoint-save-s": f"{checkpoint.save_seconds:g}",
        "mtbf-s": f"{checkpoint.mtbf_seconds:g}",
        "restart-s": f"{checkpoint.restart_seconds:g}",
        "config-hash": plan.config_hash,
    }
    return {f"{catalog.LABEL_DOMAIN}/{k}": str(v) for k, v in values.items() if v != ""}


def _metadata(plan: JobPlan, name: str, *, kueue: bool) -> dict[str, Any]:
    labels = {JOB_LABEL: plan.name, TEAM_LABEL: plan.team.name, RUN_ID_LABEL: plan.run_id}
    if kueue:
        labels[KUEUE_QUEUE_LABEL] = plan.team.name
        labels[KUEUE_PRIORITY_LABEL] = plan.job.priority
    return {
        "name": name,
        "namespace": plan.namespace,
        "labels": labels,
        "annotations": plan_annotations(plan),
    }


# --- launchers ----------------------------------------------------------------------------------


def deepspeed_config_map(plan: JobPlan) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": plan.ds_config_map,
            "namespace": plan.namespace,
            "labels": {JOB_LABEL: plan.name, TEAM_LABEL: plan.team.name},
        },
        "data": {DS_CONFIG_KEY: json.dumps(ds_config(plan.job, plan.world_size), indent=2)},
    }


def headless_service(plan: JobPlan) -> dict[str, Any]:
    """Named as the pods' subdomain: `<job>-<index>.<job>` resolves to each pod. Not-ready
    addresses are published so rendezvous works before any readiness."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": plan.name,
            "namespace": plan.namespace,
            "labels": {JOB_LABEL: plan.name, TEAM_LABEL: plan.team.name},
        },
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {JOB_LABEL: plan.name},
            "ports": [
                {
                    "name": "rendezvous",
                    "port": plan.rendezvous_port,
                    "targetPort": plan.rendezvous_port,
                }
            ],
        },
    }


def indexed_job(plan: JobPlan) -> dict[str, Any]:
    """Native launcher: an Indexed Job, created suspended for Kueue."""
    spec: dict[str, Any] = {
        "completionMode": "Indexed",
        "completions": plan.job.nodes,
        "parallelism": plan.job.nodes,
        "suspend": True,
        "backoffLimit": backoff_limit(plan),
        "podFailurePolicy": pod_failure_policy(),
        "ttlSecondsAfterFinished": plan.job.ttl_seconds_after_finished,
        "template": {
            "metadata": pod_metadata(plan),
            "spec": {**pod_spec(plan), "subdomain": plan.name},
        },
    }
    if plan.job.max_runtime_seconds:
        spec["activeDeadlineSeconds"] = plan.job.max_runtime_seconds
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _metadata(plan, plan.name, kueue=True),
        "spec": spec,
    }


def volcano_job(plan: JobPlan) -> dict[str, Any]:
    """Volcano launcher: gang of all nodes in the team's Volcano queue. Volcano has no
    podFailurePolicy: evictions and exit 75 restart the job (resume from the checkpoint) and
    every restart counts against maxRetry, sized for the node count plus disruptions."""
    template = {"metadata": pod_metadata(plan), "spec": pod_spec(plan)}
    return {
        "apiVersion": VOLCANO_JOB_API,
        "kind": "Job",
        "metadata": _metadata(plan, plan.name, kueue=False),
        "spec": {
            "schedulerName": VOLCANO_SCHEDULER,
            "queue": plan.team.name,
            "minAvailable": plan.job.nodes,
            "priorityClassName": POD_PRIORITY_CLASS[plan.job.priority],
            "maxRetry": backoff_limit(plan) + plan.job.nodes * 10,
            "ttlSecondsAfterFinished": plan.job.ttl_seconds_after_finished,
            # env: VC_TASK_INDEX (node rank); svc: headless Service `<job>` + pod hostnames.
            # The team's NetworkPolicies already admit in-namespace traffic.
            "plugins": {
                "env": [],
                "svc": ["--publish-not-ready-addresses=true", "--disable-network-policy=true"],
            },
            "policies": [
                {"event": "PodEvicted", "action": "RestartJob"},
                {"event": "PodFailed", "action": "RestartJob"},
            ],
            "tasks": [
                {
                    "name": VOLCANO_TASK,
                    "replicas": plan.job.nodes,
                    "minAvailable": plan.job.nodes,
                    "template": template,
                }
            ],
        },
    }


def cluster_training_runtime(priority: str, default_image: str) -> dict[str, Any]:
    """The platform's torch runtime for Trainer v2: one JobSet replicated job `node`, restart
    semantics as the native launcher (podFailurePolicy), whole-gang restarts by JobSet."""
    return {
        "apiVersion": TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {
            "name": runtime_name(priority),
            "labels": {"trainer.kubeflow.org/framework": "torch"},
        },
        "spec": {
            "mlPolicy": {"numNodes": 1, "torch": {}},
            "template": {
                "spec": {
                    "failurePolicy": {"maxRestarts": 3},
                    "replicatedJobs": [
                        {
                            "name": KUBEFLOW_REPLICATED_JOB,
                            "replicas": 1,
                            "template": {
                                "metadata": {
                                    "labels": {
                                        "trainer.kubeflow.org/trainjob-ancestor-step": "trainer"
                                    }
                                },
                                "spec": {
                                    "backoffLimit": 0,
                                    "podFailurePolicy": pod_failure_policy(),
                                    "template": {
                                        "spec": {
                                            "restartPolicy": "Never",
                                            "priorityClassName": POD_PRIORITY_CLASS[priority],
                                            "containers": [
                                                {"name": TRAINER_CONTAINER, "image": default_image}
                                            ],
                                        }
                                    },
                                },
                            },
                        }
                    ],
                }
            },
        },
    }


def train_job(plan: JobPlan) -> dict[str, Any]:
    """Kubeflow launcher: a TrainJob on the priority's runtime; per-job pod settings go in a
    runtime patch (the fields Trainer v2 lets a TrainJob patch)."""
    pod = pod_spec(plan)
    container = trainer_container(plan)
    patched_pod = {
        key: pod[key]
        for key in (
            "serviceAccountName",
            "terminationGracePeriodSeconds",
            "tolerations",
            "affinity",
            "volumes",
        )
    }
    patched_pod["containers"] = [
        {"name": TRAINER_CONTAINER, "volumeMounts": container["volumeMounts"]}
    ]
    spec: dict[str, Any] = {
        "runtimeRef": {
            "apiGroup": "trainer.kubeflow.org",
            "kind": "ClusterTrainingRuntime",
            "name": runtime_name(plan.job.priority),
        },
        "suspend": True,
        "trainer": {
            "image": plan.image,
            "command": container["command"],
            "args": container["args"],
            "env": container["env"],
            "numNodes": plan.job.nodes,
            "numProcPerNode": plan.gpus_per_node,
            "resourcesPerNode": container["resources"],
        },
        "runtimePatches": [
            {
                "manager": f"{catalog.LABEL_DOMAIN}/training",
                "trainingRuntimeSpec": {
                    "template": {
                        "spec": {
                            "replicatedJobs": [
                                {
                                    "name": KUBEFLOW_REPLICATED_JOB,
                                    "template": {
                                        "spec": {
                                            "template": {
                                                "metadata": pod_metadata(plan),
                                                "spec": patched_pod,
                                            }
                                        }
                                    },
                                }
                            ]
                        }
                    }
                },
            }
        ],
    }
    if plan.job.max_runtime_seconds:
        spec["activeDeadlineSeconds"] = plan.job.max_runtime_seconds
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": _metadata(plan, plan.name, kueue=True),
        "spec": spec,
    }


def job_manifests(plan: JobPlan) -> list[dict[str, Any]]:
    """Every object of one job, in apply order (ConfigMap and Service before the job)."""
    out: list[dict[str, Any]] = []
    if plan.job.deepspeed is not None:
        out.append(deepspeed_config_map(plan))
    launcher = plan.job.launcher
    if launcher == "native":
        out += [headless_service(plan), indexed_job(plan)]
    elif launcher == "volcano":
        out.append(volcano_job(plan))
    else:
        out.append(train_job(plan))
    return out


# --- components ---------------------------------------------------------------------------------


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
            child_opts = pulumi.ResourceOptions(
                parent=self,
                provider=args.k8s_provider,
                depends_on=[*args.depends_on, *self.objects],
            )
            role = {"ConfigMap": "deepspeed", "Service": "service"}.get(kind, "job")
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
    """Inputs of the training layer: the stack config and what jobs depend on."""

    config: StackConfig
    account_id: str
    k8s_provider: k8s.Provider
    #: team name -> what its jobs need first (Team component, its PVCs).
    team_resources: Mapping[str, Sequence[pulumi.Resource]]
    kueue_release: pulumi.Resource
    volcano_release: pulumi.Resource
    trainer_release: pulumi.Resource

    @classmethod
    def of(
        cls,
        cfg: StackConfig,
        cluster: Cluster,
        scheduling: Scheduling,
        aws_account: AwsAccount,
        team_resources: Mapping[str, Sequence[pulumi.Resource]],
    ) -> TrainingJobsArgs:
        """The stack config, the schedulers the jobs use, and each team's objects."""
        return cls(
            config=cfg,
            account_id=aws_account.account_id,
            k8s_provider=cluster.k8s_provider,
            team_resources=team_resources,
            kueue_release=scheduling.kueue,
            volcano_release=scheduling.volcano,
            trainer_release=scheduling.trainer,
        )


class TrainingJobs(pulumi.ComponentResource):
    """The platform's ClusterTrainingRuntimes and one TrainingJob per `trainingJobs[]` entry."""

    jobs: dict[str, TrainingJob]

    def __init__(
        self, name: str, args: TrainingJobsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:training:TrainingJobs", name, None, opts)
        cfg = args.config
        runtimes: list[pulumi.Resource] = []
        if any(job.launcher == "kubeflow" for job in cfg.training_jobs):
            for priority in POD_PRIORITY_CLASS:
                manifest = cluster_training_runtime(priority, cfg.training.default_image)
                runtimes.append(
                    k8s.apiextensions.CustomResource(
                        f"{name}-runtime-{priority}",
                        api_version=manifest["apiVersion"],
                        kind=manifest["kind"],
                        metadata=manifest["metadata"],
                        spec=manifest["spec"],
                        opts=pulumi.ResourceOptions(
                            parent=self,
                            provider=args.k8s_provider,
                            depends_on=[args.trainer_release],
                        ),
                    )
                )
        self.jobs = {}
        for job in cfg.training_jobs:
            plan = plan_job(cfg, job, args.account_id)
            scheduler = {
                "native": [args.kueue_release],
                "kubeflow": [args.kueue_release, args.trainer_release, *runtimes],
                "volcano": [args.volcano_release],
            }[job.launcher]
            self.jobs[f"{job.team}/{job.name}"] = TrainingJob(
                f"{name}-{job.team}-{job.name}",
                TrainingJobArgs(
                    plan=plan,
                    k8s_provider=args.k8s_provider,
                    depends_on=[*args.team_resources.get(job.team, ()), *scheduler],
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
        self.register_outputs({"jobs": sorted(self.jobs)})
