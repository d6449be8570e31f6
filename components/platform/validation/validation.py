"""Post-deploy validation: a GPU smoke Job per GPU pool and a multi-node NCCL all-reduce test.

Both run the same CUDA/PyTorch image, pinned by digest, on GPU nodes only (the pool's node
labels as nodeSelector plus the catalog's GPU toleration). The Jobs print one machine-readable
`RESULT {...}` line and exit non-zero on failure; docs/observability.md explains how to read
them. Pools are passed as `GpuPool` values so Karpenter NodePools can be added beside the
managed node groups without changing the builders.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import catalog
from components.analysis import placement, pod_security, topology, volcano
from components.analysis.facts import StackFacts
from components.analysis.nccl import NcclHost
from components.analysis.nodes import managed_gpu_taints
from components.config import GpuNodeGroup, KarpenterPool, ValidationConfig
from components.config.stack import nccl_instance_type
from components.platform.cluster.handles import ClusterHandles
from components.platform.scheduling.scheduling import QUEUE_OPEN_AWAIT
from components.platform.validation.validation_scripts import (
    METRICS_PORT,
    METRICS_PORT_NAME,
    NCCL_SCRIPT,
    SMOKE_SCRIPT,
)
from components.resource_options import child_options, owned_namespace

if TYPE_CHECKING:
    pass


NCCL_PORT: Final = 29400


@dataclass(frozen=True)
class GpuPool:
    """A set of identical GPU nodes a test can be pinned to (node group or Karpenter pool)."""

    name: str
    gpu_class: str
    #: Node labels that select exactly this pool's nodes.
    labels: dict[str, str]
    gpus_per_node: int
    #: The type the NCCL threshold, EFA count and NVLink check are read from (catalog).
    instance_type: str = ""
    #: The taints of the pool's nodes (components/analysis/nodes.py: the GPU taint, a spot
    #: group's spot taint, a group's own): validation pods tolerate exactly these.
    taints: tuple[dict[str, str], ...] = (catalog.gpu_taint(),)
    #: CPU and memory (GiB) of one NCCL test pod on `instance_type` (analysis/nccl.py sizes it
    #: from the type's allocatable: ValidationArgs.of).
    nccl_pod_cpu: float = catalog.NCCL_POD_CPU
    nccl_pod_memory_gib: int = catalog.NCCL_POD_MEMORY_GIB

    @property
    def efa_devices(self) -> int:
        row = catalog.INSTANCE_TYPES.get(self.instance_type)
        return row.efa_devices if row else 0

    @property
    def gpu_model(self) -> str:
        row = catalog.INSTANCE_TYPES.get(self.instance_type)
        return (row.gpu_model or "") if row else ""


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
            instance_type=nccl_instance_type(group),
            taints=managed_gpu_taints(group),
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
            instance_type=nccl_instance_type(pool),
        )
        for pool in pools
        if pool.is_gpu
    ]


def nccl_pool(pools: Sequence[GpuPool], host: NcclHost | None) -> GpuPool | None:
    """The NCCL test's pool, named and sized for the type its pods land on (`host`, from the
    facts: analysis/nccl.py) - not the pool's first type, which may be too small to hold them.
    None when no test runs (the config check refuses a pool no type of which holds a pod)."""
    pool = next((p for p in pools if host is not None and p.name == host.source), None)
    if pool is None or host is None:
        return None
    return replace(
        pool,
        instance_type=host.instance_type,
        nccl_pod_cpu=host.cpu,
        nccl_pod_memory_gib=host.memory_gib,
    )


def _pod_placement(pool: GpuPool) -> dict[str, Any]:
    return {
        "nodeSelector": dict(pool.labels),
        "tolerations": [catalog.toleration_of(taint) for taint in pool.taints],
    }


def _scratch_env() -> list[dict[str, str]]:
    """HOME and caches on the scratch volume: the root filesystem is read-only."""
    return [{"name": k, "value": v} for k, v in pod_security.SCRATCH_ENV.items()]


def _metrics_env(config: ValidationConfig) -> list[dict[str, str]]:
    return [
        {"name": "METRICS_PORT", "value": str(METRICS_PORT)},
        {"name": "METRICS_LINGER_SECONDS", "value": str(config.metrics_linger_seconds)},
    ]


def _metrics_port() -> dict[str, Any]:
    return {"containerPort": METRICS_PORT, "name": METRICS_PORT_NAME}


def nccl_threshold(pool: GpuPool, config: ValidationConfig) -> float:
    """Minimum bus bandwidth (GB/s): `validation.nccl.minBusBandwidthGbps`, else the catalog's
    figure for the pool's type (StackConfig refuses a pool with neither)."""
    threshold = catalog.nccl_min_bus_bandwidth(
        pool.instance_type, config.nccl.min_bus_bandwidth_gbps
    )
    if threshold is None:
        raise ValueError(f"no NCCL bus bandwidth threshold for {pool.instance_type}")
    return threshold


