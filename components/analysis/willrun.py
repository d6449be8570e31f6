"""Will it run: for every workload the stack declares (training jobs of every launcher, the
validation Jobs) the path from `pulumi up` to running pods, judged from the facts alone —

- admission: LocalQueue -> ClusterQueue -> flavor; every requested resource covered by the
  ClusterQueue or excluded from quota; the job within nominal quota + borrowing (quota.py, a
  rule of its own: the verdict reads whether the job is over quota, it does not report it);
- placement: node sources (nodes.py) whose labels, taints and allocatable fit the pod, incl.
  `nvidia.com/gpu` and `vpc.amazonaws.com/efa`;
- scale-up: which controller brings the nodes, up to which limit;
- gang: nodes x pods within what the sources can hold; one zone for multi-node EFA jobs;
- storage: the checkpoint claim binds and is ReadWriteMany when pods span nodes;
- memory: model states per rank within GPU memory (when `modelParameters` is given);
- pods ready: Kueue's waitForPodsReady outlasts the slowest path to Ready pods;
- what `pulumi up` waits for.

A verdict is a typed record: each part holds the facts behind the answer (sources, flavors,
figures), and the findings that stop the workload are `Problem`s naming their key. Prose is
rendered at the edge, by the report (synth/verdict_text.py). Pure: facts in, verdicts out; the
figures come from facts.py, Volcano's gates from volcano.py.

Why this module is long: it is the whole model of one verdict — a typed part and one small
judging helper per concern of a training job (admission, namespace limits, placement, scale-up
and gang, zone, storage, memory, readiness) and the validation workloads' verdicts.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

from components import catalog
from components.analysis import (
    limit_range,
    nccl,
    readiness,
    storage,
    topology,
    topology_checks,
    trainer,
    volcano,
)
from components.analysis.facts import JobFacts, StackFacts
from components.analysis.fit import SourceFit, fit_sources
from components.analysis.images import ImageSource
from components.analysis.nccl import NcclHost
from components.analysis.nodes import NodeSource
from components.analysis.placement import Placement
from components.analysis.readiness import ReadyPath
from components.analysis.topology import JobTopology
from components.analysis.topology_checks import LevelEffect, SourceHonour
from components.config import (
    GpuNodeGroup,
    KarpenterPool,
    Problem,
    StackConfig,
    TeamConfig,
    trainer_runtime_names,
)


@dataclass(frozen=True)
class Provisioning:
    """Kueue's ProvisioningRequest path of a job on an autoscaled node-group flavor."""

    nodes: int
    max_node_provision_time: str
    pods_ready_timeout: str
    scale_down_unneeded_time: str


@dataclass(frozen=True)
class KueueAdmission:
    """LocalQueue -> ClusterQueue -> flavors, the resources Kueue covers, the quota."""

    queue: str
    flavors: tuple[str, ...]
    over_quota: bool
    #: Requested resources the ClusterQueue neither covers nor excludes (Kueue keeps the job
    #: pending), else empty.
    uncovered: tuple[str, ...]
    #: The requested resources' names (all covered or excluded).
    requests: tuple[str, ...]
    provisioning: Provisioning | None = None


@dataclass(frozen=True)
class VolcanoAdmission:
    """A Volcano Job's gang in its team's queue (volcano.py)."""

    queue: str
    min_available: int
    path: volcano.Admission


@dataclass(frozen=True)
class ValidationAdmission:
    """How a validation Job gets its pods: no queue, or the NCCL test's Volcano PodGroup."""

    kind: Literal["unqueued", "no-pool", "nccl"]
    min_member: int = 0
    #: The NCCL test's queue guarantees its pods (volcano.validation_guarantee).
    guaranteed: bool = False


Admission = KueueAdmission | VolcanoAdmission | ValidationAdmission


@dataclass(frozen=True)
class Placed:
    """Where the pods can go: sources matching their affinity and taints, those whose
    allocatable holds a pod, and the EFA devices each pod asks for."""

    candidates: tuple[NodeSource, ...]
    fitting: tuple[NodeSource, ...]
    efa_devices: int = 0
    #: The NCCL test's host type (validation only).
    nccl: NcclHost | None = None
    #: The validation Job's pool when it is not a node source (no GPU source at all).
    pool: str = ""


@dataclass(frozen=True)
class Gang:
    """Nodes x 1 pod, and how many nodes the sources reach per capacity type."""

    nodes: int
    reach: tuple[tuple[str, int], ...] = ()


