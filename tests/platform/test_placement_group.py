"""The EFA cluster placement group: the pure rule (which pools and groups join it), the
EC2NodeClass builder, the Karpenter and Cluster components under mocks, and its config errors."""

from __future__ import annotations

import copy
from typing import Any

from components.analysis import efa_placement
from components.analysis.facts import build
from components.config import KarpenterPool
from components.platform.capacity import karpenter_builders as kpb
from synth.harness import SynthResult, run_program
from tests.conftest import config_error_test, karpenter_gpu_overrides, stack_values
from tests.platform.test_karpenter import NODECLASS, NODEPOOL, _prod_cfg

PLACEMENT_GROUP = "aws:ec2/placementGroup:PlacementGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
MNG = "eks:index:ManagedNodeGroup"
PG_URN_SUFFIX = "aws:ec2/placementGroup:PlacementGroup::cluster-efa"


def _classes(result: SynthResult) -> dict[str, dict[str, Any]]:
    return {c.inputs["metadata"]["name"]: c.inputs["spec"] for c in result.of_type(NODECLASS)}


def _pool_classes(result: SynthResult) -> dict[str, str]:
    return {
        p.inputs["metadata"]["name"]: p.inputs["spec"]["template"]["spec"]["nodeClassRef"]["name"]
        for p in result.of_type(NODEPOOL)
    }


# --- pure builders --------------------------------------------------------------------------


def test_efa_pools_get_their_own_class_and_reserved_pools_keep_theirs() -> None:
    h100 = KarpenterPool.model_validate(
        {"name": "h", "gpuClass": "h100-x8", "capacityType": "on-demand", "limits": {"gpus": 8}}
    )
    reserved = h100.model_copy(update={"capacity_type": "reserved"})
    assert h100.is_efa
    assert kpb.pool_node_class(h100, in_placement_group=True) == kpb.GPU_EFA_NODE_CLASS
    assert kpb.pool_node_class(h100, in_placement_group=False) == kpb.GPU_NODE_CLASS
    assert kpb.pool_node_class(reserved, in_placement_group=True) == kpb.GPU_RESERVED_NODE_CLASS
    # g6.xlarge has no EFA: an L4 x1 pool of the usual sizes is not an EFA pool.
    l4 = KarpenterPool.model_validate(
        {"name": "l", "gpuClass": "l4-x1", "capacityType": "on-demand", "limits": {"gpus": 4}}
    )
    assert not l4.is_efa


def test_node_class_spec_selects_the_group_by_id_and_one_subnet() -> None:
    common: dict[str, Any] = {
        "cluster_name": "gpu-x",
        "ami_alias": "al2023@v20251023",
        "instance_profile": "p",
        "security_group_id": "sg-1",
        "disk": _prod_disk(),
        "tags": {},
    }
    spec = kpb.ec2nodeclass_spec(
        **common,
        instance_store_raid0=True,
        placement_group_id="pg-0123abcd",
        subnet_ids=["subnet-0aa"],
    )
    assert spec["placementGroupSelector"] == {"id": "pg-0123abcd"}
    assert spec["subnetSelectorTerms"] == [{"id": "subnet-0aa"}]
    plain = kpb.ec2nodeclass_spec(**common, instance_store_raid0=False)
    assert "placementGroupSelector" not in plain
    assert plain["subnetSelectorTerms"] == [{"tags": {kpb.DISCOVERY_TAG: "gpu-x"}}]


def _prod_disk() -> Any:
    from components.config import KarpenterNodeClass

    return KarpenterNodeClass(disk_size_gib=500)


# --- components under mocks -----------------------------------------------------------------


def test_prod_h100_on_demand_pool_launches_into_the_cluster_placement_group(
    prod_karpenter: SynthResult,
) -> None:
    prod = prod_karpenter
    (group,) = prod.of_type(PLACEMENT_GROUP)
    assert group.inputs["strategy"] == "cluster"
    assert group.inputs["name"] == "gpu-prod-efa"
    classes = _classes(prod)
    efa = classes[kpb.GPU_EFA_NODE_CLASS]
    assert efa["placementGroupSelector"]["id"].startswith("pg-")
    # One AZ: the first private subnet (network.efaPlacementGroup.zoneIndex 0), by id.
    assert len(efa["subnetSelectorTerms"]) == 1
    assert efa["subnetSelectorTerms"][0]["id"].startswith("subnet-")
    (efa_class,) = [c for c in prod.of_type(NODECLASS) if c.name.endswith("-gpu-efa")]
    assert any(d.endswith(PG_URN_SUFFIX) for d in efa_class.dependencies)
    assert any(d.endswith("Subnet::network-private-us-east-1a") for d in efa_class.dependencies)
    pools = _pool_classes(prod)
    assert pools["kp-h100-od"] == kpb.GPU_EFA_NODE_CLASS
    # Spot L4/L40S pools keep every zone; the reserved class stays out (its ODCR was not
    # created in the group) and keeps every subnet (EC2 uses the reservation's AZ).
    assert pools["kp-l4-spot"] == kpb.GPU_NODE_CLASS
    assert pools["kp-h100-reserved"] == kpb.GPU_RESERVED_NODE_CLASS
    for name in (kpb.GPU_NODE_CLASS, kpb.GPU_RESERVED_NODE_CLASS, kpb.CPU_NODE_CLASS):
        assert "placementGroupSelector" not in classes[name]
        assert "tags" in classes[name]["subnetSelectorTerms"][0]
    assert prod.outputs["efaPlacementGroupArn"].endswith(":placement-group/gpu-prod-efa")


