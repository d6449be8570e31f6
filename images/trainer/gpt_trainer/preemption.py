"""SIGTERM handling: a flag the ranks agree on once per step, and a deadline watchdog.

On spot reclaim only the affected node's workers get SIGTERM, so a rank must not act on its own
flag: the training loop folds it into one small ``all_reduce(MAX)`` per step and every rank
stops at the same optimizer-step boundary. The watchdog ends the process with ``os._exit`` once
the grace budget is spent, so a rank blocked in a collective on a dead peer cannot hang until
the kubelet's SIGKILL (and cannot report a clean preemption it did not achieve).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any

import torch
import torch.distributed as dist

from .exit_codes import EXIT_FAILURE

log = logging.getLogger(__name__)

# Order of the per-step agreement vector; all entries are reduced with MAX.
FLAG_STOP = 0  # some rank got SIGTERM
FLAG_TIME_DUE = 1  # rank 0's clock says a time-based save is due
FLAG_SAVE_NOT_DONE = 2  # some rank's asynchronous save is still writing
NUM_FLAGS = 3


class PreemptionHandler:
    """Installs a SIGTERM handler that sets ``requested`` and arms the deadline watchdog."""

    def __init__(
        self,
        grace_s: float,
        on_deadline: Callable[[], None] | None = None,
        signals: tuple[int, ...] = (signal.SIGTERM,),
    ) -> None:
        self.grace_s = grace_s
        self.requested = False
        self._on_deadline = on_deadline or (lambda: os._exit(EXIT_FAILURE))
        self._signals = signals
        self._timer: threading.Timer | None = None

    def install(self) -> None:
        for sig in self._signals:
            signal.signal(sig, self._handle)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        # Only flag and arm here: a signal handler runs between bytecodes of the main thread,
        # possibly inside a collective, so no I/O or torch calls belong in it.
        self.request(f"signal {signal.Signals(signum).name}")

    def request(self, reason: str) -> None:
        if self.requested:
            return
        self.requested = True
        self._timer = threading.Timer(self.grace_s, self._deadline, args=(reason,))
        self._timer.daemon = True
        self._timer.start()

    def _deadline(self, reason: str) -> None:
        log.error("preemption (%s): grace of %.1f s spent, exiting hard", reason, self.grace_s)
        self._on_deadline()

    def disarm(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def agree(local_flags: list[int], group: Any = None) -> list[int]:
    """MAX of each flag over all ranks: the one collective the loop adds per step.

    ``group`` must be a gloo group (CPU tensor): the trainer passes one when the default group
    is NCCL, so the agreement never waits for the GPU. Skipped entirely for a single rank.
    """
    if not (dist.is_available() and dist.is_initialized() and dist.get_world_size(group) > 1):
        return list(local_flags)
    tensor = torch.tensor(local_flags, dtype=torch.int32)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=group)
    return [int(v) for v in tensor.tolist()]
