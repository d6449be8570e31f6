"""Pure builders of a training job's Kubernetes objects from its plan: torchrun and worker
arguments, the pod template (placement, resources, env, volumes, spot safety) and the three
launchers (Indexed Job + headless Service, Kubeflow TrainJob, Volcano Job).

Why this module is long: the three launchers share one pod template, and splitting them from it
would scatter what a training pod is over several modules."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any, Final

from components import catalog
from components.analysis import limit_range, pod_security
from components.catalog import KUEUE_QUEUE_LABEL, TRAINER_SERVICE_ACCOUNT, VOLCANO_SCHEDULER
from components.config import JOB_PRIORITIES, POD_GRACE_SECONDS
from components.training_jobs import job_secrets
from components.training_jobs.plan import (
    CHECKPOINT_MOUNT,
    DO_NOT_DISRUPT,
    DS_CONFIG_KEY,
    DS_CONFIG_MOUNT,
    EFA_RDMA_GPU_MODELS,
    FLEET_BUCKET_VAR,
    JOB_LABEL,
    KUBEFLOW_REPLICATED_JOB,
    KUEUE_PRIORITY_LABEL,
    METRICS_PORT,
    POD_PRIORITY_CLASS,
    PREEMPTED_EXIT_CODE,
    RUN_ID_LABEL,
    SAFE_TO_EVICT,
    SHM_MOUNT,
    TEAM_LABEL,
    TRAINER_API,
    TRAINER_CONTAINER,
    VOLCANO_JOB_API,
    VOLCANO_TASK,
    JobPlan,
    ds_config,
)

#: pulumi-kubernetes' annotation that turns off the create/update await of an object.
SKIP_AWAIT: Final = "pulumi.com/skipAwait"

#: checkov's one exception for training pods (no CPU limit), on the job and on its pods.
GPU_POD_SKIPS: Final = pod_security.gpu_pod_skips()

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
    """The worker and its flags (the reference trainer's CLI contract, images/trainer)."""
    job = plan.job
    checkpoint = job.checkpoint
    out = ["-m", job.module] if job.module else [str(job.script)]
    out += ["--mode", job.mode]
    if job.deepspeed is not None and plan.fleet:
        # MultiKueue mirrors only the job object: the config travels inline in its args.
        config = json.dumps(ds_config(job, plan.world_size), sort_keys=True, separators=(",", ":"))
        out += ["--ds-config-json", config]
    elif job.deepspeed is not None:
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
        "IMAGE_DIGEST": plan.pod_image.digest,
        "CONFIG_HASH": plan.config_hash,
        "TEAM": plan.team.name,
    }


def run_annotations(plan: JobPlan) -> dict[str, str]:
    """The run metadata as pod annotations; a value only the worker knows (a fleet job's
    `$(VAR)` from its ConfigMap) is an env var only."""
    return {
        f"{catalog.LABEL_DOMAIN}/{key.lower().replace('_', '-')}": value
        for key, value in run_metadata(plan).items()
        if not (isinstance(value, str) and value.startswith("$("))
    }


def fleet_env(plan: JobPlan) -> list[dict[str, Any]]:
    """A fleet job's first env var: its region's checkpoints bucket, from the worker's
    `gpu-platform-data` ConfigMap (components/platform/fleet/worker.py), defined before the
    values that reference it."""
    if not plan.fleet:
        return []
    source = {"configMapKeyRef": {"name": catalog.FLEET_DATA_CONFIGMAP, "key": "checkpointsBucket"}}
    return [{"name": FLEET_BUCKET_VAR, "valueFrom": source}]


def pod_labels(plan: JobPlan) -> dict[str, str]:
    return {JOB_LABEL: plan.name, TEAM_LABEL: plan.team.name, RUN_ID_LABEL: plan.run_id}


