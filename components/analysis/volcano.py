"""Volcano's gates between "Volcano Job declared" and "pod a provisioner sees", modelled on
volcano-sh/volcano at the pinned v1.15.1 (tag commit 0a56ed33), and the team queues' figures
that make them pass on capacity that scales from zero.

What the upstream code does (paths at v1.15.1):

1. The job controller creates a Volcano Job's PodGroup with `minResources` = the requests of
   its first `minAvailable` pods (`pkg/controllers/job/job_controller_actions.go`
   `calcPGMinResources`) and creates the pods only once the PodGroup has left `Pending`
   (`syncJob`: `pg.Status.Phase != "" && != Pending` sets `syncTask`).
2. With `enqueue` among the scheduler's actions, a PodGroup leaves `Pending` only when every
   JobEnqueueable plugin permits it (`pkg/scheduler/actions/enqueue/enqueue.go`; a PodGroup
   WITHOUT `minResources` is enqueued unconditionally). Of the platform's plugins only
   `proportion` votes: it permits when `minResources + allocated + inqueue - elastic` of the
   queue is within the queue's `realCapability` in every resource the job requests
   (`pkg/scheduler/plugins/proportion/proportion.go` JobEnqueueableFn,
   `LessEqualWithDimensionAndResourcesName` in `pkg/scheduler/api/resource_info.go`: a resource
   missing from realCapability counts as 0).
3. `realCapability = min(capability, ExceededPart(totalResource, totalGuarantee) + guarantee)`
   per resource (proportion.go; a resource missing from `capability` is not capped), where
   `totalResource` is the allocatable of the nodes that EXIST (`framework/session.go`
   `ssn.TotalResource.Add(n.Allocatable)`) and `totalGuarantee` the sum of every queue's
   `guarantee`. On a pool that scales from zero the job's GPUs do not exist yet, so without a
   guarantee realCapability has 0 GPUs, the PodGroup stays Pending, no pod is created and
   Karpenter (which reacts to Unschedulable pods only) never launches a node
   (volcano-sh/volcano#3910, #3804, #4044).
4. Without `enqueue`, `allocate` moves Pending PodGroups to Inqueue itself
   (`pkg/scheduler/actions/allocate/allocate.go`: "If not config enqueue action, change
   Pending pg into Inqueue state"), so every job's pods are created at once; `allocate` then
   places tasks only while the queue's `deserved` holds them (`queueAllocatable`), and
   `deserved = max(min(weighted share of totalResource, realCapability, request), guarantee)`.
5. Pods Volcano could not place get `PodScheduled=False, reason=Unschedulable`
   (`pkg/scheduler/cache/cache.go` `RecordJobStatusEvent` / `taskUnschedulable`,
   `api/job_info.go` `TaskSchedulingReason`), which is what Karpenter provisions for
   (kubernetes-sigs/karpenter `pkg/utils/pod/scheduling.go` `IsProvisionable` /
   `FailedToSchedule`: no schedulerName check). A pod that fits a node while its gang does not
   is marked `Schedulable` instead and is not provisioned for; the rest of the gang is.
6. The gang plugin commits an allocation only when `minAvailable` tasks are placed
   (`allocate.go`: `stmt.Commit()` only if `ssn.JobReady(job)`), so a partly provisioned gang
   binds nothing and holds no GPU.

The platform's answer (docs/scheduling.md#volcano-on-capacity-that-scales-from-zero): keep
`enqueue` (it is what keeps a team's pods within its queue before they exist, so two gangs can
never half-fill a namespace ResourceQuota and wait on each other) and give each team queue a
`guarantee` equal to its nominal quota (the Kueue `quota[]` entries: Σ GPUs, CPU, memory, and
the EFA devices those GPUs come with). The validation config rejects nominal quotas over the
pools' capacity, so the guarantees never promise more than the pools can launch.

The analysis here is conservative: it counts no capacity that happens to exist (system nodes,
static groups), because other queues may hold it; a job is "will run" when it fits its queue
on an empty cluster. It checks one job alone: a team's jobs together share its guarantee, the
later ones wait in Pending until the earlier ones finish (Volcano's normal queueing, not a
deadlock).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from components import catalog
from components.analysis.capacity import smallest_instance_type
from components.analysis.nccl import NcclHost
from components.config import Problem, StackConfig, TeamConfig
from components.config.karpenter import gpu_class_instance_types

#: The scheduler actions of the platform's Volcano config, with and without `enqueue`.
ACTIONS_WITH_ENQUEUE: Final = "enqueue, allocate, backfill"
ACTIONS_WITHOUT_ENQUEUE: Final = "allocate, backfill"
#: The queue the NCCL validation PodGroup joins (components/platform/validation/validation.py): its
#: own,
#: with a guarantee, because a queue without one gets only what exceeds every guarantee.
VALIDATION_QUEUE: Final = "gpu-platform-validation"

Resources = Mapping[str, float]


def scheduler_actions(enqueue: bool) -> str:
    """The `actions` line of the Volcano scheduler config."""
    return ACTIONS_WITH_ENQUEUE if enqueue else ACTIONS_WITHOUT_ENQUEUE


def efa_per_gpu(gpu_class: str) -> float:
    """EFA devices per GPU the queue guarantee budgets for the class: those of the class's
    smallest type, what a job over every type of the class requests by default or more (for
    h200-x8, p5e's 32 over p5en's 16; resources.resources_on gives a pod the fewest of its
    own types). A job confined to larger types may ask for more: its Volcano verdict
    (`admission`) judges its PodGroup against this guarantee."""
    types = gpu_class_instance_types(gpu_class)
    if not types:
        return 0.0
    row = catalog.instance(smallest_instance_type(types))
    return row.efa_devices / row.gpus if row.gpus else 0.0


def queue_capability(team: TeamConfig) -> dict[str, float]:
    """The team queue's `capability`: the namespace limits (the ResourceQuota's figures)."""
    limits = team.limits
    return {
        "cpu": float(limits.cpu),
        "memory": float(limits.memory_gib),
        catalog.GPU_RESOURCE: float(limits.gpus),
    }


def queue_guarantee(team: TeamConfig) -> dict[str, float]:
    """The team queue's `guarantee` (and `deserved`, which Volcano's queue webhook requires to
    be at least the guarantee): the team's nominal quota over every flavor, EFA included where
    the GPUs come with EFA devices; empty with `volcano.guarantee: none`."""
    if team.volcano.guarantee == "none":
        return {}
    efa = sum(math.floor(q.gpus * efa_per_gpu(q.gpu_class)) for q in team.quota)
    out = {
        "cpu": float(sum(q.cpu for q in team.quota)),
        "memory": float(sum(q.memory_gib for q in team.quota)),
        catalog.GPU_RESOURCE: float(sum(q.gpus for q in team.quota)),
    }
    if efa:
        out[catalog.EFA_RESOURCE] = float(efa)
    return out


def quantities(resources: Resources) -> dict[str, str]:
    """Resources as Kubernetes quantities (memory in GiB)."""
    return {name: _amount(name, amount) for name, amount in resources.items()}


def validation_guarantee(cfg: StackConfig, host: NcclHost | None) -> dict[str, float]:
    """The validation queue's guarantee: the NCCL test's PodGroup has no minResources, so
    enqueue lets it through, but allocate still needs its queue to deserve the pods — a queue
    without a guarantee deserves only what exceeds the team queues' guarantees, i.e. nothing
    while the nodes launched for the test are all there is. Empty when no NCCL test runs or no
    team queue has a guarantee (then nothing is reserved ahead of it). `host`: the NCCL test's
    (StackFacts.nccl_host)."""
    if host is None or not any(queue_guarantee(t) for t in cfg.teams):
        return {}
    nodes = float(cfg.validation.nccl.nodes)
    return {name: nodes * amount for name, amount in host.requests.items()}


def total_guarantee(cfg: StackConfig, host: NcclHost | None) -> dict[str, float]:
    """Σ of every queue's guarantee the platform creates (teams and the validation queue)."""
    out: dict[str, float] = {}
    for part in [*(queue_guarantee(t) for t in cfg.teams), validation_guarantee(cfg, host)]:
        for name, amount in part.items():
            out[name] = out.get(name, 0.0) + amount
    return out


