"""Node-group slice: the system group and the GPU managed node groups."""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints, model_validator

from components import catalog
from components.config.base import (
    Model,
    Name,
    Problem,
    UnqueuedReason,
    problems_error,
)


def _check_sizes(min_size: int, desired: int, max_size: int) -> list[Problem]:
    problems: list[Problem] = []
    if min_size > max_size:
        problems.append(Problem("minSize", min_size, f"must be <= maxSize ({max_size})"))
    if not min_size <= desired <= max_size:
        problems.append(
            Problem("desiredSize", desired, f"must be between minSize ({min_size}) and maxSize")
        )
    return problems


class SystemNodeGroup(Model):
    """On-demand CPU nodes for controllers (Karpenter, operators, monitoring)."""

    instance_types: Annotated[list[str], Field(min_length=1)] = ["m6i.xlarge"]
    min_size: Annotated[int, Field(ge=1)] = 2
    desired_size: Annotated[int, Field(ge=1)] = 2
    max_size: Annotated[int, Field(ge=1, le=50)] = 4
    disk_size_gib: Annotated[int, Field(ge=20, le=1000)] = 50
    #: EKS node auto repair (`nodeRepairConfig`): replace a node the node monitoring agent
    #: reports unhealthy for 30 min (docs/runbooks.md#node-repair).
    auto_repair: bool = True

    @model_validator(mode="after")
    def _check(self) -> SystemNodeGroup:
        problems = _check_sizes(self.min_size, self.desired_size, self.max_size)
        for index, name in enumerate(self.instance_types):
            if name not in catalog.CPU_INSTANCE_TYPES:
                problems.append(
                    Problem(
                        f"instanceTypes[{index}]",
                        name,
                        f"one of {', '.join(sorted(catalog.CPU_INSTANCE_TYPES))}",
                    )
                )
        if problems:
            raise problems_error(problems)
        return self


#: AMI types of GPU managed node groups (EKS `amiType`): the NVIDIA driver and container toolkit
#: come with the AMI, so the GPU Operator leaves them alone (components/platform/capacity/gpu.py).
GPU_AMI_TYPES: Final = {
    "al2023-nvidia": "AL2023_x86_64_NVIDIA",
    "bottlerocket-nvidia": "BOTTLEROCKET_x86_64_NVIDIA",
}
ReservationId = Annotated[str, StringConstraints(pattern=r"^cr-[0-9a-f]{8,17}$")]
#: Label keys a group may not set itself: the platform's own (catalog.gpu_node_labels) and the
#: kubelet-reserved domains EKS refuses.
RESERVED_LABEL_DOMAINS: Final = (
    "gpu-platform.io/",
    "kubernetes.io/",
    "k8s.io/",
    "eks.amazonaws.com/",
)


class NodeTaint(Model):
    """An extra taint of a group's nodes (Kubernetes spelling)."""

    key: Annotated[str, StringConstraints(pattern=r"^([a-z0-9.-]+/)?[A-Za-z0-9._-]{1,63}$")]
    #: Required on a group the cluster-autoscaler resizes: it drops value-less taints when it
    #: scales a group from zero (GpuNodeGroup._check).
    value: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{0,63}$")] = ""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] = "NoSchedule"


