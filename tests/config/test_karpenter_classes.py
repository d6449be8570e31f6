"""Karpenter GPU classes: every class needs an on-demand pool (the fallback); p5 has no spot."""

from __future__ import annotations

import copy

import pytest

from components.config import KarpenterConfig
from tests.conftest import stack_values


def test_a_gpu_class_may_be_on_demand_only_but_spot_needs_an_on_demand_fallback() -> None:
    # p5 has one H100 type: no spot pool of three types exists; reserved + on-demand is valid.
    cfg = stack_values("prod")["gpu-platform:karpenter"]
    parsed = KarpenterConfig.model_validate(cfg)
    h100 = [p for p in parsed.pools if p.resolved_gpu_class == "h100-x8"]
    assert [p.capacity_type for p in h100] == ["reserved", "on-demand"]
    spot_only = copy.deepcopy(cfg)
    spot_only["pools"] = [p for p in spot_only["pools"] if p["name"] != "kp-l40s-od"]
    with pytest.raises(ValueError, match="every GPU class needs an on-demand pool"):
        KarpenterConfig.model_validate(spot_only)
