"""Puts ``workloads/trainer`` (the gpt_trainer package) and this directory on sys.path and
registers the ``slow`` marker used by the multi-process tests."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TRAINER_ROOT = HERE.parents[1] / "workloads" / "trainer"

for path in (TRAINER_ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: multi-process trainer runs (torchrun, gloo, CPU)")
