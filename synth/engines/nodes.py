"""Nodes shaped like the stack's node sources, and the parts of the node controllers that no
engine here runs: Karpenter launching for pending pods, the cluster-autoscaler answering a
ProvisioningRequest or a pending pod, a CSI driver provisioning a claim. What they do is kept
as a record of acts ("Karpenter launched g5.xlarge for team-research/ddp-smoke-0"), so a run
says which of its results came from a stand-in.

Where the shapes come from (never from our own analysis, which the tier checks):
- the sources are the rendered objects: Karpenter NodePools (template labels and taints,
  requirements, `limits`) and the EKS managed node groups' registrations (labels, taints,
  instance types, capacity type, scaling config);
- a node's labels and allocatable resources are Karpenter's own, per instance type
  (schemas/karpenter-instance-types.yaml: Karpenter v1.14.1's generated reference, capacity
  minus kube-reserved, eviction threshold and VM overhead, pkg/providers/instancetype/types.go).
  A Karpenter node also carries `karpenter.sh/nodepool`, `karpenter.sh/capacity-type` and
  `karpenter.k8s.aws/ec2nodeclass` (the same package's labels); a managed node group's node
  carries the well-known ones and `eks.amazonaws.com/nodegroup` / `eks.amazonaws.com/capacityType`
  (EKS user guide, managed node groups) — none of Karpenter's `karpenter.k8s.aws/*` labels;
- a NodePool's requirement with one value is a label of each of its nodes (Karpenter sets
  single-valued requirements as labels);
- the cluster-autoscaler sizes a managed group's would-be node from its FIRST instance type
  (kubernetes/autoscaler@cluster-autoscaler-1.33.6 cloudprovider/aws/README.md);
- a node of an instance type EC2 gives a topology carries `topology.k8s.aws/network-node-layer-1..N`
  as EKS's cloud-controller-manager sets them when it initializes the node, whoever launched it
  (components/catalog.py NETWORK_NODE_LABEL_PREFIX cites the lines; which types and N:
  NETWORK_NODE_LAYERS, the EC2 prerequisites page). No EC2 here: the place in the network is
  simulated by `NetworkLayout`, deterministically (docs/real-engines.md, "Network topology").
"""

from __future__ import annotations

import hashlib
import itertools
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, Literal

import yaml

from components import catalog
from synth.engines.client import ApiError, Client
from synth.harness import PROJECT_ROOT, SynthResult

EXTRACT: Final = PROJECT_ROOT / "schemas" / "karpenter-instance-types.yaml"
MANAGED_GROUP_TYPES: Final = ("eks:index:ManagedNodeGroup", "aws:eks/nodeGroup:NodeGroup")
LAUNCH_TEMPLATE: Final = "aws:ec2/launchTemplate:LaunchTemplate"
EKS_TAINT_EFFECTS: Final = {
    "NO_SCHEDULE": "NoSchedule",
    "NO_EXECUTE": "NoExecute",
    "PREFER_NO_SCHEDULE": "PreferNoSchedule",
}
EKS_CAPACITY: Final = {"SPOT": "spot", "ON_DEMAND": "on-demand", "CAPACITY_BLOCK": "reserved"}
GPU: Final = "nvidia.com/gpu"
ZONE_LETTERS: Final = "abcdef"


@dataclass(frozen=True)
class NetworkLayout:
    """The simulated EC2 network of one region (docs/real-engines.md, "Network topology"): per
    zone one layer-1 network node, `fanout` layer-2 nodes under it, `fanout` layer-3 nodes under
    each of those (and, for 4-layer types, `fanout` layer-4 nodes under each layer-3 node). EC2
    publishes neither where it places an instance nor how many share a network node, and no
    provisioner here can aim at one (Karpenter and the cluster-autoscaler launch blind to the
    hierarchy): the n-th labelled node created in a zone goes to its bottom block n mod B, B the
    zone's bottom blocks — spread, the hard case for a gang. Network-node ids are `nn-` and 17
    hex digits, as EC2 writes them, derived from the region, zone, layer and index (stable from
    run to run)."""

    fanout: int = 2

    def blocks(self, layers: int) -> int:
        """Bottom-layer network nodes per zone for nodes with `layers` layers."""
        return int(self.fanout ** (layers - 1))

    def labels(self, region: str, zone: str, layers: int, ordinal: int) -> dict[str, str]:
        """The network-node labels of the `ordinal`-th labelled node of `zone` (0-based)."""
        block = ordinal % self.blocks(layers)
        out: dict[str, str] = {}
        for layer in range(1, layers + 1):
            # The index of this block's ancestor at `layer` (layer 1: the zone's one node).
            index = block // self.fanout ** (layers - layer)
            digest = hashlib.sha256(f"{region}/{zone}/{layer}/{index}".encode()).hexdigest()
            out[catalog.network_node_label(layer)] = f"nn-{digest[:17]}"
        return out


