"""Pure builders of Volcano's Helm values: its scheduler pipeline and, with a GPU class placed
by the network (docs/topology.md), HyperNode discovery from EKS's network-node labels and the
network-topology-aware plugin. The Scheduling component (scheduling.py) installs the chart with
them."""

from __future__ import annotations

from typing import Any

import yaml

from components import catalog
from components.analysis import topology, volcano
from components.config import SchedulingConfig


def volcano_network_topology_plugin() -> dict[str, Any]:
    """Volcano's `network-topology-aware` plugin (volcano-sh/volcano@v1.15.1 pkg/scheduler/
    plugins/network-topology-aware/network_topology_aware.go L35-66; enabled in the second tier
    as docs/user-guide/how_to_use_network_topology_aware_scheduling.md L117-153 shows): a job's
    `networkTopology` (hard: within one HyperNode of a tier, soft: scored) and HyperNode-level
    bin packing on GPUs, which keeps whole blocks free for the next gang. Its default
    `hypernode.binpack.normal-pod.enable: true` packs pods without a topology by HyperNode too
    (the same aim as the `binpack` plugin above it)."""
    return {
        "name": "network-topology-aware",
        "arguments": {
            "weight": 10,
            "hypernode.binpack.resources": catalog.GPU_RESOURCE,
            f"hypernode.binpack.resources.{catalog.GPU_RESOURCE}": 10,
        },
    }


def volcano_controller_conf() -> dict[str, Any]:
    """Volcano's controller configuration (ConfigMap `<release>-controller-configmap`, key
    `volcano-controller.conf`: volcano-sh/volcano@v1.15.1 pkg/controllers/hypernode/
    configmap_handler.go L34-45, config/loader.go L33-40): HyperNodes discovered from the EKS
    network-node labels (the `label` discoverer, docs/user-guide/
    how_to_use_hypernode_auto_discovery.md L54-126). Tier 1 is layer-3, tier 4 the zone
    (components/analysis/topology.py VOLCANO_TIERS); a node without the labels (g5, g6, CPU)
    gets no HyperNode. A dict: the chart renders it with `toYaml`
    (installer/helm/chart/volcano/templates/controllers.yaml L264-268), and a string would
    become one YAML string the controller cannot read."""
    return {
        "networkTopologyDiscovery": [
            {
                "source": "label",
                "enabled": True,
                "config": {
                    "networkTopologyTypes": {
                        topology.VOLCANO_TOPOLOGY_TYPE: topology.volcano_levels()
                    }
                },
            }
        ]
    }


def volcano_scheduler_conf(enqueue: bool, network_topology: bool = False) -> dict[str, Any]:
    """Volcano's scheduler pipeline: enqueue only what fits its queue (a PodGroup gets pods
    once it is Inqueue; the team queues' guarantees let it in before its GPU nodes exist:
    components/analysis/volcano.py), allocate by priority within proportion-shared queues, pack
    GPU nodes tightly (binpack) so whole nodes stay free for the next multi-node job, backfill
    small pods into the gaps; with `network_topology` (a class placed by the network,
    docs/topology.md), gangs placed by HyperNode too."""
    return {
        "actions": volcano.scheduler_actions(enqueue),
        "tiers": [
            {
                "plugins": [
                    {"name": "priority"},
                    {"name": "gang", "enablePreemptable": False},
                    {"name": "conformance"},
                ]
            },
            {
                "plugins": [
                    {"name": "drf", "enablePreemptable": False},
                    {"name": "predicates"},
                    {"name": "proportion"},
                    {"name": "nodeorder"},
                    {
                        "name": "binpack",
                        "arguments": {
                            "binpack.weight": 10,
                            "binpack.resources": catalog.GPU_RESOURCE,
                            f"binpack.resources.{catalog.GPU_RESOURCE}": 10,
                        },
                    },
                    *([volcano_network_topology_plugin()] if network_topology else []),
                ]
            },
        ],
    }


def volcano_values(config: SchedulingConfig) -> dict[str, Any]:
    """Helm values of the Volcano chart: scheduler pipeline, controllers on system nodes; with
    a class placed by the network, HyperNode discovery and the network-topology plugin."""
    network = bool(config.topology.gpu_classes)
    custom: dict[str, Any] = {
        "scheduler_config_override": yaml.safe_dump(
            volcano_scheduler_conf(config.volcano_enqueue, network), sort_keys=False
        ),
        "leader_elect_enable": True,
        "default_ns": catalog.system_node_labels(),
    }
    if network:
        custom["controller_config_override"] = volcano_controller_conf()
    return {"basic": {"image_pull_policy": "IfNotPresent"}, "custom": custom}
