"""Fleet-scale synth: the generated N-team stack is valid, synthesizes deterministically, and the
speed-ups synth applies to the SDK's per-resource work change nothing the engine would be told."""

from __future__ import annotations

import gc
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

import pytest
import yaml

from components import config as stack_config
from components.analysis.capacity import gpu_capacity
from policies.rules import all_policies
from synth import __main__ as synth_cli
from synth import harness, output, policy, scale
from synth.harness import load_stack_config, run_program

FILES = (
    "resources.json",
    "manifests.yaml",
    "helm-releases.yaml",
    "policy-report.json",
    "report.md",
)


def _parsed(project: Path) -> stack_config.StackConfig:
    _, config, _ = load_stack_config(scale.STACK, project)
    return stack_config.parse(stack_config.namespace_values(config))


@pytest.mark.parametrize("teams", [1, 3, pytest.param(200, marks=pytest.mark.scale)])
def test_generated_stack_is_a_valid_platform_stack_without_jobs(teams: int, tmp_path: Path) -> None:
    cfg = _parsed(scale.write_project(tmp_path, teams))
    assert [team.name for team in cfg.teams] == [f"team-{i:04d}" for i in range(teams)]
    assert cfg.training_jobs == []
    # Karpenter GPU pools grow with the teams, each within the policy pack's per-pool bound.
    limits = [pool.limits.gpus for pool in cfg.karpenter.pools if pool.is_gpu]
    assert limits and all(limit is not None and limit <= 256 for limit in limits)
    capacity = gpu_capacity(cfg)
    for team in cfg.teams:
        for entry in team.quota:
            assert (entry.gpu_class, entry.capacity_type) in capacity
    # Everything else is prod's (pool limits change only where the teams need more).
    prod = yaml.safe_load((harness.PROJECT_ROOT / "Pulumi.prod.yaml").read_text())["config"]
    generated = yaml.safe_load((tmp_path / "Pulumi.scale.yaml").read_text())["config"]
    changed = {key for key in prod.keys() | generated.keys() if prod.get(key) != generated.get(key)}
    # Prod declares no jobs of its own (its teams' job stacks do): only the teams differ, and
    # the node groups only by the reason no generated queue reaches them.
    assert "gpu-platform:trainingJobs" not in generated
    assert changed - {"gpu-platform:karpenter", "gpu-platform:nodeGroups"} == {"gpu-platform:teams"}
    for group in generated["gpu-platform:nodeGroups"]["gpu"]:
        group.pop("unqueuedReason", None)
    assert generated["gpu-platform:nodeGroups"] == prod["gpu-platform:nodeGroups"]


@pytest.mark.scale
def test_many_teams_shard_pools_over_the_policy_bound(tmp_path: Path) -> None:
    cfg = _parsed(scale.write_project(tmp_path, 200))
    names = [pool.name for pool in cfg.karpenter.pools]
    assert "kp-l4-spot-0" in names and "kp-l4-spot-1" in names and "kp-l4-spot" not in names


def test_few_teams_synthesizes_and_is_deterministic(tmp_path: Path) -> None:
    project = scale.write_project(tmp_path / "project", 3)
    outputs = []
    for run in ("a", "b"):
        out = tmp_path / run
        code = synth_cli.main(
            ["--project-dir", str(project), "--stack", scale.STACK, "--out", str(out)]
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


def _calls(work: Callable[[], Any]) -> tuple[int, Any]:
    """(Python function calls made by `work()`, its result): a measure of work that, unlike
    time, does not depend on the machine or on what else runs on it. The cyclic garbage
    collector is paused while it runs: a collection fires at a moment set by the whole test
    session's heap, and its weakref callbacks (thousands of `WeakSet._remove` calls for the
    SDK's resource sets) would be counted as work of whichever step it fell into."""
    count = 0

    def profile(_frame: FrameType, event: str, _arg: Any) -> None:
        nonlocal count
        if event == "call":
            count += 1

    gc.collect()
    gc.disable()
    sys.setprofile(profile)
    try:
        result = work()
    finally:
        sys.setprofile(None)
        gc.enable()
    return count, result


@pytest.mark.scale
def test_synth_work_grows_linearly_with_teams(tmp_path: Path) -> None:
    # Each phase's work per added team must not grow with the teams: a rule or report section
    # that scans every resource for every team would make the second step dearer than the first.
    sizes = (3, 9, 15)  # steps of 6: the same mix of the generator's three team shapes
    # Warm every phase once (imports, compiled regexes): one-time costs are no team's work.
    warm = scale.write_project(tmp_path / "warm", 1)
    warm_result = run_program(scale.STACK, root=warm)
    pack = all_policies()
    policy.evaluate(
        warm_result, pack, policy.load_config(policy.config_path(warm, scale.STACK), pack)
    )
    warm_result.policy_violations = []
    output.write(warm_result, tmp_path / "out-warm")
    work: dict[str, list[int]] = {"program": [], "policy": [], "output": []}
    resources = []
    for teams in sizes:
        project = scale.write_project(tmp_path / f"teams-{teams}", teams)
        calls, result = _calls(lambda: run_program(scale.STACK, root=project))  # noqa: B023
        work["program"].append(calls)
        resources.append(len(result.resources))
        pack = all_policies()
        pack_config = policy.load_config(policy.config_path(project, scale.STACK), pack)
        calls, violations = _calls(lambda: policy.evaluate(result, pack, pack_config))  # noqa: B023
        assert violations == []
        work["policy"].append(calls)
        result.policy_violations = []
        out = tmp_path / f"out-{teams}"
        work["output"].append(_calls(lambda: output.write(result, out))[0])  # noqa: B023
    assert resources[1] - resources[0] == resources[2] - resources[1] > 0
    for phase, counts in work.items():
        first, second = counts[1] - counts[0], counts[2] - counts[1]
        assert first > 0, phase
        assert second <= 1.05 * first, f"{phase}: {counts} grows faster than the teams"


@pytest.mark.parametrize(("imports_s", "expected"), [(2.0, 1), (4.0, 0)])
def test_the_scale_gate_is_relative_to_the_machines_sdk_imports(
    imports_s: float, expected: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 teams at 10 s CPU: 5x imports of 2 s fails a 3.75x bound, 2.5x imports of 4 s passes
    (what the CI gate computes, without running the synths)."""
    timings = [
        scale.Timing(teams=100, resources=2813, wall_s=10.0, cpu_s=10.0),
        scale.Timing(teams=200, resources=5415, wall_s=17.0, cpu_s=17.0),
    ]
    monkeypatch.setattr(scale, "measure", lambda sizes, runs: timings)
    monkeypatch.setattr(scale, "import_seconds", lambda runs: imports_s)
    argv = ["--teams", "100", "200", "--max-import-multiple", "3.75", "--max-ratio", "2.0"]
    assert scale.main(argv) == expected
