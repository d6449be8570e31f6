"""Puts ``images/trainer`` (the gpt_trainer package) and this directory on sys.path,
and gives the multi-process tests (marked ``slow``, pyproject.toml) private temp dirs.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
TRAINER_ROOT = HERE.parents[1] / "images" / "trainer"

for path in (TRAINER_ROOT, HERE):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))


@pytest.fixture
def tmp_path() -> Iterator[Path]:
    """A temp dir outside pytest's shared ``/tmp/pytest-of-<user>``: pytest prunes all but the
    three newest base dirs there, so a concurrent pytest run on the same machine can delete a
    checkpoint dir while a slow test still uses it."""
    path = Path(tempfile.mkdtemp(prefix="gpt-trainer-test-"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def token_data() -> Iterator[Path]:
    """Token shards prepared once per session by the real data-prep command (small shards so
    the dataset spans several of them)."""
    from gpt_trainer.prep_data import prepare
    from trainer_harness import write_corpus

    root = Path(tempfile.mkdtemp(prefix="gpt-trainer-data-"))
    corpus = write_corpus(root / "corpus")
    prepare([corpus], str(root / "shards"), vocab_size=512, shard_tokens=3000)
    yield root / "shards"
    shutil.rmtree(root, ignore_errors=True)
