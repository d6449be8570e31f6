"""A Hugging Face Llama-family preset on token shards (made by the data-prep command), under
torchrun with 2 gloo processes: FSDP2 SIGTERM -> checkpoint -> resume is bit-identical to an
uninterrupted run; an FSDP2 checkpoint saved at world size 2 resumes at world size 1 with
exactly the saved weights and trains on; DDP with activation checkpointing trains and reports
windowed throughput and MFU.

Independent launches run concurrently (baseline, interrupted run and the DDP run; then the two
resumes): on 2 cores they fill each other's idle time (imports, sleeps, collectives)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from gpt_trainer.checkpoint import committed_steps, read_manifest
from gpt_trainer.exit_codes import EXIT_PREEMPTED
from trainer_harness import Run, assert_bit_identical, start_run

pytestmark = pytest.mark.slow

MAX_STEPS = 12
SAVE_EVERY = 4


def _args(data: Path, mode: str) -> list[str]:
    return [
        "--mode",
        mode,
        "--model",
        "hf:llama-tiny",
        "--data",
        str(data),
        "--micro-batch",
        "4",
        "--max-steps",
        str(MAX_STEPS),
        "--checkpoint-every-steps",
        str(SAVE_EVERY),
        "--keep-last",
        "5",
    ]


def _events(run: Run, name: str) -> list[dict]:
    return [e for e in run.events() if e["event"] == name]


DDP_ARGS = ["--activation-checkpointing", "--log-every", "3"]


@pytest.fixture(scope="module")
def ddp_run(token_data: Path) -> Iterator[Run]:
    """The DDP run, started with the module so it overlaps the FSDP launches."""
    tmp = Path(tempfile.mkdtemp(prefix="gpt-trainer-ddp-"))
    args = [*_args(token_data, "ddp"), *DDP_ARGS]
    run = start_run(tmp, "ddp", tmp / "ckpt", args, extra_env={"GPU_PEAK_TFLOPS": "1"})
    yield run
    if run.proc.poll() is None:
        os.killpg(run.proc.pid, signal.SIGKILL)
    shutil.rmtree(tmp, ignore_errors=True)


@pytest.mark.timeout(300)
def test_fsdp2_sigterm_resume_is_bit_identical_and_resumes_at_world_size_1(
    tmp_path: Path, token_data: Path, ddp_run: Run
) -> None:
    # --log-params-hash: each checkpoint event carries the full-model hash taken when the save
    # started, i.e. before the loop went on changing the weights the async save was writing.
    args = [*_args(token_data, "fsdp"), "--log-params-hash"]
    baseline = start_run(tmp_path, "baseline", tmp_path / "baseline", args)
    ckpt = tmp_path / "ckpt"
    first = start_run(tmp_path, "first", ckpt, [*args, "--sleep-per-step-s", "0.3"])
    first.wait_for_step(SAVE_EVERY + 2)
    os.kill(first.proc.pid, signal.SIGTERM)
    assert first.wait() == EXIT_PREEMPTED, first.log_tail()
    assert baseline.wait() == 0, baseline.log_tail()
    saved_hash = {e["step"]: e["params_sha256"] for e in _events(baseline, "checkpoint")}
    assert sorted(saved_hash) == [4, 8, 12]
    stopped = _events(first, "preempted")[0]["step"]
    assert SAVE_EVERY < stopped < MAX_STEPS
    newest = read_manifest(committed_steps(ckpt)[0][1])
    assert (newest["reason"], newest["sharding"], newest["world_size"]) == ("preempt", "fsdp", 2)
    files = {f["path"] for f in newest["files"]}
    # Sharded DCP data of both ranks plus its metadata; what the weights mean travels along.
    assert {"dcp/.metadata", "dcp/__0_0.distcp", "dcp/__1_0.distcp"} <= files
    assert {"model_config.json", "tokenizer.json", "train_state.pt"} <= files
    # The async save of step 4 holds the weights of step 4 (bit-identical run up to there).
    assert _events(first, "checkpoint")[0]["params_sha256"] == saved_hash[SAVE_EVERY]

    # Keep a copy without the preemption checkpoint: the world-size change below then resumes
    # from the asynchronously written one.
    resharded = tmp_path / "resharded"
    shutil.copytree(ckpt, resharded)
    shutil.rmtree(committed_steps(resharded)[0][1])

    second = start_run(tmp_path, "second", ckpt, args)
    third = start_run(tmp_path, "world1", resharded, args, nproc=1)
    assert second.wait() == 0, second.log_tail()
    assert third.wait() == 0, third.log_tail()
    assert _events(second, "resumed")[0]["step"] == stopped
    assert_bit_identical(baseline, first, second)

    resumed = _events(third, "resumed")[0]
    assert resumed["step"] == SAVE_EVERY
    assert resumed["params_sha256"] == saved_hash[SAVE_EVERY]  # resharded 2 -> 1, exactly
    assert _events(third, "resume_not_bit_exact")[0]["saved_world"] == 2
    assert [e["step"] for e in _events(third, "step")] == list(range(SAVE_EVERY + 1, MAX_STEPS + 1))
    assert read_manifest(committed_steps(resharded)[0][1])["world_size"] == 1


@pytest.mark.timeout(120)
def test_ddp_with_activation_checkpointing_trains_and_reports_throughput(
    token_data: Path, ddp_run: Run
) -> None:
    run = ddp_run
    assert run.wait() == 0, run.log_tail()
    [start] = _events(run, "start")
    # The harness's RUN_ID/GIT_SHA reach the log stream (Logs Insights queries read them).
    assert start["run"]["run_id"] == "test-run" and start["run"]["git_sha"] == "0" * 40
    steps = _events(run, "step")
    assert [e["step"] for e in steps] == [3, 6, 9, 12]
    assert all(e["window_steps"] == 3 for e in steps)
    assert steps[-1]["loss"] < steps[0]["loss"]
    for event in steps:
        expected = event["tokens_per_s"] * start["flops_per_token"] / (2 * 1e12)
        assert event["mfu"] == pytest.approx(expected, rel=1e-9)
        assert 0 <= event["data_time_s"] < event["step_time_s"]
    assert start["tokens_per_step"] == 2 * 4 * 64
    assert start["activation_checkpointing"] is True
    index = json.loads((token_data / "index.json").read_text())
    assert start["data"]["source"] == str(token_data)
    step_dir = committed_steps(run.checkpoint_dir)[0][1]
    config = json.loads((step_dir / "model_config.json").read_text())
    assert config["model_type"] == "llama" and config["vocab_size"] == index["vocab_size"]
    tokenizer = (token_data / "tokenizer.json").read_bytes()
    assert (step_dir / "tokenizer.json").read_bytes() == tokenizer
    # The checkpoint loads with or without the wrapper: no checkpoint-wrapper key prefixes.
    keys = torch.load(step_dir / "model.pt", weights_only=True).keys()
    assert keys and not [k for k in keys if "_checkpoint_wrapped_module" in k]
