"""Gangs placed by the network: which GPU classes get a Kueue Topology (and Volcano network
topology) and what each gang asks for; whether the request can be met by the way its nodes
appear is topology_checks.py. docs/topology.md is the prose of both, with every upstream line
they rest on.

Facts behind the rules (read at the pinned versions):
- Labels. EKS's cloud-controller-manager labels a node of a supported instance type with
  `topology.k8s.aws/network-node-layer-1..N` while it initializes it (catalog
  NETWORK_NODE_LABEL_PREFIX cites the lines); which types, and N, is catalog
  NETWORK_NODE_LAYERS (EC2 "Prerequisites for Amazon EC2 topology"). EC2 describes the
  hierarchy "within an Availability Zone", so the zone is the level above layer 1.
- Kueue's Topology Aware Scheduling counts only Ready, schedulable nodes that carry every level
  label of the Topology and the flavor's node labels (kubernetes-sigs/kueue@v0.19.2
  site/content/en/docs/concepts/topology_aware_scheduling.md L61-69; pkg/cache/scheduler/
  tas_nodes_cache.go L57-66, pkg/util/tas/node.go L21-33). It assigns topology to pods that do
  not exist yet only onto nodes that do: a Job stays suspended, without pods, until Kueue admits
  it. So:
  - Karpenter launches only for pending pods: a class it serves cannot opt in.
  - Managed groups the cluster-autoscaler resizes work through the ProvisioningRequest check:
    the first pass reserves quota and leaves the topology `Pending`; once the check is Ready
    (the autoscaler raised the group) a second pass assigns it on the nodes then present
    (pkg/scheduler/flavorassigner/tas_flavorassigner.go L104-109; pkg/workload/workload.go
    L938-971; second passes retried 1 s -> 30 s without limit, pkg/cache/queue/
    second_pass_queue.go L30-34). The autoscaler places the new nodes blind to the network
    hierarchy (an ASG's node template has no network-node label: kubernetes/autoscaler@
    cluster-autoscaler-1.33.6 cloudprovider/aws/aws_manager.go L384-397), so `required` at a
    network layer may never start (keps/2724-topology-aware-scheduling/README.md L692-707: "If
    the newly created nodes are scattered across racks, then TAS will fail ... After a couple of
    retries the workload will get deactivated"). `preferred`, and `required` at the zone of a
    one-zone group, are safe.
  - Static groups (nodes there before the job) support every mode.
- A podset that asks for a topology is refused by every flavor without `topologyName` that
  covers a resource it requests ("Flavor %q does not support TopologyAwareScheduling"), and a
  podset that asks for none by every flavor with one ("supports only TopologyAwareScheduling"),
  unless the ClusterQueue is TAS-only (tas_flavorassigner.go L166-204); team ClusterQueues mix
  classes in one resource group. So a class is TAS on all its flavors or none, and every Kueue
  job of an opted-in class carries one of the three annotations.
- A requested level the flavor's Topology lacks: "Flavor %q does not contain the requested
  level" (L191-194): the job is never admitted.
- Volcano v1.15.1: HyperNodes discovered from the same labels (label discoverer,
  pkg/controllers/hypernode/discovery/label/label.go; tier 1 = the label just above the
  hostname, L199-202), `networkTopology` hard (within one HyperNode of tier <=
  highestTierAllowed, else Pending) or soft (scored only) on a Job or PodGroup
  (docs/user-guide/how_to_use_network_topology_aware_scheduling.md L43-59). Volcano's pods do
  exist while they wait, so provisioners react to them, but blind to the hierarchy: `hard` only
  where the nodes exist before the gang.
- AWS publishes no bandwidth or latency per network layer, only that fewer hops means closer
  instances (EC2 "How Amazon EC2 topology works"): the report gives hops and the per-node
  baseline, marked PLANNING.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from components import catalog
from components.analysis import placement
from components.analysis.nodes import NodeSource
from components.config import (
    TOPOLOGY_LEVELS,
    Problem,
    StackConfig,
    TopologyLevel,
    TopologyMode,
    TopologyRequest,
    TrainingJobConfig,
)

#: Kueue's pod-template annotations (kubernetes-sigs/kueue@v0.19.2 apis/kueue/v1beta2/
#: topology_types.go L28, L39, L47; the same names at v0.13.1 in apis/kueue/v1alpha1): exactly
#: one on the pod template's metadata (site/content/en/docs/tasks/run/
#: topology_aware_scheduling.md L101-168).
KUEUE_REQUIRED: Final = "kueue.x-k8s.io/podset-required-topology"
KUEUE_PREFERRED: Final = "kueue.x-k8s.io/podset-preferred-topology"
KUEUE_UNCONSTRAINED: Final = "kueue.x-k8s.io/podset-unconstrained-topology"
KUEUE_ANNOTATIONS: Final = (KUEUE_REQUIRED, KUEUE_PREFERRED, KUEUE_UNCONSTRAINED)
#: The network topology type name of Volcano's label discovery (<= 20 characters:
#: volcano-sh/volcano@v1.15.1 pkg/controllers/hypernode/discovery/label/label.go L51, L188-192).
VOLCANO_TOPOLOGY_TYPE: Final = "aws-network"
#: Volcano tiers of our discovery config: tier 1 is the label just above the hostname. The
#: fourth network layer (p6-b200) is left out of Volcano's list: a node lacking the first label
#: of the walk gets no HyperNode at all (label.go L377-382), so a layer-4 tier would leave every
#: 3-layer node out.
VOLCANO_TIERS: Final[dict[TopologyLevel, int]] = {
    "layer-3": 1,
    "layer-2": 2,
    "layer-1": 3,
    "zone": 4,
}


def level_label(level: TopologyLevel) -> str:
    """The node label a level names."""
    if level == "zone":
        return catalog.ZONE_LABEL
    if level == "hostname":
        return catalog.HOSTNAME_LABEL
    return catalog.network_node_label(int(level.removeprefix("layer-")))


def levels_of(layers: int) -> tuple[TopologyLevel, ...]:
    """A Topology's levels for nodes with `layers` network-node layers, top-down: the zone (EC2's
    topology is per AZ; it lets a gang be held to one zone in Kueue's own terms), each layer,
    and the hostname last (Kueue honours node selectors and taints per node only when the lowest
    level is `kubernetes.io/hostname`: pkg/cache/scheduler/tas_flavor_snapshot.go L961-986, and
    the CRD allows it only there: apis/kueue/v1beta2/topology_types.go L115-117)."""
    network = tuple(level for level in TOPOLOGY_LEVELS if level.startswith("layer-"))
    return ("zone", *network[:layers], "hostname")


def volcano_levels() -> list[dict[str, str]]:
    """Volcano's label-discovery list, top-down, hostname last (the discoverer drops it)."""
    return [{"nodeLabel": level_label(level)} for level in ("zone", *levels_of(3)[1:])]


