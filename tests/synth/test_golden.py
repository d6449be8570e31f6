"""Synth output is exactly what the golden hashes record (tests/golden/<stack>.sha256): a
refactor changes no byte; a deliberate change rewrites them with
`python -m synth.golden --write`."""

from __future__ import annotations

import pytest

from synth import golden
from synth.harness import SynthResult


@pytest.mark.parametrize("stack", golden.STACKS)
def test_synth_output_matches_the_golden_hashes(stack: str, request: pytest.FixtureRequest) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    found = golden.digests(result)
    assert set(found) == {
        "resources.json",
        "manifests.yaml",
        "helm-releases.yaml",
        "policy-report.json",
        "report.md",
    }
    assert found == golden.read(stack), (
        "synth output changed; if that is intended, run `python -m synth.golden --write` "
        "and commit tests/golden/"
    )


def test_a_changed_byte_changes_the_digest(dev: SynthResult) -> None:
    before = golden.digests(dev)
    dev.resources[0].inputs["__golden_probe__"] = 1
    try:
        assert golden.digests(dev)["resources.json"] != before["resources.json"]
    finally:
        del dev.resources[0].inputs["__golden_probe__"]
