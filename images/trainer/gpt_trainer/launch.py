"""Container entrypoint: torchrun in-process, with exit codes a podFailurePolicy can act on.

``python -m gpt_trainer.launch [torchrun args] -m gpt_trainer.train [worker args]``

torchrun alone exits 1 for any worker failure, clean preemption included. This wrapper runs
``torch.distributed.run.main`` in-process (so it is PID 1 itself when started with exec form and
gets SIGTERM directly; torchrun's agent forwards it to the workers and waits
``--shutdown-timeout`` for them), then reads the status each worker wrote and exits
0 (success or already complete), 75 (preempted after a committed checkpoint) or 1 (failure).
Set torchrun's ``--shutdown-timeout`` below the pod's ``terminationGracePeriodSeconds`` and the
worker's ``--grace-s`` below that.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .exit_codes import STATUS_DIR_ENV, launcher_exit_code, read_statuses

log = logging.getLogger("gpt_trainer.launch")


def main(argv: list[str] | None = None) -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import main as torchrun_main

    # Workers inherit this through torchrun; a caller (or a test) may choose the directory.
    preset = os.environ.get(STATUS_DIR_ENV)
    status_dir = Path(preset) if preset else Path(tempfile.mkdtemp(prefix="gpt-trainer-status-"))
    status_dir.mkdir(parents=True, exist_ok=True)
    os.environ[STATUS_DIR_ENV] = str(status_dir)
    agent_succeeded = False
    try:
        torchrun_main(argv)
        agent_succeeded = True
    except SignalException as exc:
        log.warning("launcher got signal %s; workers were asked to checkpoint", exc.sigval)
    except ChildFailedError as exc:
        log.warning("worker failure: %s", {r: f.exitcode for r, f in exc.failures.items()})
    except SystemExit as exc:
        agent_succeeded = exc.code in (0, None)
    statuses = read_statuses(status_dir)
    code = launcher_exit_code(agent_succeeded, statuses)
    log.warning("workers reported %s -> exit %d", statuses, code)
    if not preset:
        shutil.rmtree(status_dir, ignore_errors=True)
    return code


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    sys.exit(main())
