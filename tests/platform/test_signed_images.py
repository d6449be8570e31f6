"""Signed images at admission: the ImageValidatingPolicy the stacks render, evaluated offline
with Kyverno v1.19.0's semantics (tests/platform/ivpol_eval.py) against real cosign key
signatures in a fake registry (tests/platform/cosign_registry.py), together with the
ValidatingAdmissionPolicy (tests/platform/cel_eval.py): what a team pod meets in prod (Deny)
and dev (Audit).

Prod's config holds a keyless identity (GitHub OIDC), which the evaluator does not model
(Fulcio chains, SCTs): these tests render prod with `signatures.publicKey` set to a PEM key
generated here instead — the same policy with the key attestor, every other input prod's own.
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from synth import output
from synth.harness import SynthResult, run_program
from synth.jobs import run_job_stack
from synth.report_security import security_section
from tests.conftest import values_with_jobs
from tests.platform import cel_eval
from tests.platform.cosign_registry import (
    Registry,
    RekorLog,
    new_key,
    public_pem,
    simple_signing_payload,
)
from tests.platform.ivpol_eval import (
    Decision,
    NotModelledError,
    TrustRoot,
    admit,
    selector_matches,
)

IVP = "kubernetes:policies.kyverno.io/v1beta1:ImageValidatingPolicy"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
REPO = "ghcr.io/gpu-platform/trainer"
DIGEST = "sha256:3b1f0c6f1d0e2a4c5b7d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"
OTHER_DIGEST = "sha256:" + "e" * 64
SIGNED = f"{REPO}:0.1.0@{DIGEST}"


@pytest.fixture(scope="module")
def release_key() -> ec.EllipticCurvePrivateKey:
    return new_key()


@pytest.fixture(scope="module")
def rekor() -> RekorLog:
    return RekorLog(new_key())


def _render(stack: str, public_key: str) -> SynthResult:
    values = values_with_jobs(stack)
    security = copy.deepcopy(values.get("gpu-platform:security", {}))
    admission = security.setdefault("imageAdmission", {})
    admission["signatures"] = {
        "keylessIssuer": None,
        "keylessSubjectRegexp": None,
        "publicKey": public_key,
    }
    return run_program(
        stack,
        overrides={
            "gpu-platform:security": security,
            "gpu-platform:trainingJobs": values["gpu-platform:trainingJobs"],
        },
    )


@pytest.fixture(scope="module")
def prod_key(release_key: ec.EllipticCurvePrivateKey) -> SynthResult:
    return _render("prod", public_pem(release_key))


@pytest.fixture(scope="module")
def dev_key(release_key: ec.EllipticCurvePrivateKey) -> SynthResult:
    return _render("dev", public_pem(release_key))


def _policy(result: SynthResult, kind: str = IVP) -> dict[str, Any]:
    (reg,) = result.of_type(kind)
    return {"metadata": reg.inputs["metadata"], "spec": reg.inputs["spec"]}


def _namespace(result: SynthResult, name: str) -> dict[str, Any]:
    (ns,) = [
        m
        for m in output.manifests(result)
        if m["kind"] == "Namespace" and m["metadata"]["name"] == name
    ]
    return ns


def _team_job(result: SynthResult) -> dict[str, Any]:
    jobs = [
        m
        for m in output.manifests(result)
        if m["kind"] == "Job" and m["metadata"].get("namespace", "").startswith("team-")
    ]
    assert jobs
    return copy.deepcopy(jobs[0])


def _pod(
    image: str, namespace: str = "team-pretrain", init_image: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [{"name": "node", "image": image}]}
    if init_image:
        spec["initContainers"] = [{"name": "init", "image": init_image}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": namespace},
        "spec": spec,
    }


def _registry(key: ec.EllipticCurvePrivateKey | None, rekor: RekorLog | None) -> Registry:
    registry = Registry()
    registry.push(REPO, DIGEST)
    if key is not None:
        registry.sign(REPO, DIGEST, key, rekor)
    return registry


def _both(
    result: SynthResult,
    obj: dict[str, Any],
    namespace: dict[str, Any],
    registry: Registry,
    trust: TrustRoot,
) -> tuple[bool, Decision, bool]:
    """(admitted by the cluster, Kyverno's decision, admitted by the VAP): both webhooks must
    admit. The VAP binding's namespaceSelector and actions as the API server applies them."""
    decision = admit(_policy(result), obj, namespace, registry, trust)
    binding = _policy(result, BINDING)["spec"]
    labels = namespace["metadata"].get("labels", {})
    vap_ok = True
    selected = selector_matches(binding["matchResources"]["namespaceSelector"], labels)
    if selected and obj["kind"] in ("Pod", "Job"):
        ok, _ = cel_eval.admit(_policy(result, VAP), obj)
        vap_ok = ok or "Deny" not in binding["validationActions"]
    return decision.allowed and vap_ok, decision, vap_ok


# --- prod: Deny -------------------------------------------------------------------------------


def test_prod_admits_an_image_signed_by_the_configured_key(
    prod_key: SynthResult, release_key: ec.EllipticCurvePrivateKey, rekor: RekorLog
) -> None:
    ns = _namespace(prod_key, "team-pretrain")
    allowed, decision, _ = _both(
        prod_key, _pod(SIGNED), ns, _registry(release_key, rekor), TrustRoot((rekor,))
    )
    assert decision.matched and decision.status == "pass", decision
    assert decision.checked_images == [SIGNED]
    assert allowed


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ("unsigned", "every image must be signed by the platform's release identity"),
        ("other key", "every image must be signed by the platform's release identity"),
        # cosign --tlog-upload=false: without ctlog in the attestor Kyverno verifies offline
        # against Rekor's keys from the TUF root and needs the bundle.
        ("no rekor bundle", "every image must be signed by the platform's release identity"),
        # the same signature attached to another digest: the payload names the digest.
        ("replayed signature", "every image must be signed by the platform's release identity"),
        # a Rekor log the trusted root does not hold, or whose key is not valid yet.
        ("untrusted rekor", "every image must be signed by the platform's release identity"),
        (
            "rekor key not yet valid",
            "every image must be signed by the platform's release identity",
        ),
        # another key's signature in an entry naming the release key: the signature check.
        ("forged signature", "every image must be signed by the platform's release identity"),
        # a payload other than the one signed and logged: the bundle's payload hash.
        ("swapped payload", "every image must be signed by the platform's release identity"),
    ],
)
def test_prod_denies_an_image_without_a_valid_release_signature(
    case: str,
    expected: str,
    prod_key: SynthResult,
    release_key: ec.EllipticCurvePrivateKey,
    rekor: RekorLog,
) -> None:
    registry = Registry()
    registry.push(REPO, DIGEST)
    trust = TrustRoot((rekor,))
    if case == "other key":
        registry.sign(REPO, DIGEST, new_key(), rekor)
    elif case == "no rekor bundle":
        registry.sign(REPO, DIGEST, release_key, None)
    elif case == "replayed signature":
        registry.sign(REPO, DIGEST, release_key, rekor, payload_digest=OTHER_DIGEST)
    elif case == "untrusted rekor":
        registry.sign(REPO, DIGEST, release_key, RekorLog(new_key()))
    elif case == "rekor key not yet valid":
        registry.sign(REPO, DIGEST, release_key, rekor)
        trust = TrustRoot((RekorLog(rekor.key, valid_from=2_000_000_000),))
    elif case == "forged signature":
        registry.sign(REPO, DIGEST, new_key(), rekor, logged_key=release_key)
    elif case == "swapped payload":
        swapped = simple_signing_payload(REPO, DIGEST).replace(b"null", b'{"x":1}')
        registry.sign(REPO, DIGEST, release_key, rekor, stored_payload=swapped)
    ns = _namespace(prod_key, "team-pretrain")
    allowed, decision, vap_ok = _both(prod_key, _pod(SIGNED), ns, registry, trust)
    assert vap_ok, "the VAP admits this image: Kyverno alone must reject it"
    assert decision.matched and decision.status == "fail"
    assert decision.message == expected
    assert not allowed and not decision.reported


