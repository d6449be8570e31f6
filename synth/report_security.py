"""The report's security section: what a reviewer checks before a deploy — PSS levels of the
team namespaces, the image admission policies and their mode, the ECR repositories and
pull-through caches, which secrets each job reads (paths only, never values), and the log
groups, alarms and queries. docs/security.md explains each control."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from components import catalog
from policies.rules.common import Resource
from policies.rules.kubernetes import WORKLOAD_TYPES, pod_templates
from policies.rules.security import signature_scope
from synth.harness import Registration, SynthResult

NAMESPACE = "kubernetes:core/v1:Namespace"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
VAP_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
IMAGE_POLICY = "kubernetes:policies.kyverno.io/v1beta1:ImageValidatingPolicy"
REPOSITORY = "aws:ecr/repository:Repository"
CACHE = "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"
SCANNING = "aws:ecr/registryScanningConfiguration:RegistryScanningConfiguration"
EXTERNAL_SECRET = "kubernetes:external-secrets.io/v1:ExternalSecret"
STORE = "kubernetes:external-secrets.io/v1:SecretStore"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
QUERY = "aws:cloudwatch/queryDefinition:QueryDefinition"


def _table(header: list[str], rows: list[list[Any]]) -> str:
    if not rows:
        return "_none_"
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _sorted(regs: list[Registration], *keys: str) -> list[Registration]:
    def key(reg: Registration) -> str:
        node: Any = reg.inputs
        for part in keys:
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return str(node)

    return sorted(regs, key=key)


def _pods(result: SynthResult) -> str:
    rows = []
    for reg in _sorted(result.of_type(NAMESPACE), "metadata", "name"):
        labels = reg.inputs.get("metadata", {}).get("labels", {})
        if "gpu-platform.io/team" not in labels:
            continue
        enforce = labels.get("pod-security.kubernetes.io/enforce", "none")
        version = labels.get("pod-security.kubernetes.io/enforce-version", "latest")
        rows.append([f"`{reg.inputs['metadata']['name']}`", f"{enforce} ({version})"])
    return _table(["team namespace", "PSS enforced"], rows)


def _admission(result: SynthResult) -> str:
    # A job stack's pods meet the platform's policies (the synth its StackReference read).
    if not result.of_type(VAP) and result.platform is not None:
        result = result.platform
    lines = []
    for vap in result.of_type(VAP):
        pattern = (
            vap.inputs["metadata"]
            .get("annotations", {})
            .get("gpu-platform.io/allowed-image-pattern", "?")
        )
        lines.append(
            f"- ValidatingAdmissionPolicy `{vap.inputs['metadata']['name']}`: images "
            f"must match `{pattern}`"
        )
    for binding in result.of_type(VAP_BINDING):
        actions = ", ".join(binding.inputs["spec"]["validationActions"])
        lines.append(f"- its binding in team namespaces: **{actions}**")
    for policy in result.of_type(IMAGE_POLICY):
        actions = ", ".join(policy.inputs["spec"]["validationActions"])
        lines.append(
            f"- Kyverno ImageValidatingPolicy `{policy.inputs['metadata']['name']}` "
            f"(cosign signatures): **{actions}**"
        )
    return "\n".join(lines) or "_no admission policy_"


def _attestor_text(attestor: dict[str, Any]) -> str:
    cosign = attestor.get("cosign", {})
    if "keyless" in cosign:
        identities = cosign["keyless"].get("identities", [])
        who = "; ".join(
            f"issuer `{i.get('issuer')}`, subject matching `{i.get('subjectRegExp')}`"
            for i in identities
        )
        return f"`{attestor.get('name')}`: cosign keyless ({who})"
    pem = str(cosign.get("key", {}).get("data", ""))
    body = "".join(line for line in pem.splitlines() if line and not line.startswith("-----"))
    fingerprint = hashlib.sha256(base64.b64decode(body)).hexdigest()[:16] if body else "?"
    tlog = (
        ", no transparency log (signed with `--tlog-upload=false`)"
        if (cosign.get("ctlog") or {}).get("insecureIgnoreTlog")
        else ", with a Rekor bundle"
    )
    return (
        f"`{attestor.get('name')}`: cosign public key (SHA-256 of its DER `{fingerprint}…`{tlog})"
    )


def _signatures(result: SynthResult) -> str:
    """Per job image: whether Kyverno will require a signature at admission, and whose. Whether
    the signature exists is not knowable offline (synth reaches no registry). A job stack reads
    the policy and the team namespaces from the platform synth its StackReference read."""
    source = result if result.of_type(IMAGE_POLICY) else result.platform
    policies = source.of_type(IMAGE_POLICY) if source is not None else []
    if source is None or not policies:
        return "_no signature verification in this stack_"
    spec = policies[0].inputs["spec"]
    rows = _signature_rows(result, _team_namespaces(source), policies[0].inputs)
    table = _table(["job", "container", "image", "at admission"], sorted(rows))
    actions = ", ".join(spec["validationActions"])
    attestors = "; ".join(_attestor_text(a) for a in spec.get("attestors", []))
    return (
        f"Kyverno `{policies[0].inputs['metadata']['name']}` (**{actions}**) admits a team pod "
        "(and, through autogen, a batch Job) only when every image it selects carries a "
        f"signature by attestor {attestors}.\n\n{table}\n\nSynth cannot see signatures: it "
        "reaches no registry, so an unsigned image passes synth and is rejected at admission "
        "(Deny) or recorded in an admission report (Audit); the deploy's own signing step "
        "verifies the trainer it signs as admission will (docs/images.md). What synth does "
        "see: an image from a repository the trusted signer never signs (the platform key: "
        "the platform's ECR repositories; another signer: `signedRepositories`) can never "
        "pass, and under Deny is a config error before deploy. Images outside "
        "`matchImageReferences` are left to the trusted-images policy above "
        "(docs/security.md)."
    )


def _team_namespaces(source: SynthResult) -> set[str]:
    """The namespaces labelled as a team's: the only ones the signature policy selects."""
    return {
        str(ns.inputs["metadata"]["name"])
        for ns in source.of_type(NAMESPACE)
        if "gpu-platform.io/team" in (ns.inputs["metadata"].get("labels") or {})
    }


