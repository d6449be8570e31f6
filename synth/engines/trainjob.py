"""Stand-ins for the launchers no engine here runs, so their pods still meet the real
kube-scheduler, LimitRanger, ResourceQuota and (for TrainJobs) the real Kueue.

TrainJob (Kubeflow Trainer v2.3.0; Kueue's TrainJob integration is newer than the local Kueue):
the Indexed Job that Trainer's JobSet would create for its `node` replicated job, built the way
Kueue v0.19.2 computes the TrainJob's pod set (pkg/controller/jobs/trainjob/trainjob_controller.go
getChildJobSet: the ClusterTrainingRuntime read from the cluster, the TrainJob's runtime patches
merged, the trainer's image/command/args/env/resources applied, `numNodes` pods):
- each runtime patch is a strategic-merge patch onto the runtime's JobSet spec, in list order
  (kubeflow/trainer@v2.3.0 pkg/runtime/core/trainingruntime.go mergeRuntimePatches): maps
  merge, lists of named items (replicatedJobs, containers, volumes, env) merge by name,
  volumeMounts by mountPath, other lists are replaced (their Go types carry no patch strategy);
- a pod-spec field Trainer v2.2.1's `PodSpecPatch` lacks is dropped, as Kueue v0.19.2 (built on
  Trainer v2.2.1, its go.mod) drops it when it writes the TrainJob back on admission
  (catalog.TRAINER_V221_POD_SPEC_PATCH_FIELDS);
- `trainer.resourcesPerNode` becomes the `node` container's resources, `numNodes` the Job's
  parallelism and completions; the TrainJob's Kueue labels go on the Job.

Volcano Job: its task's pod template as a Job (Volcano's controller and scheduler are not here).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any, Final

from components import catalog
from synth.engines.client import Client

STAND_IN: Final = (
    "TrainJob run as the Job its JobSet would create (Trainer and Kueue's TrainJob integration "
    "are not in the local Kueue build)"
)
TRAINER_CONTAINER: Final = "node"
#: List fields merged by a key (the patchMergeKey of their Go types); others are replaced.
MERGE_KEYS: Final = {
    "replicatedJobs": "name",
    "containers": "name",
    "initContainers": "name",
    "volumes": "name",
    "env": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
}
KUEUE_LABELS: Final = ("kueue.x-k8s.io/queue-name", "kueue.x-k8s.io/priority-class")


def strategic_merge(base: Any, patch: Any, field: str = "") -> Any:
    """`patch` merged onto `base` (the subset of strategic-merge-patch our objects use)."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for key, value in patch.items():
            out[key] = strategic_merge(base.get(key), value, key) if key in base else value
        return out
    if isinstance(base, list) and isinstance(patch, list) and field in MERGE_KEYS:
        key = MERGE_KEYS[field]
        merged = [dict(item) for item in base]
        for item in patch:
            match = next((i for i, m in enumerate(merged) if m.get(key) == item.get(key)), None)
            if match is None:
                merged.append(item)
            else:
                merged[match] = strategic_merge(merged[match], item, field)
        return merged
    return copy.deepcopy(patch)


def _v221_patch(patch: Mapping[str, Any]) -> dict[str, Any]:
    """A runtime patch as Trainer v2.2.1's types hold it: unknown pod-spec fields dropped."""
    out = copy.deepcopy(dict(patch))
    for job in ((out.get("template") or {}).get("spec") or {}).get("replicatedJobs") or []:
        pod = (((job.get("template") or {}).get("spec") or {}).get("template") or {}).get("spec")
        if isinstance(pod, dict):
            for key in list(pod):
                if key not in catalog.TRAINER_V221_POD_SPEC_PATCH_FIELDS:
                    del pod[key]
    return out


def as_job(client: Client, trainjob: Mapping[str, Any]) -> dict[str, Any]:
    """The Indexed Job standing in for `trainjob` (module docstring)."""
    meta, spec = trainjob["metadata"], trainjob["spec"]
    ref = spec["runtimeRef"]
    runtime = client.get("trainer.kubeflow.org/v1alpha1", ref["kind"], ref["name"])
    jobset: dict[str, Any] = {"template": copy.deepcopy(runtime["spec"]["template"])}
    for patch in spec.get("runtimePatches") or []:
        jobset = strategic_merge(jobset, _v221_patch(patch.get("trainingRuntimeSpec") or {}))
    replicated = next(
        j for j in jobset["template"]["spec"]["replicatedJobs"] if j["name"] == TRAINER_CONTAINER
    )
    job_spec = copy.deepcopy(replicated["template"]["spec"])
    pod = job_spec["template"]
    trainer = spec.get("trainer") or {}
    container = next(c for c in pod["spec"]["containers"] if c["name"] == TRAINER_CONTAINER)
    for field in ("image", "command", "args"):
        if field in trainer:
            container[field] = trainer[field]
    if trainer.get("env"):
        container["env"] = strategic_merge(container.get("env") or [], trainer["env"], "env")
    if trainer.get("resourcesPerNode"):
        container["resources"] = trainer["resourcesPerNode"]
    nodes = int(trainer.get("numNodes") or runtime["spec"].get("mlPolicy", {}).get("numNodes", 1))
    name = f"{meta['name']}-{TRAINER_CONTAINER}-0"
    job_spec.update(parallelism=nodes, completions=nodes, completionMode="Indexed", suspend=True)
    labels = {k: v for k, v in (meta.get("labels") or {}).items() if k in KUEUE_LABELS}
    if spec.get("managedBy"):
        # A fleet TrainJob: MultiKueue runs it, and so the Job standing in for it.
        job_spec["managedBy"] = spec["managedBy"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": meta["namespace"], "labels": labels},
        "spec": job_spec,
    }


def volcano_as_job(vcjob: Mapping[str, Any]) -> dict[str, Any]:
    """A Volcano Job's (first) task as a Job placed by kube-scheduler."""
    meta, spec = vcjob["metadata"], vcjob["spec"]
    task = spec["tasks"][0]
    template = copy.deepcopy(task["template"])
    template["spec"].pop("schedulerName", None)
    template["spec"].setdefault("priorityClassName", spec.get("priorityClassName"))
    template["spec"]["restartPolicy"] = "Never"
    replicas = int(task.get("replicas", 1))
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": f"{meta['name']}-{task['name']}", "namespace": meta["namespace"]},
        "spec": {
            "parallelism": replicas,
            "completions": replicas,
            "completionMode": "Indexed",
            "template": template,
        },
    }
