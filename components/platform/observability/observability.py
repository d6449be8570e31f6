"""Monitoring: kube-prometheus-stack (Prometheus, Alertmanager, Grafana), rules and dashboards.

The release installs the prometheus-operator CRDs; every ServiceMonitor and PrometheusRule of
the platform `depends_on` `Observability.release` so the CRDs exist before the objects. The
controllers run on the system nodes; node-exporter also tolerates the GPU taint so GPU nodes
report. Dashboards are authored here as JSON and loaded by Grafana's sidecar.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pulumi
import pulumi_kubernetes as k8s

from components import addons, catalog
from components.config import ObservabilityConfig
from components.platform.addons import helm_release
from components.platform.cluster.handles import ClusterHandles
from components.platform.observability import alerts
from components.resource_options import child_options, owned_namespace

if TYPE_CHECKING:
    from components.config import StackConfig


STORAGE_CLASS: Final = "gp3"
#: Grafana's sidecar loads every ConfigMap with this label (chart default label and value).
DASHBOARD_LABEL: Final = {"grafana_dashboard": "1"}
#: kube-state-metrics exports these node labels as `kube_node_labels{label_...}` (GPU-node alerts).
NODE_LABEL_ALLOWLIST: Final = (
    catalog.LABEL_GPU_VENDOR,
    catalog.LABEL_GPU_CLASS,
    catalog.LABEL_NODE_POOL,
    catalog.LABEL_CAPACITY_TYPE,
)


def _volume_claim(size_gib: int) -> dict[str, Any]:
    # The gp3 StorageClass (Cluster) sets `encrypted: "true"`: every volume is KMS-encrypted.
    return {
        "volumeClaimTemplate": {
            "spec": {
                "storageClassName": STORAGE_CLASS,
                "accessModes": ["ReadWriteOnce"],
                "resources": {"requests": {"storage": f"{size_gib}Gi"}},
            }
        }
    }


def chart_values(config: ObservabilityConfig) -> dict[str, Any]:
    """kube-prometheus-stack values (every key exists in the chart's values.yaml; tested)."""
    system = catalog.system_node_labels()
    return {
        "crds": {"enabled": True},
        "prometheusOperator": {"nodeSelector": system},
        "prometheus": {"prometheusSpec": _prometheus_spec(config, system)},
        "alertmanager": {
            "alertmanagerSpec": {
                "storage": _volume_claim(config.alertmanager_storage_gib),
                "nodeSelector": system,
            }
        },
        "grafana": _grafana_values(config, system),
        "kube-state-metrics": {
            "nodeSelector": system,
            "metricLabelsAllowlist": [f"nodes=[{','.join(NODE_LABEL_ALLOWLIST)}]"],
        },
        # node-exporter must run on GPU nodes too (memory/disk/PID of the nodes that matter).
        "prometheus-node-exporter": {"tolerations": catalog.gpu_daemon_tolerations()},
    }


def _prometheus_spec(config: ObservabilityConfig, system: dict[str, str]) -> dict[str, Any]:
    """Prometheus' retention, storage and scrape scope: it must see every team's monitors."""
    # Prometheus' size-based retention keeps the volume from filling before the time limit.
    retention_size = f"{int(config.storage_gib * 0.85)}GB"
    return {
        "retention": config.retention,
        "retentionSize": retention_size,
        "scrapeInterval": config.scrape_interval,
        "storageSpec": _volume_claim(config.storage_gib),
        "nodeSelector": system,
        # Select every ServiceMonitor/PodMonitor/PrometheusRule, not only the chart's.
        "serviceMonitorSelectorNilUsesHelmValues": False,
        "podMonitorSelectorNilUsesHelmValues": False,
        "ruleSelectorNilUsesHelmValues": False,
        "resources": {
            "requests": {"cpu": "500m", "memory": "2Gi"},
            "limits": {"memory": "8Gi"},
        },
    }


def _grafana_values(config: ObservabilityConfig, system: dict[str, str]) -> dict[str, Any]:
    """Grafana on a persistent volume, its sidecar loading the dashboards of every namespace."""
    return {
        "nodeSelector": system,
        "defaultDashboardsEnabled": True,
        "persistence": {
            "enabled": True,
            "storageClassName": STORAGE_CLASS,
            "size": f"{config.grafana_storage_gib}Gi",
        },
        "sidecar": {
            "dashboards": {
                "enabled": True,
                "label": next(iter(DASHBOARD_LABEL)),
                "labelValue": next(iter(DASHBOARD_LABEL.values())),
                "searchNamespace": "ALL",
            }
        },
    }


# --- dashboards ---------------------------------------------------------------------------------


def _panel(
    panel_id: int, title: str, exprs: list[tuple[str, str]], unit: str, *, x: int, y: int
) -> dict[str, Any]:
    return {
        "id": panel_id,
        "type": "timeseries",
        "title": title,
        "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
            for i, (expr, legend) in enumerate(exprs)
        ],
    }


