"""Benchmark (not a test): the trainer's tokens/s against a bare training loop, in one process.

One process, world size 1, CPU. The trainer is built as in a run (``Trainer.setup``) on a
Hugging Face preset and token shards made here by the data-prep command from a generated
corpus; the bare loops drive the trainer's own model, optimizer and dataset, so both sides
compute on the same memory and only the loops differ. The sides take turns (A/B/A/B, order
rotated every round) for ``--rounds`` rounds of ``--steps`` optimizer steps each.

Sides:
  bare          ``for batch: zero_grad(); loss = model(x, y); loss.backward(); opt.step()``
  bare again    the same loop once more: an A/A control, i.e. the noise left in a ratio
  bare, own instance   the same loop on a second, identically initialised model instance
  recipe        bare + grad-norm clipping + LR schedule: the trainer's math, no machinery
  trainer       ``Trainer.iteration()``: cursor data loading, per-step agreement, metrics
                (Prometheus served on a port, a JSON line and a loss read-back every step) and,
                every other round, one asynchronous checkpoint that starts at the round's
                first step; the round's time includes waiting for the commit.

Estimators: best-of-N (each side's fastest round) and, more robust on a shared CPU whose speed
drifts, the median over rounds of the ratio of two sides' times in the same round. The
checkpoint cost is also amortised over the interval the trainer itself would choose
(``--checkpoint-interval-s auto``: Young/Daly from the measured blocking time, 6 h MTBF).

    python images/trainer/bench_throughput.py [--model hf:llama-20m] [--rounds 10] [--steps 4]
    python images/trainer/bench_throughput.py --ablate   # what each ingredient costs

``--ablate`` measures what each ingredient of the trainer as it was before this benchmark
(DDP wrapper at world size 1, clipping, deterministic algorithms, per-step epoch permutation,
synthetic samples, per-step logging) adds to a bare step; README.md has the figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

from gpt_trainer import models
from gpt_trainer.checkpoint_policy import young_daly_interval_s
from gpt_trainer.data import BatchLoader, DataCursor, SyntheticTokens, collate, rank_indices
from gpt_trainer.metrics import JsonLog, TrainerMetrics
from gpt_trainer.prep_data import prepare
from gpt_trainer.shards import TokenShards
from gpt_trainer.train import Trainer, parse_args

LR = 3e-4
WEIGHT_DECAY = 0.1


def write_corpus(directory: Path, words: int = 600_000, seed: int = 0) -> Path:
    """Zipf-distributed words from a generated 20 k-word lexicon: enough distinct byte pairs for
    an 8 k BPE vocabulary, so the ~20 M preset keeps its size."""
    rng = random.Random(seed)
    letters = "etaoinshrdlucmfwypvbgkjqxz"
    lexicon = [
        "".join(rng.choice(letters[: rng.randint(6, 26)]) for _ in range(rng.randint(2, 9)))
        for _ in range(20_000)
    ]
    weights = [1.0 / (rank + 1) for rank in range(len(lexicon))]
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "corpus.jsonl", "w", encoding="utf-8") as handle:
        remaining = words
        while remaining > 0:
            count = min(remaining, rng.randint(50, 400))
            remaining -= count
            text = " ".join(rng.choices(lexicon, weights, k=count))
            handle.write(json.dumps({"text": text}) + "\n")
    return directory


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def vocab_of(spec: str, data: Path) -> int | None:
    """The data's vocabulary for a Hugging Face model; the built-in GPT keeps its own (and
    trains on synthetic tokens, as the trainer does by default)."""
    return TokenShards(data, 8).vocab_size if spec.startswith("hf:") else None


def dataset_for(spec: str, data: Path, built: models.BuiltModel) -> Any:
    if spec.startswith("hf:"):
        return TokenShards(data, built.seq_len)
    return SyntheticTokens(4096, built.seq_len, built.vocab_size, 1234)


class BareLoop:
    """The baseline: a model, its AdamW and sequential batches, nothing else."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        scheduler: Any,
        dataset: Any,
        micro_batch: int,
        *,
        recipe: bool,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.dataset = dataset
        self.micro_batch = micro_batch
        self.recipe = recipe
        self.position = 0

    @classmethod
    def own(cls, spec: str, data: Path, micro_batch: int, seed: int) -> BareLoop:
        """A separate model instance (same preset and seed: the same initial weights)."""
        torch.manual_seed(seed)
        built = models.build(spec, vocab_size=vocab_of(spec, data))
        optimizer = torch.optim.AdamW(built.module.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: 1.0)
        dataset = dataset_for(spec, data, built)
        return cls(built.module, optimizer, scheduler, dataset, micro_batch, recipe=False)

    def step(self) -> None:
        start = self.position * self.micro_batch % (len(self.dataset) - self.micro_batch)
        inputs, targets = collate(self.dataset, list(range(start, start + self.micro_batch)))
        self.position += 1
        self.optimizer.zero_grad(set_to_none=True)
        loss = self.model(inputs, targets)
        loss.backward()
        if self.recipe:
            nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        if self.recipe:
            self.scheduler.step()
        loss.item()  # a real loop reads its loss too (and on GPU this is the sync point)


