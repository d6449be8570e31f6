"""analysis.readiness: Kueue's waitForPodsReady timeouts are one derived figure - the longest
path from admission to Ready pods of any GPU source a queued job can land on (provisioner's own
bound + image pull + margin) - rendered into Kueue's configuration, checked by the config check
and, per job, by "will it run"."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from components import catalog
from components import config as stack_config
from components.analysis import readiness
from components.analysis.facts import build
from synth.harness import SynthResult
from tests.analysis.judged import verdicts_for
from tests.conftest import karpenter_gpu_overrides, stack_values

KUEUE = "kubernetes:helm.sh/v3:Release"


def _config(values: dict[str, Any]) -> stack_config.StackConfig:
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return stack_config.parse(stack_config.namespace_values(raw))


def _kueue_ready(result: SynthResult) -> dict[str, Any]:
    (release,) = [r for r in result.of_type(KUEUE) if r.inputs["name"] == "kueue"]
    text = release.inputs["values"]["managerConfig"]["controllerManagerConfigYaml"]
    ready: dict[str, Any] = yaml.safe_load(text)["waitForPodsReady"]
    return ready


def test_durations() -> None:
    assert readiness.duration_s("15m") == 900
    assert readiness.duration_s("1h30m5s") == 5405
    assert readiness.duration_s("0s") == 0
    assert readiness.minutes(1085) == "19m" and readiness.minutes(60) == "1m"


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_kueue_waits_longer_than_the_autoscaler_and_karpenter_give_a_node(
    stack: str, request: pytest.FixtureRequest
) -> None:
    """Kueue's clock starts at admission; on a node-group flavor that is when the autoscaler
    raised the group (best-effort-atomic on AWS), and it still waits 15m for the node to join.
    A 10m timeout evicted gangs whose nodes were still coming."""
    result: SynthResult = request.getfixturevalue(stack)
    cfg = result.config
    figures = build(cfg).pods_ready
    ready = _kueue_ready(result)
    assert (ready["timeout"], ready["recoveryTimeout"]) == (figures.timeout, figures.timeout)
    provision = readiness.duration_s(cfg.cluster_autoscaler.max_node_provision_time)
    assert figures.timeout_s >= figures.required_s > provision
    assert figures.timeout_s > readiness.KARPENTER_REGISTRATION_TIMEOUT_S
    # The longest path is a source a team's quota reaches, with the default image's pull.
    assert figures.longest is not None
    assert figures.longest.source in {
        s.name for s in readiness.queued_sources(cfg, build(cfg).sources)
    }
    assert figures.longest.pull_s > 0 and figures.longest.image_gib == cfg.training.image_size_gib


def test_a_karpenter_only_stack_is_bounded_by_karpenters_registration_timeout() -> None:
    values = {**stack_values("prod"), **karpenter_gpu_overrides()}
    cfg = _config(values)
    figures = build(cfg).pods_ready
    assert figures.longest is not None
    assert figures.longest.provisioner == "Karpenter batch + registration timeout"
    assert figures.longest.provision_s == 10 + 15 * 60


def test_managed_groups_pull_without_soci_at_their_disk_throughput(dev: SynthResult) -> None:
    cfg = dev.config
    (group,) = [s for s in build(cfg).sources if s.name == "ng-l4-spot"]
    rate = readiness.pull_rate(cfg, group.kind, group.name, "g6.xlarge")
    assert not rate.parallel_pull
    assert rate.mibps == min(readiness.PULL_MIBPS, cfg.node_groups.gpu[0].disk_throughput_mibps)


@pytest.mark.parametrize("key", ["timeout", "recoveryTimeout"])
def test_a_configured_timeout_shorter_than_the_path_is_refused(
    key: str, expect_config_error: Callable[[dict[str, Any], str, str], None]
) -> None:
    values = stack_values("dev")
    values["gpu-platform:scheduling"] = {"waitForPodsReady": {key: "10m"}}
    expect_config_error(
        values, f"gpu-platform:scheduling.waitForPodsReady.{key}", "at least 19m (unset derives it)"
    )


def test_a_longer_timeout_or_no_recovery_check_is_kept() -> None:
    values = stack_values("dev")
    values["gpu-platform:scheduling"] = {
        "waitForPodsReady": {"timeout": "30m", "recoveryTimeout": "0s"}
    }
    cfg = _config(values)
    assert readiness.check_pods_ready(cfg, build(cfg).sources) == []
    figures = build(cfg).pods_ready
    assert (figures.timeout, figures.recovery_timeout) == ("30m", "0s")


def test_an_autoscaler_that_gives_up_before_a_p5_boots_is_refused(
    expect_config_error: Callable[[dict[str, Any], str, str], None],
) -> None:
    values = stack_values("prod")
    values["gpu-platform:clusterAutoscaler"] = {"maxNodeProvisionTime": "5m"}
    expect_config_error(
        values, "gpu-platform:clusterAutoscaler.maxNodeProvisionTime", "p5.48xlarge node"
    )


def test_a_job_whose_image_outlasts_the_timeout_is_named(
    expect_config_error: Callable[[dict[str, Any], str, str], None],
) -> None:
    values = stack_values("dev")
    jobs = copy.deepcopy(values["gpu-platform:trainingJobs"])
    index = next(i for i, j in enumerate(jobs) if j["name"] == "ddp-l4-nodegroup")
    jobs[index]["imageSizeGib"] = 60
    values["gpu-platform:trainingJobs"] = jobs
    cfg = _config(
        {**values, "gpu-platform:training": {"requireImageDigest": False, "imageSizeGib": 60}}
    )
    # Compliant: the platform's default image size covers it, and the timeout grows with it.
    (verdict,) = [v for v in verdicts_for(cfg) if v.key == f"trainingJobs[{index}]"]
    assert verdict.runnable and "waitForPodsReady.timeout" in verdict.ready
    assert build(cfg).pods_ready.timeout_s >= 60 * 1024 // readiness.PULL_MIBPS
    expect_config_error(
        values, f"gpu-platform:trainingJobs[{index}].imageSizeGib", "evict and requeue"
    )


def test_a_system_node_pulls_at_containerds_default_onto_its_gp3_root() -> None:
    disk = catalog.SYSTEM_DISK_THROUGHPUT_MIBPS
    assert readiness.system_pull_rate() == readiness.PullRate(
        min(readiness.PULL_MIBPS, disk), f"gp3 {disk} MiB/s", False
    )