@dataclass(frozen=True)
class InstanceShape:
    labels: Mapping[str, str]
    allocatable: Mapping[str, str]


def load_shapes(path: Path = EXTRACT) -> dict[str, InstanceShape]:
    rows = yaml.safe_load(path.read_text())["instanceTypes"]
    return {
        name: InstanceShape(dict(row["labels"]), dict(row["allocatable"]))
        for name, row in rows.items()
    }


@dataclass
class Source:
    """A place nodes come from, as rendered."""

    name: str
    kind: Literal["karpenter", "managed"]
    labels: dict[str, str]
    taints: list[dict[str, str]]
    instance_types: tuple[str, ...]
    capacity_type: str
    zones: tuple[str, ...]
    #: Managed group: min/desired/max; Karpenter: the pool's GPU limit (None: unbounded).
    min_size: int = 0
    desired: int = 0
    max_size: int = 0
    gpu_limit: int | None = None
    #: A NodePool's `weight` (Karpenter tries heavier pools first).
    weight: int = 0
    #: extra labels Karpenter/EKS put on every node of the source.
    system_labels: dict[str, str] = field(default_factory=dict)
    #: A requirement other than single-valued ones: key -> (operator, values).
    requirements: dict[str, tuple[str, tuple[str, ...]]] = field(default_factory=dict)

    @property
    def autoscaled(self) -> bool:
        return self.kind == "managed" and self.max_size > self.min_size


def _quantity(value: str) -> float:
    """A Kubernetes quantity as a float (cores, bytes, counts)."""
    units = {
        "m": 1e-3,
        "k": 1e3,
        "M": 1e6,
        "G": 1e9,
        "T": 1e12,
        "Ki": 2**10,
        "Mi": 2**20,
        "Gi": 2**30,
        "Ti": 2**40,
    }
    text = str(value)
    for suffix in sorted(units, key=len, reverse=True):
        if text.endswith(suffix):
            return float(text[: -len(suffix)]) * units[suffix]
    return float(text)


def _region_zones(region: str, count: int) -> tuple[str, ...]:
    return tuple(f"{region}{ZONE_LETTERS[i]}" for i in range(max(1, count)))


def sources(
    result: SynthResult, region: str, manifests: Sequence[Mapping[str, Any]]
) -> list[Source]:
    """Every node source the stack renders (NodePools, managed node groups)."""
    out: list[Source] = []
    templates = {r.name: r.inputs for r in result.of_type(LAUNCH_TEMPLATE)}
    for kind in MANAGED_GROUP_TYPES:
        for group in result.of_type(kind):
            out.append(_managed(group.name, group.inputs, templates, region))
    for obj in manifests:
        if obj.get("apiVersion") == "karpenter.sh/v1" and obj.get("kind") == "NodePool":
            out.append(_pool(obj, region))
    return out


def _managed(
    resource_name: str,
    inputs: Mapping[str, Any],
    templates: Mapping[str, Mapping[str, Any]],
    region: str,
) -> Source:
    labels = dict(inputs.get("labels") or {})
    name = labels.get("gpu-platform.io/node-pool") or str(
        inputs.get("nodeGroupName") or resource_name
    )
    types = tuple(inputs.get("instanceTypes") or ())
    if not types:
        template_id = str((inputs.get("launchTemplate") or {}).get("id", ""))
        template = next((t for n, t in templates.items() if template_id.startswith(n)), {})
        types = (str(template.get("instanceType")),) if template.get("instanceType") else ()
    scaling = inputs.get("scalingConfig") or {}
    capacity = EKS_CAPACITY.get(str(inputs.get("capacityType") or "ON_DEMAND"), "on-demand")
    taints = [
        {
            "key": t["key"],
            "value": str(t.get("value", "")),
            "effect": EKS_TAINT_EFFECTS[t["effect"]],
        }
        for t in inputs.get("taints") or []
    ]
    group_name = str(inputs.get("nodeGroupName") or resource_name)
    return Source(
        name=name,
        kind="managed",
        labels=labels,
        taints=taints,
        instance_types=types,
        capacity_type=capacity,
        zones=_region_zones(region, len(inputs.get("subnetIds") or [])),
        min_size=int(scaling.get("minSize", 0)),
        desired=int(scaling.get("desiredSize", 0)),
        max_size=int(scaling.get("maxSize", 0)),
        system_labels={
            "eks.amazonaws.com/nodegroup": group_name,
            "eks.amazonaws.com/capacityType": str(inputs.get("capacityType") or "ON_DEMAND"),
        },
    )