# --- which classes -------------------------------------------------------------------------------


def class_instance_types(cfg: StackConfig, gpu_class: str) -> list[str]:
    """Instance types the stack's sources of `gpu_class` launch (managed groups and pools)."""
    types = {t for g in cfg.node_groups.gpu if g.gpu_class == gpu_class for t in g.instance_types}
    for pool in cfg.karpenter.pools:
        if pool.is_gpu and pool.resolved_gpu_class == gpu_class:
            types.update(pool.resolved_instance_types)
    return sorted(types)


def class_layers(cfg: StackConfig, gpu_class: str) -> int:
    """The network-node layers every node of the class carries (0: some carry none). A Topology
    may name only levels all of them have: Kueue drops a node lacking one."""
    types = class_instance_types(cfg, gpu_class)
    return min((catalog.network_layers(t) for t in types), default=0)


def opted_in(cfg: StackConfig) -> dict[str, tuple[TopologyLevel, ...]]:
    """GPU class -> the levels of its Topology, for the classes `scheduling.topology` names
    (valid ones: check_topology_classes refuses the rest before the facts are built)."""
    return {c: levels_of(class_layers(cfg, c)) for c in cfg.scheduling.topology.gpu_classes}


def _supported_families() -> str:
    return ", ".join(
        f"{family} ({layers} layers)" for family, layers in catalog.NETWORK_NODE_LAYERS.items()
    )


def why_not_eligible(cfg: StackConfig, gpu_class: str) -> str:
    """Why `gpu_class` cannot be placed by the network on this stack, in a phrase (the report);
    "" when it could be (check_topology_classes has the full reasons)."""
    bare = sorted(
        {
            catalog.instance(t).family
            for t in class_instance_types(cfg, gpu_class)
            if not catalog.network_layers(t)
        }
    )
    if bare:
        return f"{', '.join(bare)} nodes carry no network-node labels (EC2 gives them no topology)"
    pools = [p.name for p in cfg.karpenter.pools if p.is_gpu and p.resolved_gpu_class == gpu_class]
    if pools:
        return (
            f"served by Karpenter NodePool {', '.join(pools)}: Kueue places a Topology flavor's "
            "gang only on nodes that exist before admission"
        )
    if cfg.fleet is not None:
        return "a fleet worker: its manager renders no Topology"
    return ""


