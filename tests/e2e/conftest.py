"""The real-engine tier's shared fixture: the engines' binaries, the vendored CRDs and node
shapes, loaded once per session (synth/engines, docs/real-engines.md); the tier skips, saying
why, without the binaries."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict

import pytest

from synth.engines import assets
from synth.engines.controlplane import stop_on_sigterm
from synth.engines.run import Cluster, ClusterRun, Toolkit, boot
from synth.harness import PROJECT_ROOT, SynthResult

#: Where the tier writes each group's record and, when a group disagrees, its processes' logs.
RECORDS = PROJECT_ROOT / "build" / "e2e"


@pytest.fixture(scope="session")
def kit() -> Toolkit:
    stop_on_sigterm()
    try:
        return Toolkit.load(assets.find(), log_root=RECORDS / "logs")
    except assets.MissingAssetsError as missing:
        pytest.skip(f"real engines not available: {missing}")


@contextmanager
def one_plane(
    kit: Toolkit, name: str, stack: SynthResult, described: str
) -> Iterator[tuple[Cluster, ClusterRun]]:
    """`stack` booted on a control plane of its own (a group's `name`, `described` in its
    record); the record is written to build/e2e/<name>.json when the group ends."""
    out = ClusterRun(name=name, stacks=[described])
    with kit.plane(name) as cp:
        booted = boot(cp, kit, [stack], region="us-east-1", out=out)
        out.acts = booted.driver.fleet.acts
        yield booted, out
    RECORDS.mkdir(parents=True, exist_ok=True)
    (RECORDS / f"{name}.json").write_text(json.dumps(asdict(out), indent=1, default=str))
