"""Where a training job's pods may go: the node affinity (GPU class and capacity types, the labels
managed node groups and Karpenter pools carry), the tolerations, and the single-zone term of
multi-node EFA jobs. The workload builders (components/training_jobs/manifests.py) put exactly these
into the pod template; the "will it run" analysis (willrun.py) matches them against the node
sources. One home, so the two can never disagree.

Single zone for multi-node EFA jobs (EFA traffic does not cross availability zones): a required
podAffinity on `topology.kubernetes.io/zone` towards the job's own pods. Chosen over the other
two options: Kueue Topology Aware Scheduling counts only Ready nodes and never admits onto
scale-from-zero Karpenter capacity (kubernetes-sigs/kueue@v0.19.2:
site/content/en/docs/concepts/topology_aware_scheduling.md, "Capacity calculation"; runs.md item
11); a nodeAffinity on one named zone needs the zone's name, which the config does not hold (the
Network component resolves zones at deploy time with aws.get_availability_zones). kube-scheduler
lets the first pod of a self-referencing required podAffinity through when no pod matches yet and
the pod matches its own term (kubernetes/kubernetes pkg/scheduler/framework/plugins/
interpodaffinity/filtering.go, satisfyPodAffinity), and Karpenter's provisioning simulation honours
required pod affinity with zone topology keys (aws/karpenter-provider-aws@v1.14.1
website/content/en/docs/concepts/scheduling.md, "Pod affinity/anti-affinity"). If a named zone is
ever wanted (co-location with the FSx file system's subnet), `zone_pin_index` says which one and
the workload builder adds one nodeAffinity expression on `topology.kubernetes.io/zone`.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from components import catalog
from components.config import StackConfig, TrainingJobConfig

#: Label every object and pod of a training job carries (its name).
JOB_LABEL: Final = f"{catalog.LABEL_DOMAIN}/training-job"
ZONE_KEY: Final = catalog.ZONE_LABEL
REGION_KEY: Final = catalog.REGION_LABEL


def node_affinity(job: TrainingJobConfig) -> dict[str, Any]:
    """Required: the GPU class and the allowed capacity types (the pools' own labels, see
    catalog.gpu_node_labels); `either` prefers spot, the cheaper one, when both have room."""
    affinity: dict[str, Any] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": catalog.LABEL_GPU_CLASS,
                            "operator": "In",
                            "values": [job.gpu_class],
                        },
                        {
                            "key": catalog.LABEL_CAPACITY_TYPE,
                            "operator": "In",
                            "values": list(job.capacity_types),
                        },
                        # A fleet job pinned to regions: every node carries the well-known
                        # region label, and each fleet worker's ResourceFlavors carry it too,
                        # so Kueue on a worker of another region finds no flavor for it
                        # (kubernetes-sigs/kueue@v0.19.2 pkg/scheduler/flavorassigner/
                        # flavorassigner.go checkFlavorForPodSets, flavorSelector).
                        *(
                            [{"key": REGION_KEY, "operator": "In", "values": list(job.regions)}]
                            if job.regions
                            else []
                        ),
                    ]
                }
            ]
        }
    }
    if job.capacity == "either":
        affinity["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "weight": 100,
                "preference": {
                    "matchExpressions": [
                        {"key": catalog.LABEL_CAPACITY_TYPE, "operator": "In", "values": ["spot"]}
                    ]
                },
            }
        ]
    return affinity


def needs_single_zone(job: TrainingJobConfig, efa_devices: int) -> bool:
    """Whether the job's pods are confined to one availability zone: `zones` when set, else
    every multi-node job over EFA (EFA traffic does not cross zones). A one-pod job is in one
    zone anyway and gets no term. `zones: any` on a multi-node EFA job never gets here: the
    analysis refuses it (jobs.py)."""
    if job.nodes < 2:
        return False
    if job.zones is not None:
        return job.zones == "single"
    return efa_devices > 0


def pod_affinity(job: TrainingJobConfig, efa_devices: int) -> dict[str, Any]:
    """The pod's `affinity`: node affinity, plus the single-zone term where EFA needs it."""
    out: dict[str, Any] = {"nodeAffinity": node_affinity(job)}
    if needs_single_zone(job, efa_devices):
        # EFA does not cross availability zones (and cross-AZ TCP is billed per GB): all pods
        # of the job in pod 0's zone.
        out["podAffinity"] = single_zone_affinity({"matchLabels": {JOB_LABEL: job.name}})
    return out


def single_zone_affinity(selector: dict[str, Any]) -> dict[str, Any]:
    """The `podAffinity` that keeps every pod `selector` matches in one zone (the pods must
    match their own selector: the first one then goes anywhere, the rest follow it). Training
    jobs and the NCCL validation test share it."""
    return {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {"labelSelector": selector, "topologyKey": ZONE_KEY}
        ]
    }


def tolerations(job: TrainingJobConfig) -> list[dict[str, str]]:
    """Training pods tolerate the GPU taint, and the spot taint of spot managed groups when the
    job may run on spot (it is then spot-safe: checkpoints and the interruption handler)."""
    out = [catalog.gpu_toleration()]
    if "spot" in job.capacity_types:
        out.append(catalog.spot_toleration())
    return out


@dataclass(frozen=True)
class Placement:
    """Where a pod may go: the pod template's affinity and tolerations, rendered once, and the
    same in the form the scheduler and Karpenter match against (the will-it-run analysis and
    the manifests read this one model)."""

    #: Required node labels: key -> allowed values (a nodeSelectorTerm's `In` expressions).
    required: dict[str, tuple[str, ...]]
    tolerations: tuple[dict[str, str], ...]
    #: All pods forced into one zone (required podAffinity on the zone key).
    single_zone: bool
    #: The pod template's `affinity` as rendered (node affinity, single-zone podAffinity).
    affinity: Mapping[str, Any] = field(default_factory=dict)

    def pod_affinity(self) -> dict[str, Any]:
        """A pod template's `affinity` (a copy: templates never share a dict)."""
        return copy.deepcopy(dict(self.affinity))

    def pod_tolerations(self) -> list[dict[str, str]]:
        """A pod template's `tolerations` (copies)."""
        return [dict(t) for t in self.tolerations]


def placement_of(affinity: dict[str, Any], pod_tolerations: list[dict[str, str]]) -> Placement:
    """Read a pod's affinity and tolerations back (the first nodeSelectorTerm's `In`s)."""
    terms = (
        affinity.get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [{}])
    )
    required = {
        expr["key"]: tuple(expr["values"])
        for expr in terms[0].get("matchExpressions", [])
        if expr.get("operator") == "In"
    }
    zone_terms = affinity.get("podAffinity", {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution", []
    )
    return Placement(
        required=required,
        tolerations=tuple(pod_tolerations),
        single_zone=any(term.get("topologyKey") == ZONE_KEY for term in zone_terms),
        affinity=affinity,
    )


def job_placement(job: TrainingJobConfig, efa_devices: int) -> Placement:
    """The placement the job's manifests carry."""
    return placement_of(pod_affinity(job, efa_devices), tolerations(job))


def zone_pin_index(cfg: StackConfig, job: TrainingJobConfig, efa_devices: int) -> int | None:
    """The private-subnet (AZ) index a single-zone job would best be pinned to, were it pinned
    by name: the FSx file system's subnet (no cross-AZ Lustre traffic), else the first AZ. None
    for jobs that may span zones."""
    if not needs_single_zone(job, efa_devices):
        return None
    rwx = cfg.storage.rwx
    return rwx.fsx_subnet_index if rwx.type == "fsx" else 0
