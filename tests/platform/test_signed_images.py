"""Signed images at admission: the ImageValidatingPolicy the stacks render, evaluated offline
with Kyverno v1.19.0's semantics (tests/platform/ivpol_eval.py) against real cosign key
signatures in a fake registry (tests/platform/cosign_registry.py), together with the
ValidatingAdmissionPolicy (tests/platform/cel_eval.py): what a team pod meets in prod (Deny)
and dev (Audit).

Prod trusts the platform key: the first section signs what the deploy's signing step signs
(its image and key as synth rendered them) with the mocked KMS key, exactly as that step's
cosign flags write it (no Rekor entry, the `.sig` layout), and checks that the rendered policy
admits it and denies an unsigned or otherwise-signed image. The rest renders prod with
`signatures.publicKey` set to a PEM key generated here (a signer outside the stack, with Rekor
bundles) — the same policy with that attestor, every other input prod's own. Keyless
identities (Fulcio chains, SCTs) are not modelled.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from synth import output
from synth.harness import SynthResult, run_program
from synth.jobs import run_job_stack
from synth.mocks import mock_kms_key
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
COMMAND = "command:local:Command"
REPO = "ghcr.io/gpu-platform/trainer"
DIGEST = "sha256:" + hashlib.sha256(b"a released trainer").hexdigest()
OTHER_DIGEST = "sha256:" + "e" * 64
SIGNED = f"{REPO}:0.1.0@{DIGEST}"


@pytest.fixture(scope="module")
def release_key() -> ec.EllipticCurvePrivateKey:
    return new_key()


@pytest.fixture(scope="module")
def rekor() -> RekorLog:
    return RekorLog(new_key())


def _render(stack: str, public_key: str) -> SynthResult:
    """`stack` with a signer outside the stack (`publicKey`) that releases `REPO`, whose
    release the jobs run (`training.defaultImage`)."""
    values = values_with_jobs(stack)
    security = copy.deepcopy(values.get("gpu-platform:security", {}))
    admission = security.setdefault("imageAdmission", {})
    admission["signatures"] = {
        "platformKey": False,
        "publicKey": public_key,
        "signedRepositories": [REPO],
    }
    training = {**values.get("gpu-platform:training", {}), "defaultImage": SIGNED}
    return run_program(
        stack,
        overrides={
            "gpu-platform:security": security,
            "gpu-platform:training": training,
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


# --- prod: the platform key, as the deploy signs ----------------------------------------------


def _signing_step(result: SynthResult) -> tuple[str, str, str]:
    """(repository, digest, KMS key ARN) the deploy's signing command signs, as rendered."""
    (sign,) = [c for c in result.of_type(COMMAND) if c.name.endswith("-sign")]
    env = sign.inputs["environment"]
    repository, digest = env["IMAGE"].split("@")
    return repository, digest, env["SIGNING_KEY"].removeprefix("awskms:///")


def _deploy_signed(result: SynthResult, key: ec.EllipticCurvePrivateKey | None) -> Registry:
    """The registry after the deploy pushed the trainer and, with `key`, signed it as the
    signing step's flags say: `--tlog-upload=false` (no Rekor bundle), `.sig` layout."""
    repository, digest, _ = _signing_step(result)
    registry = Registry()
    registry.push(repository, digest)
    if key is not None:
        registry.sign(repository, digest, key, None)
    return registry


def test_the_signing_step_signs_what_the_jobs_run_with_the_key_admission_trusts(
    prod_jobs: SynthResult,
) -> None:
    repository, digest, key_arn = _signing_step(prod_jobs)
    assert prod_jobs.of_type("docker-build:index:Image"), "the deploy builds the trainer"
    job = _team_job(prod_jobs)
    assert job["spec"]["template"]["spec"]["containers"][0]["image"] == f"{repository}@{digest}"
    attestor = _policy(prod_jobs)["spec"]["attestors"][0]
    assert attestor["cosign"]["key"]["data"] == public_pem(mock_kms_key(key_arn))
    # The step signs without a transparency-log entry, so the attestor must ignore the tlog;
    # and in the `.sig` layout Kyverno verifies when no bundle is attached.
    (sign,) = [c for c in prod_jobs.of_type(COMMAND) if c.name.endswith("-sign")]
    assert "--tlog-upload=false" in sign.inputs["create"]
    assert "--new-bundle-format=false" in sign.inputs["create"]
    assert attestor["cosign"]["ctlog"] == {"insecureIgnoreTlog": True}


def test_prod_admits_the_trainer_the_deploy_signed(prod_jobs: SynthResult) -> None:
    _, _, key_arn = _signing_step(prod_jobs)
    job = _team_job(prod_jobs)
    ns = _namespace(prod_jobs, job["metadata"]["namespace"])
    registry = _deploy_signed(prod_jobs, mock_kms_key(key_arn))
    allowed, decision, vap_ok = _both(prod_jobs, job, ns, registry, TrustRoot())
    assert decision.matched and decision.status == "pass", decision
    assert vap_ok and allowed


@pytest.mark.parametrize("case", ["unsigned", "other key", "other key with a rekor bundle"])
def test_prod_denies_the_trainer_unsigned_or_signed_by_another_key(
    case: str, prod_jobs: SynthResult, rekor: RekorLog
) -> None:
    job = _team_job(prod_jobs)
    ns = _namespace(prod_jobs, job["metadata"]["namespace"])
    registry = _deploy_signed(prod_jobs, None if case == "unsigned" else new_key())
    if case == "other key with a rekor bundle":
        repository, digest, _ = _signing_step(prod_jobs)
        registry.sign(repository, digest, new_key(), rekor)
    allowed, decision, vap_ok = _both(prod_jobs, job, ns, registry, TrustRoot((rekor,)))
    assert vap_ok, "the VAP admits this image: Kyverno alone must reject it"
    assert decision.status == "fail" and not allowed
    assert decision.message == "every image must be signed by the platform's trusted signer"


