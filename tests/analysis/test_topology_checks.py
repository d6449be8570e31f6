"""What each node source makes of a gang's network request, what happens when no domain has room,
and the refusals of topology_checks.py pinned whole: the edges and the user-facing text the
mutation run (issue #39) found no test reading. The scenarios through the program are in
test_topology.py."""

from __future__ import annotations

from dataclasses import replace

import pytest

from components import catalog
from components.analysis import topology, topology_checks
from components.analysis.nodes import NodeSource, Scaler
from components.analysis.topology import JobTopology
from components.config import Problem, TopologyLevel, TopologyMode, TopologyRequest
from tests.analysis.test_topology import _job, _with_jobs
from tests.conftest import l40s_topology_values

LEVELS = topology.levels_of(3)


def _source(name: str, scaler: Scaler, zones: int = 2, zone_index: int | None = None) -> NodeSource:
    return NodeSource(
        name=name,
        kind="karpenter" if scaler == "karpenter" else "managed",
        key=f"test.{name}",
        gpu_class="l40s-x1",
        capacity_type="on-demand",
        instance_types=("g6e.xlarge",),
        labels={catalog.LABEL_GPU_CLASS: "l40s-x1"},
        taints=(catalog.gpu_taint(),),
        zones=zones,
        allocatable={},
        scaler=scaler,
        max_nodes=4,
        limit_text="",
        zone_index=zone_index,
    )


def _request(mode: TopologyMode, level: TopologyLevel | None) -> JobTopology:
    return JobTopology(mode, level, LEVELS, False, "asked")


AUTOSCALER_BLIND = (
    "the autoscaler places new nodes blind to the hierarchy: the gang may never fit one"
)
KARPENTER_BLIND = "Karpenter launches for pending pods, blind to the network hierarchy"


@pytest.mark.parametrize(
    ("scaler", "zones", "mode", "level", "volcano", "honours", "how"),
    [
        (
            "static",
            2,
            "required",
            "layer-3",
            False,
            "yes",
            "its nodes exist before the gang: the gang waits until one layer-3 domain has room "
            "for all of it",
        ),
        (
            "static",
            2,
            "preferred",
            "layer-3",
            True,
            "yes",
            "its nodes exist before the gang: placed on the closest free nodes",
        ),
        ("karpenter", 2, "preferred", "layer-3", True, "best effort", KARPENTER_BLIND),
        ("karpenter", 2, "required", "zone", True, "no", KARPENTER_BLIND),
        ("karpenter", 2, "preferred", "layer-3", False, "no", KARPENTER_BLIND),
        ("autoscaler", 2, "unconstrained", None, False, "yes", "any node it brings"),
        (
            "autoscaler",
            2,
            "preferred",
            "layer-3",
            True,
            "best effort",
            "the autoscaler raises the group blind to the hierarchy; Volcano scores the closest "
            "nodes",
        ),
        (
            "autoscaler",
            2,
            "preferred",
            "layer-3",
            False,
            "best effort",
            "the autoscaler raises the group blind to the hierarchy; Kueue's second pass then "
            "packs the gang into the closest new nodes",
        ),
        (
            "autoscaler",
            1,
            "required",
            "zone",
            False,
            "yes",
            "one-zone group: every node it brings is in the zone; topology assigned in Kueue's "
            "second pass, after the scale-up",
        ),
        ("autoscaler", 1, "required", "zone", True, "no", f"{AUTOSCALER_BLIND} zone domain"),
        ("autoscaler", 2, "required", "zone", False, "no", f"{AUTOSCALER_BLIND} zone domain"),
        ("autoscaler", 1, "required", "layer-3", False, "no", f"{AUTOSCALER_BLIND} layer-3 domain"),
    ],
)
def test_how_each_way_of_bringing_nodes_meets_a_request(
    scaler: Scaler,
    zones: int,
    mode: TopologyMode,
    level: TopologyLevel | None,
    volcano: bool,
    honours: topology_checks.Honour,
    how: str,
) -> None:
    source = _source("src", scaler, zones)
    got = topology_checks.source_honour(_request(mode, level), source, volcano=volcano)
    assert got == topology_checks.SourceHonour("src", scaler, honours, how)