@dataclass(frozen=True)
class ScaleUp:
    """What brings the nodes: each fitting source (its scaler, limit), or a validation Job's."""

    sources: tuple[NodeSource, ...] = ()
    #: Validation: the source's scaler and reach (smoke) or the pool's reach (NCCL).
    scaler: str = ""
    max_nodes: int | None = None


@dataclass(frozen=True)
class Zone:
    """Whether the pods are kept in one zone, and which placement group their sources use."""

    single: bool
    #: The AZ index a single-zone job is pinned to (None: Kueue/the scheduler picks).
    pin: int | None = None
    #: EFA: the sources whose placement group applies (empty without EFA).
    efa_sources: tuple[NodeSource, ...] = ()
    #: The FSx subnet index, when FSx and the placement group are in different zones.
    fsx_conflict: tuple[int, int] | None = None
    efa: bool = False


@dataclass(frozen=True)
class Claim:
    """The checkpoint volume: a team PVC, or none (S3 only)."""

    namespace: str
    claim: str
    mode: str
    storage_class: str


@dataclass(frozen=True)
class Memory:
    """Model states per rank against one GPU's memory."""

    states_gib: float
    per_gpu_gib: float
    mode: str


@dataclass(frozen=True)
class Ready:
    """The slowest path from admission to Ready pods against Kueue's timeout."""

    slowest: ReadyPath
    timeout: str


@dataclass(frozen=True)
class Network:
    """The network block the gang asks for (topology.py): the request, which of its sources
    can honour it and how, what happens when no block has room, and the expected effect."""

    request: JobTopology
    honours: tuple[SourceHonour, ...]
    when_full: str
    effect: LevelEffect
    #: Placed by Volcano (a Volcano Job's or PodGroup's networkTopology), else by Kueue.
    volcano: bool


@dataclass(frozen=True)
class Awaits:
    """What `pulumi up` waits for: a launcher (and a DeepSpeed ConfigMap), or a validation
    Job (none when no pool exists)."""

    launcher: Literal["native", "kubeflow", "volcano", "validation", "nothing"]
    config_map: bool = False


@dataclass(frozen=True)
class Verdict:
    """Whether one workload can run, and the facts behind the answer."""

    key: str
    workload: str
    kind: str
    admission: Admission
    placement: Placed
    scale_up: ScaleUp
    gang: Gang
    awaits: Awaits
    #: The checkpoint claim; None: no volume (`s3_only` tells S3 from nothing).
    storage: Claim | None = None
    s3_only: bool = False
    memory: Memory | None = None
    zone: Zone | None = None
    #: Where the image digest comes from (training jobs).
    image: ImageSource | None = None
    #: Kueue jobs: the slowest path from admission to Ready pods against waitForPodsReady.
    ready: Ready | None = None
    #: The network block asked for, on a GPU class placed by the network (topology.py).
    network: Network | None = None
    #: Why its GPU class is not placed by the network (StackFacts.network_exclusions), when
    #: `network` is None.
    network_exclusion: str = ""
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def runnable(self) -> bool:
        return not self.problems


def uncovered(
    requests: Mapping[str, float],
    covered: Sequence[str] = catalog.KUEUE_COVERED_RESOURCES,
    excluded: Sequence[str] = catalog.KUEUE_EXCLUDED_RESOURCE_PREFIXES,
) -> list[str]:
    """Requested resources Kueue would block on: neither covered nor excluded by prefix."""
    return sorted(
        name
        for name, amount in requests.items()
        if amount and name not in covered and not any(name.startswith(p) for p in excluded)
    )


def _volcano_admission(facts: StackFacts, jf: JobFacts) -> tuple[VolcanoAdmission, list[Problem]]:
    """Enqueue and allocate against the team's Volcano queue (volcano.py)."""
    job, team, key = jf.job, jf.team, jf.key
    gang_requests = {name: amount * job.nodes for name, amount in jf.requests.items()}
    path = volcano.admission(facts.cfg, team, gang_requests, facts.nccl_host)
    team_index = facts.cfg.teams.index(team)
    problems: list[Problem] = []
    for blocker in path.blockers:
        if volcano.queue_guarantee(team):
            problems.append(
                Problem(
                    f"{key}.nodes",
                    job.nodes,
                    f"a gang within team {team.name}'s Volcano queue guarantee (its "
                    f"nominal quota, teams[{team_index}].quota): {blocker}",
                )
            )
        else:
            problems.append(
                Problem(
                    f"{key}.scheduler",
                    job.scheduler,
                    "kueue, or a Volcano queue with a guarantee "
                    f"(teams[{team_index}].volcano.guarantee: nominal): {blocker}",
                )
            )
    return VolcanoAdmission(queue=team.name, min_available=job.nodes, path=path), problems


