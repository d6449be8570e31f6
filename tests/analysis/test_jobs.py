"""analysis.jobs: the structural rules of `trainingJobs` (validate_training_jobs), each refusal
pinned to the exact Problem a user reads — key path, offending value and what is allowed — so
that a rule naming the wrong job, the wrong key or an empty list of choices fails here (issue #39:
the mutation run's survivors of jobs.py, tests/analysis/mutation-survivors.md). Pure: the dev
stack's parsed config with its jobs replaced, no synth."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from components import catalog
from components import config as stack_config
from components.analysis.facts import build
from components.analysis.jobs import judge_training_jobs, validate_training_jobs
from components.config import Problem
from tests.analysis.judged import facts_of
from tests.conftest import stack_values, values_with_jobs


def _parse(values: dict[str, Any]) -> stack_config.StackConfig:
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return stack_config.parse(stack_config.namespace_values(raw))


def _dev() -> stack_config.StackConfig:
    """Dev: teams `research` (team-research) and `applied` (team-applied); GPU flavors a10g-x1
    on-demand and spot, l4-x1 spot; no fleet; the reference trainer as the default image."""
    return _parse(stack_values("dev"))


def _job(**fields: Any) -> stack_config.TrainingJobConfig:
    return stack_config.TrainingJobConfig.model_validate(
        {"name": "edge", "team": "research", "gpuClass": "a10g-x1", "capacity": "spot", **fields}
    )


def _problems(cfg: stack_config.StackConfig, *jobs: stack_config.TrainingJobConfig) -> list[Any]:
    return validate_training_jobs(cfg.model_copy(update={"training_jobs": list(jobs)}))


def test_the_dev_stacks_jobs_and_the_base_job_are_valid() -> None:
    """The baseline the refusals below depart from: nothing to report."""
    cfg = _dev()
    assert validate_training_jobs(cfg) == []
    assert _problems(cfg, _job()) == []


def test_a_job_of_an_unknown_team_names_its_key_value_and_the_teams() -> None:
    cfg = _dev()
    assert _problems(cfg, _job(), _job(name="other", team="nobody")) == [
        Problem("trainingJobs[1].team", "nobody", "a team (applied, research)")
    ]


def test_a_name_used_twice_in_one_namespace_names_the_first_job_that_has_it() -> None:
    cfg = _dev()
    same = _job(name="twice")
    found = _problems(cfg, same, _job(name="other"), same, same)
    allowed = "a unique name in team-research (trainingJobs[0])"
    # Every repeat points at the first job of that name, not at the repeat before it.
    assert found == [
        Problem("trainingJobs[2].name", "twice", allowed),
        Problem("trainingJobs[3].name", "twice", allowed),
    ]
    # The same name in another team's namespace is another job.
    assert _problems(cfg, same, _job(name="twice", team="applied")) == []


def test_regions_are_refused_on_a_platform_stack_and_left_to_a_fleet_worker() -> None:
    regions = ["us-east-1"]
    assert _problems(_dev(), _job(regions=regions)) == [
        Problem(
            "trainingJobs[0].regions",
            regions,
            "left out: a platform stack is one region; regions pick among a fleet's "
            "workers (a job stack on the fleet's manager, docs/fleet.md)",
        )
    ]
    worker = _parse(stack_values("prod-use1"))
    assert worker.fleet is not None
    team = worker.teams[0].name
    job = _job(team=team, regions=regions)
    assert [p for p in _problems(worker, job) if p.key.endswith(".regions")] == []


def test_a_gpu_class_no_pool_provides_names_the_classes_that_are() -> None:
    assert _problems(_dev(), _job(), _job(name="second", gpuClass="h100-x8")) == [
        Problem(
            "trainingJobs[1].gpuClass", "h100-x8", "a GPU class the pools provide (a10g-x1, l4-x1)"
        )
    ]


def test_a_capacity_type_no_pool_of_the_class_provides_is_named() -> None:
    assert _problems(
        _dev(), _job(), _job(name="second", gpuClass="l4-x1", capacity="on-demand")
    ) == [Problem("trainingJobs[1].capacity", "on-demand", "no on-demand pool provides l4-x1")]
    # One capacity type of `either` that a pool provides is enough.
    assert _problems(_dev(), _job(gpuClass="l4-x1", capacity="either")) == []


def test_gpus_per_node_other_than_the_class_names_the_value_and_the_class() -> None:
    assert _problems(_dev(), _job(), _job(name="second", gpusPerNode=2)) == [
        Problem(
            "trainingJobs[1].gpusPerNode", 2, "1: the GPUs of a a10g-x1 instance (whole nodes only)"
        )
    ]


DEEPSPEED = {"zeroStage": 2, "microBatchPerGpu": 4}


def test_gradient_accumulation_is_refused_with_the_reference_trainer_only() -> None:
    cfg = _dev()
    assert cfg.training.default_image is None  # jobs without an image run the reference trainer
    accumulating = {**DEEPSPEED, "gradientAccumulationSteps": 2}
    assert _problems(
        cfg, _job(), _job(name="second", mode="deepspeed", deepspeed=accumulating)
    ) == [
        Problem(
            "trainingJobs[1].deepspeed.gradientAccumulationSteps",
            2,
            "1 with the reference trainer (one batch per optimizer step; it refuses any other "
            "value at start): raise microBatchPerGpu or nodes for a larger batch, or run an "
            "image of your own",
        )
    ]
    assert (
        _problems(
            cfg, _job(mode="deepspeed", deepspeed={**DEEPSPEED, "gradientAccumulationSteps": 1})
        )
        == []
    )
    # An image of the user's own, pinned by digest, may accumulate.
    own = "registry.example.com/team/llm@sha256:" + "a" * 64
    found = _problems(cfg, _job(mode="deepspeed", deepspeed=accumulating, image=own))
    assert [p for p in found if "gradientAccumulationSteps" in p.key] == []


def test_a_train_batch_size_off_the_arithmetic_names_mode_value_and_factors() -> None:
    job = _job(nodes=2, mode="deepspeed", deepspeed={**DEEPSPEED, "trainBatchSize": 64})
    assert job.world_size == 2
    assert _problems(_dev(), job) == [
        Problem(
            "trainingJobs[0].deepspeed.trainBatchSize",
            64,
            "micro 4 x accumulation 1 x world size 2 = 8 (or leave it out)",
        )
    ]
    right = _job(nodes=2, mode="deepspeed", deepspeed={**DEEPSPEED, "trainBatchSize": 8})
    assert _problems(_dev(), right) == []


def test_a_stack_requiring_digests_refuses_a_tag_naming_the_image() -> None:
    cfg = _dev()
    strict = cfg.model_copy(
        update={"training": cfg.training.model_copy(update={"require_image_digest": True})}
    )
    tagged = "registry.example.com/team/llm:v1"
    assert _problems(strict, _job(image=tagged)) == [
        Problem(
            "trainingJobs[0].image",
            tagged,
            "an image pinned by digest (repo[:tag]@sha256:...); training.requireImageDigest is on",
        )
    ]


# --- judge_training_jobs: EFA asks that can never be met (facts of one job variant) ---------


def _efa_problems(cfg: stack_config.StackConfig, name: str, **changes: Any) -> list[Any]:
    index, job = next((i, j) for i, j in enumerate(cfg.training_jobs) if j.name == name)
    jf = facts_of(cfg, job.model_copy(update=changes), index)
    return judge_training_jobs(replace(build(cfg), jobs=(jf,)))


L4_WITHOUT_EFA = (
    "a GPU class whose instance types have EFA devices (g6.2xlarge, g6.4xlarge, g6.xlarge "
    "have none; GPU types with EFA: g5.8xlarge/12xlarge/16xlarge/24xlarge/48xlarge; "
    "g6.8xlarge/12xlarge/16xlarge/24xlarge/48xlarge; g6e.12xlarge/24xlarge/48xlarge; "
    "p4d.24xlarge; p4de.24xlarge; p5.48xlarge; p5e.48xlarge; p5en.48xlarge; p6-b200.48xlarge)"
)


def test_the_efa_refusal_names_every_catalog_gpu_type_with_efa() -> None:
    """The list comes from the catalog's table (it was once written by hand and left out
    g6.8xlarge-16xlarge, which have EFA devices); no GPU-less or EFA-less type is named."""
    listed = L4_WITHOUT_EFA.split("GPU types with EFA: ", 1)[1].removesuffix(")")
    named = {
        f"{family}.{size}"
        for group in listed.split("; ")
        for family, sizes in [group.split(".", 1)]
        for size in sizes.split("/")
    }
    expected = {n for n, row in catalog.INSTANCE_TYPES.items() if row.gpus and row.efa_devices}
    assert named == expected
    assert {"g6.8xlarge", "g6.12xlarge", "g6.16xlarge"} <= named


def test_efa_asked_of_types_without_it_names_the_ask_and_each_type() -> None:
    """Dev's `ddp-l4-nodegroup` (trainingJobs[3]) runs on g6 types without EFA devices: an
    explicit `efa: true` is refused at `efa` with True, an `efaDevices` ask at `efaDevices`
    with its count."""
    cfg = _dev()
    assert _efa_problems(cfg, "ddp-l4-nodegroup") == []
    assert _efa_problems(cfg, "ddp-l4-nodegroup", efa=True) == [
        Problem("trainingJobs[3].efa", True, L4_WITHOUT_EFA)
    ]
    assert _efa_problems(cfg, "ddp-l4-nodegroup", efa_devices=2) == [
        Problem("trainingJobs[3].efaDevices", 2, L4_WITHOUT_EFA)
    ]


def _prod() -> stack_config.StackConfig:
    return _parse(values_with_jobs("prod"))


def test_more_efa_devices_than_a_type_has_names_each_types_count() -> None:
    """Prod's `pretrain-7b` (trainingJobs[0]) runs on p5.48xlarge, 32 EFA devices."""
    assert _efa_problems(_prod(), "pretrain-7b", efa_devices=33) == [
        Problem(
            "trainingJobs[0].efaDevices",
            33,
            "at most 32 (the EFA devices of p5.48xlarge: 32); or leave it out for all of them",
        )
    ]


def test_a_multi_node_efa_job_over_any_zone_is_refused_a_one_node_one_is_not() -> None:
    cfg = _prod()
    assert _efa_problems(cfg, "pretrain-7b", zones="any") == [
        Problem(
            "trainingJobs[0].zones",
            "any",
            "single (or leave it out): a 2-node EFA job must keep its pods in one availability "
            "zone, EFA traffic does not cross zones; set efa: false to spread over TCP instead",
        )
    ]
    # One node asking for EFA explicitly: nothing crosses a zone.
    assert _efa_problems(cfg, "pretrain-7b", zones="any", nodes=1, efa=True) == []
