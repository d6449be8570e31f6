"""analysis.nodes: what each GPU node source carries into the rules and the report — its config
key path, labels, taints, zones, placement group, scale-up time and limit text — field by field
on the committed stacks' sources, and the region label a fleet's manager puts on a worker's
(issue #39: the mutation run's survivors of nodes.py, tests/analysis/mutation-survivors.md).
Pure: parsed stack configs, no synth."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from components import catalog
from components import config as stack_config
from components.analysis import efa_placement, nodes
from components.analysis.efa_placement import Membership
from components.analysis.facts import build
from tests.conftest import stack_values


def _parse(values: dict[str, Any]) -> stack_config.StackConfig:
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return stack_config.parse(stack_config.namespace_values(raw))


def test_each_source_is_named_by_its_own_config_key_path() -> None:
    """A pool's key counts every pool of `karpenter.pools`, GPU or not: with the CPU pool
    `general` moved first, dev's GPU pools are pools[1] and pools[2]."""
    values = stack_values("dev")
    pools = values["gpu-platform:karpenter"]["pools"]
    pools.sort(key=lambda pool: pool["name"] != "general")
    assert pools[0]["name"] == "general"
    sources = build(_parse(values)).sources
    assert [(s.name, s.key) for s in sources] == [
        ("ng-l4-spot", "nodeGroups.gpu[0]"),
        ("kp-a10g-spot", "karpenter.pools[1]"),
        ("kp-a10g-od", "karpenter.pools[2]"),
    ]


def _prod_pool(name: str) -> tuple[stack_config.StackConfig, int, stack_config.KarpenterPool]:
    cfg = _parse(stack_values("prod"))
    index, pool = next((i, p) for i, p in enumerate(cfg.karpenter.pools) if p.name == name)
    return cfg, index, pool


def test_a_karpenter_pool_outside_the_placement_group_spans_every_zone() -> None:
    cfg, index, pool = _prod_pool("kp-l4-od")
    group = efa_placement.group_name(cfg)
    source = nodes._pool_source(cfg, index, pool, Membership(placement_group=False), group)
    assert source.key == "karpenter.pools[2]"
    assert source.labels == {
        "gpu-platform.io/gpu-vendor": "nvidia",
        "gpu-platform.io/gpu-model": "l4",
        "gpu-platform.io/gpu-class": "l4-x1",
        "gpu-platform.io/capacity-type": "on-demand",
        "gpu-platform.io/workload-type": "training",
        "gpu-platform.io/provisioner": "karpenter",
        "gpu-platform.io/node-pool": "kp-l4-od",
    }
    assert source.taints == (catalog.gpu_taint(),)
    assert source.zones == cfg.network.zone_count == 3
    assert source.placement_group == ""
    assert source.zone_index is None
    assert source.limit_text == "limits.gpus 8"
    assert source.unqueued_reason == ""
    assert source.scaler == "karpenter"
    # Karpenter's batch window, then the launch of its first type.
    first = source.instance_types[0]
    assert source.scale_up_seconds == nodes.KARPENTER_BATCH_SECONDS + (
        catalog.node_launch_seconds(first)
    )


def test_a_karpenter_pool_in_the_placement_group_gets_its_name_and_one_zone() -> None:
    cfg, index, pool = _prod_pool("kp-h100-reserved")
    group = efa_placement.group_name(cfg)
    assert group
    zone = cfg.network.efa_placement_group.zone_index
    source = nodes._pool_source(cfg, index, pool, Membership(placement_group=True), group)
    assert source.placement_group == group
    assert source.zones == 1
    assert source.zone_index == zone
    assert zone is not None


def test_a_pools_unqueued_reason_reaches_its_source() -> None:
    cfg, index, pool = _prod_pool("kp-l4-od")
    reason = "validation runs only"
    said = pool.model_copy(update={"unqueued_reason": reason})
    source = nodes._pool_source(cfg, index, said, Membership(placement_group=False), "")
    assert source.unqueued_reason == reason


def test_node_sources_pass_each_pool_its_membership_and_the_group_name() -> None:
    cfg = _parse(stack_values("prod"))
    groups, pools = efa_placement.memberships(cfg)
    pools = {**pools, "kp-l4-od": Membership(placement_group=True)}
    by_name = {s.name: s for s in nodes.node_sources(cfg, groups, pools)}
    assert by_name["kp-l4-od"].placement_group == efa_placement.group_name(cfg) != ""
    assert by_name["kp-l4-spot"].placement_group == ""