def test_prod_denies_a_tag_only_reference_in_both_policies(
    prod_key: SynthResult, release_key: ec.EllipticCurvePrivateKey, rekor: RekorLog
) -> None:
    tagged = f"{REPO}:0.1.0"
    ns = _namespace(prod_key, "team-pretrain")
    allowed, decision, vap_ok = _both(
        prod_key, _pod(tagged), ns, _registry(release_key, rekor), TrustRoot((rekor,))
    )
    assert decision.status == "fail"
    assert decision.message == f"image {tagged} does not have a digest"
    assert not vap_ok and not allowed
    # With mutateDigest on (Kyverno's default) the mutating webhook would pin the tag first:
    # the evaluator refuses rather than answer for a step it does not model.
    policy = _policy(prod_key)
    policy["spec"]["validationConfigurations"]["mutateDigest"] = True
    with pytest.raises(NotModelledError, match="mutateDigest"):
        admit(policy, _pod(tagged), ns, _registry(release_key, rekor), TrustRoot((rekor,)))


def test_an_image_outside_the_allowed_registries_is_left_to_the_vap(
    prod_key: SynthResult, release_key: ec.EllipticCurvePrivateKey, rekor: RekorLog
) -> None:
    """matchImageReferences select what Kyverno checks: a foreign image is not verified at all
    (the policy passes), so the VAP's registry rule is what rejects it — not silently passed."""
    foreign = "docker.io/someone/trainer:1.0@sha256:" + "c" * 64
    ns = _namespace(prod_key, "team-pretrain")
    allowed, decision, vap_ok = _both(
        prod_key, _pod(foreign), ns, _registry(release_key, rekor), TrustRoot((rekor,))
    )
    assert decision.matched and decision.checked_images == [] and decision.status == "pass"
    assert not vap_ok and not allowed


