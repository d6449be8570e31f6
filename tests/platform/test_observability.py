"""kube-prometheus-stack: release, values against upstream, storage, dashboards, ordering."""

from __future__ import annotations

import json

import pytest

from components import catalog
from components.analysis.nodes import tolerates
from components.config import ObservabilityConfig
from components.platform.observability import observability
from synth.harness import SynthResult
from tests.helm_values import missing_keys

RELEASE = "kubernetes:helm.sh/v3:Release"
#: Keys of subcharts (grafana, kube-state-metrics, prometheus-node-exporter) that the parent
#: values.yaml does not repeat; each is a documented key of that subchart's own values.yaml.
SUBCHART = frozenset(
    {
        "grafana.nodeSelector",
        "grafana.persistence",
        "grafana.persistence.enabled",
        "grafana.persistence.storageClassName",
        "grafana.persistence.size",
        "kube-state-metrics.nodeSelector",
        "kube-state-metrics.metricLabelsAllowlist",
        "prometheus-node-exporter.tolerations",
    }
)


def _kps(result: SynthResult) -> object:
    found = [r for r in result.of_type(RELEASE) if r.inputs.get("chart") == "kube-prometheus-stack"]
    assert len(found) == 1
    return found[0]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_release_retention_and_encrypted_storage(
    stack: str, request: pytest.FixtureRequest
) -> None:
    release = _kps(request.getfixturevalue(stack))
    inputs = release.inputs  # type: ignore[attr-defined]
    assert inputs["version"] == "88.5.3"
    spec = inputs["values"]["prometheus"]["prometheusSpec"]
    assert spec["retention"]
    claim = spec["storageSpec"]["volumeClaimTemplate"]["spec"]
    assert claim["storageClassName"] == "gp3"
    classes = [
        s
        for s in request.getfixturevalue(stack).of_type("kubernetes:storage.k8s.io/v1:StorageClass")
        if s.inputs["metadata"]["name"] == "gp3"
    ]
    assert classes and classes[0].inputs["parameters"]["encrypted"] == "true"
    assert inputs["values"]["alertmanager"]["alertmanagerSpec"]["storage"]


def test_values_keys_exist_upstream() -> None:
    missing = missing_keys(
        "kube-prometheus-stack", observability.chart_values(ObservabilityConfig())
    )
    assert set(missing) <= SUBCHART, missing


def test_rules_depend_on_the_release(dev: SynthResult) -> None:
    release = _kps(dev)
    rules = dev.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule")
    assert rules
    for rule in rules:
        assert release.urn in rule.dependencies  # type: ignore[attr-defined]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_dashboards_in_labelled_configmaps(stack: str, request: pytest.FixtureRequest) -> None:
    maps = [
        m
        for m in request.getfixturevalue(stack).of_type("kubernetes:core/v1:ConfigMap")
        if m.inputs["metadata"].get("labels", {}).get("grafana_dashboard") == "1"
    ]
    assert len(maps) == 2
    titles = set()
    for cm in maps:
        for text in cm.inputs["data"].values():
            board = json.loads(text)
            titles.add(board["title"])
            assert board["panels"]
    assert titles == {"GPU platform / Cluster GPU overview", "GPU platform / Training job"}


def test_job_dashboard_shows_trainer_and_gpu_metrics() -> None:
    board = observability.dashboards("gpu-validation")["gpu-training-job.json"]
    exprs = " ".join(t["expr"] for p in board["panels"] for t in p["targets"])
    for metric in (
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_XID_ERRORS",
        "trainer_step_duration_seconds",
        "trainer_tokens_per_second",
        "trainer_mfu_ratio",
    ):
        assert metric in exprs


def test_controllers_on_system_nodes_and_node_exporter_on_gpu_nodes() -> None:
    values = observability.chart_values(ObservabilityConfig())
    system = catalog.system_node_labels()
    assert values["prometheus"]["prometheusSpec"]["nodeSelector"] == system
    assert values["grafana"]["nodeSelector"] == system
    exporter = tuple(values["prometheus-node-exporter"]["tolerations"])
    assert tolerates(catalog.gpu_taint(), exporter) and tolerates(catalog.spot_taint(), exporter)


def test_the_validation_panel_reads_the_namespace_the_validation_jobs_run_in(
    dev: SynthResult,
) -> None:
    """`validation.namespace` moves the validation Jobs; the overview's "job failed" query
    follows it (it once named gpu-validation whatever the config said)."""
    moved = " ".join(observability.dashboard_exprs("gpu-checks"))
    assert 'kube_job_status_failed{namespace="gpu-checks"}' in moved
    assert "gpu-validation" not in moved
    assert dev.config is not None
    overview = next(
        m
        for m in dev.of_type("kubernetes:core/v1:ConfigMap")
        if "gpu-overview.json" in m.inputs.get("data", {})
    )
    namespace = dev.config.validation.namespace
    assert (
        f'kube_job_status_failed{{namespace=\\"{namespace}\\"}}'
        in (overview.inputs["data"]["gpu-overview.json"])
    )