class GpuNodeGroup(Model):
    """A managed GPU node group of one GPU class on one capacity type. It holds `desiredSize`
    nodes; with `minSize < maxSize` the cluster-autoscaler (`clusterAutoscaler`) resizes it
    between the two for pending pods (docs/node-groups.md). Karpenter never touches it."""

    name: Name
    instance_types: Annotated[list[str], Field(min_length=1)]
    #: `capacity-block`: an EC2 Capacity Block for ML (`capacityReservationId` required); its
    #: nodes are the `reserved` capacity type of queues and labels, like Karpenter's.
    capacity_type: Literal["on-demand", "spot", "capacity-block"]
    min_size: Annotated[int, Field(ge=0)] = 0
    desired_size: Annotated[int, Field(ge=0)] = 0
    max_size: Annotated[int, Field(ge=1, le=100)]
    ami_type: Literal["al2023-nvidia", "bottlerocket-nvidia"] = "al2023-nvidia"
    #: EKS AMI release (`releaseVersion`, e.g. `1.33.5-20251023`); unset = the newest at creation,
    #: kept until changed (EKS never updates a group's AMI by itself).
    release_version: (
        Annotated[str, StringConstraints(pattern=r"^[0-9][0-9A-Za-z._-]{2,63}$")] | None
    ) = None
    #: Extra node labels (the platform's GPU labels are always set).
    labels: dict[
        Annotated[str, StringConstraints(pattern=r"^([a-z0-9.-]+/)?[A-Za-z0-9._-]{1,63}$")],
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._-]{0,63}$")],
    ] = {}
    #: Extra taints; the GPU taint (and on spot groups the spot taint) are always set.
    taints: list[NodeTaint] = []
    #: Bind the group to an On-Demand Capacity Reservation (on-demand groups) or a Capacity Block
    #: (capacity-block groups) through its launch template.
    capacity_reservation_id: ReservationId | None = None
    #: Private-subnet index (AZ) of the reservation: a reservation lives in one AZ.
    reservation_zone_index: Annotated[int, Field(ge=0, le=5)] = 0
    #: Confine a group without a reservation to one private subnet (AZ index). Unset, the
    #: group spans every private subnet (an EFA group in the placement group: its zone). A
    #: group the cluster-autoscaler resizes must be confined for multi-node jobs that keep
    #: their pods in one zone: the autoscaler simulates new nodes in the Auto Scaling group's
    #: first zone while the group spreads launches over all of them (docs/node-groups.md).
    zone_index: Annotated[int, Field(ge=0, le=5)] | None = None
    #: Rolling updates (AMI, launch template): nodes replaced at a time (EKS `updateConfig`).
    max_unavailable: Annotated[int, Field(ge=1, le=100)] = 1
    #: Training images are 10-20 GB compressed; unpacked layers plus the image cache need room.
    disk_size_gib: Annotated[int, Field(ge=100, le=16000)] = 300
    disk_throughput_mibps: Annotated[int, Field(ge=125, le=1000)] = 500
    disk_iops: Annotated[int, Field(ge=3000, le=16000)] = 6000
    workload_type: Literal["training", "general"] = "training"
    #: EKS node auto repair (`nodeRepairConfig`): a GPU the node monitoring agent reports
    #: broken (AcceleratedHardwareReady False: XID, ECC, NVLink) is rebooted or replaced after
    #: 10 min. The job on it has already failed on that GPU; repair gives its restart a healthy
    #: node instead of the broken one (docs/runbooks.md#node-repair).
    auto_repair: bool = True
    #: Why the group exists when no team's quota lists its GPU class and capacity type (so no
    #: Kueue ClusterQueue offers its flavor); the report prints it. Unset, such a group is a
    #: config error (analysis/quota.py check_reachable_sources).
    unqueued_reason: UnqueuedReason | None = None

    @property
    def gpu_model(self) -> str:
        return catalog.instance(self.instance_types[0]).gpu_model or ""

    @property
    def gpus_per_node(self) -> int:
        return catalog.instance(self.instance_types[0]).gpus

    @property
    def gpu_class(self) -> str:
        """GPU model and count, e.g. `a10g-x1`: the unit queues and jobs are placed by."""
        return f"{self.gpu_model}-x{self.gpus_per_node}"

    @property
    def flavor_capacity_type(self) -> catalog.CapacityType:
        """The capacity type of labels and queues: a Capacity Block is `reserved`."""
        return "reserved" if self.capacity_type == "capacity-block" else self.capacity_type

    @property
    def efa_devices(self) -> int:
        """EFA devices per node (catalog): the launch template gets one interface per card."""
        return catalog.instance(self.instance_types[0]).efa_devices

    @property
    def resizable(self) -> bool:
        """Whether the group may change size (needs the cluster-autoscaler)."""
        return self.min_size != self.max_size

    @model_validator(mode="after")
    def _check(self) -> GpuNodeGroup:
        problems = _check_sizes(self.min_size, self.desired_size, self.max_size)
        problems += self._instance_type_problems()
        problems += self._reservation_problems()
        problems += self._label_problems()
        problems += self._taint_problems()
        if problems:
            raise problems_error(problems)
        return self

    def _instance_type_problems(self) -> list[Problem]:
        """Known GPU types, each once, of one shape, and enough of them for a spot group."""
        problems: list[Problem] = []
        unknown = False
        for index, name in enumerate(self.instance_types):
            if name not in catalog.GPU_INSTANCE_TYPES:
                unknown = True
                problems.append(
                    Problem(
                        f"instanceTypes[{index}]",
                        name,
                        "a GPU instance type from components/catalog.py "
                        f"({', '.join(sorted(catalog.GPU_INSTANCE_TYPES))})",
                    )
                )
        if len(set(self.instance_types)) != len(self.instance_types):
            problems.append(Problem("instanceTypes", self.instance_types, "must not repeat a type"))
        if not unknown:
            problems += _type_problems(self.instance_types)
        if self.capacity_type == "spot" and len(self.instance_types) < 3:
            problems.append(
                Problem(
                    "instanceTypes",
                    self.instance_types,
                    "spot groups need at least 3 instance types (spot pools run dry)",
                )
            )
        return problems

    def _label_problems(self) -> list[Problem]:
        """Labels stay out of the domains the platform and Kubernetes set themselves."""
        problems: list[Problem] = []
        for key in self.labels:
            if key.startswith(RESERVED_LABEL_DOMAINS):
                problems.append(
                    Problem(
                        f"labels.{key}",
                        self.labels[key],
                        "a key outside the platform's and "
                        f"Kubernetes' domains ({', '.join(RESERVED_LABEL_DOMAINS)})",
                    )
                )
        return problems

    def _taint_problems(self) -> list[Problem]:
        """Taints neither repeat the platform's own keys nor hide from the cluster-autoscaler."""
        problems: list[Problem] = []
        for index, taint in enumerate(self.taints):
            if taint.key in (catalog.GPU_TAINT_KEY, catalog.SPOT_TAINT_KEY):
                problems.append(
                    Problem(
                        f"taints[{index}].key", taint.key, "a key the platform does not set itself"
                    )
                )
            elif self.resizable and not taint.value:
                # The cluster-autoscaler builds an empty group's node from eks:DescribeNodegroup
                # and drops every taint without a value (kubernetes/autoscaler@
                # cluster-autoscaler-1.33.6 cloudprovider/aws/aws_wrapper.go
                # getManagedNodegroupInfo: `taint.Value != nil`): it would scale the group up
                # for pods that do not tolerate the taint, and the nodes would sit unused.
                problems.append(
                    Problem(
                        f"taints[{index}].value",
                        taint.value,
                        "a non-empty value on a group the cluster-autoscaler resizes (it ignores "
                        "value-less taints when it scales a group from zero)",
                    )
                )
        return problems

    def _reservation_problems(self) -> list[Problem]:
        problems: list[Problem] = []
        if self.capacity_type == "capacity-block":
            if self.capacity_reservation_id is None:
                problems.append(
                    Problem("capacityReservationId", None, "the Capacity Block's id (cr-...)")
                )
            # EKS: a Capacity Block group is created at desired size 0 and scaled from there
            # (awsdocs amazon-eks-user-guide nodes/capacity-blocks-mng.adoc).
            if self.desired_size != 0 or self.min_size != 0:
                problems.append(
                    Problem(
                        "desiredSize",
                        self.desired_size,
                        "0 with minSize 0: EKS creates Capacity Block groups empty and "
                        "scales them in only while the block is active",
                    )
                )
        elif self.capacity_reservation_id is not None and self.capacity_type != "on-demand":
            problems.append(
                Problem(
                    "capacityReservationId",
                    self.capacity_reservation_id,
                    "only on on-demand (ODCR) or capacity-block groups",
                )
            )
        if self.capacity_reservation_id is not None and self.zone_index is not None:
            problems.append(
                Problem(
                    "zoneIndex",
                    self.zone_index,
                    "unset on a group bound to a reservation (reservationZoneIndex names the "
                    "reservation's zone, where the group launches)",
                )
            )
        if self.capacity_reservation_id is not None and len(self.instance_types) != 1:
            # A Capacity Block group's launch template must carry its type (`InstanceType`),
            # and EKS then takes no instanceTypes: one type (node_group_builders.py).
            problems.append(
                Problem(
                    "instanceTypes",
                    self.instance_types,
                    "exactly one type: a capacity reservation holds one instance type"
                    + (
                        " (and a Capacity Block group's launch template carries it as its "
                        "InstanceType, which EKS requires)"
                        if self.capacity_type == "capacity-block"
                        else ""
                    ),
                )
            )
        return problems


