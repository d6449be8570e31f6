"""The VPC: public and private subnets per AZ, NAT, the S3 gateway endpoint, discovery tags.

Or, with `network.existingVpc`, an existing VPC whose private subnets get the discovery tags
EKS load balancers and Karpenter look for.

Routes: every route in a table this stack creates is a standalone `aws.ec2.Route`, none is
declared inline (`aws.ec2.RouteTable(routes=...)`). A fleet's manager adds its own standalone
routes (the VPC peering) to a worker's private tables, and pulumi-aws 7.51.1 warns: "you cannot
use a `ec2.RouteTable` inline `route` blocks in conjunction with any `ec2.Route` resources. Doing
so will cause a conflict of rule settings and will overwrite rules" (`aws.ec2.RouteTable`
docstring, pulumi_aws/ec2/route_table.py): with inline routes, `pulumi refresh` (or `up
--refresh`) reads the peering routes into the table's state and the next `up` deletes them.
Omitting `routes` means "ignoring any existing routes" (same docstring), so the tables own no
route at all and every route is its own resource.

The tables have other names than before (`-public-table`, `-private-table-<zone>`): a table that
once declared inline routes still holds them in AWS (omitting `routes` ignores them), and a
standalone route to the same destination would fail with RouteAlreadyExists. The first `up` of
an existing stack therefore creates new tables and their routes, moves each subnet's
association to its new table (ReplaceRouteTableAssociation: one atomic switch, after the new
table's default route exists) and the S3 endpoint to the new tables, then deletes the old ones
(docs/architecture.md "Upgrading a deployed stack").
"""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
import pulumi_aws as aws

from components.config import NetworkConfig
from components.platform.cluster.handles import NetworkHandles
from components.platform.cluster.iam import AwsAccount
from components.resource_options import child_options

if TYPE_CHECKING:
    from components.config import StackConfig


@dataclass(frozen=True)
class SubnetPlan:
    """CIDRs of one AZ's subnets."""

    az_index: int
    private_cidr: str
    public_cidr: str


def plan_subnets(vpc_cidr: str, az_count: int) -> list[SubnetPlan]:
    """Split the VPC: one large private subnet per AZ (pods take VPC IPs with the VPC CNI) and
    small public subnets (NAT gateways and load balancers only) carved from the last block."""
    network = ipaddress.IPv4Network(vpc_cidr)
    bits = math.ceil(math.log2(az_count + 1))
    blocks = list(network.subnets(prefixlen_diff=bits))
    public = list(blocks[-1].subnets(prefixlen_diff=bits))
    return [SubnetPlan(index, str(blocks[index]), str(public[index])) for index in range(az_count)]


def discovery_tags(cluster_name: str, *, private: bool) -> dict[str, str]:
    """Tags the AWS load balancer controller and Karpenter select subnets by."""
    tags = {f"kubernetes.io/cluster/{cluster_name}": "shared"}
    if private:
        tags["kubernetes.io/role/internal-elb"] = "1"
        tags["karpenter.sh/discovery"] = cluster_name
    else:
        tags["kubernetes.io/role/elb"] = "1"
    return tags


@dataclass(frozen=True)
class NetworkArgs:
    """Inputs of the Network component."""

    #: Account, region and partition of the deployment (looked up once).
    aws_account: AwsAccount

    config: NetworkConfig
    #: Physical EKS cluster name, needed for the subnet discovery tags.
    cluster_name: str
    #: Cost-allocation tags for every taggable resource.
    tags: dict[str, str]

    @classmethod
    def of(cls, cfg: StackConfig, aws_account: AwsAccount, tags: dict[str, str]) -> NetworkArgs:
        """This component's slice of the stack config."""
        return cls(
            aws_account=aws_account, config=cfg.network, cluster_name=cfg.cluster.name, tags=tags
        )


