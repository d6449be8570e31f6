"""Throughput accounting: windows of steps, tokens/s, data-loader wait and MFU.

MFU (model FLOPs utilisation, Chowdhery et al. 2022) = achieved model FLOP/s / peak FLOP/s:

    mfu = tokens_per_s_global * flops_per_token / (world_size * peak_flops_per_gpu)

``flops_per_token`` is ``BuiltModel.flops_per_token`` (6 N + 12 L H Q T). The peak is the GPU's
dense bf16 (or fp32 when training in fp32) tensor throughput, which the platform takes from its
GPU catalog and passes as ``GPU_PEAK_TFLOPS`` (``--peak-tflops`` overrides); with neither, MFU
is not reported rather than guessed.

A window covers the steps between two log points (``--log-every``). Per-step wall times are
only meaningful on CPU; on GPU the host runs ahead of the device, so the window's wall time,
closed by the loss read-back (a device sync) at its end, is what tokens/s and MFU come from.
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass

PEAK_TFLOPS_ENV = "GPU_PEAK_TFLOPS"


def peak_flops_from_env(override_tflops: float | None = None) -> float | None:
    """Per-GPU peak FLOP/s from ``--peak-tflops`` or ``$GPU_PEAK_TFLOPS``; None if unknown."""
    raw = override_tflops if override_tflops is not None else os.environ.get(PEAK_TFLOPS_ENV)
    if raw in (None, ""):
        return None
    value = float(raw)  # type: ignore[arg-type]
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"peak TFLOPS must be a positive number, got {raw!r}")
    return value * 1e12


def mfu(tokens_per_s: float, flops_per_token: float, world_size: int, peak_flops: float) -> float:
    """Model FLOPs utilisation of the whole job (0..1) from its global tokens/s."""
    return tokens_per_s * flops_per_token / (world_size * peak_flops)


@dataclass(frozen=True)
class WindowStats:
    steps: int
    wall_s: float
    step_s: float
    data_s: float
    tokens_per_s: float
    mfu: float | None


class StepWindow:
    """Accumulates steps between log points; ``close()`` returns the window's averages."""

    def __init__(
        self, tokens_per_step: int, flops_per_token: float, world: int, peak: float | None
    ) -> None:
        self.tokens_per_step = tokens_per_step
        self.flops_per_token = flops_per_token
        self.world = world
        self.peak = peak
        self.reset()

    def reset(self, now: float | None = None) -> None:
        self.started = time.perf_counter() if now is None else now
        self.steps = 0
        self.data_s = 0.0

    def add(self, data_s: float) -> None:
        self.steps += 1
        self.data_s += data_s

    def close(self, now: float | None = None) -> WindowStats:
        end = time.perf_counter() if now is None else now
        wall = max(end - self.started, 1e-9)
        steps = max(self.steps, 1)
        tokens_per_s = self.tokens_per_step * self.steps / wall
        stats = WindowStats(
            steps=self.steps,
            wall_s=wall,
            step_s=wall / steps,
            data_s=self.data_s / steps,
            tokens_per_s=tokens_per_s,
            mfu=(
                mfu(tokens_per_s, self.flops_per_token, self.world, self.peak)
                if self.peak
                else None
            ),
        )
        self.reset(end)
        return stats
