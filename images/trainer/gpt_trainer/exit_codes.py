"""Process exit codes shared by the worker and the launcher, and the launcher's mapping.

A Kubernetes ``podFailurePolicy`` can act on these: 75 (EX_TEMPFAIL) means "preempted after a
committed checkpoint, restart me and I resume"; 1 is a real failure that counts against the
backoff limit; 0 is success, including a restart of a run that had already completed.
"""

from __future__ import annotations

import json
from pathlib import Path

EXIT_SUCCESS = 0
EXIT_FAILURE = 1
EXIT_PREEMPTED = 75

STATUS_DIR_ENV = "GPT_TRAINER_STATUS_DIR"

# Values a worker writes into ``status-rank<N>.json``.
STATUS_RUNNING = "running"
STATUS_COMPLETE = "complete"
STATUS_PREEMPTED = "preempted"
STATUS_FAILED = "failed"


def status_path(status_dir: Path, rank: int) -> Path:
    return status_dir / f"status-rank{rank:05d}.json"


def read_statuses(status_dir: Path) -> dict[int, str]:
    """Rank -> last status each worker reported (unreadable files are skipped)."""
    statuses: dict[int, str] = {}
    for path in sorted(status_dir.glob("status-rank*.json")):
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            statuses[int(raw["rank"])] = str(raw["status"])
        except (OSError, ValueError, KeyError):
            continue
    return statuses


def launcher_exit_code(agent_succeeded: bool, statuses: dict[int, str]) -> int:
    """Exit code for the container from torchrun's outcome and the workers' own reports.

    torchrun exits 1 for every worker failure, preemption included, and a rare gloo teardown
    abort can fail a run that already finished; the workers' status files disambiguate. A worker
    reports "preempted" or "complete" only after a barrier that follows the checkpoint commit,
    so one such report proves the checkpoint is committed even if torchrun killed the other
    ranks before they could write theirs.
    - agent succeeded -> 0;
    - any worker reported a failure, or nobody reported an outcome -> 1;
    - some worker preempted-after-checkpoint -> 75;
    - some worker completed (teardown abort after success) -> 0.
    """
    if agent_succeeded:
        return EXIT_SUCCESS
    values = set(statuses.values())
    if STATUS_FAILED in values:
        return EXIT_FAILURE
    if STATUS_PREEMPTED in values:
        return EXIT_PREEMPTED
    if STATUS_COMPLETE in values:
        return EXIT_SUCCESS
    return EXIT_FAILURE
