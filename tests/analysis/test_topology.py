"""Gangs placed by the network (components/analysis/topology.py, docs/topology.md): which classes
may opt in, the defaults, and every request that can never be met — each refusal with a compliant
twin, judged on the facts the program builds, and the config errors through the CLI (exit 2)."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from components import catalog
from components.analysis import check, problems, topology, topology_checks
from components.analysis.facts import build
from components.config import (
    Problem,
    StackConfig,
    TopologyLevel,
    TopologyMode,
    TopologyRequest,
)
from components.config.load import namespace_values, parse
from tests.conftest import (
    ConfigCase,
    config_error_test,
    h100_static_values,
    l40s_topology_values,
    stack_values,
)


def _parse(raw: dict[str, Any]) -> StackConfig:
    return parse(
        namespace_values({k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()})
    )


def _with_jobs(raw: dict[str, Any], *jobs: dict[str, Any]) -> StackConfig:
    raw = copy.deepcopy(raw)
    raw["gpu-platform:trainingJobs"] = list(jobs)
    return _parse(raw)


def _job(**fields: Any) -> dict[str, Any]:
    return {"name": "gang", "team": "research", "capacity": "on-demand", **fields}


def _keys(cfg: StackConfig) -> list[str]:
    return [p.key for p in problems(cfg)]


# --- levels and defaults -----------------------------------------------------------------------


def test_levels_are_the_zone_the_layers_and_the_node_top_down() -> None:
    assert topology.levels_of(3) == ("zone", "layer-1", "layer-2", "layer-3", "hostname")
    assert topology.levels_of(4)[-2:] == ("layer-4", "hostname")
    assert topology.level_label("layer-2") == "topology.k8s.aws/network-node-layer-2"
    assert topology.level_label("zone") == catalog.ZONE_LABEL
    assert topology.level_label("hostname") == "kubernetes.io/hostname"


@pytest.mark.parametrize(
    ("nodes", "single_zone", "one_zone", "layers", "want"),
    [
        (1, True, False, 3, ("unconstrained", None)),
        # An EFA gang on flavors that reach several zones: the zone is required.
        (4, True, False, 3, ("required", "zone")),
        # ... on one-zone flavors: one block first (the engines found required-zone's greedy
        # descent splitting a gang a free block would hold; docs/real-engines.md).
        (4, True, True, 3, ("preferred", "layer-3")),
        (4, False, False, 3, ("preferred", "layer-3")),
        (4, False, False, 4, ("preferred", "layer-4")),
    ],
)
def test_default_follows_size_efa_and_zones(
    nodes: int, single_zone: bool, one_zone: bool, layers: int, want: tuple[str, str | None]
) -> None:
    request, why = topology.default_request(
        nodes, single_zone, one_zone, topology.levels_of(layers)
    )
    assert (request.mode, request.level) == want
    assert why


def test_hops_per_level_and_the_published_baseline() -> None:
    levels = topology.levels_of(3)
    assert topology_checks.level_effect("layer-3", levels, "p5.48xlarge").max_hops == 2
    assert topology_checks.level_effect("layer-1", levels, "p5.48xlarge").max_hops == 6
    zone = topology_checks.level_effect("zone", levels, "p5.48xlarge")
    assert zone.max_hops is None and zone.baseline_gbps == 3200
    assert "PLANNING" in zone.text


def test_volcanos_discovery_walks_the_zone_and_three_layers_down_to_the_node() -> None:
    assert topology.volcano_levels() == [
        {"nodeLabel": catalog.ZONE_LABEL},
        {"nodeLabel": "topology.k8s.aws/network-node-layer-1"},
        {"nodeLabel": "topology.k8s.aws/network-node-layer-2"},
        {"nodeLabel": "topology.k8s.aws/network-node-layer-3"},
        {"nodeLabel": "kubernetes.io/hostname"},
    ]


def test_a_class_no_source_provides_has_no_layers() -> None:
    cfg = _parse(l40s_topology_values())
    assert topology.class_layers(cfg, "no-such-class") == 0
    assert topology.class_layers(cfg, "l40s-x1") == 3


def _request(mode: TopologyMode, level: TopologyLevel | None) -> topology.JobTopology:
    return topology.JobTopology(mode, level, topology.levels_of(3), False, "asked")


@pytest.mark.parametrize(
    ("mode", "level", "kueue", "volcano"),
    [
        ("unconstrained", None, {topology.KUEUE_UNCONSTRAINED: "true"}, None),
        (
            "required",
            "zone",
            {topology.KUEUE_REQUIRED: catalog.ZONE_LABEL},
            {"mode": "hard", "highestTierAllowed": 4},
        ),
        # No tier for the hostname: no hard constraint (topology_problems refuses it).
        (
            "required",
            "hostname",
            {topology.KUEUE_REQUIRED: "kubernetes.io/hostname"},
            {"mode": "soft"},
        ),
        (
            "preferred",
            "layer-3",
            {topology.KUEUE_PREFERRED: "topology.k8s.aws/network-node-layer-3"},
            {"mode": "soft"},
        ),
        # Never built by the platform (the config requires a level), but the annotation's value
        # is then empty, never a label.
        ("preferred", None, {topology.KUEUE_PREFERRED: ""}, {"mode": "soft"}),
    ],
)
def test_each_request_renders_one_kueue_annotation_and_volcanos_network_topology(
    mode: TopologyMode,
    level: TopologyLevel | None,
    kueue: dict[str, str],
    volcano: dict[str, Any] | None,
) -> None:
    request = _request(mode, level)
    assert request.kueue_annotations() == kueue
    assert request.volcano_network_topology() == volcano


@pytest.mark.parametrize(
    ("nodes", "single_zone", "one_zone", "why"),
    [
        (1, True, False, "one node: no traffic between nodes"),
        (
            2,
            True,
            False,
            "a gang held to one zone (EFA does not cross zones) on flavors that reach several: "
            "the zone is required, and Kueue packs the gang into few network blocks inside it",
        ),
        (
            2,
            True,
            True,
            "a gang held to one zone on one-zone flavors: one layer-3 block first, relaxed level "
            "by level",
        ),
        (
            2,
            False,
            False,
            "a TCP gang that may span zones: one layer-3 block first, relaxed level by level",
        ),
    ],
)
def test_the_default_says_why(nodes: int, single_zone: bool, one_zone: bool, why: str) -> None:
    assert topology.default_request(nodes, single_zone, one_zone, topology.levels_of(3))[1] == why


# --- which classes may opt in --------------------------------------------------------------------


def test_an_eligible_class_gets_a_topology_on_every_flavor() -> None:
    cfg = _parse(l40s_topology_values())
    facts, _ = check(cfg)
    assert facts.topologies == {"l40s-x1": topology.levels_of(3)}
    assert "l40s-x1" not in [c for c in facts.topologies if c != "l40s-x1"]


def test_a_class_with_unlabelled_types_cannot_opt_in() -> None:
    raw = stack_values("dev")
    raw["gpu-platform:scheduling"] = {"topology": {"gpuClasses": ["a10g-x1"]}}
    found = problems(_parse(raw))
    # Its Karpenter pools are a second reason, on the same key.
    assert {p.key for p in found} == {"scheduling.topology.gpuClasses[0]"}
    assert "g5" in found[0].allowed and "network-node-layer" in found[0].allowed


def test_a_class_karpenter_serves_cannot_opt_in_and_its_managed_twin_can() -> None:
    raw = stack_values("prod")
    raw["gpu-platform:scheduling"] = {"topology": {"gpuClasses": ["l40s-x1"]}}
    if any(p.get("gpuClass") == "l40s-x1" for p in raw["gpu-platform:karpenter"]["pools"]):
        found = problems(_parse(raw))
        assert [p.key for p in found] == ["scheduling.topology.gpuClasses[0]"]
        assert "managed node groups only" in found[0].allowed
    assert problems(_parse(l40s_topology_values())) == []


def test_a_fleet_worker_cannot_opt_in() -> None:
    raw = l40s_topology_values()
    raw["gpu-platform:fleet"] = {"name": "prod"}
    found = [p for p in problems(_parse(raw)) if p.key.startswith("scheduling.topology")]
    assert found and "fleet worker" in found[0].allowed


def test_each_refused_class_is_named_with_its_value_and_every_reason() -> None:
    """An unknown class ends no check; a class of bare types served by Karpenter gets both
    reasons, each naming every type or pool."""
    raw = stack_values("dev")
    raw["gpu-platform:scheduling"] = {"topology": {"gpuClasses": ["b200-x8", "a10g-x1"]}}
    key = "scheduling.topology.gpuClasses"
    assert topology.check_topology_classes(_parse(raw)) == [
        Problem(f"{key}[0]", "b200-x8", "a GPU class the pools provide (a10g-x1, l4-x1)"),
        Problem(
            f"{key}[1]",
            "a10g-x1",
            "a class whose instance types EC2 gives a network topology: g5.16xlarge, g5.2xlarge, "
            "g5.4xlarge, g5.8xlarge, g5.xlarge carry no topology.k8s.aws/network-node-layer "
            "label (EC2 DescribeInstanceTopology supports g6e (3 layers), p4d (3 layers), p4de "
            "(3 layers), p5 (3 layers), p5e (3 layers), p5en (3 layers), p6-b200 (4 layers)), "
            "and Kueue admits onto no node that lacks a level of the flavor's Topology; leave it "
            "out and it keeps today's placement (one zone, one cluster placement group)",
        ),
        Problem(
            f"{key}[1]",
            "a10g-x1",
            "a class served by managed node groups only: Karpenter NodePool kp-a10g-spot "
            "(karpenter.pools[0]), kp-a10g-od (karpenter.pools[1]) launches nodes only for "
            "pending pods, and Kueue keeps a job of a Topology flavor without pods until it has "
            "assigned it to nodes that exist (kubernetes-sigs/kueue@v0.19.2 "
            "concepts/topology_aware_scheduling.md L61-69): its jobs would never start. Serve the "
            "class from nodeGroups.gpu (static, or autoscaled behind the ProvisioningRequest "
            "check), or leave it out",
        ),
    ]


def test_a_fleet_workers_class_is_named_with_its_value() -> None:
    raw = l40s_topology_values()
    raw["gpu-platform:fleet"] = {"name": "prod"}
    assert topology.check_topology_classes(_parse(raw)) == [
        Problem(
            "scheduling.topology.gpuClasses[0]",
            "l40s-x1",
            "left out on a fleet worker: MultiKueue needs the manager's flavors of the class to "
            "carry the same Topology (kubernetes-sigs/kueue@v0.19.2 "
            "site/content/en/docs/tasks/manage/setup_multikueue.md L145-157), which the fleet's "
            "manager does not render (docs/topology.md)",
        )
    ]


def test_the_nccl_tests_request_is_its_own_else_preferred_at_the_closest_layer() -> None:
    levels = topology.levels_of(3)
    opted = {"l40s-x1": levels}
    assert topology.nccl_topology(None, "l40s-x1", opted) == topology.JobTopology(
        "preferred",
        "layer-3",
        levels,
        True,
        "the test's ranks on the closest free nodes, never blocked",
    )
    asked = TopologyRequest(mode="required", level="layer-2")
    assert topology.nccl_topology(asked, "l40s-x1", opted) == topology.JobTopology(
        "required", "layer-2", levels, False, "asked"
    )
    assert topology.nccl_topology(asked, "l4-x1", opted) is None


def test_why_a_class_is_not_placed_by_the_network_in_the_reports_words() -> None:
    bare = "nodes carry no network-node labels (EC2 gives them no topology)"
    assert topology.why_not_eligible(_parse(stack_values("dev")), "a10g-x1") == f"g5 {bare}"
    use1 = _parse(stack_values("prod-use1"))
    assert topology.why_not_eligible(use1, "l4-x1") == f"g6 {bare}"
    assert topology.why_not_eligible(use1, "h100-x8") == (
        "served by Karpenter NodePool kp-h100-reserved, kp-h100-od: Kueue places a Topology "
        "flavor's gang only on nodes that exist before admission"
    )
    assert topology.why_not_eligible(_parse(l40s_topology_values()), "l40s-x1") == ""
    raw = l40s_topology_values()
    raw["gpu-platform:fleet"] = {"name": "prod"}
    assert topology.why_not_eligible(_parse(raw), "l40s-x1") == (
        "a fleet worker: its manager renders no Topology"
    )


def test_a_classs_types_are_its_groups_and_gpu_pools_and_its_topology_their_common_layers() -> None:
    prod = _parse(stack_values("prod"))
    assert topology.class_instance_types(prod, "l40s-x1") == [
        "g6e.2xlarge",
        "g6e.4xlarge",
        "g6e.xlarge",
    ]
    assert topology.class_instance_types(prod, "h100-x8") == ["p5.48xlarge"]
    assert topology.class_instance_types(prod, "cpu") == []
    assert topology.opted_in(_parse(l40s_topology_values())) == {
        "l40s-x1": ("zone", "layer-1", "layer-2", "layer-3", "hostname")
    }
    assert topology.opted_in(_parse(stack_values("dev"))) == {}


# --- what a gang may ask ----------------------------------------------------------------------


def test_static_nodes_honour_a_required_block_and_the_gang_waits_for_one() -> None:
    cfg = _with_jobs(
        h100_static_values(),
        _job(gpuClass="h100-x8", nodes=3, topology={"mode": "required", "level": "layer-3"}),
    )
    facts, judgement = check(cfg)
    network = judgement.verdicts[0].network
    assert network is not None and network.request.mode == "required"
    assert [h.honours for h in network.honours] == ["yes"]
    assert network.when_full.startswith("waits")
    assert network.effect.max_hops == 2
    # Read for the type its pods land on (the job's resources), not the class's first.
    assert network.effect == topology_checks.level_effect(
        "layer-3", network.request.levels, facts.jobs[0].resources.instance_type
    )
    assert facts.jobs[0].resources.instance_type == "p5.48xlarge"
    assert judgement.verdicts[0].network_exclusion == "", "placed by the network: no exclusion"
    assert facts.jobs[0].topology is not None
    assert facts.jobs[0].topology.kueue_annotations() == {
        topology.KUEUE_REQUIRED: "topology.k8s.aws/network-node-layer-3"
    }


def test_a_required_block_on_an_autoscaled_group_is_refused_preferred_runs() -> None:
    base = l40s_topology_values()
    refused = _with_jobs(
        base,
        _job(gpuClass="l40s-x1", nodes=4, topology={"mode": "required", "level": "layer-3"}),
    )
    assert _keys(refused) == ["trainingJobs[0].topology.mode"]
    assert "blind to the hierarchy" in problems(refused)[0].allowed
    runs = _with_jobs(
        base,
        _job(gpuClass="l40s-x1", nodes=4, topology={"mode": "preferred", "level": "layer-3"}),
    )
    assert problems(runs) == []


def test_required_zone_needs_one_zone_groups() -> None:
    # ng-l40s-od spans every zone: the autoscaler spreads its nodes over them.
    spread = _with_jobs(
        l40s_topology_values(),
        _job(gpuClass="l40s-x1", nodes=2, topology={"mode": "required", "level": "zone"}),
    )
    assert _keys(spread) == ["trainingJobs[0].topology.mode"]
    raw = l40s_topology_values()
    for group in raw["gpu-platform:nodeGroups"]["gpu"]:
        if group["name"] == "ng-l40s-od":
            group["zoneIndex"] = 0
    confined = _with_jobs(
        raw, _job(gpuClass="l40s-x1", nodes=2, topology={"mode": "required", "level": "zone"})
    )
    assert problems(confined) == []
    network = check(confined)[1].verdicts[0].network
    assert network is not None and [h.honours for h in network.honours] == ["yes"]


def test_a_level_the_class_lacks_is_refused() -> None:
    cfg = _with_jobs(
        l40s_topology_values(),
        _job(gpuClass="l40s-x1", nodes=2, topology={"mode": "preferred", "level": "layer-4"}),
    )
    found = problems(cfg)
    assert [p.key for p in found] == ["trainingJobs[0].topology.level"]
    assert "does not contain the requested level" in found[0].allowed


def test_a_level_finer_than_the_gang_is_refused() -> None:
    base = h100_static_values()
    one_host = _job(gpuClass="h100-x8", nodes=2, topology={"mode": "required", "level": "hostname"})
    assert "trainingJobs[0].topology.level" in _keys(_with_jobs(base, one_host))
    single = _job(gpuClass="h100-x8", nodes=1, topology={"mode": "required", "level": "hostname"})
    assert problems(_with_jobs(base, single)) == []


def test_an_efa_gang_may_not_spread_over_zones() -> None:
    # p5 in the EFA placement group: one zone, so preferred cannot spread it.
    base = h100_static_values()
    one_zone = _with_jobs(
        base, _job(gpuClass="h100-x8", nodes=2, topology={"mode": "preferred", "level": "layer-3"})
    )
    assert problems(one_zone) == []
    raw = copy.deepcopy(base)
    raw["gpu-platform:network"] = {"efaPlacementGroup": {"enabled": False}}
    spread = _with_jobs(
        raw, _job(gpuClass="h100-x8", nodes=2, topology={"mode": "preferred", "level": "layer-3"})
    )
    assert "trainingJobs[0].topology.mode" in _keys(spread)
    assert problems(_with_jobs(raw, _job(gpuClass="h100-x8", nodes=2))) == []


def test_an_efa_gang_defaults_to_its_zone_only_where_its_flavor_spans_zones() -> None:
    one_zone = check(_with_jobs(h100_static_values(), _job(gpuClass="h100-x8", nodes=2)))[0]
    request = one_zone.jobs[0].topology
    assert request is not None and (request.mode, request.level) == ("preferred", "layer-3")
    raw = h100_static_values()
    raw["gpu-platform:network"] = {"efaPlacementGroup": {"enabled": False}}
    spread = check(_with_jobs(raw, _job(gpuClass="h100-x8", nodes=2)))[0]
    request = spread.jobs[0].topology
    assert request is not None and (request.mode, request.level) == ("required", "zone")
    assert request.default and "several" in request.why


def test_a_request_on_a_class_not_placed_by_the_network_is_refused() -> None:
    cfg = _with_jobs(
        stack_values("prod"),
        _job(gpuClass="h100-x8", nodes=2, topology={"mode": "required", "level": "zone"}),
    )
    assert _keys(cfg) == ["trainingJobs[0].topology"]
    assert problems(_with_jobs(stack_values("prod"), _job(gpuClass="h100-x8", nodes=2))) == []


def test_volcano_hard_needs_static_nodes_and_a_tier() -> None:
    volcano = {"launcher": "volcano", "scheduler": "volcano"}
    base = h100_static_values()
    hard = _with_jobs(
        base,
        _job(
            gpuClass="h100-x8",
            nodes=3,
            topology={"mode": "required", "level": "layer-2"},
            **volcano,
        ),
    )
    facts, _ = check(hard)
    request = facts.jobs[0].topology
    assert request is not None
    assert request.volcano_network_topology() == {"mode": "hard", "highestTierAllowed": 2}
    no_tier = _with_jobs(
        base,
        _job(
            gpuClass="h100-x8",
            nodes=1,
            topology={"mode": "required", "level": "hostname"},
            **volcano,
        ),
    )
    assert _keys(no_tier) == ["trainingJobs[0].topology.level"]
    blind = _with_jobs(
        l40s_topology_values(),
        _job(
            gpuClass="l40s-x1",
            nodes=2,
            topology={"mode": "required", "level": "layer-3"},
            **volcano,
        ),
    )
    assert _keys(blind) == ["trainingJobs[0].topology.mode"]


def _nccl_in_one_block_on_static_h100() -> Any:
    """The NCCL test's verdict on the static H100 group, asking for one layer-3 block."""
    raw = h100_static_values()
    raw["gpu-platform:validation"] = {
        **raw["gpu-platform:validation"],
        "enabled": True,
        "nccl": {
            **raw["gpu-platform:validation"]["nccl"],
            "topology": {"mode": "required", "level": "layer-3"},
        },
    }
    _, judgement = check(_parse(raw))
    return next(v for v in judgement.verdicts if v.key == "validation.nccl")


