"""Post-deploy validation: a GPU smoke Job per GPU pool and a multi-node NCCL all-reduce test.

Both run the same CUDA/PyTorch image, pinned by digest, on GPU nodes only (the pool's node
labels as nodeSelector plus the catalog's GPU toleration). The Jobs print one machine-readable
`RESULT {...}` line and exit non-zero on failure; docs/observability.md explains how to read
them. Pools are passed as `GpuPool` values so Karpenter NodePools can be added beside the
managed node groups without changing the builders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import catalog
from components.analysis import pod_security
from components.config import GpuNodeGroup, KarpenterPool, ValidationConfig

if TYPE_CHECKING:
    from components.config import StackConfig
    from components.platform.cluster import Cluster
    from components.platform.gpu import GpuStack


NCCL_PORT: Final = 29400

SMOKE_SCRIPT: Final = """\
set -eu
nvidia-smi
python - <<'PY'
import json, time, torch
assert torch.cuda.is_available(), "CUDA not available"
n = torch.cuda.device_count()
expected = int("${EXPECTED_GPUS}")
report = {"test": "gpu-smoke", "pool": "${POOL}", "gpus": n, "expected_gpus": expected}
ok = n == expected
for i in range(n):
    a = torch.randn(8192, 8192, device=f"cuda:{i}", dtype=torch.float16)
    b = torch.randn(8192, 8192, device=f"cuda:{i}", dtype=torch.float16)
    torch.cuda.synchronize(i)
    start = time.perf_counter()
    for _ in range(20):
        c = a @ b
    torch.cuda.synchronize(i)
    seconds = time.perf_counter() - start
    ref = (a[:64].float() @ b[:, :64].float())
    close = torch.allclose(c[:64, :64].float(), ref, rtol=5e-2, atol=5e-1)
    ok = ok and bool(close)
    report[f"gpu{i}_tflops"] = round(20 * 2 * 8192**3 / seconds / 1e12, 1)
    report[f"gpu{i}_matmul_ok"] = bool(close)
report["passed"] = ok
print("RESULT " + json.dumps(report, sort_keys=True), flush=True)
raise SystemExit(0 if ok else 1)
PY
"""

NCCL_SCRIPT: Final = """\
import json, os, time
import torch
import torch.distributed as dist

dist.init_process_group("nccl")
rank, world = dist.get_rank(), dist.get_world_size()
torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
numel = int(os.environ["MESSAGE_MIB"]) * 1024 * 1024 // 4
buf = torch.ones(numel, dtype=torch.float32, device="cuda")
for _ in range(5):
    dist.all_reduce(buf)
torch.cuda.synchronize()
iters = 20
start = time.perf_counter()
for _ in range(iters):
    dist.all_reduce(buf)
torch.cuda.synchronize()
seconds = (time.perf_counter() - start) / iters
size = numel * 4
algbw = size / seconds / 1e9
busbw = algbw * 2 * (world - 1) / world
threshold = float(os.environ["MIN_BUS_BANDWIDTH_GBPS"])
if rank == 0:
    report = {"test": "nccl-all-reduce", "world_size": world, "bytes": size,
              "algbw_gbps": round(algbw, 2), "busbw_gbps": round(busbw, 2),
              "threshold_gbps": threshold, "passed": busbw >= threshold}
    print("RESULT " + json.dumps(report, sort_keys=True), flush=True)
