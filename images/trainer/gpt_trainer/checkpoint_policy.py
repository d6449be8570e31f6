"""When to checkpoint: the Young/Daly interval, the expected waste, and the step/time policy.

Everything here is pure (the clock is passed in), so the platform can import or duplicate the
formulas and the tests can property-check them.

Symbols follow Daly (2006): ``save_s`` (delta) is the time the training loop is *blocked* by one
save, ``mtbf_s`` (M) the mean time between *ungraceful* failures (graceful preemptions are
handled by the SIGTERM path and cost no lost work), ``restart_s`` (R) the time a restart costs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


def young_interval_s(save_s: float, mtbf_s: float) -> float:
    """Young's first-order optimum, sqrt(2 * delta * M): the compute time between saves."""
    _check_positive(save_s=save_s, mtbf_s=mtbf_s)
    return math.sqrt(2.0 * save_s * mtbf_s)


def young_daly_interval_s(save_s: float, mtbf_s: float) -> float:
    """Daly's higher-order optimum compute time between checkpoints, in seconds.

    tau = sqrt(2 delta M) * (1 + sqrt(delta / 2M) / 3 + (delta / 2M) / 9) - delta  for delta < 2M,
    tau = M otherwise (saving costs more than it can save: checkpoint once per MTBF).
    """
    _check_positive(save_s=save_s, mtbf_s=mtbf_s)
    if save_s >= 2.0 * mtbf_s:
        return mtbf_s
    ratio = save_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * save_s * mtbf_s) * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) - save_s


def wasted_fraction(
    interval_s: float, save_s: float, mtbf_s: float, restart_s: float = 0.0
) -> float:
    """First-order expected fraction of wall time lost to saving plus rework after failures.

    delta / (tau + delta) is the share spent blocked in saves; each failure (rate 1/M) costs the
    restart R plus on average half a checkpoint period of lost work, (tau + delta) / 2.
    The value can exceed 1 when M is tiny: that means no progress is expected.
    """
    _check_positive(interval_s=interval_s, save_s=save_s, mtbf_s=mtbf_s)
    if restart_s < 0:
        raise ValueError(f"restart_s must be >= 0, got {restart_s}")
    period = interval_s + save_s
    return save_s / period + (restart_s + period / 2.0) / mtbf_s


def _check_positive(**values: float) -> None:
    for name, value in values.items():
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"{name} must be a positive finite number, got {value}")


@dataclass
class CheckpointPolicy:
    """Decides at each optimizer-step boundary whether a periodic save is due.

    Step-based and time-based triggers combine with OR. With ``auto_mtbf_s`` set, the time
    interval is re-derived from the measured cost of the saves (exponential moving averages),
    starting from ``assumed_save_s`` before the first save has been measured. A save's cost is
    the time it blocked the loop plus the slow-down of the steps that overlapped its
    background write (``record_interference``): on a CPU-bound host the writer's pickling and
    hashing compete with training, and blocking time alone then under-states delta (measured
    with bench_throughput.py: 0.05 s blocked but 1.7 s lost per save of a 50 M model on 2 cores).
    Only rank 0 evaluates the time trigger; the ranks agree on it through the per-step collective,
    so clock skew between nodes cannot split a save.
    """

    every_steps: int | None = None
    interval_s: float | None = None
    auto_mtbf_s: float | None = None
    assumed_save_s: float = 30.0
    measured_save_s: float | None = None
    measured_interference_s: float | None = None
    last_save_time: float = 0.0

    def save_cost_s(self) -> float:
        """Delta: the estimated training time one save costs."""
        blocked = self.measured_save_s if self.measured_save_s else self.assumed_save_s
        return blocked + (self.measured_interference_s or 0.0)

    def current_interval_s(self) -> float | None:
        """The time interval in force, or None when only the step trigger is active."""
        if self.auto_mtbf_s is not None:
            return young_daly_interval_s(max(self.save_cost_s(), 1e-3), self.auto_mtbf_s)
        return self.interval_s

    def step_due(self, global_step: int) -> bool:
        return bool(self.every_steps) and global_step % self.every_steps == 0  # type: ignore[operator]

    def time_due(self, now: float) -> bool:
        interval = self.current_interval_s()
        return interval is not None and now - self.last_save_time >= interval

    def record_save(self, now: float, blocked_s: float) -> None:
        """Restart the interval clock and fold a measured blocking time into the estimate."""
        self.last_save_time = now
        if self.measured_save_s is None:
            self.measured_save_s = blocked_s
        else:
            self.measured_save_s = 0.7 * self.measured_save_s + 0.3 * blocked_s

    def record_interference(self, extra_s: float) -> None:
        """Fold in how much longer the steps overlapping one background write took."""
        extra_s = max(0.0, extra_s)
        if self.measured_interference_s is None:
            self.measured_interference_s = extra_s
        else:
            self.measured_interference_s = 0.7 * self.measured_interference_s + 0.3 * extra_s