def check_topology_classes(cfg: StackConfig) -> list[Problem]:
    """Each opted-in class: provided by the pools, of types EC2 gives a topology, served by
    managed node groups only, and not on a fleet worker (module docstring)."""
    problems: list[Problem] = []
    provided = {g.gpu_class for g in cfg.node_groups.gpu} | {
        p.resolved_gpu_class for p in cfg.karpenter.pools if p.is_gpu
    }
    for index, gpu_class in enumerate(cfg.scheduling.topology.gpu_classes):
        key = f"scheduling.topology.gpuClasses[{index}]"
        if gpu_class not in provided:
            problems.append(
                Problem(
                    key, gpu_class, f"a GPU class the pools provide ({', '.join(sorted(provided))})"
                )
            )
            continue
        bare = [t for t in class_instance_types(cfg, gpu_class) if not catalog.network_layers(t)]
        if bare:
            problems.append(
                Problem(
                    key,
                    gpu_class,
                    "a class whose instance types EC2 gives a network topology: "
                    f"{', '.join(bare)} carry no topology.k8s.aws/network-node-layer label (EC2 "
                    f"DescribeInstanceTopology supports {_supported_families()}), and Kueue "
                    "admits onto no node that lacks a level of the flavor's Topology; leave it "
                    "out and it keeps today's placement "
                    "(one zone, one cluster placement group)",
                )
            )
        pools = [
            f"{p.name} (karpenter.pools[{i}])"
            for i, p in enumerate(cfg.karpenter.pools)
            if p.is_gpu and p.resolved_gpu_class == gpu_class
        ]
        if pools:
            problems.append(
                Problem(
                    key,
                    gpu_class,
                    f"a class served by managed node groups only: Karpenter NodePool "
                    f"{', '.join(pools)} launches nodes only for pending pods, and Kueue keeps a "
                    "job of a Topology flavor without pods until it has assigned it to nodes that "
                    "exist (kubernetes-sigs/kueue@v0.19.2 concepts/topology_aware_scheduling.md "
                    "L61-69): its jobs would never start. Serve the class from nodeGroups.gpu "
                    "(static, or autoscaled behind the ProvisioningRequest check), or leave it "
                    "out",
                )
            )
        if cfg.fleet is not None:
            problems.append(
                Problem(
                    key,
                    gpu_class,
                    "left out on a fleet worker: MultiKueue needs the manager's flavors of the "
                    "class to carry the same Topology (kubernetes-sigs/kueue@v0.19.2 site/content/"
                    "en/docs/tasks/manage/setup_multikueue.md L145-157), which the fleet's "
                    "manager does not render (docs/topology.md)",
                )
            )
    return problems


# --- what a gang asks -------------------------------------------------------------------------


@dataclass(frozen=True)
class JobTopology:
    """What one gang asks of the network, resolved: the request (its own or the default), the
    class's Topology levels, and why."""

    mode: TopologyMode
    level: TopologyLevel | None
    #: The class's Topology, top-down.
    levels: tuple[TopologyLevel, ...]
    #: Chosen by the platform (the job set none).
    default: bool
    #: Why this request (the default's reason, or "asked").
    why: str

    @property
    def label(self) -> str | None:
        return level_label(self.level) if self.level is not None else None

    def kueue_annotations(self) -> dict[str, str]:
        """The one podset annotation Kueue reads (module docstring)."""
        if self.mode == "unconstrained":
            return {KUEUE_UNCONSTRAINED: "true"}
        label = level_label(self.level) if self.level is not None else ""
        return {KUEUE_REQUIRED if self.mode == "required" else KUEUE_PREFERRED: label}

    def volcano_network_topology(self) -> dict[str, Any] | None:
        """A Volcano Job's (or PodGroup's) `networkTopology`: hard within one HyperNode of the
        level's tier, or soft (closest first, never blocks); None when unconstrained. A level
        Volcano has no tier for yields no hard constraint (topology_problems refuses it)."""
        if self.mode == "unconstrained":
            return None
        if self.mode == "required" and self.level in VOLCANO_TIERS:
            return {"mode": "hard", "highestTierAllowed": VOLCANO_TIERS[self.level]}
        return {"mode": "soft"}


