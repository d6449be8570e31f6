"""Karpenter GPU classes: on-demand alone is valid, spot needs an on-demand fallback."""

from __future__ import annotations

import copy

import pytest

from components.config import KarpenterConfig
from tests.conftest import stack_values


def test_a_gpu_class_may_be_on_demand_only_but_spot_needs_an_on_demand_fallback() -> None:
    # p5 has one H100 type: no spot pool of three types exists, on-demand alone must be valid.
    cfg = stack_values("prod")["gpu-platform:karpenter"]
    parsed = KarpenterConfig.model_validate(cfg)
    h100 = [p for p in parsed.pools if p.resolved_gpu_class == "h100-x8"]
    assert [p.capacity_type for p in h100] == ["on-demand"]
    spot_only = copy.deepcopy(cfg)
    spot_only["pools"] = [p for p in spot_only["pools"] if p["name"] != "kp-l40s-od"]
    with pytest.raises(ValueError, match="a spot pool and an on-demand pool"):
        KarpenterConfig.model_validate(spot_only)
