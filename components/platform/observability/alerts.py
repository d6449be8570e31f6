"""The platform's alert rules and the metrics they may use — pure data, no Pulumi.

`EXPORTER_METRICS` is the single list of metric names each exporter in this stack produces;
every rule's PromQL may only name metrics from it (tests/platform/test_alerts.py parses
the expressions).
`rule_groups(thresholds, runbook_base_url)` turns the config thresholds into Prometheus rule
groups — the same dicts go into the PrometheusRule object and into `promtool check rules`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from components.config import AlertThresholds

#: Metric names per exporter. DCGM names are the fields in the curated CSV
#: (components/platform/capacity/gpu.py);
#: kube-state-metrics v2, node-exporter, Kueue v0.19 (`kueue_*`), Karpenter v1.x
#: (`karpenter_*`, docs "Metrics" page) and the reference trainer (docs/observability.md).
EXPORTER_METRICS: Final[dict[str, frozenset[str]]] = {
    "dcgm-exporter": frozenset(
        {
            "DCGM_FI_DEV_GPU_UTIL",
            "DCGM_FI_DEV_MEM_COPY_UTIL",
            "DCGM_FI_DEV_FB_USED",
            "DCGM_FI_DEV_FB_FREE",
            "DCGM_FI_DEV_POWER_USAGE",
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
            "DCGM_FI_DEV_GPU_TEMP",
            "DCGM_FI_DEV_MEMORY_TEMP",
            "DCGM_FI_DEV_SM_CLOCK",
            "DCGM_FI_DEV_XID_ERRORS",
            "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
            "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
            "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
            "DCGM_FI_DEV_ROW_REMAP_FAILURE",
            "DCGM_FI_DEV_CLOCKS_EVENT_REASONS",
            "DCGM_FI_DEV_POWER_VIOLATION",
            "DCGM_FI_DEV_THERMAL_VIOLATION",
            "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
            "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
            "DCGM_FI_PROF_NVLINK_TX_BYTES",
            "DCGM_FI_PROF_NVLINK_RX_BYTES",
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
            "DCGM_FI_PROF_SM_ACTIVE",
            "DCGM_FI_PROF_DRAM_ACTIVE",
        }
    ),
    "kube-state-metrics": frozenset(
        {
            "kube_pod_status_phase",
            "kube_pod_container_status_restarts_total",
            "kube_pod_container_resource_requests",
            "kube_node_status_condition",
            "kube_node_labels",
            "kube_pod_info",
            # Default `jobs` collector (kubernetes/kube-state-metrics docs/metrics/workload/
            # job-metrics.md): the NCCL test Job that died before it served a result.
            "kube_job_status_failed",
        }
    ),
    "node-exporter": frozenset(
        {
            "node_memory_MemAvailable_bytes",
            "node_memory_MemTotal_bytes",
            "node_filesystem_avail_bytes",
            "node_filesystem_size_bytes",
        }
    ),
    "kueue": frozenset(
        {
            "kueue_pending_workloads",
            "kueue_admitted_workloads_total",
            "kueue_admission_wait_time_seconds_bucket",
            "kueue_admission_wait_time_seconds_count",
            "kueue_admission_wait_time_seconds_sum",
        }
    ),
    "karpenter": frozenset(
        {
            "karpenter_cloudprovider_errors_total",
            "karpenter_nodeclaims_created_total",
            "karpenter_nodeclaims_terminated_total",
        }
    ),
    # kubernetes/autoscaler@cluster-autoscaler-1.33.6 cluster-autoscaler/metrics/metrics.go
    # (namespace `cluster_autoscaler`, counter `failed_scale_ups_total` by `reason`).
    "cluster-autoscaler": frozenset(
        {
            "cluster_autoscaler_failed_scale_ups_total",
            "cluster_autoscaler_unschedulable_pods_count",
        }
    ),
    # The post-deploy tests serve their result while they linger (components/platform/
    # validation.py, docs/observability.md "Validation results").
    "validation": frozenset(
        {
            "gpu_platform_validation_passed",
            "gpu_platform_validation_check",
            "gpu_platform_validation_nccl_busbw_gbps",
            "gpu_platform_validation_nccl_threshold_gbps",
        }
    ),
    "trainer": frozenset(
        {
            "trainer_step_duration_seconds",
            "trainer_tokens_per_second",
            "trainer_mfu_ratio",
            "trainer_data_loading_seconds",
            "trainer_checkpoint_save_duration_seconds",
            "trainer_last_checkpoint_timestamp_seconds",
            "trainer_global_step",
        }
    ),
}

ALL_METRICS: Final[frozenset[str]] = frozenset().union(*EXPORTER_METRICS.values())

#: Only GPU nodes: kube-state-metrics exports the node label (allow-listed in its values).
GPU_NODE = 'kube_node_labels{label_gpu_platform_io_gpu_vendor="nvidia"}'
#: Pods that request GPUs — "training pods" for the pending and restart alerts.
GPU_POD = 'kube_pod_container_resource_requests{resource="nvidia_com_gpu"} > 0'


@dataclass(frozen=True)
class Alert:
    """One alert rule plus the words a human needs when it fires."""

    name: str
    expr: str
    duration: str
    severity: str
    summary: str
    description: str
    threshold: str

    @property
    def anchor(self) -> str:
        return self.name.lower()


def alerts(t: AlertThresholds) -> list[Alert]:
    """The training platform's alerts, thresholds from config."""
    util = _num(t.gpu_util_low_percent)
    return [
        Alert(
            "GpuUtilizationLow",
            # Only GPUs attributed to a pod (allocated): an idle, unallocated GPU is Kueue's
            # and Karpenter's business, not the job owner's.
            f'avg by (namespace, pod, Hostname, gpu) (DCGM_FI_DEV_GPU_UTIL{{pod!=""}}) < {util}',
            t.gpu_util_low_for,
            "warning",
            "GPU {{ $labels.gpu }} of pod {{ $labels.namespace }}/{{ $labels.pod }} is under "
            f"{util}% busy",
            "Utilisation {{ $value }}% for " + t.gpu_util_low_for + "; the job is wasting GPUs "
            "(input pipeline, small batch, or stuck).",
            f"< {util} % for {t.gpu_util_low_for}",
        ),
        Alert(
            "GpuXidError",
            "max by (Hostname, gpu, namespace, pod) "
            "(max_over_time(DCGM_FI_DEV_XID_ERRORS[5m])) > 0",
            "0m",
            "critical",
            "XID {{ $value }} on GPU {{ $labels.gpu }} of node {{ $labels.Hostname }}",
            "The driver reported an XID error; most (48, 63, 64, 74, 79, 94, 95) mean the GPU "
            "or NVLink needs attention.",
            "any XID in 5 min",
        ),
        Alert(
            "GpuEccDoubleBitError",
            "increase(DCGM_FI_DEV_ECC_DBE_VOL_TOTAL[10m]) > 0",
            "0m",
            "critical",
            "Uncorrectable ECC errors on GPU {{ $labels.gpu }} of node {{ $labels.Hostname }}",
            "Double-bit ECC errors corrupt results; drain the node.",
            "any new DBE in 10 min",
        ),
        Alert(
            "GpuRowRemapFailure",
            "max by (Hostname, gpu) (DCGM_FI_DEV_ROW_REMAP_FAILURE) > 0",
            "0m",
            "critical",
            "Row remapping failed on GPU {{ $labels.gpu }} of node {{ $labels.Hostname }}",
            "The GPU ran out of spare memory rows; it must be replaced (RMA).",
            "> 0",
        ),
        Alert(
            "GpuNvlinkErrors",
            # CRC flit errors are retried by the link, so a few are noise; hundreds in 10 min
            # mean a degrading NVLink that turns into XID 74 and a hung all-reduce.
            "increase(DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL[10m]) > 100",
            "5m",
            "warning",
            "NVLink CRC errors climbing on GPU {{ $labels.gpu }} of node {{ $labels.Hostname }}",
            "{{ $value }} NVLink flit CRC errors in 10 min; the link is degrading and will "
            "stall NCCL collectives.",
            "> 100 CRC flit errors in 10 min for 5m",
        ),
        Alert(
            "GpuThrottled",
            # Violation counters are nanoseconds of throttling: rate()/1e9 = fraction of time.
            "(rate(DCGM_FI_DEV_THERMAL_VIOLATION[5m]) + rate(DCGM_FI_DEV_POWER_VIOLATION[5m]))"
            f" / 1e9 > {_num(t.throttle_fraction)}",
            "10m",
            "warning",
            "GPU {{ $labels.gpu }} of node {{ $labels.Hostname }} is thermal/power throttled",
            "Clocks held down {{ $value | humanizePercentage }} of the time; "
            "one slow GPU slows every rank of a job.",
            f"> {_pct(t.throttle_fraction)} of time for 10m",
        ),
        Alert(
            "GpuTemperatureHigh",
            f"DCGM_FI_DEV_GPU_TEMP > {_num(t.gpu_temperature_celsius)}",
            "5m",
            "warning",
            "GPU {{ $labels.gpu }} of node {{ $labels.Hostname }} at {{ $value }} °C",
            "Sustained high temperature precedes thermal throttling and XID errors.",
            f"> {_num(t.gpu_temperature_celsius)} °C for 5m",
        ),
        Alert(
            "TrainingPodPending",
            'max by (namespace, pod) (kube_pod_status_phase{phase="Pending"}) == 1 '
            f"and on (namespace, pod) ({GPU_POD})",
            t.pod_pending_for,
            "warning",
            "GPU pod {{ $labels.namespace }}/{{ $labels.pod }} pending for " + t.pod_pending_for,
            "No node can take the pod: capacity, quota, taints or a failing node launch.",
            f"Pending > {t.pod_pending_for}",
        ),
        Alert(
            "PodRestartLoop",
            f"increase(kube_pod_container_status_restarts_total[1h]) > {t.restarts_per_hour}",
            "0m",
            "warning",
            "Container {{ $labels.namespace }}/{{ $labels.pod }}/{{ $labels.container }} "
            "restarts repeatedly",
            "{{ $value }} restarts in the last hour.",
            f"> {t.restarts_per_hour} restarts/h",
        ),
        Alert(
            "GpuNodePressure",
            "max by (node, condition) "
            '(kube_node_status_condition{condition=~"MemoryPressure|DiskPressure|PIDPressure",'
            'status="true"}) == 1 '
            f"and on (node) {GPU_NODE}",
            t.node_pressure_for,
            "critical",
            "GPU node {{ $labels.node }} has {{ $labels.condition }}",
            "The kubelet will evict pods from this node; training ranks on it will die.",
            f"condition true for {t.node_pressure_for}",
        ),
        Alert(
            "CheckpointSlow",
            "max by (namespace, pod) (trainer_checkpoint_save_duration_seconds) "
            f"> {_num(t.checkpoint_duration_seconds)}",
            "0m",
            "warning",
            "Checkpoint of {{ $labels.namespace }}/{{ $labels.pod }} took {{ $value }}s",
            "Slow checkpoints stall every rank; check storage throughput.",
            f"last save > {_num(t.checkpoint_duration_seconds)} s",
        ),
        Alert(
            "CheckpointStale",
            "time() - max by (namespace, pod) (trainer_last_checkpoint_timestamp_seconds) "
            f"> {_num(t.checkpoint_max_age_seconds)}",
            "5m",
            "critical",
            "No checkpoint from {{ $labels.namespace }}/{{ $labels.pod }} for "
            "{{ $value | humanizeDuration }}",
            "A failure now loses all work since the last checkpoint.",
            f"age > {_num(t.checkpoint_max_age_seconds)} s",
        ),
        Alert(
            "TrainingStalled",
            # The NCCL-timeout signal: the step counter stops while the pod is still Running
            # (a hung collective does not crash the pod until the NCCL watchdog fires).
            f"changes(trainer_global_step[{t.training_stall_for}]) == 0 "
            'and on (namespace, pod) (kube_pod_status_phase{phase="Running"} == 1)',
            "0m",
            "critical",
            "Training in {{ $labels.namespace }}/{{ $labels.pod }} made no step for "
            + t.training_stall_for,
            "Likely a hung NCCL collective (a dead or slow rank, network, EFA); see the "
            "NCCL flight-recorder dump in the pod logs.",
            f"no step for {t.training_stall_for}",
        ),
        Alert(
            "KueueWorkloadsWaitingTooLong",
            "histogram_quantile(0.9, sum by (cluster_queue, le) "
            "(rate(kueue_admission_wait_time_seconds_bucket[1h]))) "
            f"> {_num(t.kueue_wait_seconds)}",
            "15m",
            "warning",
            "Workloads of ClusterQueue {{ $labels.cluster_queue }} wait too long",
            "90th percentile of admission wait {{ $value | humanizeDuration }}.",
            f"p90 admission wait > {_num(t.kueue_wait_seconds)} s",
        ),
        Alert(
            "KueueQueueStuck",
            'max by (cluster_queue) (kueue_pending_workloads{status="active"}) > 0 '
            "unless on (cluster_queue) "
            f"(increase(kueue_admitted_workloads_total[{_dur(t.kueue_wait_seconds)}]) > 0)",
            "15m",
            "warning",
            "ClusterQueue {{ $labels.cluster_queue }} has pending workloads and admits none",
            "Nothing was admitted for a whole wait-threshold while workloads are pending.",
            f"pending and none admitted for {_dur(t.kueue_wait_seconds)}",
        ),
        Alert(
            "KarpenterNodeLaunchFailing",
            "sum by (provider, error) "
            '(increase(karpenter_cloudprovider_errors_total{method="Create"}[15m])) '
            f">= {t.karpenter_launch_errors_per_15m}",
            "0m",
            "warning",
            "Karpenter cannot launch nodes ({{ $labels.error }})",
            "{{ $value }} failed instance launches in 15 min: capacity, quota or IAM.",
            f">= {t.karpenter_launch_errors_per_15m} launch errors / 15 min",
        ),
        Alert(
            "ClusterAutoscalerScaleUpFailing",
            # A node group that cannot grow: spot capacity gone, a Capacity Block not active,
            # the EC2 quota, or a node that did not join within --max-node-provision-time.
            "sum by (reason) (increase(cluster_autoscaler_failed_scale_ups_total[15m])) > 0",
            "0m",
            "warning",
            "The cluster-autoscaler failed to grow a node group ({{ $labels.reason }})",
            "{{ $value }} failed scale-ups in 15 min: pending GPU pods on node-group flavors "
            "wait; Kueue's ProvisioningRequest check retries with backoff.",
            "> 0 failed scale-ups / 15 min",
        ),
        Alert(
            "NcclValidationFailed",
            # The latest served result of the last 6 h is a failure (bus bandwidth under the
            # type's threshold), or the Job failed outright (crash, NCCL error, deadline) before
            # it could serve one. last_over_time: a re-run that passes clears it.
            'last_over_time(gpu_platform_validation_passed{test="nccl-all-reduce"}[6h]) == 0 '
            "or max by (namespace, job_name) "
            '(kube_job_status_failed{job_name=~"nccl-allreduce-.+"}) > 0',
            "0m",
            "critical",
            "The NCCL all-reduce test failed on pool {{ $labels.pool }}{{ $labels.job_name }}",
            "Bus bandwidth below the instance type's threshold, or the test Job failed: the EFA "
            "fabric cannot be trusted for multi-node training on this pool.",
            "last result failed, or the Job failed",
        ),
    ]


