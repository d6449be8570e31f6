"""Validation jobs: per-pool smoke Jobs and the NCCL test, GPU nodes only, images by digest."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components import catalog
from components.config import ValidationConfig
from components.platform import validation
from synth import __main__ as synth_cli
from synth.harness import SynthResult
from tests.conftest import stack_values

JOB = "kubernetes:batch/v1:Job"


def _jobs(result: SynthResult) -> list[Any]:
    """The validation Jobs (training jobs are batch Jobs too, in team namespaces)."""
    return [
        j for j in result.of_type(JOB) if j.inputs["metadata"].get("namespace") == "gpu-validation"
    ]


def test_dev_has_a_smoke_job_per_gpu_pool_and_an_nccl_job(dev: SynthResult) -> None:
    jobs = _jobs(dev)
    assert jobs
    names = {j.inputs["metadata"]["name"] for j in jobs}
    # One smoke Job per GPU pool (dev's GPU capacity is all Karpenter's); NCCL on the
    # on-demand pool the stack names.
    assert names == {
        "gpu-smoke-kp-a10g-spot",
        "gpu-smoke-kp-a10g-od",
        "nccl-allreduce-kp-a10g-od",
    }


def test_prod_has_no_validation_jobs_by_config(prod: SynthResult) -> None:
    assert _jobs(prod) == []


def test_jobs_land_only_on_gpu_nodes_with_digest_images(dev: SynthResult) -> None:
    # Node labels of every pool as deployed: managed node groups and Karpenter NodePools.
    pools = {
        g.inputs["labels"][catalog.LABEL_NODE_POOL]: (g.inputs["labels"], bool(g.inputs["taints"]))
        for g in dev.of_type("eks:index:ManagedNodeGroup")
    }
    for nodepool in dev.of_type("kubernetes:karpenter.sh/v1:NodePool"):
        template = nodepool.inputs["spec"]["template"]
        labels = template["metadata"]["labels"]
        pools[labels[catalog.LABEL_NODE_POOL]] = (labels, bool(template["spec"].get("taints")))
    for job in _jobs(dev):
        pod = job.inputs["spec"]["template"]["spec"]
        selector = pod["nodeSelector"]
        assert selector[catalog.LABEL_GPU_VENDOR] == "nvidia"
        # The selector matches the labels the pool's nodes really carry, and no CPU pool.
        labels, _ = pools[selector[catalog.LABEL_NODE_POOL]]
        assert selector.items() <= labels.items()
        cpu_pools = [lbl for lbl, tainted in pools.values() if not tainted]
        assert cpu_pools
        assert all(not selector.items() <= lbl.items() for lbl in cpu_pools)
        assert catalog.gpu_toleration() in pod["tolerations"]
        for container in pod["containers"]:
            assert "@sha256:" in container["image"]
            assert int(container["resources"]["limits"][catalog.GPU_RESOURCE]) >= 1


def test_nccl_job_spreads_ranks_over_nodes() -> None:
    pool = validation.GpuPool("p", "h100-x8", {catalog.LABEL_GPU_VENDOR: "nvidia"}, 8)
    config = ValidationConfig(enabled=True, nccl={"nodes": 4, "minBusBandwidthGbps": 150})
    objects = validation.nccl_objects(pool, config)
    job = next(o for o in objects if o["kind"] == "Job")
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == 4
    assert job["spec"]["completionMode"] == "Indexed"
    anti = job["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    assert anti["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == (
        "kubernetes.io/hostname"
    )
    env = {e["name"]: e["value"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["MIN_BUS_BANDWIDTH_GBPS"] == "150"
    assert (
        "--nnodes=4 --nproc-per-node=8"
        in job["spec"]["template"]["spec"]["containers"][0]["command"][2]
    )


def test_builder_takes_any_pool_list() -> None:
    pools = [
        validation.GpuPool("karp-h100", "h100-x8", {catalog.LABEL_GPU_CLASS: "h100-x8"}, 8),
        validation.GpuPool("karp-l4", "l4-x1", {catalog.LABEL_GPU_CLASS: "l4-x1"}, 1),
    ]
    objects = validation.validation_objects(pools, None, ValidationConfig(enabled=True))
    assert [o["metadata"]["name"] for o in objects] == ["gpu-smoke-karp-h100", "gpu-smoke-karp-l4"]
    assert validation.validation_objects(pools, None, ValidationConfig()) == []


def test_image_must_be_pinned_by_digest(
    make_stack: Callable[[dict[str, Any]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = stack_values("dev")
    cfg["gpu-platform:validation"]["image"] = "nvcr.io/nvidia/pytorch:25.01-py3"
    project = make_stack(cfg)
    code = synth_cli.main(
        ["--stack", "t", "--project-dir", str(project), "--out", str(project / "o")]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "gpu-platform:validation.image" in err


def test_nccl_nodes_must_fit_the_pool(
    make_stack: Callable[[dict[str, Any]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = stack_values("dev")
    cfg["gpu-platform:validation"]["nccl"]["nodes"] = 9
    project = make_stack(cfg)
    code = synth_cli.main(
        ["--stack", "t", "--project-dir", str(project), "--out", str(project / "o")]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "gpu-platform:validation.nccl.nodes: got 9; at most the nodes its pool reaches" in err