def test_dev_has_no_efa_pool_and_no_placement_group(dev: SynthResult) -> None:
    assert dev.of_type(NODECLASS)
    assert dev.of_type(PLACEMENT_GROUP) == []
    assert kpb.GPU_EFA_NODE_CLASS not in _classes(dev)
    assert dev.outputs["efaPlacementGroupArn"] is None


def test_reservations_created_in_the_group_put_the_reserved_class_in_it() -> None:
    overrides = copy.deepcopy(karpenter_gpu_overrides())
    overrides["gpu-platform:karpenter"]["reservations"][0]["inPlacementGroup"] = True
    result = run_program("prod", overrides=overrides)
    classes = _classes(result)
    reserved = classes[kpb.GPU_RESERVED_NODE_CLASS]
    assert (
        reserved["placementGroupSelector"]
        == classes[kpb.GPU_EFA_NODE_CLASS]["placementGroupSelector"]
    )
    assert reserved["capacityReservationSelectorTerms"]
    assert "tags" in reserved["subnetSelectorTerms"][0]


def test_the_group_can_be_turned_off() -> None:
    network = {**stack_values("prod").get("gpu-platform:network", {})}
    network["efaPlacementGroup"] = {"enabled": False}
    overrides = {**karpenter_gpu_overrides(), "gpu-platform:network": network}
    result = run_program("prod", overrides=overrides)
    assert result.of_type(NODECLASS)
    assert result.of_type(PLACEMENT_GROUP) == []
    assert _pool_classes(result)["kp-h100-od"] == kpb.GPU_NODE_CLASS
    assert all("placementGroupSelector" not in s for s in _classes(result).values())


def test_efa_managed_group_launch_template_names_the_group(prod_static: SynthResult) -> None:
    templates = {t.name: t.inputs for t in prod_static.of_type(LAUNCH_TEMPLATE)}
    groups = {g.name: g.inputs for g in prod_static.of_type(MNG)}
    assert templates["cluster-h100-od"]["placement"] == {"groupName": "gpu-prod-efa"}
    assert len(groups["cluster-h100-od"]["subnetIds"]) == 1
    # Non-EFA groups: no placement, every private subnet.
    assert "placement" not in templates["cluster-l4-od"]
    assert len(groups["cluster-l4-od"]["subnetIds"]) == 3


def test_the_rule_names_the_pools_in_the_group() -> None:
    from components.config.load import namespace_values, parse

    raw = {**stack_values("prod"), **karpenter_gpu_overrides()}
    cfg = parse(
        namespace_values({k: v if isinstance(v, str) else _json(v) for k, v in raw.items()})
    )
    facts = build(cfg)
    assert facts.placement_group_needed
    assert [p.name for p in cfg.karpenter.pools if efa_placement.pool_in_group(cfg, p)] == [
        "kp-h100-od"
    ]
    assert [name for name, m in facts.pools.items() if m.placement_group] == ["kp-h100-od"]
    assert not efa_placement.reserved_in_group(cfg)


def _json(value: Any) -> str:
    import json

    return json.dumps(value)


# --- config errors --------------------------------------------------------------------------


def _reservation(c: dict[str, Any]) -> dict[str, Any]:
    reservation: dict[str, Any] = c["gpu-platform:karpenter"]["reservations"][0]
    return reservation


INVALID: list[tuple[str, Any, str, str]] = [
    (
        "placement group zone beyond the VPC's AZs",
        lambda c: c.setdefault("gpu-platform:network", {}).update(
            efaPlacementGroup={"zoneIndex": 3}
        ),
        "gpu-platform:network.efaPlacementGroup.zoneIndex",
        "an index of the 3 private subnets (0-2)",
    ),
    (
        "capacity block declared in the placement group",
        lambda c: _reservation(c).update(
            type="capacity-block",
            priceUsdPerHour=40.0,
            start="2026-12-01T11:30:00Z",
            end="2026-12-08T11:30:00Z",
            inPlacementGroup=True,
        ),
        "gpu-platform:karpenter.reservations[0].inPlacementGroup",
        "Capacity Blocks are placed in UltraClusters",
    ),
    (
        "reservations split in and out of the group",
        lambda c: c["gpu-platform:karpenter"]["reservations"].extend(
            [
                {
                    "name": "h100-more",
                    "id": "cr-0abc",
                    "instanceType": "p5.48xlarge",
                    "count": 1,
                    "inPlacementGroup": True,
                }
            ]
        ),
        "gpu-platform:karpenter.reservations[1].inPlacementGroup",
        "the same for every reservation",
    ),
    (
        "reservation in a group the stack does not create",
        lambda c: (
            _reservation(c).update(inPlacementGroup=True),
            c.setdefault("gpu-platform:network", {}).update(efaPlacementGroup={"enabled": False}),
        ),
        "gpu-platform:karpenter.reservations[0].inPlacementGroup",
        "network.efaPlacementGroup.enabled is false",
    ),
]

test_invalid_placement_config_exits_2_with_key_path = config_error_test(INVALID, _prod_cfg)


def test_report_shows_each_pools_node_class_and_placement(prod_karpenter: SynthResult) -> None:
    from synth.report import report

    text = report(prod_karpenter)
    section = text[text.index("## Karpenter NodePools") : text.index("## Reserved capacity")]
    rows = {line.split(" | ")[0].strip("| "): line for line in section.splitlines()[4:]}
    assert "`gpu-efa` (cluster placement group, 1 subnet, NVMe RAID0)" in rows["kp-h100-od"]
    assert "`gpu-reserved` (all tagged subnets, NVMe RAID0)" in rows["kp-h100-reserved"]
    assert "`cpu` (all tagged subnets)" in rows["general"]
