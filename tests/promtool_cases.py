"""Synthetic series for `promtool test rules`: per alert, one case that fires and one that stays
silent, evaluated against the rules built from the default thresholds (AlertThresholds())."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    """Input series (`name{labels}` → promtool values notation), when to look, what to expect."""

    series: dict[str, str]
    eval_time: str
    #: Label sets of the expected alerts (severity/platform are added by the test); [] = silent.
    expected: list[dict[str, str]]


GPU = 'Hostname="node-a", gpu="0"'
JOB = 'namespace="ml", pod="train-0"'
ALLOCATED = {"Hostname": "node-a", "gpu": "0", "namespace": "ml", "pod": "train-0"}
NODE_GPU = {"Hostname": "node-a", "gpu": "0"}
GPU_REQUEST = (
    'kube_pod_container_resource_requests{namespace="ml", pod="train-0", container="t", '
    'resource="nvidia_com_gpu", unit="integer"}'
)
KUEUE_BUCKETS = "kueue_admission_wait_time_seconds_bucket"

#: alert name → (firing case, silent case)
CASES: dict[str, tuple[Case, Case]] = {
    "GpuUtilizationLow": (
        Case({f"DCGM_FI_DEV_GPU_UTIL{{{GPU}, {JOB}}}": "10x30"}, "20m", [ALLOCATED]),
        Case(
            {
                f"DCGM_FI_DEV_GPU_UTIL{{{GPU}, {JOB}}}": "90x30",
                # An idle GPU no pod holds is not the job owner's problem.
                'DCGM_FI_DEV_GPU_UTIL{Hostname="node-b", gpu="0", namespace="", pod=""}': "0x30",
            },
            "20m",
            [],
        ),
    ),
    "GpuXidError": (
        Case({f"DCGM_FI_DEV_XID_ERRORS{{{GPU}}}": "0 0 0 79 79 79"}, "5m", [NODE_GPU]),
        Case({f"DCGM_FI_DEV_XID_ERRORS{{{GPU}}}": "0x10"}, "10m", []),
    ),
    "GpuEccDoubleBitError": (
        Case({f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{GPU}}}": "0 0 0 1 1 1 1"}, "6m", [NODE_GPU]),
        Case({f"DCGM_FI_DEV_ECC_DBE_VOL_TOTAL{{{GPU}}}": "2x15"}, "12m", []),
    ),
    "GpuRowRemapFailure": (
        Case({f"DCGM_FI_DEV_ROW_REMAP_FAILURE{{{GPU}}}": "0 1 1"}, "2m", [NODE_GPU]),
        Case({f"DCGM_FI_DEV_ROW_REMAP_FAILURE{{{GPU}}}": "0x5"}, "5m", []),
    ),
    "GpuNvlinkErrors": (
        Case(
            {f"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{{{GPU}}}": "0+50x30"},
            "20m",
            [NODE_GPU],
        ),
        Case({f"DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL{{{GPU}}}": "0+2x30"}, "20m", []),
    ),
    "GpuThrottled": (
        Case(
            {
                # 30 s of every minute throttled (counters are nanoseconds).
                f"DCGM_FI_DEV_THERMAL_VIOLATION{{{GPU}}}": "0+30000000000x30",
                f"DCGM_FI_DEV_POWER_VIOLATION{{{GPU}}}": "0x30",
            },
            "20m",
            [NODE_GPU],
        ),
        Case(
            {
                f"DCGM_FI_DEV_THERMAL_VIOLATION{{{GPU}}}": "0+1000000000x30",
                f"DCGM_FI_DEV_POWER_VIOLATION{{{GPU}}}": "0+1000000000x30",
            },
            "20m",
            [],
        ),
    ),
    "GpuTemperatureHigh": (
        Case({f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}}": "92x15"}, "10m", [NODE_GPU]),
        Case({f"DCGM_FI_DEV_GPU_TEMP{{{GPU}}}": "80x15"}, "10m", []),
    ),
    "TrainingPodPending": (
        Case(
            {
                'kube_pod_status_phase{namespace="ml", pod="train-0", phase="Pending"}': "1x20",
                GPU_REQUEST: "8x20",
            },
            "15m",
            [{"namespace": "ml", "pod": "train-0"}],
        ),
        Case(
            {
                # A pending CPU-only pod, and a GPU pod that is running.
                'kube_pod_status_phase{namespace="ml", pod="web-0", phase="Pending"}': "1x20",
                'kube_pod_container_resource_requests{namespace="ml", pod="web-0", '
                'container="w", resource="cpu", unit="core"}': "1x20",
                'kube_pod_status_phase{namespace="ml", pod="train-0", phase="Pending"}': "0x20",
                GPU_REQUEST: "8x20",
            },
            "15m",
            [],
        ),
    ),
    "PodRestartLoop": (
        Case(
            {
                'kube_pod_container_status_restarts_total{namespace="ml", pod="train-0", '
                'container="t"}': "0+1x70"
            },
            "65m",
            [{"namespace": "ml", "pod": "train-0", "container": "t"}],
        ),
        Case(
            {
                'kube_pod_container_status_restarts_total{namespace="ml", pod="train-0", '
                'container="t"}': "0 0 1 1x67"
            },
            "65m",
            [],
        ),
    ),
    "GpuNodePressure": (
        Case(
            {
                'kube_node_status_condition{node="gpu-1", condition="MemoryPressure", '
                'status="true"}': "1x10",
                'kube_node_labels{node="gpu-1", label_gpu_platform_io_gpu_vendor="nvidia"}': (
                    "1x10"
                ),
            },
            "8m",
            [{"node": "gpu-1", "condition": "MemoryPressure"}],
        ),
        Case(
            {
                # Pressure on a CPU node is the stock kube-prometheus rules' business.
                'kube_node_status_condition{node="cpu-1", condition="DiskPressure", '
                'status="true"}': "1x10",
                'kube_node_labels{node="cpu-1"}': "1x10",
                'kube_node_status_condition{node="gpu-1", condition="DiskPressure", '
                'status="true"}': "0x10",
                'kube_node_labels{node="gpu-1", label_gpu_platform_io_gpu_vendor="nvidia"}': (
                    "1x10"
                ),
            },
            "8m",
            [],
        ),
    ),
    "CheckpointSlow": (
        Case(
            {f"trainer_checkpoint_save_duration_seconds{{{JOB}}}": "700x5"},
            "2m",
            [{"namespace": "ml", "pod": "train-0"}],
        ),
        Case({f"trainer_checkpoint_save_duration_seconds{{{JOB}}}": "120x5"}, "2m", []),
    ),
    "CheckpointStale": (
        # Last checkpoint at t=0; at 3 h it is 10800 s old (> 7200).
        Case(
            {f"trainer_last_checkpoint_timestamp_seconds{{{JOB}}}": "0x200"},
            "3h",
            [{"namespace": "ml", "pod": "train-0"}],
        ),
        # A checkpoint every minute.
        Case({f"trainer_last_checkpoint_timestamp_seconds{{{JOB}}}": "0+60x200"}, "3h", []),
    ),
    "TrainingStalled": (
        Case(
            {
                f"trainer_global_step{{{JOB}}}": "0+1x10 10x30",
                f'kube_pod_status_phase{{{JOB}, phase="Running"}}': "1x40",
            },
            "35m",
            [{"namespace": "ml", "pod": "train-0"}],
        ),
        Case(
            {
                f"trainer_global_step{{{JOB}}}": "0+1x40",
                f'kube_pod_status_phase{{{JOB}, phase="Running"}}': "1x40",
                # A finished job: flat step counter but the pod no longer runs.
                'trainer_global_step{namespace="ml", pod="done-0"}': "0+1x10 10x30",
                'kube_pod_status_phase{namespace="ml", pod="done-0", phase="Running"}': (
                    "1x10 0x30"
                ),
            },
            "35m",
            [],
        ),
    ),
    "KueueWorkloadsWaitingTooLong": (
        Case(
            {
                f'{KUEUE_BUCKETS}{{cluster_queue="cq", le="600"}}': "0x100",
                f'{KUEUE_BUCKETS}{{cluster_queue="cq", le="3600"}}': "0x100",
                f'{KUEUE_BUCKETS}{{cluster_queue="cq", le="7200"}}': "0+1x100",
                f'{KUEUE_BUCKETS}{{cluster_queue="cq", le="+Inf"}}': "0+1x100",
            },
            "90m",
            [{"cluster_queue": "cq"}],
        ),
        Case(
            {
                f'{KUEUE_BUCKETS}{{cluster_queue="cq", le="600"}}': "0+1x100",
                f'{KUEUE_BUCKETS}{{cluster_queue="cq", le="3600"}}': "0+1x100",
                f'{KUEUE_BUCKETS}{{cluster_queue="cq", le="7200"}}': "0+1x100",
                f'{KUEUE_BUCKETS}{{cluster_queue="cq", le="+Inf"}}': "0+1x100",
            },
            "90m",
            [],
        ),
    ),
    "KueueQueueStuck": (
        Case(
            {
                'kueue_pending_workloads{cluster_queue="cq", status="active"}': "3x100",
                'kueue_admitted_workloads_total{cluster_queue="cq"}': "5x100",
            },
            "90m",
            [{"cluster_queue": "cq"}],
        ),
        Case(
            {
                'kueue_pending_workloads{cluster_queue="cq", status="active"}': "3x100",
                'kueue_admitted_workloads_total{cluster_queue="cq"}': "0+1x100",
            },
            "90m",
            [],
        ),
    ),
    "KarpenterNodeLaunchFailing": (
        Case(
            {
                'karpenter_cloudprovider_errors_total{controller="nodeclaim.lifecycle", '
                'method="Create", provider="aws", error="InsufficientCapacityError"}': "0+1x20"
            },
            "16m",
            [{"provider": "aws", "error": "InsufficientCapacityError"}],
        ),
        Case(
            {
                'karpenter_cloudprovider_errors_total{controller="nodeclaim.lifecycle", '
                'method="Create", provider="aws", error="InsufficientCapacityError"}': "0x20",
                'karpenter_cloudprovider_errors_total{controller="nodeclaim.termination", '
                'method="Delete", provider="aws", error="NotFound"}': "0+1x20",
            },
            "16m",
            [],
        ),
    ),
    "ClusterAutoscalerScaleUpFailing": (
        # Spot capacity gone: the autoscaler's increase fails (counter by reason).
        Case(
            {'cluster_autoscaler_failed_scale_ups_total{reason="cloudProviderError"}': "0 0 1x20"},
            "10m",
            [{"reason": "cloudProviderError"}],
        ),
        # Scale-ups that succeed leave the counter flat: silent.
        Case(
            {
                'cluster_autoscaler_failed_scale_ups_total{reason="timeout"}': "3x30",
                "cluster_autoscaler_unschedulable_pods_count": "2x30",
            },
            "20m",
            [],
        ),
    ),
    "NcclValidationFailed": (
        # A failed result served for 3 min, then the pod exits: still firing 2 h later. And a
        # Job that failed before serving anything (crash, NCCL error, deadline) fires too.
        Case(
            {
                'gpu_platform_validation_passed{test="nccl-all-reduce", pool="kp-h100-od", '
                'instance_type="p5.48xlarge"}': "0x6 _x240",
                'kube_job_status_failed{namespace="gpu-validation", '
                'job_name="nccl-allreduce-kp-l4-od"}': "1x200",
            },
            "2h",
            [
                {"test": "nccl-all-reduce", "pool": "kp-h100-od", "instance_type": "p5.48xlarge"},
                {"namespace": "gpu-validation", "job_name": "nccl-allreduce-kp-l4-od"},
            ],
        ),
        # A pass (and a failed smoke test, not this alert's business) stays silent.
        Case(
            {
                'gpu_platform_validation_passed{test="nccl-all-reduce", pool="kp-h100-od", '
                'instance_type="p5.48xlarge"}': "1x6",
                'gpu_platform_validation_passed{test="gpu-smoke", pool="kp-h100-od", '
                'instance_type="p5.48xlarge"}': "0x6",
                'kube_job_status_failed{namespace="gpu-validation", '
                'job_name="nccl-allreduce-kp-h100-od"}': "0x6",
            },
            "3m",
            [],
        ),
    ),
}


def promtool_tests(
    rule_file: str, severities: dict[str, str], extra: dict[str, str]
) -> dict[str, Any]:
    """The `promtool test rules` document: two tests (firing, silent) per alert."""
    tests = []
    for alert, (firing, silent) in sorted(CASES.items()):
        for case in (firing, silent):
            tests.append(
                {
                    "interval": "1m",
                    "input_series": [
                        {"series": series, "values": values}
                        for series, values in case.series.items()
                    ],
                    "alert_rule_test": [
                        {
                            "eval_time": case.eval_time,
                            "alertname": alert,
                            "exp_alerts": [
                                {"exp_labels": {**labels, "severity": severities[alert], **extra}}
                                for labels in case.expected
                            ],
                        }
                    ],
                }
            )
    return {"rule_files": [rule_file], "evaluation_interval": "1m", "tests": tests}
