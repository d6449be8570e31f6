"""Violating and compliant synthetic stacks for the security rules (policies/rules/security.py).

Same shape as tests/policies/policy_cases.py (policy name, description, resources, pack config,
expect a violation); kept apart so the table stays readable. Pods are built from the platform's
own restricted contexts (components.analysis.pod_security) and then broken one field at a time.
"""

from __future__ import annotations

import copy
from typing import Any

from components.analysis import pod_security
from components.config.security import ImageAdmissionConfig
from components.platform.registry import admission
from components.platform.storage import fsx_team_dirs

Res = tuple[str, str, dict[str, Any], tuple[str, ...]]
Case = tuple[str, str, list[Res], dict[str, Any], bool]

DIGEST = "@sha256:" + "b" * 64
ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
GOOD_IMAGE = f"{ECR}/trainer:1.0{DIGEST}"
PATTERN = admission.image_pattern([ECR, "ghcr.io/gpu-platform"], require_digest=True)
DEV = {"gpu-platform-k8s-image-admission-enforced": {"requireDeny": False}}


def _r(typ: str, name: str, inputs: dict[str, Any], *deps: str) -> Res:
    return (typ, name, inputs, deps)


def restricted_pod(image: str = GOOD_IMAGE, **over: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "trainer",
                "image": image,
                **pod_security.restricted_container_fields(),
                "volumeMounts": [pod_security.scratch_mount()],
            }
        ],
        "volumes": [pod_security.scratch_volume()],
        **pod_security.restricted_pod_fields(),
    }
    spec.update(over)
    return spec


def broken(path: tuple[str, ...], value: Any) -> dict[str, Any]:
    """A restricted pod with one field changed (`("c", key)` is the container's context)."""
    spec = restricted_pod()
    if path[0] == "c":
        spec["containers"][0]["securityContext"][path[1]] = value
    elif path[0] == "pod":
        spec["securityContext"][path[1]] = value
    else:
        spec[path[0]] = value
    return spec


def job(spec: dict[str, Any], namespace: str = "team-a", name: str = "train") -> Res:
    return _r(
        "kubernetes:batch/v1:Job",
        name,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"template": {"spec": spec}},
        },
    )


def namespace(name: str = "team-a", **labels: str) -> Res:
    return _r(
        "kubernetes:core/v1:Namespace",
        f"ns-{name}",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {"gpu-platform.io/team": "a", **labels}},
        },
    )


def vap(pattern: str = PATTERN) -> Res:
    return _r(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
        "vap",
        {
            "metadata": {
                "name": "p",
                "annotations": {"gpu-platform.io/allowed-image-pattern": pattern},
            }
        },
    )


def binding(*actions: str) -> Res:
    return _r(
        "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
        "binding",
        {
            "metadata": {"name": "p"},
            "spec": {
                "policyName": "p",
                "validationActions": list(actions),
                "matchResources": {
                    "namespaceSelector": {
                        "matchExpressions": [{"key": "gpu-platform.io/team", "operator": "Exists"}]
                    }
                },
            },
        },
    )


def signature_policy(*actions: str) -> Res:
    return _r(
        "kubernetes:policies.kyverno.io/v1beta1:ImageValidatingPolicy",
        "signed",
        {"metadata": {"name": "signed"}, "spec": {"validationActions": list(actions)}},
    )


def signing_policy(action: str, repositories: list[str]) -> Res:
    """The signature policy as the platform renders it for `action`, signed by a keyless
    signer that publishes `repositories`."""
    config = ImageAdmissionConfig.model_validate(
        {
            "action": action,
            "signatures": {
                "platformKey": False,
                "keylessIssuer": "https://token.actions.githubusercontent.com",
                "keylessSubjectRegexp": "^https://github\\.com/org/repo/.*$",
                "signedRepositories": repositories,
            },
        }
    )
    return _r(
        "kubernetes:policies.kyverno.io/v1beta1:ImageValidatingPolicy",
        "signed",
        admission.signed_images_policy(config, [ECR, "ghcr.io/gpu-platform"], repositories),
    )


