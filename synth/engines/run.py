"""Run a synthesized stack (and the job stacks deployed onto it) through the real engines and
compare what they do with what "will it run" predicted.

For one cluster:
1. Kueue's objects as rendered (v1beta2) go to an API server serving the vendored Kueue
   v0.19.2 CRDs: the real API server's schema, defaulting and CEL rules accept each or say why.
2. A second control plane (API server, scheduler, controller-manager) gets everything, in deploy
   order (deploy.py): the Kueue release starts the real Kueue (the local build, its own CRDs,
   the rendered configuration translated: kueue_v1beta1.py), Kueue's objects are translated.
3. Nodes of the managed groups' desired size join; then each workload is submitted on its own
   (a verdict is about one workload on an otherwise idle cluster), driven until its pods are
   bound or it waits, checked against its verdict, and removed. Karpenter, the
   cluster-autoscaler and the CSI drivers are played by nodes.py, every act recorded.

What no engine here runs is said per workload (workloads.py) and played by driver.py.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from components.analysis.willrun import Verdict
from synth.engines import kueue as kueue_process
from synth.engines import kueue_v1beta1, nodes
from synth.engines.assets import Assets
from synth.engines.client import ApiError, Client, install_crds
from synth.engines.controlplane import ControlPlane
from synth.engines.deploy import CrdLibrary, Rejection, Walk, chart_name, walk
from synth.engines.driver import Driver
from synth.engines.workloads import WorkloadRun, is_workload, submit
from synth.harness import PROJECT_ROOT, Registration, SynthResult, load_stack_config
from synth.output import manifests

KUEUE_V1BETA2: Final = "kueue.x-k8s.io/v1beta2"


@dataclass
class ClusterRun:
    """One cluster (a platform stack and the job stacks deployed onto it)."""

    name: str
    stacks: list[str]
    applied: int = 0
    accepted_v1beta2: int = 0
    rejected: list[Rejection] = field(default_factory=list)
    releases: list[str] = field(default_factory=list)
    workloads: list[WorkloadRun] = field(default_factory=list)
    acts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def problems(self) -> list[str]:
        found = [f"{self.name}: refused {r}" for r in self.rejected]
        for w in self.workloads:
            found += [f"{self.name}: {w.ref}: {p}" for p in w.problems]
        return found

    @property
    def admitted(self) -> int:
        return sum(1 for w in self.workloads if w.admitted_queue)

    @property
    def bound(self) -> int:
        return sum(len(w.pods) for w in self.workloads)


# --- step 1: Kueue's v1beta2 objects on the v0.19.2 CRDs ----------------------------------------


def accept_v1beta2(
    kit: Toolkit, objects: Sequence[Mapping[str, Any]], name: str
) -> tuple[int, list[Rejection]]:
    """Apply every Kueue v1beta2 object (and the namespaces they live in) to an API server
    serving the vendored Kueue v0.19.2 CRDs; count accepted, keep refusals."""
    kueue_objects = [o for o in objects if o.get("apiVersion") == KUEUE_V1BETA2]
    if not kueue_objects:
        return 0, []
    rejected: list[Rejection] = []
    from synth.engines.deploy import ObjectRef

    with kit.plane(f"{name}-v1beta2", controllers=False) as cp:
        install_crds(cp.admin, kit.crds.chart("kueue"))
        for namespace in sorted({o["metadata"].get("namespace", "") for o in kueue_objects} - {""}):
            cp.admin.create(
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
            )
        accepted = 0
        for obj in kueue_objects:
            try:
                cp.admin.apply(obj)
                accepted += 1
            except ApiError as error:
                rejected.append(Rejection(ObjectRef.of(obj), "", 0, error.message))
    return accepted, rejected


# --- step 2: the engine control plane ------------------------------------------------------------


def _release_hook(
    cp: ControlPlane, assets: Assets, feature_gates: Mapping[str, bool], started: list[str]
) -> Callable[[Registration, list[dict[str, Any]]], str]:
    def on_release(release: Registration, crds: list[dict[str, Any]]) -> str:
        if chart_name(release) != "kueue":
            if crds:
                install_crds(cp.admin, crds)
                return f"{len(crds)} CRDs"
            return ""
        # The real Kueue: its own build's CRDs, the rendered configuration.
        own = [
            d
            for p in sorted(assets.kueue_crds.glob("*.yaml"))
            for d in yaml.safe_load_all(p.read_text())
            if d
        ]
        install_crds(cp.admin, own)
        values = release.inputs.get("values") or {}
        rendered = yaml.safe_load(values["managerConfig"]["controllerManagerConfigYaml"])
        namespace = str(release.inputs.get("namespace"))
        kueue_process.start(cp, assets, rendered, namespace=namespace, feature_gates=feature_gates)
        started.append(namespace)
        return f"Kueue {assets.kueue_version} started ({len(own)} CRDs of its own)"

    return on_release


def deploy(
    cp: ControlPlane,
    assets: Assets,
    crds: CrdLibrary,
    results: Sequence[SynthResult],
    *,
    feature_gates: Mapping[str, bool] | None = None,
) -> list[Walk]:
    """Walk each stack onto `cp` (the platform first, then its job stacks)."""
    started: list[str] = []
    hook = _release_hook(cp, assets, feature_gates or {}, started)
    return [
        walk(
            cp.admin,
            result,
            crds,
            convert=kueue_v1beta1.convert_object,
            on_release=hook,
            defer=is_workload,
        )
        for result in results
    ]


# --- step 3: workloads ---------------------------------------------------------------------------


def _verdicts(result: SynthResult) -> dict[str, Verdict]:
    judgement = result.judgement
    if judgement is None and result.fleet_jobs is not None:
        judgement = result.fleet_jobs.judgement
    return {v.workload: v for v in getattr(judgement, "verdicts", ())}


@dataclass(frozen=True)
class Toolkit:
    """What every cluster of a tier run needs, read once: the engines' binaries, the vendored
    CRDs and the instance types' node shapes."""

    assets: Assets
    crds: CrdLibrary
    shapes: Mapping[str, nodes.InstanceShape]
    #: Where each control plane's process logs are copied when it stops (None: nowhere).
    log_root: Path | None = None

    @classmethod
    def load(cls, assets: Assets, log_root: Path | None = None) -> Toolkit:
        return cls(assets, CrdLibrary(), nodes.load_shapes(), log_root)

    def plane(self, name: str, *, controllers: bool = True) -> ControlPlane:
        """A control plane of this run (not started)."""
        logs = self.log_root / name if self.log_root is not None else None
        return ControlPlane(self.assets, name, controllers=controllers, log_dir=logs)