def _type_problems(names: list[str]) -> list[Problem]:
    """What the types of one group must share."""
    problems: list[Problem] = []
    rows = [catalog.instance(n) for n in names]
    if len({(r.gpu_model, r.gpus) for r in rows}) > 1:
        problems.append(
            Problem(
                "instanceTypes",
                names,
                "all types of a group must have the same GPU model and GPU count "
                "(the group's gpu-class label, torchrun's --nproc-per-node and queue flavors "
                "depend on it)",
            )
        )
    efa = sorted({r.efa_devices for r in rows})
    if len(efa) > 1:
        problems.append(
            Problem(
                "instanceTypes",
                names,
                "one EFA device count per group (the launch template lays out one "
                f"network interface per EFA card; these have {efa})",
            )
        )
    # The autoscaler builds a group's node template from the FIRST type of its mixed-instances
    # policy (kubernetes/autoscaler@cluster-autoscaler-1.33.6 cloudprovider/aws/README.md, "If
    # any such overrides are found, only the first instance type found will be used"). First =
    # smallest keeps its estimate conservative: a pod that fits the template fits every type.
    first = rows[0]
    smaller = [r.name for r in rows[1:] if (r.vcpu, r.memory_gib) < (first.vcpu, first.memory_gib)]
    if smaller:
        problems.append(
            Problem(
                "instanceTypes[0]",
                first.name,
                f"the smallest type first ({', '.join(smaller)} is smaller): the "
                "cluster-autoscaler sizes every node of the group like the first type",
            )
        )
    return problems


class NodeGroupsConfig(Model):
    """The system group and the managed GPU groups."""

    system: SystemNodeGroup = Field(default_factory=SystemNodeGroup)
    #: Managed GPU groups (scaled by the cluster-autoscaler); empty = every GPU node comes from a
    #: Karpenter NodePool.
    gpu: list[GpuNodeGroup] = []

    @model_validator(mode="after")
    def _check(self) -> NodeGroupsConfig:
        problems: list[Problem] = []
        seen: dict[str, int] = {}
        for index, group in enumerate(self.gpu):
            if group.name in seen:
                problems.append(
                    Problem(
                        f"gpu[{index}].name",
                        group.name,
                        f"a unique name (gpu[{seen[group.name]}] already uses it)",
                    )
                )
            seen.setdefault(group.name, index)
        if problems:
            raise problems_error(problems)
        return self
