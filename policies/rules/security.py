"""Security rules: restricted pods and namespaces, trusted images (the admission policy's own
pattern applied before deploy), ECR hardening, encrypted logs, and no secret values.

The restricted checks follow the Pod Security Standard `restricted` profile as
kubernetes/pod-security-admission@v0.33.13 (policy/check_*.go) implements it, plus the
platform's hardening beyond it (read-only root filesystem, no service-account token).
"""

from __future__ import annotations

import fnmatch
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import PolicyResource

from components import addons, catalog
from policies.rules.common import (
    CRITICAL,
    HIGH,
    MANDATORY,
    Config,
    Resource,
    Schema,
    as_list,
    dependents,
    dig,
    is_map,
    resource_rule,
    stack_rule,
)
from policies.rules.fleet import podless_namespaces
from policies.rules.kubernetes import (
    NAMESPACE,
    TRAIN_JOB,
    WORKLOAD_TYPES,
    PodTemplate,
    pod_templates,
)

CLUSTER_TRAINING_RUNTIME = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
SECRET = "kubernetes:core/v1:Secret"
EXTERNAL_SECRET = "kubernetes:external-secrets.io/v1:ExternalSecret"
CLUSTER_SECRET_STORE = "kubernetes:external-secrets.io/v1:ClusterSecretStore"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
VAP_BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
IMAGE_POLICY = "kubernetes:policies.kyverno.io/v1beta1:ImageValidatingPolicy"
ECR_REPOSITORY = "aws:ecr/repository:Repository"
ECR_LIFECYCLE = "aws:ecr/lifecyclePolicy:LifecyclePolicy"
LOG_GROUP = "aws:cloudwatch/logGroup:LogGroup"
EKS_CLUSTERS = ("eks:index:Cluster", "aws:eks/cluster:Cluster")
TEAM_LABEL = "gpu-platform.io/team"
PATTERN_ANNOTATION = "gpu-platform.io/allowed-image-pattern"
SIGNED_REPOSITORIES_ANNOTATION = "gpu-platform.io/signed-repositories"
PSS_ENFORCE = "pod-security.kubernetes.io/enforce"
PSS_ENFORCE_VERSION = "pod-security.kubernetes.io/enforce-version"
#: check_restrictedVolumes.go: the only inline volume sources `restricted` admits.
RESTRICTED_VOLUMES = {
    "configMap",
    "downwardAPI",
    "emptyDir",
    "projected",
    "secret",
    "csi",
    "persistentVolumeClaim",
    "ephemeral",
    "image",
}
#: check_capabilities_restricted.go: the one capability `restricted` lets a container add.
ALLOWED_ADD = {"NET_BIND_SERVICE"}
SECRET_ENV_NAME = re.compile(r"(TOKEN|SECRET|PASSWORD|PASSWD|API_?KEY|CREDENTIAL|PRIVATE_KEY)")

RESTRICTED_SCHEMA: Schema = {
    "exemptNamespaces": {
        "type": "array",
        "items": {"type": "string"},
        # The add-ons whose pods are held to less than `restricted` (components/addons.py):
        # the daemons, and the FSx team-directory Jobs (root + CAP_CHOWN by design, PSS baseline
        # enforced there: docs/security.md exceptions; fsx_team_dirs.team_dirs_job).
        "default": list(addons.namespaces_at(["privileged", "baseline"])),
        "description": "Namespaces of the platform's own daemons (device plugins, exporters) "
        "and the FSx team-directory Jobs.",
    }
}


def _context(spec: Mapping[str, Any], container: Mapping[str, Any], key: str) -> Any:
    """A securityContext field: the container's, else the pod's."""
    value = dig(container, "securityContext", key)
    return value if value is not None else dig(spec, "securityContext", key)


