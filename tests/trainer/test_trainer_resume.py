"""Exact resume under torchrun with 2 gloo processes: preemption by SIGTERM (to the launcher
and to a single worker), SIGKILL in the middle of a checkpoint write followed by a corrupted
newest checkpoint, and the restart of a finished run. Each interrupted run must end
bit-identical to an uninterrupted one: same parameter hash and the same loss at every
logged step."""

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


@pytest.fixture(scope="module")
def baseline() -> Iterator[Run]:
    tmp = Path(tempfile.mkdtemp(prefix="gpt-trainer-baseline-"))
    yield run_to_end(tmp, "baseline", tmp / "ckpt", TRAIN_ARGS)
    shutil.rmtree(tmp, ignore_errors=True)


def _events(run: Run, name: str) -> list[dict]:
    return [e for e in run.events() if e["event"] == name]


@pytest.mark.timeout(150)
def test_sigterm_to_launcher_checkpoints_exits_75_and_resumes_bit_identical(
    baseline: Run, tmp_path: Path
) -> None:
    ckpt = tmp_path / "ckpt"
    first = start_run(tmp_path, "first", ckpt, TRAIN_ARGS + SLOW)
    first.wait_for_step(9)
    os.kill(first.proc.pid, signal.SIGTERM)
    assert first.wait() == EXIT_PREEMPTED, first.log_tail()
    stopped = _events(first, "preempted")[0]["step"]
    assert 9 <= stopped < MAX_STEPS
    newest = committed_steps(ckpt)[0][1]
    assert read_manifest(newest)["reason"] == "preempt"
    assert read_manifest(newest)["global_step"] == stopped

    second = run_to_end(tmp_path, "second", ckpt, TRAIN_ARGS)
    assert _events(second, "resumed")[0]["step"] == stopped
    assert_bit_identical(baseline, first, second)


@pytest.mark.timeout(150)
def test_sigterm_to_one_worker_makes_all_ranks_stop_together(baseline: Run, tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    status_dir = tmp_path / "status"
    first = start_run(
        tmp_path, "first", ckpt, TRAIN_ARGS + SLOW, extra_env={STATUS_DIR_ENV: str(status_dir)}
    )
    first.wait_for_step(9)
    worker = json.loads((status_dir / "status-rank00001.json").read_text())
    os.kill(worker["pid"], signal.SIGTERM)  # rank 1 only: rank 0 learns of it via the collective
    assert first.wait() == EXIT_PREEMPTED, first.log_tail()
    stopped = _events(first, "preempted")[0]["step"]
    assert stopped < MAX_STEPS

    second = run_to_end(tmp_path, "second", ckpt, TRAIN_ARGS)
    assert _events(second, "resumed")[0]["step"] == stopped
    assert_bit_identical(baseline, first, second)


@pytest.mark.timeout(150)
def test_restart_ignores_a_save_torn_by_sigkill_and_skips_a_corrupted_newest_checkpoint(
    baseline: Run, tmp_path: Path
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
    assert_bit_identical(baseline, first, second)
    assert not torn.exists()


@pytest.mark.timeout(60)
def test_restarting_a_completed_run_exits_0_at_once(baseline: Run, tmp_path: Path) -> None:
    before = result(baseline.checkpoint_dir)
    started = time.monotonic()
    again = run_to_end(tmp_path, "again", baseline.checkpoint_dir, TRAIN_ARGS)
    assert _events(again, "already_complete")
    assert not _events(again, "step")
    assert result(baseline.checkpoint_dir) == before
    assert time.monotonic() - started < 30
