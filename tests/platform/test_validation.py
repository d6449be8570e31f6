"""Validation jobs: per-pool smoke Jobs and the NCCL test, GPU nodes only, images by digest."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components import catalog
from components.analysis.nodes import tolerates
from components.config import ConfigError, ValidationConfig
from components.platform.validation import validation
from components.platform.validation import validation_scripts as scripts
from synth import __main__ as synth_cli
from synth.harness import SynthResult, run_program
from tests.analysis.judged import sources_of
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
    # One smoke Job per GPU pool, the spot node group's too (its pod makes the autoscaler
    # grow the group from 0, and tolerates the group's spot taint); NCCL on the on-demand pool
    # the stack names.
    assert names == {
        "gpu-smoke-kp-a10g-spot",
        "gpu-smoke-kp-a10g-od",
        "gpu-smoke-ng-l4-spot",
        "nccl-allreduce-kp-a10g-od",
    }
    (smoke,) = [j for j in jobs if j.inputs["metadata"]["name"] == "gpu-smoke-ng-l4-spot"]
    pod = smoke.inputs["spec"]["template"]["spec"]
    assert catalog.spot_toleration() in pod["tolerations"]


def test_dev_nccl_job_fits_and_names_the_type_its_pods_land_on(dev: SynthResult) -> None:
    """Applied to a real kube-scheduler, 16 GiB did not fit dev's g5.xlarge (issue 32): the
    pods now ask for what the type they are named after can give."""
    (job,) = [j for j in _jobs(dev) if j.inputs["metadata"]["name"].startswith("nccl-")]
    container = job.inputs["spec"]["template"]["spec"]["containers"][0]
    env = _env(container)
    named = env["INSTANCE_TYPE"]
    (source,) = [s for s in sources_of(dev.config) if s.name == env["POOL"]]
    allocatable = source.allocatable[named]
    requests = container["resources"]["requests"]
    assert named == "g5.xlarge"
    assert int(requests["memory"].removesuffix("Gi")) <= allocatable.memory_gib
    assert float(requests["cpu"]) <= allocatable.cpu
    # The threshold and the metric label name that type (validation_scripts reads both).
    assert env["MIN_BUS_BANDWIDTH_GBPS"] == "2"


def test_smoke_pods_tolerate_every_taint_of_their_group_its_own_too() -> None:
    """A group's own taint (nodeGroups.gpu[].taints) keeps other pods off its nodes, not the
    smoke Job pinned to it: a smoke pod that did not tolerate it would never schedule."""
    groups = json.loads(json.dumps(stack_values("dev")["gpu-platform:nodeGroups"]))
    own = {"key": "example.com/dedicated", "value": "research", "effect": "NoSchedule"}
    groups["gpu"][0]["taints"] = [own]
    # The dev job on that group does not tolerate the taint: "will it run" refuses it.
    with pytest.raises(ConfigError, match=r"trainingJobs\[\d+\]\.gpuClass.*taints"):
        run_program("dev", overrides={"gpu-platform:nodeGroups": groups})
    jobs = [
        j
        for j in stack_values("dev")["gpu-platform:trainingJobs"]
        if j["gpuClass"] != "l4-x1"  # the class of the group (g6: L4)
    ]
    overrides = {"gpu-platform:nodeGroups": groups, "gpu-platform:trainingJobs": jobs}
    result = run_program("dev", overrides=overrides)
    name = groups["gpu"][0]["name"]
    (smoke,) = [j for j in _jobs(result) if j.inputs["metadata"]["name"] == f"gpu-smoke-{name}"]
    tolerations = tuple(smoke.inputs["spec"]["template"]["spec"]["tolerations"])
    assert result.config is not None
    (source,) = [s for s in sources_of(result.config) if s.name == name]
    assert own in source.taints and catalog.spot_taint() in source.taints
    for taint in source.taints:
        assert tolerates(taint, tolerations), taint
    # Karpenter pools' smoke pods tolerate the GPU taint only.
    (karpenter,) = [
        j for j in _jobs(result) if j.inputs["metadata"]["name"] == "gpu-smoke-kp-a10g-od"
    ]
    pod = karpenter.inputs["spec"]["template"]["spec"]
    assert pod["tolerations"] == [catalog.gpu_toleration()]


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
    assert _jobs(dev)
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
    assert [o["metadata"]["name"] for o in objects] == [
        "gpu-smoke-karp-h100",
        "gpu-smoke-karp-l4",
        "validation-results",
    ]
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


H100 = {catalog.LABEL_GPU_VENDOR: "nvidia"}


def _p5_pool() -> validation.GpuPool:
    return validation.GpuPool("kp-h100-od", "h100-x8", H100, 8, "p5.48xlarge")


def _nccl_container(pool: validation.GpuPool, config: ValidationConfig) -> dict[str, Any]:
    job = next(o for o in validation.nccl_objects(pool, config) if o["kind"] == "Job")
    container: dict[str, Any] = job["spec"]["template"]["spec"]["containers"][0]
    return container


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {row["name"]: row["value"] for row in container["env"]}


def test_nccl_on_p5_requests_every_efa_device_and_the_efa_provider() -> None:
    container = _nccl_container(_p5_pool(), ValidationConfig(enabled=True))
    resources = container["resources"]
    # p5.48xlarge: 32 EFA devices (catalog), requested and limited like the GPUs.
    assert resources["requests"][catalog.EFA_RESOURCE] == "32"
    assert resources["limits"][catalog.EFA_RESOURCE] == "32"
    assert resources["limits"][catalog.GPU_RESOURCE] == "8"
    env = _env(container)
    assert env["FI_PROVIDER"] == "efa"
    assert env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert "NCCL_SOCKET_IFNAME" not in env
    assert env["INSTANCE_TYPE"] == "p5.48xlarge"


def test_nccl_without_efa_has_no_efa_request_or_provider() -> None:
    pool = validation.GpuPool("kp-a10g-od", "a10g-x1", H100, 1, "g5.2xlarge")
    container = _nccl_container(
        pool, ValidationConfig(enabled=True, nccl={"minBusBandwidthGbps": 2})
    )
    assert catalog.EFA_RESOURCE not in container["resources"]["requests"]
    env = _env(container)
    assert "FI_PROVIDER" not in env and "FI_EFA_USE_DEVICE_RDMA" not in env
    job = next(
        o
        for o in validation.nccl_objects(
            pool, ValidationConfig(enabled=True, nccl={"minBusBandwidthGbps": 2})
        )
        if o["kind"] == "Job"
    )
    # No EFA, no single-zone constraint (only the one-rank-per-node spread).
    assert "podAffinity" not in job["spec"]["template"]["spec"]["affinity"]


def test_nccl_on_efa_keeps_every_rank_in_one_zone_like_training_jobs() -> None:
    objects = validation.nccl_objects(_p5_pool(), ValidationConfig(enabled=True))
    job = next(o for o in objects if o["kind"] == "Job")
    affinity = job["spec"]["template"]["spec"]["affinity"]
    terms = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert terms == [
        {
            "labelSelector": {"matchLabels": {"job-name": job["metadata"]["name"]}},
            "topologyKey": catalog.ZONE_LABEL,
        }
    ]
    # The pods match their own selector (the Job controller sets job-name on every pod), so the
    # first rank may go anywhere and the rest follow it.
    assert (
        affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0][
            "labelSelector"
        ]
        == terms[0]["labelSelector"]
    )


@pytest.mark.parametrize(
    ("instance_type", "override", "expected"),
    [
        ("p5.48xlarge", None, "250"),
        ("p4d.24xlarge", None, "33"),
        ("p4de.24xlarge", None, "61"),
        ("p5en.48xlarge", None, "265"),
        ("p6-b200.48xlarge", None, "250"),
        ("p5.48xlarge", 420.5, "420.5"),
    ],
)
def test_nccl_threshold_is_the_catalog_figure_per_type_unless_overridden(
    instance_type: str, override: float | None, expected: str
) -> None:
    pool = validation.GpuPool("p", "x", H100, 8, instance_type)
    config = ValidationConfig(enabled=True, nccl={"minBusBandwidthGbps": override})
    assert _env(_nccl_container(pool, config))["MIN_BUS_BANDWIDTH_GBPS"] == expected


def test_every_catalog_threshold_is_cited_and_at_most_80_percent_of_its_published_figure() -> None:
    assert catalog.NCCL_ALLREDUCE_BUSBW
    for name, row in catalog.NCCL_ALLREDUCE_BUSBW.items():
        assert catalog.instance(name).efa_devices > 0, name
        if row.published_gbps is None:
            assert row.source.startswith("UNVERIFIED"), name
        else:
            # owner/repo@commit:path#Lline, the house citation form.
            assert re.match(r"[\w.-]+/[\w.-]+@[0-9a-f]{7,40}:\S+#L\d+ ", row.source), name
            # The stated fraction (80 %), rounded down: never above what a healthy run published.
            assert row.min_gbps <= 0.8 * row.published_gbps, name


def test_nccl_script_fails_loudly_below_the_threshold_and_serves_metrics() -> None:
    script = scripts.NCCL_SCRIPT
    compile(script, "allreduce.py", "exec")
    assert 'print(f"FAIL nccl-all-reduce: bus bandwidth' in script
    assert "raise SystemExit(0 if passed else 1)" in script
    for metric in (scripts.METRIC_PASSED, scripts.METRIC_BUSBW, scripts.METRIC_THRESHOLD):
        assert f"{metric}{{" in script


def test_smoke_checks_driver_gpu_count_ecc_and_nvlink_where_the_type_has_it() -> None:
    script = scripts.SMOKE_SCRIPT
    python = script.split("<<'PY'\n")[1].split("\nPY\n")[0]
    compile(python, "smoke.py", "exec")
    assert "ecc.errors.uncorrected.volatile.total" in script
    assert '"nvlink", "-s"' in script
    for check in ("driver", "gpu_count", "ecc", "nvlink", "matmul"):
        assert f'fail("{check}"' in script, check
    p5 = validation.smoke_job(_p5_pool(), ValidationConfig(enabled=True))
    g5 = validation.smoke_job(
        validation.GpuPool("g", "a10g-x1", H100, 1, "g5.2xlarge"), ValidationConfig(enabled=True)
    )

    def env(job: dict[str, Any]) -> dict[str, str]:
        return _env(job["spec"]["template"]["spec"]["containers"][0])

    assert env(p5)["EXPECT_NVLINK"] == "1"
    assert env(g5)["EXPECT_NVLINK"] == "0"
    assert env(p5)["METRICS_PORT"] == str(scripts.METRICS_PORT)


def test_served_metrics_reach_prometheus_through_the_pod_monitor(dev: SynthResult) -> None:
    monitors = [
        m
        for m in dev.of_type("kubernetes:monitoring.coreos.com/v1:PodMonitor")
        if m.inputs["metadata"]["namespace"] == "gpu-validation"
    ]
    assert len(monitors) == 1
    endpoint = monitors[0].inputs["spec"]["podMetricsEndpoints"][0]
    jobs = _jobs(dev)
    assert jobs
    for job in jobs:
        pod = job.inputs["spec"]["template"]
        assert "test" in pod["metadata"]["labels"]
        ports = {p["name"]: p["containerPort"] for p in pod["spec"]["containers"][0]["ports"]}
        assert ports[endpoint["port"]] == scripts.METRICS_PORT


def test_served_metrics_are_prometheus_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # Run the shared serving function for real on a free port and scrape it once.
    import socket
    import threading
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("METRICS_PORT", str(port))
    monkeypatch.setenv("METRICS_LINGER_SECONDS", "2")
    namespace: dict[str, Any] = {}
    exec(scripts.SERVE_METRICS_PY, namespace)
    line = f'{scripts.METRIC_PASSED}{{test="nccl-all-reduce",pool="p"}} 0'
    thread = threading.Thread(target=namespace["serve_metrics"], args=([line],))
    thread.start()
    body = ""
    for _ in range(50):
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1) as resp:
                body = resp.read().decode()
            break
        except OSError:
            threading.Event().wait(0.05)
    thread.join()
    assert body == line + "\n"


def test_prod_nccl_on_the_h100_pool_uses_the_p5_catalog_threshold() -> None:
    values = stack_values("prod")["gpu-platform:validation"]
    assert "minBusBandwidthGbps" not in values["nccl"]
    result = run_program("prod", overrides={"gpu-platform:validation": {**values, "enabled": True}})
    jobs = [j for j in _jobs(result) if j.inputs["metadata"]["name"].startswith("nccl-")]
    assert len(jobs) == 1
    container = jobs[0].inputs["spec"]["template"]["spec"]["containers"][0]
    env = _env(container)
    assert env["MIN_BUS_BANDWIDTH_GBPS"] == "250"
    assert env["FI_PROVIDER"] == "efa"
    assert container["resources"]["limits"][catalog.EFA_RESOURCE] == "32"


def test_nccl_pool_without_a_catalog_figure_needs_a_threshold(
    expect_config_error: Callable[[dict[str, Any], str, str], None],
) -> None:
    cfg = stack_values("dev")
    del cfg["gpu-platform:validation"]["nccl"]["minBusBandwidthGbps"]
    expect_config_error(
        cfg,
        "gpu-platform:validation.nccl.minBusBandwidthGbps",
        "the catalog has no published all-reduce figure for g",
    )
