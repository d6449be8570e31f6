"""Exact resume under torchrun with 2 gloo processes: preemption by SIGTERM to the launcher, then
(in the resumed run) to a single worker, each checkpointing and exiting 75; SIGKILL in the
middle of a checkpoint write followed by a corrupted newest checkpoint; and the restart of a
finished run. Each interrupted run must end bit-identical to an uninterrupted one: same
parameter hash and the same loss at every logged step. The uninterrupted baseline runs
concurrently with the first interrupted run (the slowed-down run leaves the CPU idle)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gpt_trainer.checkpoint import FAULT_KILL_IN_SAVE_ENV, committed_steps, read_manifest
from gpt_trainer.exit_codes import EXIT_FAILURE, EXIT_PREEMPTED, STATUS_DIR_ENV
from trainer_harness import (
    Run,
    assert_bit_identical,
    losses_by_step,
    result,
    run_to_end,
    start_run,
)

pytestmark = pytest.mark.slow

MAX_STEPS = 30
# Periodic async saves every 7 steps; the slow-down gives a test time to signal mid-run.
TRAIN_ARGS = ["--max-steps", str(MAX_STEPS), "--checkpoint-every-steps", "7", "--keep-last", "2"]
SLOW = ["--sleep-per-step-s", "0.15"]


class Baseline:
    """The uninterrupted run, started when the module starts and awaited when first needed."""

    def __init__(self, tmp: Path) -> None:
        self.run = start_run(tmp, "baseline", tmp / "ckpt", TRAIN_ARGS)
        self._done = False

    def finished(self) -> Run:
        if not self._done:
            rc = self.run.wait()
            assert rc == 0, f"baseline exited {rc}:\n{self.run.log_tail()}"
            self._done = True
        return self.run


@pytest.fixture(scope="module")
def baseline() -> Iterator[Baseline]:
    tmp = Path(tempfile.mkdtemp(prefix="gpt-trainer-baseline-"))
    started = Baseline(tmp)
    yield started
    if started.run.proc.poll() is None:
        os.killpg(started.run.proc.pid, signal.SIGKILL)
    shutil.rmtree(tmp, ignore_errors=True)


def _events(run: Run, name: str) -> list[dict]:
    return [e for e in run.events() if e["event"] == name]


@pytest.mark.timeout(200)
def test_sigterm_to_launcher_then_to_one_worker_resume_bit_identical_and_restart_when_done(
    baseline: Baseline, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt"
    status = {STATUS_DIR_ENV: str(tmp_path / "status")}
    # 1. SIGTERM to the launcher (what the kubelet sends PID 1): checkpoint, exit 75.
    first = start_run(tmp_path, "first", ckpt, TRAIN_ARGS + SLOW, extra_env=status)
    first.wait_for_step(9)
    os.kill(first.proc.pid, signal.SIGTERM)
    assert first.wait() == EXIT_PREEMPTED, first.log_tail()
    stopped = _events(first, "preempted")[0]["step"]
    assert 9 <= stopped < MAX_STEPS
    newest = committed_steps(ckpt)[0][1]
    assert read_manifest(newest)["reason"] == "preempt"
    assert read_manifest(newest)["global_step"] == stopped

    # 2. Resumed; SIGTERM to rank 1 only: rank 0 learns of it through the per-step collective.
    second = start_run(tmp_path, "second", ckpt, TRAIN_ARGS + SLOW, extra_env=status)
    second.wait_for_step(stopped + 4)
    assert _events(second, "resumed")[0]["step"] == stopped
    worker = json.loads((tmp_path / "status" / "status-rank00001.json").read_text())
    os.kill(worker["pid"], signal.SIGTERM)
    assert second.wait() == EXIT_PREEMPTED, second.log_tail()
    stopped_again = _events(second, "preempted")[0]["step"]
    assert stopped + 4 <= stopped_again < MAX_STEPS

    # 3. Resumed to the end: bit-identical to the run nobody interrupted.
    third = run_to_end(tmp_path, "third", ckpt, TRAIN_ARGS)
    assert _events(third, "resumed")[0]["step"] == stopped_again
    assert_bit_identical(baseline.finished(), first, second, third)

    # 4. A restart of the finished run (e.g. a pod retried after a teardown abort) exits 0 at
    # once and changes nothing.
    before = result(ckpt)
    started = time.monotonic()
    again = run_to_end(tmp_path, "again", ckpt, TRAIN_ARGS)
    assert _events(again, "already_complete")
    assert not _events(again, "step")
    assert result(ckpt) == before
    assert time.monotonic() - started < 30


@pytest.mark.timeout(150)
def test_restart_ignores_a_save_torn_by_sigkill_and_skips_a_corrupted_newest_checkpoint(
    baseline: Baseline, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt"
    first = start_run(tmp_path, "first", ckpt, TRAIN_ARGS, extra_env={FAULT_KILL_IN_SAVE_ENV: "21"})
    assert first.wait() == EXIT_FAILURE, first.log_tail()
    torn = ckpt / ".tmp-step_0000000021"
    assert torn.is_dir(), "the fault hook should have left a torn save behind"
    assert [step for step, _ in committed_steps(ckpt)] == [14, 7]
    assert (ckpt / "LATEST").read_text().strip() == "step_0000000014"
    # Then the newest committed checkpoint rots: same size, one flipped byte.
    newest = ckpt / "step_0000000014"
    data = bytearray((newest / "model.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (newest / "model.pt").write_bytes(bytes(data))

    second = run_to_end(tmp_path, "second", ckpt, TRAIN_ARGS)
    skipped = _events(second, "checkpoint_skipped")
    assert [e["dir"] for e in skipped] == [newest.name] and "sha256" in skipped[0]["why"]
    assert _events(second, "resumed")[0]["step"] == 7
    # Steps 8..21 ran twice; assert_bit_identical checks both copies of each loss.
    assert len(losses_by_step(first, second)[15]) == 1
    assert_bit_identical(baseline.finished(), first, second)
    assert not torn.exists()
