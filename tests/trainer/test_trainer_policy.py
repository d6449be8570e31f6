"""Young/Daly interval and expected-waste properties, and the step/time checkpoint policy."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpt_trainer.checkpoint_policy import (
    CheckpointPolicy,
    wasted_fraction,
    young_daly_interval_s,
    young_interval_s,
)

save_times = st.floats(min_value=0.01, max_value=3600.0)
mtbfs = st.floats(min_value=60.0, max_value=30 * 24 * 3600.0)


def test_daly_matches_the_worked_example() -> None:
    # TRAINER.md: M = 6 h, delta = 60 s -> 26.2 min; waste 7.5 % (8.8 % with R = 5 min);
    # async save, delta = 5 s -> 7.7 min, 3.5 % (that figure includes R = 5 min).
    tau = young_daly_interval_s(60.0, 6 * 3600.0)
    assert tau / 60 == pytest.approx(26.2, abs=0.05)
    assert wasted_fraction(tau, 60.0, 6 * 3600.0) == pytest.approx(0.075, abs=0.001)
    assert wasted_fraction(tau, 60.0, 6 * 3600.0, restart_s=300.0) == pytest.approx(
        0.088, abs=0.001
    )
    async_tau = young_daly_interval_s(5.0, 6 * 3600.0)
    assert async_tau / 60 == pytest.approx(7.7, abs=0.05)
    assert wasted_fraction(async_tau, 5.0, 6 * 3600.0, restart_s=300.0) == pytest.approx(
        0.035, abs=0.001
    )


@given(save_times, mtbfs)
def test_interval_is_positive_and_at_most_mtbf(save_s: float, mtbf_s: float) -> None:
    tau = young_daly_interval_s(save_s, mtbf_s)
    assert 0 < tau <= mtbf_s


@given(save_times, mtbfs)
def test_interval_grows_with_mtbf_and_save_time(save_s: float, mtbf_s: float) -> None:
    tau = young_daly_interval_s(save_s, mtbf_s)
    assert young_daly_interval_s(save_s, mtbf_s * 2) >= tau
    if save_s * 2 < mtbf_s:  # below the cap both stay on the formula's rising branch
        assert young_daly_interval_s(save_s * 1.5, mtbf_s) >= tau


@given(st.floats(min_value=0.01, max_value=60.0), st.floats(min_value=3600.0, max_value=1e7))
def test_daly_approaches_young_when_saves_are_cheap(save_s: float, mtbf_s: float) -> None:
    young = young_interval_s(save_s, mtbf_s)
    assert young_daly_interval_s(save_s, mtbf_s) == pytest.approx(young, rel=0.1)


@given(st.floats(min_value=0.1, max_value=600.0), st.floats(min_value=3600.0, max_value=1e7))
def test_daly_interval_beats_halving_or_doubling_it(save_s: float, mtbf_s: float) -> None:
    tau = young_daly_interval_s(save_s, mtbf_s)
    best = wasted_fraction(tau, save_s, mtbf_s)
    assert best <= wasted_fraction(tau / 2, save_s, mtbf_s)
    assert best <= wasted_fraction(tau * 2, save_s, mtbf_s)


@given(save_times, mtbfs, st.floats(min_value=0, max_value=3600))
def test_waste_is_positive_and_restart_cost_only_adds(
    save_s: float, mtbf_s: float, r: float
) -> None:
    tau = young_daly_interval_s(save_s, mtbf_s)
    base = wasted_fraction(tau, save_s, mtbf_s)
    assert base > 0 and math.isfinite(base)
    assert wasted_fraction(tau, save_s, mtbf_s, restart_s=r) >= base


def test_save_cost_above_twice_mtbf_caps_at_mtbf() -> None:
    assert young_daly_interval_s(500.0, 200.0) == 200.0


@pytest.mark.parametrize("bad", [0.0, -1.0, math.inf, math.nan])
def test_rejects_nonsense(bad: float) -> None:
    with pytest.raises(ValueError):
        young_daly_interval_s(bad, 3600.0)
    with pytest.raises(ValueError):
        wasted_fraction(60.0, 1.0, bad)


def test_policy_step_and_time_triggers() -> None:
    policy = CheckpointPolicy(every_steps=5, interval_s=100.0, last_save_time=1000.0)
    assert [s for s in range(1, 16) if policy.step_due(s)] == [5, 10, 15]
    assert not policy.time_due(1099.0) and policy.time_due(1100.0)
    policy.record_save(now=1100.0, blocked_s=2.0)
    assert not policy.time_due(1150.0)
    assert not CheckpointPolicy().step_due(5) and not CheckpointPolicy().time_due(1e9)


def test_auto_policy_uses_the_measured_save_time() -> None:
    policy = CheckpointPolicy(auto_mtbf_s=6 * 3600.0, assumed_save_s=60.0)
    assert policy.current_interval_s() == young_daly_interval_s(60.0, 6 * 3600.0)
    policy.record_save(now=0.0, blocked_s=5.0)
    assert policy.current_interval_s() == young_daly_interval_s(5.0, 6 * 3600.0)
    policy.record_save(now=1.0, blocked_s=15.0)
    assert policy.measured_save_s == pytest.approx(0.7 * 5.0 + 0.3 * 15.0)


def test_auto_policy_counts_the_background_writes_slow_down() -> None:
    # A save that blocks 0.05 s but slows the steps it overlaps by 1.65 s costs 1.7 s.
    policy = CheckpointPolicy(auto_mtbf_s=6 * 3600.0)
    policy.record_save(now=0.0, blocked_s=0.05)
    assert policy.current_interval_s() == young_daly_interval_s(0.05, 6 * 3600.0)
    policy.record_interference(1.65)
    assert policy.save_cost_s() == pytest.approx(1.7)
    assert policy.current_interval_s() == pytest.approx(young_daly_interval_s(1.7, 6 * 3600.0))
    policy.record_interference(-3.0)  # faster than usual while writing: no negative cost
    assert policy.save_cost_s() == pytest.approx(0.05 + 0.7 * 1.65)
