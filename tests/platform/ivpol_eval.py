"""Offline evaluation of a Kyverno ImageValidatingPolicy (policies.kyverno.io/v1beta1) at an
admission request, reimplemented from Kyverno v1.19.0's source (kyverno chart 3.9.0): matching,
image extraction, `validationConfigurations`, the policy's CEL (cel-python) with
`verifyImageSignatures` bound to a real cosign key verification against a fake registry
(tests/platform/cosign_registry.py), `required`, and how Deny/Audit turn the result into an
admission response. It is a reimplementation, not Kyverno: a kind cluster running the chart is
the final check (docs/security.md). Each step names the upstream code it follows
(`kyverno/kyverno@v1.19.0:<path>` unless said otherwise).

Flow (pkg/cel/policies/ivpol/engine/engine.go HandleValidating):
1. matchConstraints (namespaceSelector, resourceRules) select the request; a policy matching
   only v1 pods is also "autogen'd" for pod controllers (Jobs, Deployments, ...), which keeps
   its namespaceSelector and operations (pkg/cel/policies/ivpol/autogen/autogen.go,
   pkg/cel/autogen/{support,data,match}.go; test/conformance/chainsaw/image-validating-policies/
   autogen/). matchConditions (CEL) must all be true.
2. Images per category (containers, initContainers, ephemeralContainers) by the request's
   resource: pod spec, or spec.template.spec for Jobs and the other controllers
   (pkg/cel/compiler/images.go); only images matching a matchImageReferences glob/expression
   are kept — the others are not checked at all (pkg/image/verification/evaluator/policy.go
   Evaluate, pkg/cel/matching/image.go, pkg/cel/compiler/image.go: gobwas/glob without
   separators, so `*` also matches `/`).
3. verifyDigest (default true when unset, evaluator/compiler.go) fails the policy for a matched
   image that is not a digest reference: "image X does not have a digest" (policy.go
   checkDigests), before any registry access.
4. Every matched image is fetched (ictx.AddImages): one missing is an evaluation error.
5. Validations in order; the first false one fails the policy with its message.
6. verifyImageSignatures(image, attestors) returns how many attestors verified the image (0 for
   an image outside matchImageReferences, which is not recorded) and records
   verified/attempted per image (pkg/cel/libs/imageverify/impl.go, results.go).
7. required (default true): a passing policy fails when one of its matched images was never
   verified ("... is not verified: no policy performed a signature or attestation check on
   it") or failed verification (evaluator/policy.go EnforceRequired, engine.go enforceRequired).
8. Deny in validationActions turns fail and error results into a rejection ("Policy <name>
   failed: <message>"); Audit admits and the result goes to an admission report (features.
   admissionReports.enabled, chart default true); Warn adds a warning
   (pkg/webhooks/resource/ivpol/handler.go validationResponse, audit).

Cosign key verification (pkg/image/verifiers/ivpol/cosign/{verifier,opts}.go, then
sigstore/cosign@v3.1.2:pkg/cosign/verify.go VerifyImageSignatures, verifyInternal, VerifyBundle,
verifyOCISignature, and pkg/cosign/verifiers.go SimpleClaimVerifier): the signatures under
`<repo>:sha256-<hex>.sig`; none is an error; a signature counts when (a) unless the attestor's
`ctlog.insecureIgnoreTlog` is set, its Rekor bundle verifies — the body's signature, public key
and payload hash match and the SET verifies with a log of the trusted root; without `ctlog` the
Rekor client is nil and cosign runs "offline", so a signature without a bundle fails ("offline
verification failed"); (b) the signature verifies over the payload with the attestor's key;
(c) the payload names the image's digest. Not modelled (an explicit error here, never a pass):
keyless attestors (Fulcio chains, SCTs, identities), KMS keys, certificates, notary, online Rekor
lookups, cosign v3's new bundle format, signature annotations, attestations, exceptions, custom
image extractors, the verification cache, and mutateDigest (the mutating webhook pinning a tag to
its digest before validation: refused when a matched image has no digest).
"""

from __future__ import annotations

import base64
import fnmatch
import json
import re
from dataclasses import dataclass, field
from typing import Any, Final

import celpy
from celpy import celtypes
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

from tests.platform.cosign_registry import (
    BUNDLE_ANNOTATION,
    SIGNATURE_ANNOTATION,
    Registry,
    RekorLog,
    sha256_hex,
)

