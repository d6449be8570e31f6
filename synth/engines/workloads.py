"""One workload on the real engines, next to its verdict: what is submitted for it (the object,
or the stand-in for a launcher no engine here runs), how it is followed until its pods are bound,
what the engines' answer is compared with, and how it is removed again.

Stand-ins (docs/real-engines.md): a TrainJob runs as the Job its JobSet would create
(trainjob.py); a Volcano-scheduled pod is bound by kube-scheduler (Volcano's gang and queue
arithmetic are not exercised, only placement, quota and admission of its pods).
"""

from __future__ import annotations

import copy
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from components.analysis.willrun import KueueAdmission, Verdict
from synth.engines import trainjob
from synth.engines.client import ApiError, Client, wait_for
from synth.engines.driver import Driver, force_delete_pods, pods_of, workload_of

QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
#: How long one workload may take from submission to bound pods (Kueue, the Job controller,
#: the stand-ins and the scheduler each take about a second on an idle machine; a loaded CI
#: machine slows every control plane).
WORKLOAD_TIMEOUT_S: Final = 120.0
#: Kinds held back from the deploy walk and submitted one at a time.
WORKLOADS: Final = frozenset(
    {
        ("batch/v1", "Job"),
        ("trainer.kubeflow.org/v1alpha1", "TrainJob"),
        ("batch.volcano.sh/v1alpha1", "Job"),
        ("scheduling.volcano.sh/v1beta1", "PodGroup"),
    }
)
VOLCANO_STAND_IN: Final = "Volcano-scheduled pods placed by kube-scheduler (Volcano not run)"
VCJOB_STAND_IN: Final = (
    "Volcano Job's task pods as a Job placed by kube-scheduler (Volcano not run)"
)


def is_workload(obj: Mapping[str, Any]) -> bool:
    return (obj.get("apiVersion"), obj.get("kind")) in WORKLOADS


@dataclass
class PodPlacement:
    pod: str
    node: str
    source: str
    #: The node's bottom network node (its block), "" for a type without a topology.
    block: str = ""


@dataclass
class WorkloadRun:
    """One workload on the real engines, next to its verdict."""

    stack: str
    ref: str
    kind: str
    #: What "will it run" said: the ClusterQueue, its flavors, the node sources.
    predicted_queue: str = ""
    predicted_flavors: tuple[str, ...] = ()
    predicted_sources: tuple[str, ...] = ()
    admitted_queue: str = ""
    admitted_flavors: tuple[str, ...] = ()
    pods: list[PodPlacement] = field(default_factory=list)
    expected_pods: int = 0
    provisioning: bool = False
    #: The topology Kueue assigned (Topology Aware Scheduling): "<bottom domain> x<pods>" each.
    topology: list[str] = field(default_factory=list)
    #: What will-it-run said the gang asks of the network: (mode, node label) for Kueue jobs
    #: of a class placed by the network, else empty.
    predicted_topology: tuple[str, str] = ("", "")
    #: Per pod, the value of that label on its node.
    domains: list[str] = field(default_factory=list)
    stand_in: str = ""
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems

    @classmethod
    def of(cls, stack: str, obj: Mapping[str, Any], sub: Submission) -> WorkloadRun:
        return cls(
            stack=stack,
            ref=f"{obj['kind']} {sub.namespace}/{obj['metadata']['name']}",
            kind=obj["kind"],
            stand_in=sub.stand_in,
            expected_pods=sub.pods,
        )


@dataclass(frozen=True)
class Submission:
    """What goes to the API server for one rendered workload."""

    objects: tuple[dict[str, Any], ...]
    namespace: str
    #: The pods' label selector.
    selector: str
    pods: int
    stand_in: str = ""

    @property
    def owner(self) -> str:
        """The object Kueue makes a Workload for (the last one submitted)."""
        return str(self.objects[-1]["metadata"]["name"])

    @property
    def queued(self) -> bool:
        return QUEUE_LABEL in (self.objects[-1]["metadata"].get("labels") or {})