def restricted_problems(template: PodTemplate, *, complete: bool) -> Iterator[str]:
    """Why a pod template is not `restricted` (+ the platform's hardening). `complete=False`
    for partial templates (TrainJob runtime patches): only explicit weakenings count there,
    the runtime they patch supplies the rest."""
    spec = template.spec
    where = template.where
    if complete and spec.get("automountServiceAccountToken") is not False:
        yield f"{where}: automountServiceAccountToken is not false"
    for field in ("hostNetwork", "hostPID", "hostIPC"):
        if spec.get(field) is True:
            yield f"{where}: {field} is true"
    for volume in as_list(spec.get("volumes")):
        kinds = {k for k in (volume if is_map(volume) else {}) if k != "name"}
        if kinds - RESTRICTED_VOLUMES:
            yield f"{where}: volume {dig(volume, 'name')!r} is {', '.join(sorted(kinds))}"
    # check_runAsNonRoot.go: an explicit false anywhere fails, even if a container sets true.
    if dig(spec, "securityContext", "runAsNonRoot") is False:
        yield f"{where}: pod runAsNonRoot is false"
    pod_seccomp = dig(spec, "securityContext", "seccompProfile", "type")
    if pod_seccomp is not None and pod_seccomp not in ("RuntimeDefault", "Localhost"):
        yield f"{where}: pod seccompProfile.type is {pod_seccomp!r}"
    for container in template.containers():
        name = f"{where} container {container.get('name')!r}"
        non_root = _context(spec, container, "runAsNonRoot")
        if non_root is not True and (complete or non_root is False):
            yield f"{name}: runAsNonRoot is not true"
        if _context(spec, container, "runAsUser") == 0:
            yield f"{name}: runAsUser is 0"
        seccomp = dig(_context(spec, container, "seccompProfile"), "type")
        if seccomp not in ("RuntimeDefault", "Localhost") and (complete or seccomp is not None):
            yield f"{name}: seccompProfile.type is {seccomp!r}, not RuntimeDefault"
        context = container.get("securityContext") or {}
        if context.get("privileged") is True:
            yield f"{name}: privileged"
        escalation = context.get("allowPrivilegeEscalation")
        if escalation is not False and (complete or escalation is True):
            yield f"{name}: allowPrivilegeEscalation is not false"
        dropped = {str(c) for c in as_list(dig(context, "capabilities", "drop"))}
        if complete and "ALL" not in dropped:
            yield f"{name}: capabilities.drop does not include ALL"
        added = {str(c) for c in as_list(dig(context, "capabilities", "add"))} - ALLOWED_ADD
        if added:
            yield f"{name}: adds capabilities {', '.join(sorted(added))}"
        if complete and context.get("readOnlyRootFilesystem") is not True:
            yield f"{name}: readOnlyRootFilesystem is not true"


def runtime_templates(resource: Resource) -> list[PodTemplate]:
    jobs = dig(resource.props, "spec", "template", "spec", "replicatedJobs")
    out = []
    for job in as_list(jobs):
        template = dig(job, "template", "spec", "template")
        if is_map(template):
            out.append(
                PodTemplate(
                    f"replicatedJobs[{dig(job, 'name')}]",
                    "cluster",
                    template.get("metadata") or {},
                    template.get("spec") or {},
                )
            )
    return out


def _check_restricted(resource: Resource, config: Config) -> Iterator[str]:
    if resource.type == CLUSTER_TRAINING_RUNTIME:
        for template in runtime_templates(resource):
            yield from restricted_problems(template, complete=True)
        return
    for template in pod_templates(resource):
        if template.namespace in config["exemptNamespaces"]:
            continue
        yield from restricted_problems(template, complete=resource.type != TRAIN_JOB)


def _check_namespace_pss(resource: Resource, _config: Config) -> Iterator[str]:
    labels = dig(resource.props, "metadata", "labels") or {}
    if TEAM_LABEL not in labels:
        return
    if labels.get(PSS_ENFORCE) != "restricted":
        yield f"team namespace enforces PSS {labels.get(PSS_ENFORCE)!r}, not 'restricted'"
    if not labels.get(PSS_ENFORCE_VERSION):
        yield "team namespace does not pin pod-security.kubernetes.io/enforce-version"