def platform_signing_policy(action: str, cluster: str) -> Res:
    """The signature policy with the platform key as the signer: it signs `<ECR>/<cluster>/...`."""
    config = ImageAdmissionConfig.model_validate({"action": action})
    signed = [f"{ECR}/{cluster}"]
    policy = admission.signed_images_policy(config, [ECR], signed, platform_key="PEM")
    return _r("kubernetes:policies.kyverno.io/v1beta1:ImageValidatingPolicy", "signed", policy)


RELEASED = f"ghcr.io/gpu-platform/trainer:0.2.0{DIGEST}"


def runtime(**container_context: Any) -> Res:
    spec = restricted_pod()
    spec["containers"][0]["securityContext"].update(container_context)
    return _r(
        "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime",
        "runtime",
        {
            "spec": {
                "template": {
                    "spec": {
                        "replicatedJobs": [
                            {"name": "node", "template": {"spec": {"template": {"spec": spec}}}}
                        ]
                    }
                }
            }
        },
    )


def train_job(patch: dict[str, Any]) -> Res:
    return _r(
        "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob",
        "tj",
        {
            "metadata": {"name": "tj", "namespace": "team-a"},
            "spec": {
                "trainer": {"image": GOOD_IMAGE},
                "runtimePatches": [
                    {
                        "trainingRuntimeSpec": {
                            "template": {
                                "spec": {
                                    "replicatedJobs": [
                                        {
                                            "name": "node",
                                            "template": {"spec": {"template": {"spec": patch}}},
                                        }
                                    ]
                                }
                            }
                        }
                    }
                ],
            },
        },
    )


def repository(**over: Any) -> Res:
    inputs = {
        "name": "gpu-prod/trainer",
        "imageTagMutability": "IMMUTABLE",
        "encryptionConfigurations": [{"encryptionType": "KMS", "kmsKey": "arn:aws:kms:k"}],
        "imageScanningConfiguration": {"scanOnPush": True},
    }
    inputs.update(over)
    return _r("aws:ecr/repository:Repository", "repo", inputs)


LIFECYCLE = _r("aws:ecr/lifecyclePolicy:LifecyclePolicy", "lc", {"repository": "gpu-prod/trainer"})


def log_group(**over: Any) -> Res:
    inputs = {"name": "/aws/x", "kmsKeyId": "arn:aws:kms:k", "retentionInDays": 365}
    inputs.update(over)
    return _r("aws:cloudwatch/logGroup:LogGroup", "lg", inputs)


def eks_cluster(*deps: str, **over: Any) -> Res:
    inputs = {"name": "gpu-prod", "enabledClusterLogTypes": ["api", "audit"]}
    inputs.update(over)
    return _r("eks:index:Cluster", "eks", inputs, *deps)


CONTROL_PLANE_GROUP = _r(
    "aws:cloudwatch/logGroup:LogGroup",
    "cp",
    {"name": "/aws/eks/gpu-prod/cluster", "kmsKeyId": "arn:aws:kms:k", "retentionInDays": 365},
)


def _env_pod(env: list[dict[str, Any]]) -> dict[str, Any]:
    spec = restricted_pod()
    spec["containers"][0]["env"] = env
    return spec


RESTRICTED = "gpu-platform-k8s-pod-restricted"
host_path_pod = restricted_pod(volumes=[{"name": "h", "hostPath": {"path": "/dev/shm"}}])
added_cap = copy.deepcopy(restricted_pod())
added_cap["containers"][0]["securityContext"]["capabilities"]["add"] = ["IPC_LOCK"]

_TEAM_DIR_POD = fsx_team_dirs.team_dirs_job(["a"], GOOD_IMAGE, 600)["spec"]["template"]["spec"]

