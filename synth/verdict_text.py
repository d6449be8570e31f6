"""The will-it-run verdicts in words: the report's rendering of the typed verdicts
(components/analysis/willrun.py). The analysis keeps facts and findings; what a reviewer reads
is written here, at the edge."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from components import catalog
from components.analysis import efa_placement, storage, volcano
from components.analysis.images import ImageSource
from components.analysis.nodes import NodeSource
from components.analysis.willrun import (
    Awaits,
    Claim,
    KueueAdmission,
    Network,
    Placed,
    Provisioning,
    ValidationAdmission,
    Verdict,
    VolcanoAdmission,
    Zone,
    scale_up_path,
)
from components.config import StackConfig
from components.config.images import TRAINER_REPOSITORY

SKIP_AWAIT = "Job with `pulumi.com/skipAwait`: `up` never waits for it"


@dataclass(frozen=True)
class VerdictText:
    """One verdict's lines, as the report prints them."""

    admission: str
    placement: str
    scale_up: str
    gang: str
    storage: str
    awaits: str
    memory: str = ""
    zone: str = ""
    image: str = ""
    ready: str = ""
    network: str = ""


def image_text(source: ImageSource, cluster: str) -> str:
    """Where a job's digest comes from, in one line."""
    if source.kind == "built":
        return (
            "the reference trainer, built by the platform stack's deploy: images/trainer "
            f"pushed to ECR `{cluster}/{TRAINER_REPOSITORY}`, run by the digest the push "
            "returns"
        )
    if source.kind == "resolved" and source.ecr is not None:
        what = "the reference trainer, " if source.trainer else ""
        return (
            f"{what}resolved at deploy: ECR `{source.ecr.repository}:{source.ecr.tag}` to the "
            "digest the registry holds (the preview fails naming the tag if it is absent)"
        )
    return f"given by digest: `{source.reference}`"


def provisioning_text(path: Provisioning) -> str:
    """What Kueue's ProvisioningRequest check does for a job on an autoscaled node-group flavor
    (components/platform/scheduling/scheduling.py has the sources)."""
    return (
        "on a node-group flavor the admission check `node-group-provisioning` holds the "
        "workload: Kueue creates a ProvisioningRequest (best-effort-atomic-scale-up) for its "
        f"{path.nodes} pods, the cluster-autoscaler raises the group and marks it Provisioned, "
        "then Kueue admits. On AWS the increase is not atomic (the AWS provider does not "
        "implement AtomicIncreaseSize at 1.33.6) and Provisioned means the desired size was "
        "raised, not that every node joined. If EC2 delivers only part of the gang, the "
        f"missing nodes count as a failed scale-up after {path.max_node_provision_time} and "
        "the group backs off; the pods that got nodes wait at rendezvous, Kueue's "
        f"waitForPodsReady ({path.pods_ready_timeout}, longer than that "
        "provisioning bound: analysis/readiness.py) evicts and requeues "
        "the workload, and the nodes it leaves empty are removed after "
        f"{path.scale_down_unneeded_time}"
    )


def volcano_path_text(path: volcano.Admission) -> str:
    """A Volcano PodGroup's way from Pending to bound pods."""
    if path.enqueue:
        gate = (
            f"enqueue: PodGroup minResources ({volcano.describe(path.min_resources)}) within "
            f"queue `{path.queue}`'s guarantee with no node up -> Inqueue -> the job "
            "controller creates the pods"
        )
    else:
        gate = (
            "no enqueue action: allocate moves the PodGroup to Inqueue at once -> the job "
            "controller creates the pods"
        )
    return (
        f"{gate}; pods Unschedulable -> nodes launched for the whole gang -> allocate binds "
        "all minAvailable pods at once (gang)"
    )


