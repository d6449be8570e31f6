"""The stack's derived facts, built once at the composition root and passed down as a value.

`build(cfg)` takes a config that `validate` (components/analysis/__init__.py) passed — every
job's team exists, its GPU class and capacity types are ones the pools provide — and computes,
eagerly and once, the figures several rules and components need: the GPU capacity per flavor,
each flavor's provisioner, the flavors behind Kueue's ProvisioningRequest check, the node sources
and which of them join the EFA placement group or one zone, the sources no team's queue
reaches, the capacity reservations, the costs (managed groups, NodePools, idle, storage),
Kueue's waitForPodsReady timeouts, the NCCL test's host, and per training job (`JobFacts`)
its instance types, pod resources and requests, placement and zone pin, the node sources that
admit and fit it, its flavors and provisioners, checkpoint interval and planned waste,
model-state memory, image source, time to first step and $/h.

The rules that derive them (capacity.py, quota.py, resources.py, placement.py, fit.py,
checkpoint.py, memory.py, readiness.py, nccl.py, images.py, efa_placement.py, startup.py,
costs.py) take values and never ask for the facts; judgements built on the facts (quota, will
it run, Volcano) take the facts (`analysis.judge`). `__main__.py` holds the one `StackFacts` of
a run and hands it, or the parts a component needs, to whoever reads it — the way Kueue's
scheduler computes one flavor assignment per workload and every consumer reads it; the report
renders these values and derives none of them again. Nothing is cached between calls: a test's
variant of a config is a new `build`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from components import catalog
from components.analysis import (
    capacity,
    efa_placement,
    memory,
    nccl,
    nodes,
    quota,
    readiness,
    topology,
)
from components.analysis import checkpoint as checkpointing
from components.analysis.capacity import FlavorCommitment, ReservationRow
from components.analysis.costs import HourlyCost, PlatformCosts, job_hourly_cost, platform_costs
from components.analysis.efa_placement import Membership
from components.analysis.fit import SourceFit, fit_sources
from components.analysis.images import ImageSource, image_source
from components.analysis.nccl import NcclHost
from components.analysis.nodes import NodeSource
from components.analysis.placement import Placement, job_placement, zone_pin_index
from components.analysis.readiness import PodsReady
from components.analysis.resources import JobResources, pod_requests, resources_on
from components.analysis.startup import StartupEstimate, estimate
from components.analysis.topology import JobTopology
from components.config import StackConfig, TeamConfig, TopologyLevel, TrainingJobConfig

Flavor = tuple[str, catalog.CapacityType]


@dataclass(frozen=True)
class JobFacts:
    """One training job's derived facts: what its pods are, where they may go, who brings
    their nodes, and how often it checkpoints. The plan (components/training_jobs/plan.py),
    the will-it-run verdict and the report read these."""

    #: Its position in `trainingJobs` (config keys `trainingJobs[index]...`).
    index: int
    job: TrainingJobConfig
    #: Its team (validated to exist).
    team: TeamConfig
    #: Instance types the pools can launch for its GPU class and capacity types
    #: (capacity.job_instance_types).
    instance_types: tuple[str, ...]
    #: CPU, memory, /dev/shm and EFA devices of one pod, sized for the smallest of those types
    #: (resources.resources_on).
    resources: JobResources
    #: Per-pod requests its manifests carry (resources.pod_requests).
    requests: Mapping[str, float]
    #: Node affinity, tolerations and zone term of its pods (placement.job_placement).
    placement: Placement
    #: The private-subnet (AZ) index a single-zone job would be pinned to; None when its pods
    #: may span zones (placement.zone_pin_index).
    zone_pin: int | None
    #: The node sources whose labels and taints admit its pods, and which of them hold one
    #: (fit.fit_sources).
    fit: SourceFit
    #: The provisioners of the flavors it may be placed on (capacity.flavor_provisioners).
    provisioners: frozenset[catalog.Provisioner]
    #: The Kueue ResourceFlavors its team's ClusterQueue offers it, in quota order: the team's
    #: quota entries of its GPU class and capacity types.
    flavors: tuple[str, ...]
    #: Seconds between checkpoints: the job's own, else Young/Daly from its save-blocking time
    #: and MTBF (checkpoint.young_daly_interval_s), unrounded.
    checkpoint_interval_s: float
    #: Expected fraction of wall time lost to checkpoint saves and rework after failures at that
    #: interval (checkpoint.wasted_fraction).
    planned_waste: float
    #: Parameters + gradients + optimizer state per rank in GiB; None without `modelParameters`
    #: (memory.model_state_gib).
    model_state_gib: float | None
    #: Where its image digest comes from (images.image_source); None for a tag no deploy can
    #: resolve (a config error).
    image: ImageSource | None
    #: Seconds from admission to the first step, term by term (startup.estimate): the report's
    #: "time to first step" line.
    startup: StartupEstimate
    #: Its nodes' $/h on spot and on-demand at the planning price of the type its pods are
    #: sized for (costs.job_hourly_cost).
    hourly: HourlyCost
    #: The network block its gang asks for on its class's Topology (topology.job_topology):
    #: its own request or the default; None when its class is not placed by the network.
    topology: JobTopology | None = None

    @property
    def key(self) -> str:
        """Its config key, `trainingJobs[i]`."""
        return f"trainingJobs[{self.index}]"

    @property
    def workload(self) -> str:
        """`<team namespace>/<job name>`: how the report and the verdicts name it."""
        return f"{self.team.namespace}/{self.job.name}"


@dataclass(frozen=True)
class StackFacts:
    """The derived facts of one validated config, built once (`build`)."""

    cfg: StackConfig
    #: GPUs each (GPU class, capacity type) flavor can provide (capacity.gpu_capacity).
    capacity: Mapping[Flavor, int]
    #: Per flavor, the teams' nominal GPUs against that capacity (capacity.flavor_commitments).
    commitments: tuple[FlavorCommitment, ...]
    #: The one provisioner of each flavor (capacity.flavor_provisioners).
    provisioners: Mapping[Flavor, catalog.Provisioner]
    #: Flavors behind Kueue's ProvisioningRequest check (capacity.provisioning_checked).
    provisioning_checked: frozenset[Flavor]
    #: Every managed group and Karpenter pool a GPU pod can land on (nodes.node_sources).
    sources: tuple[NodeSource, ...]
    #: Managed GPU group name -> where its nodes go (placement group, one zone).
    node_groups: Mapping[str, Membership]
    #: Karpenter GPU pool name -> whether it launches into the placement group.
    pools: Mapping[str, Membership]
    #: Kueue's waitForPodsReady timeouts and what they derive from (readiness.pods_ready).
    pods_ready: PodsReady
    #: Where the NCCL test's pods land and what each requests (nccl.nccl_host).
    nccl_host: NcclHost | None
    #: Team name -> its config.
    teams: Mapping[str, TeamConfig]
    #: GPU class -> the levels of its Topology, for the classes placed by the network
    #: (`scheduling.topology.gpuClasses`; topology.opted_in).
    topologies: Mapping[str, tuple[TopologyLevel, ...]]
    #: GPU class -> why it is not placed by the network on this stack, in a phrase ("" when it
    #: could be but is not opted in): every class of a source or a job (topology.why_not_eligible).
    network_exclusions: Mapping[str, str]
    #: One per `trainingJobs` entry, in config order.
    jobs: tuple[JobFacts, ...]
    #: The GPU node sources no team's quota reaches (quota.unreachable_sources): the config
    #: check refuses those without an `unqueuedReason`, the report lists the others.
    unqueued: tuple[NodeSource, ...]
    #: The capacity reservations with their $/h, billed used or not (capacity.reservations).
    reservations: tuple[ReservationRow, ...]
    #: Managed groups idle and at max, NodePools at their limits, the idle cost the config
    #: makes, storage prices (costs.platform_costs).
    costs: PlatformCosts

    @property
    def placement_group_needed(self) -> bool:
        """Some GPU source launches into the EFA cluster placement group, so the stack creates
        it (read from the memberships efa_placement.memberships computed)."""
        return any(m.placement_group for m in (*self.node_groups.values(), *self.pools.values()))


def job_facts(
    cfg: StackConfig,
    index: int,
    job: TrainingJobConfig,
    team: TeamConfig,
    *,
    sources: tuple[NodeSource, ...],
    provisioners: Mapping[Flavor, catalog.Provisioner],
    topologies: Mapping[str, tuple[TopologyLevel, ...]] | None = None,
) -> JobFacts:
    """The derived facts of `job` (at `trainingJobs[index]`, of `team`), from the stack's node
    sources, flavor provisioners and Topologies (None: computed from `cfg`)."""
    types = tuple(capacity.job_instance_types(cfg, job))
    pod = resources_on(job, types)
    checkpoint = job.checkpoint
    interval = (
        float(checkpoint.interval_seconds)
        if checkpoint.interval_seconds is not None
        else checkpointing.young_daly_interval_s(checkpoint.blocking, checkpoint.mtbf_seconds)
    )
    requests = pod_requests(job, pod)
    where = job_placement(job, pod.efa_devices)
    fit = fit_sources(sources, where, requests)
    return JobFacts(
        index=index,
        job=job,
        team=team,
        instance_types=types,
        resources=pod,
        requests=requests,
        placement=where,
        zone_pin=zone_pin_index(cfg, job, pod.efa_devices),
        fit=fit,
        provisioners=frozenset(
            provisioners[(job.gpu_class, c)]
            for c in job.capacity_types
            if (job.gpu_class, c) in provisioners
        ),
        flavors=tuple(
            entry.flavor
            for entry in team.quota
            if entry.gpu_class == job.gpu_class and entry.capacity_type in job.capacity_types
        ),
        checkpoint_interval_s=interval,
        planned_waste=checkpointing.wasted_fraction(
            interval, checkpoint.blocking, checkpoint.mtbf_seconds, checkpoint.restart_seconds
        ),
        model_state_gib=memory.model_state_gib(job, job.world_size),
        image=image_source(cfg, job),
        startup=estimate(cfg, job, pod.instance_type, fit.fitting),
        hourly=job_hourly_cost(job.nodes, pod.instance_type),
        topology=topology.job_topology(
            job,
            pod.efa_devices,
            topologies if topologies is not None else topology.opted_in(cfg),
            fit.fitting,
            cfg.network.zone_count,
        ),
    )


def build(cfg: StackConfig, *, region: str | None = None) -> StackFacts:
    """The facts of a validated `cfg` (analysis.validate passed), each computed once; `region`:
    the stack's AWS region where the caller knows it (a fleet's manager judging a worker),
    put on the node sources as the label every node carries."""
    groups, pools = efa_placement.memberships(cfg)
    sources = tuple(nodes.node_sources(cfg, groups, pools, region))
    provisioners = capacity.flavor_provisioners(cfg)
    teams = {team.name: team for team in reversed(cfg.teams)}
    reservations = tuple(capacity.reservations(cfg))
    topologies = topology.opted_in(cfg)
    gpu_capacity = capacity.gpu_capacity(cfg)
    return StackFacts(
        cfg=cfg,
        capacity=gpu_capacity,
        commitments=capacity.flavor_commitments(cfg.teams, gpu_capacity),
        provisioners=provisioners,
        provisioning_checked=capacity.provisioning_checked(cfg),
        sources=sources,
        node_groups=groups,
        pools=pools,
        pods_ready=readiness.pods_ready(cfg, sources),
        nccl_host=nccl.nccl_host(cfg, sources),
        teams=teams,
        topologies=topologies,
        network_exclusions={
            gpu_class: topology.why_not_eligible(cfg, gpu_class)
            for gpu_class in sorted(
                {s.gpu_class for s in sources} | {j.gpu_class for j in cfg.training_jobs}
            )
            if gpu_class not in topologies
        },
        jobs=tuple(
            job_facts(
                cfg,
                index,
                job,
                teams[job.team],
                sources=sources,
                provisioners=provisioners,
                topologies=topologies,
            )
            for index, job in enumerate(cfg.training_jobs)
        ),
        unqueued=tuple(quota.unreachable_sources(cfg, sources)),
        reservations=reservations,
        costs=platform_costs(
            cfg.node_groups,
            autoscaled=frozenset(g.name for g in cfg.node_groups.gpu if cfg.autoscaled(g)),
            pools=cfg.karpenter.pools,
            reservations=reservations,
            rwx=cfg.storage.rwx,
        ),
    )
