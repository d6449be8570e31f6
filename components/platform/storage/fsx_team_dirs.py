"""FSx for Lustre team directories: the pure builders of the platform namespace, the claim on the
file system's root and the one-shot Job that creates `/teams/<team>` for every team, owned by
the trainer's UID/GID (why: storage_builders.FSX_TEAMS_DIR; docs/storage.md). The resources are
made by `team_volumes.create_fsx_admin` and `team_volumes.create_team_dirs_job`.

One Job for all teams, not one per team: a resource per team costs every synth and preview
(synth.scale), and the script is idempotent, so a new team re-runs it for all of them in seconds
(a Job's template is immutable: the Job is replaced, delete first)."""

from __future__ import annotations

import math
from typing import Any, Final

from components import addons, catalog
from components.analysis import pod_security
from components.analysis.readiness import READY_MARGIN_S, minutes
from components.platform.storage.storage_builders import (
    FSX_STORAGE_CLASS,
    FSX_TEAMS_DIR,
    LustreVolume,
    fsx_team_dir,
)

#: The platform namespace of those Jobs: PSS `baseline` (root and CAP_CHOWN are allowed there,
#: nothing privileged), no team label, so none of the team admission policies select it.
FSX_ADMIN_NAMESPACE: Final = addons.FSX_TEAM_DIRS.namespace
FSX_ROOT_CLAIM: Final = "fsx-root"
TEAM_DIR_MODE: Final = "0770"
TEAM_DIRS_JOB: Final = "fsx-team-dirs"
#: Retries of the directory Job's pod (`backoffLimit`): a Lustre mount that fails once.
TEAM_DIR_JOB_BACKOFF_LIMIT: Final = 3
#: PLANNING: the script's own run (mkdir + chown + stat on one inode per team).
TEAM_DIR_SCRIPT_S: Final = 30
#: How much longer than the Job's deadline `up` waits for it (the await's customTimeouts): the
#: Job fails by its own deadline, reported with its reason, before the await gives up.
TEAM_DIR_AWAIT_MARGIN_S: Final = 60


def team_dirs_deadline_s(image_gib: float, pull_mibps: int) -> int:
    """The directory Job's `activeDeadlineSeconds`, sized from its image: every attempt
    (`backoffLimit` + 1) may land on another system node and pull the image there
    (`image_gib` at `pull_mibps`: the trainer, several GiB, onto a system node's gp3 root), then
    bind, mount Lustre and start (readiness.READY_MARGIN_S) and run the script."""
    pull_s = math.ceil(image_gib * 1024 / pull_mibps)
    attempts = TEAM_DIR_JOB_BACKOFF_LIMIT + 1
    return attempts * (pull_s + READY_MARGIN_S + TEAM_DIR_SCRIPT_S)


def team_dirs_timeout(deadline_s: int) -> str:
    """customTimeouts of the Job's create/update await: past the Job's own deadline."""
    return minutes(deadline_s + TEAM_DIR_AWAIT_MARGIN_S)


def fsx_admin_objects(lustre: LustreVolume, capacity: str) -> list[dict[str, Any]]:
    """The platform namespace the directory Jobs run in and the claim on the file system's root
    they mount (a static PV of its own: the driver keys mounts by volume id)."""
    labels = {f"{catalog.LABEL_DOMAIN}/volume": "fsx-root"}
    return [
        _admin_namespace(),
        {
            # The Jobs talk to nobody: Lustre is mounted by the node (the CSI node plugin on
            # the host network), not from the pod's network namespace.
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": {"name": "default-deny", "namespace": FSX_ADMIN_NAMESPACE},
            "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
        },
        _root_volume(lustre, capacity, labels),
        _root_claim(capacity, labels),
    ]


def _admin_namespace() -> dict[str, Any]:
    """The platform namespace, PSS baseline: the directory Job's root and CAP_CHOWN, no more."""
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": FSX_ADMIN_NAMESPACE,
            "labels": {
                # Baseline admits the directory Job (root, CAP_CHOWN) and nothing privileged.
                "pod-security.kubernetes.io/enforce": addons.FSX_TEAM_DIRS.pod_security,
                "pod-security.kubernetes.io/enforce-version": pod_security.PSS_VERSION,
            },
        },
    }


def _root_volume(lustre: LustreVolume, capacity: str, labels: dict[str, str]) -> dict[str, Any]:
    """The static PV of the file system's root, bound only to the root claim (claimRef)."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"{FSX_ADMIN_NAMESPACE}-{FSX_ROOT_CLAIM}", "labels": labels},
        "spec": {
            "capacity": {"storage": capacity},
            "volumeMode": "Filesystem",
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": FSX_STORAGE_CLASS,
            "mountOptions": ["flock", "noatime"],
            "csi": {
                "driver": "fsx.csi.aws.com",
                "volumeHandle": f"{lustre.file_system_id}::{FSX_ROOT_CLAIM}",
                "volumeAttributes": {
                    "dnsname": lustre.dns_name,
                    "mountname": lustre.mount_name,
                },
            },
            "claimRef": {"namespace": FSX_ADMIN_NAMESPACE, "name": FSX_ROOT_CLAIM},
        },
    }


def _root_claim(capacity: str, labels: dict[str, str]) -> dict[str, Any]:
    """The claim the directory Job mounts, bound by name to the root PV."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": FSX_ROOT_CLAIM,
            "namespace": FSX_ADMIN_NAMESPACE,
            "labels": labels,
        },
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "resources": {"requests": {"storage": capacity}},
            "storageClassName": FSX_STORAGE_CLASS,
            "volumeName": f"{FSX_ADMIN_NAMESPACE}-{FSX_ROOT_CLAIM}",
        },
    }


