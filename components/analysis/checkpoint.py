"""Checkpoint interval arithmetic (Young/Daly) for job planning and the report.

The platform's own pure copy of the trainer's checkpoint policy (docs/training-jobs.md,
"Checkpoints"; the image's gpt_trainer/checkpoint_policy.py): the Pulumi program cannot import
the trainer (it lives in the image, not on the program's path).
tests/training_jobs/test_training.py checks with hypothesis that both implementations agree.

delta = time the loop is blocked by one save, M = mean time between *ungraceful* failures
(graceful spot preemptions checkpoint on SIGTERM and lose no work), R = restart cost.
"""

from __future__ import annotations

import math


def young_daly_interval_s(save_s: float, mtbf_s: float) -> float:
    """Daly's optimum compute time between saves:
    tau = sqrt(2 delta M) [1 + sqrt(delta/2M)/3 + (delta/2M)/9] - delta for delta < 2M, else M."""
    _positive(save_s=save_s, mtbf_s=mtbf_s)
    if save_s >= 2.0 * mtbf_s:
        return mtbf_s
    ratio = save_s / (2.0 * mtbf_s)
    return math.sqrt(2.0 * save_s * mtbf_s) * (1.0 + math.sqrt(ratio) / 3.0 + ratio / 9.0) - save_s


def wasted_fraction(
    interval_s: float, save_s: float, mtbf_s: float, restart_s: float = 0.0
) -> float:
    """Expected fraction of wall time lost: delta/(tau+delta) saving, plus per failure (rate 1/M)
    the restart R and on average half a period of rework, (R + (tau+delta)/2) / M."""
    _positive(interval_s=interval_s, save_s=save_s, mtbf_s=mtbf_s)
    if restart_s < 0:
        raise ValueError(f"restart_s must be >= 0, got {restart_s}")
    period = interval_s + save_s
    return save_s / period + (restart_s + period / 2.0) / mtbf_s


def _positive(**values: float) -> None:
    for name, value in values.items():
        if not (value > 0 and math.isfinite(value)):
            raise ValueError(f"{name} must be a positive finite number, got {value}")
