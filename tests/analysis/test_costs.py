"""Cost figures (components/analysis/costs.py): pure functions over values at the catalog's
planning prices, each called once by the facts; the report renders what they return."""

from __future__ import annotations

import pytest

from components import catalog
from components.analysis import costs


def test_a_jobs_hourly_cost_is_its_nodes_at_the_planning_price_of_its_type() -> None:
    cost = costs.job_hourly_cost(4, "p5.48xlarge")
    row = catalog.instance("p5.48xlarge")
    assert cost.spot == pytest.approx(4 * row.spot_usd_per_hour)
    assert cost.on_demand == pytest.approx(4 * row.on_demand_usd_per_hour)
    assert costs.job_hourly_cost(0, "g6.xlarge") == costs.HourlyCost(0.0, 0.0)
