"""A fleet on real engines: one control plane per worker stack and one for the manager, each
with the real Kueue; the manager dispatches through MultiKueue to the workers (docs/fleet.md).

- Each worker gets its platform stack as rendered, including the manager's grant (the
  ServiceAccount, its RBAC and the token Secret the controller-manager fills).
- The kubeconfig the manager reads is built from that real token and the worker's own endpoint
  and CA, by the function the worker's program uses (fleet/builders.worker_kubeconfig); the
  External Secrets Operator's part — syncing it from Secrets Manager into the Secret each
  ExternalSecret names — is played here and recorded.
- The manager's Kueue runs with `MultiKueueBatchJobWithManagedBy` (the local build needs the
  gate to dispatch batch Jobs that carry `managedBy`; v0.19.2 has it on, its Beta default).
- Every fleet job is submitted to the manager and followed: admitted there (quota reserved,
  MultiKueue check Ready), dispatched, admitted on one worker, its pods bound there; the
  worker must be one "will it run" named for it, and a region-pinned job never lands elsewhere.
"""

from __future__ import annotations

import base64
import contextlib
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Final

from components.analysis.fleet_jobs import FleetJob, Region
from components.contract.fleet_worker import WorkerContract
from components.platform.fleet import builders
from synth.engines.client import Client, wait_for
from synth.engines.driver import workload_of
from synth.engines.run import Cluster, ClusterRun, Toolkit, accept_v1beta2, boot
from synth.engines.workloads import (
    Submission,
    WorkloadRun,
    admission,
    apply_all,
    as_submitted,
    placements,
    remove,
)
from synth.harness import SynthResult
from synth.output import manifests

MULTIKUEUE_GATES: Final = {"MultiKueueBatchJobWithManagedBy": True}
CONNECT_TIMEOUT_S: Final = 120.0
#: Generous: seconds on an idle machine, but a loaded CI machine slows every control plane.
FLEET_JOB_TIMEOUT_S: Final = 180.0


@dataclass
class FleetRun:
    """The manager and its workers, and every fleet job's path through them."""

    name: str
    clusters: dict[str, ClusterRun] = field(default_factory=dict)
    workloads: list[WorkloadRun] = field(default_factory=list)
    #: worker name -> its MultiKueueCluster's Active condition message.
    connections: dict[str, str] = field(default_factory=dict)
    acts: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def problems(self) -> list[str]:
        found = [p for c in self.clusters.values() for p in c.problems]
        found += [f"{self.name}: {w.ref}: {p}" for w in self.workloads for p in w.problems]
        found += [
            f"{self.name}: MultiKueueCluster {n} not active: {m}"
            for n, m in self.connections.items()
            if not m.startswith("Active")
        ]
        return found


def _token(client: Any, manifests_: Sequence[Mapping[str, Any]]) -> str:
    """The manager's token on a worker: the last token Secret the worker renders (its newest
    rotation key, as worker.py uses), as the token controller filled it."""
    secrets = [
        m
        for m in manifests_
        if m.get("kind") == "Secret" and m.get("type") == "kubernetes.io/service-account-token"
    ]
    if not secrets:
        raise RuntimeError("the worker renders no ServiceAccount token Secret for its manager")
    meta = secrets[-1]["metadata"]

    def filled() -> str | None:
        secret = client.get("v1", "Secret", meta["name"], meta["namespace"])
        token = (secret.get("data") or {}).get("token")
        return base64.b64decode(token).decode() if token else None

    return wait_for(f"token of Secret {meta['namespace']}/{meta['name']}", filled, timeout=60)


@dataclass(frozen=True)
class Member:
    """A worker: its MultiKueueCluster name, its stack's synth and its `fleetWorker` output as
    the manager read it (parsed: components/platform/fleet/reading.py)."""

    name: str
    result: SynthResult
    fleet_worker: WorkerContract


def members_of(manager: SynthResult) -> list[Member]:
    """The manager's workers, in its order."""
    if manager.fleet is None:
        raise ValueError(f"{manager.stack}: not a fleet's manager")
    return [
        Member(w.name, manager.workers[w.ref.stack], w.fleet_worker) for w in manager.fleet.workers
    ]


