"""Node-group slice: the system group and the GPU managed node groups."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from components import catalog
from components.config.base import (
    Model,
    Name,
    Problem,
    problems_error,
)


def _check_sizes(min_size: int, desired: int, max_size: int) -> list[Problem]:
    problems: list[Problem] = []
    if min_size > max_size:
        problems.append(("minSize", min_size, f"must be <= maxSize ({max_size})"))
    if not min_size <= desired <= max_size:
        problems.append(
            ("desiredSize", desired, f"must be between minSize ({min_size}) and maxSize")
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
                    (
                        f"instanceTypes[{index}]",
                        name,
                        f"one of {', '.join(sorted(catalog.CPU_INSTANCE_TYPES))}",
                    )
                )
        if problems:
            raise problems_error(problems)
        return self


#: Why a GPU managed node group must hold nodes: nothing scales it. Karpenter launches its own
#: instances through CreateFleet and never changes an Auto Scaling group or a managed node
#: group's desiredSize (aws/karpenter-provider-aws@v1.14.1:website/content/en/docs/faq.md#L49:
#: "NodePools are designed to work alongside static capacity management solutions like EKS
#: Managed Node Groups"; the migration guide scales node groups by hand), and this platform runs
#: no cluster-autoscaler. A group at desiredSize 0 therefore never has a node, and a Kueue flavor
#: counting it would admit jobs that never start (docs/karpenter.md#capacity-model).
STATIC_ONLY = "static capacity only: set minSize >= 1 or move it to karpenter.pools"


class GpuNodeGroup(Model):
    """A managed GPU node group: static capacity (always-on nodes) of one GPU model and GPU count
    on one capacity type. Dynamic GPU capacity is Karpenter's (`karpenter.pools`)."""

    name: Name
    instance_types: Annotated[list[str], Field(min_length=1)]
    capacity_type: Literal["on-demand", "spot"]
    min_size: Annotated[int, Field(ge=0)] = 1
    desired_size: Annotated[int, Field(ge=0)] = 1
    max_size: Annotated[int, Field(ge=1, le=100)]
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
    def efa_devices(self) -> int:
        """EFA devices per node (catalog): the launch template gets one interface per card."""
        return catalog.instance(self.instance_types[0]).efa_devices

    @model_validator(mode="after")
    def _check(self) -> GpuNodeGroup:
        problems = _check_sizes(self.min_size, self.desired_size, self.max_size)
        if self.min_size < 1:
            problems.append(("minSize", self.min_size, STATIC_ONLY))
        if self.desired_size < 1:
            problems.append(("desiredSize", self.desired_size, STATIC_ONLY))
        unknown = False
        for index, name in enumerate(self.instance_types):
            if name not in catalog.GPU_INSTANCE_TYPES:
                unknown = True
                problems.append(
                    (
                        f"instanceTypes[{index}]",
                        name,
                        "a GPU instance type from components/catalog.py "
                        f"({', '.join(sorted(catalog.GPU_INSTANCE_TYPES))})",
                    )
                )
        if len(set(self.instance_types)) != len(self.instance_types):
            problems.append(("instanceTypes", self.instance_types, "must not repeat a type"))
        if not unknown:
            shapes = {
                (catalog.instance(n).gpu_model, catalog.instance(n).gpus)
                for n in self.instance_types
            }
            efa = {catalog.instance(n).efa_devices for n in self.instance_types}
            if len(efa) > 1:
                problems.append(
                    (
                        "instanceTypes",
                        self.instance_types,
                        "one EFA device count per group (the launch template lays out one "
                        f"network interface per EFA card; these have {sorted(efa)})",
                    )
                )
            if len(shapes) > 1:
                problems.append(
                    (
                        "instanceTypes",
                        self.instance_types,
                        "all types of a group must have the same GPU model and GPU count "
                        "(torchrun's --nproc-per-node and queue flavors depend on it)",
                    )
                )
        if self.capacity_type == "spot" and len(self.instance_types) < 3:
            problems.append(
                (
                    "instanceTypes",
                    self.instance_types,
                    "spot groups need at least 3 instance types (spot pools run dry)",
                )
            )
        if problems:
            raise problems_error(problems)
        return self


class NodeGroupsConfig(Model):
    """The system group and the (optional, static) managed GPU groups."""

    system: SystemNodeGroup = Field(default_factory=SystemNodeGroup)
    #: Static GPU capacity only; empty = every GPU node comes from a Karpenter NodePool.
    gpu: list[GpuNodeGroup] = []

    @model_validator(mode="after")
    def _check(self) -> NodeGroupsConfig:
        problems: list[Problem] = []
        seen: dict[str, int] = {}
        for index, group in enumerate(self.gpu):
            if group.name in seen:
                problems.append(
                    (
                        f"gpu[{index}].name",
                        group.name,
                        f"a unique name (gpu[{seen[group.name]}] already uses it)",
                    )
                )
            seen.setdefault(group.name, index)
        if problems:
            raise problems_error(problems)
        return self