def build_trainer(spec: str, data: Path, work: Path, micro_batch: int, steps: int) -> Trainer:
    os.environ.update(
        MASTER_ADDR="127.0.0.1",
        MASTER_PORT=str(free_port()),
        RANK="0",
        WORLD_SIZE="1",
        LOCAL_RANK="0",
    )
    argv = [
        "--checkpoint-dir",
        str(work / "ckpt"),
        "--model",
        spec,
        *(["--data", str(data)] if spec.startswith("hf:") else []),
        "--micro-batch",
        str(micro_batch),
        "--max-steps",
        "1000000",
        "--checkpoint-every-steps",
        str(steps),
        "--keep-last",
        "2",
        "--metrics-port",
        str(free_port()),
        "--log-jsonl",
        str(work / "events.jsonl"),
        "--lr",
        str(LR),
        "--warmup-steps",
        "1",
    ]
    trainer = Trainer(parse_args(argv))
    # JSON lines still go to the file and a stream, like in a pod; just not to this terminal.
    devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the run
    trainer.jsonl = JsonLog(work / "events.jsonl", stream=devnull)
    if trainer.setup() is not None:
        raise RuntimeError("trainer found a completed run in a fresh directory")
    return trainer


def timed_rounds(
    sides: dict[str, Callable[[], None]], rounds: int, steps: int, before: dict[str, Any]
) -> dict[str, list[float]]:
    """Seconds per step of each round, sides interleaved within every round."""
    per_step: dict[str, list[float]] = {name: [] for name in sides}
    for round_no in range(rounds):
        # Rotate the order every round: no side always runs right after the same other one.
        names = list(sides)
        shift = round_no % len(names)
        order = names[shift:] + names[:shift]
        for name in order:
            prepare_side = before.get(name)
            if prepare_side is not None:
                prepare_side()
            started = time.perf_counter()
            sides[name]()
            per_step[name].append((time.perf_counter() - started) / steps)
    return per_step


def _timed_sides(
    args: argparse.Namespace, trainer: Any, *, bare: BareLoop, recipe: BareLoop, own: BareLoop
) -> dict[str, list[float]]:
    """Seconds per step of each side, round by round (`timed_rounds`): the bare loop twice
    (A/A control), on its own model instance, the recipe loop, and the trainer, whose rounds
    alternate with and without a checkpoint save."""
    steps = args.steps
    trainer_rounds = [0]

    def trainer_round() -> None:
        trainer.window.reset()  # the other sides ran since the trainer's last window closed
        for _ in range(steps):
            trainer.iteration()
        trainer._finish_save(synchronize=True)  # a round pays for its whole checkpoint
        trainer_rounds[0] += 1

    def deterministic(on: bool) -> Callable[[], None]:
        # The trainer runs CPU training deterministically (bit-exact resume); a bare loop would
        # not, so each side gets its own setting.
        return lambda: torch.use_deterministic_algorithms(on)

    def loop(side: BareLoop) -> Callable[[], None]:
        def run() -> None:
            for _ in range(steps):
                side.step()

        return run

    per_step = timed_rounds(
        {
            "bare": loop(bare),
            "bare again": loop(bare),  # A/A control: what is left of the noise
            "bare, own instance": loop(own),
            "recipe": loop(recipe),
            "trainer": trainer_round,
        },
        args.rounds,
        steps,
        {
            "bare": deterministic(False),
            "bare again": deterministic(False),
            "bare, own instance": deterministic(False),
            "recipe": deterministic(False),
            "trainer": deterministic(True),
        },
    )
    return per_step