def admission_text(admission: KueueAdmission | VolcanoAdmission | ValidationAdmission) -> str:
    if isinstance(admission, VolcanoAdmission):
        return (
            f"Volcano queue `{admission.queue}`, gang minAvailable {admission.min_available}; "
            + volcano_path_text(admission.path)
        )
    if isinstance(admission, ValidationAdmission):
        if admission.kind == "unqueued":
            return "none (no queue label: Kueue leaves it alone)"
        if admission.kind == "no-pool":
            return "none"
        return (
            f"Volcano PodGroup, minMember {admission.min_member}, no minResources (enqueue "
            "lets it through before its nodes exist); queue "
            + (
                f"`{volcano.VALIDATION_QUEUE}` guarantees its pods (allocate places them "
                "ahead of the team queues' guarantees)"
                if admission.guaranteed
                else "`default` (no queue has a guarantee: it shares all capacity)"
            )
        )
    text = (
        f"LocalQueue `{admission.queue}` -> ClusterQueue `{admission.queue}` -> flavor "
        f"{' / '.join(f'`{f}`' for f in admission.flavors) or 'none'}; "
        + ("fits nominal + borrowing" if not admission.over_quota else "over quota")
    )
    if not admission.uncovered:
        text += f"; requests {', '.join(admission.requests)} covered or excluded"
    if admission.provisioning is not None:
        text += "; " + provisioning_text(admission.provisioning)
    return text


def placement_text(placed: Placed) -> str:
    """The sources that fit (or the matching ones that do not), the EFA devices per pod."""
    if placed.pool:  # the NCCL test's pool
        text = f"`{placed.pool}`"
        host = placed.nccl
        if host is not None:
            text += (
                f" on {host.instance_type} ({host.cpu:g} CPU, {host.memory_gib} GiB, {host.gpus} "
                f"GPU, {host.efa_devices} EFA per pod: components/analysis/nccl.py)"
            )
        return text
    text = (
        ", ".join(f"`{s.name}` ({s.kind})" for s in placed.fitting)
        or ", ".join(f"`{s.name}` does not fit" for s in placed.candidates)
        or "no source"
    )
    if placed.efa_devices and placed.fitting:
        text += (
            f"; EFA nodes: {placed.efa_devices} `{catalog.EFA_RESOURCE}` per pod, allocatable "
            + ", ".join(f"{s.efa_per_node} on `{s.name}`" for s in placed.fitting)
        )
    return text


def placement_group_text(cfg: StackConfig, sources: Sequence[NodeSource], zone: Zone) -> str:
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
    if zone.fsx_conflict is not None:
        pin, zone_index = zone.fsx_conflict
        parts.append(
            f"FSx is in AZ index {pin}, the placement group in AZ index {zone_index}: "
            "checkpoint traffic crosses zones (set network.efaPlacementGroup.zoneIndex to "
            "storage.rwx's subnet)"
        )
    return "; ".join(parts) or "no placement group"


def zone_text(cfg: StackConfig, zone: Zone | None, validation: bool) -> str:
    if zone is None:
        return ""
    if validation:
        if not zone.efa:
            return "any zone (no EFA)"
        return (
            f"one zone over EFA (required podAffinity on {catalog.ZONE_LABEL}); "
            + placement_group_text(cfg, zone.efa_sources, zone)
        )
    if zone.pin is None:
        return "any zone"
    text = f"one zone (required podAffinity on {catalog.ZONE_LABEL}; AZ index {zone.pin} if pinned)"
    if zone.efa:
        text += "; " + placement_group_text(cfg, zone.efa_sources, zone)
    return text


def scale_up_text(verdict: Verdict) -> str:
    scale = verdict.scale_up
    if scale.sources:
        return "; ".join(
            f"{scale_up_path(s)}, up to {s.max_nodes} nodes ({s.limit_text})" for s in scale.sources
        )
    if scale.scaler:
        return f"{scale.scaler} up to {scale.max_nodes} nodes"
    if scale.max_nodes is not None:
        return f"up to {scale.max_nodes} nodes"
    return "none"


def gang_text(verdict: Verdict) -> str:
    gang = verdict.gang
    admission = verdict.admission
    if isinstance(admission, ValidationAdmission):
        return "1 node" if admission.kind == "unqueued" else f"{gang.nodes} nodes"
    return f"{gang.nodes} nodes x 1 pod; sources reach " + ", ".join(
        f"{n} {c}" for c, n in gang.reach
    )


