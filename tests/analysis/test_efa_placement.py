""" "Will it run" states the placement group of multi-node EFA workloads, truthfully: the grouped
source has one zone, the reserved source outside the group keeps every zone, and an FSx file
system in another AZ than the group is called out."""

from __future__ import annotations

import copy
import json
from typing import Any

from components.config import StackConfig
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
