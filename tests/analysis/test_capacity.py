"""analysis.capacity: reserved capacity in the flavor figures and the reservation rows."""

from __future__ import annotations

import json

from components import config as stack_config
from components.analysis.capacity import (
    FlavorCommitment,
    ReservationRow,
    flavor_commitments,
    gpu_capacity,
    reservations,
)
from tests.conftest import stack_values


def _config(stack: str, **overrides: object) -> stack_config.StackConfig:
    values = {**stack_values(stack), **overrides}
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return stack_config.parse(stack_config.namespace_values(raw))


def test_prod_reservation_row_bills_two_p5_at_the_on_demand_rate() -> None:
    (row,) = reservations(_config("prod"))
    assert row == ReservationRow(
        name="h100-pretrain",
        selector="gpu-platform/reservation=gpu-prod-h100",
        type="on-demand-reservation",
        instance_type="p5.48xlarge",
        count=2,
        gpus=16,
        window="",
        usd_per_hour=110.08,
    )
    assert reservations(_config("dev")) == []


def test_capacity_block_row_has_its_window_and_price() -> None:
    karpenter = stack_values("prod")["gpu-platform:karpenter"]
    karpenter["reservations"] = [
        {
            "name": "block",
            "id": "cr-0abc",
            "type": "capacity-block",
            "instanceType": "p5.48xlarge",
            "count": 1,
            "start": "2026-12-01T11:30:00Z",
            "end": "2026-12-08T11:30:00Z",
            "priceUsdPerHour": 31.464,
        }
    ]
    for pool in karpenter["pools"]:
        if pool["name"] == "kp-h100-reserved":
            pool["limits"] = {"gpus": 8}
    cfg = _config("prod", **{"gpu-platform:karpenter": karpenter})
    (row,) = reservations(cfg)
    assert (row.selector, row.window, row.gpus) == (
        "cr-0abc",
        "2026-12-01T11:30:00Z … 2026-12-08T11:30:00Z",
        8,
    )
    assert row.usd_per_hour == 31.46
    assert gpu_capacity(cfg)[("h100-x8", "reserved")] == 8


def test_commitments_add_up_every_team_per_flavor_against_its_capacity() -> None:
    """dev: two teams on a10g spot (2 + 2 of 4 GPUs) and on a10g on-demand, one on l4 spot."""
    cfg = _config("dev")
    found = flavor_commitments(cfg.teams, gpu_capacity(cfg))
    by_flavor = {c.flavor: c for c in found}
    assert [c.flavor for c in found] == sorted(by_flavor)
    spot = by_flavor["a10g-x1-spot"]
    assert spot.nominal_gpus == sum(
        q.gpus for t in cfg.teams for q in t.quota if q.flavor == "a10g-x1-spot"
    )
    assert spot.capacity_gpus == gpu_capacity(cfg)[("a10g-x1", "spot")]
    assert spot.committed == spot.nominal_gpus / spot.capacity_gpus


def test_a_flavor_without_pools_has_no_share_and_a_pool_without_quota_reads_zero() -> None:
    """Boundaries: a quota on a flavor no pool provides (the manager's view of a flavor no
    worker has) is reported with 0 capacity and no share; a flavor the pools provide that no
    team names is listed with 0 nominal GPUs (idle capacity shows)."""
    cfg = _config("dev")
    capacity = dict(gpu_capacity(cfg))
    capacity[("h100-x8", "reserved")] = 16
    del capacity[("l4-x1", "spot")]
    by_flavor = {c.flavor: c for c in flavor_commitments(cfg.teams, capacity)}
    assert by_flavor["h100-x8-reserved"] == FlavorCommitment("h100-x8-reserved", 0, 16)
    assert by_flavor["h100-x8-reserved"].committed == 0
    orphan = by_flavor["l4-x1-spot"]
    assert orphan.capacity_gpus == 0 and orphan.nominal_gpus > 0 and orphan.committed is None
    assert FlavorCommitment("x", 3, 1).committed == 3


def test_a_fleet_manager_adds_up_its_workers_capacities(fleet_prod: object) -> None:
    from components.analysis.fleet import fleet_capacity
    from synth.harness import SynthResult

    assert isinstance(fleet_prod, SynthResult) and fleet_prod.fleet is not None
    fleet = fleet_prod.fleet
    total = fleet_capacity(fleet.workers)
    assert total[("h100-x8", "on-demand")] == sum(
        w.stack.capacity.get(("h100-x8", "on-demand"), 0) for w in fleet.workers
    )
    by_flavor = {c.flavor: c for c in fleet.commitments}
    assert by_flavor["h100-x8-on-demand"].capacity_gpus == total[("h100-x8", "on-demand")] > 0


def test_a_quota_on_a_flavor_no_pool_provides_counts_its_gpus_from_zero() -> None:
    """dev without its l4 spot group: the applied team's 2 GPUs of l4-x1-spot are the whole
    nominal figure (nothing added to a flavor the capacity does not list)."""
    cfg = _config("dev")
    capacity = dict(gpu_capacity(cfg))
    del capacity[("l4-x1", "spot")]
    assert flavor_commitments(cfg.teams, capacity) == (
        FlavorCommitment("a10g-x1-on-demand", 2, 2),
        FlavorCommitment("a10g-x1-spot", 4, 4),
        FlavorCommitment("l4-x1-spot", 2, 0),
    )