def rule_groups(t: AlertThresholds, runbook_base_url: str) -> list[dict[str, Any]]:
    """Prometheus rule groups (the `spec.groups` of a PrometheusRule)."""
    rules = []
    for alert in alerts(t):
        rule: dict[str, Any] = {
            "alert": alert.name,
            "expr": alert.expr,
            "labels": {"severity": alert.severity, "platform": "gpu-platform"},
            "annotations": {
                "summary": alert.summary,
                "description": alert.description,
                "runbook_url": f"{runbook_base_url}#{alert.anchor}",
            },
        }
        if alert.duration != "0m":
            rule["for"] = alert.duration
        rules.append(rule)
    return [{"name": "gpu-platform.training", "rules": rules}]


# --- PromQL metric names ------------------------------------------------------------------------

_KEYWORDS: Final = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless"}
    | {"bool", "offset", "inf", "nan"}
)


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression selects (functions, labels, keywords removed)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = re.sub(r"\{[^}]*\}", "", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", text)
    names = set()
    for match in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", text):
        word = match.group(0)
        following = text[match.end() :].lstrip()
        if following.startswith("(") or word.lower() in _KEYWORDS:
            continue
        if match.start() > 0 and text[match.start() - 1].isdigit():
            continue  # the `e9` of `1e9`
        names.add(word)
    return names


def _num(value: float) -> str:
    return f"{value:g}"


def _pct(value: float) -> str:
    return f"{value * 100:g} %"


def _dur(seconds: float) -> str:
    """Seconds as a PromQL range (`3600` → `60m`)."""
    minutes = max(1, round(seconds / 60))
    return f"{minutes}m"
