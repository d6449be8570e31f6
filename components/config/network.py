"""Network slice: a new VPC (AZs, CIDR, NAT) or an existing one."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator

from components.config.base import (
    Model,
)

SubnetId = Annotated[str, StringConstraints(pattern=r"^subnet-[0-9a-f]{8,17}$")]


class ExistingVpc(Model):
    """Use a VPC and subnets that already exist instead of creating them."""

    vpc_id: Annotated[str, StringConstraints(pattern=r"^vpc-[0-9a-f]{8,17}$")]
    private_subnet_ids: Annotated[list[SubnetId], Field(min_length=2)]
    public_subnet_ids: list[SubnetId] = []


class NetworkConfig(Model):
    """VPC layout: subnets per AZ, NAT gateways, S3 gateway endpoint."""

    vpc_cidr: str = "10.0.0.0/16"
    #: Three AZs is the safe default (control plane and nodes survive an AZ outage).
    az_count: Annotated[int, Field(ge=2, le=6)] = 3
    #: One NAT gateway per AZ keeps egress alive when an AZ fails; `single` saves money in dev.
    nat_gateways: Literal["perAz", "single"] = "perAz"
    existing_vpc: ExistingVpc | None = None

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
