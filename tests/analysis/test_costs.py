"""Cost figures (components/analysis/costs.py): pure functions over values at the catalog's
planning prices, each called once by the facts; the report renders what they return."""

from __future__ import annotations

import json

import pytest

from components import catalog
from components.analysis import capacity, costs
from components.analysis.capacity import ReservationRow
from components.analysis.capacity import reservations as capacity_reservations
from components.analysis.facts import build
from components.config import KarpenterPool, NodeGroupsConfig, RwxConfig, StackConfig
from components.config.load import namespace_values, parse
from tests.conftest import values_with_jobs


def test_a_jobs_hourly_cost_is_its_nodes_at_the_planning_price_of_its_type() -> None:
    cost = costs.job_hourly_cost(4, "p5.48xlarge")
    row = catalog.instance("p5.48xlarge")
    assert cost.spot == pytest.approx(4 * row.spot_usd_per_hour)
    assert cost.on_demand == pytest.approx(4 * row.on_demand_usd_per_hour)
    assert costs.job_hourly_cost(0, "g6.xlarge") == costs.HourlyCost(0.0, 0.0)


def _groups(*gpu: dict[str, object]) -> NodeGroupsConfig:
    return NodeGroupsConfig.model_validate(
        {
            "system": {"instanceTypes": ["m6i.large", "m6i.xlarge"], "desiredSize": 2},
            "gpu": list(gpu),
        }
    )


H100 = {"name": "ng-h100", "instanceTypes": ["p5.48xlarge"], "capacityType": "on-demand"}
L40S = {
    "name": "a-l40s",
    "instanceTypes": ["g6e.xlarge", "g6e.4xlarge", "g6e.2xlarge"],
    "capacityType": "spot",
    "desiredSize": 1,
}


def test_node_groups_are_priced_idle_on_the_first_type_and_at_max_on_the_dearest() -> None:
    groups = costs.node_group_costs(
        _groups({**H100, "maxSize": 2}, {**L40S, "maxSize": 3}), frozenset({"ng-h100"})
    )
    assert [g.name for g in groups] == ["a-l40s", "ng-h100", "system"], "by name"
    l40s, h100, system = groups
    assert (h100.gpu_class, h100.gpus_per_node, h100.max_gpus) == ("h100-x8", 8, 16)
    assert h100.autoscaled and not l40s.autoscaled and not system.autoscaled
    assert h100.idle_usd_per_hour == 0.0
    assert h100.max_usd_per_hour == pytest.approx(2 * _price("p5.48xlarge", "on-demand"))
    assert l40s.idle_usd_per_hour == pytest.approx(_price("g6e.xlarge", "spot"))
    assert l40s.max_usd_per_hour == pytest.approx(3 * _price("g6e.4xlarge", "spot"))
    assert (system.gpu_class, system.capacity_type, system.max_gpus) == ("cpu", "on-demand", 0)
    assert system.idle_usd_per_hour == pytest.approx(2 * _price("m6i.large", "on-demand"))


def test_the_idle_cost_is_groups_at_desired_size_reservations_and_what_synth_counts() -> None:
    groups = costs.node_group_costs(_groups({**H100, "maxSize": 2}), frozenset())
    reservation = ReservationRow(
        "r", "cr-0", "on-demand-reservation", "p5.48xlarge", 2, 16, "", 110
    )
    items = costs.idle_items(groups, [reservation])
    assert [i.item for i in items] == [
        "node group system (m6i.large, desired size)",
        "capacity reservation r (p5.48xlarge, on-demand-reservation)",
    ], "a group holding no node costs nothing idle"
    assert items[1].usd_each == 55 and items[1].usd_per_hour == 110
    platform = costs.PlatformCosts(groups, {}, items, costs.StorageCost())
    idle = platform.idle_cost(control_planes=1, nat_gateways=3)
    assert [i.item for i in idle.items] == [
        "EKS control plane",
        *(i.item for i in items),
        "NAT gateways",
    ]
    assert idle.usd_per_hour == pytest.approx(
        catalog.EKS_CONTROL_PLANE_USD_PER_HOUR
        + 2 * _price("m6i.large", "on-demand")
        + 110
        + 3 * catalog.NAT_GATEWAY_USD_PER_HOUR
    )


