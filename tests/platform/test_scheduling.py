"""Scheduling: pure builders (flavors, Kueue/Volcano/Trainer values), chart keys against the
upstream values.yaml, then the component as synthesized for dev and prod."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from components import catalog
from components import config as stack_config
from components.analysis import volcano as volcano_analysis
from components.analysis.capacity import gpu_capacity
from components.analysis.facts import build
from components.analysis.readiness import PodsReady
from components.analysis.volcano import VALIDATION_QUEUE
from components.platform.capacity.karpenter_builders import pool_labels
from components.platform.cluster.node_group_builders import gpu_group_labels
from components.platform.scheduling.scheduling import (
    KUEUE_API,
    PRIORITY_CLASSES,
    flavors,
    kueue_manager_config,
    kueue_values,
    resource_flavor_spec,
    trainer_values,
)
from components.platform.scheduling.volcano_builders import volcano_scheduler_conf, volcano_values
from synth.harness import SynthResult
from tests.conftest import SCHEMAS, STATIC_GPU_GROUPS, node_group_overrides, stack_values
from tests.helm_values import missing_keys

CRDS = SCHEMAS / "crds"
RELEASE = "kubernetes:helm.sh/v3:Release"
FLAVOR = f"kubernetes:{KUEUE_API}:ResourceFlavor"
CLUSTER_QUEUE = f"kubernetes:{KUEUE_API}:ClusterQueue"
LOCAL_QUEUE = f"kubernetes:{KUEUE_API}:LocalQueue"
WPC = f"kubernetes:{KUEUE_API}:WorkloadPriorityClass"
VOLCANO_QUEUE = "kubernetes:scheduling.volcano.sh/v1beta1:Queue"
PRIORITY_CLASS = "kubernetes:scheduling.k8s.io/v1:PriorityClass"
#: Free-form maps of these charts (keys below them are the user's, not the chart's).
SCHEDULING_OPEN = frozenset({"default_ns", "podAnnotations", "resources"})


def _config(stack: str) -> stack_config.StackConfig:
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in stack_values(stack).items()}
    return stack_config.parse(stack_config.namespace_values(raw))


# --- pure builders ------------------------------------------------------------------------------


def _static_prod() -> stack_config.StackConfig:
    values = {**stack_values("prod"), **node_group_overrides(STATIC_GPU_GROUPS)}
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return stack_config.parse(stack_config.namespace_values(raw))


def test_gpu_capacity_sums_static_groups_and_karpenter_limits_per_flavor() -> None:
    prod = _static_prod()
    # Groups the cluster-autoscaler resizes count the nodes they can reach (maxSize).
    managed: dict[tuple[str, str], int] = {}
    for g in prod.node_groups.gpu:
        key = (g.gpu_class, g.flavor_capacity_type)
        managed[key] = managed.get(key, 0) + g.max_size * g.gpus_per_node
    pools: dict[tuple[str, str], int] = {}
    for pool in prod.karpenter.pools:
        if pool.is_gpu:
            key = (pool.resolved_gpu_class, pool.capacity_type)
            pools[key] = pools.get(key, 0) + (pool.limits.gpus or 0)
    assert managed and pools
    expected = {k: managed.get(k, 0) + pools.get(k, 0) for k in {*managed, *pools}}
    assert gpu_capacity(prod) == expected
    # An autoscaled p5 group (desiredSize 1, maxSize 2) counts 16; the reservation 2 x 8.
    assert expected[("h100-x8", "on-demand")] == 16
    assert expected[("h100-x8", "reserved")] == 16
    assert gpu_capacity(_config("prod"))[("h100-x8", "on-demand")] == 16
    # Without the autoscaler a group counts only the nodes it holds (desiredSize).
    fixed = prod.model_copy(
        update={"cluster_autoscaler": prod.cluster_autoscaler.model_copy(update={"enabled": False})}
    )
    assert gpu_capacity(fixed)[("h100-x8", "on-demand")] == 8


def test_every_flavor_kueue_counts_can_come_into_existence(
    prod: SynthResult, dev: SynthResult
) -> None:
    # Defect 1: a flavor backed only by a group at desiredSize 0 that nothing resizes admitted
    # jobs that never ran. Every ResourceFlavor must match the node labels of a Karpenter
    # NodePool, of a managed group that holds nodes, or of one the cluster-autoscaler resizes;
    # and of one kind only (one provisioner per pod).
    for result in (prod, dev):
        releases = {r.inputs["name"] for r in result.of_type("kubernetes:helm.sh/v3:Release")}
        autoscaler = "cluster-autoscaler" in releases
        karpenter = [
            p.inputs["spec"]["template"]["metadata"]["labels"]
            for p in result.of_type("kubernetes:karpenter.sh/v1:NodePool")
        ]
        groups = [
            g.inputs["labels"]
            for g in result.of_type("eks:index:ManagedNodeGroup")
            if g.inputs["scalingConfig"]["desiredSize"] >= 1
            or (autoscaler and g.inputs["scalingConfig"]["maxSize"] >= 1)
        ]
        flavors_ = result.of_type(f"kubernetes:{KUEUE_API}:ResourceFlavor")
        assert flavors_
        for flavor in flavors_:
            wanted = flavor.inputs["spec"]["nodeLabels"]
            kinds = [
                any(wanted.items() <= labels.items() for labels in karpenter),
                any(wanted.items() <= labels.items() for labels in groups),
            ]
            assert kinds.count(True) == 1, wanted


def test_flavors_put_reserved_then_spot_then_on_demand_within_a_gpu_class() -> None:
    prod = flavors(build(_config("prod")))
    assert [(f.name, f.provisioner) for f in prod] == [
        ("h100-x8-reserved", "karpenter"),
        ("h100-x8-on-demand", "node-group"),
        ("l4-x1-spot", "karpenter"),
        ("l4-x1-on-demand", "karpenter"),
        ("l40s-x1-spot", "node-group"),
        ("l40s-x1-on-demand", "node-group"),
    ]
    # The autoscaled groups' flavors wait for the ProvisioningRequest check.
    assert [f.name for f in prod if f.provisioning_check] == [
        "h100-x8-on-demand",
        "l40s-x1-spot",
        "l40s-x1-on-demand",
    ]
    # l40s-x1 is placed by the network (Pulumi.prod.yaml scheduling.topology): all its flavors.
    assert [f.name for f in prod if f.topology] == ["l40s-x1-spot", "l40s-x1-on-demand"]
    assert [f.name for f in flavors(build(_config("dev")))] == [
        "a10g-x1-spot",
        "a10g-x1-on-demand",
        "l4-x1-spot",
    ]


def test_flavor_labels_and_toleration_are_the_node_groups_own() -> None:
    prod = _config("prod")
    assert flavors(build(prod))
    for flavor in flavors(build(prod)):
        spec = resource_flavor_spec(flavor)
        spot_group = flavor.provisioner == "node-group" and flavor.capacity_type == "spot"
        assert spec["tolerations"] == [catalog.gpu_toleration()] + (
            [catalog.spot_toleration()] if spot_group else []
        )
        groups = [
            g
            for g in prod.node_groups.gpu
            if spec["nodeLabels"].items() <= gpu_group_labels(g).items()
        ]
        pools = [
            p
            for p in prod.karpenter.pools
            if p.is_gpu and spec["nodeLabels"].items() <= pool_labels(p).items()
        ]
        assert groups or pools, f"flavor {flavor.name} matches no node group or NodePool"
        assert not (groups and pools), f"flavor {flavor.name} selects both provisioners"
        assert all(
            (g.gpu_class, g.flavor_capacity_type) == (flavor.gpu_class, flavor.capacity_type)
            for g in groups
        )
        assert all(
            (p.resolved_gpu_class, p.capacity_type) == (flavor.gpu_class, flavor.capacity_type)
            for p in pools
        )
    # Toleration matches the taint every GPU node carries.
    assert catalog.gpu_toleration()["key"] == catalog.gpu_taint()["key"]


#: waitForPodsReady figures as the facts would derive them (analysis/readiness.py).
READY = PodsReady(required_s=1085, longest=None, timeout="19m", recovery_timeout="19m")


def test_kueue_config_enables_integrations_and_wait_for_pods_ready() -> None:
    manager = kueue_manager_config(stack_config.SchedulingConfig(), READY)
    assert manager["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    assert set(manager["integrations"]["frameworks"]) == {
        "batch/job",
        "jobset.x-k8s.io/jobset",
        "trainer.kubeflow.org/trainjob",
    }
    ready = manager["waitForPodsReady"]
    assert (ready["timeout"], ready["recoveryTimeout"]) == ("19m", "19m")
    assert ready["requeuingStrategy"]["backoffLimitCount"] == 10
    assert ready["requeuingStrategy"]["backoffBaseSeconds"] == 60
    # Unlabelled (Volcano) jobs are left alone: one gang mechanism per job.
    assert manager["manageJobsWithoutQueueName"] is False
    text = kueue_values(stack_config.SchedulingConfig(), READY)["managerConfig"][
        "controllerManagerConfigYaml"
    ]
    assert yaml.safe_load(text) == manager


def test_volcano_scheduler_runs_gang_priority_predicates_and_binpack() -> None:
    values = volcano_values(stack_config.SchedulingConfig())
    conf = yaml.safe_load(values["custom"]["scheduler_config_override"])
    assert conf == volcano_scheduler_conf(True)
    assert [a.strip() for a in conf["actions"].split(",")] == ["enqueue", "allocate", "backfill"]
    plugins = {p["name"] for tier in conf["tiers"] for p in tier["plugins"]}
    assert {"gang", "priority", "predicates", "binpack", "proportion"} <= plugins


def test_volcano_enqueue_follows_the_config() -> None:
    config = stack_config.SchedulingConfig.model_validate({"volcanoEnqueue": False})
    conf = yaml.safe_load(volcano_values(config)["custom"]["scheduler_config_override"])
    assert [a.strip() for a in conf["actions"].split(",")] == ["allocate", "backfill"]


@pytest.mark.parametrize(
    ("chart", "values"),
    [
        ("kueue", kueue_values(stack_config.SchedulingConfig(), READY)),
        ("volcano", volcano_values(stack_config.SchedulingConfig())),
        ("kubeflow-trainer", trainer_values()),
    ],
)
def test_every_helm_value_key_exists_in_the_charts_values_yaml(
    chart: str, values: dict[str, Any]
) -> None:
    assert values
    assert missing_keys(chart, values, open_keys=SCHEDULING_OPEN) == []


def test_the_values_key_check_catches_an_unknown_key() -> None:
    unknown = {"controllerManager": {"manager": {"imagee": {"tag": "x"}}}}
    assert missing_keys("kueue", unknown) == [
        "controllerManager.manager.imagee",
        "controllerManager.manager.imagee.tag",
    ]


def test_priority_classes_choose_preemption_deliberately() -> None:
    by_name = {name: (value, policy) for name, value, policy, _ in PRIORITY_CLASSES}
    assert by_name["dev"][1] == "Never"
    assert by_name["production-training"][0] > by_name["research-training"][0] > by_name["dev"][0]
    assert by_name["platform-critical"][0] > by_name["production-training"][0]


# --- the component as synthesized ---------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_has_flavors_queues_priorities_and_the_training_operator(
    stack: str, dev: SynthResult, prod: SynthResult
) -> None:
    result = {"dev": dev, "prod": prod}[stack]
    cfg = _config(stack)
    teams = {team.name for team in cfg.teams}
    assert len(teams) >= 2
    assert len(result.of_type(FLAVOR)) >= 2
    queues = result.of_type(CLUSTER_QUEUE)
    assert {q.inputs["metadata"]["name"] for q in queues} == teams
    assert {q.inputs["spec"]["cohortName"] for q in queues} == {cfg.scheduling.cohort}
    local = result.of_type(LOCAL_QUEUE)
    assert {
        (q.inputs["metadata"]["namespace"], q.inputs["spec"]["clusterQueue"]) for q in local
    } == {(team.namespace, team.name) for team in cfg.teams}
    wpcs = {w.inputs["metadata"]["name"]: w.inputs["value"] for w in result.of_type(WPC)}
    assert set(wpcs) == {"production", "research", "dev"}
    assert wpcs["production"] > wpcs["research"] > wpcs["dev"]
    pcs = {p.inputs["metadata"]["name"] for p in result.of_type(PRIORITY_CLASS)}
    assert {"production-training", "research-training", "dev"} <= pcs
    volcano = {
        q.inputs["metadata"]["name"]: q.inputs["spec"] for q in result.of_type(VOLCANO_QUEUE)
    }
    # The team queues, and the NCCL test's own queue where validation runs one.
    assert set(volcano) - {VALIDATION_QUEUE} == teams
    assert (VALIDATION_QUEUE in volcano) == bool(
        volcano_analysis.validation_guarantee(cfg, build(cfg).nccl_host)
    )
    assert all(spec["weight"] >= 1 and spec["capability"] for spec in volcano.values())
    releases = {r.inputs["name"]: r.inputs for r in result.of_type(RELEASE)}
    assert releases["kueue"]["version"] == "0.19.2"
    assert releases["kueue"]["chart"] == "oci://registry.k8s.io/kueue/charts/kueue"
    assert releases["volcano"]["version"] == "1.15.1"
    assert releases["kubeflow-trainer"]["version"] == "2.3.0"
    assert releases["kubeflow-trainer"]["chart"] == "oci://ghcr.io/kubeflow/charts/kubeflow-trainer"


def test_flavor_and_queue_objects_wait_for_the_kueue_release(prod: SynthResult) -> None:
    (kueue,) = [r for r in prod.of_type(RELEASE) if r.inputs["name"] == "kueue"]
    for resource in [*prod.of_type(FLAVOR), *prod.of_type(CLUSTER_QUEUE), *prod.of_type(WPC)]:
        assert kueue.urn in resource.dependencies, resource.name


def test_no_mpijob_crd_or_mpi_operator_can_be_installed(
    prod: SynthResult, dev: SynthResult
) -> None:
    # Trainer v2 installs TrainJob/TrainingRuntime CRDs only; the mpijobs.kubeflow.org clash
    # (training-operator v1 vs mpi-operator v2beta1) needs one of those two, and neither is here.
    for result in (dev, prod):
        assert result.of_type(RELEASE)
        charts = {str(r.inputs.get("chart", "")) for r in result.of_type(RELEASE)}
        assert not any("mpi-operator" in c or "training-operator" in c for c in charts)
        for r in result.resources:
            name = str(r.inputs.get("metadata", {}).get("name", ""))
            assert name != "mpijobs.kubeflow.org"
            assert not r.type.endswith(":MPIJob")
    chart_crds = {p.name for p in (CRDS / "kubeflow-trainer").iterdir()}
    assert not any("mpijob" in name for name in chart_crds)


def test_controllers_run_on_system_nodes(prod: SynthResult) -> None:
    releases = {r.inputs["name"]: r.inputs.get("values", {}) for r in prod.of_type(RELEASE)}
    system = catalog.system_node_labels()
    assert releases["kueue"]["controllerManager"]["nodeSelector"] == system
    assert releases["volcano"]["custom"]["default_ns"] == system
    assert releases["kubeflow-trainer"]["manager"]["nodeSelector"] == system


def test_report_shows_quota_against_capacity_per_flavor(prod: SynthResult) -> None:
    from synth.report import report

    text = report(prod)
    assert "## Queues and quotas" in text
    assert "| h100-x8-on-demand | 16 | 16 | 100 % |" in text
    assert "| h100-x8-reserved | 16 | 16 | 100 % |" in text
    assert "| research | gpu-platform | 2 | l4-x1-spot | 12 | 4 | all |" in text