def _boot_workers(
    kit: Toolkit, members: Sequence[Member], stack: contextlib.ExitStack, pool: ThreadPoolExecutor
) -> tuple[dict[str, Cluster], dict[str, ClusterRun]]:
    """Every worker's control plane, booted side by side (each mostly waits on its processes),
    and its v1beta2 acceptance beside it."""
    planes = {m.name: kit.plane(m.name) for m in members}
    for plane in planes.values():
        stack.callback(plane.stop)
    runs = {
        m.name: ClusterRun(name=f"{m.name} ({m.result.stack})", stacks=[m.result.stack])
        for m in members
    }
    acceptances = {
        m.name: pool.submit(accept_v1beta2, kit, manifests(m.result), m.name) for m in members
    }

    def start_and_boot(member: Member) -> Cluster:
        planes[member.name].start()
        return boot(
            planes[member.name],
            kit,
            [member.result],
            region=member.fleet_worker.region,
            out=runs[member.name],
        )

    booting = {m.name: pool.submit(start_and_boot, m) for m in members}
    workers = {name: future.result() for name, future in booting.items()}
    for name, run in runs.items():
        run.accepted_v1beta2, rejected = acceptances[name].result()
        run.rejected += rejected
    return workers, runs


def _kubeconfigs(members: Sequence[Member], workers: Mapping[str, Cluster]) -> dict[str, str]:
    """What each worker publishes for its manager, by its Secrets Manager ARN: the kubeconfig
    with the worker's real token, built by the worker program's own function."""
    return {
        m.fleet_worker.kubeconfig_secret_arn: builders.worker_kubeconfig(
            m.fleet_worker.cluster_name,
            workers[m.name].cp.server,
            base64.b64encode(workers[m.name].cp.pki.ca_pem).decode(),
            _token(workers[m.name].client, manifests(m.result)),
        )
        for m in members
    }


def run_fleet(
    kit: Toolkit,
    manager: SynthResult,
    job_stacks: Sequence[SynthResult] = (),
    *,
    manager_region: str,
) -> FleetRun:
    """The fleet's workers, then its manager, then every fleet job (module docstring)."""
    began = time.monotonic()
    out = FleetRun(name=f"fleet/{manager.stack}")
    members = members_of(manager)
    results = [manager, *job_stacks]
    manager_run = ClusterRun(name=out.name, stacks=[r.stack for r in results])
    objects = [o for r in results for o in manifests(r)]
    with contextlib.ExitStack() as stack, ThreadPoolExecutor(max_workers=4) as pool:
        manager_plane = stack.enter_context(kit.plane("manager"))
        manager_acceptance = pool.submit(accept_v1beta2, kit, objects, "manager")
        workers, runs = _boot_workers(kit, members, stack, pool)
        out.clusters.update(runs)
        secrets = _kubeconfigs(members, workers)
        hub = boot(
            manager_plane,
            kit,
            results,
            region=manager_region,
            out=manager_run,
            feature_gates=MULTIKUEUE_GATES,
        )
        manager_run.accepted_v1beta2, rejected = manager_acceptance.result()
        manager_run.rejected += rejected
        out.clusters[out.name] = manager_run
        _sync_external_secrets(hub.client, manifests(manager), secrets, out.acts)
        out.connections = _wait_connected(hub.client, manifests(manager))
        judged = {
            job.job.name: job
            for r in job_stacks
            if r.fleet_jobs is not None
            for job in r.fleet_jobs.judgement.jobs
        }
        for result, walked in zip(results, hub.walks, strict=True):
            for _registration, obj in walked.deferred:
                fleet_job = judged.get(obj["metadata"]["name"])
                out.workloads.append(submit_fleet_job(hub, workers, result.stack, obj, fleet_job))
        for name, cluster in workers.items():
            out.clusters[name].acts = cluster.driver.fleet.acts
        manager_run.acts = hub.driver.fleet.acts
    out.seconds = time.monotonic() - began
    return out


def _sync_external_secrets(
    client: Any,
    objects: Sequence[Mapping[str, Any]],
    values: Mapping[str, str],
    acts: list[str],
) -> None:
    """Play the External Secrets Operator: each ExternalSecret's target Secret with the value
    its remote reference names (the worker's kubeconfig, by its Secrets Manager ARN)."""
    for es in objects:
        if es.get("kind") != "ExternalSecret":
            continue
        meta, spec = es["metadata"], es["spec"]
        data = {}
        for item in spec.get("data") or []:
            key = item["remoteRef"]["key"]
            if key in values:
                data[item["secretKey"]] = base64.b64encode(values[key].encode()).decode()
        if not data:
            continue
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": spec["target"]["name"], "namespace": meta["namespace"]},
            "type": "Opaque",
            "data": data,
        }
        client.apply(secret)
        acts.append(
            f"External Secrets Operator: Secret {meta['namespace']}/{spec['target']['name']} "
            f"from {', '.join(i['remoteRef']['key'] for i in spec.get('data') or [])}"
        )