def test_storage_is_priced_from_the_rwx_config() -> None:
    fsx = costs.storage_cost(
        RwxConfig.model_validate(
            {
                "type": "fsx",
                "deploymentType": "PERSISTENT_2",
                "perUnitStorageThroughput": 500,
                "storageCapacityGib": 4800,
            }
        )
    )
    assert fsx.efs is None and fsx.fsx is not None
    assert fsx.fsx.throughput_mbps == pytest.approx(4800 / 1024 * 500)
    price = catalog.FSX_LUSTRE_USD_PER_GB_MONTH[("PERSISTENT_2", 500)]
    assert fsx.fixed_usd_per_month(5) == pytest.approx(
        5 * catalog.KMS_KEY_USD_PER_MONTH + 4800 * price
    )
    provisioned = costs.storage_cost(
        RwxConfig.model_validate(
            {"type": "efs", "throughputMode": "provisioned", "provisionedThroughputMibps": 10}
        )
    )
    assert provisioned.efs == costs.EfsCost(10.0)
    assert provisioned.fixed_usd_per_month(0) == pytest.approx(
        10 * catalog.EFS_PROVISIONED_USD_PER_MIBPS_MONTH
    )
    elastic = costs.storage_cost(RwxConfig.model_validate({"type": "efs"}))
    assert elastic.efs == costs.EfsCost(None) and elastic.fixed_usd_per_month(2) == 2.0
    assert elastic.efs.rate.usd_per_tib_month == pytest.approx(
        catalog.EFS_STANDARD_USD_PER_GB_MONTH * 1024
    )
    assert costs.storage_cost(None) == costs.StorageCost(), "a fleet's manager has no RWX"


def _gpu_pool(gpu_class: str, instance_types: list[str], gpus: int) -> KarpenterPool:
    """An on-demand GPU NodePool of these types, limited to `gpus` GPUs."""
    return KarpenterPool.model_validate(
        dict(
            name=gpu_class.partition("-")[0],
            gpuClass=gpu_class,
            capacityType="on-demand",
            instanceTypes=instance_types,
            limits={"gpus": gpus},
        )
    )


def _prod_with_jobs() -> StackConfig:
    """Prod with its teams' job-stack jobs declared (tests/conftest.py values_with_jobs)."""
    raw = values_with_jobs("prod")
    return parse(
        namespace_values({k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()})
    )


def _price(name: str, capacity: catalog.CapacityType) -> float:
    return catalog.price_per_hour(name, capacity)


def test_max_cost_at_limit_uses_the_dearest_type_that_fits() -> None:
    pool = _gpu_pool("l4-x1", ["g6.xlarge", "g6.16xlarge"], 4)
    at_limit = costs.pool_max_cost(pool)
    assert at_limit.nodes == 4
    expected = 4 * catalog.instance("g6.16xlarge").on_demand_usd_per_hour
    assert at_limit.usd_per_hour == pytest.approx(expected)
    # The tighter limit stops it: 32 GiB / 16 GiB per node before 16 vCPU / 4 per node.
    cpu = KarpenterPool.model_validate(
        dict(
            name="general",
            capacityType="on-demand",
            workloadType="general",
            instanceTypes=["m6i.xlarge"],
            limits={"cpu": 16, "memoryGib": 32},
        )
    )
    at_limit = costs.pool_max_cost(cpu)
    expected = 2 * catalog.instance("m6i.xlarge").on_demand_usd_per_hour
    assert (at_limit.nodes, at_limit.usd_per_hour) == (2, pytest.approx(expected))


def test_a_fleet_jobs_replication_is_its_states_per_checkpoint_to_every_other_worker() -> None:
    copied = costs.replication(100.0, 1800.0, 2)
    assert copied.other_workers == 2
    assert copied.gib_per_hour == pytest.approx(100 * 2 * 2)
    assert copied.usd_per_hour == pytest.approx(
        400 * catalog.INTER_REGION_USD_PER_GB * 1024**3 / 1e9
    )
    assert costs.replication(None, 1800.0, 2) == costs.Replication(2, None, None)


def test_a_platforms_costs_hold_each_groups_pools_idle_and_storage_figure() -> None:
    groups = _groups({**H100, "maxSize": 2}, {**L40S, "maxSize": 3})
    pool = _gpu_pool("l4-x1", ["g6.xlarge"], 2)
    found = costs.platform_costs(
        groups, autoscaled=frozenset({"ng-h100"}), pools=[pool], reservations=(), rwx=None
    )
    assert found.node_groups == costs.node_group_costs(groups, frozenset({"ng-h100"}))
    assert [g.name for g in found.node_groups] == ["a-l40s", "ng-h100", "system"]
    assert found.pools == {"l4": costs.pool_max_cost(pool)}
    assert found.idle == costs.idle_items(found.node_groups, ())
    assert found.idle
    assert found.storage == costs.storage_cost(None)


def test_a_spot_groups_idle_nodes_are_priced_at_spot() -> None:
    (group,) = [
        g
        for g in costs.node_group_costs(_groups({**L40S, "maxSize": 3}), frozenset())
        if g.name == "a-l40s"
    ]
    (item,) = costs.idle_items([group], ())
    assert item == costs.IdleItem(
        "node group a-l40s (g6e.xlarge, desired size)",
        1,
        catalog.instance("g6e.xlarge").spot_usd_per_hour,
    )
    assert item.usd_each != catalog.instance("g6e.xlarge").on_demand_usd_per_hour


def test_replication_converts_gib_to_the_gb_it_is_billed_by_exactly() -> None:
    # 400 GiB/h at $0.02 a GB: 400 x 1.073741824 GB.
    assert catalog.INTER_REGION_USD_PER_GB == 0.02
    assert costs.replication(100.0, 1800.0, 2).usd_per_hour == pytest.approx(8.589934592, rel=1e-12)


