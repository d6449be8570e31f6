"""Karpenter, the parts that make capacity real: the controller policy (its scoping and
upstream's v1.14.1 action list), reserved capacity (its own EC2NodeClass and NodePool) and the
feature gates."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from components import catalog
from components.platform.capacity import karpenter_builders as kpb
from synth.harness import SynthResult

# --- the controller's IAM policy ------------------------------------------------------------
from tests.conftest import config_error_test
from tests.platform.test_karpenter import (
    NODECLASS,
    NODEPOOL,
    RELEASE,
    _pools,
    _prod_cfg,
    _requirement,
)


def _policy() -> dict[str, Any]:
    return kpb.controller_policy(
        cluster_name="gpu-x",
        region="eu-west-1",
        account_id="123456789012",
        partition="aws",
        queue_arn="arn:aws:sqs:eu-west-1:123456789012:gpu-x-karpenter",
        node_role_arn="arn:aws:iam::123456789012:role/karpenter-node",
    )


def test_controller_may_pass_only_the_node_role_to_ec2() -> None:
    statements = _policy()["Statement"]
    passing = [s for s in statements if "iam:PassRole" in json.dumps(s["Action"])]
    assert len(passing) == 1
    assert passing[0]["Resource"] == "arn:aws:iam::123456789012:role/karpenter-node"
    assert passing[0]["Condition"] == {
        "StringEquals": {"iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]}
    }


def test_controller_ec2_writes_are_scoped_to_cluster_tags_and_reads_to_region() -> None:
    statements = {s["Sid"]: s for s in _policy()["Statement"]}
    for sid in (
        "AllowScopedEC2LaunchTemplateAccessActions",
        "AllowScopedEC2InstanceActionsWithTags",
        "AllowScopedResourceCreationTagging",
        "AllowScopedResourceTagging",
        "AllowScopedDeletion",
    ):
        text = json.dumps(statements[sid]["Condition"])
        assert "kubernetes.io/cluster/gpu-x" in text, sid
    reads = statements["AllowRegionalReadActions"]
    assert reads["Condition"] == {"StringEquals": {"aws:RequestedRegion": "eu-west-1"}}
    for statement in statements.values():
        if statement["Resource"] == "*":
            # Upstream's unscoped statements: pricing (global API), ListInstanceProfiles (takes
            # no ARN), zonal-shift status (conditioned on this cluster's ARN).
            assert statement["Sid"] in {
                "AllowRegionalReadActions",
                "AllowPricingReadActions",
                "AllowUnscopedInstanceProfileListAction",
                "AllowZonalShiftStatusReadOnly",
            }
        for resource in (
            [statement["Resource"]]
            if isinstance(statement["Resource"], str)
            else statement["Resource"]
        ):
            assert resource == "*" or "eu-west-1" in resource or ":iam::" in resource


# --- upstream IAM parity, reserved capacity, feature gates ---------------------------------------

#: Every action of the six controller policies in upstream's getting-started CloudFormation,
#: aws/karpenter-provider-aws@v1.14.1:website/content/en/docs/getting-started/
#: getting-started-with-karpenter/cloudformation.yaml#L27-378 (transcribed in
#: /work/research/runs.md Q1; identical to the v1.14 folder on main at 1d927085).
UPSTREAM_CONTROLLER_ACTIONS = frozenset(
    {
        # NodeLifecycle
        "ec2:RunInstances",
        "ec2:CreateFleet",
        "ec2:CreateLaunchTemplate",
        "ec2:CreateTags",
        "ec2:TerminateInstances",
        "ec2:DeleteLaunchTemplate",
        # IAMIntegration
        "iam:PassRole",
        "iam:CreateInstanceProfile",
        "iam:TagInstanceProfile",
        "iam:AddRoleToInstanceProfile",
        "iam:RemoveRoleFromInstanceProfile",
        "iam:DeleteInstanceProfile",
        # EKSIntegration
        "eks:DescribeCluster",
        # Interruption
        "sqs:DeleteMessage",
        "sqs:GetQueueUrl",
        "sqs:ReceiveMessage",
        # ZonalShift
        "arc-zonal-shift:GetManagedResource",
        # ResourceDiscovery
        "ec2:DescribeCapacityReservations",
        "ec2:DescribeImages",
        "ec2:DescribeInstances",
        "ec2:DescribeInstanceStatus",
        "ec2:DescribeInstanceTypeOfferings",
        "ec2:DescribeInstanceTypes",
        "ec2:DescribeLaunchTemplates",
        "ec2:DescribePlacementGroups",
        "ec2:DescribeSecurityGroups",
        "ec2:DescribeSpotPriceHistory",
        "ec2:DescribeSubnets",
        "ssm:GetParameter",
        "pricing:GetProducts",
        "iam:ListInstanceProfiles",
        "iam:GetInstanceProfile",
    }
)


def _actions(statement: dict[str, Any]) -> list[str]:
    action = statement["Action"]
    return [action] if isinstance(action, str) else list(action)


def test_controller_policy_has_every_upstream_action() -> None:
    granted = {a for s in _policy()["Statement"] for a in _actions(s)}
    assert sorted(UPSTREAM_CONTROLLER_ACTIONS - granted) == []


def test_instance_profile_reads_are_not_scoped_to_our_profile() -> None:
    # Issue #9185: the EC2NodeClass finalizer lists profiles and reads the legacy name; a 403
    # there wedges `pulumi destroy`.
    statements = {s["Sid"]: s for s in _policy()["Statement"]}
    listing = statements["AllowUnscopedInstanceProfileListAction"]
    assert (listing["Action"], listing["Resource"]) == ("iam:ListInstanceProfiles", "*")
    reading = statements["AllowInstanceProfileReadActions"]
    assert reading["Action"] == "iam:GetInstanceProfile"
    assert reading["Resource"] == "arn:aws:iam::123456789012:instance-profile/*"
    assert "Condition" not in reading
    launch = statements["AllowScopedEC2InstanceAccessActions"]["Resource"]
    assert "arn:aws:ec2:eu-west-1:*:capacity-reservation/*" in launch
    assert "arn:aws:ec2:eu-west-1:*:placement-group/*" in launch


def test_prod_reserved_pool_launches_only_into_its_reservation(prod: SynthResult) -> None:
    classes = {c.inputs["metadata"]["name"]: c.inputs["spec"] for c in prod.of_type(NODECLASS)}
    assert classes["gpu-reserved"]["capacityReservationSelectorTerms"] == [
        {"tags": {"gpu-platform/reservation": "gpu-prod-h100"}}
    ]
    # Only the reserved class selects reservations: other pools cannot draw them down.
    assert all(
        "capacityReservationSelectorTerms" not in spec
        for name, spec in classes.items()
        if name != "gpu-reserved"
    )
    pools = {p.inputs["metadata"]["name"]: p.inputs["spec"] for p in prod.of_type(NODEPOOL)}
    reserved = pools["kp-h100-reserved"]
    assert _requirement(reserved, "karpenter.sh/capacity-type")["values"] == ["reserved"]
    assert reserved["template"]["spec"]["nodeClassRef"]["name"] == "gpu-reserved"
    assert _requirement(reserved, "node.kubernetes.io/instance-type")["values"] == ["p5.48xlarge"]
    assert reserved["limits"]["nvidia.com/gpu"] == 16
    # H100 on-demand is the ng-h100-od node group: no Karpenter pool draws on-demand p5.
    assert not [
        p
        for p in pools.values()
        if _requirement(p, "karpenter.sh/capacity-type")["values"] == ["on-demand"]
        and "p5.48xlarge" in _requirement(p, "node.kubernetes.io/instance-type")["values"]
    ]
    labels = reserved["template"]["metadata"]["labels"]
    assert labels[catalog.LABEL_CAPACITY_TYPE] == "reserved"


def test_feature_gates_are_explicit_in_the_controller_values(prod: SynthResult) -> None:
    (controller,) = [r for r in prod.of_type(RELEASE) if r.inputs["name"] == "karpenter"]
    gates = controller.inputs["values"]["settings"]["featureGates"]
    # ReservedCapacity is Beta/on at 1.14.1; NodeRepair Alpha/off and kept off (see config).
    assert gates == {"reservedCapacity": True, "nodeRepair": False}


# --- config errors: AMI release, reservations ------------------------------------------------

INVALID: list[tuple[str, Callable[[dict[str, Any]], Any], str, str]] = [
    (
        # Defect 7: a pin to a release that was never published leaves AMIsReady=False.
        "AMI alias naming a release that does not exist",
        lambda c: c["gpu-platform:karpenter"].update(amiAlias="al2023@v20251020"),
        "gpu-platform:karpenter.amiAlias",
        "an existing amazon-eks-ami release",
    ),
    (
        "reserved pool without a reservation",
        lambda c: c["gpu-platform:karpenter"].update(reservations=[]),
        "gpu-platform:karpenter.pools[5].capacityType",
        "a karpenter.reservations entry",
    ),
    (
        "reserved pool limit above what the reservations hold",
        lambda c: _pools(c)[5].update(limits={"gpus": 24}),
        "gpu-platform:karpenter.pools[5].limits.gpus",
        "at most the 16 GPUs",
    ),
    (
        "reserved pool weighted below on-demand",
        lambda c: _pools(c)[5].update(weight=5),
        "gpu-platform:karpenter.pools",
        "reserved pools of h100-x8 need a higher weight than its on-demand pools",
    ),
    (
        "reservation no reserved pool uses",
        lambda c: c["gpu-platform:karpenter"]["reservations"].append(
            {"name": "spare", "id": "cr-0abc", "instanceType": "g6e.48xlarge", "count": 1}
        ),
        "gpu-platform:karpenter.reservations[1].instanceType",
        "an unused reservation is billed for nothing",
    ),
    (
        "capacity block without its window",
        lambda c: c["gpu-platform:karpenter"]["reservations"][0].update(
            type="capacity-block", priceUsdPerHour=40.0
        ),
        "gpu-platform:karpenter.reservations[0].end",
        "needs start and end",
    ),
    (
        "reservation selected by both id and tags",
        lambda c: c["gpu-platform:karpenter"]["reservations"][0].update(id="cr-0abc"),
        "gpu-platform:karpenter.reservations[0].id",
        "exactly one of id",
    ),
]


test_invalid_capacity_config_exits_2_with_key_path = config_error_test(INVALID, _prod_cfg)
