"""The restricted pod: one definition of the pod and container securityContext every pod the
platform renders carries (training jobs of every launcher, the Trainer runtimes, validation
jobs), the writable scratch a read-only root filesystem needs, and checkov skip annotations.

It satisfies both the Pod Security Standard `restricted` profile, which team namespaces
enforce, and checkov's Kubernetes checks (docs/security.md):
- PSS restricted (kubernetes/pod-security-admission@v0.33.13:policy/): runAsNonRoot true,
  runAsUser != 0, seccomp RuntimeDefault|Localhost, allowPrivilegeEscalation false on every
  container, capabilities.drop ALL (add only NET_BIND_SERVICE), volumes only configMap,
  downwardAPI, emptyDir, projected, secret, csi, persistentVolumeClaim, ephemeral, image.
- checkov 3.3.30 (checkov/kubernetes/checks/resource/k8s/): CKV_K8S_31 accepts only
  `RuntimeDefault` (Seccomp.py), CKV_K8S_40 wants runAsUser >= 10000 (RootContainersHighUID.py),
  CKV_K8S_38 automountServiceAccountToken false, CKV_K8S_22 readOnlyRootFilesystem.

GPUs and EFA need no privilege: the device plugins hand device nodes to the container through
the kubelet's Allocate response, so a pod only requests `nvidia.com/gpu` /
`vpc.amazonaws.com/efa` (AWS's own EKS FSDP example runs with no securityContext at all:
aws-samples/awsome-distributed-training@7217859:3.test_cases/pytorch/FSDP/kubernetes/
fsdp.yaml-template). EFA's real constraint is RLIMIT_MEMLOCK, which comes from the node's
containerd, not from a capability (IPC_LOCK is not even allowed at PSS baseline).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

#: The UID/GID platform images run as: the reference trainer's `USER 10001:10001`
#: (images/trainer/Dockerfile). >= 10000 keeps it clear of host UIDs (CKV_K8S_40).
RUN_AS_USER: Final = 10001

#: The writable scratch a read-only root filesystem leaves: an emptyDir at /tmp, with HOME and
#: the caches that torch, Triton and DeepSpeed write (JIT kernels, extensions) pointed into it.
SCRATCH_VOLUME: Final = "scratch"
SCRATCH_MOUNT: Final = "/tmp"
SCRATCH_ENV: Final = {
    "HOME": SCRATCH_MOUNT,
    "XDG_CACHE_HOME": f"{SCRATCH_MOUNT}/.cache",
    "TRITON_CACHE_DIR": f"{SCRATCH_MOUNT}/.cache/triton",
    "TORCH_EXTENSIONS_DIR": f"{SCRATCH_MOUNT}/.cache/torch_extensions",
    # Nothing may be written next to the code on a read-only root.
    "PYTHONDONTWRITEBYTECODE": "1",
}

#: Why GPU pods carry no CPU limit (checkov CKV_K8S_11). No `=` in a reason: checkov splits the
#: annotation value on `=` into exactly two parts and fails the whole file otherwise.
NO_CPU_LIMIT_REASON: Final = (
    "Whole-node GPU pod: a CFS CPU quota throttles data loaders and NCCL proxy threads; "
    "memory and GPUs are limited and the namespace quota bounds CPU requests"
)
CHECKOV_SKIP_PREFIX: Final = "checkov.io/skip"


def pod_security_context(run_as_user: int = RUN_AS_USER) -> dict[str, Any]:
    """Pod level: non-root, fixed UID/GID, RuntimeDefault seccomp. `OnRootMismatch` keeps the
    kubelet from chowning a whole checkpoint volume on every start (fsGroup otherwise walks it)."""
    return {
        "runAsNonRoot": True,
        "runAsUser": run_as_user,
        "runAsGroup": run_as_user,
        "fsGroup": run_as_user,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def container_security_context(run_as_user: int = RUN_AS_USER) -> dict[str, Any]:
    """Container level: no privilege or escalation, every capability dropped, read-only root."""
    return {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": run_as_user,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }


def restricted_container_fields() -> dict[str, Any]:
    """The container fields every platform container sets. With a digest-pinned image, `Always`
    costs one manifest request per pod start (layers stay cached) and re-checks the node's right
    to pull it (CKV_K8S_15)."""
    return {"imagePullPolicy": "Always", "securityContext": container_security_context()}


def restricted_pod_fields() -> dict[str, Any]:
    """The pod-spec fields every platform pod sets. No pod of the platform talks to the
    Kubernetes API, so no API token is mounted; AWS credentials come from EKS Pod Identity,
    which injects its own projected token (`eks-pod-identity-token`, audience
    pods.eks.amazonaws.com) independent of this flag (UNVERIFIED on a cluster: docs/security.md
    lists the post-deploy check)."""
    return {"automountServiceAccountToken": False, "securityContext": pod_security_context()}


def scratch_volume(size: str = "20Gi") -> dict[str, Any]:
    return {"name": SCRATCH_VOLUME, "emptyDir": {"sizeLimit": size}}


def scratch_mount() -> dict[str, Any]:
    return {"name": SCRATCH_VOLUME, "mountPath": SCRATCH_MOUNT}


def checkov_skips(reasons: Mapping[str, str]) -> dict[str, str]:
    """`checkov.io/skipN: <check>=<reason>` annotations (bridgecrewio/checkov@3.3.13:docs/
    2.Basics/Suppressing and Skipping Policies.md); each skip must say why."""
    out: dict[str, str] = {}
    for index, (check, reason) in enumerate(sorted(reasons.items()), start=1):
        if "=" in reason or not reason.strip():
            raise ValueError(f"checkov skip reason for {check} must be non-empty and have no '='")
        out[f"{CHECKOV_SKIP_PREFIX}{index}"] = f"{check}={reason}"
    return out


def gpu_pod_skips() -> dict[str, str]:
    """The one checkov exception GPU pods carry: no CPU limit."""
    return checkov_skips({"CKV_K8S_11": NO_CPU_LIMIT_REASON})


#: A Trainer runtime is a template: each TrainJob sets `trainer.resourcesPerNode`.
RUNTIME_RESOURCES_REASON: Final = (
    "Template only: every TrainJob sets trainer.resourcesPerNode for this container"
)


def runtime_template_skips() -> dict[str, str]:
    """The resource checks a ClusterTrainingRuntime cannot meet on its own (requests/limits
    come from each TrainJob); every security check still applies to it."""
    checks = ("CKV_K8S_10", "CKV_K8S_11", "CKV_K8S_12", "CKV_K8S_13")
    return checkov_skips(dict.fromkeys(checks, RUNTIME_RESOURCES_REASON))


#: Pod Security Admission labels of every namespace that runs platform or team pods. The
#: version is pinned so a control-plane upgrade cannot silently change what `restricted` means.
PSS_VERSION: Final = "v1.33"
RESTRICTED_NAMESPACE_LABELS: Final = {
    "pod-security.kubernetes.io/enforce": "restricted",
    "pod-security.kubernetes.io/enforce-version": PSS_VERSION,
    "pod-security.kubernetes.io/warn": "restricted",
    "pod-security.kubernetes.io/warn-version": PSS_VERSION,
    "pod-security.kubernetes.io/audit": "restricted",
    "pod-security.kubernetes.io/audit-version": PSS_VERSION,
}
