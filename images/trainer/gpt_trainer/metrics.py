"""Training metrics: Prometheus exposition (rank 0) and JSON-lines events.

The platform's alerting rules use these exact names; README.md documents them. Only global
rank 0 serves HTTP, so a pod of N workers exposes one endpoint on one port.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    Info,
    start_http_server,
)

DEFAULT_METRICS_PORT = 9401  # 9400 is dcgm-exporter's default on the same GPU nodes

_STEP_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class TrainerMetrics:
    """Prometheus collectors in a private registry (tests can build several per process)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.step_duration = Histogram(
            "trainer_step_duration_seconds",
            "Wall time of one optimizer step, data loading included.",
            buckets=_STEP_BUCKETS,
            registry=r,
        )
        self.tokens_per_second = Gauge(
            "trainer_tokens_per_second",
            "Global training throughput (all ranks) over the last log window.",
            registry=r,
        )
        self.tokens = Counter(
            "trainer_tokens", "Tokens trained by all ranks (rate() = tokens/s).", registry=r
        )
        self.data_loading = Gauge(
            "trainer_data_loading_seconds",
            "Mean time a step of the last log window waited for its batch (data-loader wait).",
            registry=r,
        )
        self.mfu = Gauge(
            "trainer_mfu_ratio",
            "Model FLOPs utilisation over the last log window (0..1): tokens/s x FLOPs per "
            "token / (world size x GPU peak FLOP/s). Absent when the peak is unknown.",
            registry=r,
        )
        self.flops_per_token = Gauge(
            "trainer_model_flops_per_token",
            "Model FLOPs per trained token, forward + backward (6 N + 12 L H Q T).",
            registry=r,
        )
        self.resumed_from_step = Gauge(
            "trainer_resumed_from_step",
            "Step this process resumed from after verifying its checkpoint; -1 = fresh start.",
            registry=r,
        )
        self.checkpoints_skipped = Counter(
            "trainer_checkpoints_skipped",
            "Checkpoints skipped at resume because they failed verification.",
            registry=r,
        )
        self.checkpoint_save_duration = Gauge(
            "trainer_checkpoint_save_duration_seconds",
            "Wall time of the last committed save, from snapshot to commit.",
            registry=r,
        )
        self.checkpoint_blocking = Gauge(
            "trainer_checkpoint_blocking_seconds",
            "Time the last save blocked the training loop (the delta of Young/Daly).",
            registry=r,
        )
        self.last_checkpoint_timestamp = Gauge(
            "trainer_last_checkpoint_timestamp_seconds",
            "Unix time of the last committed checkpoint (age = time() - this).",
            registry=r,
        )
        self.global_step = Gauge("trainer_global_step", "Optimizer steps completed.", registry=r)
        self.collective_stall = Gauge(
            "trainer_collective_stall_seconds",
            "Time the last step spent in the per-step agreement all_reduce: waiting for the "
            "slowest rank. Grows when one rank stalls.",
            registry=r,
        )
        self.loss = Gauge("trainer_loss", "Rank-0 training loss of the last step.", registry=r)
        self.run_info = Info("trainer_run", "Run metadata.", registry=r)

    def serve(self, port: int) -> None:
        start_http_server(port, registry=self.registry)


class JsonLog:
    """One JSON object per line to stdout and, if given, appended to a file."""

    def __init__(self, path: Path | None, stream: TextIO = sys.stdout) -> None:
        self._stream = stream
        self._file = open(path, "a", encoding="utf-8") if path else None  # noqa: SIM115

    def event(self, name: str, **fields: Any) -> None:
        line = json.dumps({"event": name, "time": time.time(), **fields}, sort_keys=True)
        print(line, file=self._stream, flush=True)
        if self._file is not None:
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
