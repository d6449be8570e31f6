"""Violating and compliant cases of the topology rules (policies/rules/topology.py): a level the
class's nodes lack, a level finer than the gang, two annotations, a Volcano network topology on
unlabelled nodes; a Topology level its classes lack, a flavor naming no rendered Topology or
selecting Karpenter nodes, a class half placed by the network. Flavors and Topologies come from
the Scheduling component's own builders."""

from __future__ import annotations

from typing import Any

from components import catalog
from components.analysis import topology
from components.platform.scheduling.scheduling import Flavor, resource_flavor_spec, topology_spec
from tests.policies.policy_cases import Case, Res, r

LEVEL = "gpu-platform-training-topology-level-exists"
CONSISTENT = "gpu-platform-kueue-topology-consistent"
KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
LAYER3 = catalog.network_node_label(3)
LAYER4 = catalog.network_node_label(4)


def _affinity(gpu_class: str) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {
                                "key": catalog.LABEL_GPU_CLASS,
                                "operator": "In",
                                "values": [gpu_class],
                            }
                        ]
                    }
                ]
            }
        }
    }


def _template(gpu_class: str, annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "metadata": {"annotations": annotations},
        "spec": {
            "affinity": _affinity(gpu_class),
            "containers": [{"name": "node", "resources": {"limits": {catalog.GPU_RESOURCE: 8}}}],
        },
    }


def _job(gpu_class: str, pods: int, **annotations: str) -> Res:
    return r(
        "kubernetes:batch/v1:Job",
        "gang",
        {
            "metadata": {"name": "gang", "namespace": "team-research"},
            "spec": {"parallelism": pods, "template": _template(gpu_class, annotations)},
        },
    )


def _trainjob(gpu_class: str, **annotations: str) -> Res:
    patch = {
        "replicatedJobs": [
            {"name": "node", "template": {"spec": {"template": _template(gpu_class, annotations)}}}
        ]
    }
    return r(
        "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",
        "gang",
        {
            "metadata": {"name": "gang", "namespace": "team-research"},
            "spec": {
                "trainer": {"numNodes": 2},
                "runtimePatches": [
                    {
                        "manager": "gpu-platform.io/training",
                        "trainingRuntimeSpec": {"template": {"spec": patch}},
                    }
                ],
            },
        },
    )


def _vcjob(gpu_class: str, network: dict[str, Any]) -> Res:
    return r(
        "kubernetes:batch.volcano.sh/v1alpha1:Job",
        "gang",
        {
            "metadata": {"name": "gang", "namespace": "team-research"},
            "spec": {
                "networkTopology": network,
                "minAvailable": 2,
                "tasks": [{"name": "node", "replicas": 2, "template": _template(gpu_class, {})}],
            },
        },
    )


def _flavor(
    gpu_class: str,
    capacity: catalog.CapacityType,
    topology_name: str | None,
    provisioner: catalog.Provisioner = "node-group",
) -> Res:
    flavor = Flavor(gpu_class, capacity, 8, provisioner=provisioner, topology=topology_name)
    return r(
        f"{KUEUE}:ResourceFlavor",
        flavor.name,
        {"metadata": {"name": flavor.name}, "spec": resource_flavor_spec(flavor)},
    )


def _topology(name: str, layers: int) -> Res:
    return r(
        f"{KUEUE}:Topology",
        f"topology-{name}",
        {"metadata": {"name": name}, "spec": topology_spec(topology.levels_of(layers))},
    )


REQ = topology.KUEUE_REQUIRED
PREF = topology.KUEUE_PREFERRED
UNC = topology.KUEUE_UNCONSTRAINED

TOPOLOGY_CASES: list[Case] = [
    (LEVEL, "layer-4 on a 3-layer class (p5)", [_job("h100-x8", 2, **{REQ: LAYER4})], {}, True),
    (LEVEL, "layer-3 on a 3-layer class (p5)", [_job("h100-x8", 2, **{REQ: LAYER3})], {}, False),
    (
        LEVEL,
        "layer-4 on the 4-layer class (p6-b200)",
        [_job("b200-x8", 2, **{PREF: LAYER4})],
        {},
        False,
    ),
    (
        LEVEL,
        "a network layer on a class without labels (g6)",
        [_job("l4-x1", 2, **{PREF: LAYER3})],
        {},
        True,
    ),
    (
        LEVEL,
        "a required hostname for a 2-pod gang",
        [_job("h100-x8", 2, **{REQ: catalog.HOSTNAME_LABEL})],
        {},
        True,
    ),
    (
        LEVEL,
        "a required hostname for one pod",
        [_job("h100-x8", 1, **{REQ: catalog.HOSTNAME_LABEL})],
        {},
        False,
    ),
    (
        LEVEL,
        "two topology annotations",
        [_job("h100-x8", 2, **{REQ: catalog.ZONE_LABEL, UNC: "true"})],
        {},
        True,
    ),
    (
        LEVEL,
        "a TrainJob's runtime patch asking for layer-4 on p5",
        [_trainjob("h100-x8", **{REQ: LAYER4})],
        {},
        True,
    ),
    (
        LEVEL,
        "a TrainJob's runtime patch asking for the zone",
        [_trainjob("h100-x8", **{REQ: catalog.ZONE_LABEL})],
        {},
        False,
    ),
    (
        LEVEL,
        "Volcano hard on unlabelled g6 nodes",
        [_vcjob("l4-x1", {"mode": "hard", "highestTierAllowed": 1})],
        {},
        True,
    ),
    (LEVEL, "Volcano soft on labelled g6e nodes", [_vcjob("l40s-x1", {"mode": "soft"})], {}, False),
    (
        CONSISTENT,
        "every l40s-x1 flavor names its rendered 3-layer Topology",
        [
            _topology("l40s-x1", 3),
            _flavor("l40s-x1", "spot", "l40s-x1"),
            _flavor("l40s-x1", "on-demand", "l40s-x1"),
            _flavor("l4-x1", "spot", None, "karpenter"),
        ],
        {},
        False,
    ),
    (
        CONSISTENT,
        "a layer-4 Topology for p5 flavors",
        [_topology("h100-x8", 4), _flavor("h100-x8", "on-demand", "h100-x8")],
        {},
        True,
    ),
    (
        CONSISTENT,
        "a flavor naming a Topology the stack does not render",
        [_flavor("l40s-x1", "on-demand", "l40s-x1")],
        {},
        True,
    ),
    (
        CONSISTENT,
        "a Topology flavor of Karpenter nodes",
        [_topology("l40s-x1", 3), _flavor("l40s-x1", "on-demand", "l40s-x1", "karpenter")],
        {},
        True,
    ),
    (
        CONSISTENT,
        "a class with one Topology flavor and one without",
        [
            _topology("l40s-x1", 3),
            _flavor("l40s-x1", "spot", "l40s-x1"),
            _flavor("l40s-x1", "on-demand", None),
        ],
        {},
        True,
    ),
]