def _kueue_admission(
    facts: StackFacts,
    jf: JobFacts,
    *,
    requests: Mapping[str, float],
    over_quota: bool,
    covered: Sequence[str],
    excluded: Sequence[str],
) -> tuple[KueueAdmission, list[Problem]]:
    """LocalQueue -> ClusterQueue -> `flavors`, covered resources, the provisioning check."""
    job, team = jf.job, jf.team
    blocked = uncovered(requests, covered, excluded)
    problems: list[Problem] = []
    if blocked:
        problems.append(
            Problem(
                f"{jf.key}.efa" if catalog.EFA_RESOURCE in blocked else jf.key,
                job.efa,
                f"Kueue would keep the job pending: it requests {', '.join(blocked)}, which "
                f"ClusterQueue {team.name} does not cover ({', '.join(covered)}) and the "
                "Kueue config does not exclude (resources.excludeResourcePrefixes)",
            )
        )
    scaler = facts.cfg.cluster_autoscaler
    checked = any((job.gpu_class, c) in facts.provisioning_checked for c in job.capacity_types)
    admission = KueueAdmission(
        queue=team.name,
        flavors=jf.flavors,
        over_quota=over_quota,
        uncovered=tuple(blocked),
        requests=tuple(sorted(requests)),
        provisioning=Provisioning(
            nodes=job.nodes,
            max_node_provision_time=scaler.max_node_provision_time,
            pods_ready_timeout=facts.pods_ready.timeout,
            scale_down_unneeded_time=scaler.scale_down_unneeded_time,
        )
        if checked
        else None,
    )
    return admission, problems


def _ready(
    facts: StackFacts, jf: JobFacts, fitting: Sequence[NodeSource]
) -> tuple[Ready | None, list[Problem]]:
    """Whether Kueue's waitForPodsReady timeout outlasts the slowest path from admission to
    Ready pods on the sources the job can land on, with its own image (readiness.py). The
    platform's timeout covers the default image size; a job's larger image may not."""
    job, cfg = jf.job, facts.cfg
    if job.scheduler != "kueue" or not fitting:
        return None, []
    timeouts = facts.pods_ready
    image = job.image_size_gib or cfg.training.image_size_gib
    slowest = max(
        (readiness.ready_path(cfg, s, image) for s in fitting), key=lambda path: path.total_s
    )
    ready = Ready(slowest=slowest, timeout=timeouts.timeout)
    if slowest.total_s <= timeouts.timeout_s:
        return ready, []
    return ready, [
        Problem(
            f"{jf.key}.imageSizeGib",
            job.image_size_gib,
            f"an image Ready within the platform's waitForPodsReady.timeout "
            f"({timeouts.timeout}): {slowest.text()}, so Kueue would evict and requeue the job on "
            "every start that takes that long (raise the platform's training.imageSizeGib, "
            "which the timeout is derived from, or its scheduling.waitForPodsReady.timeout)",
        )
    ]


def _namespace_limits(jf: JobFacts, requests: Mapping[str, float]) -> list[Problem]:
    """The namespace ResourceQuota (and, for Volcano, the queue's capability: the same figures,
    components/platform/tenancy/teams.py) must hold the whole gang, or its pods are refused."""
    job, team = jf.job, jf.team
    problems: list[Problem] = []
    total_cpu, total_mem = requests["cpu"] * job.nodes, requests["memory"] * job.nodes
    limits = team.limits
    for what, total, cap in (
        ("CPU", total_cpu, float(limits.cpu)),
        ("memory GiB", total_mem, float(limits.memory_gib)),
    ):
        if total > cap:
            problems.append(
                Problem(
                    f"{jf.key}.nodes",
                    job.nodes,
                    f"the gang requests {total:g} {what}, over team {team.name}'s namespace "
                    f"limit of {cap:g} (ResourceQuota"
                    + (" and Volcano queue capability)" if job.scheduler == "volcano" else ")"),
                )
            )
    return problems


def job_container(jf: JobFacts) -> dict[str, dict[str, str]]:
    """The training container's resources as rendered (manifests.py reads the same)."""
    res = jf.resources
    return limit_range.container_resources(
        res.cpu, res.memory_gib, jf.job.node_gpus, res.efa_devices
    )