@pytest.mark.parametrize(
    ("mode", "level", "volcano", "text"),
    [
        ("unconstrained", None, False, "anywhere there is room (no domain asked)"),
        ("preferred", "layer-3", True, "soft: scored towards the closest HyperNode, never blocks"),
        (
            "preferred",
            "layer-3",
            False,
            "relaxed: the next level up is tried (layer by layer to the zone), then the gang is "
            "spread over several domains of the top level",
        ),
        (
            "required",
            "layer-2",
            True,
            "waits: the gang stays Pending until one tier-2 HyperNode holds it",
        ),
        (
            "required",
            None,
            True,
            "waits: the gang stays Pending until one tier-4 HyperNode holds it",
        ),
        (
            "required",
            "hostname",
            True,
            "waits: the gang stays Pending until one tier-0 HyperNode holds it",
        ),
        (
            "required",
            "layer-3",
            False,
            "waits: Kueue keeps the workload pending until one layer-3 domain holds the whole "
            "gang; behind the ProvisioningRequest check the quota is held while the second pass "
            "retries, the booking expires after 10 min and the check is retried "
            "(backoffLimitCount 3) before the workload is deactivated",
        ),
    ],
)
def test_what_happens_when_no_domain_has_room(
    mode: TopologyMode, level: TopologyLevel | None, volcano: bool, text: str
) -> None:
    assert topology_checks.when_full(_request(mode, level), volcano=volcano) == text


PUBLISHED = (
    "; per-node baseline {gbps} Gbps ({type}, EC2 DescribeInstanceTypes, published); PLANNING, "
    "UNVERIFIED: AWS publishes no bandwidth or latency per network layer, only that fewer hops "
    "means closer instances"
)


@pytest.mark.parametrize(
    ("level", "hops", "where"),
    [
        (None, None, "no domain asked: nodes anywhere in the flavor"),
        ("hostname", 0, "one node: no network between ranks"),
        ("zone", None, "one zone: up to every layer and above layer 1 (more than 6 links)"),
        ("layer-1", 6, "one layer-1 network node: at most 6 links between two nodes"),
        ("layer-2", 4, "one layer-2 network node: at most 4 links between two nodes"),
        ("layer-3", 2, "one layer-3 network node: at most 2 links between two nodes"),
    ],
)
def test_the_effect_of_each_level_in_hops_and_the_published_baseline(
    level: TopologyLevel | None, hops: int | None, where: str
) -> None:
    gbps = catalog.NETWORK_BASELINE_MBPS["p5.48xlarge"] / 1000
    assert topology_checks.level_effect(
        level, LEVELS, "p5.48xlarge"
    ) == topology_checks.LevelEffect(
        hops, gbps, where + PUBLISHED.format(gbps=f"{gbps:g}", type="p5.48xlarge")
    )


def test_a_type_without_a_published_baseline_has_zero_gbps() -> None:
    effect = topology_checks.level_effect("layer-3", LEVELS, "no-such.type")
    assert effect.baseline_gbps == 0
    assert "per-node baseline 0 Gbps (no-such.type," in effect.text


def _gang(
    *fitting: NodeSource,
    nodes: int = 2,
    volcano: bool = False,
    asked: TopologyRequest | None = None,
    single_zone: bool = False,
) -> topology_checks.Gang:
    return topology_checks.Gang(
        "trainingJobs[3]", "l40s-x1", nodes, volcano, asked, single_zone, tuple(fitting)
    )


def test_a_request_on_a_class_without_a_topology_names_the_opted_in_classes() -> None:
    asked = TopologyRequest(mode="required", level="zone")
    assert topology_checks.topology_problems(_gang(), None, zone_count=2, opted=[]) == []
    for opted, named in (([], "none"), (["h100-x8", "p5-x8"], "h100-x8, p5-x8")):
        assert topology_checks.topology_problems(
            _gang(asked=asked), None, zone_count=2, opted=opted
        ) == [
            Problem(
                "trainingJobs[3].topology",
                {"mode": "required", "level": "zone"},
                "left out: GPU class l40s-x1 is not placed by the network "
                f"(scheduling.topology.gpuClasses: {named}); its flavors carry no Topology, and "
                "Kueue refuses a podset asking for one on them ('Flavor ... does not support "
                "TopologyAwareScheduling')",
            )
        ]


