"""Network slice: a new VPC (AZs, CIDR, NAT) or an existing one."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from components.config.base import (
    Model,
    Problem,
    problems_error,
)

SubnetId = Annotated[str, StringConstraints(pattern=r"^subnet-[0-9a-f]{8,17}$")]


class ExistingVpc(Model):
    """Use a VPC and subnets that already exist instead of creating them."""

    vpc_id: Annotated[str, StringConstraints(pattern=r"^vpc-[0-9a-f]{8,17}$")]
    private_subnet_ids: Annotated[list[SubnetId], Field(min_length=2)]
    public_subnet_ids: list[SubnetId] = []


class EfaPlacementGroup(Model):
    """One EC2 cluster placement group for the stack's EFA capacity: the Karpenter `gpu-efa`
    EC2NodeClass (`placementGroupSelector`) and the launch templates of EFA managed node groups
    (`placement.groupName`) launch into it. A cluster placement group lives in one availability
    zone ("A cluster placement group can't span multiple Availability Zones",
    https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html), and Karpenter
    v1.14.1 does not confine offerings to it (it only adds the placement-group-id requirement,
    aws/karpenter-provider-aws@v1.14.1:pkg/providers/instancetype/offering/offering.go#L160-172),
    so the platform gives the EFA node class and groups the private subnet of one AZ only:
    `zoneIndex` (docs/karpenter.md#placement-groups)."""

    #: On by default (prod): EFA pools and groups launch packed on one network spine. Off, they
    #: launch anywhere in the region's AZs like every other pool (still one zone per job).
    enabled: bool = True
    #: Index of the private subnet (AZ) the EFA capacity launches in: `network.azCount` order, or
    #: `existingVpc.privateSubnetIds` order. Pick the AZ that offers the EFA types (p5 is not in
    #: every AZ) and, with FSx, the file system's subnet (`storage.rwx.fsxSubnetIndex`).
    zone_index: Annotated[int, Field(ge=0, le=5)] = 0


class NetworkConfig(Model):
    """VPC layout: subnets per AZ, NAT gateways, S3 gateway endpoint."""

    vpc_cidr: str = "10.0.0.0/16"
    #: Three AZs is the safe default (control plane and nodes survive an AZ outage).
    az_count: Annotated[int, Field(ge=2, le=6)] = 3
    #: One NAT gateway per AZ keeps egress alive when an AZ fails; `single` saves money in dev.
    nat_gateways: Literal["perAz", "single"] = "perAz"
    existing_vpc: ExistingVpc | None = None
    efa_placement_group: EfaPlacementGroup = Field(default_factory=EfaPlacementGroup)

    @property
    def zone_count(self) -> int:
        """Private subnets (availability zones) nodes may use."""
        if self.existing_vpc is not None:
            return len(self.existing_vpc.private_subnet_ids)
        return self.az_count

    @model_validator(mode="after")
    def _check(self) -> NetworkConfig:
        index = self.efa_placement_group.zone_index
        if index >= self.zone_count:
            raise problems_error(
                [
                    Problem(
                        "efaPlacementGroup.zoneIndex",
                        index,
                        f"an index of the {self.zone_count} private subnets (0-"
                        f"{self.zone_count - 1})",
                    )
                ]
            )
        return self

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            net = ipaddress.IPv4Network(value, strict=True)
        except ValueError as exc:
            raise ValueError(f"must be an IPv4 network like 10.0.0.0/16 ({exc})") from None
        if not 16 <= net.prefixlen <= 20:
            raise ValueError("prefix length must be between /16 and /20 (EKS pods need IPs)")
        if not net.is_private:
            raise ValueError("must be a private (RFC 1918) range")
        return value
