"""checkov's input: the synthesized manifests plus every pod template nested in a custom
resource, wrapped in a synthetic `batch/v1 Job` so checkov's Kubernetes framework scans it.

checkov 3.3.30 only knows native pod-bearing kinds (checkov/kubernetes/kubernetes_utils.py:
`SUPPORTED_POD_CONTAINERS_TYPES = {"Deployment", "DeploymentConfig", "DaemonSet", "Job", ...}`)
and keys on `kind` alone: a ClusterTrainingRuntime gets no check at all and a Volcano
`batch.volcano.sh` Job is read as a batch/v1 Job whose `spec.template` is missing, so its real
pod template (`spec.tasks[].template`) is never examined. Wrapping as `PodTemplate` is weaker
(pod-level checks such as CKV_K8S_29/31/38 do not run on it), hence Jobs.

Adapted from /work/research/checkov_crd2job.py (the security research memo, same project).
The wrapped Job carries the custom resource's own annotations, so a `checkov.io/skipN` written
on the resource applies to its pods too. TrainJob `runtimePatches` are partial patches merged
onto a ClusterTrainingRuntime by the Trainer controller (no image, no securityContext of their
own): the runtime they patch is scanned instead.

    python -m synth.checkov_input build/prod/manifests.yaml > build/prod/checkov-input.yaml
    python -m synth.checkov_input build/jobs/research-dev/manifests.yaml \
        --platform build/dev/manifests.yaml > build/jobs/research-dev/checkov-input.yaml
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, Final

import yaml

#: Native kinds checkov scans as they are (only when their API group is a core one).
NATIVE_KINDS: Final = {
    "Pod",
    "Deployment",
    "DaemonSet",
    "StatefulSet",
    "ReplicaSet",
    "ReplicationController",
    "Job",
    "CronJob",
    "PodTemplate",
}
NATIVE_GROUPS: Final = ("v1", "batch", "apps")
#: Keys under which a custom resource holds partial patches, not pods (see the docstring).
PATCH_KEYS: Final = ("runtimePatches",)
#: Path segments left out of a synthetic Job's name (they say nothing about which pod it is).
_NOISE: Final = {"spec", "template", "replicatedJobs", "tasks"}


def _pod_templates(node: Any, path: list[str]) -> Iterator[tuple[list[str], dict[str, Any]]]:
    if isinstance(node, dict):
        spec = node.get("spec")
        if isinstance(spec, dict) and isinstance(spec.get("containers"), list):
            yield path, node
        for key, value in node.items():
            if key not in PATCH_KEYS:
                yield from _pod_templates(value, [*path, str(key)])
    elif isinstance(node, list):
        for index, value in enumerate(node):
            name = value.get("name", index) if isinstance(value, dict) else index
            yield from _pod_templates(value, [*path, str(name)])


def is_native(doc: dict[str, Any]) -> bool:
    group = str(doc.get("apiVersion", "")).split("/")[0]
    return doc.get("kind") in NATIVE_KINDS and group in NATIVE_GROUPS


def wrapped(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """One synthetic Job per pod template nested in a non-native object."""
    if is_native(doc):
        return []
    meta = doc.get("metadata") or {}
    out = []
    for path, template in _pod_templates(doc.get("spec", {}), ["spec"]):
        parts = [p for p in path if p not in _NOISE]
        name = "-".join([str(doc.get("kind", "")).lower(), str(meta.get("name")), *parts])
        out.append(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {
                    "name": name.strip("-")[:253],
                    "namespace": meta.get("namespace", "cluster-scoped"),
                    "annotations": dict(meta.get("annotations") or {}),
                },
                "spec": {
                    "template": {
                        "metadata": dict(template.get("metadata") or {}),
                        "spec": template["spec"],
                    }
                },
            }
        )
    return out


def checkov_documents(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every manifest; Volcano Jobs (kind `Job`, not batch/v1) are replaced by their wrapped
    pods, so checkov does not mis-read them as a batch/v1 Job without a template."""
    out: list[dict[str, Any]] = []
    for doc in docs:
        if not doc:
            continue
        if doc.get("kind") not in NATIVE_KINDS or is_native(doc):
            out.append(doc)
        out += wrapped(doc)
    return out


def namespace_policies(
    docs: list[dict[str, Any]], platform: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The platform's NetworkPolicies in the namespaces `docs` create objects in: a team job
    stack's pods live under the policies the platform stack put in the team's namespace, and
    checkov's CKV2_K8S_6 (a pod with no NetworkPolicy) must see them to judge its pods."""
    namespaces = {d.get("metadata", {}).get("namespace") for d in docs} - {None}
    return [
        d
        for d in platform
        if d.get("kind") == "NetworkPolicy" and d["metadata"].get("namespace") in namespaces
    ]


def _read(path: str) -> list[dict[str, Any]]:
    with open(path) as handle:
        return [d for d in yaml.safe_load_all(handle) if d]


def main(argv: list[str]) -> int:
    """`manifests.yaml [--platform <platform manifests.yaml>]` (a job stack's platform)."""
    docs = _read(argv[0])
    if len(argv) == 3 and argv[1] == "--platform":
        docs += namespace_policies(docs, _read(argv[2]))
    yaml.safe_dump_all(checkov_documents(docs), sys.stdout, sort_keys=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
