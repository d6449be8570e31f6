"""Fast unit tests: data-cursor arithmetic and sharding, exit-code mapping, the SIGTERM handler
and watchdog, RNG capture/restore, and the Prometheus metric names the platform alerts on."""

from __future__ import annotations

import os
import signal
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import generate_latest

from gpt_trainer import exit_codes as ec
from gpt_trainer.data import (
    DataCursor,
    SyntheticTokens,
    advance,
    batches_per_epoch,
    collate,
    cursor_at_step,
    rank_indices,
)
from gpt_trainer.metrics import TrainerMetrics
from gpt_trainer.preemption import PreemptionHandler, agree
from gpt_trainer.train import parse_args, rng_state, set_rng_state, state_dict_sha256

# ----------------------------------------------------------------------------- data cursor


@given(
    st.integers(0, 50),
    st.integers(0, 50),
    st.integers(0, 500),
    st.integers(0, 500),
    st.integers(1, 40),
)
def test_advance_composes(epoch: int, batch: int, a: int, b: int, per_epoch: int) -> None:
    start = DataCursor(epoch, batch % per_epoch)
    assert advance(advance(start, per_epoch, a), per_epoch, b) == advance(start, per_epoch, a + b)
    moved = advance(start, per_epoch, a)
    assert 0 <= moved.batch < per_epoch
    moved_flat = moved.epoch * per_epoch + moved.batch
    assert moved_flat - (start.epoch * per_epoch + start.batch) == a


def test_cursor_rolls_over_epochs() -> None:
    assert cursor_at_step(0, 4) == DataCursor(0, 0)
    assert cursor_at_step(9, 4) == DataCursor(2, 1)
    assert DataCursor.from_dict(DataCursor(3, 2).to_dict()) == DataCursor(3, 2)


@given(st.integers(1, 4), st.integers(1, 8), st.integers(0, 3), st.integers(0, 1000))
def test_ranks_partition_each_global_batch(world: int, micro: int, epoch: int, seed: int) -> None:
    n = 97
    per_epoch = batches_per_epoch(n, world, micro)
    seen: list[int] = []
    for batch in range(per_epoch):
        shards = [
            rank_indices(
                DataCursor(epoch, batch),
                num_samples=n,
                seed=seed,
                rank=r,
                world_size=world,
                micro_batch=micro,
            )
            for r in range(world)
        ]
        assert all(len(s) == micro for s in shards)
        seen.extend(i for s in shards for i in s)
    assert len(seen) == len(set(seen)) == per_epoch * world * micro  # no repeats within an epoch


def test_epochs_reshuffle_and_are_reproducible() -> None:
    kw = {"num_samples": 64, "seed": 3, "rank": 0, "world_size": 2, "micro_batch": 4}
    assert rank_indices(DataCursor(0, 0), **kw) == rank_indices(DataCursor(0, 0), **kw)
    assert rank_indices(DataCursor(0, 0), **kw) != rank_indices(DataCursor(1, 0), **kw)
    with pytest.raises(ValueError):
        rank_indices(DataCursor(0, 8), **kw)
    with pytest.raises(ValueError):
        batches_per_epoch(3, 2, 2)


def test_synthetic_samples_depend_only_on_seed_and_index() -> None:
    ds = SyntheticTokens(100, seq_len=16, vocab_size=256, seed=5)
    torch.manual_seed(0)
    np.random.seed(0)
    first = ds[42]
    torch.manual_seed(1)
    np.random.seed(1)  # ambient RNG must not matter
    assert torch.equal(first, ds[42]) and first.shape == (17,)
    assert not torch.equal(first, SyntheticTokens(100, 16, 256, seed=6)[42])
    inputs, targets = collate(ds, [1, 2])
    assert inputs.shape == targets.shape == (2, 16)
    assert torch.equal(inputs[:, 1:], targets[:, :-1])
    with pytest.raises(IndexError):
        ds[100]


# ----------------------------------------------------------------------------- exit codes


@pytest.mark.parametrize(
    ("succeeded", "statuses", "code"),
    [
        (True, {}, 0),
        (False, {0: "complete", 1: "complete"}, 0),  # gloo teardown abort after success
        (False, {0: "complete", 1: "running"}, 0),
        (False, {0: "preempted", 1: "preempted"}, 75),
        (False, {0: "preempted", 1: "running"}, 75),  # rank 1 killed after the barrier
        (False, {0: "preempted", 1: "failed"}, 1),
        (False, {0: "running", 1: "running"}, 1),  # SIGKILL / OOM: nobody reported
        (False, {}, 1),
    ],
)
def test_launcher_exit_code_mapping(succeeded: bool, statuses: dict[int, str], code: int) -> None:
    assert ec.launcher_exit_code(succeeded, statuses) == code


