"""Node sources: every place a GPU node can come from (a managed node group or a Karpenter
NodePool), with what a pod is matched against — labels, taints, zones, allocatable per instance
type (incl. `nvidia.com/gpu` and `vpc.amazonaws.com/efa`) — and what brings its nodes up to
which limit. The "will it run" analysis (willrun.py) places workloads on these.

Facts behind the figures:
- Managed node groups do not scale themselves, and Karpenter never scales them (it launches
  through CreateFleet only; aws/karpenter-provider-aws@v1.14.1 website/content/en/docs/faq.md#L49).
  The cluster-autoscaler does, between the group's min and max, when `clusterAutoscaler` is
  enabled: then a group reaches `maxSize` nodes; without it a group holds exactly `desiredSize`
  (StackConfig refuses a resizable group with no autoscaler).
- The autoscaler sizes a group's would-be node from the FIRST instance type of the group
  (kubernetes/autoscaler@cluster-autoscaler-1.33.6 cloudprovider/aws/README.md: "only the first
  instance type found will be used"; aws_manager.go getAsgTemplate), and from the group's EKS
  labels, taints and `k8s.io/cluster-autoscaler/node-template/resources/*` tags read through
  eks:DescribeNodegroup (aws_manager.go#L302-331): a pod that does not fit the first type never
  triggers a scale-up, so an autoscaled group offers pods the first type's allocatable only.
- Karpenter launches a NodePool's nodes on demand up to `spec.limits` (`nvidia.com/gpu`), so a
  pool provides `limits.gpus // GPUs per node` nodes.
- EFA: Karpenter attaches EFA interfaces when pending pods request `vpc.amazonaws.com/efa`
  (aws/karpenter-provider-aws@v1.14.1 pkg/providers/instance/instance.go#L699-721) and reports
  the type's maximum EFA interfaces as capacity (pkg/providers/instancetype/types.go#L472-480).
  Managed groups get EFA interfaces from their launch template:
  components/platform/cluster/cluster.py
  lays out one interface per EFA card of the group's type (catalog `efa_devices`, the
  pulumi-eks `enableEfaSupport` layout), and the EFA device plugin runs on every EFA type, so
  a managed group of an EFA type offers its EFA devices like a Karpenter pool does.
- Allocatable: instance CPU and memory minus the platform's node headroom
  (analysis/resources.py), the same figures job requests are derived from.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Final, Literal

from components import catalog
from components.analysis import efa_placement
from components.analysis.efa_placement import Membership
from components.analysis.resources import default_cpu, default_memory_gib
from components.config import GpuNodeGroup, KarpenterPool, StackConfig

SourceKind = Literal["managed", "karpenter"]
#: What brings a source's nodes: Karpenter, the cluster-autoscaler, or nothing (a fixed size).
Scaler = Literal["karpenter", "autoscaler", "static"]


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
    #: "karpenter" (launches on demand up to the limit), "autoscaler" (the cluster-autoscaler
    #: resizes the group up to maxSize) or "static" (a fixed size).
    scaler: Scaler
    #: Most nodes the source can hold: Karpenter limit / GPUs per node, the group's maxSize
    #: (autoscaled) or its desiredSize (static).
    max_nodes: int
    #: Karpenter's `limits.gpus`, or the managed group's sizes (for the report).
    limit_text: str
    #: The EC2 cluster placement group its nodes launch into ("" for none; efa_placement.py).
    placement_group: str = ""
    #: Seconds from a pending pod to a Ready GPU node (0: no node is launched for it).
    scale_up_seconds: int = 0
    #: Why the source exists when no team's quota reaches it (its config's `unqueuedReason`).
    unqueued_reason: str = ""
    #: The one private subnet (AZ index) its nodes launch into; None: every zone it spans.
    zone_index: int | None = None

    @property
    def gpus_per_node(self) -> int:
        return catalog.instance(self.instance_types[0]).gpus

    @property
    def efa_per_node(self) -> int:
        """The most EFA devices a node of the source offers pods (over its types' allocatable):
        the report's "allocatable N on `source`"."""
        return max(a.efa for a in self.allocatable.values())

    @property
    def provisioner(self) -> catalog.Provisioner:
        return "node-group" if self.kind == "managed" else "karpenter"

    @property
    def path(self) -> str:
        """What brings a node for a pending pod, in words (the report's scale-up column)."""
        if self.scaler == "karpenter":
            return f"Karpenter NodePool `{self.name}` launches nodes, ≈ {self.scale_up_seconds} s"
        if self.scaler == "autoscaler":
            return (
                f"cluster-autoscaler resizes node group `{self.name}`, ≈ {self.scale_up_seconds} s"
            )
        return f"fixed node group `{self.name}` (no scale-up)"


#: Before a launch: Karpenter batches pending pods for up to 10 s (BATCH_MAX_DURATION default,
#: aws/karpenter-provider-aws@v1.14.1 website/content/en/docs/reference/settings.md); the
#: cluster-autoscaler looks for unschedulable pods every 10 s (`--scan-interval` default,
#: kubernetes/autoscaler@cluster-autoscaler-1.33.6 config/const.go#L55). Then the node launch
#: of catalog.node_launch_seconds.
KARPENTER_BATCH_SECONDS: Final = 10
AUTOSCALER_SCAN_SECONDS: Final = 10


def managed_gpu_labels(group: GpuNodeGroup) -> dict[str, str]:
    """Node labels of a managed GPU group: the platform's GPU labels (provisioner `node-group`),
    the node-pool name, the autoscaler's GPU label, then the group's own."""
    return {
        **catalog.gpu_node_labels(
            gpu_class=group.gpu_class,
            gpu_model=group.gpu_model,
            capacity_type=group.flavor_capacity_type,
            workload_type=group.workload_type,
            provisioner="node-group",
        ),
        catalog.LABEL_NODE_POOL: group.name,
        catalog.CA_GPU_LABEL: f"nvidia-{group.gpu_model}",
        **group.labels,
    }


def managed_gpu_taints(group: GpuNodeGroup) -> tuple[dict[str, str], ...]:
    """Taints of a managed GPU group: the GPU taint, the spot taint on spot groups, its own."""
    taints = [catalog.gpu_taint()]
    if group.capacity_type == "spot":
        taints.append(catalog.spot_taint())
    taints += [{"key": t.key, "value": t.value, "effect": t.effect} for t in group.taints]
    return tuple(taints)


def allocatable(name: str, *, efa: bool) -> Allocatable:
    row = catalog.instance(name)
    return Allocatable(
        cpu=default_cpu(row.vcpu),
        memory_gib=default_memory_gib(row.memory_gib),
        gpus=row.gpus,
        efa=row.efa_devices if efa else 0,
    )


def node_sources(
    cfg: StackConfig,
    groups: Mapping[str, Membership],
    pools: Mapping[str, Membership],
    region: str | None = None,
) -> list[NodeSource]:
    """Every GPU node source of the stack: managed groups first, then Karpenter pools; where
    each one's nodes go comes from `groups` / `pools` (efa_placement.memberships). `region`,
    when known (a fleet worker judged by its manager): the well-known region label every node
    of the stack carries, so a job pinned to other regions fits none."""
    pg_name = efa_placement.group_name(cfg)
    managed = [
        _group_source(cfg, index, group, groups[group.name], pg_name)
        for index, group in enumerate(cfg.node_groups.gpu)
    ]
    karpenter = [
        _pool_source(cfg, index, pool, pools[pool.name], pg_name)
        for index, pool in enumerate(cfg.karpenter.pools)
        if pool.is_gpu
    ]
    sources = managed + karpenter
    if region is None:
        return sources
    return [
        replace(source, labels={**source.labels, catalog.REGION_LABEL: region})
        for source in sources
    ]


def _group_source(
    cfg: StackConfig, index: int, group: GpuNodeGroup, where: Membership, pg_name: str
) -> NodeSource:
    """A managed GPU group as a node source."""
    autoscaled = cfg.autoscaled(group)
    # The autoscaler simulates the first type only (module docstring); static groups'
    # nodes already exist, of any of their types: a pod must fit the smallest.
    types = group.instance_types[:1] if autoscaled else group.instance_types
    return NodeSource(
        name=group.name,
        kind="managed",
        key=f"nodeGroups.gpu[{index}]",
        gpu_class=group.gpu_class,
        capacity_type=group.flavor_capacity_type,
        instance_types=tuple(group.instance_types),
        labels=managed_gpu_labels(group),
        taints=managed_gpu_taints(group),
        # A reservation's, a placement group's or a confined group's capacity gets one
        # private subnet (efa_placement.node_group_zone_index).
        zones=1 if where.zone_index is not None else cfg.network.zone_count,
        allocatable={t: allocatable(t, efa=True) for t in types},
        scaler="autoscaler" if autoscaled else "static",
        max_nodes=cfg.group_max_nodes(group),
        limit_text=(
            f"minSize {group.min_size} / maxSize {group.max_size}, cluster-autoscaler"
            if autoscaled
            else f"desiredSize {group.desired_size}, fixed"
        ),
        placement_group=pg_name if where.placement_group else "",
        scale_up_seconds=(
            AUTOSCALER_SCAN_SECONDS + catalog.node_launch_seconds(types[0]) if autoscaled else 0
        ),
        unqueued_reason=group.unqueued_reason or "",
        zone_index=where.zone_index,
    )


def _pool_source(
    cfg: StackConfig, index: int, pool: KarpenterPool, where: Membership, pg_name: str
) -> NodeSource:
    """A Karpenter GPU pool as a node source."""
    labels = catalog.gpu_node_labels(
        gpu_class=pool.resolved_gpu_class,
        gpu_model=pool.gpu_model,
        capacity_type=pool.capacity_type,
        workload_type=pool.workload_type,
        provisioner="karpenter",
    )
    types = pool.resolved_instance_types
    return NodeSource(
        name=pool.name,
        kind="karpenter",
        key=f"karpenter.pools[{index}]",
        gpu_class=pool.resolved_gpu_class,
        capacity_type=pool.capacity_type,
        instance_types=tuple(types),
        labels={**labels, catalog.LABEL_NODE_POOL: pool.name},
        taints=(catalog.gpu_taint(),),
        zones=1 if where.placement_group else cfg.network.zone_count,
        allocatable={t: allocatable(t, efa=True) for t in types},
        scaler="karpenter",
        max_nodes=(pool.limits.gpus or 0) // max(1, pool.gpus_per_node),
        limit_text=f"limits.gpus {pool.limits.gpus}",
        placement_group=pg_name if where.placement_group else "",
        scale_up_seconds=KARPENTER_BATCH_SECONDS + catalog.node_launch_seconds(types[0]),
        unqueued_reason=pool.unqueued_reason or "",
        zone_index=cfg.network.efa_placement_group.zone_index if where.placement_group else None,
    )


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


def flavor_sources(
    sources: Sequence[NodeSource],
    gpu_class: str,
    capacity_type: catalog.CapacityType,
    provisioner: catalog.Provisioner,
) -> tuple[NodeSource, ...]:
    """The sources whose nodes a Kueue ResourceFlavor selects: those carrying its node labels
    (catalog.gpu_flavor_labels; Kueue puts them on the admitted pods as a node selector)."""
    selector = catalog.gpu_flavor_labels(
        gpu_class=gpu_class, capacity_type=capacity_type, provisioner=provisioner
    )
    return tuple(s for s in sources if all(s.labels.get(k) == v for k, v in selector.items()))


def platform_taints() -> tuple[dict[str, str], ...]:
    """The taints the platform itself puts on GPU nodes: the GPU taint (every GPU node) and the
    spot taint (spot managed groups, `managed_gpu_taints`)."""
    return (catalog.gpu_taint(), catalog.spot_taint())


def flavor_tolerations(members: Sequence[NodeSource]) -> tuple[dict[str, str], ...]:
    """A ResourceFlavor's tolerations: one per platform taint any of its nodes (`members`,
    `flavor_sources`) carries, so that whatever Kueue does with them, the pods it admits there
    tolerate what the platform put on those nodes. Kueue v0.19.2 collects them at admission
    (kubernetes-sigs/kueue@v0.19.2 pkg/podset/podset.go L78-90 FromAssignment) and adds them
    to a batch Job's pod template (pkg/controller/jobs/job/job_controller.go L391, podset.go
    L181-212, a union at L133-140) but puts them *in place of* a TrainJob's: its admission
    patch sets the pod tolerations to the flavor's (pkg/controller/jobs/trainjob/
    trainjob_controller.go L253-281), applied after the job's own patch (trainjob_webhook.go
    L91-102 appends it), and Trainer v2.3.0 strategic-merges the patches (kubeflow/
    trainer@v2.3.0 pkg/runtime/core/trainingruntime.go L258-281), where `PodSpec.tolerations`
    has no patch strategy (kubernetes/api@v0.36.2 core/v1/types.go L4293-4296) and so is
    replaced (kubernetes/apimachinery@v0.36.2 pkg/util/strategicpatch/patch.go L1477-1490).

    A group's own taints (`nodeGroups.gpu[].taints`) are left out on purpose: they keep
    training pods off the group (docs/node-groups.md), and a flavor tolerating one would hand
    that toleration to every pod Kueue admits on the flavor. Training pods tolerate none of
    them, so no pod of the flavor lands on such a group either way; will-it-run checks that a
    TrainJob's pods keep every source they would land on (components/analysis/trainer.py)."""
    carried = {(t["key"], t["effect"]) for member in members for t in member.taints}
    return tuple(
        catalog.toleration_of(taint)
        for taint in platform_taints()
        if (taint["key"], taint["effect"]) in carried
    )
