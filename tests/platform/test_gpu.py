"""GPU Operator: release, upstream values keys, operand placement, DCGM scraping, time-slicing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import addons, catalog
from components.analysis.nodes import tolerates
from components.config import GpuOperatorConfig
from components.platform.capacity import gpu
from synth import __main__ as synth_cli
from synth.harness import SynthResult
from tests.conftest import KP_L40S_OD, STATIC_GPU_GROUPS, stack_values, without_topology
from tests.helm_values import missing_keys

RELEASE = "kubernetes:helm.sh/v3:Release"
#: Keys the gpu-operator chart documents in comments only (dcgmExporter.config example) and
#: keys of its node-feature-discovery subchart that the parent values.yaml does not repeat.
DOCUMENTED = frozenset({("dcgmExporter", "config"), ("dcgmExporter", "config", "name")})
SUBCHART_NFD = frozenset(
    {
        ("node-feature-discovery", "worker", "nodeSelector"),
        ("node-feature-discovery", "master", "nodeSelector"),
        ("node-feature-discovery", "gc", "nodeSelector"),
    }
)


def _operator(result: SynthResult) -> Any:
    releases = [r for r in result.of_type(RELEASE) if r.inputs.get("chart") == "gpu-operator"]
    assert len(releases) == 1
    return releases[0]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_release_pinned_with_driver_and_toolkit_off(
    stack: str, request: pytest.FixtureRequest
) -> None:
    release = _operator(request.getfixturevalue(stack))
    assert release.inputs["version"] == "v26.7.0"
    assert release.inputs["repositoryOpts"]["repo"] == "https://helm.ngc.nvidia.com/nvidia"
    values = release.inputs["values"]
    assert values["driver"]["enabled"] is False
    assert values["toolkit"]["enabled"] is False
    assert values["devicePlugin"]["enabled"] is True
    assert values["gfd"]["enabled"] is True
    assert values["dcgmExporter"]["enabled"] is True


def test_values_keys_exist_upstream() -> None:
    for config in (GpuOperatorConfig(), GpuOperatorConfig(migStrategy="mixed")):
        values = gpu.chart_values(config)
        missing = missing_keys("gpu-operator", values, DOCUMENTED)
        assert set(missing) <= {".".join(p) for p in SUBCHART_NFD}, missing


def test_operands_tolerate_the_gpu_taint_and_controllers_sit_on_system_nodes() -> None:
    values = gpu.chart_values(GpuOperatorConfig())
    taint = catalog.gpu_taint()
    tolerations = values["daemonsets"]["tolerations"]
    # Every taint a GPU node can carry: the GPU taint, a spot group's spot taint, its own.
    for other in (
        taint,
        catalog.spot_taint(),
        {"key": "team", "value": "a", "effect": "NoExecute"},
    ):
        assert tolerates(other, tuple(tolerations))
    assert values["operator"]["nodeSelector"] == catalog.system_node_labels()
    worker = values["node-feature-discovery"]["worker"]
    assert worker["nodeSelector"] == {catalog.LABEL_GPU_VENDOR: "nvidia"}
    assert tolerates(catalog.spot_taint(), tuple(worker["tolerations"]))
    assert tolerates(catalog.gpu_taint(), tuple(worker["tolerations"]))


def test_dcgm_service_monitor_after_crds(dev: SynthResult) -> None:
    monitors = dev.of_type("kubernetes:monitoring.coreos.com/v1:ServiceMonitor")
    assert monitors
    dcgm = [m for m in monitors if m.inputs["metadata"]["name"] == "nvidia-dcgm-exporter"]
    assert len(dcgm) == 1
    endpoint = dcgm[0].inputs["spec"]["endpoints"][0]
    assert endpoint["interval"] in {"15s", "20s", "30s"}
    assert endpoint["honorLabels"] is True
    kps = [r for r in dev.of_type(RELEASE) if r.inputs.get("chart") == "kube-prometheus-stack"]
    assert kps and kps[0].urn in dcgm[0].dependencies


def test_curated_metrics_configmap(dev: SynthResult) -> None:
    maps = [
        m
        for m in dev.of_type("kubernetes:core/v1:ConfigMap")
        if m.inputs["metadata"]["name"] == gpu.DCGM_METRICS_CONFIGMAP
    ]
    assert len(maps) == 1
    csv = maps[0].inputs["data"]["dcgm-metrics.csv"]
    for field in (
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_NVLINK_TX_BYTES",
    ):
        assert field in csv
    assert (
        _operator(dev).inputs["values"]["dcgmExporter"]["config"]["name"]
        == gpu.DCGM_METRICS_CONFIGMAP
    )


def test_time_slicing_config() -> None:
    config = GpuOperatorConfig(timeSlicing={"pools": ["dev-shared"], "replicas": 4})
    configs = {k: yaml.safe_load(v) for k, v in gpu.device_plugin_configs(config).items()}
    sliced = configs[gpu.TIME_SLICED_PLUGIN_CONFIG]["sharing"]["timeSlicing"]["resources"][0]
    assert sliced == {"name": catalog.GPU_RESOURCE, "replicas": 4}
    assert gpu.time_slicing_node_labels(config) == {
        "dev-shared": {catalog.DEVICE_PLUGIN_CONFIG_LABEL: gpu.TIME_SLICED_PLUGIN_CONFIG}
    }
    assert gpu.TIME_SLICED_PLUGIN_CONFIG not in gpu.device_plugin_configs(GpuOperatorConfig())


def _run(
    make_stack: Callable[[dict[str, Any]], Path], cfg: dict[str, Any], capsys: Any
) -> tuple[int, str, Path]:
    project = make_stack(cfg)
    out = project / "out"
    code = synth_cli.main(["--stack", "t", "--project-dir", str(project), "--out", str(out)])
    return code, capsys.readouterr().err, out


def test_time_slicing_refused_on_training_pool(
    make_stack: Callable[[dict[str, Any]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = stack_values("prod")
    cfg["gpu-platform:nodeGroups"]["gpu"] = STATIC_GPU_GROUPS
    cfg["gpu-platform:gpuOperator"] = {"timeSlicing": {"pools": ["h100-od", "nope"]}}
    code, err, _out = _run(make_stack, cfg, capsys)
    assert code == 2
    assert "gpu-platform:gpuOperator.timeSlicing.pools[0]" in err
    assert "not training" in err
    assert "gpu-platform:gpuOperator.timeSlicing.pools[1]" in err


def test_time_slicing_labels_a_general_pool(
    make_stack: Callable[[dict[str, Any]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = stack_values("dev")
    cfg["gpu-platform:nodeGroups"]["gpu"] = [
        *cfg["gpu-platform:nodeGroups"]["gpu"],
        {
            "name": "l40s-od",
            "capacityType": "on-demand",
            "instanceTypes": ["g6e.xlarge"],
            "maxSize": 1,
            "workloadType": "general",
            "unqueuedReason": "time-sliced L40S for notebooks, outside the teams' queues",
        },
    ]
    cfg["gpu-platform:gpuOperator"] = {"timeSlicing": {"pools": ["l40s-od"], "replicas": 4}}
    code, err, out = _run(make_stack, cfg, capsys)
    assert code == 0, err
    resources = json.loads((out / "resources.json").read_text())
    groups = [r for r in resources if r["type"] == "eks:index:ManagedNodeGroup"]
    assert groups
    labelled = {
        r["inputs"]["labels"][catalog.LABEL_NODE_POOL]
        for r in groups
        if r["inputs"]["labels"].get(catalog.DEVICE_PLUGIN_CONFIG_LABEL)
        == gpu.TIME_SLICED_PLUGIN_CONFIG
    }
    assert labelled == {"l40s-od"}


def test_mig_strategy_needs_mig_capable_gpus(
    make_stack: Callable[[dict[str, Any]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = stack_values("dev")
    cfg["gpu-platform:gpuOperator"] = {"migStrategy": "mixed"}
    code, err, _out = _run(make_stack, cfg, capsys)
    assert code == 2
    assert "gpu-platform:gpuOperator.migStrategy" in err


def test_mig_counts_karpenter_pools_too() -> None:
    # H100s only in Karpenter pools (no GPU managed group): MIG must still be allowed.
    values = stack_values("prod")
    values["gpu-platform:nodeGroups"]["gpu"] = []
    values["gpu-platform:karpenter"]["pools"].append(
        {
            "name": "kp-h100-od",
            "gpuClass": "h100-x8",
            "capacityType": "on-demand",
            "limits": {"gpus": 16},
        }
    )
    values["gpu-platform:karpenter"]["pools"].append(
        {
            "name": "kp-l40s-spot",
            "gpuClass": "l40s-x1",
            "capacityType": "spot",
            "limits": {"gpus": 16},
        }
    )
    values["gpu-platform:karpenter"]["pools"].append(dict(KP_L40S_OD))
    values["gpu-platform:validation"]["nccl"]["pool"] = "kp-h100-od"
    values["gpu-platform:gpuOperator"] = {"migStrategy": "mixed"}
    values.update(without_topology(values))
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    from components import config as stack_config

    parsed = stack_config.parse(stack_config.namespace_values(raw))
    assert parsed.gpu_operator.mig_strategy == "mixed"


# --- EFA device plugin ------------------------------------------------------------------------

EFA_VALUES = Path(__file__).parents[2] / "schemas/charts/aws-efa-k8s-device-plugin/values.yaml"


def _efa_release(result: SynthResult) -> Any:
    (release,) = [
        r
        for r in result.of_type("kubernetes:helm.sh/v3:Release")
        if r.inputs["name"] == addons.EFA_DEVICE_PLUGIN.release
    ]
    return release


def test_efa_device_plugin_runs_on_the_stacks_efa_types_and_tolerates_the_gpu_taint(
    prod: SynthResult,
) -> None:
    release = _efa_release(prod)
    assert release.inputs["version"] == "v0.5.30"
    assert release.inputs["repositoryOpts"]["repo"] == "https://aws.github.io/eks-charts"
    values = release.inputs["values"]
    # The chart's only built-in toleration is CriticalAddonsOnly: without ours it never lands.
    assert tolerates(catalog.gpu_taint(), tuple(values["tolerations"]))
    assert tolerates(catalog.spot_taint(), tuple(values["tolerations"]))
    types = values["supportedInstanceLabels"]["values"]
    assert "p5.48xlarge" in types
    assert all(catalog.instance(t).efa_devices > 0 for t in types)
    # g6.xlarge (no EFA) is in prod's L4 pools but not in the list.
    assert "g6.xlarge" not in types
    # The chart's own image (pinned by the chart version): no unverified registry rewrite.
    assert "image" not in values


def test_efa_values_keys_exist_in_the_vendored_chart(prod: SynthResult) -> None:
    upstream = yaml.safe_load(EFA_VALUES.read_text())
    values = _efa_release(prod).inputs["values"]

    def paths(tree: dict[str, Any], prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
        out = []
        for key, value in tree.items():
            out.append((*prefix, key))
            if isinstance(value, dict) and key not in {"nodeSelector", "tolerations"}:
                out += paths(value, (*prefix, key))
        return out

    assert paths(values)
    for path in paths(values):
        node: Any = upstream
        for part in path:
            assert isinstance(node, dict) and part in node, ".".join(path)
            node = node[part]
    # Every catalog EFA type is one the chart knows (its list is upstream's EFA table).
    supported = set(upstream["supportedInstanceLabels"]["values"])
    assert set(catalog.efa_instance_types()) <= supported


def test_stack_efa_types_are_the_catalog_efa_types_its_pools_launch() -> None:
    from components.platform.capacity.gpu import stack_efa_instance_types
    from tests.platform.test_scheduling import _config

    cfg = _config("dev")
    # dev's a10g-x1 spot pool includes g5.8xlarge/g5.16xlarge (1 EFA device each).
    assert stack_efa_instance_types(cfg) == ["g5.16xlarge", "g5.8xlarge"]
