"""TrainJobs on the path Kueue really takes: what of a TrainJob reaches its pods.

Kueue v0.19.2 is built on Kubeflow Trainer v2.2.1's Go types (kubernetes-sigs/kueue@v0.19.2
go.mod L14) while the platform runs Trainer v2.3.0, and Kueue writes TrainJobs back through
those types: on admission (pkg/controller/jobs/trainjob/trainjob_controller.go L243-290, a full
`c.Update` of the object it decoded) and when MultiKueue copies one to a worker
(trainjob_multikueue_adapter.go L44-80, `Create` from the decoded spec). A field the v2.2.1
types lack is silently gone after either — `terminationGracePeriodSeconds` in a runtime patch
(a v2.3.0 addition) left the pods Kubernetes' 30 s and killed the trainer's preemption
checkpoint. Three rules follow, each a will-it-run `Problem` naming the job's key:

- `patch_problems`: every field a TrainJob's runtime patch sets is one Trainer v2.2.1's
  `RuntimePatch` types have (kubeflow/trainer@v2.2.1 pkg/apis/trainer/v1alpha1/trainjob_types.go
  L287-481; catalog.TRAINER_V221_POD_SPEC_PATCH_FIELDS and ..._CONTAINER_PATCH_FIELDS);
- `runtime_problems`: the ClusterTrainingRuntime a TrainJob names (its priority's, with its
  pods' grace period: TrainingJobConfig.trainer_runtime) is one the platform renders — Kueue
  cannot build the job's pod sets without it ("runtime '<name>' not found",
  trainjob_controller.go L155-158), and the grace lives there, where Kueue never writes;
- `toleration_problems`: Kueue's admission patch puts the flavor's tolerations in place of the
  TrainJob's own (nodes.flavor_tolerations cites the lines), so on every flavor the job may be
  admitted to, those must tolerate every taint of each node source the job's own tolerations
  let it land on — else its pods stay pending where will-it-run placed them.

Pure: facts and plain manifests in, problems out. The components run `patch_problems` on every
TrainJob they render before registering anything (components/training_jobs/training.py);
`runtime_problems` (also a job stack's check against the runtimes its platform exports,
contract/platform_contract.py) and `toleration_problems` are part of each TrainJob's verdict
(willrun.py).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from typing import Any, Final

from components import catalog
from components.analysis.facts import Flavor, JobFacts
from components.analysis.nodes import NodeSource, flavor_sources, flavor_tolerations, tolerates
from components.config import Problem, TrainingJobConfig, job_grace_seconds

#: A leaf of RUNTIME_PATCH: any value is kept (a Go field of a type Kueue decodes whole).
_KEPT: Final = None
#: The pod spec a runtime patch may set, field by field (`PodSpecPatch` L384-450): containers
#: and init containers are `ContainerPatch` lists (L453-481).
_CONTAINER: Final = {field: _KEPT for field in catalog.TRAINER_V221_CONTAINER_PATCH_FIELDS}
_POD_SPEC: Final[dict[str, Any]] = {
    **{field: _KEPT for field in catalog.TRAINER_V221_POD_SPEC_PATCH_FIELDS},
    "containers": [_CONTAINER],
    "initContainers": [_CONTAINER],
}
#: Trainer v2.2.1's `RuntimePatch` down to the pod spec (trainjob_types.go L287-381): each map
#: lists the JSON fields its Go struct has; a list holds the schema of its items. Metadata is
#: `metav1.ObjectMeta`, kept whole.
RUNTIME_PATCH: Final[dict[str, Any]] = {
    "manager": _KEPT,
    "time": _KEPT,
    "trainingRuntimeSpec": {
        "template": {
            "metadata": _KEPT,
            "spec": {
                "replicatedJobs": [
                    {
                        "name": _KEPT,
                        "template": {
                            "metadata": _KEPT,
                            "spec": {"template": {"metadata": _KEPT, "spec": _POD_SPEC}},
                        },
                    }
                ]
            },
        }
    },
}


def dropped_fields(value: Any, schema: Any, where: str) -> Iterator[str]:
    """Paths under `where` of the fields in `value` that `schema` does not have."""
    if schema is _KEPT:
        return
    if isinstance(schema, list):
        for index, item in enumerate(value if isinstance(value, list) else []):
            label = item.get("name", index) if isinstance(item, Mapping) else index
            yield from dropped_fields(item, schema[0], f"{where}[{label}]")
        return
    if not isinstance(value, Mapping):
        return
    for key, item in value.items():
        if key not in schema:
            yield f"{where}.{key}"
        else:
            yield from dropped_fields(item, schema[key], f"{where}.{key}")


def patch_problems(key: str, train_job: Mapping[str, Any]) -> list[Problem]:
    """The fields of `train_job`'s runtime patches that Kueue v0.19.2 drops (module docstring):
    one problem per patch naming them, at `<key>.launcher` (`key`: the job's, `trainingJobs[i]`)."""
    problems = []
    spec = train_job.get("spec") or {}
    for index, patch in enumerate(spec.get("runtimePatches") or []):
        lost = list(dropped_fields(patch, RUNTIME_PATCH, f"runtimePatches[{index}]"))
        if lost:
            problems.append(
                Problem(
                    f"{key}.launcher",
                    "kubeflow",
                    "a TrainJob whose runtime patches set only fields of Trainer v2.2.1's "
                    "RuntimePatch, the types Kueue v0.19.2 writes TrainJobs back with (a "
                    "field they lack is dropped on admission and on MultiKueue's copy, "
                    "kubeflow/trainer@v2.2.1 pkg/apis/trainer/v1alpha1/trainjob_types.go "
                    f"L287-481): {', '.join(lost)} would never reach the pods (the pod's grace "
                    "period belongs in the ClusterTrainingRuntime)",
                )
            )
    return problems


def runtime_problems(key: str, job: TrainingJobConfig, runtimes: Collection[str]) -> list[Problem]:
    """A TrainJob's runtime (TrainingJobConfig.trainer_runtime; `key`: the job's,
    `trainingJobs[i]`) must be one of `runtimes`, those the platform renders
    (config.trainer_runtime_names(), or what a platform stack exports to its job stacks)."""
    if job.launcher != "kubeflow" or job.trainer_runtime in runtimes:
        return []
    grace = job_grace_seconds(job.checkpoint)
    rendered = sorted(r for r in runtimes if r.startswith(f"{catalog.TRAINER_RUNTIME_PREFIX}-"))
    return [
        Problem(
            f"{key}.checkpoint.saveSeconds",
            job.checkpoint.save_seconds,
            "a save whose shutdown fits a grace period of a ClusterTrainingRuntime the "
            f"platform renders: the pods need {grace.needed} s (runtime {job.trainer_runtime}), "
            f"and the platform has {', '.join(rendered) or 'none'} (save faster, or use "
            "launcher native)",
        )
    ]


def toleration_problems(
    jf: JobFacts,
    landing: Sequence[NodeSource],
    sources: Sequence[NodeSource],
    provisioners: Mapping[Flavor, catalog.Provisioner],
    *,
    tolerations_of: Callable[[Sequence[NodeSource]], Sequence[dict[str, str]]] = flavor_tolerations,
) -> list[Problem]:
    """A Kueue TrainJob's pods carry the tolerations of the flavor Kueue admits them on, not
    their own (module docstring). For each flavor the job may be admitted to, every node source
    its own tolerations let it land on (`landing`: its fit's candidates) among the flavor's
    nodes (of `sources`) must be
    tolerated by the flavor's tolerations (`tolerations_of`: what the ResourceFlavor renders,
    nodes.flavor_tolerations; tests substitute it). A flavor with no tolerations leaves the
    pods their own (Kueue's patch then carries none)."""
    job = jf.job
    if job.launcher != "kubeflow" or job.scheduler != "kueue":
        return []
    names = {s.name for s in landing}
    problems = []
    for entry in jf.team.quota:
        if entry.flavor not in jf.flavors:
            continue
        flavor = (entry.gpu_class, entry.capacity_type)
        if flavor not in provisioners:
            continue
        members = flavor_sources(sources, *flavor, provisioners[flavor])
        given = tuple(tolerations_of(members))
        if not given:
            continue
        for source in members:
            if source.name not in names:
                continue
            lost = [t for t in source.taints if not tolerates(t, given)]
            if lost:
                problems.append(
                    Problem(
                        f"{jf.key}.launcher",
                        job.launcher,
                        f"pods that keep tolerating node source {source.name} ({source.key}) "
                        f"on flavor {entry.flavor}: Kueue v0.19.2 replaces a TrainJob's "
                        "tolerations with the flavor's ("
                        + ", ".join(f"{t['key']}:{t['effect']}" for t in given)
                        + "), which do not tolerate its taint "
                        + ", ".join(f"{t['key']}={t.get('value', '')}:{t['effect']}" for t in lost)
                        + " (use launcher native, whose pods get the flavor's tolerations added)",
                    )
                )
    return problems
