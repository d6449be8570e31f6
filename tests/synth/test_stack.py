"""Whole-program tests: both stacks synthesize, deterministically, with explicit providers,
and every Kubernetes manifest passes the upstream-schema validator (synth/validate.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from synth import output, report
from synth import validate as validate_cli
from synth.harness import PROJECT_ROOT, SynthResult, run_program


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_registers_typed_resources(stack: str, dev: SynthResult, prod: SynthResult) -> None:
    result = {"dev": dev, "prod": prod}[stack]
    assert len(result.resources) > 20
    types = {r.type for r in result.resources}
    assert {"eks:index:Cluster", "eks:index:ManagedNodeGroup", "aws:ec2/vpc:Vpc"} <= types


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_kubernetes_resource_names_the_explicit_provider(
    stack: str, dev: SynthResult, prod: SynthResult
) -> None:
    # Mocks don't enforce disable-default-providers; this test does.
    result = {"dev": dev, "prod": prod}[stack]
    (provider,) = result.of_type("pulumi:providers:kubernetes")
    k8s = [r for r in result.resources if r.type.startswith("kubernetes:")]
    assert k8s, "no Kubernetes resources captured"
    for resource in k8s:
        assert resource.provider.startswith(provider.urn + "::"), resource.urn


def test_default_kubernetes_provider_is_disabled_in_the_project() -> None:
    project = yaml.safe_load((PROJECT_ROOT / "Pulumi.yaml").read_text())
    assert project["config"]["pulumi:disable-default-providers"]["value"] == ["kubernetes"]
    assert project["name"] == "gpu-platform"


def test_every_manifest_has_an_explicit_name(prod: SynthResult, dev: SynthResult) -> None:
    for result in (dev, prod):
        objects = output.manifests(result)
        assert objects
        assert all(o["metadata"].get("name") for o in objects)


def test_synth_is_deterministic(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    output.write(run_program("prod"), first)
    output.write(run_program("prod"), second)
    for name in ("resources.json", "manifests.yaml", "helm-releases.yaml", "report.md"):
        assert (first / name).read_bytes() == (second / name).read_bytes(), name


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_output_does_not_depend_on_echoing_nested_inputs(stack: str, tmp_path: Path) -> None:
    # The mocks echo only scalar inputs as outputs (harness.CapturingMonitor): the program must
    # read nothing else back, or synth would differ from `pulumi up`, where everything echoes.
    output.write(run_program(stack), tmp_path / "scalar")
    output.write(run_program(stack, echo_nested=True), tmp_path / "full")
    for name in ("resources.json", "manifests.yaml", "helm-releases.yaml", "report.md"):
        assert (tmp_path / "scalar" / name).read_bytes() == (tmp_path / "full" / name).read_bytes()


def test_report_lists_node_groups_with_gpu_capacity(prod_static: SynthResult) -> None:
    text = report.report(prod_static)
    assert "| h100-od | h100-x8 | on-demand | p5.48xlarge | 1/2 | 8 | 16 |" in text
    assert "| l4-spot | l4-x1 | spot |" in text
    assert "## Resources by type" in text


def test_secrets_are_stubbed_in_resources_json(prod: SynthResult) -> None:
    assert output.is_manifest(prod.of_type("kubernetes:storage.k8s.io/v1:StorageClass")[0])
    text = str([r.to_json() for r in prod.resources])
    # Nothing key-like leaks (secret inputs are "[secret]"): the one PEM is the public key of
    # the platform's signing key, which the signature policy verifies with.
    assert text.count("-----BEGIN ") == text.count("-----BEGIN PUBLIC KEY-----") == 1
    assert "synth-registry-token" not in text  # the ECR push credentials


def test_all_manifests_pass_the_upstream_schema_validator(
    dev: SynthResult,
    prod: SynthResult,
    prod_use1: SynthResult,
    prod_usw2: SynthResult,
    fleet_prod: SynthResult,
    pretrain_fleet: SynthResult,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Through the CLI on the written manifests.yaml files: what CI runs on build/<stack>/
    # (the fleet's workers, manager and job stack included: MultiKueue's CRDs are vendored).
    files, count = [], 0
    for stack, result in (
        ("dev", dev),
        ("prod", prod),
        ("prod-use1", prod_use1),
        ("prod-usw2", prod_usw2),
        ("fleet-prod", fleet_prod),
        ("pretrain-fleet", pretrain_fleet),
    ):
        output.write(result, tmp_path / stack)
        files.append(str(tmp_path / stack / "manifests.yaml"))
        count += len(output.manifests(result))
    assert count > 100
    rc = validate_cli.main(files)
    out = capsys.readouterr().out
    assert out.splitlines() == [f"validated {count} objects: {count} ok, 0 failed"], out[-3000:]
    assert rc == 0