def test_the_nccl_test_runs_in_one_block_only_on_static_nodes() -> None:
    nccl = _nccl_in_one_block_on_static_h100()
    assert nccl.network is not None
    assert nccl.network.request.volcano_network_topology() == {
        "mode": "hard",
        "highestTierAllowed": 1,
    }
    raw = l40s_topology_values()
    groups = raw["gpu-platform:nodeGroups"]["gpu"]
    raw["gpu-platform:validation"] = {
        **raw["gpu-platform:validation"],
        "enabled": True,
        "nccl": {
            "pool": "ng-l40s-od",
            "minBusBandwidthGbps": 1,
            "topology": {"mode": "required", "level": "layer-3"},
        },
    }
    assert any(g["name"] == "ng-l40s-od" for g in groups)
    assert "validation.nccl.topology.mode" in _keys(_parse(raw))


def test_the_nccl_test_asks_for_a_block_only_on_a_class_placed_by_the_network() -> None:
    raw = stack_values("dev")
    raw["gpu-platform:validation"]["nccl"]["topology"] = {"mode": "preferred", "level": "layer-3"}
    assert problems(_parse(raw)) == [
        Problem(
            "validation.nccl.topology",
            {"mode": "preferred", "level": "layer-3"},
            "left out: GPU class a10g-x1 is not placed by the network "
            "(scheduling.topology.gpuClasses: none); its flavors carry no Topology, and Kueue "
            "refuses a podset asking for one on them ('Flavor ... does not support "
            "TopologyAwareScheduling')",
        )
    ]
    del raw["gpu-platform:validation"]["nccl"]["topology"]
    assert problems(_parse(raw)) == []