def limit_range_problems(
    jf: JobFacts, team: TeamConfig, *, where: str = "its namespace"
) -> list[Problem]:
    """The team namespace's LimitRange (limit_range.py) must leave the training container's
    requests within its limits: the API server's LimitRanger refuses such a pod, and Kueue
    refuses such a Workload before it tries a flavor (on a fleet's manager too)."""
    refusals = limit_range.kueue_refusals(
        [job_container(jf)], limit_range.limit_range_spec(team.container_defaults)
    )
    if not refusals:
        return []
    defaults = team.container_defaults
    return [
        Problem(
            f"{jf.key}.cpu",
            jf.resources.cpu,
            f"requests within the limits team {team.name}'s LimitRange gives its containers in "
            f"{where} (containerDefaults.cpuLimit {defaults.cpu_limit}, memoryLimit "
            f"{defaults.memory_limit}): Kueue refuses the Workload before it tries a flavor "
            f"({'; '.join(refusals)}; kubernetes-sigs/kueue@v0.19.2 pkg/workload/resources.go "
            "ValidateResources)",
        )
    ]


def _mixed_provisioners(jf: JobFacts, candidates: Sequence[NodeSource]) -> list[Problem]:
    """A pod outside Kueue that both provisioners would scale for."""
    job = jf.job
    if job.scheduler == "kueue" or len({s.provisioner for s in candidates}) <= 1:
        return []
    # Kueue pods carry their flavor's provisioner label; these carry only the affinity.
    return [
        Problem(
            f"{jf.key}.capacity",
            job.capacity,
            "capacity one provisioner serves: the pods match managed node groups ("
            + ", ".join(s.name for s in candidates if s.provisioner == "node-group")
            + ") and Karpenter NodePools ("
            + ", ".join(s.name for s in candidates if s.provisioner == "karpenter")
            + "); the cluster-autoscaler and Karpenter would each bring a node for the "
            "same pending pod (or queue it with Kueue: each flavor selects one)",
        )
    ]


def _placement(jf: JobFacts, *, where: Placement, fit: SourceFit) -> tuple[Placed, list[Problem]]:
    """The sources that admit and fit the pod, and why none does."""
    job, resources = jf.job, jf.resources
    candidates, fitting = tuple(fit.candidates), tuple(fit.fitting)
    problems = _mixed_provisioners(jf, candidates)
    want = ", ".join(f"{k} in {'/'.join(v)}" for k, v in sorted(where.required.items()))
    if not candidates:
        problems.append(
            Problem(
                f"{jf.key}.gpuClass",
                job.gpu_class,
                f"no node source matches the pod's node affinity ({want}) and taints",
            )
        )
    elif not fitting:
        efa_short = resources.efa_devices and all(
            max(a.efa for a in s.allocatable.values()) < resources.efa_devices for s in candidates
        )
        detail = "; ".join(f"{name}: {miss}" for name, miss in fit.misses.items())
        problems.append(
            Problem(
                f"{jf.key}.efa" if efa_short else f"{jf.key}.gpuClass",
                job.efa if efa_short else job.gpu_class,
                (
                    f"EFA requested ({resources.efa_devices} per pod) but no matching node "
                    "source provides EFA devices (only managed groups and Karpenter pools of "
                    f"EFA-capable types do): {detail}"
                )
                if efa_short
                else f"the pod fits no matching node source: {detail}",
            )
        )
    return Placed(candidates, fitting, resources.efa_devices), problems


def _scale_and_gang(jf: JobFacts, fitting: Sequence[NodeSource]) -> tuple[Gang, list[Problem]]:
    """What brings the nodes, and whether the sources hold the whole gang at once."""
    job, key = jf.job, jf.key
    problems: list[Problem] = []
    scalable = [s for s in fitting if s.max_nodes > 0]
    if fitting and not scalable:
        problems.append(
            Problem(
                f"{key}.gpuClass",
                job.gpu_class,
                "nothing brings a node: "
                + ", ".join(f"{s.name} ({s.key}) {s.limit_text}" for s in fitting)
                + "; give the class a Karpenter pool or a managed group with desiredSize > 0",
            )
        )
    reach = {
        capacity: sum(s.max_nodes for s in scalable if s.capacity_type == capacity)
        for capacity in job.capacity_types
    }
    best = max(reach.values()) if reach else 0
    if scalable and best < job.nodes:
        scale = "; ".join(
            f"{scale_up_path(s)}, up to {s.max_nodes} nodes ({s.limit_text})" for s in fitting
        )
        problems.append(
            Problem(
                f"{key}.nodes",
                job.nodes,
                f"a gang of {job.nodes} pods needs {job.nodes} nodes at once; the "
                f"{job.gpu_class} sources reach at most {best} ({scale})",
            )
        )
    return Gang(job.nodes, tuple(reach.items())), problems