def test_an_unsigned_init_container_is_denied(
    prod_key: SynthResult, release_key: ec.EllipticCurvePrivateKey, rekor: RekorLog
) -> None:
    registry = _registry(release_key, rekor)
    registry.push(REPO, OTHER_DIGEST)  # pushed, never signed
    pod = _pod(SIGNED, init_image=f"{REPO}@{OTHER_DIGEST}")
    ns = _namespace(prod_key, "team-pretrain")
    allowed, decision, vap_ok = _both(prod_key, pod, ns, registry, TrustRoot((rekor,)))
    assert vap_ok and not allowed
    assert decision.status == "fail"
    assert decision.message == "every image must be signed by the platform's release identity"
    # Without the init containers in the expression, `required` alone still rejects it.
    policy = _policy(prod_key)
    policy["spec"]["validations"][0]["expression"] = (
        "images.containers.map(image, verifyImageSignatures(image, [attestors.platform]))"
        ".all(e, e > 0)"
    )
    required = admit(policy, pod, ns, registry, TrustRoot((rekor,)))
    assert required.status == "fail" and not required.allowed
    assert required.message == (
        f"image {REPO}@{OTHER_DIGEST} is not verified: no policy performed a signature or"
        " attestation check on it"
    )


def test_an_image_missing_from_the_registry_is_an_error_that_denies(
    prod_key: SynthResult, rekor: RekorLog
) -> None:
    ns = _namespace(prod_key, "team-pretrain")
    decision = admit(_policy(prod_key), _pod(SIGNED), ns, Registry(), TrustRoot((rekor,)))
    assert decision.status == "error" and not decision.allowed


def test_the_rendered_attestor_key_decides(
    release_key: ec.EllipticCurvePrivateKey, rekor: RekorLog
) -> None:
    """The configured key is what Kyverno checks: prod rendered with another key rejects the
    image the release key signed (and the release key's rendering admits it, above)."""
    other = _render("prod", public_pem(new_key()))
    ns = _namespace(other, "team-pretrain")
    registry = _registry(release_key, rekor)
    decision = admit(_policy(other), _pod(SIGNED), ns, registry, TrustRoot((rekor,)))
    assert decision.status == "fail" and not decision.allowed