# --- through the CLI: exit 2 naming the key ------------------------------------------------------


def _base() -> dict[str, Any]:
    return l40s_topology_values()


def _opt_in(classes: list[str]) -> Callable[[dict[str, Any]], None]:
    def change(cfg: dict[str, Any]) -> None:
        cfg["gpu-platform:scheduling"] = {"topology": {"gpuClasses": classes}}

    return change


def _gang(**fields: Any) -> Callable[[dict[str, Any]], None]:
    def change(cfg: dict[str, Any]) -> None:
        cfg["gpu-platform:trainingJobs"] = [_job(gpuClass="l40s-x1", nodes=2, **fields)]

    return change


CASES: list[ConfigCase] = [
    (
        "class-without-labels",
        _opt_in(["l4-x1"]),
        "gpu-platform:scheduling.topology.gpuClasses[0]",
        "carry no topology.k8s.aws/network-node-layer label",
    ),
    (
        "class-served-by-karpenter",
        _opt_in(["h100-x8"]),
        "gpu-platform:scheduling.topology.gpuClasses[0]",
        "a class served by managed node groups only",
    ),
    (
        "unknown-class",
        _opt_in(["b200-x8"]),
        "gpu-platform:scheduling.topology.gpuClasses[0]",
        "a GPU class the pools provide",
    ),
    (
        "class-twice",
        _opt_in(["l40s-x1", "l40s-x1"]),
        "gpu-platform:scheduling.topology.gpuClasses[1]",
        "each class once",
    ),
    (
        "unconstrained-with-level",
        _gang(topology={"mode": "unconstrained", "level": "zone"}),
        "gpu-platform:trainingJobs[0].topology.level",
        "an unconstrained gang names no level",
    ),
    (
        "required-without-level",
        _gang(topology={"mode": "required"}),
        "gpu-platform:trainingJobs[0].topology.level",
        "for mode required",
    ),
    (
        "level-the-class-lacks",
        _gang(topology={"mode": "required", "level": "layer-4"}),
        "gpu-platform:trainingJobs[0].topology.level",
        "a level of l40s-x1's Topology",
    ),
    (
        "required-block-on-autoscaled-groups",
        _gang(topology={"mode": "required", "level": "layer-3"}),
        "gpu-platform:trainingJobs[0].topology.mode",
        "the gang may never start",
    ),
    (
        "gang-finer-than-its-level",
        _gang(topology={"mode": "required", "level": "hostname"}),
        "gpu-platform:trainingJobs[0].topology.level",
        "never fit one kubernetes.io/hostname",
    ),
]

test_topology_config_errors_exit_2 = config_error_test(CASES, _base)


def test_the_base_of_the_cli_cases_is_valid() -> None:
    assert problems(_parse(_base())) == []
    cfg = _parse(_base())
    assert build(cfg).topologies
