"""Kubernetes rules: pod security, GPU scheduling, images, requests, RBAC, team namespaces.

Pod templates are found in every workload kind the platform declares: core Pods, apps/v1
controllers, batch Jobs and CronJobs, Volcano Jobs, Kubeflow PyTorchJob/MPIJob and JobSets.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pulumi_policy import PolicyResource

from components import addons, catalog
from policies.rules.common import (
    ADVISORY,
    CRITICAL,
    HIGH,
    MANDATORY,
    MEDIUM,
    Config,
    Resource,
    Schema,
    as_list,
    dig,
    is_map,
    resource_rule,
    stack_rule,
    truthy,
)

GPU_RESOURCE = "nvidia.com/gpu"
GPU_TAINT_KEY = "nvidia.com/gpu"

POD = "kubernetes:core/v1:Pod"
NAMESPACE = "kubernetes:core/v1:Namespace"
RESOURCE_QUOTA = "kubernetes:core/v1:ResourceQuota"
LIMIT_RANGE = "kubernetes:core/v1:LimitRange"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
CLUSTER_ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
EKS_ADDON = "aws:eks/addon:Addon"
#: The label every team Namespace carries (components/platform/tenancy/teams.py).
TEAM_LABEL = f"{catalog.LABEL_DOMAIN}/team"

#: Template-bearing kinds: type token → path to the pod template(s) (`*` = every map entry).
TEMPLATE_PATHS: dict[str, tuple[tuple[str, ...], ...]] = {
    "kubernetes:apps/v1:Deployment": (("spec", "template"),),
    "kubernetes:apps/v1:StatefulSet": (("spec", "template"),),
    "kubernetes:apps/v1:DaemonSet": (("spec", "template"),),
    "kubernetes:apps/v1:ReplicaSet": (("spec", "template"),),
    "kubernetes:batch/v1:Job": (("spec", "template"),),
    "kubernetes:batch/v1:CronJob": (("spec", "jobTemplate", "spec", "template"),),
    "kubernetes:batch.volcano.sh/v1alpha1:Job": (("spec", "tasks", "*", "template"),),
    "kubernetes:kubeflow.org/v1:PyTorchJob": (("spec", "pytorchReplicaSpecs", "*", "template"),),
    "kubernetes:kubeflow.org/v1:MPIJob": (("spec", "mpiReplicaSpecs", "*", "template"),),
    "kubernetes:kubeflow.org/v2beta1:MPIJob": (("spec", "mpiReplicaSpecs", "*", "template"),),
    "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet": (
        ("spec", "replicatedJobs", "*", "template", "spec", "template"),
    ),
}
#: Kubeflow Trainer v2: pods come from the runtime, the TrainJob's `trainer` fields and its
#: runtime patches; `pod_templates` assembles them (see `_train_job_templates`).
TRAIN_JOB = "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob"
TRAINER_CONTAINER = "node"
WORKLOAD_TYPES = (POD, *TEMPLATE_PATHS, TRAIN_JOB)

#: Namespaces of the platform's own controllers and daemons (not team namespaces): every
#: namespace an add-on of the registry may live in, and Kubernetes' own (components/addons.py).
PLATFORM_NAMESPACES = list(addons.platform_namespaces())


@dataclass(frozen=True)
class PodTemplate:
    """One pod (template) of a workload: where it sits, its metadata and spec."""

    where: str
    namespace: str
    metadata: Mapping[str, Any]
    spec: Mapping[str, Any]

    def containers(self) -> list[Mapping[str, Any]]:
        found = as_list(self.spec.get("containers")) + as_list(self.spec.get("initContainers"))
        return [c for c in found if is_map(c)]


def _walk(value: Any, path: Sequence[str], where: str) -> Iterator[tuple[str, Any]]:
    if not path:
        yield where, value
        return
    head, *rest = path
    if head == "*":
        items = value.items() if is_map(value) else enumerate(as_list(value))
        for key, item in items:
            label = dig(item, "name") if not is_map(value) else key
            yield from _walk(item, rest, f"{where}[{label}]")
    elif is_map(value) and head in value:
        yield from _walk(value[head], rest, f"{where}.{head}" if where else head)


def pod_templates(resource: Resource) -> list[PodTemplate]:
    """Every pod template a workload resource declares (empty for other types)."""
    props = resource.props
    namespace = str(dig(props, "metadata", "namespace") or "default")
    if resource.type == POD:
        return [PodTemplate("pod", namespace, props.get("metadata") or {}, props.get("spec") or {})]
    if resource.type == TRAIN_JOB:
        return _train_job_templates(props, namespace)
    out = []
    for path in TEMPLATE_PATHS.get(resource.type, ()):
        for where, template in _walk(props, path, ""):
            if is_map(template):
                out.append(
                    PodTemplate(
                        where,
                        namespace,
                        template.get("metadata") or {},
                        template.get("spec") or {},
                    )
                )
    return out


def _train_job_templates(props: Mapping[str, Any], namespace: str) -> list[PodTemplate]:
    """A TrainJob's trainer pods: each runtime patch of a replicated job, with the trainer
    container (`node`) completed from `spec.trainer` (image, command, args, env, resources) the
    way Trainer v2 does; without patches, a template of the trainer container alone. The pods'
    grace period is the runtime's, not a patch's (Kueue v0.19.2 drops it from a patch:
    components/training_jobs/manifests.py cluster_training_runtime): the runtime is another
    stack's (the platform's) where a job stack declares the TrainJob, so it is read from the
    platform runtime's name, which states it (catalog.trainer_runtime_grace)."""
    trainer = dig(props, "spec", "trainer") or {}
    runtime = dig(props, "spec", "runtimeRef", "name")
    grace = catalog.trainer_runtime_grace(runtime) if isinstance(runtime, str) else None
    container: dict[str, Any] = {"name": TRAINER_CONTAINER}
    for key, target in (
        ("image", "image"),
        ("command", "command"),
        ("args", "args"),
        ("env", "env"),
        ("resourcesPerNode", "resources"),
    ):
        if key in trainer:
            container[target] = trainer[key]
    path = ("spec", "runtimePatches", "*", "trainingRuntimeSpec", "template", "spec")
    out = []
    for where, spec in _walk(
        props, (*path, "replicatedJobs", "*", "template", "spec", "template"), ""
    ):
        if not is_map(spec):
            continue
        pod = dict(spec.get("spec") or {})
        # A patch's own grace never reaches the pods (dropped by Kueue's copy); the runtime's
        # does.
        pod.pop("terminationGracePeriodSeconds", None)
        if grace is not None:
            pod["terminationGracePeriodSeconds"] = grace
        patched = [c for c in as_list(pod.get("containers")) if is_map(c)]
        merged = [{**container, **c} if dig(c, "name") == TRAINER_CONTAINER else c for c in patched]
        if not any(dig(c, "name") == TRAINER_CONTAINER for c in merged):
            merged.append(container)
        pod["containers"] = merged
        out.append(PodTemplate(where, namespace, spec.get("metadata") or {}, pod))
    if not out:
        out.append(PodTemplate("spec.trainer", namespace, {}, {"containers": [container]}))
    return out