def _pool(pool: Mapping[str, Any], region: str) -> Source:
    spec = pool["spec"]["template"]["spec"]
    labels = dict((pool["spec"]["template"].get("metadata") or {}).get("labels") or {})
    requirements: dict[str, tuple[str, tuple[str, ...]]] = {}
    for req in spec.get("requirements") or []:
        values = tuple(str(v) for v in req.get("values") or ())
        if req["operator"] == "In" and len(values) == 1:
            labels.setdefault(req["key"], values[0])
        requirements[req["key"]] = (req["operator"], values)
    types = requirements.get("node.kubernetes.io/instance-type", ("In", ()))[1]
    capacity = requirements.get("karpenter.sh/capacity-type", ("In", ("on-demand",)))[1]
    zones = requirements.get("topology.kubernetes.io/zone", ("In", ()))[1]
    limit = (pool["spec"].get("limits") or {}).get(GPU)
    name = pool["metadata"]["name"]
    return Source(
        name=labels.get("gpu-platform.io/node-pool", name),
        kind="karpenter",
        labels=labels,
        taints=[dict(t) for t in spec.get("taints") or []],
        instance_types=tuple(types),
        capacity_type=capacity[0],
        zones=tuple(zones) or _region_zones(region, 3),
        gpu_limit=int(_quantity(limit)) if limit is not None else None,
        weight=int(pool["spec"].get("weight", 0)),
        system_labels={
            "karpenter.sh/nodepool": name,
            "karpenter.sh/capacity-type": capacity[0],
            "karpenter.k8s.aws/ec2nodeclass": str(spec.get("nodeClassRef", {}).get("name", "")),
            "karpenter.sh/registered": "true",
            "karpenter.sh/initialized": "true",
        },
        requirements=requirements,
    )


# --- matching a pod against a would-be node ------------------------------------------------------


