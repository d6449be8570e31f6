"""Property-based tests (hypothesis) of the pure capacity, quota and fit analysis.

The stacks are prod's config with generated GPU capacity: managed node groups (on-demand, spot,
Capacity Block) and Karpenter NodePools (on-demand, spot, reserved with their reservations) of
catalog GPU classes, each config validated by the real model (`components.config.parse`). The
expected figures come from simpler, independent facts — a group reaches `maxSize` nodes, a pool
launches at most `limits.gpus`, the catalog's GPU count per type, Kueue's nominal + borrowing
limit — never from the analysis under test. Each defect they found (a pool limit short of a whole
node, two reserved pools sharing reservations, a borrow-only quota entry, an EFA request one of a
job's types cannot offer) is fixed, its minimal reproduction kept as a test.

Why this module is long: the generator of valid stacks (every model rule on GPU groups, pools,
reservations and teams) is what the capacity, quota and fit properties share; in one module
the three areas are checked against one generator instead of importing it from each other.
"""

from __future__ import annotations

import copy
import functools
import json
import random
from collections import Counter
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any, cast

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from components import catalog
from components import config as stack_config
from components.analysis.capacity import flavor_provisioners, gpu_capacity, job_instance_types
from components.analysis.efa_placement import memberships
from components.analysis.fit import fit_sources
from components.analysis.fleet import Worker, manager_teams
from components.analysis.nodes import Allocatable, NodeSource
from components.analysis.nodes import node_sources as _node_sources
from components.analysis.placement import Placement, job_placement
from components.analysis.quota import check_teams, job_quota_problems, unreachable_sources
from components.analysis.resources import JobResources, pod_requests, resources_on
from tests.conftest import stack_values


def node_sources(cfg: stack_config.StackConfig) -> list[NodeSource]:
    """The config's node sources, placed by its memberships (what facts.build computes)."""
    return _node_sources(cfg, *memberships(cfg))


Flavor = tuple[str, str]
CAPACITY_TYPES = ("reserved", "spot", "on-demand")
JOB_CAPACITIES = ("on-demand", "spot", "reserved", "either")

# --- Independent facts from the catalog --------------------------------------------------------


def _size(name: str) -> tuple[int, int, str]:
    row = catalog.instance(name)
    return (row.vcpu, row.memory_gib, name)


def _class_types() -> dict[str, tuple[str, ...]]:
    out: dict[str, list[str]] = {}
    for name, row in catalog.INSTANCE_TYPES.items():
        if row.gpus:
            out.setdefault(f"{row.gpu_model}-x{row.gpus}", []).append(name)
    return {cls: tuple(sorted(types, key=_size)) for cls, types in sorted(out.items())}


#: GPU class -> its catalog instance types, smallest first.
CLASS_TYPES = _class_types()
#: GPU class -> GPUs per node (catalog).
GPUS_PER_NODE = {cls: catalog.instance(types[0]).gpus for cls, types in CLASS_TYPES.items()}


def _efa_buckets(gpu_class: str) -> list[tuple[str, ...]]:
    """A class's types grouped by EFA device count (one managed group has one count)."""
    buckets: dict[int, list[str]] = {}
    for name in CLASS_TYPES[gpu_class]:
        buckets.setdefault(catalog.instance(name).efa_devices, []).append(name)
    return [tuple(types) for _, types in sorted(buckets.items())]


@functools.cache
def _pick(options: tuple[Any, ...]) -> st.SearchStrategy[Any]:
    """`st.sampled_from(options)`, built once per tuple (generation is the tests' hot path)."""
    return st.sampled_from(options)


@functools.cache
def _ints(low: int, high: int) -> st.SearchStrategy[int]:
    return st.integers(low, high)


def _group_possible(gpu_class: str, capacity: str, autoscaler: bool) -> bool:
    if capacity == "reserved":  # a Capacity Block group starts at 0 and is resized
        return autoscaler
    need = 3 if capacity == "spot" else 1
    return any(len(bucket) >= need for bucket in _efa_buckets(gpu_class))


def _pool_possible(gpu_class: str, capacity: str) -> bool:
    return capacity != "spot" or len(CLASS_TYPES[gpu_class]) >= 3


# --- Generated stacks --------------------------------------------------------------------------

PROD = stack_values("prod")
CPU_POOL = {
    "capacityType": "on-demand",
    "workloadType": "general",
    "instanceTypes": ["m6i.xlarge", "m6i.2xlarge"],
    "limits": {"cpu": 64},
}
#: A taint of a group's own: no training pod tolerates it.
OWN_TAINT = {"key": "example.com/dedicated", "value": "benchmarks", "effect": "NoSchedule"}


def _config(values: dict[str, Any]) -> stack_config.StackConfig:
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return stack_config.parse(stack_config.namespace_values(raw))


@dataclass(frozen=True)
class SourceSpec:
    """What the generator put into the config for one GPU source, in plain facts."""

    name: str
    kind: str
    gpu_class: str
    #: Capacity type of labels and queues (a Capacity Block group is `reserved`).
    capacity_type: str
    #: The instance types it may launch (a pool without `instanceTypes`: its class's types).
    types: tuple[str, ...]
    #: Most GPUs: maxSize x the catalog's GPUs per node (groups), the whole nodes'
    #: GPUs within `limits.gpus` (pools).
    gpus: int
    #: Carries OWN_TAINT.
    tainted: bool = False

    @property
    def flavor(self) -> Flavor:
        return (self.gpu_class, self.capacity_type)


@dataclass(frozen=True)
class Platform:
    """A generated stack: its values (prod's, GPU capacity replaced) and source specs."""

    values: dict[str, Any]
    specs: tuple[SourceSpec, ...]

    @property
    def flavors(self) -> set[Flavor]:
        return {s.flavor for s in self.specs}

    @property
    def classes(self) -> list[str]:
        return sorted({s.gpu_class for s in self.specs})

    def config(self) -> stack_config.StackConfig:
        return _config(self.values)


def _with_capacity(
    groups: list[dict[str, Any]],
    pools: list[dict[str, Any]],
    reservations: list[dict[str, Any]],
    *,
    autoscaler: bool,
) -> dict[str, Any]:
    """Prod's values with these GPU groups, GPU pools (CPU pools added up to the three a
    Karpenter config needs) and reservations, and no teams."""
    cpu_pools = [{"name": f"general-{i}", **CPU_POOL} for i in range(max(1, 3 - len(pools)))]
    values = copy.deepcopy(PROD)
    values["gpu-platform:nodeGroups"]["gpu"] = groups
    values["gpu-platform:karpenter"]["pools"] = [*pools, *cpu_pools]
    values["gpu-platform:karpenter"]["reservations"] = reservations
    values["gpu-platform:clusterAutoscaler"] = {"enabled": autoscaler}
    values["gpu-platform:teams"] = []
    return values