def test_prod_checks_its_own_job_at_submission_and_its_pods(
    prod_key: SynthResult, release_key: ec.EllipticCurvePrivateKey, rekor: RekorLog
) -> None:
    """A batch Job is matched through autogen (the policy matches only v1 pods): the rendered
    team Job is admitted when signed and rejected when not."""
    job = _team_job(prod_key)
    ns = _namespace(prod_key, job["metadata"]["namespace"])
    image = job["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == SIGNED
    trust = TrustRoot((rekor,))
    allowed, decision, _ = _both(prod_key, job, ns, _registry(release_key, rekor), trust)
    assert decision.matched and decision.status == "pass" and allowed
    allowed, decision, _ = _both(prod_key, job, ns, _registry(None, None), trust)
    assert decision.matched and decision.status == "fail" and not allowed


def test_a_trainjob_is_checked_through_the_pods_it_creates(
    prod_key: SynthResult, release_key: ec.EllipticCurvePrivateKey, rekor: RekorLog
) -> None:
    """TrainJob is no pod controller Kyverno knows: the CR itself is not matched; the Trainer's
    JobSet creates Jobs and Pods with `spec.trainer.image` in the `node` container, and those
    are (modelled here as the pod that container lands in)."""
    (trainjob,) = [m for m in output.manifests(prod_key) if m["kind"] == "TrainJob"]
    ns = _namespace(prod_key, trainjob["metadata"]["namespace"])
    trust = TrustRoot((rekor,))
    signed = _registry(release_key, rekor)
    assert not admit(_policy(prod_key), trainjob, ns, signed, trust).matched
    pod = _pod(trainjob["spec"]["trainer"]["image"], ns["metadata"]["name"])
    assert admit(_policy(prod_key), pod, ns, signed, trust).allowed
    denied = admit(_policy(prod_key), pod, ns, _registry(None, None), trust)
    assert denied.status == "fail" and not denied.allowed


def test_a_namespace_without_the_team_label_is_not_matched(
    prod_key: SynthResult, rekor: RekorLog
) -> None:
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
    decision = admit(
        _policy(prod_key), _pod(SIGNED, "default"), ns, _registry(None, None), TrustRoot((rekor,))
    )
    assert decision == Decision(matched=False)


def test_prod_keyless_attestor_is_not_modelled_rather_than_passed(prod: SynthResult) -> None:
    ns = _namespace(prod, "team-pretrain")
    registry = _registry(None, None)
    registry.sign(REPO, DIGEST, new_key(), None)
    with pytest.raises(NotModelledError, match="keyless"):
        admit(_policy(prod), _pod(SIGNED), ns, registry, TrustRoot())


# --- dev: Audit -------------------------------------------------------------------------------


def test_dev_audits_an_unsigned_image_instead_of_denying(
    dev_key: SynthResult, release_key: ec.EllipticCurvePrivateKey, rekor: RekorLog
) -> None:
    ns = _namespace(dev_key, "team-research")
    pod = _pod(SIGNED, "team-research")
    trust = TrustRoot((rekor,))
    decision = admit(_policy(dev_key), pod, ns, _registry(None, None), trust)
    assert decision.matched and decision.status == "fail"
    assert decision.message == "every image must be signed by the platform's release identity"
    assert decision.allowed and decision.reported
    signed = admit(_policy(dev_key), pod, ns, _registry(release_key, rekor), trust)
    assert signed.status == "pass" and signed.allowed


# --- synth's report: what admission will check, per job ---------------------------------------


def _with_image(result: SynthResult, image: str) -> SynthResult:
    """`result` with its team Job's container image replaced (the report reads inputs)."""
    changed = copy.deepcopy(result)
    (job,) = [
        r
        for r in changed.of_type("kubernetes:batch/v1:Job")
        if r.inputs["metadata"].get("namespace", "").startswith("team-")
    ]
    job.inputs["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return changed


def test_report_names_the_attestor_and_the_offline_gap_per_job(prod_jobs: SynthResult) -> None:
    section = security_section(prod_jobs)
    part = section.split("### Image signatures")[1].split("###")[0]
    assert "`gpu-platform-signed-images` (**Deny**)" in part
    assert "issuer `https://token.actions.githubusercontent.com`" in part
    row = (
        f"| `team-pretrain/pretrain-7b` | `node` | `{SIGNED}` | signature required; "
        "**not verifiable offline** |"
    )
    assert row in part
    assert "Synth cannot see signatures" in part
    tagged = security_section(_with_image(prod_jobs, f"{REPO}:0.1.0"))
    assert "rejected: no digest (`verifyDigest`)" in tagged
    foreign = security_section(_with_image(prod_jobs, "docker.io/x/y@" + DIGEST))
    assert "not checked by Kyverno (outside `matchImageReferences`)" in foreign
    # An allowed registry, but a repository the release identity never signs.
    unsignable = security_section(_with_image(prod_jobs, "ghcr.io/gpu-platform/tools@" + DIGEST))
    assert "**rejected**: the release identity signs only `ghcr.io/gpu-platform/trainer`" in (
        unsignable
    )


def test_report_shows_the_configured_key(
    prod_key: SynthResult, release_key: ec.EllipticCurvePrivateKey
) -> None:
    der = release_key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    part = security_section(prod_key).split("### Image signatures")[1]
    assert (
        f"cosign public key (SHA-256 of its DER `{hashlib.sha256(der).hexdigest()[:16]}…`)" in part
    )


def test_a_job_stack_report_reads_the_platform_policies(prod: SynthResult) -> None:
    jobs = run_job_stack("pretrain-prod", platform=prod)
    section = security_section(jobs)
    assert "its binding in team namespaces: **Deny**" in section
    part = section.split("### Image signatures")[1].split("###")[0]
    assert f"| `team-pretrain/pretrain-7b` | `node` | `{SIGNED}` |" in part
