"""The report's security section: what a reviewer checks before a deploy — PSS levels of the
team namespaces, the image admission policies and their mode, the ECR repositories and
pull-through caches, which secrets each job reads (paths only, never values), and the log
groups, alarms and queries. docs/security.md explains each control."""

from __future__ import annotations

from typing import Any

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
        ("Registry", _registry),
        ("Secrets", _secrets),
        ("Logs", _logs),
    ]
    return "\n\n".join(f"### {title}\n\n{render(result)}" for title, render in parts)