#: kind -> (group, version, resource) of the admission request.
RESOURCES: Final = {
    "Pod": ("", "v1", "pods"),
    "Job": ("batch", "v1", "jobs"),
    "CronJob": ("batch", "v1", "cronjobs"),
    "Deployment": ("apps", "v1", "deployments"),
    "StatefulSet": ("apps", "v1", "statefulsets"),
    "DaemonSet": ("apps", "v1", "daemonsets"),
    "ReplicaSet": ("apps", "v1", "replicasets"),
    "TrainJob": ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
    "JobSet": ("jobset.x-k8s.io", "v1alpha2", "jobsets"),
}
#: pkg/cel/autogen/data.go ConfigsMap: the pod controllers autogen covers.
AUTOGEN_CONTROLLERS: Final = (
    "daemonsets",
    "deployments",
    "replicasets",
    "statefulsets",
    "jobs",
    "cronjobs",
)
_DIGEST = re.compile(r"^sha256:[a-f0-9]{64}$")
_ENV = celpy.Environment()


class NotModelledError(Exception):
    """A feature this reimplementation does not cover: the test must not rely on it."""


@dataclass(frozen=True)
class TrustRoot:
    """What Kyverno reads through Sigstore's TUF root for a key attestor without
    `insecureIgnoreTlog`: the Rekor logs whose SETs it accepts."""

    rekor_logs: tuple[RekorLog, ...] = ()


@dataclass
class Decision:
    """The admission outcome of one policy for one request."""

    matched: bool
    #: "pass", "fail" or "error" (None when not matched).
    status: str | None = None
    message: str = ""
    allowed: bool = True
    warnings: list[str] = field(default_factory=list)
    #: Written to an admission report (the audit trail of a non-blocked request).
    reported: bool = False
    #: The images matchImageReferences selected.
    checked_images: list[str] = field(default_factory=list)


# --- references ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    repository: str
    tag: str | None
    digest: str | None


def parse_reference(image: str) -> Reference:
    """go-containerregistry's name.ParseReference for the fully qualified references used
    here: `repo[:tag]@sha256:<hex>` is a Digest, `repo[:tag]` a Tag (no Docker Hub defaulting:
    images outside the allowed registries never get here)."""
    base, _, digest = image.partition("@")
    if digest and not _DIGEST.match(digest):
        raise ValueError(f"failed to parse image reference {image}")
    slash = base.rfind("/")
    colon = base.rfind(":")
    if colon > slash:
        return Reference(base[:colon], base[colon + 1 :], digest or None)
    return Reference(base, None, digest or None)


# --- matching ---------------------------------------------------------------------------------


def glob_match(pattern: str, image: str) -> bool:
    """gobwas/glob v0.2.3 compiled without separators (pkg/cel/compiler/compiler.go
    CompileMatchImageReference): `*` is any sequence including `/`, `?` one character. Classes
    and alternatives are refused rather than approximated."""
    if any(c in pattern for c in "[]{}\\"):
        raise NotModelledError(f"glob {pattern!r}: only * and ? are modelled")
    return re.fullmatch(fnmatch.translate(pattern), image) is not None