dist.destroy_process_group()
raise SystemExit(0 if busbw >= threshold else 1)
"""


@dataclass(frozen=True)
class GpuPool:
    """A set of identical GPU nodes a test can be pinned to (node group or Karpenter pool)."""

    name: str
    gpu_class: str
    #: Node labels that select exactly this pool's nodes.
    labels: dict[str, str]
    gpus_per_node: int


def pools_from_node_groups(groups: Sequence[GpuNodeGroup]) -> list[GpuPool]:
    """The managed GPU node groups as pools (labels as Cluster puts them on the nodes)."""
    return [
        GpuPool(
            name=group.name,
            gpu_class=group.gpu_class,
            labels={
                catalog.LABEL_GPU_VENDOR: "nvidia",
                catalog.LABEL_GPU_CLASS: group.gpu_class,
                catalog.LABEL_NODE_POOL: group.name,
            },
            gpus_per_node=group.gpus_per_node,
        )
        for group in groups
    ]


def pools_from_karpenter(pools: Sequence[KarpenterPool]) -> list[GpuPool]:
    """The Karpenter GPU NodePools as pools: a smoke Job there makes Karpenter launch a node,
    which is exactly what the test must prove (AMI, driver, device plugin on that pool)."""
    return [
        GpuPool(
            name=pool.name,
            gpu_class=pool.resolved_gpu_class,
            labels={
                catalog.LABEL_GPU_VENDOR: "nvidia",
                catalog.LABEL_GPU_CLASS: pool.resolved_gpu_class,
                catalog.LABEL_NODE_POOL: pool.name,
            },
            gpus_per_node=pool.gpus_per_node,
        )
        for pool in pools
        if pool.is_gpu
    ]


def _pod_placement(pool: GpuPool) -> dict[str, Any]:
    return {
        "nodeSelector": dict(pool.labels),
        "tolerations": [catalog.gpu_toleration()],
    }


def _scratch_env() -> list[dict[str, str]]:
    """HOME and caches on the scratch volume: the root filesystem is read-only."""
    return [{"name": k, "value": v} for k, v in pod_security.SCRATCH_ENV.items()]


def smoke_job(pool: GpuPool, config: ValidationConfig) -> dict[str, Any]:
    """A Job that runs nvidia-smi and a checked fp16 matmul on every GPU of one pool node."""
    gpus = str(pool.gpus_per_node)
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"gpu-smoke-{pool.name}",
            "namespace": config.namespace,
            "labels": {"app.kubernetes.io/part-of": "gpu-platform", "test": "gpu-smoke"},
            # The Job needs a GPU node to scale up; `pulumi up` must not wait for it.
            "annotations": {"pulumi.com/skipAwait": "true", **pod_security.gpu_pod_skips()},
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": config.deadline_seconds,
            "template": {
                "metadata": {
                    "labels": {"test": "gpu-smoke", "pool": pool.name},
                    "annotations": pod_security.gpu_pod_skips(),
                },
                "spec": {
                    "restartPolicy": "Never",
                    **_pod_placement(pool),
                    **pod_security.restricted_pod_fields(),
                    "containers": [
                        {
                            "name": "smoke",
                            "image": config.image,
                            "command": ["bash", "-c", SMOKE_SCRIPT],
                            "env": [
                                {"name": "POOL", "value": pool.name},
                                {"name": "EXPECTED_GPUS", "value": gpus},
                                *_scratch_env(),
                            ],
                            "resources": {
                                "requests": {
                                    "cpu": "1",
                                    "memory": "8Gi",
                                    catalog.GPU_RESOURCE: gpus,
                                },
                                "limits": {"memory": "8Gi", catalog.GPU_RESOURCE: gpus},
                            },
                            **pod_security.restricted_container_fields(),
                            "volumeMounts": [pod_security.scratch_mount()],
                        }
                    ],
                    "volumes": [pod_security.scratch_volume()],
                },
            },
        },
    }


#: Volcano gang scheduling for plain pods: the PodGroup a pod belongs to, by annotation.
VOLCANO_GROUP_ANNOTATION: Final = "scheduling.k8s.io/group-name"
#: The queue the Volcano chart creates; platform tests don't count against a team's queue.
VOLCANO_DEFAULT_QUEUE: Final = "default"


def nccl_objects(pool: GpuPool, config: ValidationConfig) -> list[dict[str, Any]]:
    """ConfigMap (script), headless Service, Volcano PodGroup and Indexed Job of the NCCL
    all-reduce test. The PodGroup gang-schedules the ranks: all nodes start together or none
    holds a GPU (a half-started all-reduce would block until its deadline)."""
    nodes = config.nccl.nodes
    name = f"nccl-allreduce-{pool.name}"
    labels = {"app.kubernetes.io/part-of": "gpu-platform", "test": "nccl-all-reduce"}
    gpus = str(pool.gpus_per_node)
    torchrun = (
        f"torchrun --nnodes={nodes} --nproc-per-node={gpus} "
        "--node-rank=$JOB_COMPLETION_INDEX --rdzv-backend=c10d "
        f"--rdzv-endpoint={name}-0.{name}:{NCCL_PORT} --rdzv-id={name} "
        "/scripts/allreduce.py"
    )
    return [
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": config.namespace, "labels": labels},
            "data": {"allreduce.py": NCCL_SCRIPT},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": config.namespace, "labels": labels},
            "spec": {
                "clusterIP": "None",
                "selector": {"job-name": name},
                "ports": [{"name": "rendezvous", "port": NCCL_PORT}],
                # Ranks resolve each other before they report ready.
                "publishNotReadyAddresses": True,
            },
        },
        {
            "apiVersion": "scheduling.volcano.sh/v1beta1",
            "kind": "PodGroup",
            "metadata": {"name": name, "namespace": config.namespace, "labels": labels},
            "spec": {"minMember": nodes, "queue": VOLCANO_DEFAULT_QUEUE},
        },
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": name,
                "namespace": config.namespace,
                "labels": labels,
                "annotations": {"pulumi.com/skipAwait": "true", **pod_security.gpu_pod_skips()},
            },
            "spec": {
                "completionMode": "Indexed",
                "completions": nodes,
                "parallelism": nodes,
                "backoffLimit": 0,
                "activeDeadlineSeconds": config.deadline_seconds,
                "template": {
                    "metadata": {
                        "labels": {**labels, "pool": pool.name},
                        "annotations": {
                            VOLCANO_GROUP_ANNOTATION: name,
                            **pod_security.gpu_pod_skips(),
                        },
                    },
                    "spec": {
                        "restartPolicy": "Never",
                        **pod_security.restricted_pod_fields(),
                        "schedulerName": "volcano",
                        "subdomain": name,
                        **_pod_placement(pool),
                        # One rank per node: spread the pods over distinct nodes.
                        "affinity": {
                            "podAntiAffinity": {
                                "requiredDuringSchedulingIgnoredDuringExecution": [
                                    {
                                        "labelSelector": {"matchLabels": {"job-name": name}},
                                        "topologyKey": "kubernetes.io/hostname",
                                    }
                                ]
                            }
                        },
                        "containers": [
                            {
                                "name": "allreduce",
                                "image": config.image,
                                "command": ["bash", "-c", torchrun],
                                "env": [
                                    {
                                        "name": "MESSAGE_MIB",
                                        "value": str(config.nccl.message_size_mib),
                                    },
                                    {
                                        "name": "MIN_BUS_BANDWIDTH_GBPS",
                                        "value": f"{config.nccl.min_bus_bandwidth_gbps:g}",
                                    },
                                    {"name": "NCCL_DEBUG", "value": "WARN"},
                                    {"name": "TORCH_NCCL_ASYNC_ERROR_HANDLING", "value": "1"},
                                    *_scratch_env(),
                                ],
                                "ports": [{"containerPort": NCCL_PORT, "name": "rendezvous"}],
                                "resources": {
                                    "requests": {
                                        "cpu": "2",
                                        "memory": "16Gi",
                                        catalog.GPU_RESOURCE: gpus,
                                    },
                                    "limits": {"memory": "16Gi", catalog.GPU_RESOURCE: gpus},
                                },
                                **pod_security.restricted_container_fields(),
                                "volumeMounts": [
                                    {"name": "scripts", "mountPath": "/scripts"},
                                    {"name": "shm", "mountPath": "/dev/shm"},
                                    pod_security.scratch_mount(),
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "scripts", "configMap": {"name": name}},
                            {"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "8Gi"}},
                            pod_security.scratch_volume(),
                        ],
                    },
                },
            },
        },
    ]


def validation_objects(
    pools: Sequence[GpuPool], nccl_pool: GpuPool | None, config: ValidationConfig
) -> list[dict[str, Any]]:
    """Every object of the validation tests (empty when validation is off)."""
    if not config.enabled:
        return []
    objects: list[dict[str, Any]] = []
    if config.smoke_test:
        objects += [smoke_job(pool, config) for pool in pools]
    if config.nccl_test and nccl_pool is not None:
        objects += nccl_objects(nccl_pool, config)
    return objects


@dataclass(frozen=True)
class ValidationArgs:
    """Inputs of the Validation component."""

    #: The `validation` config section.
    config: ValidationConfig
    #: The GPU pools the smoke test runs on (one Job each).
    pools: list[GpuPool]
    #: The pool the multi-node NCCL test runs on.
    nccl_pool: GpuPool | None
    k8s_provider: k8s.Provider
    #: The GPU Operator release: GPUs are only schedulable once its device plugin runs.
    gpu_operator: pulumi.Resource

    @classmethod
    def of(cls, cfg: StackConfig, cluster: Cluster, gpu: GpuStack) -> ValidationArgs:
        """The validation config and every GPU pool: managed groups and Karpenter pools."""
        pools = pools_from_node_groups(cfg.node_groups.gpu) + pools_from_karpenter(
            cfg.karpenter.pools
        )
        target = cfg.nccl_pool()
        return cls(
            config=cfg.validation,
            pools=pools,
            nccl_pool=next((pool for pool in pools if target and pool.name == target.name), None),
            k8s_provider=cluster.k8s_provider,
            gpu_operator=gpu.release,
        )


_KINDS: Final = {
    ("batch/v1", "Job"): k8s.batch.v1.Job,
    ("v1", "ConfigMap"): k8s.core.v1.ConfigMap,
    ("v1", "Service"): k8s.core.v1.Service,
}


class Validation(pulumi.ComponentResource):
    """GPU smoke Jobs and the NCCL all-reduce test, when enabled."""

    def __init__(
        self, name: str, args: ValidationArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:validation:Validation", name, None, opts)
        config = args.config
        k8s_opts = pulumi.ResourceOptions(parent=self, provider=args.k8s_provider)
        objects = validation_objects(args.pools, args.nccl_pool, config)
        if objects:
            namespace = k8s.core.v1.Namespace(
                f"{name}-namespace",
                metadata={
                    "name": config.namespace,
                    # Restricted like team namespaces: the tests prove GPUs and NCCL work
                    # from a restricted pod, which is what every training pod is.
                    "labels": dict(pod_security.RESTRICTED_NAMESPACE_LABELS),
                },
                opts=k8s_opts,
            )
            after = pulumi.ResourceOptions.merge(
                k8s_opts, pulumi.ResourceOptions(depends_on=[namespace, args.gpu_operator])
            )
            for obj in objects:
                resource_name = f"{name}-{obj['kind'].lower()}-{obj['metadata']['name']}"
                cls: Any = _KINDS.get((obj["apiVersion"], obj["kind"]))
                if cls is None:
                    k8s.apiextensions.CustomResource(
                        resource_name,
                        api_version=obj["apiVersion"],
                        kind=obj["kind"],
                        metadata=obj["metadata"],
                        spec=obj["spec"],
                        opts=after,
                    )
                    continue
                body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
                cls(resource_name, **body, opts=after)
        self.register_outputs({"objects": len(objects)})