def _expression_holds(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    key, op = expr["key"], expr["operator"]
    values = [str(v) for v in expr.get("values") or ()]
    present = key in labels
    if op == "In":
        return present and labels[key] in values
    if op == "NotIn":
        return not present or labels[key] not in values
    if op == "Exists":
        return present
    if op == "DoesNotExist":
        return not present
    if op in ("Gt", "Lt") and present:
        left, right = int(labels[key]), int(values[0])
        return left > right if op == "Gt" else left < right
    return False


def selects(pod_spec: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether a node with `labels` satisfies the pod's nodeSelector and required affinity."""
    if any(labels.get(k) != v for k, v in (pod_spec.get("nodeSelector") or {}).items()):
        return False
    affinity = ((pod_spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if not affinity:
        return True
    return any(
        all(_expression_holds(e, labels) for e in term.get("matchExpressions") or [])
        for term in affinity.get("nodeSelectorTerms") or []
    )


def tolerated(pod_spec: Mapping[str, Any], taints: Sequence[Mapping[str, str]]) -> bool:
    tolerations = pod_spec.get("tolerations") or []
    for taint in taints:
        if taint.get("effect") == "PreferNoSchedule":
            continue
        if not any(_tolerates(t, taint) for t in tolerations):
            return False
    return True


def _tolerates(toleration: Mapping[str, Any], taint: Mapping[str, str]) -> bool:
    if toleration.get("effect") and toleration["effect"] != taint.get("effect"):
        return False
    if toleration.get("operator") == "Exists":
        return not toleration.get("key") or toleration["key"] == taint["key"]
    return toleration.get("key") == taint["key"] and str(toleration.get("value", "")) == str(
        taint.get("value", "")
    )


def pod_requests(pod_spec: Mapping[str, Any]) -> dict[str, float]:
    """The pod's effective requests: the sum over containers (limits stand in for missing
    requests), at least each init container's."""
    total: dict[str, float] = {}
    for container in pod_spec.get("containers") or []:
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in merged.items():
            total[name] = total.get(name, 0.0) + _quantity(value)
    for container in pod_spec.get("initContainers") or []:
        resources = container.get("resources") or {}
        merged = {**(resources.get("limits") or {}), **(resources.get("requests") or {})}
        for name, value in merged.items():
            total[name] = max(total.get(name, 0.0), _quantity(value))
    return total


def fits(requests: Mapping[str, float], allocatable: Mapping[str, str]) -> bool:
    return all(
        amount <= _quantity(allocatable.get(name, "0")) + 1e-9
        for name, amount in requests.items()
        if amount
    )


# --- the node objects ----------------------------------------------------------------------------


@dataclass
class Fleet:
    """The nodes made so far, and how (the record of acts)."""

    client: Client
    shapes: Mapping[str, InstanceShape]
    region: str
    nodes: dict[str, Source] = field(default_factory=dict)
    node_types: dict[str, str] = field(default_factory=dict)
    acts: list[str] = field(default_factory=list)
    #: Pod uid -> the node launched for it and when (Karpenter's nomination).
    nominated: dict[str, tuple[str, float]] = field(default_factory=dict)
    #: Where EC2 (simulated) puts each node of a type with a network topology.
    network: NetworkLayout = field(default_factory=NetworkLayout)
    _serial: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    #: Labelled nodes made so far per (zone, layers): the next one's ordinal.
    _placed: dict[tuple[str, int], int] = field(default_factory=dict)
    #: Node name -> its bottom network node ("" for a type without a topology).
    blocks: dict[str, str] = field(default_factory=dict)
    #: Node name -> its labels as created.
    labels: dict[str, dict[str, str]] = field(default_factory=dict)

    def count(self, source: Source) -> int:
        return sum(1 for s in self.nodes.values() if s is source)

    def gpus(self, source: Source) -> int:
        return sum(
            int(_quantity(self.shapes[self.node_types[n]].allocatable.get(GPU, "0")))
            for n, s in self.nodes.items()
            if s is source
        )

    def node_labels(self, source: Source, instance_type: str, zone: str) -> dict[str, str]:
        shape = self.shapes[instance_type]
        labels = {
            "kubernetes.io/arch": "amd64",
            "kubernetes.io/os": "linux",
            "node.kubernetes.io/instance-type": instance_type,
            "topology.kubernetes.io/region": self.region,
            "topology.kubernetes.io/zone": zone,
        }
        if source.kind == "karpenter":
            labels.update(shape.labels)
        labels.update(source.labels)
        labels.update(source.system_labels)
        return labels

    def create(self, source: Source, instance_type: str, zone: str, why: str) -> str:
        name = f"{source.name}-{next(self._serial)}"
        labels = self.node_labels(source, instance_type, zone)
        labels["kubernetes.io/hostname"] = name
        layers = (
            catalog.network_layers(instance_type) if instance_type in catalog.INSTANCE_TYPES else 0
        )
        if layers:
            # What EKS's cloud-controller-manager adds at initialization (module docstring).
            ordinal = self._placed.get((zone, layers), 0)
            self._placed[(zone, layers)] = ordinal + 1
            labels.update(self.network.labels(self.region, zone, layers, ordinal))
        allocatable = dict(self.shapes[instance_type].allocatable)
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": name, "labels": labels},
            "spec": {"taints": [dict(t) for t in source.taints]} if source.taints else {},
        }
        self.client.create(node)
        status = {
            "status": {
                "capacity": allocatable,
                "allocatable": allocatable,
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "stand-in node (no kubelet)",
                    }
                ],
                "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"},
            }
        }
        self.client.merge_patch("v1", "Node", name, status, subresource="status")
        # The API server's TaintNodesByCondition admission gives a new node the not-ready
        # taint; the node-lifecycle controller (off: no kubelet heartbeats) would lift it once
        # the node is Ready. Its own taints only, as a registered node has.
        self.client.merge_patch("v1", "Node", name, {"spec": {"taints": list(source.taints)}})
        self.nodes[name] = source
        self.node_types[name] = instance_type
        bottom = labels.get(catalog.network_node_label(layers), "") if layers else ""
        self.blocks[name] = bottom
        self.labels[name] = dict(labels)
        where = f", block {bottom}" if bottom else ""
        self.acts.append(f"{why}: node {name} ({instance_type}, {zone}{where})")
        return name

    def start_static(self, all_sources: Sequence[Source]) -> None:
        """The managed groups' desired nodes, there before anything is deployed."""
        for source in all_sources:
            if source.kind != "managed":
                continue
            for index in range(source.desired):
                zone = source.zones[index % len(source.zones)]
                self.create(source, source.instance_types[0], zone, f"EKS node group {source.name}")

    # --- Karpenter and the cluster-autoscaler for a pending pod --------------------------------

    def launch_for(self, pod: Mapping[str, Any], all_sources: Sequence[Source]) -> str | None:
        """Play Karpenter (then the autoscaler for plain pending pods) for one unschedulable
        pod; the node's name, or None when no source can take it."""
        spec = pod["spec"]
        uid = str(pod["metadata"].get("uid", ""))
        if uid in self.nominated and self.nominated[uid][0] in self.nodes:
            # Karpenter nominated the pod to the node it launched and launches nothing more for
            # it while that node stands (the scheduler binds it when it next tries).
            return None
        made = self._launch(pod, spec, all_sources)
        if made is not None:
            self.nominated[uid] = (made, time.monotonic())
        return made

    def _launch(
        self, pod: Mapping[str, Any], spec: Mapping[str, Any], all_sources: Sequence[Source]
    ) -> str | None:
        requests = pod_requests(spec)
        ref = f"{pod['metadata']['namespace']}/{pod['metadata']['name']}"
        pools = sorted(
            (s for s in all_sources if s.kind == "karpenter"),
            key=lambda s: (-s.weight, s.name),
        )
        for source in pools:
            chosen = self._karpenter_choice(source, spec, requests)
            if chosen is not None:
                return self.create(source, *chosen, f"Karpenter (pool {source.name}) for {ref}")
        for source in all_sources:
            if source.autoscaled and self.count(source) < source.max_size:
                zone = self._zone_for(source, spec, source.instance_types[0])
                if zone is not None and fits(
                    requests, self.shapes[source.instance_types[0]].allocatable
                ):
                    return self.create(
                        source,
                        source.instance_types[0],
                        zone,
                        f"cluster-autoscaler (group {source.name}, pending pod) for {ref}",
                    )
        return None

    def _karpenter_choice(
        self, source: Source, spec: Mapping[str, Any], requests: Mapping[str, float]
    ) -> tuple[str, str] | None:
        if not tolerated(spec, source.taints):
            return None
        for instance_type in sorted(
            source.instance_types,
            key=lambda t: (
                _quantity(self.shapes[t].allocatable.get(GPU, "0")),
                _quantity(self.shapes[t].allocatable.get("cpu", "0")),
            ),
        ):
            shape = self.shapes[instance_type]
            if not fits(requests, shape.allocatable):
                continue
            gpus = int(_quantity(shape.allocatable.get(GPU, "0")))
            if source.gpu_limit is not None and self.gpus(source) + gpus > source.gpu_limit:
                continue
            if not self._requirements_allow(source, instance_type):
                continue
            zone = self._zone_for(source, spec, instance_type)
            if zone is not None:
                return instance_type, zone
        return None

    def _requirements_allow(self, source: Source, instance_type: str) -> bool:
        labels = self.shapes[instance_type].labels
        for key, (op, values) in source.requirements.items():
            if key in labels and not _expression_holds(
                {"key": key, "operator": op, "values": list(values)}, labels
            ):
                return False
        return True

    def _zone_for(self, source: Source, spec: Mapping[str, Any], instance_type: str) -> str | None:
        for zone in source.zones:
            if selects(
                spec,
                self.node_labels(source, instance_type, zone) | {"kubernetes.io/hostname": "new"},
            ):
                return zone
        return None

    def grow_group(self, source: Source, count: int, why: str) -> list[str]:
        """The autoscaler adds `count` nodes to a managed group (up to its max)."""
        made = []
        for _ in range(count):
            if self.count(source) >= source.max_size:
                break
            zone = source.zones[self.count(source) % len(source.zones)]
            made.append(self.create(source, source.instance_types[0], zone, why))
        return made