@st.composite
def _group(
    draw: st.DrawFn, index: int, gpu_class: str, capacity: str, autoscaler: bool
) -> tuple[dict[str, Any], SourceSpec]:
    """A valid managed GPU group of `gpu_class` on `capacity` (`reserved`: a Capacity Block)."""
    name = f"ng-{index}"
    if capacity == "reserved":
        types = [draw(_pick(CLASS_TYPES[gpu_class]))]
        max_size = draw(_ints(1, 8))
        group: dict[str, Any] = {
            "name": name,
            "capacityType": "capacity-block",
            "capacityReservationId": f"cr-{index:08x}",
            "instanceTypes": types,
            "minSize": 0,
            "desiredSize": 0,
            "maxSize": max_size,
        }
    else:
        need = 3 if capacity == "spot" else 1
        bucket = draw(_pick(tuple(b for b in _efa_buckets(gpu_class) if len(b) >= need)))
        chosen = draw(st.lists(_pick(bucket), min_size=need, unique=True))
        types = sorted(chosen, key=_size)  # the smallest first (the model's rule)
        max_size = draw(_ints(1, 16))
        if autoscaler:
            min_size = draw(_ints(0, max_size))
            desired = draw(_ints(min_size, max_size))
        else:
            min_size = desired = max_size  # nothing resizes it
        group = {
            "name": name,
            "capacityType": capacity,
            "instanceTypes": types,
            "minSize": min_size,
            "desiredSize": desired,
            "maxSize": max_size,
        }
    tainted = draw(st.booleans()) and draw(st.booleans())
    if tainted:
        group["taints"] = [OWN_TAINT]
    spec = SourceSpec(
        name=name,
        kind="managed",
        gpu_class=gpu_class,
        capacity_type=capacity,
        types=tuple(types),
        gpus=max_size * GPUS_PER_NODE[gpu_class],
        tainted=tainted,
    )
    return group, spec


@st.composite
def _pool(
    draw: st.DrawFn, index: int, gpu_class: str, capacity: str, whole_nodes: bool
) -> tuple[dict[str, Any], SourceSpec, dict[str, Any] | None]:
    """A valid Karpenter GPU pool (and, for `reserved`, the reservation it launches into)."""
    members = CLASS_TYPES[gpu_class]
    need = 3 if capacity == "spot" else 1
    pool: dict[str, Any] = {"name": f"kp-{index}", "gpuClass": gpu_class, "capacityType": capacity}
    types = members
    if draw(st.booleans()):
        types = tuple(draw(st.lists(_pick(members), min_size=need, unique=True)))
        pool["instanceTypes"] = list(types)
    per_node = GPUS_PER_NODE[gpu_class]
    reservation = None
    if capacity == "reserved":
        count = draw(_ints(1, 4))
        reservation = {
            "name": f"res-{index}",
            "id": f"cr-{index:08d}",
            "instanceType": draw(_pick(types)),
            "count": count,
        }
        nodes = draw(_ints(1, count))
        limit = nodes * per_node if whole_nodes else draw(_ints(1, count * per_node))
    elif whole_nodes:
        limit = draw(_ints(1, 8)) * per_node
    else:
        limit = draw(_ints(1, 64))
    pool["limits"] = {"gpus": limit}
    # Karpenter launches no node past the limit: the pool brings the whole nodes it admits.
    carried = limit // per_node * per_node
    spec = SourceSpec(pool["name"], "karpenter", gpu_class, capacity, tuple(types), carried)
    return pool, spec, reservation


@st.composite
def platforms(
    draw: st.DrawFn, *, whole_nodes: bool = False, autoscaler: bool | None = None
) -> Platform:
    """A valid stack: 1-3 GPU classes, each with on-demand capacity (the model's fallback
    rule) and maybe spot and reserved capacity, every flavor from one provisioner (groups or
    pools, the model's rule), at most one reserved pool per class. `whole_nodes`: pool limits
    are whole nodes' GPUs; `autoscaler`: whether the cluster-autoscaler runs (drawn if None;
    without it groups are fixed, with it they may be resized and Capacity Blocks exist)."""
    if autoscaler is None:
        autoscaler = draw(st.booleans())
    classes = draw(st.lists(_pick(tuple(CLASS_TYPES)), min_size=1, max_size=3, unique=True))
    groups: list[dict[str, Any]] = []
    pools: list[dict[str, Any]] = []
    reservations: list[dict[str, Any]] = []
    specs: list[SourceSpec] = []
    for gpu_class in classes:
        for capacity in CAPACITY_TYPES:
            kinds: list[str | None] = [] if capacity == "on-demand" else [None]
            if _group_possible(gpu_class, capacity, autoscaler):
                kinds.append("managed")
            if _pool_possible(gpu_class, capacity):
                kinds.append("karpenter")
            kind = draw(_pick(tuple(kinds)))
            if kind is None:
                continue
            one = kind == "karpenter" and capacity == "reserved"
            for _ in range(1 if one else draw(_ints(1, 2))):
                if kind == "managed":
                    group, spec = draw(_group(len(groups), gpu_class, capacity, autoscaler))
                    groups.append(group)
                else:
                    pool, spec, reservation = draw(
                        _pool(len(pools), gpu_class, capacity, whole_nodes)
                    )
                    pools.append(pool)
                    reservations += [reservation] if reservation else []
                specs.append(spec)
    values = _with_capacity(groups, pools, reservations, autoscaler=autoscaler)
    return Platform(values, tuple(specs))


def _job(gpu_class: str, capacity: str, nodes: int) -> stack_config.TrainingJobConfig:
    return stack_config.TrainingJobConfig.model_validate(
        {
            "name": "prop-job",
            "team": "research",
            "gpuClass": gpu_class,
            "capacity": capacity,
            "nodes": nodes,
        }
    )


@st.composite
def platform_jobs(
    draw: st.DrawFn, **platform: Any
) -> tuple[Platform, stack_config.TrainingJobConfig]:
    """A generated stack and a job (1-4 nodes) of one of its sources' GPU class, on a capacity
    that includes the source's capacity type (so Capacity Block groups and reserved pools
    are as often a job's as on-demand ones)."""
    found = draw(platforms(**platform))
    source = draw(st.sampled_from(found.specs))
    capacities = tuple(
        c
        for c in JOB_CAPACITIES
        if source.capacity_type in _job(source.gpu_class, c, 1).capacity_types
    )
    job = _job(source.gpu_class, draw(_pick(capacities)), draw(_ints(1, 4)))
    return found, job