def _wait_connected(client: Any, objects: Sequence[Mapping[str, Any]]) -> dict[str, str]:
    """Each MultiKueueCluster's Active condition, once all are active (or the time is up)."""
    names = [o["metadata"]["name"] for o in objects if o.get("kind") == "MultiKueueCluster"]
    states: dict[str, str] = {}

    def active() -> bool:
        for name in names:
            cluster = client.get("kueue.x-k8s.io/v1beta1", "MultiKueueCluster", name)
            conditions = (cluster.get("status") or {}).get("conditions") or []
            found = next((c for c in conditions if c["type"] == "Active"), None)
            said = found or {}
            states[name] = (
                f"Active: {said.get('message', '')}"
                if said.get("status") == "True"
                else f"{said.get('reason', 'no condition')}: {said.get('message', '')}"
            )
        return all(v.startswith("Active") for v in states.values())

    with contextlib.suppress(TimeoutError):
        wait_for("MultiKueueClusters active", active, timeout=CONNECT_TIMEOUT_S, interval=0.5)
    return states


def submit_fleet_job(
    hub: Cluster,
    workers: Mapping[str, Cluster],
    stack: str,
    obj: Mapping[str, Any],
    fleet_job: FleetJob | None,
) -> WorkloadRun:
    """One fleet job: admitted on the manager, dispatched, admitted on a worker, pods bound
    there; the worker must be one will-it-run named."""
    began = time.monotonic()
    sub = as_submitted(hub.client, obj)
    run = WorkloadRun.of(stack, obj, sub)
    capable = {r.worker: r for r in (fleet_job.runnable_on if fleet_job else ())}
    run.predicted_sources = tuple(capable)
    landed: list[str] = []
    if apply_all(hub.client, sub, run, "the manager"):

        def settled() -> bool:
            for cluster in workers.values():
                cluster.driver.tick()
            local = workload_of(hub.client, sub.namespace, sub.owner)
            on_manager = admission(local)
            if on_manager and not run.admitted_queue:
                run.admitted_queue = on_manager[0]
            worker = ((local or {}).get("status") or {}).get("clusterName")
            if not worker or worker not in workers:
                return False
            landed[:] = [worker]
            remote = admission(workload_of(workers[worker].client, sub.namespace, sub.owner))
            if remote is None:
                return False
            run.admitted_flavors = remote[1]
            run.pods = placements(workers[worker].driver, sub, prefix=f"{worker}/")
            return len(run.pods) >= sub.pods

        try:
            wait_for(f"{run.ref} dispatched", settled, timeout=FLEET_JOB_TIMEOUT_S, interval=0.5)
        except TimeoutError:
            run.problems.append(_not_dispatched(hub.client, sub, landed))
        _check_region(run, capable, landed[0] if landed else "")
        remove(hub.client, sub, [c.driver for c in workers.values()])
    run.seconds = time.monotonic() - began
    return run


def _not_dispatched(client: Client, sub: Submission, landed: Sequence[str]) -> str:
    status = (workload_of(client, sub.namespace, sub.owner) or {}).get("status") or {}
    conditions = "; ".join(
        f"{c['type']}={c['status']} {c.get('message', '')}" for c in status.get("conditions") or []
    )
    checks = "; ".join(
        f"{c['name']}={c['state']} {c.get('message', '')}"
        for c in status.get("admissionChecks") or []
    )
    where = f" | landed on {landed[0]}" if landed else ""
    return (
        f"not dispatched and bound within {FLEET_JOB_TIMEOUT_S:.0f} s; manager Workload: "
        f"{conditions or 'no condition'}{' | checks: ' + checks if checks else ''}{where}"
    )


def _check_region(run: WorkloadRun, capable: Mapping[str, Region], worker: str) -> None:
    """The worker it landed on is one will-it-run named, its pods on the sources named there."""
    if not worker:
        return
    if capable and worker not in capable:
        run.problems.append(
            f"dispatched to {worker}, will-it-run said it runs on {', '.join(capable)} only"
        )
    verdict = capable[worker].verdict if worker in capable else None
    if verdict is not None:
        named = tuple(s.name for s in verdict.placement.fitting)
        for placement in run.pods:
            if placement.source not in named:
                run.problems.append(
                    f"pod {placement.pod} on {placement.node} of {placement.source}, "
                    f"will-it-run named {', '.join(named)} in {worker}"
                )
    run.admitted_queue = f"{run.admitted_queue}@{worker}"
