"""Will it run: for every workload the stack declares (training jobs of every launcher, the
validation Jobs) the path from `pulumi up` to running pods, derived from the config alone —

- admission: LocalQueue -> ClusterQueue -> flavor; every requested resource covered by the
  ClusterQueue or excluded from quota; the job within nominal quota + borrowing (quota.py);
- placement: node sources (nodes.py) whose labels, taints and allocatable fit the pod, incl.
  `nvidia.com/gpu` and `vpc.amazonaws.com/efa`;
- scale-up: which controller brings the nodes, up to which limit;
- gang: nodes x pods within what the sources can hold; one zone for multi-node EFA jobs;
- storage: the checkpoint claim binds and is ReadWriteMany when pods span nodes;
- memory: model states per rank within GPU memory (when `modelParameters` is given);
- pods ready: Kueue's waitForPodsReady timeout outlasts the slowest path from admission to Ready
  pods on the job's sources with its own image (readiness.py);
- the NCCL test: a type of its pool holds its pods, which are sized for it (nccl.py);
- what `pulumi up` waits for.

A workload that cannot run is a config error naming its key (`trainingJobs[i]`) and the reason.
Pure: config in, verdicts out; the figures come from facts.py, Volcano's gates from volcano.py.

Why this module is long: it is the whole model of one verdict — one small helper per concern
of a training job (admission, namespace limits, placement, scale-up and gang, zone, storage,
memory) and the validation workloads' verdicts; per-job figures (pod resources, placement,
the sources that fit, zone pin, model-state memory) come from facts.JobFacts, the matching
helpers from fit.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from components import catalog
from components.analysis import efa_placement, nccl, readiness, storage, volcano
from components.analysis.facts import stack_facts
from components.analysis.fit import SourceFit, fit_sources
from components.analysis.nodes import NodeSource
from components.analysis.placement import Placement
from components.analysis.resources import JobResources
from components.config import (
    GpuNodeGroup,
    KarpenterPool,
    Problem,
    StackConfig,
    TeamConfig,
    TrainingJobConfig,
    gpus_of_class,
)


@dataclass(frozen=True)
class Verdict:
    """Whether one workload can run, and the facts behind the answer."""

    key: str
    workload: str
    kind: str
    admission: str
    placement: str
    scale_up: str
    gang: str
    storage: str
    awaits: str
    memory: str = ""
    zone: str = ""
    #: Where the image digest comes from (images.ImageSource.describe).
    image: str = ""
    #: Kueue jobs: the slowest path from admission to Ready pods against waitForPodsReady.
    ready: str = ""
    problems: tuple[Problem, ...] = field(default_factory=tuple)

    @property
    def runnable(self) -> bool:
        return not self.problems


def uncovered(
    requests: dict[str, float],
    covered: Sequence[str] = catalog.KUEUE_COVERED_RESOURCES,
    excluded: Sequence[str] = catalog.KUEUE_EXCLUDED_RESOURCE_PREFIXES,
) -> list[str]:
    """Requested resources Kueue would block on: neither covered nor excluded by prefix."""
    return sorted(
        name
        for name, amount in requests.items()
        if amount and name not in covered and not any(name.startswith(p) for p in excluded)
    )


def _awaits(job: TrainingJobConfig) -> str:
    extra = "ConfigMap (no await), " if job.deepspeed is not None else ""
    if job.launcher == "native":
        return (
            f"{extra}headless Service (object only) and the Job with "
            "`pulumi.com/skipAwait`: `up` never waits for the run"
        )
    kind = "TrainJob" if job.launcher == "kubeflow" else "Volcano Job"
    return f"{extra}{kind}: a custom resource, created and not awaited"


Found = tuple[str, list[Problem]]


def _admission(
    cfg: StackConfig,
    key: str,
    job: TrainingJobConfig,
    team: TeamConfig,
    *,
    requests: dict[str, float],
    flavors: Sequence[str],
    quota_problems: Sequence[Problem],
    covered: Sequence[str],
    excluded: Sequence[str],
) -> Found:
    """Kueue (LocalQueue -> ClusterQueue -> `flavors`, covered resources) or Volcano (enqueue
    and allocate against the team queue: volcano.py)."""
    problems: list[Problem] = []
    if job.scheduler != "kueue":
        gang_requests = {name: amount * job.nodes for name, amount in requests.items()}
        path = volcano.admission(cfg, team, gang_requests)
        team_index = cfg.teams.index(team)
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
        return (
            f"Volcano queue `{team.name}`, gang minAvailable {job.nodes}; {path.text}",
            problems,
        )
    admission = (
        f"LocalQueue `{team.name}` -> ClusterQueue `{team.name}` -> flavor "
        f"{' / '.join(f'`{f}`' for f in flavors) or 'none'}; "
        + ("fits nominal + borrowing" if not quota_problems else "over quota")
    )
    blocked = uncovered(requests, covered, excluded)
    if blocked:
        problems.append(
            Problem(
                f"{key}.efa" if catalog.EFA_RESOURCE in blocked else key,
                job.efa,
                f"Kueue would keep the job pending: it requests {', '.join(blocked)}, which "
                f"ClusterQueue {team.name} does not cover ({', '.join(covered)}) and the "
                "Kueue config does not exclude (resources.excludeResourcePrefixes)",
            )
        )
    else:
        admission += f"; requests {', '.join(sorted(requests))} covered or excluded"
    checked = stack_facts(cfg).provisioning_checked
    if any((job.gpu_class, c) in checked for c in job.capacity_types):
        admission += "; " + provisioning_path(cfg, job)
    return admission, problems


def provisioning_path(cfg: StackConfig, job: TrainingJobConfig) -> str:
    """What Kueue's ProvisioningRequest check does for a job on an autoscaled node-group flavor
    (components/platform/scheduling/scheduling.py has the sources)."""
    scaler = cfg.cluster_autoscaler
    return (
        "on a node-group flavor the admission check `node-group-provisioning` holds the "
        "workload: Kueue creates a ProvisioningRequest (best-effort-atomic-scale-up) for its "
        f"{job.nodes} pods, the cluster-autoscaler raises the group and marks it Provisioned, "
        "then Kueue admits. On AWS the increase is not atomic (the AWS provider does not "
        "implement AtomicIncreaseSize at 1.33.6) and Provisioned means the desired size was "
        "raised, not that every node joined. If EC2 delivers only part of the gang, the "
        f"missing nodes count as a failed scale-up after {scaler.max_node_provision_time} and "
        "the group backs off; the pods that got nodes wait at rendezvous, Kueue's "
        f"waitForPodsReady ({stack_facts(cfg).pods_ready.timeout}, longer than that "
        "provisioning bound: analysis/readiness.py) evicts and requeues "
        "the workload, and the nodes it leaves empty are removed after "
        f"{scaler.scale_down_unneeded_time}"
    )


def _ready(
    cfg: StackConfig, key: str, job: TrainingJobConfig, fitting: Sequence[NodeSource]
) -> Found:
    """Whether Kueue's waitForPodsReady timeout outlasts the slowest path from admission to
    Ready pods on the sources the job can land on, with its own image (readiness.py). The
    platform's timeout covers the default image size; a job's larger image may not."""
    if job.scheduler != "kueue" or not fitting:
        return "", []
    timeouts = stack_facts(cfg).pods_ready
    image = job.image_size_gib or cfg.training.image_size_gib
    slowest = max(
        (readiness.ready_path(cfg, s, image) for s in fitting), key=lambda path: path.total_s
    )
    text = (
        f"all pods Ready at most {slowest.total_s} s after admission ({slowest.text()}); "
        f"Kueue waitForPodsReady.timeout {timeouts.timeout}"
    )
    if slowest.total_s <= timeouts.timeout_s:
        return text, []
    return text, [
        Problem(
            f"{key}.imageSizeGib",
            job.image_size_gib,
            f"an image Ready within the platform's waitForPodsReady.timeout "
            f"({timeouts.timeout}): {slowest.text()}, so Kueue would evict and requeue the job on "
            "every start that takes that long (raise the platform's training.imageSizeGib, "
            "which the timeout is derived from, or its scheduling.waitForPodsReady.timeout)",
        )
    ]


def _namespace_limits(
    key: str, job: TrainingJobConfig, team: TeamConfig, requests: dict[str, float]
) -> list[Problem]:
    """The namespace ResourceQuota (and, for Volcano, the queue's capability: the same figures,
    components/platform/tenancy/teams.py) must hold the whole gang, or its pods are refused."""
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
                    f"{key}.nodes",
                    job.nodes,
                    f"the gang requests {total:g} {what}, over team {team.name}'s namespace "
                    f"limit of {cap:g} (ResourceQuota"
                    + (" and Volcano queue capability)" if job.scheduler == "volcano" else ")"),
                )
            )
    return problems


@dataclass(frozen=True)
class _Placed:
    """Where the job's pods can go: sources matching its affinity and taints, and those whose
    allocatable holds a pod."""

    candidates: list[NodeSource]
    fitting: list[NodeSource]
    text: str
    problems: list[Problem]


def _placement(
    key: str, job: TrainingJobConfig, resources: JobResources, *, where: Placement, fit: SourceFit
) -> _Placed:
    problems: list[Problem] = []
    candidates = list(fit.candidates)
    kinds = {s.provisioner for s in candidates}
    if job.scheduler != "kueue" and len(kinds) > 1:
        # Kueue pods carry their flavor's provisioner label; these carry only the affinity.
        problems.append(
            Problem(
                f"{key}.capacity",
                job.capacity,
                "capacity one provisioner serves: the pods match managed node groups ("
                + ", ".join(s.name for s in candidates if s.provisioner == "node-group")
                + ") and Karpenter NodePools ("
                + ", ".join(s.name for s in candidates if s.provisioner == "karpenter")
                + "); the cluster-autoscaler and Karpenter would each bring a node for the "
                "same pending pod (or queue it with Kueue: each flavor selects one)",
            )
        )
    misses = fit.misses
    fitting = list(fit.fitting)
    want = ", ".join(f"{k} in {'/'.join(v)}" for k, v in sorted(where.required.items()))
    if not candidates:
        problems.append(
            Problem(
                f"{key}.gpuClass",
                job.gpu_class,
                f"no node source matches the pod's node affinity ({want}) and taints",
            )
        )
    elif not fitting:
        efa_short = resources.efa_devices and all(
            max(a.efa for a in s.allocatable.values()) < resources.efa_devices for s in candidates
        )
        detail = "; ".join(f"{name}: {miss}" for name, miss in misses.items())
        problems.append(
            Problem(
                f"{key}.efa" if efa_short else f"{key}.gpuClass",
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
    text = (
        ", ".join(f"`{s.name}` ({s.kind})" for s in fitting)
        or ", ".join(f"`{s.name}` does not fit" for s in candidates)
        or "no source"
    )
    if resources.efa_devices and fitting:
        text += (
            f"; EFA nodes: {resources.efa_devices} `{catalog.EFA_RESOURCE}` per pod, allocatable "
            + ", ".join(
                f"{max(a.efa for a in s.allocatable.values())} on `{s.name}`" for s in fitting
            )
        )
    return _Placed(candidates, fitting, text, problems)


def _scale_and_gang(
    key: str, job: TrainingJobConfig, fitting: Sequence[NodeSource]
) -> tuple[str, str, list[Problem]]:
    """What brings the nodes, and whether the sources hold the whole gang at once."""
    problems: list[Problem] = []
    scalable = [s for s in fitting if s.max_nodes > 0]
    scale_text = "; ".join(f"{s.path}, up to {s.max_nodes} nodes ({s.limit_text})" for s in fitting)
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
    gang = f"{job.nodes} nodes x 1 pod; sources reach " + ", ".join(
        f"{n} {c}" for c, n in reach.items()
    )
    if scalable and best < job.nodes:
        problems.append(
            Problem(
                f"{key}.nodes",
                job.nodes,
                f"a gang of {job.nodes} pods needs {job.nodes} nodes at once; the "
                f"{job.gpu_class} sources reach at most {best} ({scale_text})",
            )
        )
    return scale_text, gang, problems


def _zone(
    cfg: StackConfig,
    key: str,
    job: TrainingJobConfig,
    *,
    resources: JobResources,
    where: Placement,
    placed: _Placed,
    pin: int | None,
) -> Found:
    problems: list[Problem] = []
    zone = "any zone"
    if pin is not None:
        zone = f"one zone (required podAffinity on {catalog.ZONE_LABEL}; AZ index {pin} if pinned)"
        if resources.efa_devices:
            zone += "; " + placement_group_text(cfg, placed.fitting or placed.candidates, pin)
    # Checked on the pod template itself (not on the config that should have produced it): a
    # multi-node EFA job whose pods may spread cannot talk over EFA across the zone line.
    if (pin is not None or (resources.efa_devices and job.nodes > 1)) and not where.single_zone:
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
    cfg: StackConfig, key: str, job: TrainingJobConfig, team: TeamConfig, claim_mode: str
) -> Found:
    problems: list[Problem] = []
    if not job.checkpoint.volume:
        return ("no volume (S3 only)" if job.checkpoint.s3_prefix else "none"), problems
    claim = storage.checkpoint_claim(team.name)
    rwx = cfg.storage.rwx.type
    text = (
        f"PVC `{team.namespace}/{claim}` ({claim_mode}, class "
        f"`{storage.RWX_STORAGE_CLASS[rwx]}`, {storage.VOLUME_BINDING_MODE} binding: Bound "
        "during `up`)"
    )
    if job.nodes > 1 and claim_mode != "ReadWriteMany":
        problems.append(
            Problem(
                f"{key}.checkpoint.volume",
                True,
                f"pods on {job.nodes} nodes share {claim}, which is {claim_mode}: it must "
                "be ReadWriteMany",
            )
        )
    return text, problems


def _memory(
    key: str, job: TrainingJobConfig, resources: JobResources, states: float | None
) -> Found:
    problems: list[Problem] = []
    if states is None or not resources.instance_type:
        return "", problems
    row = catalog.instance(resources.instance_type)
    per_gpu = row.gpu_memory_gib / max(1, row.gpus)
    if states > per_gpu:
        problems.append(
            Problem(
                f"{key}.modelParameters",
                job.model_parameters,
                f"{job.mode}: parameters + gradients + optimizer state need {states:.1f} "
                f"GiB per rank, over the {per_gpu:g} GiB of a {row.gpu_model} GPU (before "
                "activations); shard (fsdp, ZeRO-3), offload, or add ranks",
            )
        )
    return f"{states:.1f} GiB model states per rank of {per_gpu:g} GiB ({job.mode})", problems


def training_verdict(
    cfg: StackConfig,
    index: int,
    job: TrainingJobConfig,
    *,
    sources: Sequence[NodeSource] | None = None,
    placement: Placement | None = None,
    covered: Sequence[str] = catalog.KUEUE_COVERED_RESOURCES,
    excluded: Sequence[str] = catalog.KUEUE_EXCLUDED_RESOURCE_PREFIXES,
    claim_mode: str = storage.CHECKPOINT_ACCESS_MODE,
) -> Verdict | None:
    """One job's verdict; None when its team or GPU class is unknown (jobs.py reports that).
    The keyword arguments default to what the stack builds; tests substitute them. Each
    concern is one helper above; the problems come in that order, quota problems first."""
    key = f"trainingJobs[{index}]"
    facts = stack_facts(cfg)
    team = facts.team(job.team)
    if team is None or gpus_of_class(job.gpu_class) is None:
        return None
    all_sources = list(sources if sources is not None else facts.sources)
    derived = facts.job(job)
    resources = derived.resources
    requests = dict(derived.requests)
    where = placement or derived.placement
    quota_problems = facts.quota_problems(index, job, team) if job.scheduler == "kueue" else []

    admission, admission_problems = _admission(
        cfg,
        key,
        job,
        team,
        requests=requests,
        flavors=derived.flavors,
        quota_problems=quota_problems,
        covered=covered,
        excluded=excluded,
    )
    # The facts' fit unless a test substitutes the sources or the pod's placement.
    fit = (
        derived.fit
        if sources is None and placement is None
        else fit_sources(all_sources, where, requests)
    )
    placed = _placement(key, job, resources, where=where, fit=fit)
    scale_text, gang, scale_problems = _scale_and_gang(key, job, placed.fitting)
    zone, zone_problems = _zone(
        cfg, key, job, resources=resources, where=where, placed=placed, pin=derived.zone_pin
    )
    storage_text, storage_problems = _storage(cfg, key, job, team, claim_mode)
    memory, memory_problems = _memory(key, job, resources, derived.model_state_gib)
    ready, ready_problems = _ready(cfg, key, job, placed.fitting)
    kind = {"native": "Indexed Job", "kubeflow": "TrainJob", "volcano": "Volcano Job"}[job.launcher]
    return Verdict(
        key=key,
        workload=f"{team.namespace}/{job.name}",
        kind=kind,
        admission=admission,
        placement=placed.text,
        scale_up=scale_text or "none",
        gang=gang,
        storage=storage_text,
        awaits=_awaits(job),
        memory=memory,
        zone=zone,
        image=derived.image.describe(cfg.cluster.name) if derived.image else "",
        ready=ready,
        problems=(
            *quota_problems,
            *admission_problems,
            *_namespace_limits(key, job, team, requests),
            *placed.problems,
            *scale_problems,
            *zone_problems,
            *storage_problems,
            *memory_problems,
            *ready_problems,
        ),
    )


def validation_verdicts(
    cfg: StackConfig, sources: Sequence[NodeSource] | None = None
) -> list[Verdict]:
    """The GPU smoke Job per GPU source and the NCCL test
    (components/platform/validation/validation.py pins each to one source by its node-pool
    label)."""
    validation = cfg.validation
    if not validation.enabled:
        return []
    by_name = {s.name: s for s in (sources if sources is not None else stack_facts(cfg).sources)}
    awaits = "Job with `pulumi.com/skipAwait`: `up` never waits for it"
    out = _smoke_verdicts(cfg, by_name, awaits) if validation.smoke_test else []
    return out + _nccl_verdicts(cfg, by_name, awaits)


def _smoke_verdicts(cfg: StackConfig, by_name: dict[str, NodeSource], awaits: str) -> list[Verdict]:
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
                workload=f"{validation.namespace}/gpu-smoke-{source.name}",
                kind="validation Job",
                admission="none (no queue label: Kueue leaves it alone)",
                placement=f"`{source.name}` ({source.kind})",
                scale_up=f"{source.scaler} up to {source.max_nodes} nodes",
                gang="1 node",
                storage="none",
                awaits=awaits,
                problems=tuple(problems),
            )
        )
    return out


def _nccl_verdicts(cfg: StackConfig, by_name: dict[str, NodeSource], awaits: str) -> list[Verdict]:
    """The NCCL all-reduce test: a pool to run on, its gang within the pool, its Volcano queue."""
    validation = cfg.validation
    out: list[Verdict] = []
    pool = cfg.nccl_pool() if validation.nccl_test else None
    if validation.nccl_test and pool is None:
        # No GPU pool at all: the NCCL test has nowhere to run (a stack with no GPU capacity).
        problem = Problem(
            "validation.ncclTest", True, "a GPU node group or Karpenter GPU pool to run on"
        )
        out.append(
            Verdict(
                key="validation.nccl",
                workload=f"{validation.namespace}/nccl-all-reduce",
                kind="validation Job",
                admission="none",
                placement="no GPU source",
                scale_up="none",
                gang=f"{validation.nccl.nodes} nodes",
                storage="none",
                awaits="nothing: no Job is rendered without a pool",
                problems=(problem,),
            )
        )
    if validation.nccl_test and pool is not None:
        out.append(_nccl_verdict(cfg, pool, by_name.get(pool.name), awaits))
    return out


def _nccl_problems(
    cfg: StackConfig, pool: GpuNodeGroup | KarpenterPool, source: NodeSource | None
) -> tuple[nccl.NcclHost | None, list[Problem]]:
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
    cfg: StackConfig,
    pool: GpuNodeGroup | KarpenterPool,
    source: NodeSource | None,
    awaits: str,
) -> Verdict:
    """The NCCL all-reduce test on its pool: host type, gang, Volcano queue, zone."""
    validation = cfg.validation
    nodes = validation.nccl.nodes
    host, problems = _nccl_problems(cfg, pool, source)
    placement = f"`{pool.name}`"
    if host is not None:
        placement += (
            f" on {host.instance_type} ({host.cpu:g} CPU, {host.memory_gib} GiB, {host.gpus} "
            f"GPU, {host.efa_devices} EFA per pod: components/analysis/nccl.py)"
        )
    return Verdict(
        key="validation.nccl",
        workload=f"{validation.namespace}/nccl-all-reduce",
        kind="validation Job",
        admission=f"Volcano PodGroup, minMember {nodes}, no minResources (enqueue "
        "lets it through before its nodes exist); queue "
        + (
            f"`{volcano.VALIDATION_QUEUE}` guarantees its pods (allocate places them "
            "ahead of the team queues' guarantees)"
            if volcano.validation_guarantee(cfg)
            else "`default` (no queue has a guarantee: it shares all capacity)"
        ),
        placement=placement,
        scale_up=f"up to {source.max_nodes if source else 0} nodes",
        gang=f"{nodes} nodes",
        storage="none",
        awaits=awaits,
        # Like multi-node EFA training jobs (components/platform/validation/validation.py
        # nccl_affinity): the test proves the fabric the jobs will use.
        zone=(
            f"one zone over EFA (required podAffinity on {catalog.ZONE_LABEL}); "
            + placement_group_text(cfg, [source] if source else [], None)
            if host is not None and host.efa_devices
            else "any zone (no EFA)"
        ),
        problems=tuple(problems),
    )


def verdicts(cfg: StackConfig) -> list[Verdict]:
    """Every declared workload's verdict: training jobs in config order, then validation —
    judged once per config (the config check and the report read the same verdicts)."""
    return list(stack_facts(cfg).once("verdicts", _judge))


def _judge(cfg: StackConfig) -> tuple[Verdict, ...]:
    out = [
        verdict
        for index, job in enumerate(cfg.training_jobs)
        if (verdict := training_verdict(cfg, index, job)) is not None
    ]
    return (*out, *validation_verdicts(cfg))


def check_will_it_run(cfg: StackConfig) -> list[Problem]:
    """The problems of the rules above (quota problems come from jobs.py already)."""
    quota_keys: set[tuple[str, str]] = set()
    facts = stack_facts(cfg)
    for index, job in enumerate(cfg.training_jobs):
        team = facts.team(job.team)
        if team is not None and job.scheduler == "kueue" and gpus_of_class(job.gpu_class):
            quota_keys.update((p[0], p[2]) for p in facts.quota_problems(index, job, team))
    found: list[Problem] = []
    for verdict in verdicts(cfg):
        for problem in verdict.problems:
            if (problem[0], problem[2]) not in quota_keys and problem not in found:
                found.append(problem)
    return found


def placement_group_text(cfg: StackConfig, sources: Sequence[NodeSource], pin: int | None) -> str:
    """Which placement group each source of a multi-node EFA workload launches into, and how
    that squares with its single-zone podAffinity: a source in the cluster placement group has
    one subnet (`network.efaPlacementGroup.zoneIndex`), so the podAffinity's zone and the
    group's zone coincide by construction; a source outside it (a reserved pool whose ODCR was
    not created in the group) lands in its reservation's AZ and only the podAffinity keeps the
    gang together. Kueue admits a job's pods into one flavor (one capacity type), so one job
    never mixes grouped and ungrouped sources (components/analysis/efa_placement.py)."""
    parts = [
        f"`{s.name}`: "
        + efa_placement.describe(cfg, bool(s.placement_group), capacity_type=s.capacity_type)
        for s in sources
    ]
    zone_index = cfg.network.efa_placement_group.zone_index
    if (
        pin is not None
        and any(s.placement_group for s in sources)
        and cfg.storage.rwx.type == "fsx"
        and pin != zone_index
    ):
        parts.append(
            f"FSx is in AZ index {pin}, the placement group in AZ index {zone_index}: "
            "checkpoint traffic crosses zones (set network.efaPlacementGroup.zoneIndex to "
            "storage.rwx's subnet)"
        )
    return "; ".join(parts) or "no placement group"
