"""Admission against quota: team quotas within the pools' capacity, and each job within its
team's quota (nominal + borrowing), namespace limits and the pools' capacity.

Pure rules over facts: they take the pool capacity and a job's pod resources as values, and
components/analysis/facts.py calls them (once per job of a config) — this module never asks for
the facts itself."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from components import catalog
from components.analysis.nodes import NodeSource
from components.analysis.resources import JobResources
from components.config import FlavorQuota, Problem, StackConfig, TeamConfig, TrainingJobConfig

#: GPUs per flavor (GPU class, capacity type) the pools provide (capacity.gpu_capacity).
Capacity = Mapping[tuple[str, catalog.CapacityType], int]


def check_teams(cfg: StackConfig, capacity: Capacity) -> list[Problem]:
    """Cross-section rules of `teams`: unique names and namespaces, known flavors, and the sum of
    nominal GPU quotas per flavor within `capacity` (the facts' gpu_capacity)."""
    problems: list[Problem] = []
    classes = sorted({gpu_class for gpu_class, _ in capacity})
    names: dict[str, int] = {}
    namespaces: dict[str, int] = {}
    totals: dict[tuple[str, catalog.CapacityType], int] = {}
    for index, team in enumerate(cfg.teams):
        for field, seen, value in (
            ("name", names, team.name),
            ("namespace", namespaces, team.namespace),
        ):
            if value in seen:
                problems.append(
                    Problem(
                        f"teams[{index}].{field}",
                        value,
                        f"a unique {field} (teams[{seen[value]}] already uses it)",
                    )
                )
            seen.setdefault(value, index)
        for entry_index, entry in enumerate(team.quota):
            path = f"teams[{index}].quota[{entry_index}]"
            if entry.gpu_class not in classes:
                problems.append(
                    Problem(
                        f"{path}.gpuClass",
                        entry.gpu_class,
                        f"a GPU class the pools provide ({', '.join(classes)})",
                    )
                )
                continue
            key = (entry.gpu_class, entry.capacity_type)
            if key not in capacity:
                problems.append(
                    Problem(
                        f"{path}.capacityType",
                        entry.capacity_type,
                        f"no {entry.capacity_type} pool provides {entry.gpu_class}",
                    )
                )
                continue
            before = totals.get(key, 0)
            totals[key] = before + entry.gpus
            if before <= capacity[key] < totals[key]:
                problems.append(
                    Problem(
                        f"{path}.gpus",
                        entry.gpus,
                        f"the nominal GPU quotas of flavor {entry.flavor} add up to "
                        f"{totals[key]} here, over the {capacity[key]} GPUs its pools provide",
                    )
                )
    return problems


def job_quota_problems(
    key: str,
    job: TrainingJobConfig,
    team: TeamConfig,
    capacity: Capacity,
    requests: JobResources,
    *,
    cohort: Sequence[TeamConfig],
) -> list[Problem]:
    """Nodes x GPUs (and CPU/memory) within the team's quota for one of the job's flavors
    (its nominal quota plus what the other teams of the cohort lend, within its borrowing
    limit: _entry_fit), the namespace's ResourceQuota, and the pools' capacity. A Kueue podset
    runs on one flavor, so `either` needs one flavor that fits the whole job. `key` is the
    job's config path, `requests` one pod's resources, `cohort` every team (one cohort holds
    all team ClusterQueues: components/platform/tenancy/team_queues.py)."""
    gpus = job.world_size
    problems: list[Problem] = []
    pools = [capacity.get((job.gpu_class, c), 0) for c in job.capacity_types]
    if gpus > max(pools):
        problems.append(
            Problem(
                f"{key}.nodes",
                job.nodes,
                f"nodes x GPUs = {gpus} is over the {max(pools)} GPUs the "
                f"{job.gpu_class} {'/'.join(job.capacity_types)} pools provide",
            )
        )
    fits: list[str] = []
    quota_text: list[str] = []
    for capacity_type in job.capacity_types:
        entry = next(
            (
                q
                for q in team.quota
                if q.gpu_class == job.gpu_class and q.capacity_type == capacity_type
            ),
            None,
        )
        if entry is None:
            quota_text.append(
                f"no quota for {catalog.gpu_flavor_name(job.gpu_class, capacity_type)}"
            )
            continue
        others = [
            q
            for other in cohort
            if other.name != team.name
            for q in other.quota
            if q.flavor == entry.flavor
        ]
        text, fit = _entry_fit(entry, others, job, requests)
        quota_text.append(text)
        if fit:
            fits.append(entry.flavor)
    if not fits:
        problems.append(
            Problem(
                f"{key}.nodes",
                job.nodes,
                f"the job ({gpus} GPUs, {requests.cpu * job.nodes:g} CPU, "
                f"{requests.memory_gib * job.nodes} GiB) fits no quota of team {team.name} "
                f"({'; '.join(quota_text)})",
            )
        )
    if gpus > team.limits.gpus:
        problems.append(
            Problem(
                f"{key}.nodes",
                job.nodes,
                f"nodes x GPUs = {gpus} is over team {team.name}'s namespace limit "
                f"({team.limits.gpus} GPUs)",
            )
        )
    return problems


def _entry_fit(
    entry: FlavorQuota,
    others: Sequence[FlavorQuota],
    job: TrainingJobConfig,
    requests: JobResources,
) -> tuple[str, bool]:
    """One quota entry's reach with borrowing (GPUs, CPU, memory) as the report words it, and
    whether the whole job fits it; `others`: the other teams' entries of the same flavor, the
    ClusterQueues of the one cohort every team queue joins.

    Kueue lends only quota: a ClusterQueue borrows what the other ClusterQueues of its cohort
    put in (their nominal quota up to their lending limits) and the platform's Cohort holds
    none of its own, so the most a ClusterQueue can ever be admitted is its nominal quota plus
    the others' lendable quota, within its borrowing limit (kueue v0.19.2
    pkg/cache/scheduler/resource_node.go `potentialAvailable` L129-140, `accumulateFromChild`
    L217-222; pkg/scheduler/flavorassigner/flavorassigner.go L1342-1356 refuses a request over
    it: "insufficient quota … > maximum capacity", whatever the pools hold; seen on the real
    Kueue in tests/e2e/test_quota.py). The pools' capacity is checked apart
    (job_quota_problems)."""
    reach: dict[str, int] = {}
    for quantity in entry.quantities():
        pooled = sum(
            theirs.lendable
            for other in others
            for theirs in other.quantities()
            if theirs.name == quantity.name
        )
        most = quantity.nominal + pooled
        if quantity.borrowing is not None:
            most = min(most, quantity.nominal + quantity.borrowing)
        reach[quantity.name] = most
    fits = (
        job.world_size <= reach["gpus"]
        and requests.cpu * job.nodes <= reach["cpu"]
        and requests.memory_gib * job.nodes <= reach["memory"]
    )
    text = (
        f"{entry.flavor}: {reach['gpus']} GPUs, {reach['cpu']} CPU, {reach['memory']} GiB "
        "with what the cohort lends"
    )
    return text, fits


def unreachable_sources(cfg: StackConfig, sources: Sequence[NodeSource]) -> list[NodeSource]:
    """GPU node sources whose flavor (GPU class, capacity type) no team's quota lists. Each team's
    ClusterQueue offers exactly its quota's flavors (components/platform/tenancy/team_queues.py) and
    Kueue admits a workload only onto a flavor of its ClusterQueue, so no queued job ever lands on
    such a source: its capacity is paid for (a Karpenter limit, a group's maxSize) and only
    validation Jobs or Volcano/plain jobs, which no team's quota budgets, could use it."""
    offered = {(entry.gpu_class, entry.capacity_type) for team in cfg.teams for entry in team.quota}
    return [s for s in sources if (s.gpu_class, s.capacity_type) not in offered]


def check_reachable_sources(unqueued: Sequence[NodeSource]) -> list[Problem]:
    """A GPU node source no team's queue reaches (`StackFacts.unqueued`, unreachable_sources)
    is a config error unless it says what it is for (`unqueuedReason`, which the report
    prints)."""
    return [
        Problem(
            f"{source.key}.unqueuedReason",
            None,
            f"{source.name} serves {source.gpu_class} {source.capacity_type}, which no team's "
            f"quota lists, so no ClusterQueue offers flavor "
            f"{catalog.gpu_flavor_name(source.gpu_class, source.capacity_type)} and no queued "
            "job can land there: add a quota entry for it to a team, remove the source, or say "
            "here what it is for",
        )
        for source in unqueued
        if not source.unqueued_reason
    ]


def worker_quota(
    teams: Sequence[TeamConfig], workers: Sequence[tuple[str, Sequence[TeamConfig]]]
) -> dict[tuple[str, str], tuple[tuple[str, int], ...]]:
    """Per team of a fleet's manager (`teams`, analysis/fleet.py manager_teams) and flavor of
    its quota, each worker's nominal GPUs of that flavor: the terms of the manager's sum.
    `workers`: (name, its teams) in the fleet's order."""
    out: dict[tuple[str, str], tuple[tuple[str, int], ...]] = {}
    for team in teams:
        mine = [(name, next(t for t in own if t.name == team.name)) for name, own in workers]
        for entry in team.quota:
            out[(team.name, entry.flavor)] = tuple(
                (name, sum(e.gpus for e in t.quota if e.flavor == entry.flavor)) for name, t in mine
            )
    return out