def test_a_region_labels_every_source_and_changes_nothing_else() -> None:
    cfg = _parse(stack_values("prod"))
    groups, pools = efa_placement.memberships(cfg)
    plain = nodes.node_sources(cfg, groups, pools)
    regional = nodes.node_sources(cfg, groups, pools, "us-west-2")
    assert len(regional) == len(plain) > 0
    for source, labelled in zip(plain, regional, strict=True):
        assert labelled.labels == {**source.labels, catalog.REGION_LABEL: "us-west-2"}
        assert replace(labelled, labels=source.labels) == source
    assert all(catalog.REGION_LABEL not in s.labels for s in plain)
    # The facts of a worker judged by its manager carry it too.
    assert [s.labels for s in build(cfg, region="us-west-2").sources] == [
        s.labels for s in regional
    ]


def test_a_managed_groups_own_taints_follow_the_platforms_in_kubernetes_spelling() -> None:
    cfg = _parse(stack_values("prod"))
    spot = next(g for g in cfg.node_groups.gpu if g.capacity_type == "spot")
    own = stack_config.NodeTaint(key="example.com/dedicated", value="a", effect="NoExecute")
    tainted = spot.model_copy(update={"taints": [own]})
    assert nodes.managed_gpu_taints(tainted) == (
        catalog.gpu_taint(),
        catalog.spot_taint(),
        {"key": "example.com/dedicated", "value": "a", "effect": "NoExecute"},
    )


def test_a_pool_without_a_gpu_limit_holds_no_node() -> None:
    """The source's own guard for a pool without a GPU limit (`limits.gpus or 0`): no node, even
    on a 1-GPU type where a limit of one GPU would be one node. The config refuses such a GPU
    pool (KarpenterPool: limits.gpus is required and at least 1), so the pools here are
    model copies past validation: what is pinned is that the guard never invents a node."""
    cfg, index, pool = _prod_pool("kp-l4-od")
    assert pool.gpus_per_node == 1
    for gpus in (None, 0):
        unlimited = pool.model_copy(
            update={"limits": pool.limits.model_copy(update={"gpus": gpus})}
        )
        where = Membership(placement_group=False)
        assert nodes._pool_source(cfg, index, unlimited, where, "").max_nodes == 0


def test_the_facts_carry_the_memberships_the_sources_were_built_from() -> None:
    """The Cluster and Karpenter components read where each group's and pool's nodes go from
    the facts (`StackFacts.node_groups`, `.pools`), the same memberships as the sources."""
    cfg = _parse(stack_values("prod"))
    groups, pools = efa_placement.memberships(cfg)
    facts = build(cfg)
    assert facts.node_groups == groups
    assert facts.pools == pools
    assert any(m.placement_group for m in groups.values())


def _dev_group_source(**changes: Any) -> nodes.NodeSource:
    """Dev's managed group ng-l4-spot (g6.xlarge, g6.2xlarge, g6.4xlarge; min 0, max 2) as a
    source, the group changed by `changes`."""
    cfg = _parse(stack_values("dev"))
    (group,) = cfg.node_groups.gpu
    group = group.model_copy(update=changes)
    groups, _ = efa_placement.memberships(cfg)
    return nodes._group_source(cfg, 0, group, groups[group.name], "")


def test_an_autoscaled_group_offers_its_first_type_and_scales_after_a_scan() -> None:
    source = _dev_group_source()
    assert source.scaler == "autoscaler"
    assert list(source.allocatable) == ["g6.xlarge"]
    assert source.limit_text == "minSize 0 / maxSize 2, cluster-autoscaler"
    assert source.scale_up_seconds == nodes.AUTOSCALER_SCAN_SECONDS + (
        catalog.node_launch_seconds("g6.xlarge")
    )


def test_a_fixed_group_offers_every_type_and_brings_no_node() -> None:
    """A group of one size is not resized: its nodes already exist, of any of its types (a pod
    must fit each), and nothing launches one for a pending pod."""
    source = _dev_group_source(min_size=2, desired_size=2, max_size=2)
    assert source.scaler == "static"
    assert list(source.allocatable) == ["g6.xlarge", "g6.2xlarge", "g6.4xlarge"]
    assert source.limit_text == "desiredSize 2, fixed"
    assert source.scale_up_seconds == 0
    assert source.max_nodes == 2


def test_allocatable_counts_efa_devices_only_where_asked() -> None:
    assert nodes.allocatable("p5.48xlarge", efa=True).efa == 32
    assert nodes.allocatable("p5.48xlarge", efa=False).efa == 0
    assert nodes.allocatable("g6.xlarge", efa=True).efa == 0