def gpu_limit(container: Mapping[str, Any]) -> Any:
    return dig(container, "resources", "limits", GPU_RESOURCE)


def requests_gpus(template: PodTemplate) -> bool:
    return any(
        gpu_limit(c) is not None or dig(c, "resources", "requests", GPU_RESOURCE) is not None
        for c in template.containers()
    )


def tolerates_gpu_taint(template: PodTemplate) -> bool:
    for toleration in as_list(template.spec.get("tolerations")):
        key, operator = dig(toleration, "key"), dig(toleration, "operator") or "Equal"
        effect = dig(toleration, "effect")
        if effect not in (None, "", "NoSchedule"):
            continue
        if key is None and operator == "Exists":
            return True
        if key == GPU_TAINT_KEY and (operator == "Exists" or dig(toleration, "value") == "true"):
            return True
    return False


def _exempt(template: PodTemplate, config: Config) -> bool:
    return template.namespace in config["exemptNamespaces"]


EXEMPT_SCHEMA: Schema = {
    "exemptNamespaces": {
        "type": "array",
        "items": {"type": "string"},
        # The add-ons whose pods are held to `privileged` (components/addons.py).
        "default": list(addons.namespaces_at(["privileged"])),
        "description": "Namespaces of the platform's own daemons (GPU operator, CNI, exporters).",
    }
}


