"""DeepSpeed ZeRO-2 under torchrun (2 gloo processes, CPU): a preempted run resumes bit-identical
to an uninterrupted one, and a world-size change (2 -> 1) resumes through the universal
checkpoint with exactly the saved weights. Independent launches run concurrently."""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import torch

from gpt_trainer.checkpoint import committed_steps, read_manifest
from gpt_trainer.exit_codes import EXIT_PREEMPTED
from gpt_trainer.train import state_dict_sha256
from trainer_harness import assert_bit_identical, start_run

pytestmark = pytest.mark.slow

MAX_STEPS = 12
# Bucket sizes sized to the tiny model: DeepSpeed's 5e8-element defaults make every CPU step
# allocate gigabytes and take seconds.
DS_CONFIG = {
    "train_micro_batch_size_per_gpu": 4,
    "gradient_accumulation_steps": 1,
    "gradient_clipping": 1.0,
    "zero_optimization": {
        "stage": 2,
        "reduce_bucket_size": 1_000_000,
        "allgather_bucket_size": 1_000_000,
    },
    "steps_per_print": 1_000_000,
}


def _args(tmp: Path) -> list[str]:
    config = tmp / "ds_config.json"
    config.write_text(json.dumps(DS_CONFIG))
    return ["--mode", "deepspeed", "--ds-config", str(config), "--max-steps", str(MAX_STEPS)]


@pytest.mark.timeout(240)
def test_zero2_preempt_resume_is_bit_identical_and_world_size_change_resumes(
    tmp_path: Path,
) -> None:
    args = _args(tmp_path)
    # Independent launches overlap (2 cores: one run's imports and sleeps, the other's work).
    baseline = start_run(tmp_path, "baseline", tmp_path / "baseline", args)

    ckpt = tmp_path / "ckpt"
    first = start_run(tmp_path, "first", ckpt, [*args, "--sleep-per-step-s", "0.3"])
    first.wait_for_step(4)
    os.kill(first.proc.pid, signal.SIGTERM)
    assert first.wait() == EXIT_PREEMPTED, first.log_tail()
    assert baseline.wait() == 0, baseline.log_tail()
    step, step_dir = committed_steps(ckpt)[0]
    manifest = read_manifest(step_dir)
    assert manifest["sharding"] == "zero-2" and manifest["world_size"] == 2
    assert any(f["path"].startswith("ds/zero_pp_rank_1") for f in manifest["files"])
    saved = torch.load(step_dir / "ds" / "mp_rank_00_model_states.pt", weights_only=False)
    assert saved["universal_checkpoint_info"]["universal_checkpoint_version"] == 0.4
    saved_hash = state_dict_sha256(saved["module"])

    # Keep a copy of the world-2 checkpoint for the world-size change below.
    resharded = tmp_path / "resharded"
    shutil.copytree(ckpt, resharded)

    second = start_run(tmp_path, "second", ckpt, args)
    third = start_run(tmp_path, "world1", resharded, args, nproc=1)
    assert second.wait() == 0, second.log_tail()
    assert third.wait() == 0, third.log_tail()
    resumed = next(e for e in second.events() if e["event"] == "resumed")
    assert resumed["step"] == step and resumed["params_sha256"] == saved_hash
    assert_bit_identical(baseline, first, second)

    events = third.events()
    resumed = next(e for e in events if e["event"] == "resumed")
    assert resumed["step"] == step
    assert resumed["params_sha256"] == saved_hash  # the universal checkpoint carried the weights
    assert [e for e in events if e["event"] == "resume_not_bit_exact"]
    trained = [e["step"] for e in events if e["event"] == "step"]
    assert trained == list(range(step + 1, MAX_STEPS + 1))
    assert (resharded / f".universal-{step_dir.name}" / "ds" / "zero").is_dir()
    assert read_manifest(committed_steps(resharded)[0][1])["world_size"] == 1