def test_a_level_the_classs_topology_lacks_is_named_with_every_level() -> None:
    request = _request("required", "layer-4")
    assert topology_checks.topology_problems(_gang(), request, zone_count=2, opted=[]) == [
        Problem(
            "trainingJobs[3].topology.level",
            "layer-4",
            "a level of l40s-x1's Topology (zone, layer-1, layer-2, layer-3, hostname): its "
            "instance types carry no such node label, so Kueue would never admit the job "
            "('Flavor ... does not contain the requested level', kubernetes-sigs/kueue@v0.19.2 "
            "pkg/scheduler/flavorassigner/tas_flavorassigner.go L191-194)",
        )
    ]


def test_a_required_hostname_holds_one_node_only_and_volcano_has_no_tier_for_it() -> None:
    static = _source("ng-static", "static")
    request = _request("required", "hostname")
    check = topology_checks.topology_problems
    assert check(_gang(static, nodes=1), request, zone_count=2, opted=[]) == []
    assert check(_gang(static, nodes=2), request, zone_count=2, opted=[]) == [
        Problem(
            "trainingJobs[3].topology.level",
            "hostname",
            "a level one domain of which can hold the gang: one node holds one of its 2 pods, so "
            "they never fit one kubernetes.io/hostname and the gang would wait forever",
        )
    ]
    assert check(_gang(static, nodes=1, volcano=True), request, zone_count=2, opted=[]) == [
        Problem(
            "trainingJobs[3].topology.level",
            "hostname",
            "one of layer-3, layer-2, layer-1, zone for a gang Volcano places: the HyperNodes it "
            "discovers stop at layer-3 (docs/topology.md), so no tier stands for hostname",
        )
    ]
    # Preferred never waits for a domain.
    preferred = _request("preferred", "hostname")
    assert check(_gang(static, nodes=2, volcano=True), preferred, zone_count=2, opted=[]) == []


def test_a_required_block_on_blind_sources_names_each_of_them() -> None:
    static, blind = _source("ng-static", "static"), _source("ng-auto", "autoscaler")
    other = _source("ng-auto-2", "autoscaler")
    request = _request("required", "layer-3")
    check = topology_checks.topology_problems
    how = f"{AUTOSCALER_BLIND} layer-3 domain"
    assert check(_gang(static), request, zone_count=2, opted=[]) == []
    assert check(_gang(blind, static, other), request, zone_count=2, opted=[]) == [
        Problem(
            "trainingJobs[3].topology.mode",
            "required",
            "preferred (or required at the zone of one-zone groups): "
            f"ng-auto (test.ng-auto, autoscaler): {how}; "
            f"ng-auto-2 (test.ng-auto-2, autoscaler): {how}, so the gang may never start "
            "(Kueue: SecondPassFailed until the booking expires, retried, then the workload is "
            "deactivated: kubernetes-sigs/kueue@v0.19.2 "
            "keps/2724-topology-aware-scheduling/README.md L692-707)",
        )
    ]
    assert check(_gang(blind, volcano=True), request, zone_count=2, opted=[]) == [
        Problem(
            "trainingJobs[3].topology.mode",
            "required",
            f"preferred: ng-auto (test.ng-auto, autoscaler): {how}, so the gang may never start",
        )
    ]
    # Preferred on the same sources is best effort, never refused.
    preferred = _request("preferred", "layer-3")
    assert check(_gang(blind), preferred, zone_count=2, opted=[]) == []


def test_a_one_zone_gang_asking_less_than_required_across_zones_is_named() -> None:
    a, b = _source("ng-a", "static", 1, 0), _source("ng-b", "static", 1, 1)
    preferred = _request("preferred", "layer-3")
    check = topology_checks.topology_problems
    assert check(_gang(a, b, single_zone=True), preferred, zone_count=2, opted=[]) == [
        Problem(
            "trainingJobs[3].topology.mode",
            "preferred",
            "required (at the zone or below) for a gang held to one zone: a preferred request "
            "may spread it over zones, the sources of a flavor (ng-a, ng-b) reaching more than "
            "one, while its pods' zone podAffinity keeps every pod in pod 0's zone: the stray "
            "pods would stay Pending",
        )
    ]
    # Not held to one zone, one node, required, Volcano's, or flavors in one zone: nothing.
    assert check(_gang(a, b), preferred, zone_count=2, opted=[]) == []
    assert check(_gang(a, b, single_zone=True, nodes=1), preferred, zone_count=2, opted=[]) == []
    required = _request("required", "zone")
    assert check(_gang(a, b, single_zone=True), required, zone_count=2, opted=[]) == []
    assert (
        check(_gang(a, b, single_zone=True, volcano=True), preferred, zone_count=2, opted=[]) == []
    )
    assert check(_gang(a, single_zone=True), preferred, zone_count=2, opted=[]) == []
    assert check(_gang(a, b, single_zone=True), preferred, zone_count=1, opted=[]) == []


