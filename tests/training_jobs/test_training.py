"""Training jobs: builders, both dev launch paths, placement against the pools, Kueue/Volcano
wiring, the DeepSpeed ConfigMap (also through DeepSpeed's own parser), every config validation,
and property tests of the batch arithmetic and the Young/Daly interval."""

from __future__ import annotations

import copy
import importlib.util
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from components import catalog
from components import config as stack_config
from components.analysis import checkpoint as checkpointing
from components.config import DeepSpeedSettings, StackConfig, TrainingJobConfig
from components.config.job_stack import job_namespace_values, parse_job_stack
from components.training_jobs import manifests
from components.training_jobs import plan as job_plan
from synth import __main__ as synth_cli
from synth.harness import PROJECT_ROOT, SynthResult, load_stack_config
from synth.jobs import JOBS_ROOT, run_job_stack
from synth.report import training_job_rows
from tests.analysis.judged import facts_of
from tests.conftest import stack_values

JOB = "kubernetes:batch/v1:Job"
VOLCANO_JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"
TRAIN_JOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
SERVICE = "kubernetes:core/v1:Service"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
#: What a plan's pods run in these unit tests: an image by digest (the deploy passes the
#: trainer's Output the same way).
TRAINER = job_plan.digest_image(
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/gpu-dev/trainer@sha256:" + "a" * 64
)


def _parse(stack: str) -> StackConfig:
    values = stack_values(stack)
    return stack_config.parse(
        {k.split(":", 1)[1]: v for k, v in values.items() if k.startswith("gpu-platform:")}
    )


def _plan(stack: str, name: str) -> job_plan.JobPlan:
    """A job's plan, from a platform stack (`dev`) or a team job stack (`pretrain-prod`)."""
    if "-" in stack:
        jobs = parse_job_stack(job_namespace_values(load_stack_config(stack, JOBS_ROOT)[1]))
        cfg = _parse(jobs.platform_env).model_copy(
            update={"training_jobs": list(jobs.training_jobs)}
        )
    else:
        cfg = _parse(stack)
    job = next(j for j in cfg.training_jobs if j.name == name)
    return _plan_of(cfg, job, "123456789012")


def _plan_of(cfg: StackConfig, job: TrainingJobConfig, account_id: str) -> job_plan.JobPlan:
    """`job`'s plan on `cfg` (the config's own job or a variant), from its facts."""
    return job_plan.plan_job(cfg, facts_of(cfg, job), account_id, image=TRAINER)


@pytest.fixture(scope="module")
def pretrain_prod(prod: SynthResult) -> SynthResult:
    """Prod's pretraining run lives in team pretrain's job stack (jobs/)."""
    return run_job_stack("pretrain-prod", platform=prod)


def _launcher(result: SynthResult, token: str, name: str) -> dict[str, Any]:
    found = [r for r in result.of_type(token) if r.inputs["metadata"]["name"] == name]
    assert len(found) == 1, [r.inputs["metadata"]["name"] for r in result.of_type(token)]
    return found[0].inputs


