"""Node-group autoscaling rules: spot groups diversified, groups that can change size only with
a cluster-autoscaler to change it, and an autoscaler role that may resize this cluster's Auto
Scaling groups only (docs/node-groups.md has the upstream facts behind each)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Final

from pulumi_policy import PolicyResource

from policies.rules.aws import ROLE_POLICY
from policies.rules.common import (
    CRITICAL,
    HIGH,
    MANDATORY,
    Config,
    Resource,
    as_list,
    dig,
    json_doc,
    resource_rule,
    stack_rule,
    statements,
)
from policies.rules.compute import (
    EKS_NODE_GROUP,
    HELM_CHART,
    HELM_RELEASE,
    MANAGED_NODE_GROUP,
    is_gpu_node_group,
)

#: What the cluster-autoscaler may do to an Auto Scaling group.
RESIZE_ACTIONS: Final = frozenset(
    {"autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"}
)
#: The tag EKS puts on every managed group's Auto Scaling group of cluster <name>.
CLUSTER_TAG_PREFIX: Final = "aws:ResourceTag/k8s.io/cluster-autoscaler/"


def _check_spot_types(resource: Resource, config: Config) -> Iterator[str]:
    props = resource.props
    if props.get("capacityType") != "SPOT" or not is_gpu_node_group(props):
        return
    types = as_list(props.get("instanceTypes"))
    if len(types) < config["minSpotInstanceTypes"]:
        yield (
            f"spot GPU node group with {len(types)} instance type(s); at least "
            f"{config['minSpotInstanceTypes']} (one spot pool runs dry, the group then cannot grow)"
        )


def _is_autoscaler(resource: PolicyResource) -> bool:
    return resource.resource_type in (HELM_RELEASE, HELM_CHART) and "cluster-autoscaler" in str(
        resource.props.get("chart", "")
    )


def _check_resizable_groups(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    if any(_is_autoscaler(r) for r in resources):
        return
    for group in resources:
        if group.resource_type not in (MANAGED_NODE_GROUP, EKS_NODE_GROUP):
            continue
        scaling = group.props.get("scalingConfig") or {}
        low, high = dig(scaling, "minSize"), dig(scaling, "maxSize")
        if low is not None and high is not None and low != high:
            yield (
                f"node group can change size (min {low}, max {high}) but no cluster-autoscaler "
                "is deployed: nothing resizes it (Karpenter never does)",
                group.urn,
            )


def _check_autoscaler_scope(resource: Resource, _config: Config) -> Iterator[str]:
    for statement in statements(json_doc(resource.props.get("policy"))):
        if statement.get("Effect") != "Allow":
            continue
        actions = {str(a) for a in as_list(statement.get("Action"))}
        if not actions & RESIZE_ACTIONS and "autoscaling:*" not in actions:
            continue
        conditions = statement.get("Condition") or {}
        tags = [
            key
            for operator in conditions.values()
            if isinstance(operator, dict)
            for key in operator
            if str(key).startswith(CLUSTER_TAG_PREFIX) and not str(key).endswith("/enabled")
        ]
        resources = [str(r) for r in as_list(statement.get("Resource"))]
        named = resources and all(":autoScalingGroupName/" in r for r in resources)
        if not tags and not named:
            yield (
                "the role may resize any Auto Scaling group: condition SetDesiredCapacity / "
                f"TerminateInstanceInAutoScalingGroup on {CLUSTER_TAG_PREFIX}<cluster> "
                "(or name the groups)"
            )


POLICIES = [
    resource_rule(
        name="gpu-platform-eks-spot-group-diversified",
        description="Spot GPU node groups list several instance types (spot pools run dry).",
        types=(MANAGED_NODE_GROUP, EKS_NODE_GROUP),
        check=_check_spot_types,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="List at least 3 instance types in gpu-platform:nodeGroups.gpu[].instanceTypes "
        "(smallest first: the autoscaler sizes the group by the first).",
        config={"minSpotInstanceTypes": {"type": "integer", "minimum": 1, "default": 3}},
    ),
    stack_rule(
        name="gpu-platform-eks-resizable-group-has-autoscaler",
        description="A managed node group whose min and max differ has a cluster-autoscaler "
        "to resize it.",
        check=_check_resizable_groups,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Enable gpu-platform:clusterAutoscaler, or set minSize = maxSize.",
    ),
    resource_rule(
        name="gpu-platform-iam-autoscaler-scoped",
        description="A policy that lets a role resize Auto Scaling groups limits it to this "
        "cluster's groups (tag condition or named groups).",
        types=(ROLE_POLICY,),
        check=_check_autoscaler_scope,
        severity=CRITICAL,
        enforcement=MANDATORY,
        remediation="Condition the resize actions on aws:ResourceTag/k8s.io/cluster-autoscaler/"
        "<cluster> = owned (components/platform/capacity/autoscaler.py policy()).",
    ),
]