def _team_namespace_names(resources: Sequence[PolicyResource]) -> set[str]:
    """Team namespaces where team pods can run: a namespace whose ResourceQuota allows no pod
    (a fleet manager's, components/platform/fleet/manager.py) admits no image at all."""
    podless = podless_namespaces(resources)
    return {
        name
        for r in resources
        if r.resource_type == NAMESPACE
        and TEAM_LABEL in (dig(r.props, "metadata", "labels") or {})
        and (name := str(dig(r.props, "metadata", "name"))) not in podless
    }


def _check_trusted_images(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    teams = _team_namespace_names(resources)
    patterns = [
        dig(r.props, "metadata", "annotations", PATTERN_ANNOTATION)
        for r in resources
        if r.resource_type == VAP
    ]
    patterns = [p for p in patterns if isinstance(p, str)]
    if teams and not patterns:
        yield "no trusted-images admission policy guards the team namespaces", None
        return
    allowed = [re.compile(p) for p in patterns]
    for r in resources:
        if r.resource_type not in WORKLOAD_TYPES:
            continue
        res = Resource(r.resource_type, r.name, r.urn, r.props)
        for template in pod_templates(res):
            if template.namespace not in teams:
                continue
            for container in template.containers():
                image = container.get("image")
                if isinstance(image, str) and not any(p.fullmatch(image) for p in allowed):
                    yield (
                        f"{template.where} container {container.get('name')!r}: image "
                        f"{image!r} would be rejected at admission (registry or digest)",
                        r.urn,
                    )


def signature_scope(props: Mapping[str, Any]) -> tuple[list[re.Pattern[str]], set[str]]:
    """Of a Kyverno ImageValidatingPolicy: the images it checks (its `matchImageReferences`
    globs) and the repositories its trusted signer publishes (our annotation; empty: unknown).
    Kyverno matches the globs with gobwas/glob and no separators, so `*` also matches `/`
    (kyverno/kyverno@v1.19.0: pkg/cel/compiler/image.go); fnmatch's `*` does the same."""
    raw = dig(props, "metadata", "annotations", SIGNED_REPOSITORIES_ANNOTATION)
    globs = [
        re.compile(fnmatch.translate(str(ref["glob"])))
        for ref in as_list(dig(props, "spec", "matchImageReferences"))
        if is_map(ref) and "glob" in ref
    ]
    return globs, set(json.loads(raw)) if isinstance(raw, str) else set()


def _check_signable_images(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    teams = _team_namespace_names(resources)
    for policy in (r for r in resources if r.resource_type == IMAGE_POLICY):
        if "Deny" not in as_list(dig(policy.props, "spec", "validationActions")):
            continue  # Audit: admission records it and lets the pod in
        globs, signed = signature_scope(policy.props)
        if not signed:
            continue
        for r in resources:
            if r.resource_type not in WORKLOAD_TYPES:
                continue
            for template in pod_templates(Resource(r.resource_type, r.name, r.urn, r.props)):
                if template.namespace not in teams:
                    continue
                for container in template.containers():
                    image = container.get("image")
                    if not isinstance(image, str) or not any(g.match(image) for g in globs):
                        continue
                    if not catalog.in_repositories(catalog.image_repository(image), signed):
                        yield (
                            f"{template.where} container {container.get('name')!r}: image "
                            f"{image!r} needs a signature by the platform's trusted signer, "
                            f"which signs only {', '.join(sorted(signed))}: admission "
                            f"({policy.name}, Deny) would reject it",
                            r.urn,
                        )


def _check_admission_enforced(
    resources: Sequence[PolicyResource], config: Config
) -> Iterator[tuple[str, str | None]]:
    if not _team_namespace_names(resources):
        return
    bindings = [r for r in resources if r.resource_type == VAP_BINDING]
    if not bindings:
        yield "no ValidatingAdmissionPolicyBinding for the trusted-images policy", None
    want = "Deny" if config["requireDeny"] else None
    for binding in bindings:
        actions = as_list(dig(binding.props, "spec", "validationActions"))
        if want and want not in actions:
            yield f"binding {binding.name!r} does not Deny ({actions})", binding.urn
        if not dig(binding.props, "spec", "matchResources", "namespaceSelector"):
            yield f"binding {binding.name!r} selects no namespaces", binding.urn
    if config["requireSignatures"]:
        signed = [r for r in resources if r.resource_type == IMAGE_POLICY]
        if not signed:
            yield "no Kyverno ImageValidatingPolicy verifies image signatures", None
        for policy in signed:
            actions = as_list(dig(policy.props, "spec", "validationActions"))
            if want and want not in actions:
                yield f"signature policy {policy.name!r} does not Deny ({actions})", policy.urn


def _check_ecr_repository(resource: Resource, _config: Config) -> Iterator[str]:
    props = resource.props
    mutability = props.get("imageTagMutability") or "MUTABLE"
    filters = [
        str(f.get("filter"))
        for f in as_list(props.get("imageTagMutabilityExclusionFilters"))
        if is_map(f)
    ]
    if mutability == "IMMUTABLE_WITH_EXCLUSION":
        # Only the tags tools rewrite by design may move: cosign's signature tags and
        # BuildKit's registry cache (components/platform/registry/registry.py).
        extra = sorted(set(filters) - set(catalog.ECR_MUTABLE_TAG_FILTERS))
        if extra:
            yield (
                f"tags matching {', '.join(extra)} are mutable; only "
                f"{', '.join(catalog.ECR_MUTABLE_TAG_FILTERS)} may be"
            )
    elif mutability != "IMMUTABLE":
        yield f"tags are {mutability}, not IMMUTABLE"
    encryption = [e for e in as_list(props.get("encryptionConfigurations")) if is_map(e)]
    if not any(e.get("encryptionType") == "KMS" for e in encryption):
        yield "not encrypted with KMS"
    if dig(props, "imageScanningConfiguration", "scanOnPush") is not True:
        yield "images are not scanned on push"


def _check_ecr_lifecycle(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    covered = {
        str(dig(r.props, "repository")) for r in resources if r.resource_type == ECR_LIFECYCLE
    }
    for repo in resources:
        if repo.resource_type == ECR_REPOSITORY and str(repo.props.get("name")) not in covered:
            yield f"repository {repo.props.get('name')!r} has no lifecycle policy", repo.urn


def _check_log_group(resource: Resource, _config: Config) -> Iterator[str]:
    if not resource.props.get("kmsKeyId"):
        yield "log group is not encrypted with a KMS key"
    if not resource.props.get("retentionInDays"):
        yield "log group never expires (retentionInDays unset)"


def _check_control_plane_log_group(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    """EKS writes control-plane logs to `/aws/eks/<name>/cluster` and creates that group itself
    (no KMS key, never expires) unless it exists first: declare it and make the cluster wait
    for it (terraform-aws-modules/terraform-aws-eks@v21.19.0:main.tf#L199-245)."""
    groups = {str(r.props.get("name")): r for r in resources if r.resource_type == LOG_GROUP}
    for cluster in resources:
        if cluster.resource_type not in EKS_CLUSTERS:
            continue
        if not as_list(cluster.props.get("enabledClusterLogTypes")):
            continue
        wanted = f"/aws/eks/{cluster.props.get('name')}/cluster"
        group = groups.get(wanted)
        if group is None:
            why = "which EKS creates unencrypted and never-expiring: declare the log group"
            yield f"control-plane logs go to {wanted}, {why}", cluster.urn
        elif not any(c is cluster for c in dependents(resources, group, cluster.resource_type)):
            yield f"the cluster does not depend on {wanted}: EKS may create it first", cluster.urn


def _check_no_secret_values(resource: Resource, _config: Config) -> Iterator[str]:
    if resource.type == SECRET and (resource.props.get("data") or resource.props.get("stringData")):
        yield "a Secret with values is declared (its values land in state and manifests)"
    if resource.type == CLUSTER_SECRET_STORE:
        yield "a ClusterSecretStore lets any namespace read through it: use a SecretStore"
    if resource.type == EXTERNAL_SECRET:
        kind = dig(resource.props, "spec", "secretStoreRef", "kind") or "SecretStore"
        if kind != "SecretStore":
            yield f"ExternalSecret reads through a {kind}, not its namespace's SecretStore"
    for template in pod_templates(resource):
        for container in template.containers():
            for env in as_list(container.get("env")):
                name = str(dig(env, "name") or "")
                if SECRET_ENV_NAME.search(name) and dig(env, "value"):
                    yield f"{template.where}: env {name!r} carries a literal value"


POLICIES = [
    resource_rule(
        name="gpu-platform-k8s-pod-restricted",
        description="Pods are PSS restricted (non-root, RuntimeDefault seccomp, drop ALL, no "
        "escalation, allowed volume types) with a read-only root and no API token.",
        types=(*WORKLOAD_TYPES, CLUSTER_TRAINING_RUNTIME),
        check=_check_restricted,
        severity=CRITICAL,
        enforcement=MANDATORY,
        remediation="Use components.analysis.pod_security (restricted_pod_fields, "
        "restricted_container_fields, the /tmp scratch volume).",
        config=RESTRICTED_SCHEMA,
    ),
    resource_rule(
        name="gpu-platform-k8s-namespace-pss-restricted",
        description="Team namespaces enforce the PSS restricted profile at a pinned version.",
        types=(NAMESPACE,),
        check=_check_namespace_pss,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Label with pod_security.RESTRICTED_NAMESPACE_LABELS (Teams does).",
    ),
    stack_rule(
        name="gpu-platform-k8s-trusted-images",
        description="Every image in a team namespace passes the trusted-images admission "
        "policy's own pattern (allowed registry, digest): caught before deploy.",
        check=_check_trusted_images,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Push the image to the platform ECR (or an allowed registry) and reference "
        "it by digest; list extra registries in security.imageAdmission.allowedRegistries.",
    ),
    stack_rule(
        name="gpu-platform-k8s-signable-images",
        description="Every team image the signature policy checks under Deny comes from a "
        "repository the trusted signer publishes: any other can never carry its signature.",
        check=_check_signable_images,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Release the image through .github/workflows/release.yml (or list the "
        "signer's repositories in security.imageAdmission.signatures.signedRepositories).",
    ),
    stack_rule(
        name="gpu-platform-k8s-image-admission-enforced",
        description="The trusted-images policy is bound to team namespaces and denies, and a "
        "Kyverno policy verifies image signatures (where required).",
        check=_check_admission_enforced,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Keep security.imageAdmission.action Deny and signatures enabled.",
        config={
            "requireDeny": {"type": "boolean", "default": True},
            "requireSignatures": {"type": "boolean", "default": True},
        },
    ),
    resource_rule(
        name="gpu-platform-ecr-repository-hardened",
        description="ECR repositories have immutable tags, KMS encryption and scan on push.",
        types=(ECR_REPOSITORY,),
        check=_check_ecr_repository,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Create repositories through the Registry component.",
    ),
    stack_rule(
        name="gpu-platform-ecr-lifecycle",
        description="Every ECR repository has a lifecycle policy.",
        check=_check_ecr_lifecycle,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Add an aws.ecr.LifecyclePolicy (registry.lifecycle_policy).",
    ),
    resource_rule(
        name="gpu-platform-logs-encrypted-retained",
        description="CloudWatch log groups are KMS-encrypted and expire.",
        types=(LOG_GROUP,),
        check=_check_log_group,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Set kmsKeyId and retentionInDays (security.logging.retentionDays).",
    ),
    stack_rule(
        name="gpu-platform-eks-control-plane-log-group",
        description="A cluster sending control-plane logs declares /aws/eks/<name>/cluster "
        "(so the log-group rule covers it) and depends on it.",
        check=_check_control_plane_log_group,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Pass the Logging component to ClusterArgs.of (logging=...).",
    ),
    resource_rule(
        name="gpu-platform-k8s-no-secret-values",
        description="No secret value is declared: no Secret with data, no literal credential "
        "env, ExternalSecrets only through their namespace's SecretStore.",
        types=(*WORKLOAD_TYPES, SECRET, EXTERNAL_SECRET, CLUSTER_SECRET_STORE),
        check=_check_no_secret_values,
        severity=CRITICAL,
        enforcement=MANDATORY,
        remediation="Declare trainingJobs[].secrets (AWS Secrets Manager teams/<team>/<name>).",
    ),
]