def _check_gpu_toleration(resource: Resource, _config: Config) -> Iterator[str]:
    for template in pod_templates(resource):
        if requests_gpus(template) and not tolerates_gpu_taint(template):
            yield f"{template.where}: requests {GPU_RESOURCE} but does not tolerate the GPU taint"


def _check_gpu_limits(resource: Resource, config: Config) -> Iterator[str]:
    for template in pod_templates(resource):
        for container in template.containers():
            requested = dig(container, "resources", "requests", GPU_RESOURCE)
            limit = gpu_limit(container)
            if requested is not None and limit is None:
                yield (
                    f"{template.where} container {container.get('name')!r}: {GPU_RESOURCE} in "
                    "requests but not in limits"
                )
            elif requested is not None and str(requested) != str(limit):
                name = container.get("name")
                yield f"{template.where} container {name!r}: GPU requests != limits"
        if (
            tolerates_gpu_taint(template)
            and not requests_gpus(template)
            and not _exempt(template, config)
        ):
            yield (
                f"{template.where}: tolerates the GPU taint without requesting {GPU_RESOURCE} "
                "(it would occupy a GPU node)"
            )


def _check_privileged(resource: Resource, config: Config) -> Iterator[str]:
    for template in pod_templates(resource):
        if _exempt(template, config):
            continue
        for container in template.containers():
            context = container.get("securityContext") or {}
            if truthy(context.get("privileged")):
                yield f"{template.where} container {container.get('name')!r} is privileged"
            added = {str(c) for c in as_list(dig(context, "capabilities", "add"))}
            if added & {"SYS_ADMIN", "ALL", "NET_ADMIN"}:
                yield (
                    f"{template.where} container {container.get('name')!r} adds "
                    f"{', '.join(sorted(added & {'SYS_ADMIN', 'ALL', 'NET_ADMIN'}))}"
                )


def _check_host_path(resource: Resource, config: Config) -> Iterator[str]:
    for template in pod_templates(resource):
        if _exempt(template, config):
            continue
        for volume in as_list(template.spec.get("volumes")):
            if dig(volume, "hostPath") is not None:
                yield f"{template.where}: hostPath volume {dig(volume, 'name')!r}"


def _check_host_namespaces(resource: Resource, config: Config) -> Iterator[str]:
    for template in pod_templates(resource):
        if _exempt(template, config):
            continue
        for field in ("hostNetwork", "hostPID", "hostIPC"):
            if truthy(template.spec.get(field)):
                yield f"{template.where}: {field} is true"


def image_problem(image: str, *, require_digest: bool) -> str | None:
    """Why an image reference is not acceptable, or None."""
    name, _, digest = image.partition("@")
    last = name.rsplit("/", 1)[-1]
    tag = last.partition(":")[2] if ":" in last else ""
    if tag == "latest":
        return f"image {image!r} uses the mutable tag ':latest'"
    if not tag and not digest:
        return f"image {image!r} has no tag or digest (implicitly ':latest')"
    if require_digest and not digest.startswith("sha256:"):
        return f"image {image!r} is not pinned by digest (@sha256:...)"
    return None