def as_submitted(client: Client, obj: Mapping[str, Any]) -> Submission:
    """The submission for a rendered workload (the object itself unless a stand-in is needed)."""
    meta = obj["metadata"]
    namespace = str(meta.get("namespace", "default"))
    kind = (obj["apiVersion"], obj["kind"])
    if kind == ("batch/v1", "Job"):
        job = copy.deepcopy(dict(obj))
        pod = job["spec"]["template"]["spec"]
        stand_in = ""
        if pod.get("schedulerName") == "volcano":
            pod["schedulerName"] = "default-scheduler"
            stand_in = VOLCANO_STAND_IN
        pods = int(job["spec"].get("parallelism", 1))
        return Submission((job,), namespace, f"job-name={meta['name']}", pods, stand_in)
    if kind == ("trainer.kubeflow.org/v1alpha1", "TrainJob"):
        job = trainjob.as_job(client, obj)
        selector = f"job-name={job['metadata']['name']}"
        return Submission(
            (job,), namespace, selector, int(job["spec"]["parallelism"]), trainjob.STAND_IN
        )
    if kind == ("batch.volcano.sh/v1alpha1", "Job"):
        job = trainjob.volcano_as_job(obj)
        selector = f"job-name={job['metadata']['name']}"
        return Submission(
            (job,), namespace, selector, int(job["spec"]["parallelism"]), VCJOB_STAND_IN
        )
    return Submission((dict(obj),), namespace, "", 0, "applied only (no pods of its own)")


def predicted(run: WorkloadRun, verdict: Verdict | None) -> None:
    """Copy what "will it run" said into `run`."""
    if verdict is None:
        return
    run.predicted_sources = tuple(s.name for s in verdict.placement.fitting)
    network = verdict.network
    if network is not None and not network.volcano:
        run.predicted_topology = (network.request.mode, network.request.label or "")
    if isinstance(verdict.admission, KueueAdmission):
        run.predicted_queue = verdict.admission.queue
        run.predicted_flavors = verdict.admission.flavors
        run.provisioning = verdict.admission.provisioning is not None


def admission(workload: Mapping[str, Any] | None) -> tuple[str, tuple[str, ...]] | None:
    """(ClusterQueue, flavors) of an admitted Workload, or None."""
    admitted = ((workload or {}).get("status") or {}).get("admission")
    if not admitted:
        return None
    flavors = {
        flavor
        for assignment in admitted.get("podSetAssignments") or []
        for flavor in (assignment.get("flavors") or {}).values()
    }
    return str(admitted["clusterQueue"]), tuple(sorted(flavors))


def topology_assignment(workload: Mapping[str, Any] | None) -> list[str]:
    """The domains Kueue's Topology Aware Scheduling assigned an admitted Workload, the lowest
    level's value of each with its pod count (v0.13.1's `topologyAssignment`: `levels` and
    `domains[].values`/`count`, apis/kueue/v1beta1/workload_types.go)."""
    admitted = ((workload or {}).get("status") or {}).get("admission") or {}
    return [
        f"{domain['values'][-1]} x{domain['count']}"
        for assignment in admitted.get("podSetAssignments") or []
        for domain in (assignment.get("topologyAssignment") or {}).get("domains") or []
    ]


def placements(driver: Driver, sub: Submission, prefix: str = "") -> list[PodPlacement]:
    """The submission's bound pods, the source of each one's node and its block."""
    out = []
    for pod in pods_of(driver.client, sub.namespace, sub.selector):
        node = pod["spec"].get("nodeName")
        if node:
            source = driver.fleet.nodes[node].name if node in driver.fleet.nodes else "?"
            block = driver.fleet.blocks.get(node, "")
            out.append(PodPlacement(pod["metadata"]["name"], f"{prefix}{node}", source, block))
    return out


def apply_all(client: Client, sub: Submission, run: WorkloadRun, who: str) -> bool:
    for item in sub.objects:
        try:
            client.apply(item)
        except ApiError as error:
            run.problems.append(f"refused by {who}: {error.message}")
            return False
    return True


def remove(client: Client, sub: Submission, drivers: Sequence[Driver]) -> None:
    """Delete what was submitted and its pods everywhere they may be (force: no kubelet)."""
    for item in reversed(sub.objects):
        meta = item["metadata"]
        client.delete(item["apiVersion"], item["kind"], meta["name"], meta.get("namespace", ""))
    for driver in drivers:
        if sub.selector:
            force_delete_pods(driver.client, sub.namespace, sub.selector)