#: checkov checks the directory Job fails by design, each with its reason (no `=` in a reason).
TEAM_DIR_CHECKOV_SKIPS: Final = {
    "CKV_K8S_23": "Root by design for mkdir and chown of the team directories on Lustre; "
    "platform namespace with PSS baseline; docs/security.md exceptions",
    "CKV_K8S_40": "Root by design for mkdir and chown of the team directories on Lustre; "
    "docs/security.md exceptions",
    "CKV_K8S_25": "Adds CHOWN only (after dropping ALL): handing the team directories to the "
    "trainer UID needs it; docs/security.md exceptions",
    "CKV_K8S_37": "Adds CHOWN only (after dropping ALL): handing the team directories to the "
    "trainer UID needs it; docs/security.md exceptions",
}


def team_dirs_script(teams: list[str], owner: int = pod_security.RUN_AS_USER) -> str:
    """Idempotent: create each directory (mode first, while root still owns it: without
    CAP_FOWNER root may not chmod a file it does not own), then hand it to the trainer's
    UID/GID, non-recursively (a re-run must not walk terabytes of checkpoints)."""
    lines = ["set -eu", f"mkdir -p /fsx{FSX_TEAMS_DIR}"]
    for team in sorted(teams):
        path = f"/fsx{fsx_team_dir(team)}"
        lines += [
            f'[ -d "{path}" ] || mkdir -m {TEAM_DIR_MODE} "{path}"',
            f'chown {owner}:{owner} "{path}"',
            f'stat -c "%n %u:%g %a" "{path}"',
        ]
    return "\n".join(lines) + "\n"


def team_dirs_job(teams: list[str], image: Any, deadline_s: int) -> dict[str, Any]:
    """The one-shot Job that creates `/teams/<team>` on Lustre for the trainer's UID, for every
    team.

    The one pod of the platform that runs as root: uid 0 owns the Lustre root, so mkdir needs no
    capability; chown needs CAP_CHOWN, the only one added (PSS baseline allows it:
    kubernetes/pod-security-admission policy/check_capabilities_baseline.go). Root squash on
    the file system would map uid 0 to nobody and fail the Job, and with it `up`, loudly.
    On system nodes: no GPU is needed, and the FSx node plugin runs on every node. `image` is
    the trainer's by default (StackConfig.fsx_team_dirs_image, else the digest the deploy pushed,
    an Output): an image the platform already builds and signs, with sh, mkdir, chown and stat;
    `command` replaces its entrypoint. That image is the trainer's several GiB, pulled onto a
    system node: `deadline_s` is `team_dirs_deadline_s` of its size (storage.StorageArgs.of).
    """
    labels = {"app.kubernetes.io/name": TEAM_DIRS_JOB, "app.kubernetes.io/managed-by": "pulumi"}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": TEAM_DIRS_JOB,
            "namespace": FSX_ADMIN_NAMESPACE,
            "labels": labels,
            # Awaited (pulumi-kubernetes waits for Complete, fails on Failed; the bound is the
            # Job's customTimeouts, team_dirs_timeout): team PVs are created only once their
            # directories exist, and a file system the nodes cannot reach fails `up` here instead
            # of leaving training pods in ContainerCreating. checkov reads skips here.
            "annotations": pod_security.checkov_skips(TEAM_DIR_CHECKOV_SKIPS),
        },
        "spec": {
            "backoffLimit": TEAM_DIR_JOB_BACKOFF_LIMIT,
            "activeDeadlineSeconds": deadline_s,
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "automountServiceAccountToken": False,
                    "nodeSelector": catalog.system_node_labels(),
                    "securityContext": {
                        "runAsUser": 0,
                        "runAsGroup": 0,
                        "runAsNonRoot": False,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    "containers": [_team_dirs_container(teams, image)],
                    "volumes": [
                        {"name": "fsx", "persistentVolumeClaim": {"claimName": FSX_ROOT_CLAIM}}
                    ],
                },
            },
        },
    }


def _team_dirs_container(teams: list[str], image: Any) -> dict[str, Any]:
    """The container that runs the script: root, but with CHOWN as its only capability."""
    return {
        "name": "mkdir",
        "image": image,
        "imagePullPolicy": "Always",
        "command": ["sh", "-c", team_dirs_script(teams, pod_security.RUN_AS_USER)],
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "privileged": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"], "add": ["CHOWN"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "resources": {
            "requests": {"cpu": "10m", "memory": "16Mi"},
            "limits": {"cpu": "100m", "memory": "64Mi"},
        },
        "volumeMounts": [{"name": "fsx", "mountPath": "/fsx"}],
    }
