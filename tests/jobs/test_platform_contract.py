"""The platform's `jobPlatform` output (components/contract/platform_contract.py): pure, complete
enough for a job stack to judge its jobs exactly as the platform judges its own."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.analysis.capacity import gpu_capacity
from components.analysis.facts import build
from components.config import StackConfig, parse
from components.config.load import namespace_values
from components.contract.job_platform import PlatformContract
from components.contract.platform_contract import platform_contract
from components.contract.schema import dumped, parse_contract
from synth.harness import SynthResult, load_stack_config, run_program
from synth.jobs import run_job_stack
from synth.mocks import ACCOUNT_ID
from tests.conftest import stack_values


def _cfg(stack: str) -> StackConfig:
    _, config, _ = load_stack_config(stack)
    return parse(namespace_values(config))


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_the_contract_carries_capacity_quotas_and_the_rebuildable_config(stack: str) -> None:
    cfg = _cfg(stack)
    contract = platform_contract(build(cfg), account_id=ACCOUNT_ID, storage_class="efs-rwx")
    assert contract.version == PlatformContract.current_version()
    flat = {
        (gpu_class, capacity_type): flavor.gpus
        for gpu_class, by_type in contract.gpu_classes.items()
        for capacity_type, flavor in by_type.items()
    }
    assert flat == gpu_capacity(cfg)
    assert flat
    for team in cfg.teams:
        entry = contract.teams[team.name]
        assert entry.namespace == team.namespace
        assert entry.local_queue == team.name
        assert [q.flavor for q in entry.quota] == [q.flavor for q in team.quota]
    assert contract.platform_config == cfg.model_copy(update={"training_jobs": []})
    # The output leaves the platform's own jobs out (platformJobs names them).
    output = json.loads(json.dumps(dumped(contract)))  # plain JSON: a stack output
    assert "trainingJobs" not in output["platformConfig"]
    assert parse(output["platformConfig"]) == contract.platform_config


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_what_the_platform_writes_a_job_stack_reads_back(stack: str) -> None:
    """Writer dump -> reader parse -> the same model (and the same output again)."""
    contract = platform_contract(
        build(_cfg(stack)),
        account_id=ACCOUNT_ID,
        storage_class="efs-rwx",
        trainer_image="123456789012.dkr.ecr.us-east-1.amazonaws.com/t@sha256:" + "a" * 64,
        image_repositories={"research": "123456789012.dkr.ecr.us-east-1.amazonaws.com/r"},
    )
    output = json.loads(json.dumps(dumped(contract)))
    assert parse_contract(PlatformContract, output) == contract
    assert dumped(contract) == output


def test_the_platform_exports_the_contract(dev: SynthResult) -> None:
    exported = dev.outputs["jobPlatform"]
    expected = platform_contract(
        build(_cfg("dev")),
        account_id=ACCOUNT_ID,
        storage_class="efs-rwx",
        trainer_image=dev.outputs["trainerImage"],
        image_repositories={
            team: entry["imageRepository"]
            for team, entry in dev.outputs["jobPlatform"]["teams"].items()
            if entry["imageRepository"]
        },
    )
    assert exported == dumped(expected)
    assert parse_contract(PlatformContract, exported) == expected
    # The kubeconfig is a separate, secret output; the contract stays readable.
    assert dev.secret_outputs == [exported["cluster"]["kubeconfigOutput"]]
    assert exported["platformJobs"]["team-research"] == ["ddp-smoke"]


def test_the_contract_names_the_team_roles_the_platform_creates(dev: SynthResult) -> None:
    research = dev.outputs["jobPlatform"]["teams"]["research"]
    roles = {
        r.inputs["name"]
        for r in dev.of_type("aws:iam/role:Role")
        if r.name.startswith("team-research-jobs-")
    }
    assert roles == {
        research["deployRoleArn"].rsplit("/", 1)[1],
        research["previewRoleArn"].rsplit("/", 1)[1],
    }
    assert research["deployRoleArn"].startswith(f"arn:aws:iam::{ACCOUNT_ID}:role/")
    applied = dev.outputs["jobPlatform"]["teams"]["applied"]
    assert applied["deployRoleArn"] is None and applied["previewRoleArn"] is None


def test_a_secret_platform_key_makes_the_contract_secret(
    dev: SynthResult, make_stack: Callable[[dict[str, Any]], Path]
) -> None:
    """A key set with `pulumi config set --secret` would be in platformConfig: the whole output
    turns secret instead of leaking it, and the job stack still reads it."""
    assert "jobPlatform" not in dev.secret_outputs
    config = stack_values("dev")
    config["gpu-platform:tags"] = {"cost-center": {"secure": "v1:AAAA"}}
    platform = run_program("t", root=make_stack(config))
    assert "jobPlatform" in platform.secret_outputs
    jobs = run_job_stack("research-dev", platform=platform)
    assert jobs.of_type("kubernetes:batch/v1:Job")


def test_the_contract_version_follows_the_config_model() -> None:
    """A job stack rebuilds the platform's StackConfig from `platformConfig`: any change to the
    model (a key added, a default changed) must change the version, with no one to remember a
    bump (tests/contract/test_schema.py holds the rest of the rule)."""
    from pydantic import Field

    class Widened(StackConfig):
        extra_key: int = Field(default=1, alias="extraKey")

    class Redefaulted(StackConfig):
        extra_key: int = Field(default=2, alias="extraKey")

    class WidenedPlatform(PlatformContract):
        platform_config: Widened

    class RedefaultedPlatform(PlatformContract):
        platform_config: Redefaulted

    versions = {
        model.current_version()
        for model in (PlatformContract, WidenedPlatform, RedefaultedPlatform)
    }
    assert len(versions) == 3