def _dashboard(
    uid: str, title: str, panels: list[tuple[str, list[tuple[str, str]], str]], variables: list[str]
) -> dict[str, Any]:
    templating: list[dict[str, Any]] = [
        {"name": "datasource", "type": "datasource", "query": "prometheus", "hide": 0}
    ]
    for name in variables:
        label_query = {
            "namespace": "label_values(DCGM_FI_DEV_GPU_UTIL, namespace)",
            "pod": 'label_values(DCGM_FI_DEV_GPU_UTIL{namespace="$namespace"}, pod)',
        }[name]
        templating.append(
            {
                "name": name,
                "type": "query",
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "query": label_query,
                "refresh": 2,
                "includeAll": name == "pod",
                "multi": name == "pod",
            }
        )
    return {
        "uid": uid,
        "title": title,
        "tags": ["gpu-platform", "gpu"],
        "schemaVersion": 39,
        "time": {"from": "now-6h", "to": "now"},
        "refresh": "30s",
        "templating": {"list": templating},
        "panels": [
            _panel(index + 1, ptitle, exprs, unit, x=(index % 2) * 12, y=(index // 2) * 8)
            for index, (ptitle, exprs, unit) in enumerate(panels)
        ],
    }


def dashboards(validation_namespace: str) -> dict[str, dict[str, Any]]:
    """Grafana dashboards by file name: cluster GPU overview and the per-job view.
    `validation_namespace`: where the validation Jobs run (`validation.namespace`)."""
    job = 'namespace="$namespace", pod=~"$pod"'
    overview = _dashboard(
        "gpu-platform-overview",
        "GPU platform / Cluster GPU overview",
        [
            (
                "GPU utilisation by node",
                [("avg by (Hostname) (DCGM_FI_DEV_GPU_UTIL)", "{{Hostname}}")],
                "percent",
            ),
            (
                "Allocated vs idle GPUs",
                [
                    ('count(DCGM_FI_DEV_GPU_UTIL{pod!=""})', "allocated"),
                    ('count(DCGM_FI_DEV_GPU_UTIL{pod=""})', "unallocated"),
                ],
                "short",
            ),
            (
                "Framebuffer memory used",
                [("sum by (Hostname) (DCGM_FI_DEV_FB_USED) * 1048576", "{{Hostname}}")],
                "bytes",
            ),
            (
                "Power draw",
                [("sum by (Hostname) (DCGM_FI_DEV_POWER_USAGE)", "{{Hostname}}")],
                "watt",
            ),
            (
                "GPU temperature (max)",
                [("max by (Hostname) (DCGM_FI_DEV_GPU_TEMP)", "{{Hostname}}")],
                "celsius",
            ),
            (
                "XID errors / ECC / row-remap failures",
                [
                    (
                        "max by (Hostname, gpu) (DCGM_FI_DEV_XID_ERRORS) > 0",
                        "XID {{Hostname}}/{{gpu}}",
                    ),
                    (
                        "sum by (Hostname) (increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[1h]))",
                        "DBE {{Hostname}}",
                    ),
                    ("max by (Hostname) (DCGM_FI_DEV_ROW_REMAP_FAILURE)", "remap {{Hostname}}"),
                ],
                "short",
            ),
            (
                "Tensor-pipe activity",
                [("avg by (Hostname) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)", "{{Hostname}}")],
                "percentunit",
            ),
            (
                "NVLink traffic",
                [
                    ("sum by (Hostname) (DCGM_FI_PROF_NVLINK_TX_BYTES)", "tx {{Hostname}}"),
                    ("sum by (Hostname) (DCGM_FI_PROF_NVLINK_RX_BYTES)", "rx {{Hostname}}"),
                ],
                "Bps",
            ),
            (
                # Served by the NCCL test pod while it lingers (validation.py); the threshold
                # is the catalog's figure for the type unless the stack overrides it.
                "Validation: NCCL all-reduce bus bandwidth vs threshold",
                [
                    (
                        "max by (pool, instance_type) "
                        "(last_over_time(gpu_platform_validation_nccl_busbw_gbps[7d]))",
                        "busbw {{pool}} ({{instance_type}})",
                    ),
                    (
                        "max by (pool, instance_type) "
                        "(last_over_time(gpu_platform_validation_nccl_threshold_gbps[7d]))",
                        "threshold {{pool}}",
                    ),
                ],
                "GBs",
            ),
            (
                "Validation: latest test results (1 = passed)",
                [
                    (
                        "min by (test, pool) (last_over_time(gpu_platform_validation_passed[7d]))",
                        "{{test}} {{pool}}",
                    ),
                    (
                        "min by (pool, check) (last_over_time(gpu_platform_validation_check{"
                        'test="gpu-smoke"}[7d]))',
                        "smoke {{check}} {{pool}}",
                    ),
                    (
                        "max by (job_name) "
                        f'(kube_job_status_failed{{namespace="{validation_namespace}"}})',
                        "job failed {{job_name}}",
                    ),
                ],
                "short",
            ),
        ],
        [],
    )
    per_job = _dashboard(
        "gpu-platform-job",
        "GPU platform / Training job",
        [
            (
                "GPU utilisation",
                [(f"DCGM_FI_DEV_GPU_UTIL{{{job}}}", "{{pod}} gpu{{gpu}}")],
                "percent",
            ),
            (
                "GPU memory used",
                [(f"DCGM_FI_DEV_FB_USED{{{job}}} * 1048576", "{{pod}} gpu{{gpu}}")],
                "bytes",
            ),
            ("GPU power", [(f"DCGM_FI_DEV_POWER_USAGE{{{job}}}", "{{pod}} gpu{{gpu}}")], "watt"),
            (
                "XID errors",
                [(f"max_over_time(DCGM_FI_DEV_XID_ERRORS{{{job}}}[5m])", "{{pod}} gpu{{gpu}}")],
                "short",
            ),
            (
                "Step time",
                [(f"trainer_step_duration_seconds{{{job}}}", "{{pod}}")],
                "s",
            ),
            (
                "Tokens per second",
                [(f"sum(trainer_tokens_per_second{{{job}}})", "job total")],
                "short",
            ),
            (
                # Model FLOPs utilisation: achieved model FLOP/s over the GPUs' BF16 peak (the
                # trainer's trainer_mfu_ratio; the peak comes from catalog.GPU_PEAK_BF16_TFLOPS).
                "MFU",
                [(f"max(trainer_mfu_ratio{{{job}}})", "job")],
                "percentunit",
            ),
            (
                "Data loading and checkpoint save time",
                [
                    (f"trainer_data_loading_seconds{{{job}}}", "data {{pod}}"),
                    (f"trainer_checkpoint_save_duration_seconds{{{job}}}", "ckpt {{pod}}"),
                ],
                "s",
            ),
            (
                "Global step",
                [(f"max(trainer_global_step{{{job}}})", "step")],
                "short",
            ),
        ],
        ["namespace", "pod"],
    )
    return {"gpu-overview.json": overview, "gpu-training-job.json": per_job}


def dashboard_exprs(validation_namespace: str) -> list[str]:
    """Every PromQL expression of every dashboard panel (tests check their metric names)."""
    return [
        target["expr"]
        for board in dashboards(validation_namespace).values()
        for panel in board["panels"]
        for target in panel["targets"]
    ]


# --- component ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ObservabilityArgs:
    """Inputs of the Observability component."""

    #: The `observability` config section.
    config: ObservabilityConfig
    #: The explicit Kubernetes provider of the cluster.
    k8s_provider: k8s.Provider
    #: The system node group: the controllers need a node to start on.
    system_node_group: pulumi.Resource
    #: Where the validation Jobs run (`validation.namespace`): a dashboard panel reads their
    #: failures there.
    validation_namespace: str

    @classmethod
    def of(cls, cfg: StackConfig, cluster: ClusterHandles) -> ObservabilityArgs:
        """This component's slice of the stack config and the cluster it runs on."""
        return cls(
            config=cfg.observability,
            k8s_provider=cluster.k8s_provider,
            system_node_group=cluster.system_node_group,
            validation_namespace=cfg.validation.namespace,
        )


class Observability(pulumi.ComponentResource):
    """kube-prometheus-stack, the platform's PrometheusRule and GPU dashboards."""

    namespace: str
    release: k8s.helm.v3.Release
    rules: k8s.apiextensions.CustomResource

    def __init__(
        self, name: str, args: ObservabilityArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:observability:Observability", name, None, opts)
        config = args.config
        k8s_opts = child_options(self, provider=args.k8s_provider)
        self.namespace = config.namespace

        # node-exporter needs host namespaces and hostPath mounts (its registry row's level).
        namespace, _ = owned_namespace(
            f"{name}-namespace",
            config.namespace,
            {"pod-security.kubernetes.io/enforce": addons.KUBE_PROMETHEUS_STACK.pod_security},
            k8s_opts,
        )
        self.release = self._release(name, config, k8s_opts, [namespace, args.system_node_group])
        after_crds = pulumi.ResourceOptions.merge(
            k8s_opts, pulumi.ResourceOptions(depends_on=[self.release])
        )
        self.rules = self._training_rules(name, config, after_crds)
        self._dashboards(
            name,
            config,
            args.validation_namespace,
            pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[namespace])),
        )
        self.register_outputs({"namespace": self.namespace})

    def _release(
        self,
        name: str,
        config: ObservabilityConfig,
        k8s_opts: pulumi.ResourceOptions,
        after: list[pulumi.Resource],
    ) -> k8s.helm.v3.Release:
        """kube-prometheus-stack, which also installs the prometheus-operator CRDs."""
        return helm_release(
            f"{name}-kube-prometheus-stack",
            addons.KUBE_PROMETHEUS_STACK,
            version=config.chart_version,
            namespace=config.namespace,
            values=chart_values(config),
            opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=after)),
        )

    def _training_rules(
        self, name: str, config: ObservabilityConfig, after_crds: pulumi.ResourceOptions
    ) -> k8s.apiextensions.CustomResource:
        """The platform's PrometheusRule: the alerts of alerts.py, once the CRDs exist."""
        return k8s.apiextensions.CustomResource(
            f"{name}-training-rules",
            api_version="monitoring.coreos.com/v1",
            kind="PrometheusRule",
            metadata={
                "name": "gpu-platform-training",
                "namespace": config.namespace,
                "labels": {"app.kubernetes.io/part-of": "gpu-platform"},
            },
            spec={"groups": alerts.rule_groups(config.thresholds, config.runbook_base_url)},
            opts=after_crds,
        )

    def _dashboards(
        self,
        name: str,
        config: ObservabilityConfig,
        validation_namespace: str,
        in_namespace: pulumi.ResourceOptions,
    ) -> None:
        """One ConfigMap per dashboard, labelled for Grafana's sidecar to load."""
        for file_name, board in sorted(dashboards(validation_namespace).items()):
            stem = file_name.removesuffix(".json")
            k8s.core.v1.ConfigMap(
                f"{name}-dashboard-{stem}",
                metadata={
                    "name": f"dashboard-{stem}",
                    "namespace": config.namespace,
                    "labels": dict(DASHBOARD_LABEL),
                },
                data={file_name: json.dumps(board, indent=1, sort_keys=True)},
                opts=in_namespace,
            )