def _analyse(
    args: argparse.Namespace, trainer: Any, work: Path, per_step: dict[str, list[float]]
) -> dict[str, Any]:
    """The report: best-of-N and paired (same round) ratios, the cost of a checkpoint save,
    the Young/Daly interval it implies, and the A/A noise."""
    steps = args.steps
    # Second estimator: each round's trainer time over the same round's bare time (adjacent in
    # time, so slow drift of the machine's speed cancels), median over rounds.
    paired = [t / b for t, b in zip(per_step["trainer"], per_step["bare"], strict=True)]
    paired_aa = [a / b for a, b in zip(per_step["bare again"], per_step["bare"], strict=True)]
    paired_recipe = [a / b for a, b in zip(per_step["recipe"], per_step["bare"], strict=True)]
    paired_own = [
        a / b for a, b in zip(per_step["bare, own instance"], per_step["bare"], strict=True)
    ]
    with_save = per_step.pop("trainer")
    per_step["trainer+checkpoint"] = with_save[0::2]
    per_step["trainer"] = with_save[1::2]
    tokens_per_step = args.micro_batch * trainer.seq_len
    events = [json.loads(line) for line in (work / "events.jsonl").read_text().splitlines()]
    saves = [e for e in events if e["event"] == "checkpoint"]
    best = {name: min(values) for name, values in per_step.items()}
    assert trainer.metrics is not None
    blocking_s = trainer.metrics.checkpoint_blocking._value.get()
    # A save's cost: what a round with one takes beyond a round without (paired: in units of the
    # same round's bare time; best-of-N: fastest rounds). It includes the blocking time.
    without, with_one = statistics.median(paired[1::2]), statistics.median(paired[0::2])
    save_cost_s = max(0.0, with_one - without) * statistics.median(per_step["bare"]) * steps
    save_cost_best_s = max(0.0, (best["trainer+checkpoint"] - best["trainer"]) * steps)
    # Young/Daly for that cost at the default 6 h MTBF: the interval --checkpoint-interval-s
    # auto converges to, as it measures blocking and the overlapped steps' slow-down.
    interval_s = young_daly_interval_s(max(save_cost_s, 1e-3), 6 * 3600.0)
    step_s = statistics.median(per_step["trainer"])

    def with_saves_every(seconds: float) -> float:
        return without + save_cost_s / seconds * without

    report = {
        "model": args.model,
        "params": trainer.built.num_params,
        "flops_per_token": trainer.flops_per_token,
        "tokens_per_step": tokens_per_step,
        "threads": torch.get_num_threads(),
        "rounds": args.rounds,
        "steps_per_round": steps,
        "best_step_s": best,
        "median_step_s": {k: statistics.median(v) for k, v in per_step.items()},
        "tokens_per_s_best": {k: tokens_per_step / v for k, v in best.items()},
        "ratio_trainer_vs_bare": best["trainer"] / best["bare"],
        "ratio_trainer_vs_recipe": best["trainer"] / best["recipe"],
        "ratio_recipe_vs_bare": best["recipe"] / best["bare"],
        "ratio_trainer_with_a_save_per_round_vs_bare": best["trainer+checkpoint"] / best["bare"],
        "checkpoints_committed": len(saves),
        "checkpoint_blocking_s": blocking_s,
        "checkpoint_cost_s": save_cost_s,
        "young_daly_interval_s": interval_s,
        "checkpoint_cost_s_best_of_n": save_cost_best_s,
        "paired_trainer_with_checkpoints_at_young_daly_vs_bare": with_saves_every(interval_s),
        "paired_trainer_with_checkpoints_every_600s_vs_bare": with_saves_every(600.0),
        "trainer_policy_save_cost_s": trainer.policy.save_cost_s(),
        "trainer_step_s_median": step_s,
        "aa_noise_best_of_n": best["bare again"] / best["bare"],
        "paired_median_trainer_vs_bare_without_save": without,
        "paired_median_trainer_vs_bare_with_save": with_one,
        "aa_noise_paired_median": statistics.median(paired_aa),
        "paired_median_recipe_vs_bare": statistics.median(paired_recipe),
        "paired_median_own_instance_vs_bare": statistics.median(paired_own),
        "all_step_s": per_step,
    }
    return report


def run_benchmark(args: argparse.Namespace, data: Path, work: Path) -> dict[str, Any]:
    steps = args.steps
    # One checkpoint every other trainer round: rounds with a save and rounds without one give
    # the cost of a save and the cost of the per-step machinery separately, from one trainer.
    trainer = build_trainer(args.model, data, work, args.micro_batch, 2 * steps)
    # The bare loops drive the trainer's own model, optimizer and dataset: the same memory, so
    # the comparison is of the loops alone. (Two instances of one model can differ in speed
    # by their memory placement; the "bare, own instance" side shows by how much.)
    shared = (trainer.module, trainer.optimizer, trainer.scheduler, trainer.dataset)
    bare = BareLoop(*shared, args.micro_batch, recipe=False)
    recipe = BareLoop(*shared, args.micro_batch, recipe=True)
    own = BareLoop.own(args.model, data, args.micro_batch, seed=1234)
    # Warm up all three; the trainer stops one step short of its first save, so even trainer
    # rounds start with a save (and contain exactly one), odd rounds have none.
    for _ in range(2 * steps - 1):
        trainer.iteration()
    for _ in range(2):
        bare.step()
        recipe.step()
        own.step()
    per_step = _timed_sides(args, trainer, bare=bare, recipe=recipe, own=own)
    report = _analyse(args, trainer, work, per_step)
    trainer.close()
    return report


