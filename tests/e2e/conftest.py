"""The real-engine tier's shared fixture: the engines' binaries, the vendored CRDs and node
shapes, loaded once per session (synth/engines, docs/real-engines.md); the tier skips, saying
why, without the binaries."""

from __future__ import annotations

import pytest

from synth.engines import assets
from synth.engines.controlplane import stop_on_sigterm
from synth.engines.run import Toolkit
from synth.harness import PROJECT_ROOT

#: Where the tier writes each group's record and, when a group disagrees, its processes' logs.
RECORDS = PROJECT_ROOT / "build" / "e2e"


@pytest.fixture(scope="session")
def kit() -> Toolkit:
    stop_on_sigterm()
    try:
        return Toolkit.load(assets.find(), log_root=RECORDS / "logs")
    except assets.MissingAssetsError as missing:
        pytest.skip(f"real engines not available: {missing}")
