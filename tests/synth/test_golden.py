"""Synth output is exactly what the golden hashes record (tests/golden/<stack>.sha256): a
refactor changes no byte; a deliberate change rewrites them with
`python -m synth.golden --write`."""

from __future__ import annotations

import pytest

from synth import golden
from synth.harness import SynthResult


@pytest.mark.parametrize("stack", golden.STACKS)
def test_synth_output_matches_the_golden_hashes(stack: str, request: pytest.FixtureRequest) -> None:
    result: SynthResult = request.getfixturevalue(stack.replace("-", "_"))
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


@pytest.mark.parametrize("stack", golden.JOB_STACKS)
def test_job_stack_output_matches_the_golden_hashes(
    stack: str, request: pytest.FixtureRequest
) -> None:
    """Every team job stack is pinned too (the fixtures of tests/jobs/conftest.py synthesize
    it against the session's platform synth, as `python -m synth --project jobs` does)."""
    result: SynthResult = request.getfixturevalue(stack.replace("-", "_"))
    found = golden.digests(result, jobs=True)
    assert found == golden.read(stack, jobs=True), (
        f"job stack {stack}: synth output changed; if that is intended, run "
        "`python -m synth.golden --write` and commit tests/golden/"
    )


def test_every_job_stack_is_pinned() -> None:
    assert set(golden.JOB_STACKS) == {
        "pretrain-fleet",
        "pretrain-prod",
        "research-dev",
        "research-prod",
    }
    for stack in golden.JOB_STACKS:
        assert golden.golden_path(stack, jobs=True).exists(), stack


@pytest.mark.parametrize("stack", golden.FLEET_STACKS)
def test_fleet_output_matches_the_golden_hashes(stack: str, request: pytest.FixtureRequest) -> None:
    """Every fleet manager is pinned (over the session's worker synths, as `python -m synth
    --project fleet` synthesizes them first)."""
    result: SynthResult = request.getfixturevalue(f"fleet_{stack}")
    found = golden.digests(result, project="fleet")
    assert found == golden.read(stack, project="fleet"), (
        f"fleet {stack}: synth output changed; if that is intended, run "
        "`python -m synth.golden --write` and commit tests/golden/"
    )


def test_every_stack_is_pinned() -> None:
    assert set(golden.STACKS) == {"dev", "prod", "prod-use1", "prod-usw2"}
    assert set(golden.FLEET_STACKS) == {"prod"}
    for stack in golden.STACKS:
        assert golden.golden_path(stack).exists(), stack
    for stack in golden.FLEET_STACKS:
        assert golden.golden_path(stack, project="fleet").exists(), stack