def nccl_env(pool: GpuPool, config: ValidationConfig) -> list[dict[str, str]]:
    """The NCCL test's environment. On EFA types: libfabric's EFA provider, and GPUDirect RDMA
    where the GPU supports it (catalog.EFA_RDMA_GPU_MODELS) — as the training pods get
    (components/training_jobs/manifests.py). No NCCL_SOCKET_IFNAME: NCCL picks the pod's interface
    for bootstrap itself, and a wrong name fails the run."""
    env = {
        "POOL": pool.name,
        "INSTANCE_TYPE": pool.instance_type,
        "MESSAGE_MIB": str(config.nccl.message_size_mib),
        "MIN_BUS_BANDWIDTH_GBPS": f"{nccl_threshold(pool, config):g}",
        "NCCL_DEBUG": "WARN",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }
    if pool.efa_devices:
        env["FI_PROVIDER"] = "efa"
        if pool.gpu_model in catalog.EFA_RDMA_GPU_MODELS:
            env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return [{"name": k, "value": v} for k, v in env.items()]


def nccl_affinity(pool: GpuPool, name: str) -> dict[str, Any]:
    """One rank per node (anti-affinity on the hostname) and, over EFA, every rank in one zone:
    EFA traffic does not cross availability zones — the same required podAffinity the training
    jobs carry (components/analysis/placement.py, which explains why this and not Kueue TAS)."""
    selector = {"matchLabels": {"job-name": name}}
    affinity: dict[str, Any] = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {"labelSelector": selector, "topologyKey": "kubernetes.io/hostname"}
            ]
        }
    }
    if pool.efa_devices:
        affinity["podAffinity"] = placement.single_zone_affinity(selector)
    return affinity


def nccl_resources(pool: GpuPool) -> dict[str, Any]:
    """Every GPU and, on EFA types, every EFA device of the node (catalog count), with the CPU
    and memory the pool's host type can give (analysis/nccl.py)."""
    devices = {catalog.GPU_RESOURCE: str(pool.gpus_per_node)}
    if pool.efa_devices:
        devices[catalog.EFA_RESOURCE] = str(pool.efa_devices)
    memory = f"{pool.nccl_pod_memory_gib}Gi"
    return {
        "requests": {"cpu": f"{pool.nccl_pod_cpu:g}", "memory": memory, **devices},
        "limits": {"memory": memory, **devices},
    }


def pod_monitor(config: ValidationConfig) -> dict[str, Any]:
    """Prometheus scrapes the finished test pods' metrics port while they linger
    (kube-prometheus-stack selects PodMonitors in every namespace: observability.chart_values)."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": {
            "name": "validation-results",
            "namespace": config.namespace,
            "labels": {"app.kubernetes.io/part-of": "gpu-platform"},
        },
        "spec": {
            "selector": {"matchExpressions": [{"key": "test", "operator": "Exists"}]},
            "namespaceSelector": {"matchNames": [config.namespace]},
            "podMetricsEndpoints": [
                {"port": METRICS_PORT_NAME, "path": "/metrics", "interval": "30s"}
            ],
        },
    }


def smoke_job(pool: GpuPool, config: ValidationConfig) -> dict[str, Any]:
    """A Job that runs nvidia-smi and a checked fp16 matmul on every GPU of one pool node."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": catalog.gpu_smoke_job_name(pool.name),
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
                    "containers": [_smoke_container(pool, config)],
                    "volumes": [pod_security.scratch_volume()],
                },
            },
        },
    }


def _smoke_container(pool: GpuPool, config: ValidationConfig) -> dict[str, Any]:
    """The smoke test's container: every GPU of the node, told what the pool should have."""
    gpus = str(pool.gpus_per_node)
    return {
        "name": "smoke",
        "image": config.image,
        "command": ["bash", "-c", SMOKE_SCRIPT],
        "env": [
            {"name": "POOL", "value": pool.name},
            {"name": "INSTANCE_TYPE", "value": pool.instance_type},
            {"name": "EXPECTED_GPUS", "value": gpus},
            {
                "name": "EXPECT_NVLINK",
                "value": "1" if pool.gpu_model in catalog.NVLINK_GPU_MODELS else "0",
            },
            *_metrics_env(config),
            *_scratch_env(),
        ],
        "ports": [_metrics_port()],
        "resources": {
            "requests": {"cpu": "1", "memory": "8Gi", catalog.GPU_RESOURCE: gpus},
            "limits": {"memory": "8Gi", catalog.GPU_RESOURCE: gpus},
        },
        **pod_security.restricted_container_fields(),
        "volumeMounts": [pod_security.scratch_mount()],
    }


