"""analysis.quota: GPU node sources no team's queue reaches (capacity paid for that no queued job
can land on) are refused unless they say what they are for, and the report says it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components import config as stack_config
from components.analysis.facts import build
from components.analysis.quota import unreachable_sources, worker_quota
from synth import __main__ as synth_cli
from tests.conftest import stack_values


def _config(values: dict[str, Any]) -> stack_config.StackConfig:
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return stack_config.parse(stack_config.namespace_values(raw))


def _without_l40s_quota(values: dict[str, Any]) -> dict[str, Any]:
    """Prod as it was before research got the L40S flavors: no team's quota lists them."""
    values = copy.deepcopy(values)
    for team in values["gpu-platform:teams"]:
        team["quota"] = [q for q in team["quota"] if q["gpuClass"] != "l40s-x1"]
    return values


def test_every_gpu_source_of_the_committed_stacks_is_a_flavor_of_some_team_queue() -> None:
    for stack in ("dev", "prod"):
        cfg = _config(stack_values(stack))
        sources = build(cfg).sources
        assert sources
        assert unreachable_sources(cfg, sources) == []
    # Prod's L40S capacity is research's fine-tuning quota: the spot and on-demand groups.
    prod = _config(stack_values("prod"))
    (research,) = [t for t in prod.teams if t.name == "research"]
    assert {(q.gpu_class, q.capacity_type) for q in research.quota} >= {
        ("l40s-x1", "spot"),
        ("l40s-x1", "on-demand"),
    }


@pytest.mark.parametrize(
    ("path", "allowed"),
    [
        ("gpu-platform:nodeGroups.gpu[1].unqueuedReason", "no ClusterQueue offers flavor"),
        ("gpu-platform:nodeGroups.gpu[2].unqueuedReason", "l40s-x1-on-demand"),
    ],
)
def test_a_gpu_source_no_team_queue_reaches_is_named(
    path: str,
    allowed: str,
    expect_config_error: Callable[[dict[str, Any], str, str], None],
) -> None:
    values = _without_l40s_quota(stack_values("prod"))
    expect_config_error(values, path, allowed)


def test_an_unqueued_source_with_a_reason_is_allowed_and_reported(
    make_stack: Callable[[dict[str, Any]], Path],
) -> None:
    values = _without_l40s_quota(stack_values("prod"))
    reason = "NCCL and smoke validation of the L40S AMI before teams get quota"
    values["gpu-platform:nodeGroups"]["gpu"][1]["unqueuedReason"] = reason
    values["gpu-platform:nodeGroups"]["gpu"][2]["unqueuedReason"] = reason
    project = make_stack(values)
    assert synth_cli.main(["--stack", "t", "--project-dir", str(project)]) == synth_cli.EXIT_OK
    report = (project / "build" / "t" / "report.md").read_text()
    assert f"- `ng-l40s-spot` (nodeGroups.gpu[1]): {reason}" in report
    assert f"- `ng-l40s-od` (nodeGroups.gpu[2]): {reason}" in report


def _team_with(gpus: dict[str, int]) -> stack_config.TeamConfig:
    quota = [
        {"gpuClass": "l4-x1", "capacityType": capacity, "gpus": n, "cpu": 8, "memoryGib": 32}
        for capacity, n in gpus.items()
    ]
    return stack_config.TeamConfig.model_validate(
        {
            "name": "research",
            "namespace": "team-research",
            "group": "gpu-platform:team-research",
            "datasetPrefix": "research",
            "quota": quota,
            "limits": {"gpus": 64, "cpu": 512, "memoryGib": 2048},
        }
    )


def test_worker_quota_holds_each_workers_term_of_the_managers_sum() -> None:
    """A fleet's manager quota per flavor is the workers' sum (analysis/fleet.py
    manager_teams); worker_quota keeps the terms, in the workers' order, 0 where a worker
    has none of the flavor."""
    manager = _team_with({"spot": 12, "on-demand": 4})
    west, east = _team_with({"spot": 8}), _team_with({"spot": 4, "on-demand": 4})
    found = worker_quota([manager], [("usw2", [west]), ("use1", [east])])
    assert found == {
        ("research", "l4-x1-spot"): (("usw2", 8), ("use1", 4)),
        ("research", "l4-x1-on-demand"): (("usw2", 0), ("use1", 4)),
    }