def test_read_statuses_skips_junk(tmp_path: Path) -> None:
    ec.status_path(tmp_path, 0).write_text('{"rank": 0, "status": "preempted"}')
    ec.status_path(tmp_path, 1).write_text("{torn")
    assert ec.read_statuses(tmp_path) == {0: "preempted"}


def test_launch_entrypoint_maps_a_failing_child_to_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpt_trainer import launch

    monkeypatch.setenv(ec.STATUS_DIR_ENV, str(tmp_path))
    script = tmp_path / "fail.py"
    script.write_text("import sys; sys.exit(3)\n")
    assert launch.main(["--standalone", "--nproc-per-node", "1", str(script)]) == ec.EXIT_FAILURE


# ----------------------------------------------------------------------------- preemption


def test_sigterm_sets_flag_and_watchdog_fires_after_grace() -> None:
    fired = threading.Event()
    handler = PreemptionHandler(grace_s=0.2, on_deadline=fired.set)
    previous = signal.getsignal(signal.SIGTERM)
    try:
        handler.install()
        os.kill(os.getpid(), signal.SIGTERM)
        assert handler.requested
        assert not fired.is_set()
        assert fired.wait(5)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_disarm_cancels_the_watchdog() -> None:
    fired = threading.Event()
    handler = PreemptionHandler(grace_s=0.2, on_deadline=fired.set)
    handler.request("test")
    handler.request("again")  # idempotent: one timer
    handler.disarm()
    assert not fired.wait(0.5)


def test_agree_without_a_process_group_is_identity() -> None:
    assert agree([1, 0, 1]) == [1, 0, 1]


# ----------------------------------------------------------------------------- state & metrics


def test_rng_state_round_trip_reproduces_draws(tmp_path: Path) -> None:
    import random

    torch.manual_seed(1)
    np.random.seed(2)
    random.seed(3)
    saved = rng_state()
    torch.save(saved, tmp_path / "rng.pt")
    expected = (torch.rand(3), np.random.rand(3), random.random())
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    got = (torch.rand(3), np.random.rand(3), random.random())
    assert torch.equal(expected[0], got[0])
    assert np.array_equal(expected[1], got[1]) and expected[2] == got[2]


def test_state_dict_hash_sees_every_bit() -> None:
    state = {"w": torch.zeros(4)}
    before = state_dict_sha256(state)
    state["w"][2] = -0.0  # differs from +0.0 only in the sign bit
    assert state_dict_sha256(state) != before


def test_metric_names_the_platform_alerts_on() -> None:
    metrics = TrainerMetrics()
    metrics.step_duration.observe(0.5)
    text = generate_latest(metrics.registry).decode()
    for name in (
        "trainer_step_duration_seconds_bucket",
        "trainer_tokens_per_second",
        "trainer_data_loading_seconds",
        "trainer_checkpoint_save_duration_seconds",
        "trainer_checkpoint_blocking_seconds",
        "trainer_last_checkpoint_timestamp_seconds",
        "trainer_global_step",
        "trainer_collective_stall_seconds",
        "trainer_loss",
        "trainer_run_info",
        "trainer_tokens_total",
        "trainer_mfu_ratio",
        "trainer_model_flops_per_token",
        "trainer_resumed_from_step",
        "trainer_checkpoints_skipped_total",
    ):
        assert f"\n{name}" in text or text.startswith(name), name


def test_cli_contract_defaults(tmp_path: Path) -> None:
    args = parse_args(["--checkpoint-dir", str(tmp_path)])
    assert (args.mode, args.metrics_port, args.keep_last) == ("ddp", 9401, 3)
    assert (args.log_every, args.precision, args.deterministic) == (1, "auto", None)
    fsdp = parse_args(["--checkpoint-dir", str(tmp_path), "--mode", "fsdp", "--model", "hf:x"])
    assert (fsdp.mode, fsdp.model, fsdp.data) == ("fsdp", "hf:x", "synthetic")
    with pytest.raises(SystemExit):
        parse_args(["--checkpoint-dir", str(tmp_path), "--log-every", "0"])
    assert args.checkpoint_interval_s == "600"
    with pytest.raises(SystemExit):
        parse_args(["--checkpoint-dir", str(tmp_path), "--mode", "deepspeed"])
    # A fleet job carries its DeepSpeed config inline (no ConfigMap travels with it): one of
    # the two, never both.
    inline = parse_args(
        ["--checkpoint-dir", str(tmp_path), "--mode", "deepspeed", "--ds-config-json", "{}"]
    )
    assert inline.ds_config_json == "{}" and inline.ds_config is None
    with pytest.raises(SystemExit):
        parse_args(
            [
                "--checkpoint-dir",
                str(tmp_path),
                "--mode",
                "deepspeed",
                "--ds-config",
                str(tmp_path / "c.json"),
                "--ds-config-json",
                "{}",
            ]
        )