def _pod(manifest: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(pod metadata, pod spec) of a native Job or Volcano Job."""
    if manifest["kind"] == "Job" and "tasks" in manifest["spec"]:
        template = manifest["spec"]["tasks"][0]["template"]
    else:
        template = manifest["spec"]["template"]
    return template["metadata"], template["spec"]


def _arg(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


# --- both dev launch paths ------------------------------------------------------------------


def test_dev_declares_ddp_and_deepspeed_jobs(dev: SynthResult) -> None:
    rows = training_job_rows(dev)
    assert rows
    assert {row["mode"] for row in rows} == {"ddp", "deepspeed"}
    assert {row["launcher"] for row in rows} == {"native", "volcano", "kubeflow"}


@pytest.mark.parametrize(
    ("token", "name", "rank_env", "pod0"),
    [
        (JOB, "ddp-smoke", "JOB_COMPLETION_INDEX", "ddp-smoke-0.ddp-smoke"),
        (VOLCANO_JOB, "ds-zero2", "VC_TASK_INDEX", "ds-zero2-worker-0.ds-zero2"),
    ],
)
def test_dev_launch_paths_have_consistent_torchrun_args(
    dev: SynthResult, token: str, name: str, rank_env: str, pod0: str
) -> None:
    manifest = _launcher(dev, token, name)
    _, spec = _pod(manifest)
    container = spec["containers"][0]
    args = container["args"]
    replicas = (
        manifest["spec"]["tasks"][0]["replicas"]
        if token == VOLCANO_JOB
        else manifest["spec"]["parallelism"]
    )
    if token == JOB:
        assert manifest["spec"]["completions"] == replicas
        assert manifest["spec"]["completionMode"] == "Indexed"
    assert int(_arg(args, "--nnodes")) == replicas == 2
    assert int(_arg(args, "--nproc-per-node")) == int(
        container["resources"]["limits"][catalog.GPU_RESOURCE]
    )
    assert _arg(args, "--node-rank") == f"$({rank_env})"
    assert _arg(args, "--rdzv-backend") == "c10d"
    assert _arg(args, "--rdzv-endpoint") == f"{pod0}:29400"
    # The launcher is PID 1 in exec form, not a shell.
    assert container["command"] == ["python", "-m", "gpt_trainer.launch"]
    assert "sh" not in container["command"] and "-c" not in container["command"]
    assert args[args.index("-m") + 1] == "gpt_trainer.train"


def test_native_rendezvous_resolves_to_pod_zero_through_headless_service(dev: SynthResult) -> None:
    job = _launcher(dev, JOB, "ddp-smoke")
    service = _launcher(dev, SERVICE, "ddp-smoke")
    metadata, spec = _pod(job)
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["publishNotReadyAddresses"] is True
    assert spec["subdomain"] == service["metadata"]["name"]
    assert service["spec"]["selector"].items() <= metadata["labels"].items()
    host, port = _arg(spec["containers"][0]["args"], "--rdzv-endpoint").split(":")
    # Indexed Job pod 0's hostname is `<job>-0`; with the subdomain it resolves in the Service.
    assert host == f"{job['metadata']['name']}-0.{service['metadata']['name']}"
    assert int(port) in {p["port"] for p in service["spec"]["ports"]}


def test_volcano_svc_plugin_provides_the_headless_service(dev: SynthResult) -> None:
    job = _launcher(dev, VOLCANO_JOB, "ds-zero2")
    assert "svc" in job["spec"]["plugins"] and "env" in job["spec"]["plugins"]


@pytest.mark.parametrize(("token", "name"), [(JOB, "ddp-smoke"), (VOLCANO_JOB, "ds-zero2")])
def test_shm_is_a_memory_backed_empty_dir(dev: SynthResult, token: str, name: str) -> None:
    _, spec = _pod(_launcher(dev, token, name))
    shm = next(v for v in spec["volumes"] if v["name"] == "dshm")
    assert shm["emptyDir"]["medium"] == "Memory"
    mounts = spec["containers"][0]["volumeMounts"]
    assert {"name": "dshm", "mountPath": "/dev/shm"} in mounts


def _pool_label_sets(result: SynthResult) -> list[dict[str, str]]:
    sets = []
    for group in result.of_type("eks:index:ManagedNodeGroup"):
        labels = group.inputs.get("labels") or {}
        if catalog.LABEL_GPU_CLASS in labels:
            sets.append(labels)
    for pool in result.of_type("kubernetes:karpenter.sh/v1:NodePool"):
        labels = pool.inputs["spec"]["template"]["metadata"]["labels"]
        if catalog.LABEL_GPU_CLASS in labels:
            sets.append(labels)
    return sets


def _matches(expressions: list[dict[str, Any]], labels: dict[str, str]) -> bool:
    return all(labels.get(e["key"]) in e["values"] for e in expressions if e["operator"] == "In")


@pytest.mark.parametrize(("token", "name"), [(JOB, "ddp-smoke"), (VOLCANO_JOB, "ds-zero2")])
def test_tolerations_and_affinity_match_the_pools(dev: SynthResult, token: str, name: str) -> None:
    _, spec = _pod(_launcher(dev, token, name))
    assert catalog.gpu_toleration() in spec["tolerations"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    expressions = terms["nodeSelectorTerms"][0]["matchExpressions"]
    pools = _pool_label_sets(dev)
    assert pools
    matching = [labels for labels in pools if _matches(expressions, labels)]
    # The spot a10g-x1 Karpenter pool (dev has no GPU managed group); no on-demand one.
    assert len(matching) == 1
    assert {labels[catalog.LABEL_CAPACITY_TYPE] for labels in matching} == {"spot"}
    assert all(labels[catalog.LABEL_GPU_CLASS] == "a10g-x1" for labels in matching)


def test_either_capacity_allows_both_types_and_prefers_spot() -> None:
    plan = _plan("dev", "ddp-trainjob")
    affinity = plan.facts.placement.pod_affinity()["nodeAffinity"]
    expressions = affinity["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][
        0
    ]["matchExpressions"]
    capacity = next(e for e in expressions if e["key"] == catalog.LABEL_CAPACITY_TYPE)
    assert capacity["values"] == ["spot", "on-demand"]
    assert affinity["preferredDuringSchedulingIgnoredDuringExecution"][0]["weight"] == 100


def test_kueue_wiring_native(dev: SynthResult) -> None:
    job = _launcher(dev, JOB, "ddp-smoke")
    labels = job["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "research"
    assert labels["kueue.x-k8s.io/priority-class"] == "dev"
    assert job["spec"]["suspend"] is True
    local_queues = [
        r.inputs["metadata"]
        for r in dev.of_type("kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue")
        if r.inputs["metadata"]["namespace"] == job["metadata"]["namespace"]
    ]
    assert [q["name"] for q in local_queues] == ["research"]
    _, spec = _pod(job)
    assert "schedulerName" not in spec


def test_volcano_wiring(dev: SynthResult) -> None:
    job = _launcher(dev, VOLCANO_JOB, "ds-zero2")
    assert job["spec"]["schedulerName"] == "volcano"
    assert job["spec"]["minAvailable"] == job["spec"]["tasks"][0]["replicas"] == 2
    queues = {
        r.inputs["metadata"]["name"]
        for r in dev.of_type("kubernetes:scheduling.volcano.sh/v1beta1:Queue")
    }
    assert job["spec"]["queue"] in queues
    assert not any(k.startswith("kueue.x-k8s.io/") for k in job["metadata"]["labels"])


def test_trainjob_wiring_and_runtime(dev: SynthResult) -> None:
    job = _launcher(dev, TRAIN_JOB, "ddp-trainjob")
    assert job["spec"]["suspend"] is True
    assert job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "applied"
    runtimes = {r.inputs["metadata"]["name"]: r.inputs for r in dev.of_type(RUNTIME)}
    assert job["spec"]["runtimeRef"]["name"] in runtimes
    runtime = runtimes[job["spec"]["runtimeRef"]["name"]]
    assert "torch" in runtime["spec"]["mlPolicy"]
    trainer = job["spec"]["trainer"]
    args = trainer["args"]
    assert int(_arg(args, "--nnodes")) == trainer["numNodes"] == 2
    assert int(_arg(args, "--nproc-per-node")) == trainer["numProcPerNode"]
    assert _arg(args, "--rdzv-endpoint") == "ddp-trainjob-node-0-0.ddp-trainjob:29400"


def test_deepspeed_config_map(dev: SynthResult) -> None:
    job = _launcher(dev, VOLCANO_JOB, "ds-zero2")
    maps = [
        r.inputs
        for r in dev.of_type(CONFIG_MAP)
        if r.inputs["metadata"]["name"] == "ds-zero2-deepspeed"
    ]
    assert len(maps) == 1
    ds = json.loads(maps[0]["data"]["ds_config.json"])
    world = 2 * 1
    assert ds["train_batch_size"] == 4 * 1 * world
    assert ds["zero_optimization"]["stage"] == 2
    assert ds["bf16"]["enabled"] and not ds["fp16"]["enabled"]
    _, spec = _pod(job)
    assert {"name": "ds-config", "configMap": {"name": "ds-zero2-deepspeed"}} in spec["volumes"]
    args = spec["containers"][0]["args"]
    assert _arg(args, "--ds-config") == "/etc/deepspeed/ds_config.json"
    assert _arg(args, "--mode") == "deepspeed"


# --- spot safety, metadata ------------------------------------------------------------------


@pytest.mark.parametrize("name", ["ddp-smoke", "ds-zero2", "ddp-trainjob"])
def test_spot_safety_chain(name: str) -> None:
    plan = _plan("dev", name)
    grace = plan.grace
    assert plan.job.checkpoint.save_seconds < grace.worker < grace.shutdown_timeout
    assert grace.shutdown_timeout < grace.termination
    spec = manifests.pod_spec(plan)
    assert spec["terminationGracePeriodSeconds"] == grace.termination
    assert manifests.pod_metadata(plan)["annotations"]["karpenter.sh/do-not-disrupt"] == "true"
    args = manifests.launch_args(plan)
    assert int(_arg(args, "--shutdown-timeout")) == grace.shutdown_timeout
    assert int(_arg(args, "--grace-s")) == grace.worker


def test_pod_failure_policy_ignores_disruptions_and_clean_preemptions(dev: SynthResult) -> None:
    job = _launcher(dev, JOB, "ddp-smoke")
    rules = job["spec"]["podFailurePolicy"]["rules"]
    assert {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]} in rules
    exit_rule = next(r for r in rules if "onExitCodes" in r)
    assert exit_rule["action"] == "Ignore" and exit_rule["onExitCodes"]["values"] == [75]
    assert job["spec"]["backoffLimit"] == 2 * 3
    _, spec = _pod(job)
    assert spec["restartPolicy"] == "Never"


def test_checkpoint_interval_defaults_to_young_daly_and_is_overridable() -> None:
    plan = _plan("dev", "ds-zero2")
    expected = checkpointing.young_daly_interval_s(5.0, 21600.0)
    assert plan.interval_s == pytest.approx(expected)
    assert int(_arg(manifests.worker_args(plan), "--checkpoint-interval-s")) == round(expected)
    job = plan.job.model_copy(
        update={"checkpoint": plan.job.checkpoint.model_copy(update={"interval_seconds": 900})}
    )
    cfg = _parse("dev")
    assert _plan_of(cfg, job, "123456789012").interval_s == 900


def test_run_metadata_on_pods_and_env(dev: SynthResult) -> None:
    for token, name in ((JOB, "ddp-smoke"), (VOLCANO_JOB, "ds-zero2")):
        metadata, spec = _pod(_launcher(dev, token, name))
        env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
        for key in ("RUN_ID", "GIT_SHA", "IMAGE_DIGEST", "CONFIG_HASH", "TEAM"):
            annotation = f"gpu-platform.io/{key.lower().replace('_', '-')}"
            assert env[key] and metadata["annotations"][annotation] == env[key]
        assert metadata["labels"]["gpu-platform.io/run-id"] == env["RUN_ID"]


def test_config_hash_is_deterministic_and_semantic() -> None:
    plan = _plan("dev", "ddp-smoke")
    again = _plan("dev", "ddp-smoke")
    assert plan.config_hash == again.config_hash
    cfg = _parse("dev")
    moved = plan.job.model_copy(update={"capacity": "on-demand", "priority": "research"})
    assert _plan_of(cfg, moved, "1").config_hash == plan.config_hash
    changed = plan.job.model_copy(update={"hyperparameters": {"max-steps": 10}})
    assert _plan_of(cfg, changed, "1").config_hash != plan.config_hash


def test_prod_job_is_pinned_uses_efa_in_one_zone(pretrain_prod: SynthResult) -> None:
    job = _launcher(pretrain_prod, JOB, "pretrain-7b")
    _, spec = _pod(job)
    container = spec["containers"][0]
    assert "@sha256:" in container["image"]
    assert container["resources"]["limits"][job_plan.EFA_RESOURCE] == str(
        catalog.instance("p5.48xlarge").efa_devices
    )
    assert container["resources"]["limits"][catalog.GPU_RESOURCE] == "8"
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["FI_PROVIDER"] == "efa" and env["FI_EFA_USE_DEVICE_RDMA"] == "1"
    zone = spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert zone["topologyKey"] == "topology.kubernetes.io/zone"


def test_job_zone_and_efa_keys_reach_the_pod_template() -> None:
    plan = _plan("pretrain-prod", "pretrain-7b")
    fewer = plan.job.model_copy(update={"efa_devices": 8})
    base = _parse("prod").model_copy(update={"training_jobs": [fewer]})
    spec = manifests.pod_spec(_plan_of(base, fewer, "1"))
    limits = spec["containers"][0]["resources"]["limits"]
    assert limits[job_plan.EFA_RESOURCE] == "8"
    # A TCP gang asked to stay in one zone gets the same podAffinity term EFA jobs get.
    dev = _parse("dev")
    smoke = next(j for j in dev.training_jobs if j.name == "ddp-smoke")
    assert "podAffinity" not in manifests.pod_spec(_plan_of(dev, smoke, "1"))["affinity"]
    single = smoke.model_copy(update={"zones": "single"})
    affinity = manifests.pod_spec(_plan_of(dev, single, "1"))["affinity"]
    term = affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert term["topologyKey"] == "topology.kubernetes.io/zone"
    assert term["labelSelector"]["matchLabels"] == {
        f"{catalog.LABEL_DOMAIN}/training-job": "ddp-smoke"
    }


def test_cpu_memory_defaults_leave_headroom() -> None:
    plan = _plan("dev", "ddp-smoke")
    row = catalog.instance(plan.resources.instance_type)
    assert plan.resources.instance_type == "g5.xlarge"
    assert 0 < plan.resources.cpu < row.vcpu
    assert 0 < plan.resources.memory_gib < row.memory_gib
    assert plan.resources.shm_gib < plan.resources.memory_gib


def test_report_lists_each_job(dev: SynthResult) -> None:
    rows = training_job_rows(dev)
    assert len(rows) == len(dev.config.training_jobs) == 4
    smoke = next(r for r in rows if r["job"] == "team-research/ddp-smoke")
    assert smoke["spot_usd_h"] == pytest.approx(2 * catalog.price_per_hour("g5.xlarge", "spot"))
    assert 0 < smoke["waste"] < 1


def test_policy_sees_trainjob_pods(dev: SynthResult) -> None:
    from policies.rules import compute as platform
    from policies.rules.common import Resource

    job = copy.deepcopy(_launcher(dev, TRAIN_JOB, "ddp-trainjob"))
    resource = Resource(TRAIN_JOB, "t", "urn:t", job)
    config = {"minGracePeriodSeconds": 120}
    assert list(platform._check_spot_jobs(resource, config)) == []
    patch = job["spec"]["runtimePatches"][0]["trainingRuntimeSpec"]["template"]["spec"]
    pod = patch["replicatedJobs"][0]["template"]["spec"]["template"]
    del pod["metadata"]["annotations"]["karpenter.sh/do-not-disrupt"]
    assert any("do-not-disrupt" in m for m in platform._check_spot_jobs(resource, config))
    assert platform.world_size(resource) == 2


# --- DeepSpeed's own parser -----------------------------------------------------------------


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="needs deepspeed")
@pytest.mark.parametrize(("stack", "name"), [("dev", "ds-zero2"), ("pretrain-prod", "pretrain-7b")])
def test_ds_config_accepted_by_deepspeed_for_the_world_size(stack: str, name: str) -> None:
    import deepspeed.comm
    from deepspeed.runtime.config import DeepSpeedConfig

    plan = _plan(stack, name)
    config = job_plan.ds_config(plan.job, plan.world_size)
    # DeepSpeedConfig asks deepspeed.comm for the world size; unpatched it assumes 1.
    with (
        mock.patch.object(deepspeed.comm, "get_world_size", return_value=plan.world_size),
        mock.patch.object(deepspeed.comm, "get_rank", return_value=0),
    ):
        parsed = DeepSpeedConfig(config)
        assert parsed.world_size == plan.world_size
        assert parsed.train_batch_size == plan.effective_batch
        # Its checks are `assert`s (gone under -O): check the facts ourselves too.
        wrong = {**config, "train_batch_size": config["train_batch_size"] + 1}
        if sys.flags.optimize == 0:
            with pytest.raises(AssertionError):
                DeepSpeedConfig(wrong)
    assert parsed.zero_optimization_stage == plan.job.deepspeed.zero_stage  # type: ignore[union-attr]


# --- property tests -------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    micro=st.integers(1, 64),
    accumulation=st.integers(1, 64),
    nodes=st.integers(1, 16),
    gpus=st.sampled_from([1, 4, 8]),
)
def test_batch_arithmetic(micro: int, accumulation: int, nodes: int, gpus: int) -> None:
    settings_ = DeepSpeedSettings(
        micro_batch_per_gpu=micro, gradient_accumulation_steps=accumulation
    )
    plan = _plan("dev", "ds-zero2")
    job = plan.job.model_copy(update={"deepspeed": settings_, "nodes": nodes})
    config = job_plan.ds_config(job, nodes * gpus)
    assert config["train_batch_size"] == micro * accumulation * nodes * gpus
    assert config["train_batch_size"] % (micro * accumulation) == 0
    from policies.rules.compute import ds_config_problems

    assert ds_config_problems(config, nodes * gpus) == []
    assert ds_config_problems(
        {**config, "train_batch_size": config["train_batch_size"] + 1}, nodes * gpus
    )


_TRAINER = PROJECT_ROOT / "images" / "trainer" / "gpt_trainer" / "checkpoint_policy.py"


def _trainer_policy() -> Any:
    spec = importlib.util.spec_from_file_location("trainer_checkpoint_policy", _TRAINER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


TRAINER_POLICY = _trainer_policy()
positive = st.floats(min_value=1e-3, max_value=1e7, allow_nan=False, allow_infinity=False)


@settings(max_examples=300, deadline=None)
@given(save_s=positive, mtbf_s=positive, restart_s=st.floats(0, 1e5))
def test_young_daly_agrees_with_the_trainer(save_s: float, mtbf_s: float, restart_s: float) -> None:
    ours = checkpointing.young_daly_interval_s(save_s, mtbf_s)
    theirs = TRAINER_POLICY.young_daly_interval_s(save_s, mtbf_s)
    assert ours == pytest.approx(theirs, rel=1e-12)
    assert checkpointing.wasted_fraction(ours, save_s, mtbf_s, restart_s) == pytest.approx(
        TRAINER_POLICY.wasted_fraction(theirs, save_s, mtbf_s, restart_s), rel=1e-12
    )


@settings(max_examples=300, deadline=None)
@given(save_s=st.floats(0.01, 600), mtbf_s=st.floats(3600, 1e7))
def test_young_daly_is_near_optimal(save_s: float, mtbf_s: float) -> None:
    assume(save_s * 50 <= mtbf_s)  # the regime the first-order waste model describes
    tau = checkpointing.young_daly_interval_s(save_s, mtbf_s)
    assert tau > 0
    assert checkpointing.young_daly_interval_s(save_s, mtbf_s * 2) > tau
    waste = checkpointing.wasted_fraction(tau, save_s, mtbf_s)
    # Halving or doubling the interval never beats Daly's optimum (first-order waste model).
    for other in (tau / 2, tau * 2):
        assert waste <= checkpointing.wasted_fraction(other, save_s, mtbf_s) + 1e-12


def test_young_daly_matches_trainer_md_examples() -> None:
    assert checkpointing.young_daly_interval_s(60, 6 * 3600) / 60 == pytest.approx(26.2, abs=0.05)
    assert checkpointing.young_daly_interval_s(5, 6 * 3600) / 60 == pytest.approx(7.7, abs=0.05)
    assert checkpointing.young_daly_interval_s(100, 10) == 10


# --- config errors (point 6) ----------------------------------------------------------------


def _set(cfg: dict[str, Any], index: int, **changes: Any) -> None:
    cfg["gpu-platform:trainingJobs"][index].update(changes)


CASES: list[tuple[str, Callable[[dict[str, Any]], None], str, str]] = [
    (
        "gpus-per-node",
        lambda c: _set(c, 0, gpusPerNode=4),
        "trainingJobs[0].gpusPerNode",
        "the GPUs of a a10g-x1 instance",
    ),
    (
        "over-quota",
        lambda c: _set(c, 0, nodes=5),
        "trainingJobs[0].nodes",
        "fits no quota of team research",
    ),
    (
        "over-pool",
        lambda c: _set(c, 0, nodes=9),
        "trainingJobs[0].nodes",
        "the a10g-x1 spot pools provide",
    ),
    (
        "spot-without-checkpoint",
        lambda c: _set(c, 0, checkpoint={"volume": False}),
        "trainingJobs[0].checkpoint",
        "a spot job needs checkpoint storage",
    ),
    (
        "batch-arithmetic",
        lambda c: c["gpu-platform:trainingJobs"][1]["deepspeed"].update(trainBatchSize=12),
        "trainingJobs[1].deepspeed.trainBatchSize",
        "x world size 2 = 8",
    ),
    (
        "fp16-and-bf16",
        lambda c: c["gpu-platform:trainingJobs"][1]["deepspeed"].update(fp16=True),
        "trainingJobs[1].deepspeed.fp16",
        "exclusive",
    ),
    (
        "image-digest",
        # Without dev's relaxation a tag-only image is refused (dev's own jobs pin digests).
        lambda c: (c.pop("gpu-platform:training"), _set(c, 0, image="ghcr.io/x/trainer:0.1.0")),
        "trainingJobs[0].image",
        "pinned by digest",
    ),
    ("unknown-team", lambda c: _set(c, 0, team="nobody"), "trainingJobs[0].team", "a team ("),
    (
        "unknown-gpu-class",
        lambda c: _set(c, 0, gpuClass="h100-x8"),
        "trainingJobs[0].gpuClass",
        "a GPU class the pools provide",
    ),
    (
        "unknown-scheduler",
        lambda c: _set(c, 0, scheduler="slurm"),
        "trainingJobs[0].scheduler",
        "kueue",
    ),
    (
        "unknown-launcher",
        lambda c: _set(c, 0, launcher="mpi"),
        "trainingJobs[0].launcher",
        "native",
    ),
    (
        "volcano-launcher-needs-volcano",
        lambda c: _set(c, 1, scheduler="kueue"),
        "trainingJobs[1].scheduler",
        "volcano",
    ),
    (
        "save-exceeds-spot-notice",
        lambda c: _set(c, 0, checkpoint={"volume": True, "saveSeconds": 200}),
        "trainingJobs[0].checkpoint.saveSeconds",
        "spot interruption notice",
    ),
]


@pytest.mark.parametrize(
    ("mutate", "path", "allowed"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_invalid_training_job_is_a_config_error(
    mutate: Callable[[dict[str, Any]], None],
    path: str,
    allowed: str,
    make_stack: Callable[[dict[str, Any]], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    cfg = copy.deepcopy(stack_values("dev"))
    mutate(cfg)
    project = make_stack(cfg)
    rc = synth_cli.main(["--stack", "t", "--project-dir", str(project)])
    err = capsys.readouterr().err
    assert rc == synth_cli.EXIT_CONFIG, err
    lines = [line for line in err.splitlines() if line.startswith(f"gpu-platform:{path}:")]
    assert lines, f"no line names {path}:\n{err}"
    assert any(allowed in line for line in lines), err
    assert not (project / "build").exists()
