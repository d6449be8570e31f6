""" "Will it run" states the placement group of multi-node EFA workloads, truthfully: the grouped
source has one zone, the reserved source outside the group keeps every zone, and an FSx file
system in another AZ than the group is called out."""

from __future__ import annotations

import copy
import json
from typing import Any

from components.analysis import efa_placement
from components.config import Problem, StackConfig
from components.config.load import namespace_values, parse
from tests.analysis.judged import sources_of, verdicts_for
from tests.conftest import values_with_jobs


def _cfg(**changes: Any) -> StackConfig:
    raw = copy.deepcopy(values_with_jobs("prod"))
    raw.update(changes)
    return parse(
        namespace_values({k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()})
    )


def _pretrain_zone(cfg: StackConfig) -> str:
    (verdict,) = [v for v in verdicts_for(cfg) if v.workload == "team-pretrain/pretrain-7b"]
    assert verdict.runnable, verdict.problems
    return verdict.zone


def test_pretrain_names_the_group_per_source() -> None:
    zone = _pretrain_zone(_cfg())
    assert "one zone (required podAffinity" in zone
    assert "`ng-h100-od`: cluster placement group `gpu-prod-efa`, AZ index 0 only" in zone
    assert "`kp-h100-reserved`: no placement group (the reservations are not declared" in zone


def test_grouped_sources_have_one_zone_and_the_others_every_zone() -> None:
    sources = {s.name: s for s in sources_of(_cfg())}
    assert sources["ng-h100-od"].placement_group == "gpu-prod-efa"
    assert sources["ng-h100-od"].zones == 1
    assert sources["kp-h100-reserved"].placement_group == ""
    assert sources["kp-h100-reserved"].zones == 3
    assert sources["kp-l4-spot"].zones == 3


def test_without_the_group_the_report_says_so() -> None:
    """Without the placement group the autoscaled H100 group spans every zone, so the EFA gang
    cannot count on it (willrun.scattered) until the group is confined with `zoneIndex`; then
    the report says there is no placement group."""
    raw = values_with_jobs("prod")
    network = {**raw.get("gpu-platform:network", {}), "efaPlacementGroup": {"enabled": False}}
    cfg = _cfg(**{"gpu-platform:network": network})
    assert {s.name: s.zones for s in sources_of(cfg)}["ng-h100-od"] == 3
    (verdict,) = [v for v in verdicts_for(cfg) if v.workload == "team-pretrain/pretrain-7b"]
    assert [p[0] for p in verdict.problems] == ["trainingJobs[0].zones"], verdict.problems
    assert "nodeGroups.gpu[0].zoneIndex" in verdict.problems[0][2]
    groups = copy.deepcopy(raw["gpu-platform:nodeGroups"])
    groups["gpu"][0]["zoneIndex"] = 2
    cfg = _cfg(**{"gpu-platform:network": network, "gpu-platform:nodeGroups": groups})
    assert {s.name: s.zones for s in sources_of(cfg)}["ng-h100-od"] == 1
    zone = _pretrain_zone(cfg)
    assert "placement group `" not in zone
    assert "`ng-h100-od`: no placement group" in zone


def test_fsx_in_another_zone_than_the_group_is_called_out() -> None:
    raw = values_with_jobs("prod")
    storage = copy.deepcopy(raw["gpu-platform:storage"])
    storage["rwx"]["subnetIndex"] = 1
    zone = _pretrain_zone(_cfg(**{"gpu-platform:storage": storage}))
    assert "FSx is in AZ index 1, the placement group in AZ index 0" in zone
    network = {**raw.get("gpu-platform:network", {}), "efaPlacementGroup": {"zoneIndex": 1}}
    aligned = _pretrain_zone(
        _cfg(**{"gpu-platform:storage": storage, "gpu-platform:network": network})
    )
    assert "FSx is in AZ index" not in aligned
    assert "AZ index 1 only" in aligned


def test_efa_managed_group_offers_its_efa_devices_in_the_group() -> None:
    from tests.conftest import STATIC_GPU_GROUPS, node_group_overrides

    sources = {s.name: s for s in sources_of(_cfg(**node_group_overrides(STATIC_GPU_GROUPS)))}
    h100 = sources["h100-od"]
    # cluster.py gives the launch template one EFA interface per card: 32 on a p5.48xlarge.
    assert h100.allocatable["p5.48xlarge"].efa == 32
    assert (h100.placement_group, h100.zones) == ("gpu-prod-efa", 1)
    l4 = sources["l4-od"]
    assert l4.allocatable["g6.4xlarge"].efa == 0
    assert (l4.placement_group, l4.zones) == ("", 3)


