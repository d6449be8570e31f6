"""Can a gang's network request be met by the way its nodes appear (components/analysis/
topology.py resolves the request; docs/topology.md is the prose): which of its node sources can
honour it and how, what happens when no block has room, the expected effect of the level, and
the requests that can never be met — each a `Problem` naming its key.

- Static managed groups: nodes exist before the gang, every mode works (a `required` gang
  waits until one domain holds it).
- Autoscaled groups: Kueue assigns the topology in a second pass after the
  ProvisioningRequest's scale-up, on nodes the autoscaler placed blind to the hierarchy
  (topology.py cites the lines): `preferred` and `unconstrained` work, `required` only at the
  zone of a one-zone group. Volcano's pods wait as pending pods: provisioners react, blindly.
- Karpenter: never under a Topology flavor (topology.check_topology_classes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from components import catalog
from components.analysis.nodes import NodeSource
from components.analysis.topology import VOLCANO_TIERS, JobTopology, one_zone_flavors
from components.config import Problem, TopologyLevel, TopologyRequest

Honour = Literal["yes", "best effort", "no"]


@dataclass(frozen=True)
class SourceHonour:
    """Whether one node source the gang may land on can honour its request, and how."""

    source: str
    scaler: str
    honours: Honour
    how: str


def source_honour(request: JobTopology, source: NodeSource, *, volcano: bool) -> SourceHonour:
    """How `source`'s way of bringing nodes meets `request` (module docstring)."""
    mode, level = request.mode, request.level
    if source.scaler == "static":
        how = "its nodes exist before the gang: " + (
            f"the gang waits until one {level} domain has room for all of it"
            if mode == "required"
            else "placed on the closest free nodes"
        )
        return SourceHonour(source.name, source.scaler, "yes", how)
    if source.scaler == "karpenter":
        return SourceHonour(
            source.name,
            source.scaler,
            "best effort" if volcano and mode != "required" else "no",
            "Karpenter launches for pending pods, blind to the network hierarchy",
        )
    # The cluster-autoscaler: ProvisioningRequest for Kueue jobs, pending pods for Volcano's.
    if mode == "unconstrained":
        return SourceHonour(source.name, source.scaler, "yes", "any node it brings")
    if mode == "preferred":
        return SourceHonour(
            source.name,
            source.scaler,
            "best effort",
            "the autoscaler raises the group blind to the hierarchy; "
            + (
                "Volcano scores the closest nodes"
                if volcano
                else "Kueue's second pass then packs the gang into the closest new nodes"
            ),
        )
    if level == "zone" and source.zones == 1 and not volcano:
        return SourceHonour(
            source.name,
            source.scaler,
            "yes",
            "one-zone group: every node it brings is in the zone; topology assigned in Kueue's "
            "second pass, after the scale-up",
        )
    return SourceHonour(
        source.name,
        source.scaler,
        "no",
        "the autoscaler places new nodes blind to the hierarchy: the gang may never fit one "
        f"{level} domain",
    )


def when_full(request: JobTopology, *, volcano: bool) -> str:
    """What happens when no domain of the level has room (docs/topology.md)."""
    if request.mode == "unconstrained":
        return "anywhere there is room (no domain asked)"
    if request.mode == "preferred":
        if volcano:
            return "soft: scored towards the closest HyperNode, never blocks"
        return (
            "relaxed: the next level up is tried (layer by layer to the zone), then the gang is "
            "spread over several domains of the top level"
        )
    if volcano:
        tier = VOLCANO_TIERS.get(request.level or "zone", 0)
        return f"waits: the gang stays Pending until one tier-{tier} HyperNode holds it"
    return (
        f"waits: Kueue keeps the workload pending until one {request.level} domain holds the "
        "whole gang; behind the ProvisioningRequest check the quota is held while the second pass "
        "retries, the booking expires after 10 min and the check is retried (backoffLimitCount "
        "3) before the workload is deactivated"
    )


@dataclass(frozen=True)
class LevelEffect:
    """The expected effect of keeping a gang inside one domain of a level."""

    #: Most network links between two of the gang's nodes in one domain of the level (two
    #: instances under one bottom node: 2; each layer up adds 2); None: not described (the
    #: zone: EC2 describes no layer above layer 1).
    max_hops: int | None
    #: The per-node baseline bandwidth of the gang's instance type (published, Gbps).
    baseline_gbps: float
    text: str


def level_effect(
    level: TopologyLevel | None, levels: Sequence[TopologyLevel], instance_type: str
) -> LevelEffect:
    """Hops and bandwidth class of a level (AWS publishes no per-layer figure: PLANNING)."""
    gbps = catalog.NETWORK_BASELINE_MBPS.get(instance_type, 0) / 1000
    layers = sum(1 for lvl in levels if lvl.startswith("layer-"))
    if level is None:
        hops: int | None = None
        where = "no domain asked: nodes anywhere in the flavor"
    elif level == "hostname":
        hops, where = 0, "one node: no network between ranks"
    elif level == "zone":
        hops, where = (
            None,
            f"one zone: up to every layer and above layer 1 (more than {2 * layers} links)",
        )
    else:
        hops = 2 * (layers - int(level.removeprefix("layer-")) + 1)
        where = f"one {level} network node: at most {hops} links between two nodes"
    text = (
        f"{where}; per-node baseline {gbps:g} Gbps ({instance_type}, EC2 DescribeInstanceTypes, "
        "published); PLANNING, UNVERIFIED: AWS publishes no bandwidth or latency per network "
        "layer, only that fewer hops means closer instances"
    )
    return LevelEffect(hops, gbps, text)


