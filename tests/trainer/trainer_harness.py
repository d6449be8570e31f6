"""Helpers for the multi-process trainer tests: start the launcher, watch its JSON log, signal it,
and compare runs step by step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from conftest import TRAINER_ROOT

# The tiny model: ~0.47 M parameters, fast enough for 30 steps in a few seconds on 2 cores.
COMMON_ARGS = ["--model", "tiny", "--metrics-port", "0", "--seed", "7", "--num-samples", "1024"]
LAUNCH_TIMEOUT_S = 120


@dataclass
class Run:
    """One launcher invocation: its process, its JSON-lines log and its checkpoint dir."""

    proc: subprocess.Popen[bytes]
    jsonl: Path
    checkpoint_dir: Path
    output: Path
    env: dict[str, str] = field(default_factory=dict)

    def events(self) -> list[dict[str, Any]]:
        if not self.jsonl.exists():
            return []
        lines = self.jsonl.read_text(encoding="utf-8").splitlines()
        # The last line may be half-written while the run is live.
        events = []
        for line in lines:
            try:
                events.append(json.loads(line))
            except ValueError:
                continue
        return events

    def last_step(self) -> int:
        steps = [e["step"] for e in self.events() if e["event"] == "step"]
        return max(steps, default=0)

    def wait_for_step(self, step: int, timeout_s: float = 90) -> None:
        deadline = time.monotonic() + timeout_s
        while self.last_step() < step:
            if self.proc.poll() is not None:
                raise AssertionError(f"run ended (rc {self.proc.returncode}) before step {step}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no step {step} within {timeout_s} s")
            time.sleep(0.05)

    def wait(self, timeout_s: float = LAUNCH_TIMEOUT_S) -> int:
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            raise AssertionError(
                f"launcher did not exit in {timeout_s} s; see {self.output}"
            ) from None

    def log_tail(self) -> str:
        return self.output.read_text(errors="replace")[-4000:]


def start_run(
    tmp: Path,
    name: str,
    checkpoint_dir: Path,
    worker_args: list[str],
    nproc: int = 2,
    extra_env: dict[str, str] | None = None,
) -> Run:
    """Start ``python -m gpt_trainer.launch`` like the container does (own session, so a test
    can signal exactly the launcher, or kill the whole group on timeout)."""
    jsonl = tmp / f"{name}.jsonl"
    output = tmp / f"{name}.out"
    env = {
        **os.environ,
        "PYTHONPATH": str(TRAINER_ROOT),
        "RUN_ID": "test-run",
        "GIT_SHA": "0" * 40,
        **(extra_env or {}),
    }
    cmd = [
        sys.executable,
        "-m",
        "gpt_trainer.launch",
        "--standalone",
        "--nproc-per-node",
        str(nproc),
        "--shutdown-timeout",
        "20",
        "-m",
        "gpt_trainer.train",
        "--checkpoint-dir",
        str(checkpoint_dir),
        "--log-jsonl",
        str(jsonl),
        *COMMON_ARGS,
        *worker_args,
    ]
    with open(output, "wb") as out:
        proc = subprocess.Popen(
            cmd,
            cwd=TRAINER_ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Run(proc=proc, jsonl=jsonl, checkpoint_dir=checkpoint_dir, output=output, env=env)


def run_to_end(
    tmp: Path, name: str, checkpoint_dir: Path, worker_args: list[str], **kw: Any
) -> Run:
    run = start_run(tmp, name, checkpoint_dir, worker_args, **kw)
    rc = run.wait()
    assert rc == 0, f"{name} exited {rc}:\n{run.log_tail()}"
    return run


def losses_by_step(*runs: Run) -> dict[int, set[str]]:
    """Every loss logged for each step across runs, as exact float hex strings."""
    found: dict[int, set[str]] = {}
    for run in runs:
        for event in run.events():
            if event["event"] == "step":
                found.setdefault(event["step"], set()).add(event["loss_hex"])
    return found


def result(checkpoint_dir: Path) -> dict[str, Any]:
    return json.loads((checkpoint_dir / "result.json").read_text(encoding="utf-8"))


def assert_bit_identical(baseline: Run, *resumed: Run) -> None:
    """Same final parameter hash and, for every step, every logged loss equal to the baseline's
    (a step re-run after a crash must reproduce the same loss too)."""
    assert (
        result(baseline.checkpoint_dir)["params_sha256"]
        == result(resumed[-1].checkpoint_dir)["params_sha256"]
    )
    expected = losses_by_step(baseline)
    got = losses_by_step(*resumed)
    assert sorted(got) == sorted(expected), "resumed runs did not log every step"
    for step, losses in got.items():
        assert losses == expected[step], f"step {step}: {losses} != {expected[step]}"


def write_corpus(directory: Path, documents: int = 240, seed: int = 0) -> Path:
    """A small deterministic corpus with learnable structure (a tiny grammar over a fixed word
    list), as ``.jsonl`` plus one ``.txt`` document: what data-prep reads."""
    import json
    import random

    rng = random.Random(seed)
    subjects = ["the cat", "a dog", "the bird", "my friend", "the old man", "a small fox"]
    verbs = ["sees", "chases", "likes", "finds", "follows", "watches"]
    objects = ["the ball", "a red box", "the tree", "some water", "the moon", "a blue car"]
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / "part-0.jsonl", "w", encoding="utf-8") as handle:
        for _ in range(documents):
            sentences = [
                f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)}."
                for _ in range(rng.randint(3, 9))
            ]
            handle.write(json.dumps({"text": " ".join(sentences).capitalize()}) + "\n")
    (directory / "notes.txt").write_text("A plain text document.\nIt has two lines.\n")
    return directory
