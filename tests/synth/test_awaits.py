"""What `pulumi up` waits for, made explicit: training launchers skip the Job await and are
replaced delete-first, every Helm release has an explicit timeout and atomic flag, and the mock
runtime's ARNs look like AWS's."""

from __future__ import annotations

import pytest

from synth.harness import SynthResult

TRAINING_TYPES = (
    "kubernetes:batch/v1:Job",
    "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",
    "kubernetes:batch.volcano.sh/v1alpha1:Job",
)


def _launchers(result: SynthResult) -> list:
    return [
        r
        for r in result.resources
        if r.type in TRAINING_TYPES
        and "gpu-platform.io/launcher" in (r.inputs.get("metadata", {}).get("annotations") or {})
    ]


@pytest.mark.parametrize("stack", ["dev", "prod_jobs"])
def test_training_launchers_skip_the_await_and_replace_delete_first(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    launchers = _launchers(result)
    assert launchers
    for resource in launchers:
        annotations = resource.inputs["metadata"]["annotations"]
        assert annotations["pulumi.com/skipAwait"] == "true", resource.name
        assert resource.delete_before_replace, resource.name
        paths = resource.replace_on_changes
        assert paths and "spec.suspend" not in paths and "spec" not in paths, resource.name
        template = "spec.template" if resource.type.endswith("batch/v1:Job") else None
        assert template is None or template in paths, resource.name


def test_side_objects_of_a_job_are_updated_in_place(dev: SynthResult) -> None:
    services = [
        r
        for r in dev.of_type("kubernetes:core/v1:Service")
        if r.inputs.get("spec", {}).get("clusterIP") == "None"
    ]
    assert services
    assert not any(r.delete_before_replace for r in services)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_validation_jobs_skip_the_await(stack: str, request: pytest.FixtureRequest) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    jobs = [
        r
        for r in result.of_type("kubernetes:batch/v1:Job")
        if r.inputs["metadata"].get("namespace") == "gpu-validation"
    ]
    if stack == "prod":
        assert not jobs  # validation is off in prod
        return
    assert jobs
    assert all(r.inputs["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true" for r in jobs)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_helm_release_has_an_explicit_timeout_and_atomic(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    releases = result.of_type("kubernetes:helm.sh/v3:Release")
    assert len(releases) >= 7
    for release in releases:
        assert release.inputs.get("timeout", 0) >= 300, release.name
        assert release.inputs.get("atomic") is True, release.name
    gpu = next(r for r in releases if r.inputs.get("name") == "gpu-operator")
    assert (
        gpu.inputs["timeout"]
        > max(r.inputs["timeout"] for r in releases if r.inputs.get("name") != "gpu-operator") - 1
    )


def test_mock_file_system_arns_use_the_iam_service_prefix(
    dev: SynthResult, prod: SynthResult
) -> None:
    from pulumi.runtime.mocks import MockResourceArgs

    from synth.mocks import PlatformMocks

    mocks = PlatformMocks("us-east-1")
    _, efs = mocks.new_resource(
        MockResourceArgs("aws:efs/fileSystem:FileSystem", "fs", {}, "", "", False)
    )
    _, fsx = mocks.new_resource(
        MockResourceArgs("aws:fsx/lustreFileSystem:LustreFileSystem", "fs", {}, "", "", False)
    )
    assert efs["arn"].startswith("arn:aws:elasticfilesystem:us-east-1:123456789012:file-system/fs-")
    assert efs["dnsName"].endswith(".efs.us-east-1.amazonaws.com")
    assert fsx["arn"].startswith("arn:aws:fsx:us-east-1:123456789012:file-system/fs-")
    # The EFS CSI role's policy is scoped to that ARN in the synthesized stack.
    policies = [
        r.inputs["policy"]
        for r in dev.of_type("aws:iam/rolePolicy:RolePolicy")
        if "elasticfilesystem:CreateAccessPoint" in str(r.inputs.get("policy"))
    ]
    assert policies and all(":efs:" not in p for p in policies)