def test_one_zone_flavors_is_per_capacity_type_and_trivial_on_a_one_zone_stack() -> None:
    """topology.one_zone_flavors, which _zone_problems and the default rest on."""
    spread = _source("ng-spread", "autoscaler")
    a, b = _source("ng-a", "static", 1, 0), _source("ng-b", "static", 1, 1)
    spot_b = replace(b, name="ng-spot-b", capacity_type="spot")
    assert topology.one_zone_flavors([spread], 1)
    assert not topology.one_zone_flavors([spread], 2)
    assert not topology.one_zone_flavors([a, b], 2)
    assert not topology.one_zone_flavors([a, b], 3)
    assert topology.one_zone_flavors([a, spot_b], 2)
    assert topology.one_zone_flavors([a, replace(a, name="ng-a2")], 3)


def test_an_asked_request_is_resolved_as_asked() -> None:
    asked = TopologyRequest(mode="preferred", level="layer-2")
    assert topology.resolve(asked, 4, True, False, LEVELS) == JobTopology(
        "preferred", "layer-2", LEVELS, False, "asked"
    )
    assert topology.resolve(asked, 4, True, False, None) is None


def test_volcano_required_at_the_zone_of_a_one_zone_group_is_refused_kueue_is_not() -> None:
    """Kueue's second pass assigns the zone after the scale-up; Volcano's pending pods get nodes
    placed blind, so only Kueue may require the zone of an autoscaled one-zone group."""
    one_zone = _source("ng-one", "autoscaler", 1, 0)
    request = _request("required", "zone")
    check = topology_checks.topology_problems
    assert check(_gang(one_zone), request, zone_count=2, opted=[]) == []
    assert check(_gang(one_zone, volcano=True), request, zone_count=2, opted=[]) == [
        Problem(
            "trainingJobs[3].topology.mode",
            "required",
            f"preferred: ng-one (test.ng-one, autoscaler): {AUTOSCALER_BLIND} zone domain, so the "
            "gang may never start",
        )
    ]


def test_a_jobs_request_follows_its_efa_and_the_zones_its_fitting_sources_reach() -> None:
    """topology.job_topology: EFA holds the gang to one zone; required at the zone only where
    its sources reach several; a class without a Topology has no request."""
    cfg = _with_jobs(l40s_topology_values(), _job(gpuClass="l40s-x1", nodes=2))
    job = cfg.training_jobs[0]
    a, b = _source("ng-a", "static", 1, 0), _source("ng-b", "static", 1, 1)
    opted = {"l40s-x1": LEVELS}
    block = "one layer-3 block first, relaxed level by level"
    assert topology.job_topology(job, 0, opted, [a, b], 2) == JobTopology(
        "preferred", "layer-3", LEVELS, True, f"a TCP gang that may span zones: {block}"
    )
    assert topology.job_topology(job, 1, opted, [a], 2) == JobTopology(
        "preferred",
        "layer-3",
        LEVELS,
        True,
        f"a gang held to one zone on one-zone flavors: {block}",
    )
    assert topology.job_topology(job, 1, opted, [a, b], 2) == JobTopology(
        "required",
        "zone",
        LEVELS,
        True,
        "a gang held to one zone (EFA does not cross zones) on flavors that reach several: the "
        "zone is required, and Kueue packs the gang into few network blocks inside it",
    )
    assert topology.job_topology(job, 1, {}, [a, b], 2) is None
    asked = _with_jobs(
        l40s_topology_values(),
        _job(gpuClass="l40s-x1", nodes=2, topology={"mode": "preferred", "level": "layer-2"}),
    ).training_jobs[0]
    assert topology.job_topology(asked, 1, opted, [a, b], 2) == JobTopology(
        "preferred", "layer-2", LEVELS, False, "asked"
    )
