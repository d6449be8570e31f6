"""Network: subnet planning (pure) and the component under mocks for both stacks."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.platform.cluster.network import discovery_tags, plan_subnets
from synth.harness import SynthResult, run_program
from tests.conftest import stack_values


@pytest.mark.parametrize(
    ("cidr", "azs"), [("10.0.0.0/16", 2), ("10.0.0.0/16", 3), ("10.8.0.0/20", 6)]
)
def test_subnets_are_disjoint_inside_the_vpc_and_private_ones_are_largest(
    cidr: str, azs: int
) -> None:
    plans = plan_subnets(cidr, azs)
    vpc = ipaddress.IPv4Network(cidr)
    nets = [ipaddress.IPv4Network(c) for p in plans for c in (p.private_cidr, p.public_cidr)]
    assert len(plans) == azs
    assert all(n.subnet_of(vpc) for n in nets)
    assert all(not a.overlaps(b) for i, a in enumerate(nets) for b in nets[i + 1 :])
    assert all(
        ipaddress.IPv4Network(p.private_cidr).num_addresses
        > ipaddress.IPv4Network(p.public_cidr).num_addresses
        for p in plans
    )


def test_discovery_tags_mark_private_subnets_for_karpenter_and_internal_lbs() -> None:
    private = discovery_tags("gpu-prod", private=True)
    public = discovery_tags("gpu-prod", private=False)
    assert private["karpenter.sh/discovery"] == "gpu-prod"
    assert private["kubernetes.io/role/internal-elb"] == "1"
    assert public["kubernetes.io/role/elb"] == "1" and "karpenter.sh/discovery" not in public
    assert private["kubernetes.io/cluster/gpu-prod"] == "shared"


def _subnets(result: SynthResult, kind: str) -> list[dict[str, Any]]:
    return [s.inputs for s in result.of_type("aws:ec2/subnet:Subnet") if f"-{kind}-" in s.name]


def test_prod_spans_three_azs_with_a_nat_gateway_each(prod: SynthResult) -> None:
    private, public = _subnets(prod, "private"), _subnets(prod, "public")
    assert len(private) == len(public) == 3
    assert len({s["availabilityZone"] for s in private}) == 3
    assert len(prod.of_type("aws:ec2/natGateway:NatGateway")) == 3
    defaults = _default_routes(prod, "private")
    assert len(defaults) == 3 and len({r.inputs["natGatewayId"] for r in defaults}) == 3


def test_dev_uses_two_azs_and_a_single_nat_gateway(dev: SynthResult) -> None:
    assert len(_subnets(dev, "private")) == 2
    assert len(dev.of_type("aws:ec2/natGateway:NatGateway")) == 1
    defaults = _default_routes(dev, "private")
    assert len(defaults) == 2 and len({r.inputs["natGatewayId"] for r in defaults}) == 1


def _default_routes(result: SynthResult, kind: str) -> list[Any]:
    return [
        r
        for r in result.of_type("aws:ec2/route:Route")
        if f"-{kind}-default" in r.name and r.inputs["destinationCidrBlock"] == "0.0.0.0/0"
    ]


@pytest.mark.parametrize("stack", ["dev", "prod", "prod_use1", "prod_usw2"])
def test_no_route_table_declares_inline_routes(stack: str, request: pytest.FixtureRequest) -> None:
    # A fleet's manager adds standalone routes to these tables: an inline `routes` list would
    # make `pulumi refresh` + `up` delete them (network.py docstring).
    result: SynthResult = request.getfixturevalue(stack)
    tables = result.of_type("aws:ec2/routeTable:RouteTable")
    assert tables and all("routes" not in t.inputs for t in tables)


def test_every_table_routes_by_standalone_routes_and_subnets_switch_after_them(
    prod: SynthResult,
) -> None:
    tables = {t.urn: t for t in prod.of_type("aws:ec2/routeTable:RouteTable")}
    public = _default_routes(prod, "public")
    private = _default_routes(prod, "private")
    assert len(public) == 1 and public[0].inputs["gatewayId"]
    # One default route per table, into that table (the mocks' ids are the tables' names).
    routed = {r.inputs["routeTableId"] for r in [*public, *private]}
    assert len(routed) == len(tables) == 4
    # Each association waits for its table's default route: on a stack that is upgraded the
    # subnet moves to its new table only once that table routes (network.py docstring).
    for association in prod.of_type("aws:ec2/routeTableAssociation:RouteTableAssociation"):
        route_urns = {r.urn for r in [*public, *private]}
        assert route_urns & set(association.dependencies), association.name


def test_private_subnets_carry_discovery_tags_and_no_public_ips(prod: SynthResult) -> None:
    assert len(_subnets(prod, "private")) == len(_subnets(prod, "public")) == 3
    for subnet in _subnets(prod, "private"):
        assert subnet["tags"]["karpenter.sh/discovery"] == "gpu-prod"
    for subnet in _subnets(prod, "public"):
        assert subnet["mapPublicIpOnLaunch"] is False


def test_s3_gateway_endpoint_serves_every_route_table(prod: SynthResult) -> None:
    (endpoint,) = prod.of_type("aws:ec2/vpcEndpoint:VpcEndpoint")
    assert endpoint.inputs["vpcEndpointType"] == "Gateway"
    assert endpoint.inputs["serviceName"] == "com.amazonaws.us-east-1.s3"
    assert len(endpoint.inputs["routeTableIds"]) == len(
        prod.of_type("aws:ec2/routeTable:RouteTable")
    )


def test_default_security_group_is_locked_down(prod: SynthResult) -> None:
    (sg,) = prod.of_type("aws:ec2/defaultSecurityGroup:DefaultSecurityGroup")
    assert not sg.inputs.get("ingress") and not sg.inputs.get("egress")


def test_existing_vpc_creates_no_vpc_and_tags_its_subnets() -> None:
    network = {
        "existingVpc": {
            "vpcId": "vpc-0123456789abcdef0",
            "privateSubnetIds": ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"],
            "publicSubnetIds": ["subnet-0bbbbbbbbbbbbbbb1"],
        }
    }
    result = run_program("prod", overrides={"gpu-platform:network": network})
    assert result.of_type("aws:ec2/vpc:Vpc") == []
    assert result.of_type("aws:ec2/natGateway:NatGateway") == []
    # Subnet tags only: Karpenter tags the node security group with the same key.
    tags = [
        t.inputs
        for t in result.of_type("aws:ec2/tag:Tag")
        if str(t.inputs["resourceId"]).startswith("subnet-")
    ]
    assert {(t["resourceId"], t["key"]) for t in tags if t["key"] == "karpenter.sh/discovery"} == {
        ("subnet-0aaaaaaaaaaaaaaa1", "karpenter.sh/discovery"),
        ("subnet-0aaaaaaaaaaaaaaa2", "karpenter.sh/discovery"),
    }
    (cluster,) = result.of_type("eks:index:Cluster")
    assert cluster.inputs["vpcId"] == "vpc-0123456789abcdef0"
    assert cluster.inputs["privateSubnetIds"] == network["existingVpc"]["privateSubnetIds"]


def test_az_count_above_the_regions_zones_is_a_clear_error(
    make_stack: Callable[[dict[str, Any]], Path], capsys: pytest.CaptureFixture[str]
) -> None:
    from synth import __main__ as synth_cli

    cfg = stack_values("prod")
    cfg["aws:region"] = "us-west-1"  # two zones for new accounts
    project = make_stack(cfg)
    rc = synth_cli.main(
        ["--stack", "t", "--project-dir", str(project), "--out", str(project / "o")]
    )
    err = capsys.readouterr().err
    assert rc == synth_cli.EXIT_CONFIG
    assert "gpu-platform:network.azCount: got 3; the region has only 2 available zones" in err
    assert "Traceback" not in err
    assert not (project / "o").exists()


@pytest.mark.parametrize("stack", ["dev", "prod", "prod_use1", "prod_usw2", "fleet_prod"])
def test_the_control_plane_gets_the_private_subnets_only(
    stack: str, request: pytest.FixtureRequest
) -> None:
    # EKS puts the API server's ENIs in the cluster's subnets; pulumi-eks makes those public +
    # private when given both (cluster.py `_control_plane`). A fleet's manager routes only to
    # the private ones.
    result: SynthResult = request.getfixturevalue(stack)
    subnets = {s.name: s for s in result.of_type("aws:ec2/subnet:Subnet")}
    private = {_subnet_id(n) for n in subnets if "-private-" in n}
    (cluster,) = result.of_type("eks:index:Cluster")
    assert "publicSubnetIds" not in cluster.inputs and "subnetIds" not in cluster.inputs
    assert set(cluster.inputs["privateSubnetIds"]) == private and len(private) >= 2
    # Load balancers still find the public subnets by their tags (no cluster subnet needed).
    public = [s.inputs for n, s in subnets.items() if "-public-" in n]
    assert public and all(s["tags"]["kubernetes.io/role/elb"] == "1" for s in public)
    for group in result.of_type("eks:index:ManagedNodeGroup"):
        assert set(group.inputs["subnetIds"]) <= private, group.name


def _subnet_id(name: str) -> str:
    """The id the mocks give subnet `name` (synth/mocks.py `_storage_state`)."""
    from synth.mocks import _digest

    return "subnet-" + _digest("aws:ec2/subnet:Subnet", name)[:17]