# --- prod: Deny, a signer outside the stack ----------------------------------------------------


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
        ("unsigned", "every image must be signed by the platform's trusted signer"),
        ("other key", "every image must be signed by the platform's trusted signer"),
        # cosign --tlog-upload=false: without ctlog in the attestor Kyverno verifies offline
        # against Rekor's keys from the TUF root and needs the bundle.
        ("no rekor bundle", "every image must be signed by the platform's trusted signer"),
        # the same signature attached to another digest: the payload names the digest.
        ("replayed signature", "every image must be signed by the platform's trusted signer"),
        # a Rekor log the trusted root does not hold, or whose key is not valid yet.
        ("untrusted rekor", "every image must be signed by the platform's trusted signer"),
        (
            "rekor key not yet valid",
            "every image must be signed by the platform's trusted signer",
        ),
        # another key's signature in an entry naming the release key: the signature check.
        ("forged signature", "every image must be signed by the platform's trusted signer"),
        # a payload other than the one signed and logged: the bundle's payload hash.
        ("swapped payload", "every image must be signed by the platform's trusted signer"),
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
    assert decision.message == "every image must be signed by the platform's trusted signer"
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


def test_a_keyless_attestor_is_not_modelled_rather_than_passed() -> None:
    keyless = {
        "platformKey": False,
        "keylessIssuer": "https://token.actions.githubusercontent.com",
        "keylessSubjectRegexp": r"^https://github\.com/org/repo/.*$",
        "signedRepositories": [REPO],
    }
    security = copy.deepcopy(values_with_jobs("prod").get("gpu-platform:security", {}))
    security.setdefault("imageAdmission", {})["signatures"] = keyless
    prod = run_program(
        "prod",
        overrides={
            "gpu-platform:security": security,
            "gpu-platform:training": {"defaultImage": SIGNED},
        },
    )
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
    assert decision.message == "every image must be signed by the platform's trusted signer"
    assert decision.allowed and decision.reported
    signed = admit(_policy(dev_key), pod, ns, _registry(release_key, rekor), trust)
    assert signed.status == "pass" and signed.allowed


# --- synth's report: what admission will check, per job ---------------------------------------


def _with_image(result: SynthResult, image: str) -> SynthResult:
    """`result` with its team Job's container image replaced (the report reads inputs)."""
    # The resources are copied, not the result: its plans hold Outputs, which do not copy.
    changed = dataclasses.replace(result, resources=copy.deepcopy(result.resources))
    (job,) = [
        r
        for r in changed.of_type("kubernetes:batch/v1:Job")
        if r.inputs["metadata"].get("namespace", "").startswith("team-")
        and r.inputs["metadata"]["name"] == "pretrain-7b"
    ]
    job.inputs["spec"]["template"]["spec"]["containers"][0]["image"] = image
    return changed


def test_report_names_the_attestor_and_the_offline_gap_per_job(prod_jobs: SynthResult) -> None:
    section = security_section(prod_jobs)
    part = section.split("### Image signatures")[1].split("###")[0]
    assert "`gpu-platform-signed-images` (**Deny**)" in part
    assert "no transparency log (signed with `--tlog-upload=false`)" in part
    repository, digest, _ = _signing_step(prod_jobs)
    row = (
        f"| `team-pretrain/pretrain-7b` | `node` | `{repository}@{digest}` | signature required; "
        "**not verifiable offline** |"
    )
    assert row in part
    assert "Synth cannot see signatures" in part
    tagged = security_section(_with_image(prod_jobs, f"{REPO}:0.1.0"))
    assert "rejected: no digest (`verifyDigest`)" in tagged
    foreign = security_section(_with_image(prod_jobs, "docker.io/x/y@" + DIGEST))
    assert "not checked by Kyverno (outside `matchImageReferences`)" in foreign
    # An allowed registry, but a repository the platform key never signs.
    unsignable = security_section(_with_image(prod_jobs, "ghcr.io/gpu-platform/tools@" + DIGEST))
    ecr = repository.rsplit("/", 1)[0]
    assert f"**rejected**: the trusted signer signs only `{ecr}`" in unsignable


def test_report_shows_the_configured_key(
    prod_key: SynthResult, release_key: ec.EllipticCurvePrivateKey
) -> None:
    der = release_key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    part = security_section(prod_key).split("### Image signatures")[1]
    fingerprint = hashlib.sha256(der).hexdigest()[:16]
    assert f"cosign public key (SHA-256 of its DER `{fingerprint}…`, with a Rekor bundle)" in part


def test_a_job_stack_report_reads_the_platform_policies(prod: SynthResult) -> None:
    jobs = run_job_stack("pretrain-prod", platform=prod)
    section = security_section(jobs)
    assert "its binding in team namespaces: **Deny**" in section
    part = section.split("### Image signatures")[1].split("###")[0]
    # The job runs the platform's trainer, by the digest the platform's deploy pushed.
    trainer = prod.outputs["trainerImage"]
    assert "@sha256:" in trainer
    assert f"| `team-pretrain/pretrain-7b` | `node` | `{trainer}` |" in part
