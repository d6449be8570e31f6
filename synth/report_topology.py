"""The report's "Network topology" section: per GPU class of the stack, whether its nodes carry
EKS's network-node labels, whether it is placed by them (its Kueue Topology and flavors, Volcano's
HyperNode discovery), and why not where it is not (components/analysis/topology.py,
docs/topology.md). Each job's own request is in "Will it run"."""

from __future__ import annotations

from components import catalog
from components.analysis import topology
from synth.harness import SynthResult


def network_topology(result: SynthResult) -> str:
    facts = result.facts
    if result.fleet is not None:
        return (
            "A fleet's manager has no nodes: its flavors carry no Topology, and no fleet worker "
            'may place a class by the network (docs/topology.md, "Fleets").'
        )
    if facts is None:
        return "No config captured."
    cfg = facts.cfg
    classes = sorted({s.gpu_class for s in facts.sources})
    if not classes:
        return "No GPU class: nothing to place."
    rows = [
        "| GPU class | instance types | network-node layers | placed by the network |",
        "|---|---|---|---|",
    ]
    for gpu_class in classes:
        types = topology.class_instance_types(cfg, gpu_class)
        layers = topology.class_layers(cfg, gpu_class)
        levels = facts.topologies.get(gpu_class)
        if levels is not None:
            flavors = sorted(
                catalog.gpu_flavor_name(c, t) for c, t in facts.capacity if c == gpu_class
            )
            placed = f"yes: Topology `{gpu_class}` ({' > '.join(levels)}) on flavors " + ", ".join(
                f"`{f}`" for f in flavors
            )
        else:
            why = topology.why_not_eligible(cfg, gpu_class) or (
                "not in scheduling.topology.gpuClasses"
            )
            placed = f"no: {why}; today's placement (one zone for EFA gangs, one placement group)"
        rows.append(f"| `{gpu_class}` | {', '.join(types)} | {layers or '-'} | {placed} |")
    volcano = (
        "Volcano discovers HyperNodes from the same labels (type "
        f"`{topology.VOLCANO_TOPOLOGY_TYPE}`: tier 1 layer-3 ... tier 4 zone) and runs its "
        "network-topology-aware plugin."
        if facts.topologies
        else "Volcano: no HyperNode discovery (no class is placed by the network)."
    )
    return (
        "\n".join(rows)
        + "\n\nEKS labels each node of a supported type with its place in the EC2 network "
        "(`topology.k8s.aws/network-node-layer-N`, layer 1 the top) when it initializes it. "
        f"{volcano} What each job asks for, which of its sources can honour it and what happens "
        'when no block has room: "Will it run", line `network`. Per-layer bandwidth: AWS '
        "publishes none (docs/topology.md)."
    )