def micro_costs(dataset: Any, micro_batch: int) -> dict[str, float]:
    """Microseconds per call of each cheap per-step ingredient, timed in isolation (many calls:
    robust where whole-step A/B differences drown in the noise of a shared CPU)."""
    from gpt_trainer.preemption import agree

    metrics = TrainerMetrics()
    devnull = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115
    jsonl = JsonLog(Path(tempfile.mkdtemp()) / "events.jsonl", stream=devnull)
    synthetic = SyntheticTokens(4096, dataset.seq_len, dataset.vocab_size, 1)
    big = SyntheticTokens(1_000_000, dataset.seq_len, dataset.vocab_size, 1)
    loader = BatchLoader(dataset, seed=1, rank=0, world_size=1, micro_batch=micro_batch)
    cursor = DataCursor()

    def log_step() -> None:
        metrics.step_duration.observe(0.5)
        metrics.tokens_per_second.set(1000.0)
        metrics.tokens.inc(1000)
        metrics.data_loading.set(0.001)
        metrics.mfu.set(0.4)
        metrics.global_step.set(1)
        metrics.collective_stall.set(0.0)
        metrics.loss.set(2.5)
        jsonl.event("step", step=1, loss=2.5, loss_hex=(2.5).hex(), lr=1e-3, step_time_s=0.5)

    def old_indices(num: int) -> Callable[[], None]:
        def run() -> None:
            # What train.py did every step before BatchLoader: the whole epoch's permutation.
            rank_indices(
                cursor, num_samples=num, seed=1, rank=0, world_size=1, micro_batch=micro_batch
            )

        return run

    items: dict[str, Callable[[], object]] = {
        "json_event_and_8_metric_updates": log_step,
        "agree_world_1": lambda: agree([0, 0, 0]),
        "batch_from_token_shards (BatchLoader)": lambda: loader.batch(cursor),
        "epoch_permutation_per_step_4k_samples (old)": old_indices(4096),
        "epoch_permutation_per_step_1M_samples (old)": old_indices(1_000_000),
        "synthetic_batch (old default data)": lambda: collate(synthetic, list(range(micro_batch))),
        "synthetic_batch_1M (old default data)": lambda: collate(big, list(range(micro_batch))),
    }
    costs = {}
    for name, fn in items.items():
        fn()
        calls, started = 0, time.perf_counter()
        while time.perf_counter() - started < 0.5 or calls < 5:
            fn()
            calls += 1
        costs[name] = 1e6 * (time.perf_counter() - started) / calls
    return costs