def _expected_capacity(specs: tuple[SourceSpec, ...]) -> Counter[Flavor]:
    total: Counter[Flavor] = Counter()
    for spec in specs:
        total[spec.flavor] += spec.gpus
    return total


#: Each example of a generated stack parses a whole config (~5 ms): 40 keep the module within
#: its few seconds on two shared cores; the pure quota rules afford more.
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
MANY = settings(max_examples=150, deadline=None)

# --- Capacity ----------------------------------------------------------------------------------


@FAST
@given(platforms())
def test_flavor_capacity_sums_group_max_nodes_times_gpus_and_pool_limits(found: Platform) -> None:
    """A flavor's GPUs are the sum over its sources of maxSize x the catalog's GPUs per node
    (managed groups) and the whole nodes' GPUs within `limits.gpus` (pools), and every flavor
    with a source has an entry.
    This figure is what Kueue quotas are checked against: a source left out admits less than
    the cluster holds, one counted twice admits jobs no node can run."""
    cfg = found.config()
    assert gpu_capacity(cfg) == dict(_expected_capacity(found.specs))


@FAST
@given(platforms())
def test_each_flavor_has_the_provisioner_of_its_sources(found: Platform) -> None:
    """Every flavor with capacity names the one provisioner that serves it (node groups or
    Karpenter): Kueue's ResourceFlavor selects on that label, so a wrong one leaves the
    flavor's pods with no node at all."""
    cfg = found.config()
    expected = {s.flavor: "node-group" if s.kind == "managed" else "karpenter" for s in found.specs}
    assert flavor_provisioners(cfg) == expected
    assert set(gpu_capacity(cfg)) == set(expected)


@FAST
@given(platforms(whole_nodes=True))
def test_flavor_capacity_is_what_its_node_sources_nodes_carry(found: Platform) -> None:
    """With pool limits in whole nodes, a flavor's capacity equals the sum over its node
    sources (nodes.node_sources) of the nodes each can bring x GPUs per node: the quota check
    (capacity.py) and the will-it-run placement (nodes.py) must agree on what a pool holds."""
    cfg = found.config()
    carried: Counter[Flavor] = Counter()
    for source in node_sources(cfg):
        carried[(source.gpu_class, source.capacity_type)] += source.max_nodes * (
            catalog.instance(source.instance_types[0]).gpus
        )
    assert gpu_capacity(cfg) == dict(carried)


def test_capacity_of_a_pool_whose_limit_is_not_whole_nodes_is_what_its_nodes_carry() -> None:
    values = copy.deepcopy(PROD)
    values["gpu-platform:karpenter"]["pools"][0]["limits"] = {"gpus": 12}  # kp-h100-reserved
    cfg = _config(values)
    (source,) = [s for s in node_sources(cfg) if s.name == "kp-h100-reserved"]
    assert source.max_nodes * source.gpus_per_node == 8
    assert gpu_capacity(cfg)[("h100-x8", "reserved")] == 8


@FAST
@given(platforms())
def test_reserved_capacity_never_exceeds_what_the_reservations_hold(found: Platform) -> None:
    """A reserved flavor provides at most the GPUs its capacity reservations hold (count x the
    catalog's GPUs of the reserved type): nothing else can launch as `reserved`, so a larger
    figure would let Kueue admit reserved jobs into capacity that does not exist."""
    cfg = found.config()
    reservations = found.values["gpu-platform:karpenter"]["reservations"]
    for (gpu_class, capacity_type), gpus in gpu_capacity(cfg).items():
        if capacity_type != "reserved":
            continue
        held = sum(
            r["count"] * catalog.instance(r["instanceType"]).gpus
            for r in reservations
            if r["instanceType"] in CLASS_TYPES[gpu_class]
        )
        groups = sum(
            s.gpus
            for s in found.specs
            if s.kind == "managed" and s.flavor == (gpu_class, "reserved")
        )
        assert gpus <= held + groups


def test_two_reserved_pools_of_one_class_do_not_count_the_reservation_twice() -> None:
    values = copy.deepcopy(PROD)
    second = {
        "name": "kp-h100-reserved-b",
        "gpuClass": "h100-x8",
        "capacityType": "reserved",
        "limits": {"gpus": 16},
    }
    values["gpu-platform:karpenter"]["pools"].insert(1, second)
    cfg = _config(values)  # the model accepts it: each pool's limit is within the 16 held
    assert cfg.karpenter.reserved_gpus(["p5.48xlarge"]) == 16
    assert gpu_capacity(cfg)[("h100-x8", "reserved")] <= 16


@FAST
@given(platforms(), st.data())
def test_adding_a_node_group_never_lowers_any_flavors_capacity(
    found: Platform, data: st.DataObject
) -> None:
    """Adding a managed group raises its flavor by exactly maxSize x GPUs per node and leaves
    every other flavor as it was: more nodes never shrink what quotas may be checked against
    (a drop would turn a valid team quota into a config error)."""
    values = found.values
    autoscaler = values["gpu-platform:clusterAutoscaler"]["enabled"]
    karpenter = {s.flavor for s in found.specs if s.kind == "karpenter"}
    free = [
        (gpu_class, capacity)
        for gpu_class in CLASS_TYPES
        for capacity in CAPACITY_TYPES
        if (gpu_class, capacity) not in karpenter
        and _group_possible(gpu_class, capacity, autoscaler)
    ]
    gpu_class, capacity = data.draw(st.sampled_from(free))
    groups = values["gpu-platform:nodeGroups"]["gpu"]
    group, spec = data.draw(_group(len(groups) + 100, gpu_class, capacity, autoscaler))
    before = gpu_capacity(found.config())
    more = copy.deepcopy(values)
    more["gpu-platform:nodeGroups"]["gpu"] = [*groups, group]
    after = gpu_capacity(_config(more))
    assert all(after.get(flavor, 0) >= gpus for flavor, gpus in before.items())
    assert after[spec.flavor] == before.get(spec.flavor, 0) + spec.gpus
    assert {f: g for f, g in after.items() if f != spec.flavor} == {
        f: g for f, g in before.items() if f != spec.flavor
    }


