"""The namespace LimitRange as Kueue applies it (components/analysis/limit_range.py): the
refusal the real engines showed on the fleet's manager, reproduced here without them, and the
will-it-run rule that refuses a job the LimitRange would stop, naming its key."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.analysis import limit_range
from components.config import ConfigError, ContainerDefaults
from tests.conftest import config_error_test, stack_values

#: The LimitRange the fleet's manager rendered before issue #36: its default CPU limit (100m)
#: was below every training container's CPU request.
OLD_MANAGER = {
    "limits": [
        {
            "type": "Container",
            "defaultRequest": {"cpu": "10m", "memory": "16Mi"},
            "default": {"cpu": "100m", "memory": "64Mi"},
        }
    ]
}


def test_the_old_manager_limit_range_refuses_every_training_container() -> None:
    # eval-l4 (2 CPUs) and pretrain-7b (183 CPUs) as the fleet job stack renders them.
    for cpu, memory, gpus, efa in ((2, 12, 1, 0), (183, 1841, 8, 32)):
        container = limit_range.container_resources(cpu, memory, gpus, efa)
        refusals = limit_range.kueue_refusals([container], OLD_MANAGER)
        assert len(refusals) == 1
        assert f"requests of cpu ({cpu:g} > 100m)" in refusals[0]


def test_the_team_limit_range_admits_the_training_container() -> None:
    spec = limit_range.limit_range_spec(ContainerDefaults())
    assert spec["limits"][0]["default"] == {"memory": "16Gi"}  # no default CPU limit
    container = limit_range.container_resources(183, 1841, 8, 32)
    assert limit_range.kueue_refusals([container], spec) == []


def test_defaults_fill_only_what_the_container_leaves_out_then_limits_become_requests() -> None:
    spec = {
        "limits": [
            {
                "type": "Container",
                "default": {"cpu": "4", "memory": "8Gi"},
                "defaultRequest": {"cpu": "1"},
            },
            # A second LimitRange's defaults lose to the first's (Kueue's Summarize).
            {"type": "Container", "default": {"cpu": "64"}},
        ]
    }
    seen = limit_range.adjusted({"limits": {"memory": "2Gi"}}, spec)
    assert seen["limits"] == {"cpu": "4", "memory": "2Gi"}
    # defaultRequest first, then limits-to-requests: cpu takes the default request, not the limit.
    assert seen["requests"] == {"cpu": "1", "memory": "2Gi"}


@pytest.mark.parametrize(
    ("cpu_limit", "refused"), [("2", False), ("1999m", True)], ids=["at-limit", "just-over"]
)
def test_a_default_cpu_limit_refuses_a_container_requesting_more(
    cpu_limit: str, refused: bool
) -> None:
    spec = limit_range.limit_range_spec(ContainerDefaults(cpu_limit=cpu_limit))
    container = limit_range.container_resources(2, 12, 1, 0)
    assert bool(limit_range.kueue_refusals([container], spec)) is refused


@pytest.mark.parametrize(
    ("bounds", "value", "refused"),
    [
        ({"max": {"memory": "12Gi"}}, 12, False),
        ({"max": {"memory": "12Gi"}}, 13, True),
        ({"min": {"memory": "12Gi"}}, 12, False),
        ({"min": {"memory": "12Gi"}}, 11, True),
    ],
    ids=["max-at", "max-over", "min-at", "min-under"],
)
def test_container_max_and_min_bound_requests_and_limits(
    bounds: dict[str, Any], value: int, refused: bool
) -> None:
    spec = {"limits": [{"type": "Container", **bounds}]}
    container = limit_range.container_resources(1, value, 1, 0)
    assert bool(limit_range.kueue_refusals([container], spec)) is refused


def test_pod_items_are_not_container_defaults() -> None:
    spec = {"limits": [{"type": "Pod", "default": {"cpu": "100m"}}]}
    container = limit_range.container_resources(2, 12, 1, 0)
    assert limit_range.kueue_refusals([container], spec) == []


@pytest.mark.parametrize(
    ("defaults", "key"),
    [
        ({"memoryRequest": "32Gi", "memoryLimit": "16Gi"}, "memoryRequest"),
        ({"cpuRequest": "2", "cpuLimit": "1"}, "cpuRequest"),
    ],
)
def test_container_defaults_refuse_a_request_above_its_limit(
    defaults: dict[str, str], key: str
) -> None:
    with pytest.raises(ConfigError) as error:
        from components.config.load import parse

        values = copy.deepcopy(stack_values("dev"))
        raw = {k.split(":", 1)[1]: v for k, v in values.items() if k.startswith("gpu-platform:")}
        raw["teams"][0]["containerDefaults"] = defaults
        parse(raw)
    assert f"teams[0].containerDefaults.{key}" in str(error.value)


def _dev_raw() -> dict[str, Any]:
    return copy.deepcopy(stack_values("dev"))


def _cpu_limit_below_ddp_smoke(values: dict[str, Any]) -> None:
    # ddp-smoke (team research) asks for 2 CPUs per pod.
    team = next(t for t in values["gpu-platform:teams"] if t["name"] == "research")
    team["containerDefaults"] = {"cpuRequest": "500m", "cpuLimit": "1"}


INVALID = [
    (
        "team-cpu-limit-below-a-job",
        _cpu_limit_below_ddp_smoke,
        "gpu-platform:trainingJobs[0].cpu",
        "Kueue refuses the Workload",
    )
]

test_a_job_the_limit_range_stops_exits_2_naming_the_key = config_error_test(INVALID, _dev_raw)


def test_the_team_limit_range_word_for_word() -> None:
    """What the API server gets: defaults for containers that declare nothing, a default CPU
    limit only when the platform sets one."""
    assert limit_range.limit_range_spec(ContainerDefaults()) == {
        "limits": [
            {
                "type": "Container",
                "defaultRequest": {"cpu": "1", "memory": "4Gi"},
                "default": {"memory": "16Gi"},
            }
        ]
    }
    capped = limit_range.limit_range_spec(ContainerDefaults(cpu_limit="2"))
    assert capped["limits"][0]["default"] == {"cpu": "2", "memory": "16Gi"}


def test_a_refusal_names_every_request_over_its_limit() -> None:
    container = {
        "requests": {"cpu": "2", "memory": "2Gi"},
        "limits": {"cpu": "1", "memory": "1Gi"},
    }
    assert limit_range.kueue_refusals([container], {"limits": []}) == [
        "containers[0]: requests of cpu, memory (2 > 1, 2Gi > 1Gi) exceed the limits the "
        "namespace LimitRange gives them"
    ]


@pytest.mark.parametrize(
    ("bound", "asked", "refusal"),
    [
        ({"max": {"cpu": "500m"}}, "1", "containers[0]: cpu above the LimitRange max 500m"),
        ({"min": {"cpu": "100m"}}, "50m", "containers[0]: cpu below the LimitRange min 100m"),
    ],
)
def test_a_max_or_min_bounds_only_what_a_container_asks_for(
    bound: dict[str, Any], asked: str, refusal: str
) -> None:
    """A container that declares no CPU at all (and no default gives it one) is within any
    CPU max, even one under a core, and any min."""
    spec = {"limits": [{"type": "Container", **bound}]}
    container = {"requests": {"memory": "1Gi"}, "limits": {"memory": "1Gi"}}
    assert limit_range.kueue_refusals([container], spec) == []
    asking = {"requests": {"cpu": asked}, "limits": {}}
    assert limit_range.kueue_refusals([asking], spec) == [refusal]


def test_the_training_container_word_for_word() -> None:
    assert limit_range.container_resources(2.0, 12, 1, 0) == {
        "requests": {"cpu": "2", "memory": "12Gi", "nvidia.com/gpu": "1"},
        "limits": {"memory": "12Gi", "nvidia.com/gpu": "1"},
    }
    with_efa = limit_range.container_resources(183.0, 1841, 8, 32)
    assert with_efa["requests"]["vpc.amazonaws.com/efa"] == "32"
    assert with_efa["limits"]["vpc.amazonaws.com/efa"] == "32"


def test_the_summary_skips_pod_items_and_keeps_the_tightest_bound_first_seen() -> None:
    """A `type: Pod` item is passed over, not the end of the list; of equal bounds the first
    spelling stays; the lowest max and the highest min win."""
    spec = {
        "limits": [
            {"type": "Pod", "max": {"cpu": "64"}},
            {"type": "Container", "default": {"memory": "1Gi"}, "max": {"cpu": "1"}},
            {"type": "Container", "max": {"cpu": "1000m"}, "min": {"cpu": "10m"}},
            {"type": "Container", "max": {"cpu": "2"}, "min": {"cpu": "10m"}},
            {"type": "Container", "min": {"cpu": "0.01"}},
        ]
    }
    summary = limit_range._summary(spec)
    assert summary["default"] == {"memory": "1Gi"}
    assert summary["max"] == {"cpu": "1"}
    assert summary["min"] == {"cpu": "10m"}
    tighter = {"limits": [*spec["limits"], {"type": "Container", "max": {"cpu": "500m"}}]}
    assert limit_range._summary(tighter)["max"] == {"cpu": "500m"}
    higher = {"limits": [*spec["limits"], {"type": "Container", "min": {"cpu": "20m"}}]}
    assert limit_range._summary(higher)["min"] == {"cpu": "20m"}