def _signature_rows(
    result: SynthResult, teams: set[str], policy: dict[str, Any]
) -> list[list[str]]:
    """One row per container of a team workload: its image and what admission does with it."""
    spec = policy["spec"]
    globs, signed = signature_scope(policy)
    verify_digest = spec.get("validationConfigurations", {}).get("verifyDigest", True)
    deny = "Deny" in spec.get("validationActions", [])
    rows = []
    for reg in result.resources:
        if reg.type not in WORKLOAD_TYPES:
            continue
        name = (reg.inputs.get("metadata") or {}).get("name")
        for template in pod_templates(Resource(reg.type, reg.name, reg.urn, reg.inputs)):
            if template.namespace not in teams:
                continue
            for container in template.containers():
                image = str(container.get("image"))
                verdict = admission_verdict(
                    image, globs=globs, signed=signed, verify_digest=verify_digest, deny=deny
                )
                job = f"`{template.namespace}/{name}`"
                rows.append([job, f"`{container.get('name')}`", f"`{image}`", verdict])
    return rows


def admission_verdict(
    image: str,
    *,
    globs: list[re.Pattern[str]],
    signed: set[str],
    verify_digest: bool,
    deny: bool,
) -> str:
    """What the signature policy does with `image`, as far as synth can tell without the
    registry: the digest rule, the policy's image scope, then the signer's repositories."""
    if verify_digest and "@sha256:" not in image:
        return "rejected: no digest (`verifyDigest`), before any signature check"
    if not any(g.match(image) for g in globs):
        return "not checked by Kyverno (outside `matchImageReferences`)"
    if signed and not catalog.in_repositories(catalog.image_repository(image), signed):
        return (
            ("**rejected**" if deny else "fails (Audit: recorded, admitted)")
            + ": the trusted signer signs only "
            + ", ".join(f"`{r}`" for r in sorted(signed))
        )
    return "signature required; **not verifiable offline**"


def _registry(result: SynthResult) -> str:
    repos = _table(
        ["repository", "tags", "encryption", "scan on push"],
        [
            [
                f"`{r.inputs['name']}`",
                r.inputs.get("imageTagMutability"),
                ", ".join(
                    e["encryptionType"] for e in r.inputs.get("encryptionConfigurations", [])
                ),
                r.inputs.get("imageScanningConfiguration", {}).get("scanOnPush"),
            ]
            for r in _sorted(result.of_type(REPOSITORY), "name")
        ],
    )
    caches = _table(
        ["cache prefix", "upstream"],
        [
            [f"`{c.inputs['ecrRepositoryPrefix']}`", c.inputs["upstreamRegistryUrl"]]
            for c in _sorted(result.of_type(CACHE), "ecrRepositoryPrefix")
        ],
    )
    scanning = (
        "managed by this stack (Amazon Inspector, continuous)"
        if result.of_type(SCANNING)
        else "not managed by this stack (account-wide; another stack owns it)"
    )
    return f"{repos}\n\nPull-through caches:\n\n{caches}\n\nEnhanced scanning: {scanning}."


def _secrets(result: SynthResult) -> str:
    stores = sorted(r.inputs["metadata"]["namespace"] for r in result.of_type(STORE))
    rows = [
        [
            f"`{r.inputs['metadata']['namespace']}/{r.inputs['metadata']['name']}`",
            ", ".join(
                sorted({f"`{d['remoteRef']['key']}`" for d in r.inputs["spec"].get("data", [])})
            ),
        ]
        for r in _sorted(result.of_type(EXTERNAL_SECRET), "metadata", "name")
    ]
    table = _table(["ExternalSecret", "AWS Secrets Manager path"], rows)
    return f"SecretStores in: {', '.join(f'`{s}`' for s in stores) or 'none'}.\n\n{table}"


def _logs(result: SynthResult) -> str:
    groups = _table(
        ["log group", "retention (days)", "KMS"],
        [
            [
                f"`{g.inputs['name']}`",
                g.inputs.get("retentionInDays"),
                bool(g.inputs.get("kmsKeyId")),
            ]
            for g in _sorted(result.of_type(LOG_GROUP), "name")
            if g.inputs.get("name", "").startswith("/aws/containerinsights/")
        ],
    )
    alarms = sorted(
        a.inputs["metricName"]
        for a in result.of_type(ALARM)
        if a.inputs.get("namespace") == "GPUPlatform/Training"
    )
    queries = sorted(q.inputs["name"] for q in result.of_type(QUERY))
    return (
        f"{groups}\n\nLog alarms: {', '.join(f'`{a}`' for a in alarms) or 'none'}. "
        f"Saved queries: {', '.join(f'`{q}`' for q in queries) or 'none'}."
    )


def security_section(result: SynthResult) -> str:
    parts = [
        ("Pod Security", _pods),
        ("Image admission", _admission),
        ("Image signatures", _signatures),
        ("Registry", _registry),
        ("Secrets", _secrets),
        ("Logs", _logs),
    ]
    return "\n\n".join(f"### {title}\n\n{render(result)}" for title, render in parts)