def real_capability(
    capability: Resources, guarantee: Resources, total: Resources, guarantees: Resources
) -> dict[str, float]:
    """proportion.go: min(capability, ExceededPart(total, Σ guarantee) + guarantee), per
    resource; a resource missing from `capability` is not capped (MinDimensionResource with
    Infinity), one missing from the rest counts as 0."""
    names = set(total) | set(guarantee) | set(capability)
    out: dict[str, float] = {}
    for name in names:
        value = max(0.0, total.get(name, 0.0) - guarantees.get(name, 0.0)) + guarantee.get(
            name, 0.0
        )
        out[name] = min(value, capability.get(name, math.inf))
    return out


def _amount(name: str, amount: float) -> str:
    return f"{amount:g}Gi" if name == "memory" else f"{amount:g}"


def describe(resources: Resources) -> str:
    """`cpu 4, memory 24Gi, nvidia.com/gpu 2` (zero amounts left out)."""
    return ", ".join(
        f"{name} {_amount(name, amount)}" for name, amount in sorted(resources.items()) if amount
    )


def short(need: Resources, have: Resources) -> list[str]:
    """Requested resources (amount > 0) above what `have` offers (missing = 0)."""
    return [
        f"{name} {_amount(name, amount)} > {_amount(name, have.get(name, 0.0))}"
        for name, amount in sorted(need.items())
        if amount > 0 and amount > have.get(name, 0.0) + 1e-9
    ]


