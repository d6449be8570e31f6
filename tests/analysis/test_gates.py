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
import dataclasses
from typing import Any

import pytest

from components import catalog
from components.platform.scheduling.scheduling import KUEUE_FRAMEWORKS, QUEUE_OPEN_AWAIT
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


def held_by_admission_checks(result: SynthResult) -> list[str]:
    """ClusterQueue admission checks that would hold their workloads forever: a check that is
    not rendered, one whose controller is not Kueue's provisioning controller with a rendered
    ProvisioningRequestConfig, one on a flavor no autoscaled node group serves, or one whose
    ProvisioningRequests nobody answers (no autoscaler with --enable-provisioning-requests, no
    ProvisioningRequest CRD before Kueue starts)."""
    problems: list[str] = []
    checks = {
        c.inputs["metadata"]["name"]: c.inputs["spec"] for c in _by_type(result, ":AdmissionCheck")
    }
    configs = {
        c.inputs["metadata"]["name"]: c.inputs["spec"]
        for c in _by_type(result, ":ProvisioningRequestConfig")
    }
    flavors = {
        f.inputs["metadata"]["name"]: f.inputs["spec"] for f in _by_type(result, ":ResourceFlavor")
    }
    releases = {r.inputs["name"]: r for r in result.of_type("kubernetes:helm.sh/v3:Release")}
    autoscaler = releases.get("cluster-autoscaler")
    crds = [
        c
        for c in result.of_type("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
        if c.inputs["metadata"]["name"] == "provisioningrequests.autoscaling.x-k8s.io"
    ]
    for queue in _by_type(result, ":ClusterQueue"):
        spec = queue.inputs["spec"]
        if "admissionChecks" in spec:
            problems.append(f"{queue.name}: admissionChecks without flavors (every flavor held)")
        for rule in spec.get("admissionChecksStrategy", {}).get("admissionChecks", []):
            check = checks.get(rule["name"])
            if check is None:
                problems.append(f"{queue.name}: check {rule['name']} is not rendered")
                continue
            params = check.get("parameters", {})
            if (
                check["controllerName"] != "kueue.x-k8s.io/provisioning-request"
                or params.get("kind") != "ProvisioningRequestConfig"
                or params.get("name") not in configs
            ):
                problems.append(f"{queue.name}: check {rule['name']} has no live controller")
            for flavor in rule.get("onFlavors", []):
                labels = flavors.get(flavor, {}).get("nodeLabels", {})
                if labels.get(catalog.LABEL_PROVISIONER) != "node-group":
                    problems.append(f"{queue.name}: {flavor} is no node-group flavor")
            args = autoscaler.inputs["values"]["extraArgs"] if autoscaler else {}
            if not args.get("enable-provisioning-requests"):
                problems.append("no cluster-autoscaler answers ProvisioningRequests")
            kueue = releases["kueue"]
            if not crds or crds[0].urn not in kueue.dependencies:
                problems.append("Kueue may start before the ProvisioningRequest CRD exists")
    return problems


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_no_admission_check_can_hold_a_workload_forever(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    queues = _by_type(result, ":ClusterQueue")
    assert queues
    # Both stacks have autoscaled node groups: their flavors are behind the check.
    assert any("admissionChecksStrategy" in q.inputs["spec"] for q in queues)
    assert held_by_admission_checks(result) == []
    (config,) = _by_type(result, ":ProvisioningRequestConfig")
    assert config.inputs["spec"]["provisioningClassName"] == (
        "best-effort-atomic-scale-up.autoscaling.x-k8s.io"
    )


def test_the_admission_check_gate_catches_a_check_nobody_serves(dev: SynthResult) -> None:
    broken = dataclasses.replace(
        dev,
        resources=[
            r
            for r in dev.resources
            if not r.type.endswith(":ProvisioningRequestConfig")
            and not (r.type.endswith(":Release") and r.inputs.get("name") == "cluster-autoscaler")
        ],
    )
    found = held_by_admission_checks(broken)
    assert any("no live controller" in p for p in found)
    assert "no cluster-autoscaler answers ProvisioningRequests" in found


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
    # Prod declares no Volcano workload (its teams' jobs run under Kueue): the ordering half of
    # this test has something to check on dev only, and must have it there.
    assert bool(users) == (stack == "dev")
    for reg in users:
        name = reg.inputs["spec"]["queue"]
        assert after(reg, queue_urns[name]), reg.name