def scale_up_path(source: NodeSource) -> str:
    """What brings a node of `source` for a pending pod, in words (problem messages and the
    report's scale-up line)."""
    if source.scaler == "karpenter":
        return f"Karpenter NodePool `{source.name}` launches nodes, ≈ {source.scale_up_seconds} s"
    if source.scaler == "autoscaler":
        return (
            f"cluster-autoscaler resizes node group `{source.name}`, ≈ {source.scale_up_seconds} s"
        )
    return f"fixed node group `{source.name}` (no scale-up)"


def _zone(
    facts: StackFacts, jf: JobFacts, *, where: Placement, placed: Placed
) -> tuple[Zone, list[Problem]]:
    """Whether the pods share one zone, the placement group their sources use, and the
    gangs a zone-spanning autoscaled group would strand."""
    job, key, pin, efa = jf.job, jf.key, jf.zone_pin, jf.resources.efa_devices
    problems: list[Problem] = []
    sources = (placed.fitting or placed.candidates) if pin is not None and efa else ()
    zone = Zone(
        single=pin is not None,
        pin=pin,
        efa_sources=tuple(sources),
        fsx_conflict=fsx_conflict(facts.cfg, sources, pin),
        efa=bool(efa),
    )
    # Checked on the pod template itself (not on the config that should have produced it): a
    # multi-node EFA job whose pods may spread cannot talk over EFA across the zone line.
    if (pin is not None or (efa and job.nodes > 1)) and not where.single_zone:
        problems.append(
            Problem(
                f"{key}.zones",
                job.zones,
                "a multi-node EFA job must keep its pods in one availability zone (EFA "
                "does not cross zones); the pod template does not confine them",
            )
        )
    if where.single_zone and job.nodes > 1:
        problems += [
            Problem(
                f"{key}.zones",
                job.zones,
                "`any` (a TCP job) or node sources confined to one zone: "
                + scattered_text(source, job.nodes),
            )
            for source in scattered(placed.fitting)
        ]
    return zone, problems


def fsx_conflict(
    cfg: StackConfig, sources: Sequence[NodeSource], pin: int | None
) -> tuple[int, int] | None:
    """(FSx's AZ index, the placement group's) when grouped sources of a pinned EFA job land in
    another zone than the FSx file system its checkpoints go to."""
    zone_index = cfg.network.efa_placement_group.zone_index
    if (
        pin is not None
        and any(s.placement_group for s in sources)
        and cfg.storage.rwx.type == "fsx"
        and pin != zone_index
    ):
        return pin, zone_index
    return None


def scattered(sources: Sequence[NodeSource]) -> list[NodeSource]:
    """Managed groups the cluster-autoscaler resizes across more than one zone: a gang kept in
    one zone cannot count on them. The autoscaler builds an empty group's would-be nodes in the
    Auto Scaling group's first zone (kubernetes/autoscaler@cluster-autoscaler-1.33.6
    cloudprovider/aws/aws_manager.go getAsgTemplate: `az := asg.AvailabilityZones[0]`), so its
    simulation puts the whole gang there and it raises the desired size by the gang; the Auto
    Scaling group then launches the new instances balanced across its zones. The pods whose
    nodes land in another zone stay Pending under the zone podAffinity: another scale-up, same
    spread, while the stray nodes sit idle until scale-down. Upstream's answer is a single-AZ
    group for zone-bound pods (cloudprovider/aws/README.md, "Common Notes and Gotchas"); the
    platform's is `nodeGroups.gpu[i].zoneIndex` (efa_placement.node_group_zone_index).
    Karpenter pools are not affected: Karpenter simulates the zone affinity and launches in
    the zone it picked."""
    return [s for s in sources if s.scaler == "autoscaler" and s.zones > 1]


def scattered_text(source: NodeSource, nodes: int) -> str:
    """Why a gang of `nodes` pods in one zone cannot rely on `source` (see `scattered`)."""
    return (
        f"the {nodes} pods must share one zone, but node group `{source.name}` "
        f"({source.key}) spans {source.zones} zones: the cluster-autoscaler sizes the gang in "
        "its Auto Scaling group's first zone while the group spreads the new nodes across all "
        "of them, so pods whose node lands in another zone stay Pending; confine the group to "
        f"one zone with {source.key}.zoneIndex"
    )


