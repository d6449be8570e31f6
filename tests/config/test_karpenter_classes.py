"""Karpenter GPU classes: every class needs an on-demand pool (the fallback); p5 has no spot."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from components import config as stack_config
from tests.conftest import stack_values


def test_a_gpu_class_may_be_on_demand_only_but_spot_needs_an_on_demand_fallback() -> None:
    # p5 has one H100 type: no spot pool of three types exists; reserved + on-demand is valid,
    # the on-demand side here a managed node group (ng-h100-od).
    values = stack_values("prod")
    parsed = stack_config.parse(values_of(values))
    h100 = [p for p in parsed.karpenter.pools if p.resolved_gpu_class == "h100-x8"]
    assert [p.capacity_type for p in h100] == ["reserved"]
    assert [g.capacity_type for g in parsed.node_groups.gpu if g.gpu_class == "h100-x8"] == [
        "on-demand"
    ]
    spot_only = copy.deepcopy(values)
    pools = spot_only["gpu-platform:karpenter"]["pools"]
    spot_only["gpu-platform:karpenter"]["pools"] = [p for p in pools if p["name"] != "kp-l40s-od"]
    spot_only["gpu-platform:nodeGroups"]["gpu"] = [
        g
        for g in spot_only["gpu-platform:nodeGroups"]["gpu"]
        if g["name"] not in ("ng-l40s-spot", "ng-l40s-od")
    ]
    spot_only["gpu-platform:karpenter"]["pools"].append(
        {
            "name": "kp-l40s-spot",
            "gpuClass": "l40s-x1",
            "capacityType": "spot",
            "limits": {"gpus": 8},
        }
    )
    with pytest.raises(
        stack_config.ConfigError, match="every GPU class needs an on-demand pool or node group"
    ):
        stack_config.parse(values_of(spot_only))
    # A Karpenter class whose on-demand fallback is a node group is fine: drop the H100 group
    # and the class has no fallback.
    no_group = copy.deepcopy(values)
    no_group["gpu-platform:nodeGroups"]["gpu"] = [
        g for g in no_group["gpu-platform:nodeGroups"]["gpu"] if g["name"] != "ng-h100-od"
    ]
    no_group["gpu-platform:validation"]["nccl"]["pool"] = "kp-h100-reserved"
    with pytest.raises(stack_config.ConfigError, match=r'karpenter\.pools: got "h100-x8"'):
        stack_config.parse(values_of(no_group))


def values_of(values: dict[str, Any]) -> dict[str, Any]:
    """`gpu-platform:` stack values as the config model takes them."""
    return stack_config.namespace_values(
        {k: json.dumps(v) if not isinstance(v, str) else v for k, v in values.items()}
    )