def provision_claims(client: Client, claims: Sequence[Mapping[str, Any]], acts: list[str]) -> None:
    """Play the CSI driver: a PersistentVolume for each pending claim of a CSI StorageClass."""
    for claim in claims:
        meta, spec = claim["metadata"], claim["spec"]
        if (claim.get("status") or {}).get("phase") == "Bound" or spec.get("volumeName"):
            continue
        name = f"pv-{meta['namespace']}-{meta['name']}"[:63]
        storage_class = spec.get("storageClassName", "")
        try:
            sc = client.get("storage.k8s.io/v1", "StorageClass", storage_class)
        except ApiError:
            continue
        volume = {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {
                "name": name,
                "annotations": {"pv.kubernetes.io/provisioned-by": sc["provisioner"]},
            },
            "spec": {
                "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                "accessModes": spec.get("accessModes", ["ReadWriteOnce"]),
                "persistentVolumeReclaimPolicy": "Delete",
                "storageClassName": storage_class,
                "claimRef": {"namespace": meta["namespace"], "name": meta["name"]},
                "csi": {"driver": sc["provisioner"], "volumeHandle": name},
            },
        }
        try:
            client.create(volume)
        except ApiError as error:
            if error.status != 409:
                raise
            continue
        acts.append(
            f"CSI {sc['provisioner']}: volume {name} for {meta['namespace']}/{meta['name']}"
        )