def _storage(
    facts: StackFacts, jf: JobFacts, claim_mode: str
) -> tuple[Claim | None, list[Problem]]:
    """The checkpoint claim, ReadWriteMany when the pods span nodes."""
    job, team = jf.job, jf.team
    if not job.checkpoint.volume:
        return None, []
    claim = storage.checkpoint_claim(team.name)
    rwx = facts.cfg.storage.rwx.type
    found = Claim(team.namespace, claim, claim_mode, storage.RWX_STORAGE_CLASS[rwx])
    if job.nodes > 1 and claim_mode != "ReadWriteMany":
        return found, [
            Problem(
                f"{jf.key}.checkpoint.volume",
                True,
                f"pods on {job.nodes} nodes share {claim}, which is {claim_mode}: it must "
                "be ReadWriteMany",
            )
        ]
    return found, []


def _memory(jf: JobFacts) -> tuple[Memory | None, list[Problem]]:
    """Model states per rank within one GPU (before activations)."""
    job, resources, states = jf.job, jf.resources, jf.model_state_gib
    if states is None or not resources.instance_type:
        return None, []
    row = catalog.instance(resources.instance_type)
    per_gpu = row.gpu_memory_gib / max(1, row.gpus)
    found = Memory(states, per_gpu, job.mode)
    if states <= per_gpu:
        return found, []
    return found, [
        Problem(
            f"{jf.key}.modelParameters",
            job.model_parameters,
            f"{job.mode}: parameters + gradients + optimizer state need {states:.1f} "
            f"GiB per rank, over the {per_gpu:g} GiB of a {row.gpu_model} GPU (before "
            "activations); shard (fsdp, ZeRO-3), offload, or add ranks",
        )
    ]


def network_part(
    facts: StackFacts,
    gang: topology_checks.Gang,
    request: JobTopology | None,
    instance_type: str,
) -> tuple[Network | None, list[Problem]]:
    """The gang's topology request against the sources it may land on (topology.py)."""
    problems = topology_checks.topology_problems(
        gang,
        request,
        zone_count=facts.cfg.network.zone_count,
        opted=list(facts.topologies),
    )
    if request is None:
        return None, problems
    part = Network(
        request=request,
        honours=tuple(
            topology_checks.source_honour(request, s, volcano=gang.volcano) for s in gang.fitting
        ),
        when_full=topology_checks.when_full(request, volcano=gang.volcano),
        effect=topology_checks.level_effect(request.level, request.levels, instance_type),
        volcano=gang.volcano,
    )
    return part, problems


def _network(
    jf: JobFacts, facts: StackFacts, placed: Placed
) -> tuple[Network | None, list[Problem]]:
    job = jf.job
    gang = topology_checks.Gang(
        key=jf.key,
        gpu_class=job.gpu_class,
        nodes=job.nodes,
        volcano=job.scheduler == "volcano",
        asked=job.topology,
        single_zone=jf.placement.single_zone,
        fitting=placed.fitting,
    )
    return network_part(facts, gang, jf.topology, jf.resources.instance_type)


KIND = {"native": "Indexed Job", "kubeflow": "TrainJob", "volcano": "Volcano Job"}
#: The ClusterTrainingRuntimes a platform renders (components/training_jobs/manifests.py
#: cluster_training_runtimes): a TrainJob must name one of them.
PLATFORM_RUNTIMES: Final = frozenset(trainer_runtime_names())


def _trainjob_problems(
    facts: StackFacts,
    jf: JobFacts,
    fit: SourceFit,
    sources: Sequence[NodeSource] | None,
    runtimes: Collection[str],
) -> list[Problem]:
    """A TrainJob's runtime and its pods' tolerations as Kueue leaves them (trainer.py)."""
    return [
        *trainer.runtime_problems(jf.key, jf.job, runtimes),
        *trainer.toleration_problems(
            jf,
            fit.candidates,
            sources if sources is not None else facts.sources,
            facts.provisioners,
        ),
    ]