def test_a_fleet_managers_costs_are_its_system_group_only() -> None:
    system = _groups().system
    found = costs.manager_costs(system)
    (group,) = found.node_groups
    assert (group.name, group.instance_types, group.desired_size) == (
        "system",
        ("m6i.large", "m6i.xlarge"),
        2,
    )
    assert found.pools == {}
    assert found.idle == costs.idle_items(found.node_groups, ())
    assert found.storage == costs.storage_cost(None)


def test_a_groups_figures_keep_its_sizes_and_repair_setting() -> None:
    price = catalog.instance("p5.48xlarge").on_demand_usd_per_hour
    assert costs.group_cost(
        "ng",
        gpu_class="h100-x8",
        capacity_type="on-demand",
        instance_types=["p5.48xlarge"],
        sizes=(1, 2, 3),
        autoscaled=True,
        auto_repair=False,
    ) == costs.GroupCost(
        name="ng",
        gpu_class="h100-x8",
        capacity_type="on-demand",
        instance_types=("p5.48xlarge",),
        min_size=1,
        desired_size=2,
        max_size=3,
        autoscaled=True,
        auto_repair=False,
        gpus_per_node=8,
        max_gpus=24,
        idle_usd_per_hour=2 * price,
        max_usd_per_hour=3 * price,
    )


def test_the_system_groups_figures_are_never_autoscaled_and_keep_its_repair_setting() -> None:
    for repair in (True, False):
        groups = NodeGroupsConfig.model_validate(
            {"system": {"instanceTypes": ["m6i.large"], "desiredSize": 2, "autoRepair": repair}}
        )
        (system,) = costs.node_group_costs(groups, frozenset({"system"}))
        assert system.autoscaled is False, "the cluster-autoscaler resizes GPU groups only"
        assert system.auto_repair is repair


def test_a_platforms_storage_figure_is_its_rwx_file_systems() -> None:
    rwx = RwxConfig.model_validate(
        {
            "type": "fsx",
            "deploymentType": "PERSISTENT_1",
            "perUnitStorageThroughput": 200,
            "storageCapacityGib": 2400,
        }
    )
    found = costs.platform_costs(
        _groups(), autoscaled=frozenset(), pools=(), reservations=(), rwx=rwx
    )
    assert found.storage == costs.storage_cost(rwx)
    assert found.storage.fsx == costs.FsxCost(
        "PERSISTENT_1",
        2400,
        200,
        costs.StorageRate(catalog.FSX_LUSTRE_USD_PER_GB_MONTH[("PERSISTENT_1", 200)]),
    )


def test_customer_keys_cost_their_monthly_fee_each(monkeypatch: pytest.MonkeyPatch) -> None:
    # At the catalog's price (1.00 a key) a count times the fee equals the count over it; a
    # dearer fee tells the two apart.
    monkeypatch.setattr(catalog, "KMS_KEY_USD_PER_MONTH", 2.5)
    assert costs.StorageCost.kms_usd_per_month(4) == pytest.approx(10.0)
    assert costs.StorageCost().fixed_usd_per_month(4) == pytest.approx(10.0)


def test_each_jobs_facts_carry_its_hourly_cost_on_the_type_its_pods_land_on() -> None:
    cfg = _prod_with_jobs()
    facts = build(cfg)
    assert facts.jobs
    for jf in facts.jobs:
        assert jf.hourly == costs.job_hourly_cost(jf.job.nodes, jf.resources.instance_type)
        assert jf.hourly.on_demand > 0


def test_a_gpu_groups_figures_keep_its_repair_setting() -> None:
    for repair in (True, False):
        (_, h100, _) = costs.node_group_costs(
            _groups({**H100, "maxSize": 2, "autoRepair": repair}, {**L40S, "maxSize": 3}),
            frozenset(),
        )
        assert h100.name == "ng-h100" and h100.auto_repair is repair


def test_a_pool_whose_limit_holds_no_node_reaches_nothing() -> None:
    pool = _gpu_pool("h100-x8", ["p5.48xlarge"], 4)
    assert costs.pool_max_cost(pool) == costs.PoolCost(0, 0.0)


def test_a_stacks_facts_carry_its_cost_figures_and_flavor_commitments() -> None:
    cfg = _prod_with_jobs()
    facts = build(cfg)
    autoscaled = frozenset(g.name for g in cfg.node_groups.gpu if cfg.autoscaled(g))
    assert autoscaled, "prod has groups the cluster-autoscaler resizes"
    assert facts.costs == costs.platform_costs(
        cfg.node_groups,
        autoscaled=autoscaled,
        pools=cfg.karpenter.pools,
        reservations=capacity_reservations(cfg),
        rwx=cfg.storage.rwx,
    )
    assert cfg.storage.rwx is not None and facts.costs.storage != costs.storage_cost(None)
    assert any(i.item.startswith("capacity reservation") for i in facts.costs.idle)
    assert facts.reservations == tuple(capacity_reservations(cfg)) and facts.reservations
    assert facts.commitments == capacity.flavor_commitments(cfg.teams, facts.capacity)
    assert facts.commitments