def lowest_network_level(levels: Sequence[TopologyLevel]) -> TopologyLevel:
    """The closest network level of a Topology (the one just above the hostname)."""
    return levels[-2]


def one_zone_flavors(fitting: Sequence[NodeSource], zone_count: int) -> bool:
    """Whether each capacity type's sources among `fitting` launch into one and the same zone
    (a TAS assignment stays inside one flavor, so such a flavor cannot spread a gang)."""
    if zone_count < 2:
        return True
    by_capacity: dict[str, set[int | None]] = {}
    for source in fitting:
        by_capacity.setdefault(source.capacity_type, set()).add(source.zone_index)
    return all(None not in zones and len(zones) == 1 for zones in by_capacity.values())


def default_request(
    nodes: int, single_zone: bool, one_zone: bool, levels: Sequence[TopologyLevel]
) -> tuple[TopologyRequest, str]:
    """The platform's choice for a gang that asks for nothing (docs/topology.md, "Defaults"):
    - one node: unconstrained. No traffic between nodes; the annotation only lets the pod use
      a Topology flavor at all (a podset without one is refused there).
    - a gang held to one zone (EFA, or `zones: single`) whose flavors reach several zones:
      required at the zone. EFA does not cross zones; inside it Kueue's BestFit descent packs
      the gang level by level (tas_flavor_snapshot.go updateCountsToMinimumGeneric), greedily:
      on the real engines it chose the smaller layer-2 domain and split a 2-pod gang over two
      blocks while a whole free block sat in the other (docs/real-engines.md).
    - any other gang of several nodes (TCP, or held to one zone by flavors that are anyway):
      preferred at the closest network layer. Kueue tries one block first and relaxes level by
      level (findLevelWithFitDomains); it never waits for a block and, on one-zone flavors,
      cannot leave the zone."""
    if nodes < 2:
        return TopologyRequest(mode="unconstrained"), "one node: no traffic between nodes"
    if single_zone and not one_zone:
        return (
            TopologyRequest(mode="required", level="zone"),
            "a gang held to one zone (EFA does not cross zones) on flavors that reach several: "
            "the zone is required, and Kueue packs the gang into few network blocks inside it",
        )
    closest = lowest_network_level(levels)
    why = (
        "a gang held to one zone on one-zone flavors"
        if single_zone
        else "a TCP gang that may span zones"
    )
    return (
        TopologyRequest(mode="preferred", level=closest),
        f"{why}: one {closest} block first, relaxed level by level",
    )


def resolve(
    asked: TopologyRequest | None,
    nodes: int,
    single_zone: bool,
    one_zone: bool,
    levels: tuple[TopologyLevel, ...] | None,
) -> JobTopology | None:
    """A gang's request on its class's Topology (`levels`): its own, else the default; None
    when the class has none (nothing is rendered; an explicit request there is refused by
    topology_checks)."""
    if levels is None:
        return None
    if asked is not None:
        return JobTopology(asked.mode, asked.level, levels, False, "asked")
    request, why = default_request(nodes, single_zone, one_zone, levels)
    return JobTopology(request.mode, request.level, levels, True, why)


def job_topology(
    job: TrainingJobConfig,
    efa_devices: int,
    topologies: Mapping[str, tuple[TopologyLevel, ...]],
    fitting: Sequence[NodeSource],
    zone_count: int,
) -> JobTopology | None:
    """A training job's request (`resolve` on its class; `fitting`: the sources its pods fit,
    whose zones the default depends on)."""
    return resolve(
        job.topology,
        job.nodes,
        placement.needs_single_zone(job, efa_devices),
        one_zone_flavors(fitting, zone_count),
        topologies.get(job.gpu_class),
    )


def nccl_topology(
    asked: TopologyRequest | None,
    gpu_class: str,
    topologies: Mapping[str, tuple[TopologyLevel, ...]],
) -> JobTopology | None:
    """The NCCL test's request on its pool's class: its own, else soft (`preferred` at the
    closest layer: the ranks go to the closest free nodes and the test is never blocked; the
    published thresholds are placement-agnostic 2-node figures, catalog.NCCL_ALLREDUCE_BUSBW)."""
    levels = topologies.get(gpu_class)
    if levels is None:
        return None
    if asked is not None:
        return JobTopology(asked.mode, asked.level, levels, False, "asked")
    closest = lowest_network_level(levels)
    return JobTopology(
        "preferred",
        closest,
        levels,
        True,
        "the test's ranks on the closest free nodes, never blocked",
    )