@dataclass(frozen=True)
class Admission:
    """How a Volcano PodGroup gets from Pending to pods a provisioner sees, or why it cannot:
    through the enqueue gate (its minResources within the queue's guarantee with no node up) or
    straight to allocate (no enqueue action), then allocate binds the gang."""

    #: The queue (a team's name).
    queue: str
    #: Whether Volcano's enqueue action gates it (scheduling.volcanoEnqueue).
    enqueue: bool
    #: The PodGroup's minResources.
    min_resources: Resources
    #: What stops it (empty when it starts on an empty cluster).
    blockers: tuple[str, ...]


def admission(
    cfg: StackConfig,
    team: TeamConfig,
    min_resources: Resources,
    host: NcclHost | None,
) -> Admission:
    """The enqueue and allocate gates for one Volcano Job of `team` whose PodGroup carries
    `min_resources`, on an empty cluster (no GPU node up); `host`: the NCCL test's, whose queue
    guarantee comes first (StackFacts.nccl_host)."""
    capability = queue_capability(team)
    guarantee = queue_guarantee(team)
    guarantees = total_guarantee(cfg, host)
    enqueue = cfg.scheduling.volcano_enqueue
    blockers: list[str] = []
    if enqueue:
        # Nothing exists yet: the PodGroup must fit the queue's realCapability with no node.
        real = real_capability(capability, guarantee, {}, guarantees)
        miss = short(min_resources, real)
        if miss:
            blockers.append(
                f"Volcano's enqueue (proportion) keeps the PodGroup Pending: with no node up "
                f"queue {team.name}'s real capability is "
                + (describe(real) or "empty")
                + f" ({'; '.join(miss)}); no pod is created, so nothing scales up"
            )
    # Allocate: the provisioner has launched the job's nodes (total = the job's own requests,
    # at least); the queue's deserved must hold the whole gang.
    real = real_capability(capability, guarantee, min_resources, guarantees)
    deserved = {
        name: max(min(real.get(name, 0.0), min_resources.get(name, 0.0)), guarantee.get(name, 0.0))
        for name in set(real) | set(guarantee)
    }
    miss = short(min_resources, deserved)
    if miss and not blockers:
        blockers.append(
            f"Volcano's allocate (proportion) never places the gang: once its nodes exist "
            f"queue {team.name} deserves {'; '.join(miss)} (every other queue's guarantee "
            "comes first)"
        )
    return Admission(team.name, enqueue, dict(min_resources), tuple(blockers))


def check_queues(cfg: StackConfig) -> list[Problem]:
    """The team queues' figures, before any job is looked at:

    - Volcano's queue webhook (pkg/webhooks/admission/queues/validate/validate_queue.go,
      v1.15.1) rejects a queue whose deserved (= guarantee here) exceeds its capability in a
      resource both name: the nominal quota must fit the namespace limits;
    - with `enqueue`, a queue without a guarantee admits no PodGroup while its GPUs do not
      exist, i.e. never on pools that scale from zero; without `enqueue`, it still deserves
      only what exceeds every other queue's guarantee. `none` works only with no enqueue and
      no guarantee anywhere.
    """
    found: list[Problem] = []
    enqueue = cfg.scheduling.volcano_enqueue
    any_guarantee = any(t.volcano.guarantee != "none" for t in cfg.teams)
    for index, team in enumerate(cfg.teams):
        if team.volcano.guarantee == "none" and (enqueue or any_guarantee):
            found.append(
                Problem(
                    f"teams[{index}].volcano.guarantee",
                    "none",
                    "nominal: "
                    + (
                        "with Volcano's enqueue action (scheduling.volcanoEnqueue) a queue "
                        "without a guarantee admits no PodGroup until its GPUs exist, so a "
                        "Volcano job on a pool that scales from zero never gets a pod"
                        if enqueue
                        else "a queue without a guarantee deserves only what exceeds the "
                        "other queues' guarantees, so its gangs are never placed"
                    ),
                )
            )
        guarantee = queue_guarantee(team)
        capability = queue_capability(team)
        for name, key in (("cpu", "cpu"), ("memory", "memoryGib")):
            if guarantee.get(name, 0.0) > capability[name]:
                found.append(
                    Problem(
                        f"teams[{index}].limits.{key}",
                        int(capability[name]),
                        f"at least the nominal quota's {guarantee[name]:g} (the Volcano "
                        "queue's guarantee and deserved; Volcano rejects deserved over "
                        "capability)",
                    )
                )
    return found