# --- the rules themselves, on prod's config with its values changed (pure, no synth) --------


def _prod_with(change: Any) -> StackConfig:
    raw = copy.deepcopy(values_with_jobs("prod"))
    change(raw)
    return parse(
        namespace_values({k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()})
    )


def _reservations_in_group(raw: dict[str, Any]) -> None:
    for reservation in raw["gpu-platform:karpenter"]["reservations"]:
        reservation["inPlacementGroup"] = True


def test_the_reserved_class_joins_the_group_only_when_every_reservation_was_made_in_it() -> None:
    assert efa_placement.reserved_in_group(_prod_with(lambda raw: None)) is False
    cfg = _prod_with(_reservations_in_group)
    assert cfg.network.efa_placement_group.enabled
    assert efa_placement.reserved_in_group(cfg) is True
    # No reservation at all: nothing was made in the group.
    none = cfg.model_copy(
        update={"karpenter": cfg.karpenter.model_copy(update={"reservations": []})}
    )
    assert efa_placement.reserved_in_group(none) is False


def test_a_reservation_in_a_group_the_stack_does_not_create_is_named() -> None:
    cfg = _prod_with(_reservations_in_group)
    off = cfg.network.efa_placement_group.model_copy(update={"enabled": False})
    cfg = cfg.model_copy(
        update={"network": cfg.network.model_copy(update={"efa_placement_group": off})}
    )
    assert efa_placement.check_placement_group(cfg) == [
        Problem(
            "karpenter.reservations[0].inPlacementGroup",
            True,
            "false while network.efaPlacementGroup.enabled is false (there is no group to "
            "have created the reservation in)",
        )
    ]


def test_a_grouped_node_groups_zone_index_off_the_groups_zone_names_its_value() -> None:
    cfg = _prod_with(lambda raw: None)
    index, group = next(
        (i, g)
        for i, g in enumerate(cfg.node_groups.gpu)
        if efa_placement.node_group_in_group(cfg, g)
    )
    pg_zone = cfg.network.efa_placement_group.zone_index
    moved = group.model_copy(update={"zone_index": pg_zone + 1})
    groups = [moved if g is group else g for g in cfg.node_groups.gpu]
    cfg = cfg.model_copy(update={"node_groups": cfg.node_groups.model_copy(update={"gpu": groups})})
    assert efa_placement.check_node_group_zones(cfg) == [
        Problem(
            f"nodeGroups.gpu[{index}].zoneIndex",
            pg_zone + 1,
            f"unset or {pg_zone}: the group launches into the EFA placement group, which lives "
            f"in network.efaPlacementGroup.zoneIndex ({pg_zone})",
        )
    ]


def _group_off(cfg: StackConfig) -> StackConfig:
    off = cfg.network.efa_placement_group.model_copy(update={"enabled": False})
    return cfg.model_copy(
        update={"network": cfg.network.model_copy(update={"efa_placement_group": off})}
    )


def test_an_efa_pool_joins_the_group_reserved_pools_only_with_their_reservations() -> None:
    cfg = _prod_with(lambda raw: None)
    reserved = next(p for p in cfg.karpenter.pools if p.name == "kp-h100-reserved")
    assert reserved.is_efa
    on_demand = reserved.model_copy(update={"capacity_type": "on-demand"})
    assert efa_placement.pool_in_group(cfg, on_demand) is True
    assert efa_placement.pool_in_group(_group_off(cfg), on_demand) is False
    assert efa_placement.pool_in_group(cfg, reserved) is False  # not declared inPlacementGroup
    in_group = _prod_with(_reservations_in_group)
    assert efa_placement.pool_in_group(in_group, reserved) is True
    # The memberships say the same, pool by pool.
    assert efa_placement.memberships(cfg)[1]["kp-h100-reserved"] == (
        efa_placement.Membership(placement_group=False)
    )
    assert efa_placement.memberships(in_group)[1]["kp-h100-reserved"] == (
        efa_placement.Membership(placement_group=True)
    )


def test_a_managed_group_joins_the_group_from_one_efa_device_unless_a_capacity_block() -> None:
    cfg = _prod_with(lambda raw: None)
    group = next(g for g in cfg.node_groups.gpu if g.name == "ng-h100-od")
    assert efa_placement.node_group_in_group(cfg, group) is True
    one_card = group.model_copy(update={"instance_types": ["g6.8xlarge"]})
    assert one_card.efa_devices == 1
    assert efa_placement.node_group_in_group(cfg, one_card) is True
    block = group.model_copy(update={"capacity_type": "capacity-block"})
    assert efa_placement.node_group_in_group(cfg, block) is False
    assert efa_placement.node_group_in_group(_group_off(cfg), group) is False
