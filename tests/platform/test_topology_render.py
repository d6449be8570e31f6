"""What a class placed by the network renders (docs/topology.md): the Kueue Topology and the
flavors that name it, the annotation on every Kueue launcher's pod template, a Volcano Job's and
the NCCL test's `networkTopology`, and Volcano's HyperNode discovery and plugin — on a prod
variant with the L40S groups autoscaled and a fixed H100 group (tests/conftest.py
h100_static_values); every object checked against the vendored upstream schemas by the
validator the stacks use."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from components import catalog
from components.analysis import topology
from components.config import SchedulingConfig, TopologyConfig
from components.platform.scheduling.scheduling import topology_spec
from components.platform.scheduling.volcano_builders import (
    volcano_controller_conf,
    volcano_scheduler_conf,
    volcano_values,
)
from synth.harness import SynthResult, run_program
from synth.output import manifests
from synth.report import report as render
from synth.validate import default_validator
from tests.conftest import h100_static_values
from tests.helm_values import missing_keys

LAYER3 = catalog.network_node_label(3)
JOBS: list[dict[str, Any]] = [
    {
        "name": "block-native",
        "team": "research",
        "gpuClass": "h100-x8",
        "nodes": 2,
        "topology": {"mode": "required", "level": "layer-3"},
    },
    {"name": "zone-trainjob", "team": "research", "gpuClass": "h100-x8", "nodes": 2},
    {
        "name": "soft-volcano",
        "team": "research",
        "gpuClass": "l40s-x1",
        "capacity": "either",
        "nodes": 2,
        "launcher": "volcano",
        "scheduler": "volcano",
    },
    {"name": "one-l40s", "team": "research", "gpuClass": "l40s-x1", "capacity": "either"},
]
JOBS[1]["launcher"] = "kubeflow"


@pytest.fixture(scope="module")
def placed() -> SynthResult:
    values = copy.deepcopy(h100_static_values())
    values["gpu-platform:trainingJobs"] = JOBS
    values["gpu-platform:validation"] = {**values["gpu-platform:validation"], "enabled": True}
    return run_program("prod", overrides=values)


def _objects(result: SynthResult, kind: str) -> Iterator[dict[str, Any]]:
    return (o for o in manifests(result) if o.get("kind") == kind)


def _named(result: SynthResult, kind: str, name: str) -> dict[str, Any]:
    return next(o for o in _objects(result, kind) if o["metadata"]["name"] == name)


def test_each_class_placed_by_the_network_has_its_topology(placed: SynthResult) -> None:
    rendered = {o["metadata"]["name"]: o for o in _objects(placed, "Topology")}
    assert set(rendered) == {"h100-x8", "l40s-x1"}
    levels = [lvl["nodeLabel"] for lvl in rendered["h100-x8"]["spec"]["levels"]]
    assert levels == [
        "topology.kubernetes.io/zone",
        "topology.k8s.aws/network-node-layer-1",
        "topology.k8s.aws/network-node-layer-2",
        "topology.k8s.aws/network-node-layer-3",
        "kubernetes.io/hostname",
    ]
    assert rendered["h100-x8"]["apiVersion"] == "kueue.x-k8s.io/v1beta2"


def test_every_flavor_of_such_a_class_and_no_other_names_it(placed: SynthResult) -> None:
    for flavor in _objects(placed, "ResourceFlavor"):
        gpu_class = flavor["spec"]["nodeLabels"][catalog.LABEL_GPU_CLASS]
        want = gpu_class if gpu_class in ("h100-x8", "l40s-x1") else None
        assert flavor["spec"].get("topologyName") == want, flavor["metadata"]["name"]


def test_every_kueue_launcher_carries_one_topology_annotation(placed: SynthResult) -> None:
    native = _named(placed, "Job", "block-native")
    assert {
        k: v
        for k, v in native["spec"]["template"]["metadata"]["annotations"].items()
        if k in topology.KUEUE_ANNOTATIONS
    } == {topology.KUEUE_REQUIRED: "topology.k8s.aws/network-node-layer-3"}
    trainjob = _named(placed, "TrainJob", "zone-trainjob")
    patch = trainjob["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]
    template = patch["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    # An EFA gang on a one-zone group (the placement group's): one block first, the default,
    # in the runtime patch's pod metadata.
    assert template["metadata"]["annotations"][topology.KUEUE_PREFERRED] == LAYER3
    single = _named(placed, "Job", "one-l40s")
    assert single["spec"]["template"]["metadata"]["annotations"][topology.KUEUE_UNCONSTRAINED] == (
        "true"
    )


def test_volcano_jobs_and_the_nccl_test_carry_a_network_topology(placed: SynthResult) -> None:
    vcjob = next(o for o in _objects(placed, "Job") if o["metadata"]["name"] == "soft-volcano")
    assert vcjob["spec"]["networkTopology"] == {"mode": "soft"}
    annotations = vcjob["spec"]["tasks"][0]["template"]["metadata"]["annotations"]
    assert not set(annotations) & set(topology.KUEUE_ANNOTATIONS)
    group = next(iter(_objects(placed, "PodGroup")))
    assert group["spec"]["networkTopology"] == {"mode": "soft"}


def test_jobs_of_other_classes_carry_nothing(placed: SynthResult) -> None:
    for job in _objects(placed, "Job"):
        if job["apiVersion"] != "batch/v1" or job["metadata"]["name"] in (
            "block-native",
            "one-l40s",
        ):
            continue
        annotations = job["spec"]["template"]["metadata"].get("annotations") or {}
        assert not set(annotations) & set(topology.KUEUE_ANNOTATIONS), job["metadata"]["name"]


def test_the_rendered_objects_meet_the_upstream_schemas(placed: SynthResult) -> None:
    kinds = {"Topology", "ResourceFlavor", "Job", "TrainJob", "PodGroup"}
    found = [
        (o["kind"], o["metadata"]["name"], p.path, p.message)
        for o in manifests(placed)
        if o.get("kind") in kinds
        for p in default_validator().validate(o)
    ]
    assert found == [], found


def test_the_report_says_what_each_gang_asks_and_who_honours_it(placed: SynthResult) -> None:
    report = render(placed)
    assert "## Network topology" in report
    assert "Topology `h100-x8`" in report
    assert "`ng-h100-static` (static) yes" in report
    assert "PLANNING, UNVERIFIED" in report
    assert "l4-x1" in report and "g6 nodes carry no network-node labels" in report


# --- pure builders ----------------------------------------------------------------------------


def test_topology_spec_names_the_level_labels() -> None:
    assert topology_spec(("zone", "layer-1", "hostname")) == {
        "levels": [
            {"nodeLabel": catalog.ZONE_LABEL},
            {"nodeLabel": "topology.k8s.aws/network-node-layer-1"},
            {"nodeLabel": "kubernetes.io/hostname"},
        ]
    }


def test_volcano_discovers_hypernodes_only_with_a_class_placed_by_the_network() -> None:
    off = volcano_values(SchedulingConfig())
    assert "controller_config_override" not in off["custom"]
    plugins = [p["name"] for t in volcano_scheduler_conf(True)["tiers"] for p in t["plugins"]]
    assert "network-topology-aware" not in plugins
    on = volcano_values(SchedulingConfig(topology=TopologyConfig(gpu_classes=["l40s-x1"])))
    conf = yaml.safe_load(on["custom"]["scheduler_config_override"])
    assert "network-topology-aware" in [p["name"] for t in conf["tiers"] for p in t["plugins"]]
    assert (
        missing_keys(
            "volcano", on, open_keys=frozenset({"default_ns", "controller_config_override"})
        )
        == []
    )


def test_the_controller_conf_is_a_map_the_chart_renders_as_yaml() -> None:
    conf = volcano_controller_conf()
    # The chart writes `toYaml` of the value under `volcano-controller.conf: |`: a map, so the
    # file holds the map itself (a string would be one YAML string the controller cannot read).
    rendered = yaml.safe_dump(conf)
    assert yaml.safe_load(rendered) == conf
    label = conf["networkTopologyDiscovery"][0]
    assert label["source"] == "label" and label["enabled"] is True
    levels = label["config"]["networkTopologyTypes"][topology.VOLCANO_TOPOLOGY_TYPE]
    assert [lvl["nodeLabel"] for lvl in levels] == [
        catalog.ZONE_LABEL,
        "topology.k8s.aws/network-node-layer-1",
        "topology.k8s.aws/network-node-layer-2",
        "topology.k8s.aws/network-node-layer-3",
        "kubernetes.io/hostname",
    ]
    assert len(topology.VOLCANO_TOPOLOGY_TYPE) <= 20