def submit(
    driver: Driver, stack: str, obj: Mapping[str, Any], verdict: Verdict | None
) -> WorkloadRun:
    """Submit one workload, drive it until its pods are bound (or the time is up), compare
    with its verdict, then remove it."""
    began = time.monotonic()
    client = driver.client
    sub = as_submitted(client, obj)
    run = WorkloadRun.of(stack, obj, sub)
    predicted(run, verdict)
    if apply_all(client, sub, run, "the API server"):

        def settled() -> bool:
            driver.tick()
            if sub.queued and not run.admitted_queue:
                admitted = admission(workload_of(client, sub.namespace, sub.owner))
                if admitted is None:
                    return False
                run.admitted_queue, run.admitted_flavors = admitted
            run.pods = placements(driver, sub)
            if len(run.pods) < sub.pods:
                return False
            if sub.queued:
                # Behind a ProvisioningRequest check the topology comes in a second pass, after
                # the quota reservation that set `admission`: read it once the pods are bound.
                run.topology = topology_assignment(workload_of(client, sub.namespace, sub.owner))
            label = run.predicted_topology[1]
            if label:
                nodes = [p.node for p in run.pods]
                run.domains = [driver.fleet.labels.get(n, {}).get(label, "") for n in nodes]
            return True

        try:
            wait_for(f"{run.ref} bound", settled, timeout=WORKLOAD_TIMEOUT_S, interval=0.5)
        except TimeoutError:
            run.problems.append(why_not(client, run, sub))
        check(run)
        remove(client, sub, [driver])
    run.seconds = time.monotonic() - began
    return run


def why_not(client: Client, run: WorkloadRun, sub: Submission) -> str:
    """What the engines say of a workload that did not get its pods bound in time."""
    if sub.queued and not run.admitted_queue:
        workload = workload_of(client, sub.namespace, sub.owner)
        if workload is None:
            return "Kueue created no Workload"
        conditions = (workload.get("status") or {}).get("conditions") or []
        said = "; ".join(f"{c['type']}={c['status']} {c.get('message', '')}" for c in conditions)
        return f"not admitted by Kueue: {said or 'no condition'}"
    pods = pods_of(client, sub.namespace, sub.selector) if sub.selector else []
    if not pods:
        messages = [
            str(e.get("message", ""))
            for e in client.list("v1", "Event", sub.namespace)
            if e.get("involvedObject", {}).get("name") == sub.owner
        ]
        return f"no pods created ({'; '.join(messages[-3:]) or 'no event'})"
    pending = [
        f"{p['metadata']['name']}: "
        + "; ".join(
            c.get("message", "")
            for c in (p.get("status") or {}).get("conditions") or []
            if c["type"] == "PodScheduled"
        )
        for p in pods
        if not p["spec"].get("nodeName")
    ]
    return f"{len(run.pods)}/{run.expected_pods} pods bound; pending: {' | '.join(pending)}"


def check(run: WorkloadRun) -> None:
    """The engines' result against the verdict."""
    if run.predicted_queue:
        if run.admitted_queue and run.admitted_queue != run.predicted_queue:
            run.problems.append(
                f"admitted to ClusterQueue {run.admitted_queue}, "
                f"will-it-run said {run.predicted_queue}"
            )
        stray = [f for f in run.admitted_flavors if f not in run.predicted_flavors]
        if stray:
            run.problems.append(
                f"admitted on flavor {', '.join(stray)}, will-it-run named "
                f"{', '.join(run.predicted_flavors)}"
            )
    mode, label = run.predicted_topology
    if mode and run.pods:
        if not run.topology:
            run.problems.append(
                f"will-it-run said the gang asks `{mode}` at {label or 'no level'}; Kueue "
                "assigned it no topology"
            )
        if mode == "required" and len(set(run.domains)) != 1:
            run.problems.append(
                f"required {label}: its pods landed in {len(set(run.domains))} domains "
                f"({', '.join(sorted(set(run.domains)))})"
            )
    for placement in run.pods:
        if run.predicted_sources and placement.source not in run.predicted_sources:
            run.problems.append(
                f"pod {placement.pod} bound to {placement.node} of {placement.source}, "
                f"will-it-run named {', '.join(run.predicted_sources)}"
            )
