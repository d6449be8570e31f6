"""Every gate between "job declared" and "pod a provisioner sees" (docs/scheduling.md#gates),
checked on the rendered objects of every stack: a gate that would hold a job fails its test,
and each checker is shown to catch the object that would be held.

- Kueue: a launcher created `suspend: true` is resumed only by Kueue, and only when it carries
  `kueue.x-k8s.io/queue-name` naming a LocalQueue of its namespace and its kind is one of the
  manager's integrations (`manageJobsWithoutQueueName: false`: unlabelled, it is nobody's and
  stays suspended). Kueue then admits it within quota (analysis/quota.py) and through the
  ClusterQueue's admission checks — the platform configures none, so no check controller can
  hold a workload (kubernetes-sigs/kueue v0.19.2 `apis/kueue/v1beta2/clusterqueue_types.go`
  admissionChecksStrategy: a workload is admitted once every listed check is Ready).
- Trainer: a TrainJob becomes a JobSet (and pods) only through the runtime its `runtimeRef`
  names (kubeflow/trainer v2.3.0 `pkg/controller/trainjob_controller.go`: a missing runtime
  fails reconciliation); the JobSet inherits `suspend` and is resumed with the TrainJob.
- Volcano: the Queue must be Open before a PodGroup or Volcano Job is accepted
  (validate_podgroup.go checkQueueState, admit_job.go) — `up` waits for it — and the PodGroup
  must pass enqueue (tests/analysis/test_volcano.py).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.platform.scheduling import KUEUE_FRAMEWORKS, QUEUE_OPEN_AWAIT
from synth.harness import SynthResult

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: Kueue's integration name for each launcher kind the platform renders.
INTEGRATION = {"Job": "batch/job", "TrainJob": "trainer.kubeflow.org/trainjob"}


def _by_type(result: SynthResult, suffix: str) -> list[Any]:
    return [r for r in result.resources if r.type.endswith(suffix)]


def suspended_but_unmanaged(
    launchers: list[tuple[str, dict[str, Any]]], local_queues: set[tuple[str, str]]
) -> list[str]:
    """Launchers created suspended that Kueue would never resume."""
    held: list[str] = []
    for kind, obj in launchers:
        if not obj.get("spec", {}).get("suspend"):
            continue
        meta = obj["metadata"]
        queue = (meta.get("labels") or {}).get(QUEUE_LABEL)
        where = f"{kind} {meta.get('namespace')}/{meta['name']}"
        if queue is None:
            held.append(f"{where}: suspended without {QUEUE_LABEL}")
        elif (meta.get("namespace"), queue) not in local_queues:
            held.append(f"{where}: LocalQueue {queue} does not exist in its namespace")
        elif INTEGRATION.get(kind) not in KUEUE_FRAMEWORKS:
            held.append(f"{where}: Kueue does not manage {kind}")
    return held


def launchers_of(result: SynthResult) -> list[tuple[str, dict[str, Any]]]:
    out: list[tuple[str, dict[str, Any]]] = []
    for reg in result.resources:
        if reg.type == "kubernetes:batch/v1:Job":
            out.append(("Job", reg.inputs))
        elif reg.type == "kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob":
            out.append(("TrainJob", reg.inputs))
    return out


def local_queues(platform: SynthResult) -> set[tuple[str, str]]:
    return {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"])
        for r in _by_type(platform, ":LocalQueue")
    }


STACKS = ["dev", "prod_jobs"]


@pytest.mark.parametrize("stack", STACKS)
def test_kueue_resumes_every_suspended_launcher(stack: str, request: pytest.FixtureRequest) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    launchers = launchers_of(result)
    assert any(obj.get("spec", {}).get("suspend") for _, obj in launchers)
    assert suspended_but_unmanaged(launchers, local_queues(result)) == []


def test_the_suspend_gate_catches_a_launcher_without_its_queue(dev: SynthResult) -> None:
    launchers = copy.deepcopy(launchers_of(dev))
    kind, obj = next((k, o) for k, o in launchers if o.get("spec", {}).get("suspend"))
    del obj["metadata"]["labels"][QUEUE_LABEL]
    assert suspended_but_unmanaged([(kind, obj)], local_queues(dev))
    obj["metadata"]["labels"][QUEUE_LABEL] = "nobody"
    assert suspended_but_unmanaged([(kind, obj)], local_queues(dev))


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_admission_check_can_hold_a_workload(stack: str, request: pytest.FixtureRequest) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    queues = _by_type(result, ":ClusterQueue")
    assert queues
    for queue in queues:
        spec = queue.inputs["spec"]
        assert "admissionChecks" not in spec and "admissionChecksStrategy" not in spec
    assert not _by_type(result, ":AdmissionCheck")


@pytest.mark.parametrize("stack", ["dev", "prod_jobs"])
def test_every_trainjob_names_a_rendered_runtime(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    runtimes = {r.inputs["metadata"]["name"] for r in _by_type(result, ":ClusterTrainingRuntime")}
    jobs = [obj for kind, obj in launchers_of(result) if kind == "TrainJob"]
    assert jobs
    for job in jobs:
        ref = job["spec"]["runtimeRef"]
        assert ref["kind"] == "ClusterTrainingRuntime" and ref["name"] in runtimes, ref


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_volcano_objects_wait_for_an_open_queue(stack: str, request: pytest.FixtureRequest) -> None:
    """Every Volcano Queue is awaited until Open; every PodGroup and Volcano Job is created
    after its queue (directly, or through the Team component that owns the queue)."""
    result: SynthResult = request.getfixturevalue(stack)
    queues = _by_type(result, "scheduling.volcano.sh/v1beta1:Queue")
    assert queues
    by_urn = {r.urn: r for r in result.resources}
    for queue in queues:
        annotations = queue.inputs["metadata"].get("annotations", {})
        assert annotations.get("pulumi.com/waitFor") == QUEUE_OPEN_AWAIT["pulumi.com/waitFor"]

    def after(reg: Any, queue_urn: str) -> bool:
        """reg depends on the queue itself or on a component that is the queue's ancestor."""
        ancestors = set()
        parent = by_urn[queue_urn].parent
        while parent:
            ancestors.add(parent)
            parent = by_urn[parent].parent if parent in by_urn else ""
        return any(d == queue_urn or d in ancestors for d in reg.dependencies)

    queue_urns = {q.inputs["metadata"]["name"]: q.urn for q in queues}
    users = _by_type(result, "scheduling.volcano.sh/v1beta1:PodGroup") + _by_type(
        result, "batch.volcano.sh/v1alpha1:Job"
    )
    for reg in users:
        name = reg.inputs["spec"]["queue"]
        assert after(reg, queue_urns[name]), reg.name
