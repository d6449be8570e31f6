"""analysis.nccl: the NCCL test's pods are sized from the node types that can host them, name the
type they really land on, and a target no type can host is refused (it would stay Pending)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from components import catalog
from components import config as stack_config
from components.analysis import nccl
from components.analysis.facts import build
from components.analysis.nodes import Allocatable, NodeSource
from components.analysis.volcano import validation_guarantee
from tests.analysis.judged import validation_for
from tests.conftest import stack_values


def _config(values: dict[str, Any]) -> stack_config.StackConfig:
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return stack_config.parse(stack_config.namespace_values(raw))


def _source(cfg: stack_config.StackConfig, name: str) -> NodeSource:
    (source,) = [s for s in build(cfg).sources if s.name == name]
    return source


def test_dev_nccl_pods_fit_the_g5_xlarge_they_are_named_after() -> None:
    # The real kube-scheduler said `Insufficient memory` for 16 GiB on dev's g5.xlarge.
    cfg = _config(stack_values("dev"))
    host = build(cfg).nccl_host
    assert host is not None
    assert (host.source, host.instance_type) == ("kp-a10g-od", "g5.xlarge")
    allocatable = _source(cfg, "kp-a10g-od").allocatable["g5.xlarge"]
    assert host.memory_gib <= allocatable.memory_gib < catalog.instance("g5.xlarge").memory_gib
    assert host.cpu <= allocatable.cpu and host.gpus == allocatable.gpus == 1
    # The validation queue guarantees what the two pods request there.
    guarantee = validation_guarantee(cfg, host)
    assert guarantee["memory"] == 2 * host.memory_gib
    assert guarantee[catalog.GPU_RESOURCE] == 2


def test_p5_pods_keep_the_tests_figure_and_every_efa_device() -> None:
    values = stack_values("prod")
    values["gpu-platform:validation"] = {**values["gpu-platform:validation"], "enabled": True}
    host = build(_config(values)).nccl_host
    assert host is not None
    assert host.instance_type == "p5.48xlarge"
    assert (host.memory_gib, host.efa_devices, host.gpus) == (catalog.NCCL_POD_MEMORY_GIB, 32, 8)


def test_the_host_is_the_smallest_type_that_holds_a_pod() -> None:
    cfg = _config(stack_values("dev"))
    source = _source(cfg, "kp-a10g-od")
    tiny = Allocatable(cpu=1.0, memory_gib=3, gpus=1, efa=0)
    # A smallest type too small for a pod: the next one hosts it, and is named.
    squeezed = dataclasses.replace(
        source, allocatable={"g5.xlarge": tiny, "g5.2xlarge": source.allocatable["g5.2xlarge"]}
    )
    host = nccl.host(squeezed)
    assert host is not None and host.instance_type == "g5.2xlarge"


def test_a_target_no_type_can_host_is_refused_naming_the_pool() -> None:
    cfg = _config(stack_values("dev"))
    source = _source(cfg, "kp-a10g-od")
    tiny = Allocatable(cpu=1.0, memory_gib=3, gpus=1, efa=0)
    unusable = dataclasses.replace(source, allocatable=dict.fromkeys(source.allocatable, tiny))
    assert nccl.host(unusable) is None
    sources = [unusable if s.name == source.name else s for s in build(cfg).sources]
    (verdict,) = [v for v in validation_for(cfg, sources) if v.key == "validation.nccl"]
    ((_key, value, allowed),) = [p for p in verdict.problems if p[0] == "validation.nccl.pool"]
    assert value == "kp-a10g-od"
    assert "holds one NCCL test pod" in allowed and "stay Pending" in allowed
    # The stack's own sources host it: no such problem.
    (ok,) = [v for v in validation_for(cfg) if v.key == "validation.nccl"]
    assert ok.runnable and "g5.xlarge" in ok.placement