class Network(pulumi.ComponentResource):
    """A VPC laid out for EKS, or the discovery tags on an existing one."""

    vpc_id: pulumi.Output[str]
    private_subnet_ids: list[pulumi.Output[str]]
    public_subnet_ids: list[pulumi.Output[str]]
    vpc_cidr: pulumi.Output[str] | None
    private_route_table_ids: list[pulumi.Output[str]] | None

    def __init__(
        self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:network:Network", name, None, opts)
        child = child_options(self)
        existing = args.config.existing_vpc
        if existing is not None:
            self._adopt(name, args, child)
        else:
            self._create(name, args, child)
        self.handles = NetworkHandles(
            vpc_id=self.vpc_id,
            private_subnet_ids=self.private_subnet_ids,
            public_subnet_ids=self.public_subnet_ids,
            vpc_cidr=self.vpc_cidr,
            private_route_table_ids=self.private_route_table_ids,
        )
        self.register_outputs(
            {
                "vpcId": self.vpc_id,
                "privateSubnetIds": self.private_subnet_ids,
                "publicSubnetIds": self.public_subnet_ids,
            }
        )

    def _adopt(self, name: str, args: NetworkArgs, child: pulumi.ResourceOptions) -> None:
        existing = args.config.existing_vpc
        assert existing is not None
        self.vpc_id = pulumi.Output.from_input(existing.vpc_id)
        self.private_subnet_ids = [pulumi.Output.from_input(s) for s in existing.private_subnet_ids]
        self.public_subnet_ids = [pulumi.Output.from_input(s) for s in existing.public_subnet_ids]
        # Not this stack's: looked up only by whoever needs them (a fleet worker's peering).
        self.vpc_cidr = None
        self.private_route_table_ids = None
        # Tag resources add (and on destroy remove) single tags without owning the subnet.
        for private, ids in (
            (True, existing.private_subnet_ids),
            (False, existing.public_subnet_ids),
        ):
            for subnet_id in ids:
                for key, value in discovery_tags(args.cluster_name, private=private).items():
                    aws.ec2.Tag(
                        f"{name}-{subnet_id}-{key.replace('/', '-').replace('.', '-')}",
                        resource_id=subnet_id,
                        key=key,
                        value=value,
                        opts=child,
                    )

    def _create(self, name: str, args: NetworkArgs, child: pulumi.ResourceOptions) -> None:
        config = args.config
        tags = args.tags
        zones = aws.get_availability_zones(
            state="available",
            filters=[{"name": "opt-in-status", "values": ["opt-in-not-required"]}],
        ).names
        if len(zones) < config.az_count:
            raise pulumi.RunError(
                f"gpu-platform:network.azCount: got {config.az_count}; the region has only "
                f"{len(zones)} available zones"
            )
        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=config.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**tags, "Name": f"{args.cluster_name}-vpc"},
            opts=child,
        )
        vpc_child = child_options(vpc)
        # No rules: the default SG must not silently allow traffic between whatever lands in it.
        aws.ec2.DefaultSecurityGroup(f"{name}-default-sg", vpc_id=vpc.id, tags=tags, opts=vpc_child)
        igw = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags={**tags, "Name": args.cluster_name}, opts=vpc_child
        )
        # No inline routes (module docstring): the default route is a resource of its own.
        public_rt = aws.ec2.RouteTable(
            f"{name}-public-table",
            vpc_id=vpc.id,
            tags={**tags, "Name": f"{args.cluster_name}-public"},
            opts=vpc_child,
        )
        public_default = aws.ec2.Route(
            f"{name}-public-default",
            route_table_id=public_rt.id,
            destination_cidr_block="0.0.0.0/0",
            gateway_id=igw.id,
            opts=vpc_child,
        )
        plans = plan_subnets(config.vpc_cidr, config.az_count)
        public_subnets, private_subnets, nat_gateways = self._subnets(
            name,
            args,
            vpc,
            zones=zones,
            plans=plans,
            public_rt=public_rt,
            igw=igw,
            public_default=public_default,
        )
        zone_names = [zones[plan.az_index] for plan in plans]
        private_route_tables = self._private_routes(
            name,
            args,
            vpc,
            zones=zone_names,
            private_subnets=private_subnets,
            nat_gateways=nat_gateways,
        )
        self._s3_endpoint(name, args, vpc, [*private_route_tables, public_rt])
        self.vpc_id = vpc.id
        self.private_subnet_ids = [s.id for s in private_subnets]
        self.public_subnet_ids = [s.id for s in public_subnets]
        self.vpc_cidr = vpc.cidr_block
        self.private_route_table_ids = [rt.id for rt in private_route_tables]

    def _subnets(
        self,
        name: str,
        args: NetworkArgs,
        vpc: aws.ec2.Vpc,
        *,
        zones: Sequence[str],
        plans: list[SubnetPlan],
        public_rt: aws.ec2.RouteTable,
        igw: aws.ec2.InternetGateway,
        public_default: aws.ec2.Route,
    ) -> tuple[list[aws.ec2.Subnet], list[aws.ec2.Subnet], list[aws.ec2.NatGateway]]:
        """A public and a private subnet per zone (discovery-tagged), and the NAT gateways: one
        per zone, or one in the first zone (`natGateways: single`)."""
        public_subnets: list[aws.ec2.Subnet] = []
        private_subnets: list[aws.ec2.Subnet] = []
        nat_gateways: list[aws.ec2.NatGateway] = []
        for plan in plans:
            zone = zones[plan.az_index]
            public = self._public_subnet(
                name,
                args,
                vpc,
                zone=zone,
                cidr=plan.public_cidr,
                public_rt=public_rt,
                public_default=public_default,
            )
            public_subnets.append(public)
            private_subnets.append(self._private_subnet(name, args, vpc, zone, plan.private_cidr))
            if args.config.nat_gateways == "perAz" or plan.az_index == 0:
                nat_gateways.append(
                    self._nat_gateway(name, args, vpc, zone=zone, public=public, igw=igw)
                )
        return public_subnets, private_subnets, nat_gateways

    def _public_subnet(
        self,
        name: str,
        args: NetworkArgs,
        vpc: aws.ec2.Vpc,
        *,
        zone: str,
        cidr: str,
        public_rt: aws.ec2.RouteTable,
        public_default: aws.ec2.Route,
    ) -> aws.ec2.Subnet:
        """A zone's public subnet (load balancers, NAT), routed to the internet gateway. Its
        association waits for the table's default route: on an existing stack the association
        moves from the old table to this one (module docstring) only once the new table routes."""
        vpc_child = child_options(vpc)
        public = aws.ec2.Subnet(
            f"{name}-public-{zone}",
            vpc_id=vpc.id,
            cidr_block=cidr,
            availability_zone=zone,
            map_public_ip_on_launch=False,
            tags={
                **args.tags,
                **discovery_tags(args.cluster_name, private=False),
                "Name": f"{args.cluster_name}-public-{zone}",
            },
            opts=vpc_child,
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-public-{zone}",
            subnet_id=public.id,
            route_table_id=public_rt.id,
            opts=child_options(vpc, depends_on=[public_default]),
        )
        return public

    def _private_subnet(
        self, name: str, args: NetworkArgs, vpc: aws.ec2.Vpc, zone: str, cidr: str
    ) -> aws.ec2.Subnet:
        """A zone's private subnet, where nodes and pods live (discovery-tagged)."""
        return aws.ec2.Subnet(
            f"{name}-private-{zone}",
            vpc_id=vpc.id,
            cidr_block=cidr,
            availability_zone=zone,
            tags={
                **args.tags,
                **discovery_tags(args.cluster_name, private=True),
                "Name": f"{args.cluster_name}-private-{zone}",
            },
            opts=child_options(vpc),
        )

    def _nat_gateway(
        self,
        name: str,
        args: NetworkArgs,
        vpc: aws.ec2.Vpc,
        *,
        zone: str,
        public: aws.ec2.Subnet,
        igw: aws.ec2.InternetGateway,
    ) -> aws.ec2.NatGateway:
        """A zone's NAT gateway and its Elastic IP: the private subnets' way out."""
        eip = aws.ec2.Eip(
            f"{name}-nat-{zone}", domain="vpc", tags=args.tags, opts=child_options(vpc)
        )
        return aws.ec2.NatGateway(
            f"{name}-nat-{zone}",
            subnet_id=public.id,
            allocation_id=eip.id,
            connectivity_type="public",
            tags={**args.tags, "Name": f"{args.cluster_name}-{zone}"},
            opts=child_options(vpc, depends_on=[igw]),
        )

    def _private_routes(
        self,
        name: str,
        args: NetworkArgs,
        vpc: aws.ec2.Vpc,
        *,
        zones: list[str],
        private_subnets: list[aws.ec2.Subnet],
        nat_gateways: list[aws.ec2.NatGateway],
    ) -> list[aws.ec2.RouteTable]:
        """A route table per private subnet, its default route (a standalone route: module
        docstring) through its zone's NAT gateway (per-AZ NAT keeps each AZ's egress
        independent; `single` routes all via AZ 0). A fleet's manager adds the peering routes to
        these tables from its own stack."""
        config, tags = args.config, args.tags
        vpc_child = child_options(vpc)
        route_tables = []
        for index, (zone, subnet) in enumerate(zip(zones, private_subnets, strict=True)):
            nat = nat_gateways[index if config.nat_gateways == "perAz" else 0]
            route_table = aws.ec2.RouteTable(
                f"{name}-private-table-{zone}",
                vpc_id=vpc.id,
                tags={**tags, "Name": f"{args.cluster_name}-private-{zone}"},
                opts=vpc_child,
            )
            default = aws.ec2.Route(
                f"{name}-private-default-{zone}",
                route_table_id=route_table.id,
                destination_cidr_block="0.0.0.0/0",
                nat_gateway_id=nat.id,
                opts=vpc_child,
            )
            aws.ec2.RouteTableAssociation(
                f"{name}-private-{zone}",
                subnet_id=subnet.id,
                route_table_id=route_table.id,
                opts=child_options(vpc, depends_on=[default]),
            )
            route_tables.append(route_table)
        return route_tables

    def _s3_endpoint(
        self,
        name: str,
        args: NetworkArgs,
        vpc: aws.ec2.Vpc,
        route_tables: list[aws.ec2.RouteTable],
    ) -> None:
        """Datasets and checkpoints move through S3: a gateway endpoint keeps that traffic off
        NAT (no per-GB charge) and inside the AWS network."""
        aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{args.aws_account.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[rt.id for rt in route_tables],
            tags={**args.tags, "Name": f"{args.cluster_name}-s3"},
            opts=child_options(vpc),
        )
