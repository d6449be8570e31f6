"""The reference trainer the deploy produces (components/platform/registry/trainer_image.py): the
build resource's inputs (context, Dockerfile, push target, platform, cache), the signing step, and
every job's, runtime's and job stack's image input being that build's digest output — or, with
the build off, a published tag's digest resolved at deploy. Nothing here builds or pushes: the
mocks answer for the registry (synth/mocks.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components import catalog
from components.config import trainer_runtime_names
from components.platform.registry.trainer_image import (
    CONTEXT_TAG_PREFIX,
    PIN_SCRIPT,
    STAGING_TAG,
    context_files,
    context_tag,
    pin_tag,
)
from synth import output
from synth.harness import PROJECT_ROOT, SynthResult, run_program
from synth.mocks import _digest

IMAGE = "docker-build:index:Image"
COMMAND = "command:local:Command"
ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"


def _pod_images(result: SynthResult, prefix: str = "team-") -> dict[str, str]:
    """kind/name -> the image of every container of every team workload and runtime."""
    found: dict[str, str] = {}

    def walk(value: Any, where: str) -> None:
        if isinstance(value, dict):
            for container in value.get("containers") or []:
                if isinstance(container, dict) and "image" in container:
                    found[f"{where}/{container.get('name')}"] = container["image"]
            for item in value.values():
                walk(item, where)
        elif isinstance(value, list):
            for item in value:
                walk(item, where)

    for manifest in output.manifests(result):
        namespace = manifest["metadata"].get("namespace", "")
        if namespace.startswith(prefix) or manifest["kind"] == "ClusterTrainingRuntime":
            walk(manifest.get("spec"), f"{manifest['kind']}/{manifest['metadata']['name']}")
    return found


def test_the_build_pushes_images_trainer_to_the_platforms_repository(dev: SynthResult) -> None:
    (image,) = dev.of_type(IMAGE)
    inputs = image.inputs
    repository = f"{ECR}/gpu-dev/trainer"
    assert inputs["push"] is True
    # The staging tag, which the repository lets move: a second push never fails on it.
    assert inputs["tags"] == [f"{repository}:{STAGING_TAG}"]
    assert catalog.ecr_tag_moves(STAGING_TAG)
    # A replacement must not delete a digest job stacks still run (the provider's Delete does).
    assert image.retain_on_delete
    assert inputs["context"] == {"location": "images/trainer"}
    assert inputs["dockerfile"] == {"location": "images/trainer/Dockerfile"}
    assert inputs["platforms"] == ["linux/amd64"]
    # A preview never pushes; the digest is known after `up` only.
    assert inputs["buildOnPreview"] is False
    # ECR takes the registry cache only as an image manifest with OCI media types.
    assert inputs["cacheFrom"] == [{"registry": {"ref": f"{repository}:buildcache"}}]
    (cache_to,) = inputs["cacheTo"]
    assert cache_to["registry"]["ref"] == f"{repository}:buildcache"
    assert cache_to["registry"]["imageManifest"] is True
    assert cache_to["registry"]["ociMediaTypes"] is True
    assert cache_to["registry"]["mode"] == "max"
    (registry,) = inputs["registries"]
    assert registry == {"address": repository, "username": "AWS", "password": "[secret]"}


def test_every_job_and_runtime_runs_the_digest_the_push_returned(dev: SynthResult) -> None:
    (image,) = dev.of_type(IMAGE)
    # What the mocked registry answers for this push (synth/mocks.py): the digest flows from
    # the build resource's output, not from any constant.
    digest = "sha256:" + _digest(IMAGE, image.name, json.dumps(image.inputs["tags"]))
    pinned = f"{ECR}/gpu-dev/trainer@{digest}"
    images = _pod_images(dev)
    assert images and set(images.values()) == {pinned}, images
    runtimes = {k for k in images if k.startswith("ClusterTrainingRuntime/")}
    assert runtimes == {f"ClusterTrainingRuntime/{name}/node" for name in trainer_runtime_names()}
    assert dev.outputs["trainerImage"] == pinned
    assert dev.outputs["jobPlatform"]["trainerImage"] == pinned


def test_the_signing_step_signs_that_digest_with_the_platform_key_before_any_job(
    dev: SynthResult,
) -> None:
    (image,) = dev.of_type(IMAGE)
    sign = dev.named(f"{image.name}-sign")
    (key,) = [k for k in dev.of_type("aws:kms/key:Key") if k.name == "registry-signing-key"]
    env = sign.inputs["environment"]
    # The platform's signing key, by the ARN the mocked KMS gave it (synth/mocks.py).
    key_id = _digest(key.type, key.name)[:8] + "-mock-key"
    assert env["SIGNING_KEY"] == f"awskms:///arn:aws:kms:us-east-1:123456789012:key/{key_id}"
    assert set(_pod_images(dev).values()) == {env["IMAGE"]}
    # Signed again only for a new digest; never before the push.
    assert sign.inputs["triggers"] == [env["IMAGE"].split("@")[1]]
    assert image.urn in sign.dependencies
    assert "cosign sign" in sign.inputs["create"] and "cosign verify" in sign.inputs["create"]
    # Every training launcher waits for the signature (admission denies an unsigned image).
    launchers = [
        r
        for r in dev.resources
        if r.custom
        and r.type.startswith("kubernetes:")
        and (r.inputs.get("metadata") or {}).get("namespace", "").startswith("team-")
        and r.type.rsplit(":", 1)[-1] in ("Job", "TrainJob")
    ]
    assert launchers
    for launcher in launchers:
        assert sign.urn in launcher.dependencies, launcher.name


@pytest.fixture(scope="module")
def usw2_building() -> SynthResult:
    """prod-usw2 building its own trainer (no fleet.trainerHome): a stack in us-west-2 that
    signs."""
    return run_program("prod-usw2", overrides={"gpu-platform:fleet": {"name": "prod"}})


@pytest.mark.parametrize("stack", ["dev", "prod", "prod_use1", "usw2_building"])
def test_cosign_signs_in_the_signing_keys_region(
    stack: str, request: pytest.FixtureRequest
) -> None:
    # cosign's KMS client takes its region from the environment, never from the key ARN
    # (trainer_image.py docstring): the sign step names the key's region itself, so a worker in
    # us-west-2 signs there whatever region the deploy's credentials were configured for.
    from synth.region import stack_region

    result: SynthResult = request.getfixturevalue(stack)
    region = stack_region("prod-usw2" if stack == "usw2_building" else stack.replace("_", "-"))
    signs = [c for c in result.of_type(COMMAND) if "SIGNING_KEY" in c.inputs["environment"]]
    assert signs, stack
    for sign in signs:
        env = sign.inputs["environment"]
        key_region = env["SIGNING_KEY"].removeprefix("awskms:///").split(":")[3]
        assert env["AWS_REGION"] == key_region == region


def test_kms_key_region_reads_the_arn_and_refuses_anything_else() -> None:
    from components.platform.registry.trainer_image import kms_key_region

    assert kms_key_region("arn:aws:kms:us-west-2:123456789012:key/abcd") == "us-west-2"
    assert kms_key_region("arn:aws-cn:kms:cn-north-1:123456789012:key/abcd") == "cn-north-1"
    with pytest.raises(ValueError, match="not a KMS key ARN"):
        kms_key_region("alias/gpu-dev-image-signing")


def test_the_signed_digest_gets_its_immutable_pin_tag_before_any_job_runs_it(
    dev: SynthResult,
) -> None:
    (image,) = dev.of_type(IMAGE)
    sign, pin = (dev.named(f"{image.name}-{step}") for step in ("sign", "pin"))
    env = pin.inputs["environment"]
    digest = sign.inputs["environment"]["IMAGE"].split("@")[1]
    tag = pin_tag(context_tag(PROJECT_ROOT / "images" / "trainer"), digest)
    assert env == {
        "IMAGE": f"{ECR}/gpu-dev/trainer@{digest}",
        "PIN": f"{ECR}/gpu-dev/trainer:{tag}",
    }
    assert pin.inputs["create"] == PIN_SCRIPT and "cosign copy" in PIN_SCRIPT
    assert "--force" not in PIN_SCRIPT and " -f " not in PIN_SCRIPT  # never overwrite a tag
    # Immutable (no mutability exclusion matches it), after the signature, once per digest.
    assert not catalog.ecr_tag_moves(tag)
    assert sign.urn in pin.dependencies and pin.inputs["triggers"] == [digest]
    # Jobs are handed the digest only once it is pinned: nothing they run can expire.
    launchers = [
        r
        for r in dev.resources
        if r.type
        in ("kubernetes:batch/v1:Job", "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob")
        and (r.inputs.get("metadata") or {}).get("namespace", "").startswith("team-")
    ]
    assert launchers and all(pin.urn in r.dependencies for r in launchers)


def test_pin_tags_name_their_digest() -> None:
    digest = "sha256:" + "ab" * 32
    assert pin_tag("ctx-0123456789abcdef", digest) == "ctx-0123456789abcdef-abababababababab"
    with pytest.raises(ValueError, match="not a sha256 digest"):
        pin_tag("ctx-0123456789abcdef", "md5:00")


@pytest.mark.parametrize("tag", ["build", "buildcache", "sha256-" + "0" * 64 + ".sig"])
def test_a_published_tag_the_tools_move_is_refused(tag: str, expect_config_error: Any) -> None:
    from tests.conftest import stack_values

    config = {
        **stack_values("dev"),
        "gpu-platform:images": {"trainer": {"build": False, "tag": tag}},
    }
    expect_config_error(config, "gpu-platform:images.trainer.tag", "a tag that never moves")


def test_a_dev_job_resolving_a_tag_the_tools_move_is_refused(expect_config_error: Any) -> None:
    from tests.conftest import stack_values

    jobs = _dev_jobs_with_image(f"{ECR}/gpu-dev/teams/research/llm:build")
    config = {**stack_values("dev"), "gpu-platform:trainingJobs": jobs}
    expect_config_error(config, "gpu-platform:trainingJobs[0].image", "a tag that never moves")


def test_job_stacks_run_the_platforms_trainer_by_its_pushed_digest(
    dev: SynthResult, research_dev: SynthResult
) -> None:
    images = _pod_images(research_dev)
    assert images and set(images.values()) == {dev.outputs["trainerImage"]}


def test_with_the_build_off_a_published_tag_is_resolved_to_its_digest() -> None:
    images = {"trainer": {"build": False, "tag": "ctx-0123456789abcdef"}}
    result = run_program("dev", overrides={"gpu-platform:images": images})
    assert not result.of_type(IMAGE) and not result.of_type(COMMAND)
    digest = "sha256:" + _digest("ecr", "gpu-dev/trainer", "ctx-0123456789abcdef")
    assert set(_pod_images(result).values()) == {f"{ECR}/gpu-dev/trainer@{digest}"}


def test_a_published_tag_that_is_absent_stops_the_program_naming_it() -> None:
    images = {"trainer": {"build": False, "tag": "ctx-missing"}}
    with pytest.raises(pulumi.RunError) as caught:
        run_program("dev", overrides={"gpu-platform:images": images}, published={})
    assert str(caught.value).startswith(
        "gpu-platform:images.trainer.tag: got 'ctx-missing'; a tag published in ECR repository "
        "gpu-dev/trainer (it holds: none)"
    )


def _dev_jobs_with_image(image: str) -> list[dict[str, Any]]:
    from tests.conftest import stack_values

    jobs = stack_values("dev")["gpu-platform:trainingJobs"]
    return [{**jobs[0], "image": image}, *jobs[1:]]


def test_a_dev_jobs_own_ecr_tag_is_resolved_at_deploy() -> None:
    jobs = _dev_jobs_with_image(f"{ECR}/gpu-dev/teams/research/llm:7")
    result = run_program("dev", overrides={"gpu-platform:trainingJobs": jobs})
    digest = "sha256:" + _digest("ecr", "gpu-dev/teams/research/llm", "7")
    images = _pod_images(result)
    assert f"{ECR}/gpu-dev/teams/research/llm@{digest}" in images.values()
    with pytest.raises(pulumi.RunError, match=r"gpu-platform:trainingJobs\[0\]\.image: got '7'"):
        run_program("dev", overrides={"gpu-platform:trainingJobs": jobs}, published={})


def test_the_tag_follows_the_files_docker_build_reads(tmp_path: Path) -> None:
    context = tmp_path / "ctx"
    (context / "pkg").mkdir(parents=True)
    (context / "Dockerfile").write_text("FROM scratch\n")
    (context / "pkg" / "a.py").write_text("x = 1\n")
    (context / ".dockerignore").write_text("**/__pycache__\nREADME.md\n")
    first = context_tag(context)
    assert first.startswith(CONTEXT_TAG_PREFIX) and len(first) == len(CONTEXT_TAG_PREFIX) + 16
    # Ignored files change nothing; a file the build reads changes the tag.
    (context / "README.md").write_text("notes\n")
    (context / "pkg" / "__pycache__").mkdir()
    (context / "pkg" / "__pycache__" / "a.pyc").write_bytes(b"\0")
    assert context_tag(context) == first
    (context / "pkg" / "a.py").write_text("x = 2\n")
    assert context_tag(context) != first


def test_the_trainer_context_sends_what_the_dockerfile_copies() -> None:
    context = PROJECT_ROOT / "images" / "trainer"
    sent = {p.relative_to(context).as_posix() for p in context_files(context)}
    assert {"Dockerfile", "requirements.txt", "gpt_trainer/train.py"} <= sent
    assert not [p for p in sent if "__pycache__" in p or p.startswith("bench_")]


def test_will_it_run_names_each_jobs_image_source(dev: SynthResult) -> None:
    from synth.report_plan import will_it_run

    text = will_it_run(dev)
    assert text.count("- image: the reference trainer, built by the platform stack's deploy") == 4
    jobs = _dev_jobs_with_image(f"{ECR}/gpu-dev/teams/research/llm:7")
    jobs[1] = {**jobs[1], "image": f"{ECR}/gpu-dev/teams/applied/x@sha256:" + "c" * 64}
    mixed = will_it_run(run_program("dev", overrides={"gpu-platform:trainingJobs": jobs}))
    assert "- image: resolved at deploy: ECR `gpu-dev/teams/research/llm:7`" in mixed
    assert "- image: given by digest: " in mixed