@dataclass(frozen=True)
class Gang:
    """What a topology request is judged against: the gang and where it may land."""

    #: The config key of the gang (`trainingJobs[3]`, `validation.nccl`).
    key: str
    gpu_class: str
    nodes: int
    #: Placed by Volcano (a Volcano Job, the NCCL test's PodGroup), else by Kueue.
    volcano: bool
    #: Its own request (None: the default).
    asked: TopologyRequest | None
    #: Its pods are held to one zone (EFA, `zones: single`).
    single_zone: bool
    #: The node sources its pods fit.
    fitting: tuple[NodeSource, ...]


def topology_problems(
    gang: Gang,
    request: JobTopology | None,
    *,
    zone_count: int,
    opted: Sequence[str],
) -> list[Problem]:
    """What keeps a gang's topology request from ever being met (module docstring);
    `zone_count`: the stack's private subnets (zones)."""
    if request is None:
        if gang.asked is None:
            return []
        return [
            Problem(
                f"{gang.key}.topology",
                gang.asked.model_dump(),
                f"left out: GPU class {gang.gpu_class} is not placed by the network "
                f"(scheduling.topology.gpuClasses: {', '.join(opted) or 'none'}); its flavors "
                "carry no Topology, and Kueue refuses a podset asking for one on them ('Flavor "
                "... does not support TopologyAwareScheduling')",
            )
        ]
    if request.level is not None and request.level not in request.levels:
        return [
            Problem(
                f"{gang.key}.topology.level",
                request.level,
                f"a level of {gang.gpu_class}'s Topology ({', '.join(request.levels)}): its "
                "instance types carry no such node label, so Kueue would never admit the job "
                "('Flavor ... does not contain the requested level', kubernetes-sigs/kueue@"
                "v0.19.2 pkg/scheduler/flavorassigner/tas_flavorassigner.go L191-194)",
            )
        ]
    return [
        *_level_problems(gang, request),
        *_blind_problems(gang, request),
        *_zone_problems(gang, request, zone_count),
    ]


def _level_problems(gang: Gang, request: JobTopology) -> list[Problem]:
    """A required level no domain of which can hold the gang, or one Volcano has no tier for."""
    key = f"{gang.key}.topology.level"
    if request.mode != "required":
        return []
    if request.level == "hostname" and gang.nodes > 1:
        return [
            Problem(
                key,
                request.level,
                f"a level one domain of which can hold the gang: one node holds one of its "
                f"{gang.nodes} pods, so they never fit one kubernetes.io/hostname and the gang "
                "would wait forever",
            )
        ]
    if gang.volcano and request.level not in VOLCANO_TIERS:
        return [
            Problem(
                key,
                request.level,
                f"one of {', '.join(VOLCANO_TIERS)} for a gang Volcano places: the HyperNodes "
                "it discovers stop at layer-3 (docs/topology.md), so no tier stands for "
                f"{request.level}",
            )
        ]
    return []


def _blind_problems(gang: Gang, request: JobTopology) -> list[Problem]:
    """A required domain on sources that bring nodes blind to the hierarchy."""
    volcano = gang.volcano
    blind = [
        (s, honour)
        for s in gang.fitting
        if (honour := source_honour(request, s, volcano=volcano)).honours == "no"
    ]
    if request.mode != "required" or not blind:
        return []
    return [
        Problem(
            f"{gang.key}.topology.mode",
            request.mode,
            "preferred"
            + ("" if volcano else " (or required at the zone of one-zone groups)")
            + ": "
            + "; ".join(f"{s.name} ({s.key}, {s.scaler}): {honour.how}" for s, honour in blind)
            + ", so the gang may never start"
            + (
                ""
                if volcano
                else " (Kueue: SecondPassFailed until the booking expires, retried, then the "
                "workload is deactivated: kubernetes-sigs/kueue@v0.19.2 "
                "keps/2724-topology-aware-scheduling/README.md L692-707)"
            ),
        )
    ]


def _zone_problems(gang: Gang, request: JobTopology, zone_count: int) -> list[Problem]:
    """A gang held to one zone whose Kueue request may spread it over zones."""
    if not gang.single_zone or gang.nodes < 2 or request.mode == "required" or gang.volcano:
        return []
    if one_zone_flavors(gang.fitting, zone_count):
        return []
    return [
        Problem(
            f"{gang.key}.topology.mode",
            request.mode,
            "required (at the zone or below) for a gang held to one zone: a "
            f"{request.mode} request may spread it over zones, the sources of a flavor ("
            + ", ".join(s.name for s in gang.fitting)
            + ") reaching more than one, while its pods' zone podAffinity keeps every pod in "
            "pod 0's zone: the stray pods would stay Pending",
        )
    ]