def training_verdict(
    facts: StackFacts,
    jf: JobFacts,
    *,
    over_quota: bool = False,
    sources: Sequence[NodeSource] | None = None,
    placement: Placement | None = None,
    covered: Sequence[str] = catalog.KUEUE_COVERED_RESOURCES,
    excluded: Sequence[str] = catalog.KUEUE_EXCLUDED_RESOURCE_PREFIXES,
    claim_mode: str = storage.CHECKPOINT_ACCESS_MODE,
    runtimes: Collection[str] = PLATFORM_RUNTIMES,
) -> Verdict:
    """One job's verdict. `over_quota`: the quota rule found the job over its team's quota
    (quota.py reports that). The keyword arguments after it default to what the stack builds;
    tests substitute them. Each concern is one helper above; the problems come in that order."""
    job = jf.job
    requests = dict(jf.requests)
    where = placement or jf.placement
    if job.scheduler == "kueue":
        admission: Admission
        admission, admission_problems = _kueue_admission(
            facts, jf, requests=requests, over_quota=over_quota, covered=covered, excluded=excluded
        )
    else:
        admission, admission_problems = _volcano_admission(facts, jf)
    # The facts' fit unless a test substitutes the sources or the pod's placement.
    fit = (
        jf.fit
        if sources is None and placement is None
        else fit_sources(list(sources if sources is not None else facts.sources), where, requests)
    )
    placed, placement_problems = _placement(jf, where=where, fit=fit)
    trainjob_problems = _trainjob_problems(facts, jf, fit, sources, runtimes)
    gang, scale_problems = _scale_and_gang(jf, placed.fitting)
    zone, zone_problems = _zone(facts, jf, where=where, placed=placed)
    claim, storage_problems = _storage(facts, jf, claim_mode)
    memory, memory_problems = _memory(jf)
    ready, ready_problems = _ready(facts, jf, placed.fitting)
    network, network_problems = _network(jf, facts, placed)
    return Verdict(
        key=jf.key,
        workload=jf.workload,
        kind=KIND[job.launcher],
        admission=admission,
        placement=placed,
        scale_up=ScaleUp(sources=placed.fitting),
        gang=gang,
        awaits=Awaits(launcher=job.launcher, config_map=job.deepspeed is not None),
        storage=claim,
        s3_only=not job.checkpoint.volume and job.checkpoint.s3_prefix is not None,
        memory=memory,
        zone=zone,
        image=jf.image,
        ready=ready,
        network=network,
        network_exclusion=""
        if network is not None
        else facts.network_exclusions.get(job.gpu_class, ""),
        problems=(
            *admission_problems,
            *_namespace_limits(jf, requests),
            *limit_range_problems(jf, jf.team),
            *placement_problems,
            *trainjob_problems,
            *scale_problems,
            *zone_problems,
            *storage_problems,
            *memory_problems,
            *ready_problems,
            *network_problems,
        ),
    )


def validation_verdicts(facts: StackFacts) -> list[Verdict]:
    """The GPU smoke Job per GPU source and the NCCL test
    (components/platform/validation/validation.py pins each to one source by its node-pool
    label)."""
    validation = facts.cfg.validation
    if not validation.enabled:
        return []
    by_name = {s.name: s for s in facts.sources}
    out = _smoke_verdicts(facts.cfg, by_name) if validation.smoke_test else []
    return out + _nccl_verdicts(facts, by_name)


def _smoke_verdicts(cfg: StackConfig, by_name: dict[str, NodeSource]) -> list[Verdict]:
    """One GPU smoke Job per GPU source: the source must be able to hold a node."""
    validation = cfg.validation
    out: list[Verdict] = []
    for source in by_name.values():
        problems: list[Problem] = []
        if source.max_nodes < 1:
            problems.append(
                Problem(
                    "validation.smokeTest",
                    True,
                    f"gpu-smoke-{source.name} runs on {source.name} ({source.key}), which "
                    f"can hold no node ({source.limit_text})",
                )
            )
        out.append(
            Verdict(
                key="validation.smokeTest",
                workload=f"{validation.namespace}/{catalog.gpu_smoke_job_name(source.name)}",
                kind="validation Job",
                admission=ValidationAdmission("unqueued"),
                placement=Placed((source,), (source,)),
                scale_up=ScaleUp(scaler=source.scaler, max_nodes=source.max_nodes),
                gang=Gang(1),
                awaits=Awaits("validation"),
                problems=tuple(problems),
            )
        )
    return out


def _nccl_verdicts(facts: StackFacts, by_name: dict[str, NodeSource]) -> list[Verdict]:
    """The NCCL all-reduce test: a pool to run on, its gang within the pool, its Volcano queue."""
    validation = facts.cfg.validation
    if not validation.nccl_test:
        return []
    pool = facts.cfg.nccl_pool()
    if pool is None:
        # No GPU pool at all: the NCCL test has nowhere to run (a stack with no GPU capacity).
        problem = Problem(
            "validation.ncclTest", True, "a GPU node group or Karpenter GPU pool to run on"
        )
        return [
            Verdict(
                key="validation.nccl",
                workload=f"{validation.namespace}/nccl-all-reduce",
                kind="validation Job",
                admission=ValidationAdmission("no-pool"),
                placement=Placed((), ()),
                scale_up=ScaleUp(),
                gang=Gang(validation.nccl.nodes),
                awaits=Awaits("nothing"),
                problems=(problem,),
            )
        ]
    return [_nccl_verdict(facts, pool, by_name.get(pool.name))]


