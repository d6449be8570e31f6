"""Topology slice: which GPU classes are placed by EKS's network-node labels, and how a job (or
the NCCL test) asks for a network block (docs/topology.md).

EKS labels every node of a supported instance type with its place in the EC2 network hierarchy
(`topology.k8s.aws/network-node-layer-1..3`, a 4th on some types; components/catalog.py
NETWORK_NODE_LAYERS). Kueue's Topology Aware Scheduling (kubernetes-sigs/kueue@v0.19.2, beta and
on by default) and Volcano's network-topology-aware plugin (volcano-sh/volcano@v1.15.1) place a
gang by them. Whether a class can opt in, and which requests can ever be met, needs facts of
several areas: components/analysis/topology.py judges them.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

from pydantic import model_validator

from components.config.base import Model, Problem, problems_error

#: A level of the platform's Topologies, top-down: the zone, the EC2 network-node layers, the
#: node. Each names a node label (components/analysis/topology.py LEVEL_LABELS).
TopologyLevel = Literal["zone", "layer-1", "layer-2", "layer-3", "layer-4", "hostname"]
TOPOLOGY_LEVELS: Final[tuple[TopologyLevel, ...]] = get_args(TopologyLevel)
#: How a gang asks for its block: all pods inside one domain of the level (`required`, or the
#: gang waits), inside one as far as possible, relaxed level by level upwards (`preferred`), or
#: anywhere there is room (`unconstrained`).
TopologyMode = Literal["required", "preferred", "unconstrained"]


class TopologyConfig(Model):
    """`scheduling.topology`: the GPU classes whose Kueue ResourceFlavors get a Topology (and
    whose Volcano jobs get a network topology). Empty: nothing is rendered, placement stays
    "one zone and one cluster placement group" for every class."""

    #: GPU classes (`h100-x8`) to place by the network-node labels. Each must be served by
    #: managed node groups only, of instance types EC2 gives a topology (analysis/topology.py
    #: says why and refuses the rest).
    gpu_classes: list[str] = []

    @model_validator(mode="after")
    def _check(self) -> TopologyConfig:
        seen: dict[str, int] = {}
        problems: list[Problem] = []
        for index, gpu_class in enumerate(self.gpu_classes):
            if gpu_class in seen:
                problems.append(
                    Problem(
                        f"gpuClasses[{index}]",
                        gpu_class,
                        f"each class once (gpuClasses[{seen[gpu_class]}] names it)",
                    )
                )
            seen.setdefault(gpu_class, index)
        if problems:
            raise problems_error(problems)
        return self


class TopologyRequest(Model):
    """What a gang asks of the network: `trainingJobs[].topology`, `validation.nccl.topology`.
    Unset, the platform chooses from the job's size and EFA use (analysis/topology.py
    default_request, docs/topology.md "Defaults")."""

    mode: TopologyMode
    #: The level whose one domain holds the gang (required) or is tried first (preferred);
    #: none for `unconstrained`.
    level: TopologyLevel | None = None

    @model_validator(mode="after")
    def _check(self) -> TopologyRequest:
        if self.mode == "unconstrained" and self.level is not None:
            raise problems_error(
                [Problem("level", self.level, "left out: an unconstrained gang names no level")]
            )
        if self.mode != "unconstrained" and self.level is None:
            raise problems_error(
                [
                    Problem(
                        "level",
                        None,
                        f"a level ({', '.join(TOPOLOGY_LEVELS)}) for mode {self.mode}",
                    )
                ]
            )
        return self
