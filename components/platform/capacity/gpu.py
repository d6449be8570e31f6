"""GPU enablement: the NVIDIA GPU Operator and DCGM exporter scraping.

The operator (a `helm.v3.Release`: the chart relies on hooks) runs its controller and the NFD
master on the system nodes; its operands (device plugin, GPU feature discovery, DCGM exporter,
MIG manager, validator) are DaemonSets the operator places only on nodes labelled
`nvidia.com/gpu.present=true` and tolerate the platform's GPU taint. The NFD worker is pinned
to GPU nodes by the platform's vendor label. Driver and container toolkit come with the EKS
AL2023 NVIDIA AMI and stay off unless config turns them on (custom AMIs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components import addons, catalog
from components.config import GpuOperatorConfig
from components.platform.addons import helm_release
from components.platform.cluster.handles import ClusterHandles
from components.resource_options import child_options, owned_namespace

if TYPE_CHECKING:
    from components.config import StackConfig


DCGM_METRICS_CONFIGMAP: Final = "gpu-platform-dcgm-metrics"
DEVICE_PLUGIN_CONFIGMAP: Final = "gpu-platform-device-plugin"
#: Named device-plugin configs; nodes pick one through `nvidia.com/device-plugin.config`.
DEFAULT_PLUGIN_CONFIG: Final = "default"
TIME_SLICED_PLUGIN_CONFIG: Final = "time-sliced"
#: Service the operator creates for DCGM exporter (label and port name from the operator).
DCGM_SERVICE_LABELS: Final = {"app": "nvidia-dcgm-exporter"}
DCGM_PORT: Final = "gpu-metrics"

#: The curated DCGM field set: (field, Prometheus type, help). Names must stay in step with
#: `alerts.EXPORTER_METRICS["dcgm-exporter"]` (tested). DCGM 4 renamed the throttle bitmask
#: DCGM_FI_DEV_CLOCK_THROTTLE_REASONS to DCGM_FI_DEV_CLOCKS_EVENT_REASONS.
DCGM_FIELDS: Final[tuple[tuple[str, str, str], ...]] = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %)."),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %)."),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB)."),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB)."),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W)."),
    ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Energy since boot (in mJ)."),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C)."),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C)."),
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz)."),
    ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered."),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Single-bit volatile ECC errors."),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Double-bit volatile ECC errors."),
    (
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "counter",
        "Rows remapped for uncorrectable errors.",
    ),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed."),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Clock event (throttle) reasons bitmask."),
    ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling due to power constraints (in ns)."),
    ("DCGM_FI_DEV_THERMAL_VIOLATION", "counter", "Throttling due to thermal constraints (in ns)."),
    ("DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", "counter", "NVLink bandwidth counters, all lanes."),
    ("DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", "counter", "NVLink flow-control CRC errors."),
    ("DCGM_FI_PROF_NVLINK_TX_BYTES", "gauge", "NVLink transmitted bytes per second."),
    ("DCGM_FI_PROF_NVLINK_RX_BYTES", "gauge", "NVLink received bytes per second."),
    ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor pipe is active."),
    ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "Ratio of cycles an SM has at least one warp."),
    ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge", "Ratio of cycles device memory is active."),
)


def dcgm_metrics_csv() -> str:
    """The exporter's metrics file (`dcgm-metrics.csv`): field, type, help per line."""
    lines = ["# DCGM field, Prometheus metric type, help message (gpu-platform curated set)"]
    lines += [f"{field}, {kind}, {help_text}" for field, kind, help_text in DCGM_FIELDS]
    return "\n".join(lines) + "\n"


def device_plugin_configs(config: GpuOperatorConfig) -> dict[str, str]:
    """Named device-plugin configs: the default, plus time-slicing when a pool asks for it."""
    strategy = config.mig_strategy
    configs = {
        DEFAULT_PLUGIN_CONFIG: {"version": "v1", "flags": {"migStrategy": strategy}},
    }
    if config.time_slicing.pools:
        configs[TIME_SLICED_PLUGIN_CONFIG] = {
            "version": "v1",
            "flags": {"migStrategy": strategy},
            "sharing": {
                "timeSlicing": {
                    "resources": [
                        {"name": catalog.GPU_RESOURCE, "replicas": config.time_slicing.replicas}
                    ]
                }
            },
        }
    return {key: yaml.safe_dump(value, sort_keys=True) for key, value in configs.items()}


def time_slicing_node_labels(config: GpuOperatorConfig) -> dict[str, dict[str, str]]:
    """Extra node labels per GPU node group: time-sliced pools select the time-sliced config."""
    return {
        pool: {catalog.DEVICE_PLUGIN_CONFIG_LABEL: TIME_SLICED_PLUGIN_CONFIG}
        for pool in config.time_slicing.pools
    }