def _check_images(resource: Resource, config: Config) -> Iterator[str]:
    for template in pod_templates(resource):
        for container in template.containers():
            image = container.get("image")
            if not isinstance(image, str):
                continue
            problem = image_problem(image, require_digest=bool(config["requireDigest"]))
            if problem:
                yield f"{template.where} container {container.get('name')!r}: {problem}"


def _check_requests(resource: Resource, _config: Config) -> Iterator[str]:
    for template in pod_templates(resource):
        for container in template.containers():
            requests = dig(container, "resources", "requests") or {}
            missing = [r for r in ("cpu", "memory") if r not in requests]
            if missing:
                yield (
                    f"{template.where} container {container.get('name')!r}: no "
                    f"{' or '.join(missing)} request"
                )


def _check_cluster_admin(resource: Resource, config: Config) -> Iterator[str]:
    role = resource.props.get("roleRef") or {}
    if role.get("kind") != "ClusterRole" or role.get("name") != "cluster-admin":
        return
    for subject in as_list(resource.props.get("subjects")):
        kind, name = dig(subject, "kind"), str(dig(subject, "name"))
        if kind == "ServiceAccount":
            name = f"system:serviceaccount:{dig(subject, 'namespace')}:{name}"
        if not any(fnmatch.fnmatch(name, p) for p in config["allowedSubjects"]):
            yield f"binds cluster-admin to {kind} {name!r}"


def _check_storage_class(resource: Resource, _config: Config) -> Iterator[str]:
    if resource.props.get("provisioner") == "ebs.csi.aws.com" and not truthy(
        dig(resource.props, "parameters", "encrypted")
    ):
        yield "EBS StorageClass without parameters.encrypted='true'"


def _check_quota_gpu(resource: Resource, config: Config) -> Iterator[str]:
    namespace = dig(resource.props, "metadata", "namespace")
    if namespace in config["platformNamespaces"]:
        return
    hard = dig(resource.props, "spec", "hard") or {}
    if f"requests.{GPU_RESOURCE}" not in hard:
        yield f"team quota in {namespace!r} does not bound requests.{GPU_RESOURCE}"


# --- team namespaces (stack rules) ---------------------------------------------------------------


def team_namespaces(resources: Sequence[PolicyResource], config: Config) -> list[PolicyResource]:
    return [
        r
        for r in resources
        if r.resource_type == NAMESPACE
        and dig(r.props, "metadata", "name") not in config["platformNamespaces"]
    ]


def _each_team_namespace_has(of_type: str, what: str, ok: Any = None) -> Any:
    def check(
        resources: Sequence[PolicyResource], config: Config
    ) -> Iterator[tuple[str, str | None]]:
        # The namespaces that have one, in one pass: a scan of every resource per namespace
        # made the rule quadratic in the number of teams.
        covered = set()
        for r in resources:
            if r.resource_type == of_type and (ok is None or ok(r)):
                namespace = dig(r.props, "metadata", "namespace")
                if isinstance(namespace, str):
                    covered.add(namespace)
        for namespace in team_namespaces(resources, config):
            name = str(dig(namespace.props, "metadata", "name"))
            if name not in covered:
                yield f"team namespace {name!r} has no {what}", namespace.urn

    return check


def platform_namespace_owners(resources: Sequence[PolicyResource]) -> dict[str, str]:
    """Namespace -> what the stack installs there, from what it declares (never a list kept by
    hand): Kubernetes' own, every Helm release's namespace, every EKS add-on's (the add-on
    registry knows where each puts itself: components/addons.py), every Namespace object that is
    no team's."""
    owners = {name: "Kubernetes' own namespace" for name in addons.KUBERNETES_NAMESPACES}
    eks = {a.eks_addon: a.namespace for a in addons.ADDONS if a.eks_addon is not None}
    for r in resources:
        props = r.props
        if r.resource_type == HELM_RELEASE:
            namespace = str(props.get("namespace") or "default")
            owners.setdefault(namespace, f"where Helm release {props.get('name')!r} installs")
        elif r.resource_type == EKS_ADDON and props.get("addonName") in eks:
            owners.setdefault(
                eks[props["addonName"]], f"where EKS add-on {props.get('addonName')!r} installs"
            )
        elif r.resource_type == NAMESPACE and TEAM_LABEL not in (
            dig(props, "metadata", "labels") or {}
        ):
            owners.setdefault(
                str(dig(props, "metadata", "name")), "a platform Namespace the stack declares"
            )
    return owners