SECURITY_CASES: list[Case] = [
    (RESTRICTED, "the platform's restricted pod", [job(restricted_pod())], {}, False),
    # The one root pod (FSx team directories) is exempt in its PSS-baseline platform namespace
    # only; the same pod in a team namespace is caught.
    (
        RESTRICTED,
        "FSx team-dir Job in its platform namespace",
        [job(_TEAM_DIR_POD, namespace=fsx_team_dirs.FSX_ADMIN_NAMESPACE)],
        {},
        False,
    ),
    (RESTRICTED, "FSx team-dir Job in a team namespace", [job(_TEAM_DIR_POD)], {}, True),
    (
        RESTRICTED,
        "root (runAsNonRoot false)",
        [job(broken(("pod", "runAsNonRoot"), False))],
        {},
        True,
    ),
    (RESTRICTED, "runAsUser 0", [job(broken(("c", "runAsUser"), 0))], {}, True),
    (RESTRICTED, "privileged", [job(broken(("c", "privileged"), True))], {}, True),
    (RESTRICTED, "escalation", [job(broken(("c", "allowPrivilegeEscalation"), True))], {}, True),
    (RESTRICTED, "writable root", [job(broken(("c", "readOnlyRootFilesystem"), False))], {}, True),
    (
        RESTRICTED,
        "API token mounted",
        [job(broken(("automountServiceAccountToken",), True))],
        {},
        True,
    ),
    (
        RESTRICTED,
        "seccomp unconfined",
        [job(broken(("pod", "seccompProfile"), {"type": "Unconfined"}))],
        {},
        True,
    ),
    (RESTRICTED, "hostPath /dev/shm", [job(host_path_pod)], {}, True),
    (RESTRICTED, "IPC_LOCK added", [job(added_cap)], {}, True),
    (
        RESTRICTED,
        "exempt daemon namespace",
        [job(restricted_pod(hostPID=True), "gpu-operator")],
        {},
        False,
    ),
    (RESTRICTED, "runtime without drop ALL", [runtime(capabilities={})], {}, True),
    (RESTRICTED, "restricted runtime", [runtime()], {}, False),
    (
        RESTRICTED,
        "TrainJob patch adds privilege",
        [train_job({"containers": [{"name": "node", "securityContext": {"privileged": True}}]})],
        {},
        True,
    ),
    (
        RESTRICTED,
        "TrainJob patch with volumes only",
        [train_job({"volumes": [pod_security.scratch_volume()]})],
        {},
        False,
    ),
    (
        "gpu-platform-k8s-namespace-pss-restricted",
        "team namespace enforces baseline",
        [namespace(**{"pod-security.kubernetes.io/enforce": "baseline"})],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-namespace-pss-restricted",
        "restricted, version pinned",
        [namespace(**pod_security.RESTRICTED_NAMESPACE_LABELS)],
        {},
        False,
    ),
    (
        "gpu-platform-k8s-trusted-images",
        "tag-only image in a team namespace",
        [namespace(), vap(), job(restricted_pod(image=f"{ECR}/trainer:1.0"))],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-trusted-images",
        "image from a registry not allowed",
        [namespace(), vap(), job(restricted_pod(image=f"docker.io/library/python:3.11{DIGEST}"))],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-trusted-images",
        "team namespaces without the admission policy",
        [namespace(), job(restricted_pod())],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-trusted-images",
        "platform ECR by digest",
        [namespace(), vap(), job(restricted_pod())],
        {},
        False,
    ),
    (
        "gpu-platform-k8s-image-admission-enforced",
        "binding only audits (prod)",
        [namespace(), binding("Audit", "Warn"), signature_policy("Deny")],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-image-admission-enforced",
        "no signature policy",
        [namespace(), binding("Deny")],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-image-admission-enforced",
        "denies, signatures verified",
        [namespace(), binding("Deny"), signature_policy("Deny")],
        {},
        False,
    ),
    (
        "gpu-platform-k8s-image-admission-enforced",
        "dev audits",
        [namespace(), binding("Audit", "Warn"), signature_policy("Audit")],
        DEV,
        False,
    ),
    (
        "gpu-platform-k8s-signable-images",
        "ECR image the release identity never signs (prod)",
        [
            namespace(),
            signing_policy("Deny", ["ghcr.io/gpu-platform/trainer"]),
            job(restricted_pod()),
        ],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-signable-images",
        "another repository of the allowed GHCR org (prod)",
        [
            namespace(),
            signing_policy("Deny", ["ghcr.io/gpu-platform/trainer"]),
            job(restricted_pod(image=f"ghcr.io/gpu-platform/tools:1{DIGEST}")),
        ],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-signable-images",
        "released trainer image (prod)",
        [
            namespace(),
            signing_policy("Deny", ["ghcr.io/gpu-platform/trainer"]),
            job(restricted_pod(image=RELEASED)),
        ],
        {},
        False,
    ),
    (
        "gpu-platform-k8s-signable-images",
        "the trainer the deploy built and signed with the platform key (prod)",
        [
            namespace(),
            platform_signing_policy("Deny", "gpu-prod"),
            job(restricted_pod(image=f"{ECR}/gpu-prod/trainer{DIGEST}")),
        ],
        {},
        False,
    ),
    (
        "gpu-platform-k8s-signable-images",
        "another cluster's repository: the platform key never signs it (prod)",
        [
            namespace(),
            platform_signing_policy("Deny", "gpu-prod"),
            job(restricted_pod(image=f"{ECR}/gpu-prod-trainer/x{DIGEST}")),
        ],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-signable-images",
        "dev audits: admission lets it in",
        [
            namespace(),
            signing_policy("Audit", ["ghcr.io/gpu-platform/trainer"]),
            job(restricted_pod()),
        ],
        {},
        False,
    ),
    (
        "gpu-platform-k8s-signable-images",
        "platform namespace is not checked",
        [
            namespace(),
            signing_policy("Deny", ["ghcr.io/gpu-platform/trainer"]),
            job(restricted_pod(), namespace="gpu-platform-validation"),
        ],
        {},
        False,
    ),
    (
        "gpu-platform-ecr-repository-hardened",
        "mutable tags",
        [repository(imageTagMutability="MUTABLE")],
        {},
        True,
    ),
    (
        "gpu-platform-ecr-repository-hardened",
        "AES256 only",
        [repository(encryptionConfigurations=[{"encryptionType": "AES256"}])],
        {},
        True,
    ),
    (
        "gpu-platform-ecr-repository-hardened",
        "no scan on push",
        [repository(imageScanningConfiguration={"scanOnPush": False})],
        {},
        True,
    ),
    ("gpu-platform-ecr-repository-hardened", "hardened", [repository()], {}, False),
    ("gpu-platform-ecr-lifecycle", "no lifecycle", [repository()], {}, True),
    ("gpu-platform-ecr-lifecycle", "with lifecycle", [repository(), LIFECYCLE], {}, False),
    ("gpu-platform-logs-encrypted-retained", "no KMS", [log_group(kmsKeyId=None)], {}, True),
    (
        "gpu-platform-logs-encrypted-retained",
        "never expires",
        [log_group(retentionInDays=None)],
        {},
        True,
    ),
    ("gpu-platform-logs-encrypted-retained", "encrypted, expiring", [log_group()], {}, False),
    ("gpu-platform-eks-control-plane-log-group", "no group", [eks_cluster()], {}, True),
    (
        "gpu-platform-eks-control-plane-log-group",
        "group for another cluster name",
        [eks_cluster("cp", name="gpu-dev"), CONTROL_PLANE_GROUP],
        {},
        True,
    ),
    (
        "gpu-platform-eks-control-plane-log-group",
        "group declared, cluster does not wait for it",
        [eks_cluster(), CONTROL_PLANE_GROUP],
        {},
        True,
    ),
    (
        "gpu-platform-eks-control-plane-log-group",
        "group first, cluster depends on it",
        [CONTROL_PLANE_GROUP, eks_cluster("cp")],
        {},
        False,
    ),
    (
        "gpu-platform-eks-control-plane-log-group",
        "no control-plane logs",
        [eks_cluster(enabledClusterLogTypes=[])],
        {},
        False,
    ),
    (
        "gpu-platform-k8s-no-secret-values",
        "literal token in env",
        [job(_env_pod([{"name": "HF_TOKEN", "value": "hf_abc"}]))],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-no-secret-values",
        "Secret with data",
        [
            _r(
                "kubernetes:core/v1:Secret",
                "s",
                {"metadata": {"name": "s"}, "stringData": {"k": "v"}},
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-no-secret-values",
        "ExternalSecret through a ClusterSecretStore",
        [
            _r(
                "kubernetes:external-secrets.io/v1:ExternalSecret",
                "es",
                {"spec": {"secretStoreRef": {"kind": "ClusterSecretStore", "name": "all"}}},
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-no-secret-values",
        "env from a Secret reference",
        [
            job(
                _env_pod(
                    [
                        {
                            "name": "HF_TOKEN",
                            "valueFrom": {"secretKeyRef": {"name": "j-hf", "key": "t"}},
                        }
                    ]
                )
            )
        ],
        {},
        False,
    ),
]
