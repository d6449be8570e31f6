"""Benchmark (not a test): how much a checkpoint of the ~50 M-parameter model blocks training.

Runs the trainer's own save path (snapshot -> background write with fsync and sha256 ->
manifest -> rename -> LATEST) in one process, on the rank-0 share of a DDP checkpoint (model,
AdamW state, scheduler, RNG): that rank's blocking time is the job's, since all ranks advance in
lockstep. Prints the blocking time as a fraction of training time at the default interval
(``--checkpoint-interval-s`` 600 s, i.e. blocked seconds per 600 s of steps), plus the slow-down
of the steps that overlap the background write and the synchronous-save figure for comparison.

    python images/trainer/bench_checkpoint.py [--dir /tmp/bench] [--steps 4]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import torch

from gpt_trainer import checkpoint as ckpt
from gpt_trainer.data import SyntheticTokens, collate
from gpt_trainer.model import build_model, count_parameters
from gpt_trainer.train import rng_state

DEFAULT_INTERVAL_S = 600.0  # train.py's --checkpoint-interval-s default


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="checkpoint root (default: tmp)")
    parser.add_argument("--steps", type=int, default=4, help="timed steps without a save")
    parser.add_argument("--micro-batch", type=int, default=8)
    parser.add_argument("--interval-s", type=float, default=DEFAULT_INTERVAL_S)
    return parser


def _summary(report: dict[str, float]) -> str:
    """One line for the log: what a save blocks, async and sync, at the planned interval."""
    size, interval = report["checkpoint_bytes"], report["interval_s"]
    blocked_s, sync_s = report["async_blocking_s"], report["sync_save_s"]
    interference_s = report["overlap_slowdown_s"]
    return (
        f"checkpoint of {size / 1e6:.0f} MB blocks {blocked_s:.3f} s (async) / {sync_s:.2f} s "
        f"(sync); step {report['step_s_median']:.2f} s; at one save per {interval:.0f} s "
        f"(~{report['steps_per_interval']:.0f} steps): {100 * blocked_s / interval:.3f} % blocked "
        f"async, {100 * (blocked_s + interference_s) / interval:.3f} % incl. overlap, "
        f"{100 * sync_s / interval:.3f} % sync (target < 2 %)"
    )


def _report(
    parameters: int,
    *,
    size: int,
    step_s: float,
    timings: tuple[float, float, float, float],
    overlapping: int,
    interval_s: float,
) -> dict[str, float]:
    """The measured figures and the fractions of a checkpoint interval they cost. `timings`:
    async blocking, async total, overlap slowdown, sync save (seconds)."""
    blocked_s, async_total_s, interference_s, sync_s = timings
    return {
        "parameters": parameters,
        "checkpoint_bytes": size,
        "threads": torch.get_num_threads(),
        "step_s_median": step_s,
        "async_blocking_s": blocked_s,
        "async_total_s": async_total_s,
        "steps_overlapping_write": overlapping,
        "overlap_slowdown_s": interference_s,
        "sync_save_s": sync_s,
        "interval_s": interval_s,
        "steps_per_interval": interval_s / step_s,
        "blocking_fraction_async": blocked_s / interval_s,
        "cost_fraction_async_incl_overlap": (blocked_s + interference_s) / interval_s,
        "blocking_fraction_sync": sync_s / interval_s,
        "blocking_vs_one_step_async": blocked_s / step_s,
    }


def main() -> None:
    args = _parser().parse_args()
    root = args.dir or Path(tempfile.mkdtemp(prefix="bench-ckpt-"))
    root.mkdir(parents=True, exist_ok=True)

    torch.manual_seed(0)
    model = build_model("bench50m")
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
    data = SyntheticTokens(1024, model.cfg.seq_len, model.cfg.vocab_size, seed=0)
    batch_no = 0

    def step() -> float:
        nonlocal batch_no
        started = time.perf_counter()
        start = batch_no * args.micro_batch
        inputs, targets = collate(data, list(range(start, start + args.micro_batch)))
        batch_no += 1
        optimizer.zero_grad(set_to_none=True)
        model(inputs, targets).backward()
        optimizer.step()
        scheduler.step()
        return time.perf_counter() - started

    def files() -> dict[str, object]:
        return {
            "model.pt": model.state_dict(),
            "train_state.pt": {
                "optimizer": optimizer.state_dict(),
                "scheduler": scheduler.state_dict(),
                "global_step": batch_no,
            },
            "rank_00000.pt": {"rng": rng_state(), "cursor": {"epoch": 0, "batch": batch_no}},
        }

    step()  # warm-up: allocates AdamW state, so the checkpoint has its full size
    step_times = [step() for _ in range(args.steps)]
    step_s = statistics.median(step_times)

    # Asynchronous save, as the trainer does for periodic saves.
    tmp = root / f"{ckpt.TMP_PREFIX}{ckpt.step_dir_name(batch_no)}"
    started = time.perf_counter()
    pending = ckpt.PendingSave(batch_no, tmp, ckpt.clone_to_cpu(files()), 0, background=True)
    blocked_s = time.perf_counter() - started
    overlapped = []
    while not pending.done():
        overlapped.append(step())
    pending.wait()
    save_step = pending.step
    final = ckpt.commit(root, tmp, save_step, ckpt.read_rank_indices(tmp, 1), {"world_size": 1})
    async_total_s = time.perf_counter() - started
    size = sum(f["size"] for f in ckpt.verify(final)["files"])
    interference_s = sum(max(0.0, t - step_s) for t in overlapped)

    # Synchronous save of the same state, as the preemption and final saves do.
    step()
    tmp = root / f"{ckpt.TMP_PREFIX}{ckpt.step_dir_name(batch_no)}"
    started = time.perf_counter()
    ckpt.PendingSave(batch_no, tmp, files(), 0, background=False).wait()
    ckpt.commit(root, tmp, batch_no, ckpt.read_rank_indices(tmp, 1), {"world_size": 1})
    sync_s = time.perf_counter() - started

    report = _report(
        count_parameters(model),
        size=size,
        step_s=step_s,
        timings=(blocked_s, async_total_s, interference_s, sync_s),
        overlapping=len(overlapped),
        interval_s=args.interval_s,
    )
    print(json.dumps(report, indent=2))
    print(_summary(report))
    if args.dir is None:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