@dataclass
class Cluster:
    """A booted cluster: its control plane with the stacks deployed, its nodes and the
    stand-ins that act for the controllers no engine here runs."""

    cp: ControlPlane
    results: list[SynthResult]
    walks: list[Walk]
    driver: Driver

    @property
    def client(self) -> Client:
        return self.cp.admin


def region_of(stack: str, root: Path = PROJECT_ROOT) -> str:
    """The stack's `aws:region` (its Pulumi.<stack>.yaml), as the program reads it."""
    _, config, _ = load_stack_config(stack, root)
    return str(config.get("aws:region") or "us-east-1")


def boot(
    cp: ControlPlane,
    kit: Toolkit,
    results: Sequence[SynthResult],
    *,
    region: str,
    out: ClusterRun,
    feature_gates: Mapping[str, bool] | None = None,
) -> Cluster:
    """Deploy `results` (a platform first, then stacks deployed onto it) to the running `cp`,
    bring its static nodes, and return it ready for workloads."""
    gates = {
        **kueue_v1beta1.feature_gates(o for r in results for o in manifests(r)),
        **(feature_gates or {}),
    }
    walks = deploy(cp, kit.assets, kit.crds, results, feature_gates=gates)
    for w in walks:
        out.applied += len(w.applied)
        out.rejected += w.rejected
        out.releases += w.releases
    cp.wait_for_controllers()
    fleet = nodes.Fleet(cp.admin, kit.shapes, region)
    platform = results[0]
    node_sources = nodes.sources(platform, region, manifests(platform))
    fleet.start_static(node_sources)
    return Cluster(cp, list(results), walks, Driver(cp.admin, fleet, node_sources))


def run_cluster(
    kit: Toolkit,
    platform: SynthResult,
    job_stacks: Sequence[SynthResult] = (),
    *,
    region: str,
    name: str | None = None,
) -> ClusterRun:
    """Steps 1-3 of the module docstring for one cluster."""
    began = time.monotonic()
    name = name or platform.stack
    results = [platform, *job_stacks]
    out = ClusterRun(name=name, stacks=[r.stack for r in results])
    objects = [o for r in results for o in manifests(r)]
    with ThreadPoolExecutor(max_workers=1) as pool, kit.plane(name) as cp:
        # The v1beta2 check needs its own API server: it runs while this one deploys.
        acceptance = pool.submit(accept_v1beta2, kit, objects, name)
        cluster = boot(cp, kit, results, region=region, out=out)
        for result, w in zip(results, cluster.walks, strict=True):
            verdicts = _verdicts(result)
            for _registration, obj in w.deferred:
                if obj["kind"] == "PodGroup":
                    _apply_quietly(cp.admin, obj, out)
                    continue
                meta = obj["metadata"]
                verdict = verdicts.get(f"{meta.get('namespace')}/{meta['name']}")
                out.workloads.append(submit(cluster.driver, result.stack, obj, verdict))
        out.acts = cluster.driver.fleet.acts
        out.accepted_v1beta2, rejected = acceptance.result()
        out.rejected += rejected
    out.seconds = time.monotonic() - began
    return out


def _apply_quietly(client: Client, obj: Mapping[str, Any], out: ClusterRun) -> None:
    from synth.engines.deploy import ObjectRef

    try:
        client.apply(obj)
        out.applied += 1
    except ApiError as error:
        out.rejected.append(Rejection(ObjectRef.of(obj), "", 0, error.message))