def chart_values(config: GpuOperatorConfig) -> dict[str, Any]:
    """GPU Operator values (every key exists in the chart's values.yaml; tested)."""
    system = catalog.system_node_labels()
    return {
        "operator": {"nodeSelector": system},
        # Operands carry every GPU taint the platform defines.
        "daemonsets": {"tolerations": catalog.gpu_daemon_tolerations()},
        "driver": {"enabled": config.driver_enabled},
        "toolkit": {"enabled": config.toolkit_enabled},
        "devicePlugin": {
            "enabled": True,
            "config": {
                "create": False,
                "name": DEVICE_PLUGIN_CONFIGMAP,
                "default": DEFAULT_PLUGIN_CONFIG,
            },
        },
        "gfd": {"enabled": True},
        "mig": {"strategy": "single" if config.mig_strategy == "none" else config.mig_strategy},
        "migManager": {"enabled": config.mig_strategy != "none"},
        "dcgmExporter": {
            "enabled": True,
            # Our own ServiceMonitor (GpuStack) instead of the operator's: it is ordered after
            # the prometheus-operator CRDs and keeps the exporter's pod labels.
            "serviceMonitor": {"enabled": False},
            "config": {"name": DCGM_METRICS_CONFIGMAP},
            "enablePodLabels": True,
        },
        "node-feature-discovery": {
            "worker": {
                "nodeSelector": catalog.gpu_node_selector(),
                "tolerations": catalog.gpu_daemon_tolerations(),
            },
            "master": {"nodeSelector": system},
            "gc": {"nodeSelector": system},
        },
    }


def dcgm_service_monitor_spec(config: GpuOperatorConfig, namespace: str) -> dict[str, Any]:
    """Scrape DCGM exporter; `honorLabels` keeps the exporter's pod/namespace attribution."""
    return {
        "selector": {"matchLabels": dict(DCGM_SERVICE_LABELS)},
        "namespaceSelector": {"matchNames": [namespace]},
        "endpoints": [
            {
                "port": DCGM_PORT,
                "path": "/metrics",
                "interval": config.dcgm_scrape_interval,
                "scrapeTimeout": "10s",
                "honorLabels": True,
                "relabelings": [
                    {
                        "sourceLabels": ["__meta_kubernetes_pod_node_name"],
                        "targetLabel": "node",
                        "action": "replace",
                    }
                ],
            }
        ],
    }


def stack_efa_instance_types(cfg: StackConfig) -> list[str]:
    """The stack's GPU instance types with EFA devices: the nodes the EFA device plugin must run
    on (`StackConfig.efa_instance_types`, which the add-on registry's predicate reads too)."""
    return cfg.efa_instance_types


def efa_device_plugin_values(instance_types: list[str]) -> dict[str, Any]:
    """Values of the EFA device plugin chart. The chart hard-codes a required node affinity on
    `supportedInstanceLabels` (templates/daemonset.yaml#L49-63, no `affinity` value), so the
    list of this stack's EFA types is what pins it to EFA nodes; its only built-in toleration
    is CriticalAddonsOnly, so without the GPU taint's toleration it never lands on a GPU node
    (runs.md Q6). The image stays the chart's (602401143452.dkr.ecr.us-west-2.amazonaws.com,
    tag v0.5.20, pinned by the chart version; pulled through NAT from other regions): whether
    EKS replicates it to every regional registry is UNVERIFIED, so it is not rewritten."""
    return {
        "supportedInstanceLabels": {
            "keys": ["node.kubernetes.io/instance-type"],
            "values": list(instance_types),
        },
        "tolerations": catalog.gpu_daemon_tolerations(),
    }


@dataclass(frozen=True)
class GpuStackArgs:
    """Inputs of the GpuStack component."""

    #: The `gpuOperator` config section.
    config: GpuOperatorConfig
    #: The explicit Kubernetes provider of the cluster.
    k8s_provider: k8s.Provider
    #: The system node group: the operator controller needs a node to start on.
    system_node_group: pulumi.Resource
    #: The release that installs the prometheus-operator CRDs (ServiceMonitor waits for it).
    monitoring_release: pulumi.Resource
    #: The stack's EFA-capable GPU instance types (empty: no EFA device plugin).
    efa_instance_types: list[str]

    @classmethod
    def of(
        cls, cfg: StackConfig, cluster: ClusterHandles, monitoring: pulumi.Resource
    ) -> GpuStackArgs:
        """This component's slice of the stack config, the cluster and the monitoring release
        (its CRDs come before the DCGM ServiceMonitor)."""
        return cls(
            config=cfg.gpu_operator,
            k8s_provider=cluster.k8s_provider,
            system_node_group=cluster.system_node_group,
            monitoring_release=monitoring,
            efa_instance_types=stack_efa_instance_types(cfg),
        )