def _check_team_namespace_not_platform(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    owners = platform_namespace_owners(resources)
    for r in resources:
        labels = dig(r.props, "metadata", "labels") or {}
        name = str(dig(r.props, "metadata", "name"))
        if r.resource_type == NAMESPACE and TEAM_LABEL in labels and name in owners:
            yield (
                f"team namespace {name!r} is also {owners[name]}: the team's Namespace (quota, "
                "restricted Pod Security, default deny) would be rendered over the platform's",
                r.urn,
            )


def is_default_deny(policy: PolicyResource) -> bool:
    spec = dig(policy.props, "spec") or {}
    selects_all = not dig(spec, "podSelector", "matchLabels") and not dig(
        spec, "podSelector", "matchExpressions"
    )
    return bool(
        selects_all and "Ingress" in as_list(spec.get("policyTypes")) and not spec.get("ingress")
    )


PLATFORM_NS_SCHEMA: Schema = {
    "platformNamespaces": {
        "type": "array",
        "items": {"type": "string"},
        "default": PLATFORM_NAMESPACES,
        "description": "Every other Namespace the program declares is a team namespace.",
    }
}

_TEAM_REMEDIATION = "Create team namespaces through the Teams component, which adds it."

POLICIES = [
    resource_rule(
        name="gpu-platform-k8s-gpu-pod-tolerates-taint",
        description="Pods that request GPUs tolerate the GPU taint (nvidia.com/gpu:NoSchedule).",
        types=WORKLOAD_TYPES,
        check=_check_gpu_toleration,
        severity=MEDIUM,
        enforcement=MANDATORY,
        remediation="Add components.catalog.gpu_toleration() to the pod's tolerations.",
    ),
    resource_rule(
        name="gpu-platform-k8s-gpu-in-limits",
        description="GPUs are requested in limits (= requests), and only pods that request GPUs "
        "tolerate the GPU taint.",
        types=WORKLOAD_TYPES,
        check=_check_gpu_limits,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Put nvidia.com/gpu in resources.limits (requests equal if given); drop the "
        "GPU toleration from pods that need no GPU.",
        config=EXEMPT_SCHEMA,
    ),
    resource_rule(
        name="gpu-platform-k8s-no-privileged",
        description="No privileged containers or dangerous capabilities outside the platform's "
        "own daemons.",
        types=WORKLOAD_TYPES,
        check=_check_privileged,
        severity=CRITICAL,
        enforcement=MANDATORY,
        remediation="Drop privileged/SYS_ADMIN; GPUs and EFA are exposed by device plugins.",
        config=EXEMPT_SCHEMA,
    ),
    resource_rule(
        name="gpu-platform-k8s-no-host-path",
        description="No hostPath volumes outside the platform's own daemons.",
        types=WORKLOAD_TYPES,
        check=_check_host_path,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Use a PVC (EFS/FSx), an emptyDir (/dev/shm: medium Memory) or a ConfigMap.",
        config=EXEMPT_SCHEMA,
    ),
    resource_rule(
        name="gpu-platform-k8s-no-host-namespaces",
        description="No hostNetwork, hostPID or hostIPC outside the platform's own daemons.",
        types=WORKLOAD_TYPES,
        check=_check_host_namespaces,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Remove hostNetwork/hostPID/hostIPC; NCCL over EFA needs none of them.",
        config=EXEMPT_SCHEMA,
    ),
    resource_rule(
        name="gpu-platform-k8s-image-pinned",
        description="Images are never ':latest' or untagged, and are pinned by digest where "
        "required (prod).",
        types=WORKLOAD_TYPES,
        check=_check_images,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Reference images as registry/name:tag@sha256:<digest> (the digest that CI "
        "built and scanned).",
        config={"requireDigest": {"type": "boolean", "default": True}},
    ),
    resource_rule(
        name="gpu-platform-k8s-resource-requests",
        description="Every container requests CPU and memory (the scheduler and Kueue plan with "
        "requests).",
        types=WORKLOAD_TYPES,
        check=_check_requests,
        severity=MEDIUM,
        enforcement=ADVISORY,
        remediation="Set resources.requests.cpu and .memory on every container.",
    ),
    resource_rule(
        name="gpu-platform-k8s-no-cluster-admin-binding",
        description="cluster-admin is bound only to system subjects.",
        types=(CLUSTER_ROLE_BINDING, ROLE_BINDING),
        check=_check_cluster_admin,
        severity=CRITICAL,
        enforcement=MANDATORY,
        remediation="Bind a namespaced Role (or the `admin`/`edit` ClusterRole in a RoleBinding); "
        "humans get cluster access through EKS access entries.",
        config={
            "allowedSubjects": {
                "type": "array",
                "items": {"type": "string"},
                "default": ["system:masters", "system:serviceaccount:kube-system:*"],
            }
        },
    ),
    resource_rule(
        name="gpu-platform-k8s-storageclass-encrypted",
        description="EBS StorageClasses create encrypted volumes.",
        types=(STORAGE_CLASS,),
        check=_check_storage_class,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Set parameters.encrypted: 'true' (optionally kmsKeyId).",
    ),
    resource_rule(
        name="gpu-platform-k8s-team-quota-bounds-gpus",
        description="A team's ResourceQuota bounds requests.nvidia.com/gpu.",
        types=(RESOURCE_QUOTA,),
        check=_check_quota_gpu,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Add requests.nvidia.com/gpu to spec.hard (from the team's GPU quota).",
        config=PLATFORM_NS_SCHEMA,
    ),
    stack_rule(
        name="gpu-platform-k8s-team-resource-quota",
        description="Every team namespace has a ResourceQuota.",
        check=_each_team_namespace_has(RESOURCE_QUOTA, "ResourceQuota"),
        severity=HIGH,
        enforcement=MANDATORY,
        remediation=_TEAM_REMEDIATION,
        config=PLATFORM_NS_SCHEMA,
    ),
    stack_rule(
        name="gpu-platform-k8s-team-limit-range",
        description="Every team namespace has a LimitRange (default requests for containers).",
        check=_each_team_namespace_has(LIMIT_RANGE, "LimitRange"),
        severity=MEDIUM,
        enforcement=MANDATORY,
        remediation=_TEAM_REMEDIATION,
        config=PLATFORM_NS_SCHEMA,
    ),
    stack_rule(
        name="gpu-platform-k8s-team-namespace-not-platform",
        description="No team namespace is one the stack installs an add-on into, or one of "
        "Kubernetes' own.",
        check=_check_team_namespace_not_platform,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Give the team a namespace of its own (teams[i].namespace); the config check "
        "names the add-ons' namespaces (components/analysis/addons.py).",
    ),
    stack_rule(
        name="gpu-platform-k8s-team-default-deny",
        description="Every team namespace has a default-deny ingress NetworkPolicy.",
        check=_each_team_namespace_has(
            NETWORK_POLICY,
            "default-deny NetworkPolicy (podSelector {}, Ingress, no rules)",
            is_default_deny,
        ),
        severity=HIGH,
        enforcement=MANDATORY,
        remediation=_TEAM_REMEDIATION,
        config=PLATFORM_NS_SCHEMA,
    ),
]