@FAST
@given(platforms(), st.data())
def test_raising_a_pool_limit_never_lowers_any_flavors_capacity(
    found: Platform, data: st.DataObject
) -> None:
    """Raising a Karpenter pool's `limits.gpus` by whole nodes (a reserved pool's together with
    its reservation's count) raises its flavor by exactly the increase and lowers no flavor: a
    pool's budget is what the quota check counts, and more budget never refuses a quota."""
    values = copy.deepcopy(found.values)
    karpenter = values["gpu-platform:karpenter"]
    gpu_pools = [p for p in karpenter["pools"] if "gpuClass" in p]
    if not gpu_pools:
        return
    pool = data.draw(st.sampled_from(gpu_pools))
    # Whole nodes: a pool brings the whole nodes its limit admits, whatever it was before.
    more = data.draw(st.integers(1, 4)) * GPUS_PER_NODE[pool["gpuClass"]]
    before = gpu_capacity(_config(values))
    flavor = (pool["gpuClass"], pool["capacityType"])
    if pool["capacityType"] == "reserved":
        name = f"res-{pool['name'].removeprefix('kp-')}"  # as _pool names it
        (reservation,) = [r for r in karpenter["reservations"] if r["name"] == name]
        per_node = catalog.instance(reservation["instanceType"]).gpus
        reservation["count"] += -(-more // per_node)
    pool["limits"]["gpus"] += more
    after = gpu_capacity(_config(values))
    assert all(after[f] >= gpus for f, gpus in before.items())
    assert after[flavor] == before[flavor] + more


@FAST
@given(platforms(), st.randoms(use_true_random=False))
def test_capacity_and_sources_do_not_depend_on_the_order_groups_and_pools_are_listed(
    found: Platform, rng: random.Random
) -> None:
    """Listing the node groups, pools and reservations in another order changes no flavor's
    capacity or provisioner, no job's instance types and no source's nodes: the order of a
    YAML list is not a capacity decision."""
    shuffled = copy.deepcopy(found.values)
    rng.shuffle(shuffled["gpu-platform:nodeGroups"]["gpu"])
    rng.shuffle(shuffled["gpu-platform:karpenter"]["pools"])
    rng.shuffle(shuffled["gpu-platform:karpenter"]["reservations"])
    cfg, other = found.config(), _config(shuffled)
    assert gpu_capacity(other) == gpu_capacity(cfg)
    assert flavor_provisioners(other) == flavor_provisioners(cfg)

    def by_name(c: stack_config.StackConfig) -> dict[str, tuple[Any, ...]]:
        return {
            s.name: (s.gpu_class, s.capacity_type, s.max_nodes, s.instance_types)
            for s in node_sources(c)
        }

    assert by_name(other) == by_name(cfg)
    assert found.classes
    for gpu_class in found.classes:
        for capacity in JOB_CAPACITIES:
            job = _job(gpu_class, capacity, 2)
            assert job_instance_types(other, job) == job_instance_types(cfg, job)


@FAST
@given(platforms())
def test_job_instance_types_are_the_types_of_the_sources_of_its_flavors(found: Platform) -> None:
    """A job (each GPU class x capacity of the stack) may land on every instance type a group
    or pool of its GPU class and capacity types can launch, and on no other: the pod is sized
    for the smallest of them, so a missing type lets pods outgrow a node, an extra one
    shrinks them for nothing."""
    cfg = found.config()
    assert found.classes
    for gpu_class in found.classes:
        for capacity in JOB_CAPACITIES:
            job = _job(gpu_class, capacity, 2)
            expected = {
                t
                for s in found.specs
                if s.gpu_class == gpu_class and s.capacity_type in job.capacity_types
                for t in s.types
            }
            assert job_instance_types(cfg, job) == sorted(expected), (gpu_class, capacity)


# --- Quota -------------------------------------------------------------------------------------


def _team(index: int, quota: list[dict[str, Any]], limit: int | None = None) -> dict[str, Any]:
    nominal = sum(q["gpus"] for q in quota)
    return {
        "name": f"team{index}",
        "namespace": f"team-{index}",
        "group": f"gpu-platform:team-{index}",
        "datasetPrefix": f"team{index}",
        "quota": quota,
        "limits": {"gpus": nominal if limit is None else limit, "cpu": 4096, "memoryGib": 65536},
    }


def _entry(flavor: Flavor, gpus: int, **extra: Any) -> dict[str, Any]:
    return {
        "gpuClass": flavor[0],
        "capacityType": flavor[1],
        "gpus": gpus,
        "cpu": 64,
        "memoryGib": 256,
        **extra,
    }


flavors = st.tuples(st.sampled_from(sorted(CLASS_TYPES)), st.sampled_from(CAPACITY_TYPES))


@st.composite
def teams_within(draw: st.DrawFn) -> tuple[dict[Flavor, int], list[dict[str, Any]]]:
    """Pool capacity per flavor, and 1-3 teams whose nominal quotas add up to at most it."""
    capacity = draw(st.dictionaries(flavors, st.integers(0, 64), min_size=1, max_size=4))
    left = dict(capacity)
    teams = []
    for index in range(draw(st.integers(1, 3))):
        listed = draw(st.lists(st.sampled_from(sorted(capacity)), min_size=1, unique=True))
        quota = []
        for flavor in listed:
            gpus = draw(st.integers(0, left[flavor]))
            left[flavor] -= gpus
            quota.append(_entry(flavor, gpus))
        teams.append(_team(index, quota))
    return capacity, teams


def _with_teams(teams: list[dict[str, Any]]) -> stack_config.StackConfig:
    values = copy.deepcopy(PROD)
    values["gpu-platform:teams"] = teams
    return _config(values)


@FAST
@given(teams_within(), st.data())
def test_team_quotas_within_capacity_pass_and_one_over_is_named_once(
    case: tuple[dict[Flavor, int], list[dict[str, Any]]], data: st.DataObject
) -> None:
    """Nominal quotas that add up to at most a flavor's capacity raise no problem. Raising the
    last entry of one flavor past its capacity raises exactly one problem, naming that entry's
    `teams[i].quota[j].gpus`: Kueue is capacity-blind, so this check is all that stops
    nominal quotas no pool can serve (jobs admitted, then pending forever)."""
    capacity, teams = case
    assert check_teams(_with_teams(teams), capacity) == []
    listed = [
        (i, j, (q["gpuClass"], q["capacityType"]))
        for i, team in enumerate(teams)
        for j, q in enumerate(team["quota"])
    ]
    flavor = data.draw(st.sampled_from(sorted({f for _, _, f in listed})))
    i, j, _ = [entry for entry in listed if entry[2] == flavor][-1]
    total = sum(
        q["gpus"] for t in teams for q in t["quota"] if (q["gpuClass"], q["capacityType"]) == flavor
    )
    over = capacity[flavor] - total + data.draw(st.integers(1, 16))
    teams = copy.deepcopy(teams)
    teams[i]["quota"][j]["gpus"] += over
    teams[i]["limits"]["gpus"] += over
    problems = check_teams(_with_teams(teams), capacity)
    assert len(problems) == 1, problems
    path, _, allowed = problems[0]
    assert path == f"teams[{i}].quota[{j}].gpus"
    assert catalog.gpu_flavor_name(*flavor) in allowed
    assert f"over the {capacity[flavor]} GPUs" in allowed


@FAST
@given(teams_within(), flavors)
def test_a_quota_for_a_flavor_no_pool_provides_is_named(
    case: tuple[dict[Flavor, int], list[dict[str, Any]]], flavor: Flavor
) -> None:
    """A quota entry for a flavor the pools do not provide is one problem at its `gpuClass`
    (no pool of that class at all) or its `capacityType` (the class, not on that capacity):
    Kueue would offer the flavor, and its jobs would wait for nodes that never come."""
    capacity, teams = case
    assume(flavor not in capacity)  # (so no team lists it either)
    teams = copy.deepcopy(teams)
    teams[0]["quota"].append(_entry(flavor, 1))
    teams[0]["limits"]["gpus"] += 1
    j = len(teams[0]["quota"]) - 1
    field = "capacityType" if any(c == flavor[0] for c, _ in capacity) else "gpuClass"
    assert [p[0] for p in check_teams(_with_teams(teams), capacity)] == [
        f"teams[0].quota[{j}].{field}"
    ]


@st.composite
def quota_cases(
    draw: st.DrawFn, *, borrowing: bool = True, within_nominal: bool = True
) -> tuple[
    stack_config.TrainingJobConfig,
    stack_config.TeamConfig,
    dict[Flavor, int],
    JobResources,
    stack_config.TeamConfig,
]:
    """A job, its team's quota for each of its flavors (nominal >= 1, borrowing limit or
    unbounded), the pools' capacity, one pod's requests (`within_nominal`: the job's CPU
    and memory within every entry's nominal) and another team of the cohort, lending 0-128
    GPUs of each of the job's flavors (and CPU and memory beyond any job's: only its GPUs
    bound what the team may borrow)."""
    gpu_class = draw(st.sampled_from(sorted(CLASS_TYPES)))
    job = _job(gpu_class, draw(_pick(JOB_CAPACITIES)), draw(st.integers(1, 8)))
    capacity: dict[Flavor, int] = {}
    quota = []
    for capacity_type in job.capacity_types:
        capacity[(gpu_class, capacity_type)] = draw(st.integers(0, 128))
        extra = {"borrowingLimitGpus": draw(st.integers(0, 64))} if borrowing else {}
        entry = _entry((gpu_class, capacity_type), draw(st.integers(1, 64)), **extra)
        entry["cpu"] = draw(st.integers(8, 512))
        entry["memoryGib"] = draw(st.integers(8, 4096))
        quota.append(entry)
    nominal = sum(q["gpus"] for q in quota)
    team = stack_config.TeamConfig.model_validate(
        _team(0, quota, nominal + draw(st.integers(0, 128)))
    )
    if within_nominal:
        cpu = draw(st.integers(1, min(q["cpu"] for q in quota) // job.nodes))
        memory = draw(st.integers(1, min(q["memoryGib"] for q in quota) // job.nodes))
    else:
        cpu, memory = draw(st.integers(1, 256)), draw(st.integers(1, 2048))
    requests = JobResources("", float(cpu), memory, 1, 0)
    lends = [
        _entry(flavor, draw(st.integers(0, 128)), cpu=10**6, memoryGib=10**7) for flavor in capacity
    ]
    lender = stack_config.TeamConfig.model_validate(_team(1, lends))
    return job, team, capacity, requests, lender


def _lent(lender: stack_config.TeamConfig, entry: stack_config.FlavorQuota) -> int:
    """GPUs of `entry`'s flavor the other team of the cohort puts in (it sets no lending
    limit: all of its nominal quota)."""
    return sum(q.gpus for q in lender.quota if q.flavor == entry.flavor)


def _reach(entry: stack_config.FlavorQuota, lender: stack_config.TeamConfig) -> int:
    """The most GPUs Kueue can admit on the entry's flavor: nominal plus what the cohort
    lends, within the borrowing limit (kueue v0.19.2 resource_node.go `potentialAvailable`)."""
    lent = _lent(lender, entry)
    if entry.borrowing_limit_gpus is not None:
        lent = min(lent, entry.borrowing_limit_gpus)
    return entry.gpus + lent


def _kinds(problems: list[Any], key: str) -> Counter[str]:
    """Each problem by what it says: over the pools, no quota fits, over the namespace limit."""
    kinds: Counter[str] = Counter()
    for path, _, allowed in problems:
        assert path == f"{key}.nodes"
        if "pools provide" in allowed:
            kinds["pools"] += 1
        elif "fits no quota" in allowed:
            kinds["quota"] += 1
        elif "namespace limit" in allowed:
            kinds["limit"] += 1
        else:
            kinds[allowed] += 1
    return kinds


@MANY
@given(quota_cases(), st.integers(0, 20))
def test_a_job_is_refused_exactly_where_it_outgrows_pools_quota_or_namespace_limit(
    case: tuple[Any, ...], index: int
) -> None:
    """A job of nodes x GPUs per node (catalog) GPUs, whose CPU and memory are within its
    quota's nominal, gets a problem naming `trainingJobs[i].nodes` for each bound it outgrows
    and no other: the largest pool of its flavors, the reach of every quota entry of its
    flavors (nominal plus what the cohort lends, within the borrowing limit; Kueue admits it
    onto one flavor), and the namespace's GPU limit. A missing problem is a job that queues
    forever; an extra one refuses a job that runs."""
    job, team, capacity, requests, lender = case
    gpus = job.nodes * GPUS_PER_NODE[job.gpu_class]
    expected = Counter(
        {
            "pools": int(gpus > max(capacity.values())),
            "quota": int(all(gpus > _reach(q, lender) for q in team.quota)),
            "limit": int(gpus > team.limits.gpus),
        }
    )
    key = f"trainingJobs[{index}]"
    found = _kinds(
        job_quota_problems(key, job, team, capacity, requests, cohort=[team, lender]), key
    )
    assert found == +expected


@MANY
@given(quota_cases(borrowing=False))
def test_unbounded_borrowing_reaches_what_the_cohort_lends_and_no_further(
    case: tuple[Any, ...],
) -> None:
    """Without a borrowing limit a team may borrow what the other queues of its cohort lend,
    however large the pools: a job within nominal + lent on one of its flavors never fits "no
    quota"; a job past it on every flavor always does, even when the pools could hold it
    (Kueue lends quota, not capacity: such a job would wait forever)."""
    job, team, capacity, requests, lender = case
    gpus = job.nodes * GPUS_PER_NODE[job.gpu_class]
    found = _kinds(
        job_quota_problems("trainingJobs[0]", job, team, capacity, requests, cohort=[team, lender]),
        "trainingJobs[0]",
    )
    within = any(gpus <= q.gpus + _lent(lender, q) for q in team.quota)
    assert found["quota"] == int(not within)


def _raised(team: stack_config.TeamConfig, how: str, by: int) -> stack_config.TeamConfig:
    data = team.model_dump(by_alias=True, exclude_none=True)
    for entry in data["quota"]:
        if how == "borrowing" and "borrowingLimitGpus" in entry:
            entry["borrowingLimitGpus"] += by
        elif how in ("cpu", "memoryGib"):
            entry[how] += by
        elif how == "nominal":  # GPUs with the CPU and memory that go with them
            for field in ("gpus", "cpu", "memoryGib"):
                entry[field] *= by
    if how in ("limit", "nominal"):
        data["limits"]["gpus"] = data["limits"]["gpus"] * by + by
    return stack_config.TeamConfig.model_validate(data)


@MANY
@given(
    quota_cases(borrowing=True, within_nominal=False),
    st.sampled_from(["borrowing", "cpu", "memoryGib", "limit", "nominal", "pools", "lent"]),
    st.integers(1, 8),
)
def test_raising_a_quota_or_the_pools_never_adds_a_problem(
    case: tuple[Any, ...], how: str, by: int
) -> None:
    """Raising a quota — its borrowing limit, CPU, memory, the namespace's GPU limit, or the
    nominal GPUs together with their CPU and memory —, what another team of the cohort lends,
    or the pools' capacity never adds a problem to a job: more quota or capacity must never
    turn a job that runs into a config error."""
    job, team, capacity, requests, lender = case
    key = "trainingJobs[0]"
    before = _kinds(
        job_quota_problems(key, job, team, capacity, requests, cohort=[team, lender]), key
    )
    if how == "pools":
        capacity = {flavor: gpus + by for flavor, gpus in capacity.items()}
    elif how == "lent":
        lender = _raised(lender, "nominal", by + 1)
    else:
        team = _raised(team, how, by)
    after = _kinds(
        job_quota_problems(key, job, team, capacity, requests, cohort=[team, lender]), key
    )
    assert after <= before


def test_a_borrow_only_quota_admits_a_job_within_its_borrowing_limit() -> None:
    quota = [_entry(("l4-x1", "on-demand"), 0, cpu=8, memoryGib=32, borrowingLimitGpus=4)]
    team = stack_config.TeamConfig.model_validate(_team(0, quota, 4))
    job = _job("l4-x1", "on-demand", 1)
    requests = JobResources("g6.xlarge", 1.0, 4, 1, 0)
    capacity = {("l4-x1", "on-demand"): 8}
    lender = stack_config.TeamConfig.model_validate(_team(1, [_entry(("l4-x1", "on-demand"), 8)]))
    assert (
        job_quota_problems("trainingJobs[0]", job, team, capacity, requests, cohort=[team, lender])
        == []
    )
    # Alone in its cohort, a borrow-only quota reaches nothing: Kueue lends only quota.
    assert job_quota_problems("trainingJobs[0]", job, team, capacity, requests, cohort=[team]) == [
        (
            "trainingJobs[0].nodes",
            1,
            "the job (1 GPUs, 1 CPU, 4 GiB) fits no quota of team team0 "
            "(l4-x1-on-demand: 0 GPUs, 8 CPU, 32 GiB with what the cohort lends)",
        )
    ]


@FAST
@given(platforms(), st.data())
def test_unreachable_sources_are_exactly_those_of_flavors_no_quota_lists(
    found: Platform, data: st.DataObject
) -> None:
    """The sources reported unreachable are exactly the groups and pools whose flavor no
    team's quota lists (no ClusterQueue offers it, so no queued job lands there), and listing
    one more flavor never makes another source unreachable."""
    flavors_present = sorted(found.flavors)
    listed = data.draw(st.lists(st.sampled_from(flavors_present), unique=True))
    values = copy.deepcopy(found.values)
    values["gpu-platform:teams"] = [_team(0, [_entry(f, 0) for f in listed])] if listed else []
    cfg = _config(values)
    sources = node_sources(cfg)
    unreachable = {s.name for s in unreachable_sources(cfg, sources)}
    assert unreachable == {s.name for s in found.specs if s.flavor not in set(listed)}
    rest = [f for f in flavors_present if f not in listed]
    if rest:
        values["gpu-platform:teams"] = [_team(0, [_entry(f, 0) for f in [*listed, rest[0]]])]
        more = _config(values)
        assert {s.name for s in unreachable_sources(more, node_sources(more))} < unreachable


# --- Fit ---------------------------------------------------------------------------------------

TOLERATE_ALL = ({"operator": "Exists"},)
RESOURCES = ("cpu", "memory", catalog.GPU_RESOURCE, catalog.EFA_RESOURCE)


def _offered(alloc: Allocatable) -> dict[str, float]:
    return {
        "cpu": alloc.cpu,
        "memory": float(alloc.memory_gib),
        catalog.GPU_RESOURCE: float(alloc.gpus),
        catalog.EFA_RESOURCE: float(alloc.efa),
    }


def _placement_of(source: NodeSource) -> Placement:
    return Placement(
        required={
            catalog.LABEL_GPU_CLASS: (source.gpu_class,),
            catalog.LABEL_CAPACITY_TYPE: (source.capacity_type,),
        },
        tolerations=TOLERATE_ALL,
        single_zone=False,
    )


@st.composite
def requests_within(draw: st.DrawFn, limits: dict[str, float]) -> dict[str, float]:
    """Requests of each resource between 0 and `limits` (EFA sometimes not requested)."""
    out = {
        name: float(draw(st.integers(0, int(limit))))
        if name != "cpu"
        else draw(st.floats(0, limit))
        for name, limit in limits.items()
    }
    if draw(st.booleans()):
        out.pop(catalog.EFA_RESOURCE)
    return out


@FAST
@given(platforms(), st.data())
def test_a_pod_within_every_type_of_a_source_fits_it_and_one_over_every_type_does_not(
    found: Platform, data: st.DataObject
) -> None:
    """A pod whose requests are within the allocatable of every instance type a source may
    bring (cpu, memory, nvidia.com/gpu, vpc.amazonaws.com/efa) and whose placement the source
    satisfies is reported fitting it. Raising one request past the largest type's allocatable
    removes the source and names that resource: the verdict "runs there" must mean a node of
    that source can hold the pod, and "does not" must say why."""
    sources = node_sources(found.config())
    source = data.draw(st.sampled_from(sources))
    offers = [_offered(a) for a in source.allocatable.values()]
    smallest = {r: min(o[r] for o in offers) for r in RESOURCES}
    requests = data.draw(requests_within(smallest))
    fit = fit_sources(sources, _placement_of(source), requests)
    assert source in fit.candidates
    assert source in fit.fitting, fit.misses[source.name]
    resource = data.draw(st.sampled_from(RESOURCES))
    largest = max(o[resource] for o in offers)
    bigger = {**requests, resource: largest + data.draw(st.sampled_from([0.5, 1, 64]))}
    fit = fit_sources(sources, _placement_of(source), bigger)
    assert source not in fit.fitting
    miss = fit.misses[source.name]
    assert miss is not None and f"{resource} " in miss


@FAST
@given(platforms(autoscaler=False), st.data())
def test_a_karpenter_pool_fits_a_pod_that_fits_one_of_its_types(
    found: Platform, data: st.DataObject
) -> None:
    """Karpenter launches whichever of a pool's types holds the pod, so a pod within one
    type's allocatable fits the pool; a fixed managed group may hold nodes of any of its
    types, so it fits only a pod within all of them (an autoscaled group offers its first
    type only, the test above). Either way lowering requests never removes a fit."""
    sources = node_sources(found.config())
    assert len(sources) == len(found.specs) > 0
    for source in sources:
        # A type other than the first where there are several: where the two kinds differ.
        names = list(source.allocatable)
        name = data.draw(st.sampled_from(names[1:] or names))
        requests = data.draw(requests_within(_offered(source.allocatable[name])))
        fit = fit_sources(sources, _placement_of(source), requests)
        every = all(
            all(amount <= _offered(a)[r] for r, amount in requests.items())
            for a in source.allocatable.values()
        )
        assert (source in fit.fitting) == (source.kind == "karpenter" or every)
        lower = {r: amount * data.draw(_pick((0, 0.5, 1))) for r, amount in requests.items()}
        if source in fit.fitting:
            assert source in fit_sources(sources, _placement_of(source), lower).fitting


@FAST
@given(platforms(), st.data())
def test_fit_never_offers_a_source_whose_labels_the_affinity_rejects(
    found: Platform, data: st.DataObject
) -> None:
    """For any required node affinity (`In` terms over the GPU labels) a candidate's labels
    satisfy every term, and a pod that tolerates every taint has as candidates exactly the
    sources whose labels do: the kube-scheduler's NodeAffinity filter, so the analysis never
    promises a node the scheduler will not give."""
    sources = node_sources(found.config())
    keys = sorted({k for s in sources for k in s.labels})
    # The sources' own label values (so terms often match), and one no source has.
    seen = sorted({v for s in sources for v in s.labels.values()} | {"elsewhere"})
    required = data.draw(
        st.dictionaries(
            st.sampled_from(keys),
            st.lists(st.sampled_from(seen), min_size=1, max_size=3, unique=True).map(tuple),
            max_size=3,
        )
    )
    tolerations = data.draw(st.sampled_from([(), TOLERATE_ALL]))
    fit = fit_sources(sources, Placement(required, tolerations, False), {})
    for source in fit.candidates:
        assert all(source.labels.get(k) in values for k, values in required.items())
    if tolerations:
        labelled = [s for s in sources if all(s.labels.get(k) in v for k, v in required.items())]
        assert list(fit.candidates) == labelled
    else:  # every GPU node is tainted: a pod that tolerates nothing lands on none
        assert fit.candidates == ()


@FAST
@given(platform_jobs())
def test_a_jobs_candidates_are_the_untainted_sources_of_its_class_and_capacity_types(
    case: tuple[Platform, stack_config.TrainingJobConfig],
) -> None:
    """A training job's pods (placement.job_placement: affinity and tolerations) are offered
    exactly the groups and pools of its GPU class and capacity types, spot groups included
    when it may run on spot, minus those with a taint of their own: the manifests' placement
    and the sources' labels must agree, or the verdict differs from the cluster."""
    found, job = case
    cfg = found.config()
    pod = resources_on(job, job_instance_types(cfg, job))
    fit = fit_sources(node_sources(cfg), job_placement(job, pod.efa_devices), {})
    expected = {
        s.name
        for s in found.specs
        if s.gpu_class == job.gpu_class and s.capacity_type in job.capacity_types and not s.tainted
    }
    assert {s.name for s in fit.candidates} == expected


@FAST
@given(platform_jobs())
def test_a_jobs_default_pod_fits_every_candidate_source(
    case: tuple[Platform, stack_config.TrainingJobConfig],
) -> None:
    """A job's pod, sized by default for the smallest type its pools can launch, fits every
    group and pool its placement admits: Kueue may admit it onto any of its flavors, and a
    flavor whose nodes cannot hold the pod leaves the gang pending after admission."""
    found, job = case
    cfg = found.config()
    pod = resources_on(job, job_instance_types(cfg, job))
    fit = fit_sources(
        node_sources(cfg), job_placement(job, pod.efa_devices), pod_requests(job, pod)
    )
    assert fit.fitting == fit.candidates, fit.misses


def test_an_h200_jobs_pod_fits_its_p5en_fallback_group() -> None:
    groups = [
        {
            "name": "ng-h200-od",
            "capacityType": "on-demand",
            "instanceTypes": ["p5en.48xlarge"],
            "minSize": 0,
            "desiredSize": 0,
            "maxSize": 2,
        }
    ]
    pools = [
        {
            "name": "kp-h200-reserved",
            "gpuClass": "h200-x8",
            "capacityType": "reserved",
            "instanceTypes": ["p5e.48xlarge"],
            "limits": {"gpus": 16},
        }
    ]
    reservation = {"name": "h200", "id": "cr-0123abcd", "instanceType": "p5e.48xlarge", "count": 2}
    cfg = _config(_with_capacity(groups, pools, [reservation], autoscaler=True))
    job = _job("h200-x8", "reserved", 2)
    pod = resources_on(job, job_instance_types(cfg, job))
    fit = fit_sources(
        node_sources(cfg), job_placement(job, pod.efa_devices), pod_requests(job, pod)
    )
    assert {s.name for s in fit.candidates} == {"ng-h200-od", "kp-h200-reserved"}
    assert fit.fitting == fit.candidates, fit.misses


def test_an_explicit_efa_request_one_of_the_jobs_types_cannot_offer_is_refused() -> None:
    """The same two types: `efaDevices: 32` binds on p5e nodes only, and Kueue may admit the
    gang onto the p5en flavor, where it would stay Pending — refused, naming the fewest."""
    from types import SimpleNamespace

    from components.analysis.jobs import _efa_problems

    types = ["p5e.48xlarge", "p5en.48xlarge"]
    job = _job("h200-x8", "either", 2).model_copy(update={"efa_devices": 32})
    found = _efa_problems(
        SimpleNamespace(  # type: ignore[arg-type]
            job=job, key="trainingJobs[0]", instance_types=types, resources=resources_on(job, types)
        )
    )
    assert [(p.key, p.value) for p in found] == [("trainingJobs[0].efaDevices", 32)]
    assert found[0].allowed.startswith("at most 16 (the EFA devices of p5e.48xlarge: 32, ")
    fits = _efa_problems(
        SimpleNamespace(  # type: ignore[arg-type]
            job=job.model_copy(update={"efa_devices": 16}),
            key="trainingJobs[0]",
            instance_types=types,
            resources=resources_on(job, types),
        )
    )
    assert fits == []


@st.composite
def fleet_quota_cases(
    draw: st.DrawFn,
) -> tuple[list[tuple[stack_config.TeamConfig, ...]], stack_config.TrainingJobConfig, JobResources]:
    """1-3 workers' teams (team0 and team1, each with an entry for one flavor: any nominal GPUs,
    CPU and memory, borrowing and lending limits or none) and a job of team0 on that flavor
    with one pod's CPU and memory requests."""
    gpu_class = draw(st.sampled_from(sorted(CLASS_TYPES)))
    flavor: Flavor = (gpu_class, "on-demand")
    workers = []
    for _ in range(draw(st.integers(1, 3))):
        teams = []
        for index in range(2):
            gpus = draw(st.integers(0, 32))
            # CPU and memory per GPU far apart between workers: each worker's limits are its
            # own share of them (FlavorQuota.quantities).
            extra: dict[str, Any] = {
                "cpu": max(1, gpus * draw(st.sampled_from([1, 4, 32, 128]))),
                "memoryGib": max(1, gpus * draw(st.sampled_from([1, 16, 256, 1024]))),
            }
            if draw(st.booleans()):
                extra["borrowingLimitGpus"] = draw(st.integers(0, 32))
            if draw(st.booleans()):
                extra["lendingLimitGpus"] = draw(st.integers(0, gpus))
            quota = [_entry(flavor, gpus, **extra)]
            teams.append(stack_config.TeamConfig.model_validate(_team(index, quota, 10**4)))
        workers.append(tuple(teams))
    job = _job(gpu_class, "on-demand", draw(st.integers(1, 4)))
    cpu, memory = draw(st.integers(1, 1024)), draw(st.integers(1, 8192))
    requests = JobResources("", float(cpu), memory, 1, 0)
    return workers, job, requests


def _worker_with(teams: tuple[stack_config.TeamConfig, ...]) -> Worker:
    """What manager_teams reads of a worker: its config's teams."""
    return cast(Worker, SimpleNamespace(cfg=SimpleNamespace(teams=teams)))


@MANY
@given(fleet_quota_cases())
def test_a_fleet_manager_admits_every_job_a_worker_admits(
    case: tuple[list[tuple[stack_config.TeamConfig, ...]], Any, JobResources],
) -> None:
    """MultiKueue admits a job on the manager first, against the manager's ClusterQueues (every
    worker's quota added up: analysis/fleet.py manager_teams), and dispatches it only then. A
    job some worker's Kueue admits (its team's nominal quota plus what the worker's cohort
    lends, within its borrowing limit: quota._entry_fit) must fit the manager's quota too, in
    GPUs, CPU and memory, or it waits on the manager forever while that worker has room."""
    workers, job, requests = case
    manager = manager_teams([_worker_with(teams) for teams in workers])
    capacity = {(job.gpu_class, "on-demand"): 10**4}

    def quota_refusals(teams: tuple[stack_config.TeamConfig, ...]) -> list[Any]:
        problems = job_quota_problems("k", job, teams[0], capacity, requests, cohort=teams)
        return [p for p in problems if "fits no quota" in p.allowed]

    if any(not quota_refusals(teams) for teams in workers):
        assert quota_refusals(manager) == []


def test_a_manager_borrows_each_workers_cpu_share_not_the_share_of_the_sums() -> None:
    """One worker's team0 has 100 CPU for 1 GPU and may borrow 1 GPU (with it up to 100 CPU);
    another's has 1 CPU for 100 GPUs and borrows none. The share of the sums (101 CPU for 101
    GPUs, borrowing 1) would be 1 CPU: the manager would keep pending the 150-CPU job the first
    worker admits with CPU team1 lends."""
    (gpu_class,) = [c for c in sorted(CLASS_TYPES) if GPUS_PER_NODE[c] == 1][:1]
    flavor: Flavor = (gpu_class, "on-demand")

    def team(index: int, gpus: int, cpu: int, **extra: Any) -> stack_config.TeamConfig:
        quota = [_entry(flavor, gpus, cpu=cpu, memoryGib=100, **extra)]
        return stack_config.TeamConfig.model_validate(_team(index, quota, 10**4))

    first = (team(0, 1, 100, borrowingLimitGpus=1), team(1, 1, 400))
    second = (team(0, 100, 1, borrowingLimitGpus=0), team(1, 1, 1))
    manager = manager_teams([_worker_with(first), _worker_with(second)])
    job = _job(gpu_class, "on-demand", 1)
    requests = JobResources("", 150.0, 10, 1, 0)
    capacity = {flavor: 10**4}
    assert job_quota_problems("k", job, first[0], capacity, requests, cohort=first) == []
    assert job_quota_problems("k", job, manager[0], capacity, requests, cohort=manager) == []
    cpu, _, gpus = manager[0].quota[0].quantities()
    assert (cpu.nominal, cpu.borrowing, cpu.lending) == (101, 100, None)
    assert (gpus.nominal, gpus.borrowing, gpus.lending) == (101, 1, None)


@MANY
@given(fleet_quota_cases())
def test_a_managers_quota_bounds_each_worker_s_in_every_resource(
    case: tuple[list[tuple[stack_config.TeamConfig, ...]], Any, JobResources],
) -> None:
    """Why the manager admits what a worker admits: per team and resource its ClusterQueue's
    nominal quota, borrowing limit and lendable quota are each at least any worker's (a limit
    None: unbounded), so its nominal plus what its cohort lends, within its borrowing limit,
    is too."""
    workers, _, _ = case
    manager = manager_teams([_worker_with(teams) for teams in workers])
    for index, team in enumerate(manager):
        summed = team.quota[0].quantities()
        for teams in workers:
            for mine, theirs in zip(summed, teams[index].quota[0].quantities(), strict=True):
                assert mine.name == theirs.name
                assert mine.nominal >= theirs.nominal
                assert mine.lendable >= theirs.lendable
                if mine.borrowing is not None:
                    assert theirs.borrowing is not None and mine.borrowing >= theirs.borrowing
