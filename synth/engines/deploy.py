"""Apply a synthesized stack to a control plane in the order `pulumi up` would create it.

The order is the deploy plan's (synth/deploy_plan.py): a resource starts once everything it
depends on is done, so resources go in waves. Inside a wave the engine runs resources
concurrently, so no order among them is guaranteed: this walk applies the objects that others
may need (Namespaces, CustomResourceDefinitions, Helm releases) *last* in their wave. An object
that only worked because its namespace or CRD happened to come first is refused here, as
`pulumi up` may refuse it.

A Helm release is what its chart installs that our objects meet (the insides of charts are not
synthesized): its namespace (Helm fails on a missing one unless `createNamespace`), the CRDs
the chart ships (the vendored copies under schemas/crds, `CHART_CRDS`) unless `skipCrds`, and —
through `on_release` — the controller the caller runs for it (Kueue). Every rejection is kept
with the object, its URN and the API server's message.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml

from components import addons
from synth.deploy_plan import HELM_RELEASE, plan
from synth.engines.client import ApiError, Client, install_crds
from synth.harness import PROJECT_ROOT, Registration, SynthResult
from synth.output import is_manifest

CRD_ROOT: Final = PROJECT_ROOT / "schemas" / "crds"
#: Chart name -> the folder of schemas/crds holding the CRDs it installs (of the kinds we render):
#: the add-on registry's `crds`.
CHART_CRDS: Final = addons.chart_crds()
#: Kinds that others need to exist first: applied last in their wave (module docstring).
PREREQUISITES: Final = ("Namespace", "CustomResourceDefinition")


@dataclass(frozen=True)
class ObjectRef:
    api_version: str
    kind: str
    namespace: str
    name: str

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> ObjectRef:
        meta = obj.get("metadata") or {}
        return cls(obj["apiVersion"], obj["kind"], meta.get("namespace", ""), meta["name"])

    def __str__(self) -> str:
        where = f"{self.namespace}/" if self.namespace else ""
        return f"{self.kind} {where}{self.name}"


@dataclass(frozen=True)
class Rejection:
    """An object the API server refused, and why (its own message)."""

    ref: ObjectRef
    urn: str
    wave: int
    message: str

    def __str__(self) -> str:
        return f"{self.ref} (wave {self.wave}): {self.message}"


@dataclass
class Walk:
    """What one walk did."""

    applied: list[ObjectRef] = field(default_factory=list)
    rejected: list[Rejection] = field(default_factory=list)
    #: Objects held back by `defer` (workloads the caller submits one at a time).
    deferred: list[tuple[Registration, dict[str, Any]]] = field(default_factory=list)
    #: Releases, in order, with what was done for each.
    releases: list[str] = field(default_factory=list)


def chart_name(release: Registration) -> str:
    return str(release.inputs.get("chart", "")).rsplit("/", 1)[-1]


#: libyaml's safe loader (PyYAML's wheels bundle it): CRDs are large, pure-Python parsing slow.
_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def load_yaml_documents(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(path.read_text(), Loader=_LOADER) if d]


class CrdLibrary:
    """CRDs read from folders, each parsed once for the life of the library (one tier run)."""

    def __init__(self) -> None:
        self._folders: dict[Path, list[dict[str, Any]]] = {}

    def folder(self, path: Path) -> list[dict[str, Any]]:
        if path not in self._folders:
            docs = [d for p in sorted(path.glob("*.yaml")) for d in load_yaml_documents(p)]
            self._folders[path] = docs
        return self._folders[path]

    def chart(self, chart: str) -> list[dict[str, Any]]:
        """The CRDs `chart` installs, of the kinds we render (vendored, CHART_CRDS)."""
        folder = CHART_CRDS.get(chart)
        return self.folder(CRD_ROOT / folder) if folder else []


def _order(registration: Registration) -> tuple[int, str]:
    if registration.type == HELM_RELEASE:
        return (3, registration.urn)
    kind = registration.type.rsplit(":", 1)[-1]
    return (1 + PREREQUISITES.index(kind) if kind in PREREQUISITES else 0, registration.urn)


def walk(
    client: Client,
    result: SynthResult,
    crds: CrdLibrary,
    *,
    convert: Callable[[dict[str, Any]], dict[str, Any]] = dict,
    on_release: Callable[[Registration, list[dict[str, Any]]], str] | None = None,
    defer: Callable[[dict[str, Any]], bool] = lambda obj: False,
) -> Walk:
    """Apply `result` to `client`'s cluster in deploy order (module docstring). `convert`
    rewrites an object before it is applied; `on_release(release, crds)` installs a chart's
    CRDs and starts its controller (default: the vendored CRDs only) and says what it did."""
    by_urn = {r.urn: r for r in result.resources}
    steps = plan(result)
    out = Walk()
    waves: dict[int, list[Registration]] = {}
    for step in steps:
        registration = by_urn[step.urn]
        if registration.type == HELM_RELEASE or is_manifest(registration):
            waves.setdefault(step.wave, []).append(registration)
    for wave in sorted(waves):
        for registration in sorted(waves[wave], key=_order):
            if registration.type == HELM_RELEASE:
                out.releases.append(
                    _release(
                        client,
                        registration,
                        wave=wave,
                        out=out,
                        library=crds,
                        on_release=on_release,
                    )
                )
                continue
            obj = dict(registration.inputs)
            if defer(obj):
                out.deferred.append((registration, obj))
                continue
            _apply(client, convert(obj), registration.urn, wave, out)
    return out


def _apply(client: Client, obj: dict[str, Any], urn: str, wave: int, out: Walk) -> None:
    ref = ObjectRef.of(obj)
    try:
        if obj["kind"] == "CustomResourceDefinition":
            install_crds(client, [obj])
        else:
            client.apply(obj)
    except ApiError as error:
        out.rejected.append(Rejection(ref, urn, wave, error.message or str(error)))
        return
    out.applied.append(ref)


def _release(
    client: Client,
    release: Registration,
    *,
    wave: int,
    out: Walk,
    library: CrdLibrary,
    on_release: Callable[[Registration, list[dict[str, Any]]], str] | None,
) -> str:
    inputs = release.inputs
    chart, namespace = chart_name(release), str(inputs.get("namespace") or "default")
    done = [f"{chart} {inputs.get('version', '')} into {namespace}"]
    if client.find("v1", "Namespace", namespace) is None:
        if not inputs.get("createNamespace"):
            ref = ObjectRef("helm.sh/v3", "Release", namespace, str(inputs.get("name", chart)))
            message = (
                f'Helm: namespaces "{namespace}" not found (the release has no createNamespace)'
            )
            out.rejected.append(Rejection(ref, release.urn, wave, message))
            return f"{done[0]}: refused, namespace missing"
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
        done.append("namespace created")
    crds = [] if inputs.get("skipCrds") else library.chart(chart)
    if on_release is not None:
        done.append(on_release(release, crds))
    elif crds:
        install_crds(client, crds)
        done.append(f"{len(crds)} CRDs")
    return ", ".join(d for d in done if d)