def _nccl_problems(
    cfg: StackConfig, pool: GpuNodeGroup | KarpenterPool, source: NodeSource | None
) -> tuple[NcclHost | None, list[Problem]]:
    """The test's host type (nccl.py) and what keeps it from running: no type of its pool holds
    a pod, no threshold for that type, a gang over EFA on a group that spans zones, more nodes
    than the pool reaches."""
    nodes = cfg.validation.nccl.nodes
    host = nccl.host(source) if source is not None else None
    problems: list[Problem] = []
    if source is not None and host is None:
        problems.append(
            Problem(
                "validation.nccl.pool",
                pool.name,
                "a GPU source with an instance type whose allocatable holds one NCCL test pod "
                f"(all its GPUs, {catalog.NCCL_POD_CPU} CPU, at least "
                f"{catalog.NCCL_POD_MIN_MEMORY_GIB} GiB): {nccl.shortfall(source)}; its pods "
                "would stay Pending until the Job's deadline",
            )
        )
    override = cfg.validation.nccl.min_bus_bandwidth_gbps
    if host is not None and catalog.nccl_min_bus_bandwidth(host.instance_type, override) is None:
        problems.append(
            Problem(
                "validation.nccl.minBusBandwidthGbps",
                None,
                f"a threshold in GB/s: the catalog has no published all-reduce figure for "
                f"{host.instance_type} (pool {pool.name}, the type its pods land on)",
            )
        )
    if source is not None and host is not None and host.efa_devices and nodes > 1:
        # The test keeps its ranks in one zone over EFA (validation.py nccl_affinity).
        problems += [
            Problem(
                f"{s.key}.zoneIndex", None, "a private-subnet index: " + scattered_text(s, nodes)
            )
            for s in scattered([source])
        ]
    reach = source.max_nodes if source else 0
    if reach < nodes:
        problems.append(
            Problem(
                "validation.nccl.nodes",
                nodes,
                f"the NCCL test needs {nodes} nodes of {pool.name} at once; it can hold "
                f"{reach} ({source.limit_text if source else 'unknown source'})",
            )
        )
    return host, problems


def _nccl_verdict(
    facts: StackFacts, pool: GpuNodeGroup | KarpenterPool, source: NodeSource | None
) -> Verdict:
    """The NCCL all-reduce test on its pool: host type, gang, Volcano queue, zone."""
    validation = facts.cfg.validation
    nodes = validation.nccl.nodes
    host, problems = _nccl_problems(facts.cfg, pool, source)
    sources = (source,) if source is not None else ()
    efa = host is not None and bool(host.efa_devices)
    asked = validation.nccl.topology
    network: Network | None = None
    if source is not None:
        network, network_problems = network_part(
            facts,
            topology_checks.Gang(
                key="validation.nccl",
                gpu_class=source.gpu_class,
                nodes=nodes,
                volcano=True,
                asked=asked,
                single_zone=efa,
                fitting=sources,
            ),
            topology.nccl_topology(asked, source.gpu_class, facts.topologies),
            host.instance_type if host is not None else source.instance_types[0],
        )
        problems += network_problems
    return Verdict(
        key="validation.nccl",
        workload=f"{validation.namespace}/{catalog.nccl_job_name(pool.name)}",
        kind="validation Job",
        admission=ValidationAdmission(
            "nccl",
            min_member=nodes,
            guaranteed=bool(volcano.validation_guarantee(facts.cfg, facts.nccl_host)),
        ),
        placement=Placed(sources, sources, nccl=host, pool=pool.name),
        scale_up=ScaleUp(max_nodes=source.max_nodes if source else 0),
        gang=Gang(nodes),
        awaits=Awaits("validation"),
        # Like multi-node EFA training jobs (components/platform/validation/validation.py
        # nccl_affinity): the test proves the fabric the jobs will use.
        zone=Zone(single=efa, efa_sources=sources if efa else (), efa=efa),
        network=network,
        problems=tuple(problems),
    )


def verdicts(facts: StackFacts, over_quota: frozenset[int] = frozenset()) -> tuple[Verdict, ...]:
    """Every declared workload's verdict: training jobs in config order, then validation.
    `over_quota`: indexes of the jobs the quota rule found over their team's quota."""
    jobs = [training_verdict(facts, jf, over_quota=jf.index in over_quota) for jf in facts.jobs]
    return (*jobs, *validation_verdicts(facts))
