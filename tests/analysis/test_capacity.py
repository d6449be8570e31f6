"""analysis.capacity: reserved capacity in the flavor figures and the reservation rows."""

from __future__ import annotations

import json

from components import config as stack_config
from components.analysis.capacity import ReservationRow, gpu_capacity, reservations
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
