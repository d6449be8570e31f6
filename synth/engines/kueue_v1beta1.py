"""Our Kueue objects and configuration (v1beta2, Kueue v0.19.2) as the local Kueue build
(v0.13.1, which serves `kueue.x-k8s.io/v1beta1` and `config.kueue.x-k8s.io/v1beta1`) reads them.

One converter, every translation listed (`TRANSLATIONS`, docs/real-engines.md renders it). The
field renames are upstream's own: Kueue v0.19.2 converts between its hub (v1beta2) and v1beta1
in `apis/kueue/v1beta1/*_conversion.go` and `apis/config/v1beta1/configuration_conversion.go`
(kubernetes-sigs/kueue@v0.19.2):
- ClusterQueue: `spec.cohortName` -> `spec.cohort` (clusterqueue_conversion.go
  Convert_v1beta2_ClusterQueueSpec_To_v1beta1_ClusterQueueSpec); the flavor-fungibility value
  `MayStopSearch` has no v1beta1 spelling that means the same for both fields: v1beta1 reads
  `Borrow` / `Preempt` (the inverse mapping of the same function);
- MultiKueueCluster: `spec.clusterSource.kubeConfig` -> `spec.kubeConfig`
  (multikueue_conversion.go Convert_v1beta2_MultiKueueClusterSpec_To_v1beta1_MultiKueueClusterSpec);
- Configuration: `waitForPodsReady` present -> `enable: true` (configuration_conversion.go
  Convert_v1beta2_WaitForPodsReady_To_v1beta1_WaitForPodsReady); `fairSharing` present ->
  `enable: true` (Convert_v1beta2_FairSharing_To_v1beta1_FairSharing).
Other kinds keep their fields: their v1beta1 and v1beta2 specs have the same JSON at these tags.

What v0.13.1 lacks is dropped or mapped and listed, never silently: the TrainJob integration
(`trainer.kubeflow.org/trainjob` is not among v0.13.1's frameworks); Topology Aware Scheduling
is alpha there, its gate off by default (pkg/features/kube_features.go L235-237, "0.9 ... Alpha"),
and its Topology served as `kueue.x-k8s.io/v1alpha1` only (config/components/crd/bases/
kueue.x-k8s.io_topologies.yaml, the same `spec.levels` and CEL rules as v0.19.2's v1beta2:
apis/kueue/v1alpha1/topology_types.go L97-141): a stack that renders a Topology runs the local
build with the gate on (`feature_gates`), as v0.19.2 runs by default. Anything this module does
not know is applied as it is with strict field validation, so the API server names it.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

V1BETA2: Final = "kueue.x-k8s.io/v1beta2"
V1BETA1: Final = "kueue.x-k8s.io/v1beta1"
V1ALPHA1: Final = "kueue.x-k8s.io/v1alpha1"
#: Kinds v0.13.1 serves only as v1alpha1.
ALPHA_KINDS: Final = frozenset({"Topology"})
#: The local build's gate for Topology Aware Scheduling (beta, on by default at v0.19.2:
#: pkg/features/kube_features.go L683-686; alpha, off at v0.13.1: L235-237).
TAS_GATE: Final = "TopologyAwareScheduling"
CONFIG_V1BETA2: Final = "config.kueue.x-k8s.io/v1beta2"
CONFIG_V1BETA1: Final = "config.kueue.x-k8s.io/v1beta1"
#: Frameworks the local build has no integration for (v0.13.1 pkg/controller/jobs: no trainjob).
MISSING_FRAMEWORKS: Final = frozenset({"trainer.kubeflow.org/trainjob"})
#: v1beta2 FlavorFungibility `MayStopSearch` per field, in v1beta1's words.
_MAY_STOP_SEARCH: Final = {"whenCanBorrow": "Borrow", "whenCanPreempt": "Preempt"}


@dataclass(frozen=True)
class Translation:
    """One difference between what we render and what the local Kueue build reads."""

    kind: str
    field: str
    becomes: str
    source: str


TRANSLATIONS: Final = (
    Translation(
        "all Kueue kinds",
        "apiVersion kueue.x-k8s.io/v1beta2",
        "kueue.x-k8s.io/v1beta1 (v0.13.1 serves no v1beta2)",
        "v0.13.1 config/components/crd/bases",
    ),
    Translation(
        "ClusterQueue",
        "spec.cohortName",
        "spec.cohort",
        "v0.19.2 apis/kueue/v1beta1/clusterqueue_conversion.go",
    ),
    Translation(
        "ClusterQueue",
        "spec.flavorFungibility.whenCanBorrow/whenCanPreempt: MayStopSearch",
        "Borrow / Preempt",
        "v0.19.2 apis/kueue/v1beta1/clusterqueue_conversion.go",
    ),
    Translation(
        "MultiKueueCluster",
        "spec.clusterSource.kubeConfig",
        "spec.kubeConfig",
        "v0.19.2 apis/kueue/v1beta1/multikueue_conversion.go",
    ),
    Translation(
        "Configuration",
        "apiVersion config.kueue.x-k8s.io/v1beta2",
        "config.kueue.x-k8s.io/v1beta1",
        "v0.13.1 apis/config/v1beta1",
    ),
    Translation(
        "Configuration",
        "waitForPodsReady (present = on)",
        "waitForPodsReady.enable: true",
        "v0.19.2 apis/config/v1beta1/configuration_conversion.go",
    ),
    Translation(
        "Configuration",
        "fairSharing (present = on)",
        "fairSharing.enable: true",
        "v0.19.2 apis/config/v1beta1/configuration_conversion.go",
    ),
    Translation(
        "Topology",
        "apiVersion kueue.x-k8s.io/v1beta2",
        "kueue.x-k8s.io/v1alpha1 (the only version v0.13.1 serves it in; same spec.levels)",
        "v0.13.1 apis/kueue/v1alpha1/topology_types.go",
    ),
    Translation(
        "Configuration",
        "featureGates: TopologyAwareScheduling on by default (beta since v0.14)",
        "featureGates.TopologyAwareScheduling: true when the stack renders a Topology (alpha, "
        "off by default in v0.13.1)",
        "v0.13.1 pkg/features/kube_features.go L235-237",
    ),
    Translation(
        "Configuration",
        "integrations.frameworks: trainer.kubeflow.org/trainjob",
        "dropped (no TrainJob integration in v0.13.1); TrainJobs are run as the batch Job "
        "Trainer would create (docs/real-engines.md)",
        "v0.13.1 pkg/controller/jobs",
    ),
)


def convert_object(obj: Mapping[str, Any]) -> dict[str, Any]:
    """A Kueue object as v0.13.1 reads it; any other object unchanged (a copy)."""
    out = copy.deepcopy(dict(obj))
    if out.get("apiVersion") != V1BETA2:
        return out
    out["apiVersion"] = V1ALPHA1 if out.get("kind") in ALPHA_KINDS else V1BETA1
    spec = out.get("spec")
    if not isinstance(spec, dict):
        return out
    kind = out.get("kind")
    if kind == "ClusterQueue":
        if "cohortName" in spec:
            spec["cohort"] = spec.pop("cohortName")
        fungibility = spec.get("flavorFungibility") or {}
        for key, v1beta1_value in _MAY_STOP_SEARCH.items():
            if fungibility.get(key) == "MayStopSearch":
                fungibility[key] = v1beta1_value
    elif kind == "MultiKueueCluster":
        source = spec.pop("clusterSource", None) or {}
        if "kubeConfig" in source:
            spec["kubeConfig"] = source["kubeConfig"]
    return out


def convert_configuration(config: Mapping[str, Any]) -> dict[str, Any]:
    """Kueue's Configuration (v1beta2) as v0.13.1 reads it."""
    out = copy.deepcopy(dict(config))
    if out.get("apiVersion") == CONFIG_V1BETA2:
        out["apiVersion"] = CONFIG_V1BETA1
    for block in ("waitForPodsReady", "fairSharing"):
        if isinstance(out.get(block), dict):
            out[block] = {"enable": True, **out[block]}
    integrations = out.get("integrations") or {}
    if "frameworks" in integrations:
        integrations["frameworks"] = [
            f for f in integrations["frameworks"] if f not in MISSING_FRAMEWORKS
        ]
    return out


def feature_gates(objects: Iterable[Mapping[str, Any]]) -> dict[str, bool]:
    """The gates the local build needs for what the stacks render: Topology Aware Scheduling
    when a Topology is among them (module docstring)."""
    if any(o.get("apiVersion") == V1BETA2 and o.get("kind") == "Topology" for o in objects):
        return {TAS_GATE: True}
    return {}
