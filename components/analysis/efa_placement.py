"""Which capacity launches into the stack's EFA cluster placement group, and what that means for
zones. One home for the rule: the Cluster component (managed groups' launch templates), the
Karpenter component (the `gpu-efa` EC2NodeClass), the node sources of the "will it run" analysis
and the report all ask here.

Facts behind the rule (docs/karpenter.md#placement-groups):
- Karpenter v1.14.1 launches every instance of an EC2NodeClass into the one placement group its
  `placementGroupSelector` (`{id}` or `{name}`) resolves to; it supports cluster, partition and
  spread strategies but creates none (aws/karpenter-provider-aws@v1.14.1:
  website/content/en/docs/concepts/nodeclasses.md#L989-1020; pkg/providers/placementgroup/
  provider.go: DescribePlacementGroups filtered on state `available`). A selector that resolves
  to nothing sets the EC2NodeClass condition `PlacementGroupReady=False` (reason
  `PlacementGroupNotFound`; pkg/controllers/nodeclass/placementgroup.go#L47-72), one of the
  conditions the class's Ready is made of (pkg/apis/v1/ec2nodeclass_status.go#L169-181), so its
  NodePools launch nothing until the group exists.
- For a cluster group Karpenter only adds the requirement `karpenter.k8s.aws/placement-group-id`
  to each instance type (pkg/providers/instancetype/offering/offering.go#L160-172); only
  partition groups change offerings (placement_group_resolver.go). It does not confine launches
  to the group's zone, while a cluster placement group cannot span zones
  (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html). So the EFA
  node class selects one private subnet (`network.efaPlacementGroup.zoneIndex`), as pulumi-eks's
  `enableEfaSupport` filters a node group's subnets to the placement group's AZ
  (pulumi/pulumi-eks@v4.3.0:nodejs/eks/nodes/nodegroup.ts#L1974-2004).
- IAM: `ec2:DescribePlacementGroups` and `placement-group/*` on RunInstances/CreateFleet are in
  the upstream v1.14.1 CloudFormation policy our controller policy mirrors action for action
  (components/platform/capacity/karpenter_builders.py controller_policy; runs.md item 1).
- Reserved capacity: an ODCR reserves capacity in an AZ, not in a placement group; capacity is
  promised inside a group only when the ODCR is created in it, and an existing ODCR cannot be
  moved in (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/cr-cpg.html). So the reserved
  class joins the group only when every reservation says `inPlacementGroup: true`; otherwise its
  nodes launch into the ODCR's own AZ outside the group. Capacity Blocks never need one
  ("Capacity Blocks deliver low-latency, high-throughput network connectivity between the
  instances inside the Capacity Block, so there is no need to use a cluster placement group",
  https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from components.config import GpuNodeGroup, KarpenterPool, Problem, StackConfig

#: EC2 placement strategy: instances packed close together in one AZ for EFA/NCCL traffic.
STRATEGY: Final = "cluster"


def group_name(cfg: StackConfig) -> str:
    """The placement group's EC2 name (unique per account and region, like the cluster name)."""
    return f"{cfg.cluster.name}-efa"


def reserved_in_group(cfg: StackConfig) -> bool:
    """The reserved node class launches into the group: every reservation was created in it."""
    reservations = cfg.karpenter.reservations
    return (
        cfg.network.efa_placement_group.enabled
        and bool(reservations)
        and all(r.in_placement_group for r in reservations)
    )


def pool_in_group(cfg: StackConfig, pool: KarpenterPool) -> bool:
    """A Karpenter pool launches into the group: an EFA pool, the group on, and (for reserved
    pools) reservations created in the group."""
    if not cfg.network.efa_placement_group.enabled or not pool.is_efa:
        return False
    if pool.capacity_type == "reserved":
        return reserved_in_group(cfg)
    return True


def node_group_in_group(cfg: StackConfig, group: GpuNodeGroup) -> bool:
    """A managed GPU node group launches into the group: its types have EFA, the group is on,
    and it is not a Capacity Block group - a block's instances are already placed for
    low-latency networking and it is bought, not created in a placement group (module
    docstring; capacity-blocks-using.html), so its launch template names the block and its
    zone's subnet only."""
    return (
        cfg.network.efa_placement_group.enabled
        and group.efa_devices > 0
        and group.capacity_type != "capacity-block"
    )


def node_group_zone_index(cfg: StackConfig, group: GpuNodeGroup) -> int | None:
    """The one private subnet (AZ index) a managed GPU group launches into, None for all of
    them: a reservation's zone first (a reservation lives in one AZ), else the placement
    group's (a cluster placement group cannot span zones), else the group's `zoneIndex`. The
    Cluster component picks the group's subnets from this, and the node sources count its
    zones from it."""
    if group.capacity_reservation_id is not None:
        return group.reservation_zone_index
    if node_group_in_group(cfg, group):
        return cfg.network.efa_placement_group.zone_index
    return group.zone_index


@dataclass(frozen=True)
class Membership:
    """Where one GPU node source's nodes go: into the EFA cluster placement group or not, and
    into one private subnet or all (the rules above, applied once per source)."""

    #: Its nodes launch into the stack's EFA cluster placement group.
    placement_group: bool
    #: The private-subnet (AZ) index it is confined to; None: every private subnet.
    zone_index: int | None = None


def memberships(cfg: StackConfig) -> tuple[dict[str, Membership], dict[str, Membership]]:
    """(managed GPU group name -> its Membership, Karpenter GPU pool name -> its Membership):
    computed once (analysis/facts.py) and read by the Cluster and Karpenter components and the
    node sources alike."""
    groups = {
        group.name: Membership(
            placement_group=node_group_in_group(cfg, group),
            zone_index=node_group_zone_index(cfg, group),
        )
        for group in cfg.node_groups.gpu
    }
    pools = {
        pool.name: Membership(placement_group=pool_in_group(cfg, pool))
        for pool in cfg.karpenter.pools
        if pool.is_gpu
    }
    return groups, pools


def check_node_group_zones(cfg: StackConfig) -> list[Problem]:
    """A group's `zoneIndex` that contradicts the placement group's zone it launches in."""
    pg_zone = cfg.network.efa_placement_group.zone_index
    return [
        Problem(
            f"nodeGroups.gpu[{index}].zoneIndex",
            group.zone_index,
            f"unset or {pg_zone}: the group launches into the EFA placement group, which lives "
            f"in network.efaPlacementGroup.zoneIndex ({pg_zone})",
        )
        for index, group in enumerate(cfg.node_groups.gpu)
        if group.zone_index not in (None, pg_zone)
        and group.capacity_reservation_id is None
        and node_group_in_group(cfg, group)
    ]


def describe(cfg: StackConfig, in_group: bool, *, capacity_type: str) -> str:
    """One report phrase for a source's placement."""
    pg = cfg.network.efa_placement_group
    if in_group:
        return (
            f"cluster placement group `{group_name(cfg)}`, AZ index {pg.zone_index} only "
            "(network.efaPlacementGroup)"
        )
    if capacity_type == "reserved" and pg.enabled:
        return "no placement group (the reservations are not declared inPlacementGroup)"
    return "no placement group"


def check_placement_group(cfg: StackConfig) -> list[Problem]:
    """Reservations declared in a group the stack does not create."""
    if cfg.network.efa_placement_group.enabled:
        return []
    return [
        Problem(
            f"karpenter.reservations[{index}].inPlacementGroup",
            True,
            "false while network.efaPlacementGroup.enabled is false (there is no group to "
            "have created the reservation in)",
        )
        for index, reservation in enumerate(cfg.karpenter.reservations)
        if reservation.in_placement_group
    ]
