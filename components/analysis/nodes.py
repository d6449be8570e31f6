"""Node sources: every place a GPU node can come from (a managed node group or a Karpenter
NodePool), with what a pod is matched against — labels, taints, zones, allocatable per instance
type (incl. `nvidia.com/gpu` and `vpc.amazonaws.com/efa`) — and what brings its nodes up to
which limit. The "will it run" analysis (willrun.py) places workloads on these.

Facts behind the figures:
- Managed node groups do not scale themselves; this platform runs no cluster autoscaler and
  Karpenter never scales managed groups (it launches through CreateFleet only; runs.md Q10,
  aws/karpenter-provider-aws@v1.14.1 website/content/en/docs/faq.md#L49). A managed group
  therefore holds exactly `desiredSize` nodes (cluster.py ignores later scaling changes): a GPU
  group with desiredSize 0 provides nothing.
- Karpenter launches a NodePool's nodes on demand up to `spec.limits` (`nvidia.com/gpu`), so a
  pool provides `limits.gpus // GPUs per node` nodes.
- EFA: Karpenter attaches EFA interfaces when pending pods request `vpc.amazonaws.com/efa`
  (aws/karpenter-provider-aws@v1.14.1 pkg/providers/instance/instance.go#L699-721) and reports
  the type's maximum EFA interfaces as capacity (pkg/providers/instancetype/types.go#L472-480).
  Managed groups get EFA interfaces from their launch template: components/platform/cluster.py
  lays out one interface per EFA card of the group's type (catalog `efa_devices`, the
  pulumi-eks `enableEfaSupport` layout), and the EFA device plugin runs on every EFA type, so
  a managed group of an EFA type offers its EFA devices like a Karpenter pool does.
- Allocatable: instance CPU and memory minus the platform's node headroom
  (analysis/resources.py), the same figures job requests are derived from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from components import catalog
from components.analysis import efa_placement
from components.analysis.resources import default_cpu, default_memory_gib
from components.config import StackConfig

SourceKind = Literal["managed", "karpenter"]


@dataclass(frozen=True)
class Allocatable:
    """What one node of an instance type offers pods."""

    cpu: float
    memory_gib: int
    gpus: int
    efa: int


@dataclass(frozen=True)
class NodeSource:
    """A managed node group or a Karpenter NodePool, as the scheduler and Karpenter see it."""

    name: str
    kind: SourceKind
    #: Config key path of the source (`nodeGroups.gpu[0]`, `karpenter.pools[2]`).
    key: str
    gpu_class: str
    capacity_type: catalog.CapacityType
    instance_types: tuple[str, ...]
    labels: dict[str, str]
    taints: tuple[dict[str, str], ...]
    #: Number of private subnets (availability zones) the source's nodes may land in.
    zones: int
    allocatable: dict[str, Allocatable]
    #: "karpenter" (launches on demand up to the limit) or "static" (a fixed size).
    scaler: Literal["karpenter", "static"]
    #: Most nodes the source can hold: Karpenter limit / GPUs per node, or the static size.
    max_nodes: int
    #: Karpenter's `limits.gpus`, or the managed group's desiredSize (for the report).
    limit_text: str
    #: The EC2 cluster placement group its nodes launch into ("" for none; efa_placement.py).
    placement_group: str = ""

    @property
    def gpus_per_node(self) -> int:
        return catalog.instance(self.instance_types[0]).gpus


def allocatable(name: str, *, efa: bool) -> Allocatable:
    row = catalog.instance(name)
    return Allocatable(
        cpu=default_cpu(row.vcpu),
        memory_gib=default_memory_gib(row.memory_gib),
        gpus=row.gpus,
        efa=row.efa_devices if efa else 0,
    )


def node_sources(cfg: StackConfig) -> list[NodeSource]:
    """Every GPU node source of the stack: managed groups first, then Karpenter pools."""
    zones = cfg.network.zone_count
    pg_name = efa_placement.group_name(cfg)
    sources: list[NodeSource] = []
    for index, group in enumerate(cfg.node_groups.gpu):
        labels = catalog.gpu_node_labels(
            gpu_class=group.gpu_class,
            gpu_model=group.gpu_model,
            capacity_type=group.capacity_type,
            workload_type=group.workload_type,
        )
        grouped = efa_placement.node_group_in_group(cfg, group)
        sources.append(
            NodeSource(
                name=group.name,
                kind="managed",
                key=f"nodeGroups.gpu[{index}]",
                gpu_class=group.gpu_class,
                capacity_type=group.capacity_type,
                instance_types=tuple(group.instance_types),
                labels={**labels, catalog.LABEL_NODE_POOL: group.name},
                taints=(catalog.gpu_taint(),),
                # A placement group's capacity gets one private subnet (one AZ).
                zones=1 if grouped else zones,
                allocatable={t: allocatable(t, efa=True) for t in group.instance_types},
                scaler="static",
                max_nodes=group.desired_size,
                limit_text=f"desiredSize {group.desired_size}, no autoscaler",
                placement_group=pg_name if grouped else "",
            )
        )
    for index, pool in enumerate(cfg.karpenter.pools):
        if not pool.is_gpu:
            continue
        labels = catalog.gpu_node_labels(
            gpu_class=pool.resolved_gpu_class,
            gpu_model=pool.gpu_model,
            capacity_type=pool.capacity_type,
            workload_type=pool.workload_type,
        )
        types = pool.resolved_instance_types
        grouped = efa_placement.pool_in_group(cfg, pool)
        sources.append(
            NodeSource(
                name=pool.name,
                kind="karpenter",
                key=f"karpenter.pools[{index}]",
                gpu_class=pool.resolved_gpu_class,
                capacity_type=pool.capacity_type,
                instance_types=tuple(types),
                labels={**labels, catalog.LABEL_NODE_POOL: pool.name},
                taints=(catalog.gpu_taint(),),
                zones=1 if grouped else zones,
                allocatable={t: allocatable(t, efa=True) for t in types},
                scaler="karpenter",
                max_nodes=(pool.limits.gpus or 0) // max(1, pool.gpus_per_node),
                limit_text=f"limits.gpus {pool.limits.gpus}",
                placement_group=pg_name if grouped else "",
            )
        )
    return sources


def tolerates(taint: dict[str, str], tolerations: tuple[dict[str, str], ...]) -> bool:
    """Kubernetes toleration matching (key, operator Exists/Equal, effect; empty matches all)."""
    for toleration in tolerations:
        if toleration.get("key") not in (None, "", taint["key"]):
            continue
        if toleration.get("effect") not in (None, "", taint["effect"]):
            continue
        if toleration.get("operator", "Equal") == "Exists" or toleration.get("value") == taint.get(
            "value"
        ):
            return True
    return False