#: Volcano gang scheduling for plain pods: the PodGroup a pod belongs to, by annotation.
VOLCANO_GROUP_ANNOTATION: Final = "scheduling.k8s.io/group-name"
#: The queue the Volcano chart creates: the NCCL test's when no queue has a guarantee.
VOLCANO_DEFAULT_QUEUE: Final = "default"


def validation_queue(guarantee: dict[str, float]) -> dict[str, Any]:
    """The NCCL test's own Volcano queue: guarantee = capability = what the test's pods
    request (components/analysis/volcano.py validation_guarantee)."""
    resources = volcano.quantities(guarantee)
    return {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {
            "name": volcano.VALIDATION_QUEUE,
            "labels": {"app.kubernetes.io/part-of": "gpu-platform"},
            "annotations": dict(QUEUE_OPEN_AWAIT),
        },
        "spec": {
            "weight": 1,
            "reclaimable": False,
            "capability": dict(resources),
            "guarantee": {"resource": dict(resources)},
            "deserved": dict(resources),
        },
    }


def nccl_objects(
    pool: GpuPool,
    config: ValidationConfig,
    queue_guarantee: dict[str, float] | None = None,
    network_topology: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """ConfigMap (script), headless Service, Volcano PodGroup and Indexed Job of the NCCL
    all-reduce test — after its own Volcano queue when the team queues have guarantees. The
    PodGroup gang-schedules the ranks: all nodes start together or none holds a GPU (a
    half-started all-reduce would block until its deadline). It has no minResources, so
    Volcano's enqueue lets it through before its nodes exist; its queue's guarantee makes
    allocate place it (components/analysis/volcano.py). On a class placed by the network its
    `networkTopology` keeps the ranks in one block (hard) or as close as they get (soft:
    volcano-sh/volcano@v1.15.1 installer/helm/chart/volcano/crd/bases/
    scheduling.volcano.sh_podgroups.yaml L94-110, read
    by the scheduler from `pg.Spec.NetworkTopology`, pkg/scheduler/api/job_info.go L485)."""
    nodes = config.nccl.nodes
    name = catalog.nccl_job_name(pool.name)
    labels = {"app.kubernetes.io/part-of": "gpu-platform", "test": "nccl-all-reduce"}
    gpus = str(pool.gpus_per_node)
    torchrun = (
        f"torchrun --nnodes={nodes} --nproc-per-node={gpus} "
        "--node-rank=$JOB_COMPLETION_INDEX --rdzv-backend=c10d "
        f"--rdzv-endpoint={name}-0.{name}:{NCCL_PORT} --rdzv-id={name} "
        "/scripts/allreduce.py"
    )
    queue = [validation_queue(queue_guarantee)] if queue_guarantee else []
    return [
        *queue,
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
            "spec": {
                "minMember": nodes,
                "queue": volcano.VALIDATION_QUEUE if queue else VOLCANO_DEFAULT_QUEUE,
                **({"networkTopology": network_topology} if network_topology else {}),
            },
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
                        "affinity": nccl_affinity(pool, name),
                        "containers": [
                            {
                                "name": "allreduce",
                                "image": config.image,
                                "command": ["bash", "-c", torchrun],
                                "env": [
                                    *nccl_env(pool, config),
                                    *_metrics_env(config),
                                    *_scratch_env(),
                                ],
                                "ports": [
                                    {"containerPort": NCCL_PORT, "name": "rendezvous"},
                                    _metrics_port(),
                                ],
                                "resources": nccl_resources(pool),
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
    pools: Sequence[GpuPool],
    nccl_pool: GpuPool | None,
    config: ValidationConfig,
    queue_guarantee: dict[str, float] | None = None,
    network_topology: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """Every object of the validation tests (empty when validation is off)."""
    if not config.enabled:
        return []
    objects: list[dict[str, Any]] = []
    if config.smoke_test:
        objects += [smoke_job(pool, config) for pool in pools]
    if config.nccl_test and nccl_pool is not None:
        objects += nccl_objects(nccl_pool, config, queue_guarantee, network_topology)
    if objects:
        objects.append(pod_monitor(config))
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
    #: kube-prometheus-stack: the PodMonitor kind exists once its CRDs are installed.
    monitoring_release: pulumi.Resource | None = None
    #: Kueue and Volcano: Kueue's Job webhook (failurePolicy Fail) intercepts every Job outside
    #: kube-system/kueue-system, and the PodGroup kind exists once Volcano's CRDs are in.
    schedulers: tuple[pulumi.Resource, ...] = ()
    #: The NCCL test queue's guarantee (empty: the test joins Volcano's default queue).
    queue_guarantee: dict[str, float] = field(default_factory=dict)
    #: The NCCL test PodGroup's `networkTopology` on a class placed by the network (the facts'
    #: request, components/analysis/topology.py nccl_topology); None: none.
    network_topology: dict[str, Any] | None = None

    @classmethod
    def of(
        cls,
        facts: StackFacts,
        cluster: ClusterHandles,
        gpu_operator: pulumi.Resource,
        monitoring_release: pulumi.Resource | None = None,
        schedulers: tuple[pulumi.Resource, ...] = (),
    ) -> ValidationArgs:
        """The validation config and every GPU pool: managed groups and Karpenter pools; the
        NCCL test's host from the facts."""
        cfg = facts.cfg
        pools = pools_from_node_groups(cfg.node_groups.gpu) + pools_from_karpenter(
            cfg.karpenter.pools
        )
        host = nccl_pool(pools, facts.nccl_host)
        request = (
            topology.nccl_topology(cfg.validation.nccl.topology, host.gpu_class, facts.topologies)
            if host is not None
            else None
        )
        return cls(
            config=cfg.validation,
            pools=pools,
            nccl_pool=host,
            k8s_provider=cluster.k8s_provider,
            gpu_operator=gpu_operator,
            monitoring_release=monitoring_release,
            schedulers=schedulers,
            queue_guarantee=volcano.validation_guarantee(cfg, facts.nccl_host),
            network_topology=request.volcano_network_topology() if request else None,
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
        k8s_opts = child_options(self, provider=args.k8s_provider)
        objects = validation_objects(
            args.pools, args.nccl_pool, config, args.queue_guarantee, args.network_topology
        )
        if objects:
            # Restricted like team namespaces: the tests prove GPUs and NCCL work from a
            # restricted pod, which is what every training pod is.
            namespace, _ = owned_namespace(
                f"{name}-namespace",
                config.namespace,
                dict(pod_security.RESTRICTED_NAMESPACE_LABELS),
                k8s_opts,
            )
            self._objects(name, args, objects, k8s_opts, namespace)
        self.register_outputs({"objects": len(objects)})

    def _objects(
        self,
        name: str,
        args: ValidationArgs,
        objects: list[dict[str, Any]],
        k8s_opts: pulumi.ResourceOptions,
        namespace: pulumi.Resource,
    ) -> None:
        """The test objects, after the namespace, the GPU Operator and the schedulers (a
        PodMonitor after the monitoring CRDs too), each after the ones it needs."""
        after = pulumi.ResourceOptions.merge(
            k8s_opts,
            pulumi.ResourceOptions(depends_on=[namespace, args.gpu_operator, *args.schedulers]),
        )
        monitored = pulumi.ResourceOptions.merge(
            after,
            pulumi.ResourceOptions(
                depends_on=[namespace, args.gpu_operator, *args.schedulers]
                + ([args.monitoring_release] if args.monitoring_release else [])
            ),
        )
        made: dict[str, pulumi.Resource] = {}
        for obj in objects:
            kind = obj["kind"]
            # Queue -> PodGroup -> Job: Volcano's webhook refuses a PodGroup for a queue
            # that is not Open yet (the Queue is awaited until it is), and the Job's pods
            # are scheduled as their PodGroup's gang from the first one.
            before = {"PodGroup": made.get("Queue"), "Job": made.get("PodGroup")}.get(kind)
            child = monitored if kind == "PodMonitor" else after
            if before is not None:
                child = pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=[before])
                )
            made[kind] = self._object(
                f"{name}-{kind.lower()}-{obj['metadata']['name']}", obj, child
            )

    def _object(
        self, resource_name: str, obj: dict[str, Any], child: pulumi.ResourceOptions
    ) -> pulumi.Resource:
        """One object as the SDK's typed resource where there is one, else a CustomResource."""
        cls: Any = _KINDS.get((obj["apiVersion"], obj["kind"]))
        if cls is None:
            return k8s.apiextensions.CustomResource(
                resource_name,
                api_version=obj["apiVersion"],
                kind=obj["kind"],
                metadata=obj["metadata"],
                spec=obj["spec"],
                opts=child,
            )
        body = {k: v for k, v in obj.items() if k not in ("apiVersion", "kind")}
        resource: pulumi.Resource = cls(resource_name, **body, opts=child)
        return resource