def match_image(image: str, references: list[dict[str, Any]]) -> bool:
    """pkg/cel/matching/image.go MatchImage: no references matches everything."""
    if not references:
        return True
    for reference in references:
        if "glob" in reference:
            if glob_match(reference["glob"], image):
                return True
        elif "expression" in reference:
            activation = {"ref": celtypes.StringType(image)}
            if bool(_evaluate(reference["expression"], activation)):
                return True
    return False


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """A metav1.LabelSelector (nil or empty selects everything)."""
    if not selector:
        return True
    for key, value in selector.get("matchLabels", {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions", []):
        key, operator = expression["key"], expression["operator"]
        values = expression.get("values", [])
        present = key in labels
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
        if operator == "In" and (not present or labels[key] not in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
    return True


def _rule_matches(rule: dict[str, Any], gvr: tuple[str, str, str], operation: str) -> bool:
    def has(values: list[str], value: str) -> bool:
        return "*" in values or value in values

    group, version, resource = gvr
    return (
        has(rule.get("apiGroups", []), group)
        and has(rule.get("apiVersions", []), version)
        and has(rule.get("resources", []), resource)
        and has(rule.get("operations", []), operation)
    )


def can_autogen(constraints: dict[str, Any] | None) -> bool:
    """pkg/cel/autogen/support.go CanAutoGen."""
    if not constraints:
        return False
    selector = constraints.get("objectSelector") or {}
    if selector.get("matchLabels") or selector.get("matchExpressions"):
        return False
    if constraints.get("excludeResourceRules"):
        return False
    rules = constraints.get("resourceRules", [])
    if len(rules) != 1:
        return False
    rule = rules[0]
    return (
        not rule.get("resourceNames")
        and rule.get("apiGroups") == [""]
        and rule.get("apiVersions") == ["v1"]
        and rule.get("resources") == ["pods"]
    )


def _autogen_controllers(spec: dict[str, Any]) -> tuple[str, ...]:
    configured = spec.get("autogen", {}).get("podControllers", {}).get("controllers")
    return AUTOGEN_CONTROLLERS if configured is None else tuple(configured)


def _matches(
    spec: dict[str, Any], gvr: tuple[str, str, str], operation: str, ns_labels: dict[str, str]
) -> bool:
    """matchConstraints of the policy or of its autogen'd variant (engine.go matchPolicy)."""
    constraints = spec.get("matchConstraints") or {}
    if not selector_matches(constraints.get("namespaceSelector"), ns_labels):
        return False
    if any(_rule_matches(r, gvr, operation) for r in constraints.get("resourceRules", [])):
        return True
    if can_autogen(constraints) and gvr[2] in _autogen_controllers(spec):
        # CreateMatchConstraints: same operations, same namespaceSelector, controller targets.
        operations = constraints["resourceRules"][0].get("operations", [])
        return operation in operations or "*" in operations
    return False


def extract_images(obj: dict[str, Any], resource: str) -> dict[str, list[str]]:
    """pkg/cel/compiler/images.go: the built-in extractors by request resource."""
    if resource == "pods":
        pod_spec = obj.get("spec", {})
    elif resource in ("jobs", "deployments", "statefulsets", "daemonsets", "replicasets"):
        pod_spec = obj.get("spec", {}).get("template", {}).get("spec", {})
    elif resource == "cronjobs":
        job = obj.get("spec", {}).get("jobTemplate", {})
        pod_spec = job.get("spec", {}).get("template", {}).get("spec", {})
    else:
        return {}
    return {
        category: [c["image"] for c in pod_spec.get(category, [])]
        for category in ("containers", "initContainers", "ephemeralContainers")
    }


# --- cosign -----------------------------------------------------------------------------------


class VerificationError(Exception):
    """A signature that does not verify (cosign returns an error for it)."""


def _load_key(pem: str) -> ec.EllipticCurvePublicKey:
    key = serialization.load_pem_public_key(pem.encode())
    if not isinstance(key, ec.EllipticCurvePublicKey):
        raise NotModelledError("only ECDSA keys are modelled")
    return key


def _der(key: ec.EllipticCurvePublicKey) -> bytes:
    return key.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def _verify_bundle(
    annotations: dict[str, str],
    payload: bytes,
    key: ec.EllipticCurvePublicKey,
    trust: TrustRoot,
) -> bool:
    """cosign VerifyBundle (with a trusted root: sigstore-go tlog.VerifySET). False when the
    signature carries no bundle; an error when it does not verify."""
    raw = annotations.get(BUNDLE_ANNOTATION)
    if raw is None:
        return False
    bundle = json.loads(raw)
    rekor_payload = bundle["Payload"]
    body = json.loads(base64.b64decode(rekor_payload["body"]))
    if body.get("kind") != "hashedrekord":
        raise NotModelledError(f"Rekor entry kind {body.get('kind')}")
    spec = body["spec"]
    if spec["signature"]["content"] != annotations[SIGNATURE_ANNOTATION]:
        raise VerificationError("signature in bundle does not match signature being verified")
    bundle_key = serialization.load_pem_public_key(
        base64.b64decode(spec["signature"]["publicKey"]["content"])
    )
    if not isinstance(bundle_key, ec.EllipticCurvePublicKey) or _der(bundle_key) != _der(key):
        raise VerificationError("comparing public key PEMs")
    digest = spec["data"]["hash"]
    if digest["algorithm"] != "sha256":
        raise VerificationError(f"unexpected algorithm: {digest['algorithm']!r}")
    if digest["value"] != sha256_hex(payload):
        raise VerificationError("matching bundle to payload")
    logs = {log.log_id: log for log in trust.rekor_logs}
    log = logs.get(rekor_payload["logID"])
    if log is None:
        raise VerificationError("rekor log public key not found for payload")
    if log.valid_from > rekor_payload["integratedTime"]:
        raise VerificationError("rekor log public key not valid at payload integrated time")
    canonical = json.dumps(rekor_payload, sort_keys=True, separators=(",", ":")).encode()
    try:
        log.key.public_key().verify(
            base64.b64decode(bundle["SignedEntryTimestamp"]),
            canonical,
            ec.ECDSA(hashes.SHA256()),
        )
    except InvalidSignature as err:
        raise VerificationError("unable to verify SET") from err
    return True


def verify_cosign(
    registry: Registry, trust: TrustRoot, image: str, attestor: dict[str, Any]
) -> None:
    """Kyverno's cosign VerifyImageSignature for one attestor: returns when at least one
    signature verifies, raises VerificationError otherwise."""
    cosign = attestor.get("cosign")
    if cosign is None:
        raise NotModelledError("only cosign attestors are modelled")
    if "keyless" in cosign or "certificate" in cosign:
        raise NotModelledError("keyless and certificate attestors are not modelled")
    key_spec = cosign.get("key") or {}
    if "data" not in key_spec:
        raise NotModelledError("only PEM key data is modelled (not kms, secretRef, expression)")
    if key_spec.get("hashAlgorithm", "") not in ("", "sha256"):
        raise NotModelledError("only the default sha256 hash is modelled")
    if cosign.get("annotations"):
        raise NotModelledError("signature annotations are not modelled")
    key = _load_key(key_spec["data"])
    ctlog = cosign.get("ctlog")
    ignore_tlog = bool(ctlog and ctlog.get("insecureIgnoreTlog"))
    if ctlog and not ignore_tlog and not ctlog.get("url"):
        raise VerificationError("rekor URL must be provided")
    # opts.go: with no ctlog (or no Rekor client) the Rekor keys come from the trusted root and
    # cosign runs offline: a signature must carry its bundle.
    offline = not (ctlog and ctlog.get("url"))
    reference = parse_reference(image)
    if reference.digest is None:
        raise NotModelledError("tag resolution (ResolveDigest) is not modelled")
    layers = registry.signature_layers(reference.repository, reference.digest)
    if not layers:
        raise VerificationError("no signatures found")
    errors = []
    for layer in layers:
        try:
            if not ignore_tlog:
                verified = _verify_bundle(layer.annotations, layer.payload, key, trust)
                if not verified:
                    if offline:
                        raise VerificationError("offline verification failed")
                    raise NotModelledError("online Rekor lookups are not modelled")
            signature = base64.b64decode(layer.annotations[SIGNATURE_ANNOTATION])
            try:
                key.verify(signature, layer.payload, ec.ECDSA(hashes.SHA256()))
            except InvalidSignature as err:
                raise VerificationError("invalid signature") from err
            claimed = json.loads(layer.payload)["critical"]["image"]["docker-manifest-digest"]
            if claimed != reference.digest:
                raise VerificationError(f"invalid or missing digest in claim: {claimed}")
            return
        except VerificationError as err:
            errors.append(str(err))
    raise VerificationError("no matching signatures: " + "; ".join(errors))


# --- the policy -------------------------------------------------------------------------------


def _evaluate(expression: str, activation: dict[str, Any], functions: Any = None) -> Any:
    program = _ENV.program(_ENV.compile(expression), functions=functions or {})
    return program.evaluate(activation)


def _native(value: Any) -> Any:
    if isinstance(value, celtypes.MapType):
        return {str(k): _native(v) for k, v in value.items()}
    if isinstance(value, celtypes.ListType):
        return [_native(v) for v in value]
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, celtypes.IntType):
        return int(value)
    if isinstance(value, celtypes.StringType):
        return str(value)
    return value


def _autogen_expression(expression: str, resource: str) -> str:
    """pkg/cel/autogen/replacement.go: `object.spec`/`object.metadata` move into the pod
    template of a controller (cronjobs: the job template's); `.namespace` stays anchored."""
    if resource == "pods":
        return expression
    prefix = "spec.jobTemplate.spec.template" if resource == "cronjobs" else "spec.template"
    for root in ("object.", "oldObject."):
        for part in ("spec", "metadata"):
            target = f"{prefix}.{part}"
            expression = re.sub(
                re.escape(root + part) + r"(?!\.namespace)", root + target, expression
            )
    return expression


@dataclass
class _Verifications:
    """pkg/cel/libs/imageverify/results.go: per image, verified (monotonic) and attempted."""

    verified: dict[str, bool] = field(default_factory=dict)

    def record(self, image: str, ok: bool) -> None:
        self.verified[image] = self.verified.get(image, False) or ok


def _evaluate_policy(
    policy: dict[str, Any],
    obj: dict[str, Any],
    namespace: dict[str, Any],
    operation: str,
    registry: Registry,
    trust: TrustRoot,
) -> tuple[str, str, list[str]] | None:
    """(status, message, matched images) or None when not matched (policy.go Evaluate)."""
    spec = policy["spec"]
    for unsupported in ("images", "exceptions", "attestations", "variables"):
        if spec.get(unsupported):
            raise NotModelledError(f"spec.{unsupported}")
    resource = RESOURCES[obj["kind"]][2]
    activation: dict[str, Any] = {
        "object": celpy.json_to_cel(obj),
        "oldObject": celpy.json_to_cel(None),
        "namespaceObject": celpy.json_to_cel(namespace),
        "request": celpy.json_to_cel({"operation": operation}),
    }
    for condition in spec.get("matchConditions", []):
        expression = _autogen_expression(condition["expression"], resource)
        if not bool(_evaluate(expression, activation)):
            return None
    references = spec.get("matchImageReferences", [])
    images = {
        category: [i for i in found if match_image(i, references)]
        for category, found in extract_images(obj, resource).items()
    }
    matched = [i for found in images.values() for i in found]
    config = spec.get("validationConfigurations", {})
    if config.get("mutateDigest", True) and any(parse_reference(i).digest is None for i in matched):
        # engine.go HandleMutating: the mutating webhook (mutateDigest, default on) would have
        # pinned the tag to the registry's digest before validation sees the image.
        raise NotModelledError("mutateDigest: tag-to-digest pinning is not modelled")
    if config.get("verifyDigest", True):
        for image in matched:
            if parse_reference(image).digest is None:
                return "fail", f"image {image} does not have a digest", matched
    for image in matched:  # ictx.AddImages
        reference = parse_reference(image)
        if reference.digest is None:
            raise NotModelledError("tag resolution (ResolveDigest) is not modelled")
        if not registry.has(reference.repository, reference.digest):
            return "error", f"failed to evaluate policy: failed to get imagedata: {image}", matched
    verifications = _Verifications()

    def verify_image_signatures(image: Any, attestors: Any) -> Any:
        # pkg/cel/libs/imageverify/impl.go verify_image_signature_string_stringarray
        image, attestors = str(image), _native(attestors)
        if not match_image(image, references):
            return celtypes.IntType(0)
        count = 0
        for attestor in attestors:
            try:
                verify_cosign(registry, trust, image, attestor)
                count += 1
            except VerificationError:
                pass
        if attestors:
            verifications.record(image, count > 0)
        return celtypes.IntType(count)

    activation["images"] = celpy.json_to_cel(images)
    activation["attestors"] = celpy.json_to_cel({a["name"]: a for a in spec.get("attestors", [])})
    functions = {"verifyImageSignatures": verify_image_signatures}
    for index, validation in enumerate(spec.get("validations", [])):
        expression = _autogen_expression(validation["expression"], resource)
        try:
            out = _evaluate(expression, activation, functions)
        except celpy.CELEvalError as err:  # engine.go: RuleError "failed to evaluate policy"
            return "error", f"failed to evaluate policy: {err}", matched
        if not bool(out):
            message = validation.get("message") or (
                f"CEL expression validation failed at index {index}"
            )
            if "messageExpression" in validation:
                message = str(_evaluate(validation["messageExpression"], activation, functions))
            return "fail", message, matched
    if config.get("required", True):  # EnforceRequired
        for image in matched:
            if image not in verifications.verified:
                message = (
                    f"image {image} is not verified: no policy performed a signature or "
                    "attestation check on it"
                )
                return "fail", message, matched
            if not verifications.verified[image]:
                message = f"image {image} failed signature or attestation verification"
                return "fail", message, matched
    return "pass", "success", matched


def admit(
    policy: dict[str, Any],
    obj: dict[str, Any],
    namespace: dict[str, Any],
    registry: Registry,
    trust: TrustRoot,
    operation: str = "CREATE",
) -> Decision:
    """The admission response of `policy` (an ImageValidatingPolicy object) to `obj` created
    in `namespace` (a Namespace object, for its labels)."""
    spec = policy["spec"]
    gvr = RESOURCES[obj["kind"]]
    labels = namespace.get("metadata", {}).get("labels", {})
    if not _matches(spec, gvr, operation, labels):
        return Decision(matched=False)
    evaluated = _evaluate_policy(policy, obj, namespace, operation, registry, trust)
    if evaluated is None:
        return Decision(matched=False)
    status, message, images = evaluated
    actions = spec.get("validationActions", [])
    name = policy["metadata"]["name"]
    failed = status in ("fail", "error")
    text = f"Policy {name} {'failed' if status == 'fail' else 'error'}: {message}"
    blocked = "Deny" in actions
    return Decision(
        matched=True,
        status=status,
        message=message,
        allowed=not (failed and blocked),
        warnings=[text] if failed and "Warn" in actions else [],
        reported=not blocked,
        checked_images=images,
    )
