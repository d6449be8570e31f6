"""Fleet-scale synth: the generated N-team stack is valid, synthesizes deterministically, and the
speed-ups synth applies to the SDK's per-resource work change nothing the engine would be told."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import config as stack_config
from synth import __main__ as synth_cli
from synth import fleet, harness
from synth.harness import load_stack_config, run_program

FILES = (
    "resources.json",
    "manifests.yaml",
    "helm-releases.yaml",
    "policy-report.json",
    "report.md",
)


def _parsed(project: Path) -> stack_config.StackConfig:
    _, config, _ = load_stack_config(fleet.STACK, project)
    return stack_config.parse(stack_config.namespace_values(config))


@pytest.mark.parametrize("teams", [1, 3, 200])
def test_generated_fleet_is_a_valid_platform_stack_without_jobs(teams: int, tmp_path: Path) -> None:
    cfg = _parsed(fleet.write_project(tmp_path, teams))
    assert [team.name for team in cfg.teams] == [f"team-{i:04d}" for i in range(teams)]
    assert cfg.training_jobs == []
    # Karpenter GPU pools grow with the fleet, each within the policy pack's per-pool bound.
    limits = [pool.limits.gpus for pool in cfg.karpenter.pools if pool.is_gpu]
    assert limits and all(limit is not None and limit <= 256 for limit in limits)
    capacity = stack_config.gpu_capacity(cfg)
    for team in cfg.teams:
        for entry in team.quota:
            assert (entry.gpu_class, entry.capacity_type) in capacity
    # Everything else is prod's (pool limits change only where the teams need more).
    prod = yaml.safe_load((harness.PROJECT_ROOT / "Pulumi.prod.yaml").read_text())["config"]
    generated = yaml.safe_load((tmp_path / "Pulumi.fleet.yaml").read_text())["config"]
    changed = {key for key in prod.keys() | generated.keys() if prod.get(key) != generated.get(key)}
    assert changed - {"gpu-platform:karpenter"} == {
        "gpu-platform:teams",
        "gpu-platform:trainingJobs",
    }


def test_large_fleet_shards_pools_over_the_policy_bound(tmp_path: Path) -> None:
    cfg = _parsed(fleet.write_project(tmp_path, 200))
    names = [pool.name for pool in cfg.karpenter.pools]
    assert "kp-l4-spot-0" in names and "kp-l4-spot-1" in names and "kp-l4-spot" not in names


def test_small_fleet_synthesizes_and_is_deterministic(tmp_path: Path) -> None:
    project = fleet.write_project(tmp_path / "project", 3)
    outputs = []
    for run in ("a", "b"):
        out = tmp_path / run
        code = synth_cli.main(
            ["--project-dir", str(project), "--stack", fleet.STACK, "--out", str(out)]
        )
        assert code == synth_cli.EXIT_OK
        outputs.append({name: (out / name).read_bytes() for name in FILES})
    assert outputs[0] == outputs[1]
    manifests = list(yaml.safe_load_all(outputs[0]["manifests.yaml"]))
    namespaces = {
        m["metadata"]["name"]
        for m in manifests
        if m["kind"] == "Namespace" and m["metadata"]["name"].startswith("team-")
    }
    assert namespaces == {"team-0000", "team-0001", "team-0002"}


@pytest.fixture
def recorded_requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[Any, ...]]]:
    """What the monitor receives: (type, name, stack trace, source position) per registration."""
    requests: list[tuple[Any, ...]] = []
    register = harness.CapturingMonitor.RegisterResource

    def recording(self: harness.CapturingMonitor, request: Any) -> Any:
        requests.append(
            (
                request.type,
                request.name,
                request.stackTrace.SerializeToString(deterministic=True),
                request.sourcePosition.SerializeToString(deterministic=True),
            )
        )
        return register(self, request)

    monkeypatch.setattr(harness.CapturingMonitor, "RegisterResource", recording)
    yield requests


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_traces_are_the_ones_the_sdk_captures(
    stack: str, recorded_requests: list[tuple[Any, ...]]
) -> None:
    runs = []
    for sdk_stack_traces in (True, False):
        # One call site for both runs: the test's own frame is part of every trace.
        run_program(stack, sdk_stack_traces=sdk_stack_traces)
        # The root Stack resource is registered once per process, by whichever run came first.
        runs.append(sorted(r for r in recorded_requests if r[0] != "pulumi:pulumi:Stack"))
        recorded_requests.clear()
    by_sdk, by_synth = runs
    assert len(by_sdk) > 100
    assert all(trace for _, _, trace, _ in by_sdk), "every registration carries a stack trace"
    assert by_synth == by_sdk
