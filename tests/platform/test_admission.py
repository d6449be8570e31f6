"""Trusted images at admission: the ValidatingAdmissionPolicy's own CEL evaluated offline on a
violating and a compliant object (tag-only, foreign registry, init container, and the stacks'
real jobs), its binding per stack, and Kyverno's signature policy and chart values."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.config.security import ImageAdmissionConfig, SignatureConfig
from components.platform.cluster.iam import AwsAccount
from components.platform.registry import admission
from synth import __main__ as synth_cli
from synth import output
from synth.harness import SynthResult
from tests.conftest import stack_values, values_with_jobs
from tests.platform.cel_eval import admit
from tests.platform.test_security_charts import chart_missing_keys

ACCOUNT = AwsAccount(account_id="123456789012", region="us-east-1", partition="aws")
ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
DIGEST = "@sha256:" + "0" * 64
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
IVP = "kubernetes:policies.kyverno.io/v1beta1:ImageValidatingPolicy"


def _policy(require_digest: bool = True) -> dict[str, Any]:
    registries = admission.allowed_registries(ImageAdmissionConfig(), ACCOUNT)
    pattern = admission.image_pattern(registries, require_digest=require_digest)
    return admission.trusted_images_policy(pattern)


def _pod(image: str, init_image: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": image}]}
    if init_image:
        spec["initContainers"] = [{"name": "i", "image": init_image}]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


def _job(image: str) -> dict[str, Any]:
    pod = _pod(image)
    return {"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": pod["spec"]}}}


@pytest.mark.parametrize(
    ("image", "admitted"),
    [
        (f"{ECR}/trainer:1.0{DIGEST}", True),
        (f"{ECR}/ptc/k8s/pause{DIGEST}", True),
        (f"ghcr.io/gpu-platform/trainer:0.1.0{DIGEST}", True),
        ("ghcr.io/gpu-platform/trainer:0.1.0", False),  # tag only
        (f"ghcr.io/someone-else/trainer:0.1.0{DIGEST}", False),  # org not allowed
        (f"nvcr.io/nvidia/pytorch:25.01-py3{DIGEST}", False),  # registry not allowed
        (f"{ECR}.evil.example/trainer{DIGEST}", False),  # host suffix trick
        (f"evil.example/{ECR}/trainer{DIGEST}", False),
    ],
)
def test_policy_cel_admits_only_allowed_registries_by_digest(image: str, admitted: bool) -> None:
    policy = _policy()
    for obj in (_pod(image), _job(image)):
        ok, messages = admit(policy, obj)
        assert ok is admitted, (image, messages)
        if not ok:
            assert image in messages[0]
    # The Python pattern the CrossGuard rule applies agrees with the CEL.
    pattern = policy["metadata"]["annotations"][admission.PATTERN_ANNOTATION]
    assert (re.fullmatch(pattern, image) is not None) is admitted


def test_policy_cel_checks_init_containers_too() -> None:
    good = f"{ECR}/trainer:1.0{DIGEST}"
    assert admit(_policy(), _pod(good))[0]
    assert not admit(_policy(), _pod(good, init_image="busybox:1.36"))[0]


def test_without_required_digest_tags_pass_but_registries_still_count() -> None:
    policy = _policy(require_digest=False)
    assert admit(policy, _pod("ghcr.io/gpu-platform/trainer:0.1.0"))[0]
    assert not admit(policy, _pod("docker.io/library/python:3.11"))[0]


def test_prod_denies_in_team_namespaces_and_admits_its_own_jobs(prod_jobs: SynthResult) -> None:
    (vap,) = prod_jobs.of_type(VAP)
    (binding,) = prod_jobs.of_type(BINDING)
    assert binding.inputs["spec"]["validationActions"] == ["Deny"]
    selector = binding.inputs["spec"]["matchResources"]["namespaceSelector"]
    assert selector == {"matchExpressions": [{"key": "gpu-platform.io/team", "operator": "Exists"}]}
    policy = {"spec": vap.inputs["spec"]}
    manifests = output.manifests(prod_jobs)
    jobs = [m for m in manifests if m["kind"] == "Job" and m["apiVersion"] == "batch/v1"]
    team_jobs = [j for j in jobs if j["metadata"]["namespace"].startswith("team-")]
    assert team_jobs
    for job in team_jobs:
        assert admit(policy, job) == (True, []), job["metadata"]["name"]
        # The same job with its digest removed is rejected.
        tagged = copy.deepcopy(job)
        container = tagged["spec"]["template"]["spec"]["containers"][0]
        container["image"] = container["image"].split("@")[0]
        assert not admit(policy, tagged)[0]


def test_dev_audits_instead_of_denying(dev: SynthResult) -> None:
    (binding,) = dev.of_type(BINDING)
    assert binding.inputs["spec"]["validationActions"] == ["Audit", "Warn"]
    (ivp,) = dev.of_type(IVP)
    assert ivp.inputs["spec"]["validationActions"] == ["Audit"]


def test_prod_verifies_signatures_with_kyverno(prod: SynthResult) -> None:
    (ivp,) = prod.of_type(IVP)
    spec = ivp.inputs["spec"]
    assert spec["validationActions"] == ["Deny"]
    assert spec["validationConfigurations"] == {
        "mutateDigest": False,
        "verifyDigest": True,
        "required": True,
    }
    # The one trusted signer: the platform key, by its public key read from KMS at deploy
    # time, without a transparency log (the deploy signs with --tlog-upload=false).
    (attestor,) = spec["attestors"]
    assert attestor["cosign"]["key"]["data"].startswith("-----BEGIN PUBLIC KEY-----")
    assert attestor["cosign"]["ctlog"] == {"insecureIgnoreTlog": True}
    assert "keyless" not in attestor["cosign"]
    assert "verifyImageSignatures" in spec["validations"][0]["expression"]
    globs = [ref["glob"] for ref in spec["matchImageReferences"]]
    assert globs[0].endswith(".dkr.ecr.us-east-1.amazonaws.com/*")
    assert globs[1:] == ["ghcr.io/gpu-platform/*"]
    releases = {r.inputs["chart"]: r for r in prod.of_type("kubernetes:helm.sh/v3:Release")}
    assert releases["kyverno"].inputs["version"] == "3.9.0"


def test_a_public_key_or_a_keyless_identity_replaces_the_platform_key() -> None:
    key = "-----BEGIN PUBLIC KEY-----\nMFkw\n-----END PUBLIC KEY-----\n"
    signatures = SignatureConfig(platform_key=False, public_key=key)
    assert admission.attestor(signatures)["cosign"] == {"key": {"data": key}}
    keyless = SignatureConfig(
        platform_key=False,
        keyless_issuer="https://token.actions.githubusercontent.com",
        keyless_subject_regexp="^x$",
    )
    assert admission.attestor(keyless)["cosign"]["keyless"]["identities"] == [
        {"issuer": "https://token.actions.githubusercontent.com", "subjectRegExp": "^x$"}
    ]
    # The platform signer needs the key's public half (the deploy reads it from KMS).
    with pytest.raises(ValueError, match="public key"):
        admission.attestor(SignatureConfig())


@pytest.mark.parametrize(
    ("fields", "key"),
    [
        ({"public_key": "-----BEGIN PUBLIC KEY-----"}, "platformKey"),
        ({"platform_key": False}, "platformKey"),
        ({"platform_key": False, "keyless_issuer": "https://issuer"}, "keylessSubjectRegexp"),
    ],
)
def test_signatures_need_exactly_one_signer(fields: dict[str, Any], key: str) -> None:
    with pytest.raises(ValueError, match=key):
        SignatureConfig(**fields)


def test_kyverno_values_exist_in_the_chart() -> None:
    assert chart_missing_keys("kyverno", admission.kyverno_values()) == []
    assert chart_missing_keys("kyverno", {"admissionController": {"nope": 1}}) == [
        "admissionController.nope"
    ]


def _synth_with_image(
    make_stack: Callable[[dict[str, Any]], Path], stack: str, image: str
) -> tuple[int, list[str], Path]:
    # prod declares its jobs in the teams' job stacks: put them in the platform for this check.
    config = copy.deepcopy(values_with_jobs(stack) if stack == "prod" else stack_values(stack))
    config["gpu-platform:trainingJobs"][0]["image"] = image
    project = make_stack(config)
    rc = synth_cli.main(["--stack", "t", "--project-dir", str(project)])
    report = project / "build" / "t" / "policy-report.json"
    violations = json.loads(report.read_text())["violations"] if report.exists() else []
    return rc, [v["policy"] for v in violations if v["enforcement"] == "mandatory"], project


def test_synth_flags_an_image_prod_admission_would_reject(
    make_stack: Callable[[dict[str, Any]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # A job whose image admission (Deny) rejects cannot run: a config error naming the image,
    # before anything is registered (components/analysis/images.py). The policy rule
    # gpu-platform-k8s-trusted-images is the second line (tests/policies/security_cases.py).
    foreign = "docker.io/someone/trainer:1.0@sha256:" + "c" * 64
    capsys.readouterr()
    rc, mandatory, project = _synth_with_image(make_stack, "prod", foreign)
    err = capsys.readouterr().err
    assert rc == synth_cli.EXIT_CONFIG and mandatory == []
    assert f'gpu-platform:trainingJobs[0].image: got "{foreign}"' in err
    assert "trusted-images admission policy denies" in err
    assert not (project / "build").exists()


def test_dev_reports_the_same_image_without_failing(
    make_stack: Callable[[dict[str, Any]], Path],
) -> None:
    foreign = "docker.io/someone/trainer:1.0@sha256:" + "c" * 64
    rc, mandatory, project = _synth_with_image(make_stack, "dev", foreign)
    assert rc == 0 and mandatory == []
    report = json.loads((project / "build" / "t" / "policy-report.json").read_text())
    assert [
        v["enforcement"]
        for v in report["violations"]
        if v["policy"] == "gpu-platform-k8s-trusted-images"
    ] == ["advisory"]