def container_env(plan: JobPlan) -> list[dict[str, Any]]:
    env: dict[str, str] = {
        **run_metadata(plan),
        # The root filesystem is read-only: HOME and the JIT caches live on the scratch volume.
        **pod_security.SCRATCH_ENV,
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
        "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
        "NCCL_DEBUG": plan.job.nccl_debug,
        "CHECKPOINT_DIR": plan.checkpoint_dir,
    }
    if plan.s3_uri:
        env["CHECKPOINT_URI"] = plan.s3_uri
    # MFU's denominator for the trainer (gpt_trainer/perf.py); unknown models get no MFU.
    peak = catalog.GPU_PEAK_BF16_TFLOPS.get(plan.gpu_model)
    if peak is not None:
        env["GPU_PEAK_TFLOPS"] = f"{peak:g}"
    if plan.resources.efa_devices:
        env["FI_PROVIDER"] = "efa"
        if plan.gpu_model in EFA_RDMA_GPU_MODELS:
            env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    env.update(plan.job.env)
    rows: list[dict[str, Any]] = fleet_env(plan)
    rows += [{"name": k, "value": v} for k, v in env.items()]
    rows += [
        {"name": s.name, "valueFrom": {"secretKeyRef": {"name": s.secret_name, "key": s.key}}}
        for s in plan.job.secret_env
    ]
    return rows + job_secrets.env_rows(plan)


def container_resources(plan: JobPlan) -> dict[str, Any]:
    """The training container's resources (components/analysis/limit_range.py: what Kueue and
    the namespace LimitRange judge)."""
    res = plan.resources
    return dict(
        limit_range.container_resources(
            res.cpu, res.memory_gib, plan.gpus_per_node, res.efa_devices
        )
    )


def volumes(plan: JobPlan) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {
            "name": "dshm",
            "emptyDir": {"medium": "Memory", "sizeLimit": f"{plan.resources.shm_gib}Gi"},
        },
        pod_security.scratch_volume(),
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
    if plan.job.deepspeed is not None and not plan.fleet:
        out.append({"name": "ds-config", "configMap": {"name": plan.ds_config_map}})
    return out + job_secrets.volumes(plan)


def volume_mounts(plan: JobPlan) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": "dshm", "mountPath": SHM_MOUNT},
        {"name": "checkpoints", "mountPath": CHECKPOINT_MOUNT},
        pod_security.scratch_mount(),
    ]
    if plan.job.deepspeed is not None and not plan.fleet:
        out.append({"name": "ds-config", "mountPath": DS_CONFIG_MOUNT, "readOnly": True})
    return out + job_secrets.volume_mounts(plan)


def trainer_container(plan: JobPlan) -> dict[str, Any]:
    return {
        "name": TRAINER_CONTAINER,
        "image": plan.pod_image.reference,
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
        **pod_security.restricted_container_fields(),
    }


def topology_annotations(plan: JobPlan) -> dict[str, str]:
    """The one podset topology annotation Kueue reads, for a Kueue job of a class placed by the
    network (components/analysis/topology.py): on the pod template's metadata, where Kueue
    v0.19.2 reads it for a batch Job and, through the child JobSet it builds from the runtime
    and the runtime patches, for a TrainJob (pkg/controller/jobs/trainjob/
    trainjob_controller.go getChildJobSet; Trainer v2.2.1's PodTemplatePatch.metadata carries
    "labels and annotations", pkg/apis/trainer/v1alpha1/trainjob_types.go L372-376). Volcano
    jobs carry theirs in `networkTopology` (volcano_job)."""
    request = plan.facts.topology
    if request is None or plan.job.scheduler != "kueue":
        return {}
    return request.kueue_annotations()


def pod_metadata(plan: JobPlan) -> dict[str, Any]:
    return {
        "labels": pod_labels(plan),
        # Neither Karpenter nor the cluster-autoscaler may remove a node under a training pod.
        "annotations": {
            DO_NOT_DISRUPT: "true",
            SAFE_TO_EVICT: "false",
            **run_annotations(plan),
            **GPU_POD_SKIPS,
            **topology_annotations(plan),
        },
    }


def pod_spec(plan: JobPlan) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": TRAINER_SERVICE_ACCOUNT,
        "priorityClassName": POD_PRIORITY_CLASS[plan.job.priority],
        "terminationGracePeriodSeconds": plan.grace.termination,
        # The job's placement, rendered once in its facts (components/analysis/placement.py):
        # what the will-it-run analysis matched against the node sources.
        "tolerations": plan.facts.placement.pod_tolerations(),
        "affinity": plan.facts.placement.pod_affinity(),
        "containers": [trainer_container(plan)],
        "volumes": volumes(plan),
        **pod_security.restricted_pod_fields(),
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