def storage_text(claim: Claim | None, s3_only: bool) -> str:
    if claim is None:
        return "no volume (S3 only)" if s3_only else "none"
    return (
        f"PVC `{claim.namespace}/{claim.claim}` ({claim.mode}, class "
        f"`{claim.storage_class}`, {storage.VOLUME_BINDING_MODE} binding: Bound "
        "during `up`)"
    )


def awaits_text(awaits: Awaits) -> str:
    if awaits.launcher == "validation":
        return SKIP_AWAIT
    if awaits.launcher == "nothing":
        return "nothing: no Job is rendered without a pool"
    extra = "ConfigMap (no await), " if awaits.config_map else ""
    if awaits.launcher == "native":
        return (
            f"{extra}headless Service (object only) and the Job with "
            "`pulumi.com/skipAwait`: `up` never waits for the run"
        )
    kind = "TrainJob" if awaits.launcher == "kubeflow" else "Volcano Job"
    return f"{extra}{kind}: a custom resource, created and not awaited"


def network_text(network: Network | None, exclusion: str, gpu_class: str) -> str:
    """The network block a gang asks for: the request and how it is rendered, the sources that
    can honour it, what happens when no block has room, the expected effect; or why its class
    keeps today's placement (components/analysis/topology.py, docs/topology.md)."""
    if network is None:
        why = exclusion or "not in scheduling.topology.gpuClasses"
        return f"not placed by the network ({gpu_class}: {why}); placed as the gang line says"
    request = network.request
    asked = f"`{request.mode}`" + (f" at `{request.level}`" if request.level else "")
    if network.volcano:
        rendered = request.volcano_network_topology()
        fields = ", ".join(f"{k}: {v}" for k, v in (rendered or {}).items())
        how = f"Volcano `networkTopology: {{{fields}}}`" if rendered else "no networkTopology"
    else:
        how = ", ".join(f"`{k}: {v}`" for k, v in request.kueue_annotations().items())
    origin = f"default: {request.why}" if request.default else "asked"
    honours = "; ".join(f"`{h.source}` ({h.scaler}) {h.honours}: {h.how}" for h in network.honours)
    return (
        f"{asked} on Topology `{gpu_class}` ({' > '.join(request.levels)}) as {how} ({origin}); "
        f"sources: {honours or 'none'}; when no block has room: {network.when_full}; expected "
        f"effect: {network.effect.text}"
    )


def render(cfg: StackConfig, verdict: Verdict) -> VerdictText:
    """`verdict` in the report's words."""
    validation = isinstance(verdict.admission, ValidationAdmission)
    memory = verdict.memory
    ready = verdict.ready
    return VerdictText(
        admission=admission_text(verdict.admission),
        placement=placement_text(verdict.placement)
        if not (validation and verdict.admission.kind == "no-pool")  # type: ignore[union-attr]
        else "no GPU source",
        scale_up=scale_up_text(verdict),
        gang=gang_text(verdict),
        storage=storage_text(verdict.storage, verdict.s3_only),
        awaits=awaits_text(verdict.awaits),
        memory=(
            f"{memory.states_gib:.1f} GiB model states per rank of {memory.per_gpu_gib:g} GiB "
            f"({memory.mode})"
            if memory is not None
            else ""
        ),
        zone=zone_text(cfg, verdict.zone, validation),
        image=image_text(verdict.image, cfg.cluster.name) if verdict.image else "",
        ready=(
            f"all pods Ready at most {ready.slowest.total_s} s after admission "
            f"({ready.slowest.text()}); Kueue waitForPodsReady.timeout {ready.timeout}"
            if ready is not None
            else ""
        ),
        network=_network_line(cfg, verdict),
    )


def _network_line(cfg: StackConfig, verdict: Verdict) -> str:
    """A training job's network line (always), the NCCL test's when it asks for a block."""
    if verdict.key.startswith("trainingJobs["):
        index = int(verdict.key.removeprefix("trainingJobs[").split("]", 1)[0])
        if index < len(cfg.training_jobs):
            return network_text(
                verdict.network, verdict.network_exclusion, cfg.training_jobs[index].gpu_class
            )
    if verdict.network is not None and verdict.placement.fitting:
        return network_text(
            verdict.network, verdict.network_exclusion, verdict.placement.fitting[0].gpu_class
        )
    return ""