class GpuStack(pulumi.ComponentResource):
    """NVIDIA GPU Operator with DCGM exporter, its metrics set and its ServiceMonitor."""

    namespace: str
    release: k8s.helm.v3.Release
    efa_release: k8s.helm.v3.Release | None

    def __init__(
        self, name: str, args: GpuStackArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:gpu:GpuStack", name, None, opts)
        config = args.config
        k8s_opts = child_options(self, provider=args.k8s_provider)
        self.namespace = config.namespace

        # Operands mount host paths and run privileged (device plugin, DCGM, validator).
        namespace, in_namespace = owned_namespace(
            f"{name}-namespace",
            config.namespace,
            {"pod-security.kubernetes.io/enforce": addons.GPU_OPERATOR.pod_security},
            k8s_opts,
        )
        config_maps = self._operator_config_maps(name, config, in_namespace)
        self.release = self._operator_release(
            name, config, k8s_opts, [namespace, *config_maps, args.system_node_group]
        )
        self._dcgm_service_monitor(name, config, k8s_opts, [args.monitoring_release, self.release])
        self.efa_release = self._efa_device_plugin(name, args, k8s_opts)
        self.register_outputs({"namespace": self.namespace})

    def _operator_config_maps(
        self, name: str, config: GpuOperatorConfig, in_namespace: pulumi.ResourceOptions
    ) -> list[pulumi.Resource]:
        """The DCGM metrics set and the device-plugin configs the chart's values name: they
        exist before the operator starts, which mounts them."""
        metrics = k8s.core.v1.ConfigMap(
            f"{name}-dcgm-metrics",
            metadata={"name": DCGM_METRICS_CONFIGMAP, "namespace": config.namespace},
            data={"dcgm-metrics.csv": dcgm_metrics_csv()},
            opts=in_namespace,
        )
        plugin = k8s.core.v1.ConfigMap(
            f"{name}-device-plugin",
            metadata={"name": DEVICE_PLUGIN_CONFIGMAP, "namespace": config.namespace},
            data=device_plugin_configs(config),
            opts=in_namespace,
        )
        return [metrics, plugin]

    def _operator_release(
        self,
        name: str,
        config: GpuOperatorConfig,
        k8s_opts: pulumi.ResourceOptions,
        after: list[pulumi.Resource],
    ) -> k8s.helm.v3.Release:
        """The GPU Operator chart, installed after what it needs (`after`)."""
        return helm_release(
            f"{name}-gpu-operator",
            addons.GPU_OPERATOR,
            version=config.chart_version,
            namespace=config.namespace,
            values=chart_values(config),
            opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=after)),
        )

    def _dcgm_service_monitor(
        self,
        name: str,
        config: GpuOperatorConfig,
        k8s_opts: pulumi.ResourceOptions,
        after: list[pulumi.Resource],
    ) -> None:
        """The ServiceMonitor that has Prometheus scrape DCGM, after its CRD and the exporter."""
        k8s.apiextensions.CustomResource(
            f"{name}-dcgm-exporter",
            api_version="monitoring.coreos.com/v1",
            kind="ServiceMonitor",
            metadata={
                "name": "nvidia-dcgm-exporter",
                "namespace": config.namespace,
                "labels": {"app.kubernetes.io/part-of": "gpu-platform"},
            },
            spec=dcgm_service_monitor_spec(config, config.namespace),
            opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=after)),
        )

    def _efa_device_plugin(
        self, name: str, args: GpuStackArgs, k8s_opts: pulumi.ResourceOptions
    ) -> k8s.helm.v3.Release | None:
        """The EFA device plugin, on the EFA instance types the pools launch (none without)."""
        if not args.efa_instance_types:
            return None
        # A DaemonSet with no matching node is ready at once: Helm's --wait does not block
        # on GPU nodes that Karpenter has not launched yet (the row's version is pinned).
        return helm_release(
            f"{name}-efa-device-plugin",
            addons.EFA_DEVICE_PLUGIN,
            values=efa_device_plugin_values(args.efa_instance_types),
            opts=pulumi.ResourceOptions.merge(
                k8s_opts, pulumi.ResourceOptions(depends_on=[args.system_node_group])
            ),
        )