def _managed_by(plan: JobPlan) -> dict[str, str]:
    """A fleet job is MultiKueue's from creation: `managedBy` is immutable, and Kueue's webhook
    defaults it only once the queue is in its cache (kubernetes-sigs/kueue@v0.19.2
    pkg/controller/jobframework/defaults.go ApplyDefaultForManagedBy), so a job created first
    would run on the manager's (empty) cluster. batch/v1 Job `spec.managedBy` is on by default
    since Kubernetes 1.32 (JobManagedBy, beta); TrainJob's is Trainer v2.3.0's
    pkg/apis/trainer/v1alpha1/trainjob_types.go (only its own controller or MultiKueue)."""
    return {"managedBy": catalog.MULTIKUEUE_CONTROLLER} if plan.fleet else {}


def _metadata(plan: JobPlan, name: str, *, kueue: bool) -> dict[str, Any]:
    labels = {JOB_LABEL: plan.name, TEAM_LABEL: plan.team.name, RUN_ID_LABEL: plan.run_id}
    if kueue:
        labels[KUEUE_QUEUE_LABEL] = plan.team.name
        labels[KUEUE_PRIORITY_LABEL] = plan.job.priority
    return {
        "name": name,
        "namespace": plan.namespace,
        "labels": labels,
        # pulumi-kubernetes awaits a batch/v1 Job until it completes (10 min, then `up` fails;
        # pulumi/pulumi-kubernetes@v4.32.0 provider/pkg/await/job.go); a training run lasts
        # days and a Kueue-suspended Job never completes while it queues. `up` creates the
        # run, it does not wait for it. Custom resources (TrainJob, Volcano Job) are not
        # awaited anyway; the annotation makes that explicit for all three launchers.
        # Who deployed it: object metadata only (an in-place update when another person runs
        # `up`; on the pod template it would replace the running Job, see plan.provenance).
        "annotations": {
            SKIP_AWAIT: "true",
            **plan_annotations(plan),
            **plan.provenance,
            **GPU_POD_SKIPS,
        },
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
    spec.update(_managed_by(plan))
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
    request = plan.facts.topology
    # A class placed by the network: the gang within one HyperNode (hard) or as close as it
    # gets (soft); volcano-sh/volcano@v1.15.1 staging/src/volcano.sh/apis/pkg/apis/batch/
    # v1alpha1/job.go L123-157, copied to the job's PodGroup by the job controller.
    network = request.volcano_network_topology() if request is not None else None
    return {
        "apiVersion": VOLCANO_JOB_API,
        "kind": "Job",
        "metadata": _metadata(plan, plan.name, kueue=False),
        "spec": {
            **({"networkTopology": network} if network is not None else {}),
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


def cluster_training_runtime(priority: str, grace_s: int, default_image: Any) -> dict[str, Any]:
    """The platform's torch runtime for Trainer v2: one JobSet replicated job `node`, restart
    semantics as the native launcher (podFailurePolicy), whole-gang restarts by JobSet; its pods
    get the priority's PriorityClass and `grace_s` seconds to shut down.

    The grace period lives here, not in the TrainJob's runtime patch: Kueue v0.19.2 reads and
    writes TrainJobs through Trainer v2.2.1's types (kubernetes-sigs/kueue@v0.19.2 go.mod L14),
    whose `PodSpecPatch` has no `terminationGracePeriodSeconds` (kubeflow/trainer@v2.2.1
    pkg/apis/trainer/v1alpha1/trainjob_types.go L384-450), and writes the whole TrainJob back on
    admission (pkg/controller/jobs/trainjob/trainjob_controller.go L243-290, `c.Update`) and
    when MultiKueue copies it to a worker (trainjob_multikueue_adapter.go L64-80): a grace in
    the patch is dropped and the pods get Kubernetes' 30 s. Kueue never writes a runtime, only
    reads it (getRuntimeSpec, trainjob_controller.go L199-215), and Trainer v2.3.0 merges the
    patches onto the runtime's JobSet template (pkg/runtime/core/trainingruntime.go L251-290),
    so a field the patches leave alone reaches the JobSet and its pods as the runtime has it.
    Identical on a fleet's manager and every worker (docs/fleet.md): the same inputs, one
    function."""
    return {
        "apiVersion": TRAINER_API,
        "kind": "ClusterTrainingRuntime",
        "metadata": {
            "name": catalog.trainer_runtime_name(priority, grace_s),
            "labels": {"trainer.kubeflow.org/framework": "torch"},
            "annotations": pod_security.runtime_template_skips(),
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
                                            "terminationGracePeriodSeconds": grace_s,
                                            # TrainJob pods inherit these: patches set none.
                                            **pod_security.restricted_pod_fields(),
                                            "containers": [
                                                {
                                                    "name": TRAINER_CONTAINER,
                                                    "image": default_image,
                                                    **pod_security.restricted_container_fields(),
                                                }
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


def cluster_training_runtimes(default_image: Any) -> list[dict[str, Any]]:
    """Every runtime a cluster that takes TrainJobs has: one per job priority and pod grace
    period (config.POD_GRACE_SECONDS), so that a job stack's TrainJob, whatever its save time,
    names one that exists (it cannot create cluster-scoped objects itself), and a fleet's
    manager and workers hold the same set whatever jobs exist. The names are
    config.trainer_runtime_names(), in that order."""
    return [
        cluster_training_runtime(priority, grace, default_image)
        for priority in JOB_PRIORITIES
        for grace in POD_GRACE_SECONDS
    ]


#: The pod-spec fields of a TrainJob's runtime patch: each is in Trainer v2.2.1's
#: `PodSpecPatch` (catalog.TRAINER_V221_POD_SPEC_PATCH_FIELDS), the type Kueue v0.19.2 writes
#: the TrainJob back with; the grace period is the runtime's (cluster_training_runtime).
PATCHED_POD_FIELDS: Final = ("serviceAccountName", "tolerations", "affinity", "volumes")


def runtime_pod_sets(runtimes: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """What Kueue compares of rendered ClusterTrainingRuntimes: per runtime and replicated job
    (`<runtime>/<job>`), the pod template's containers and initContainers
    (kubernetes-sigs/kueue@v0.19.2 pkg/util/equality/podset.go L41-76 compares those in full;
    counts and tolerations come from the TrainJob). A fleet worker exports them, and the
    manager checks its own and every worker's are equal (components/analysis/fleet_trainer.py)."""
    out: dict[str, dict[str, Any]] = {}
    for runtime in runtimes:
        for job in runtime["spec"]["template"]["spec"]["replicatedJobs"]:
            pod = job["template"]["spec"]["template"]["spec"]
            out[f"{runtime['metadata']['name']}/{job['name']}"] = {
                "containers": pod.get("containers", []),
                "initContainers": pod.get("initContainers", []),
            }
    return out


def train_job(plan: JobPlan) -> dict[str, Any]:
    """Kubeflow launcher: a TrainJob on the runtime of its priority and grace period
    (TrainingJobConfig.trainer_runtime); per-job pod settings go in a runtime patch, only fields
    that survive Kueue's copy of it (PATCHED_POD_FIELDS)."""
    pod = pod_spec(plan)
    container = trainer_container(plan)
    patched_pod = {key: pod[key] for key in PATCHED_POD_FIELDS}
    patched_pod["containers"] = [
        {"name": TRAINER_CONTAINER, "volumeMounts": container["volumeMounts"]}
    ]
    spec: dict[str, Any] = {
        "runtimeRef": {
            "apiGroup": "trainer.kubeflow.org",
            "kind": "ClusterTrainingRuntime",
            "name": plan.job.trainer_runtime,
        },
        "suspend": True,
        "trainer": {
            **({"image": plan.pod_image.reference} if plan.pod_image.reference is not None else {}),
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
    spec.update(_managed_by(plan))
    return {
        "apiVersion": TRAINER_API,
        "kind": "TrainJob",
        "metadata": _metadata(plan, plan.name, kueue=True),
        "spec": spec,
    }


def job_manifests(plan: JobPlan) -> list[dict[str, Any]]:
    """Every object of one job, in apply order (ConfigMap and Service before the job)."""
    out: list[dict[str, Any]] = job_secrets.external_secrets(plan)
    if plan.job.deepspeed is not None and not plan.fleet:
        out.append(deepspeed_config_map(plan))
    launcher = plan.job.launcher
    if launcher == "native":
        out += [headless_service(plan), indexed_job(plan)]
    elif launcher == "volcano":
        out.append(volcano_job(plan))
    else:
        out.append(train_job(plan))
    return out