def run_ablation(args: argparse.Namespace, data: Path, work: Path) -> dict[str, Any]:
    """What each ingredient of the trainer (as it was before the fixes) adds to a bare step.

    Paired design: single steps alternate bare / variant, and the cost is the median of the
    paired differences, which cancels the slow drift of a shared CPU that best-of-N segment
    timing could not (an A/A pair, bare vs bare, measures what is left of the noise).
    """
    import torch.distributed as dist

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()))
    dist.init_process_group("gloo", rank=0, world_size=1)
    vocab = vocab_of(args.model, data)

    def make(ddp: bool = False) -> tuple[nn.Module, Any, Any]:
        torch.manual_seed(1234)
        built = models.build(args.model, vocab_size=vocab)
        optimizer = torch.optim.AdamW(built.module.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)
        model = nn.parallel.DistributedDataParallel(built.module) if ddp else built.module
        return model, optimizer, built

    plain = make()
    dataset = dataset_for(args.model, data, plain[2])
    costs_us = micro_costs(dataset, args.micro_batch)
    ddp = make(ddp=True)
    variants: dict[str, dict[str, bool]] = {
        "bare (A/A: noise left)": {},
        "ddp wrapper at world 1": {"ddp": True},
        "clip_grad_norm_": {"clip": True},
        "use_deterministic_algorithms": {"det": True},
    }
    position = [0]

    def one_step(v: dict[str, bool]) -> float:
        model, optimizer, _ = ddp if v.get("ddp") else plain
        torch.use_deterministic_algorithms(v.get("det", False))
        start = position[0] * args.micro_batch % (len(dataset) - args.micro_batch)
        position[0] += 1
        inputs, targets = collate(dataset, list(range(start, start + args.micro_batch)))
        started = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(inputs, targets)
        loss.backward()
        if v.get("clip"):
            nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        loss.item()
        return time.perf_counter() - started

    one_step({})
    one_step({"ddp": True})
    pairs: dict[str, list[tuple[float, float]]] = {name: [] for name in variants}
    for _ in range(args.rounds):
        for name, v in variants.items():
            for _ in range(args.steps):
                pairs[name].append((one_step({}), one_step(v)))
    bare_s = statistics.median(a for values in pairs.values() for a, _ in values)
    delta_ms = {
        name: 1e3 * statistics.median(b - a for a, b in values) for name, values in pairs.items()
    }
    return {
        "model": args.model,
        "bare_step_s_median": bare_s,
        "paired_delta_ms_median": delta_ms,
        "paired_delta_pct": {k: v / 10 / bare_s for k, v in delta_ms.items()},
        "pairs_per_variant": args.rounds * args.steps,
        "micro_cost_us_per_call": costs_us,
        "micro_cost_pct_of_bare_step": {k: v / 1e4 / bare_s for k, v in costs_us.items()},
        "all_step_s": {k: [list(p) for p in v] for k, v in pairs.items()},
    }


def print_summary(r: dict[str, Any], args: argparse.Namespace) -> None:
    best = r["best_step_s"]
    rows = [
        (
            "trainer / bare (no save in the round)",
            "ratio_trainer_vs_bare",
            "paired_median_trainer_vs_bare_without_save",
        ),
        (
            "trainer / bare (one async save per round)",
            "ratio_trainer_with_a_save_per_round_vs_bare",
            "paired_median_trainer_vs_bare_with_save",
        ),
        (
            "recipe / bare (clip + LR schedule)",
            "ratio_recipe_vs_bare",
            "paired_median_recipe_vs_bare",
        ),
        ("bare on another instance / bare", None, "paired_median_own_instance_vs_bare"),
        ("bare again / bare (A/A: noise)", "aa_noise_best_of_n", "aa_noise_paired_median"),
    ]
    print(
        f"{r['model']} ({r['params'] / 1e6:.1f} M params), {r['tokens_per_step']} tokens/step, "
        f"{args.rounds} rounds x {args.steps} steps per side; best s/step: "
        + ", ".join(f"{k} {v:.3f}" for k, v in best.items())
    )
    print(f"{'ratio':44s} {'best-of-N':>10s} {'paired median':>14s}")
    for label, best_key, paired_key in rows:
        best_text = f"{r[best_key]:.4f}" if best_key else "-"
        print(f"{label:44s} {best_text:>10s} {r[paired_key]:>14.4f}")
    print(
        f"checkpoint: blocks the loop {r['checkpoint_blocking_s']:.3f} s, costs "
        f"{r['checkpoint_cost_s']:.2f} s in all (paired; best-of-N "
        f"{r['checkpoint_cost_s_best_of_n']:.2f} s; the trainer's own estimate "
        f"{r['trainer_policy_save_cost_s']:.2f} s)\n"
        f"trainer / bare with saves at the Young/Daly interval for that cost "
        f"({r['young_daly_interval_s']:.0f} s): "
        f"{r['paired_trainer_with_checkpoints_at_young_daly_vs_bare']:.4f}; every 600 s "
        f"(default): {r['paired_trainer_with_checkpoints_every_600s_vs_bare']:.4f} (paired)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="hf:llama-20m")
    parser.add_argument("--micro-batch", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--steps", type=int, default=4, help="steps per round and side")
    parser.add_argument("--ablate", action="store_true")
    parser.add_argument("--data", type=Path, help="prepared token shards (default: generate)")
    parser.add_argument("--json", type=Path, help="also write the report here")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-throughput-"))
    try:
        data = args.data
        if data is None:
            data = work / "shards"
            with contextlib.redirect_stderr(sys.stdout):
                prepare([write_corpus(work / "corpus")], str(data), vocab_size=8192)
        report = (run_ablation if args.ablate else run_benchmark)(args, data, work)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = {k: v for k, v in report.items() if k != "all_step_s"}
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))
    if not args.ablate:
        print_summary(report, args)
    os._exit(0)  # the trainer's process group and metrics server: nothing left to tear down


if __name__ == "__main__":
    main()
