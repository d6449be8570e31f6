"""IAM documents as pure functions: trust policies for EC2 nodes, EKS Pod Identity and IRSA.

Every workload identity in the platform is built from these, so policies and tests check one
shape. Documents are plain dicts; components serialize them with `json.dumps`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import pulumi
import pulumi_aws as aws

AWS_MANAGED: Final = "arn:aws:iam::aws:policy"


@dataclass(frozen=True)
class AwsAccount:
    """Where the stack deploys: looked up once by the composition root and handed to every
    component (each lookup is an AWS API call under `pulumi up`)."""

    account_id: str
    region: str
    partition: str

    @classmethod
    def lookup(cls) -> AwsAccount:
        return cls(
            account_id=aws.get_caller_identity().account_id,
            region=aws.get_region().region,
            partition=aws.get_partition().partition,
        )


def deploying_principal_arn() -> pulumi.Output[str]:
    """The IAM principal this `pulumi up` runs as: the role behind the current STS session
    (`aws.iam.get_session_context` of the caller's ARN: "IAM source role ARN if `arn`
    corresponds to an STS assumed role. Otherwise, `issuer_arn` is equal to `arn`", pulumi-aws
    7.51.1, whose docstring shows this exact pairing to "Find the Runner's Source Role")."""
    caller = aws.get_caller_identity_output()
    return aws.iam.get_session_context_output(arn=caller.arn).issuer_arn


POD_IDENTITY_PRINCIPAL: Final = "pods.eks.amazonaws.com"


#: What every node's role holds, managed group and Karpenter alike (`node_role`).
NODE_MANAGED_POLICIES: Final = (
    "AmazonEKSWorkerNodePolicy",
    "AmazonEC2ContainerRegistryPullOnly",
    # The VPC CNI runs with the node role: pulumi-eks creates the vpc-cni add-on together with
    # the control plane, before the OIDC provider a scoped IRSA role would need exists.
    "AmazonEKS_CNI_Policy",
    # Shell access through SSM Session Manager instead of SSH keys and open ports.
    "AmazonSSMManagedInstanceCore",
)


def node_role(name: str, *, tags: dict[str, str], opts: pulumi.ResourceOptions) -> aws.iam.Role:
    """The IAM role of EC2 nodes (the managed groups' and Karpenter's): EC2 trust and
    `NODE_MANAGED_POLICIES`. The one builder, so both kinds of node get the same rights."""
    return aws.iam.Role(
        name,
        assume_role_policy=json.dumps(service_trust_policy("ec2.amazonaws.com")),
        managed_policy_arns=[f"{AWS_MANAGED}/{p}" for p in NODE_MANAGED_POLICIES],
        tags=tags,
        opts=opts,
    )


def pod_identity_role(
    name: str,
    *,
    account_id: str,
    cluster_name: str,
    namespace: str,
    service_account: str,
    tags: dict[str, str],
    opts: pulumi.ResourceOptions,
    role_name: str | None = None,
    **role_args: Any,
) -> aws.iam.Role:
    """The IAM role one service account of one cluster assumes through EKS Pod Identity: the
    trust of `pod_identity_trust_policy` (all three pins), plus whatever else the role takes
    (`description`, `managed_policy_arns`). The one builder of such roles. `role_name`: the
    role's IAM name, when others must know it in advance (else Pulumi names it)."""
    return aws.iam.Role(
        name,
        name=role_name,
        assume_role_policy=json.dumps(
            pod_identity_trust_policy(
                account_id,
                cluster_name=cluster_name,
                namespace=namespace,
                service_account=service_account,
            )
        ),
        tags=tags,
        opts=opts,
        **role_args,
    )


def service_trust_policy(service: str) -> dict[str, Any]:
    """Trust for an AWS service principal (e.g. `ec2.amazonaws.com` for node roles)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": service},
                "Action": "sts:AssumeRole",
            }
        ],
    }


def pod_identity_trust_policy(
    account_id: str,
    *,
    cluster_name: str,
    namespace: str,
    service_account: str,
    cluster_arn: str | None = None,
) -> dict[str, Any]:
    """Trust for EKS Pod Identity, pinned to this account and, through the session tags EKS
    Pod Identity adds to every AssumeRole, to one cluster, namespace and service account: a
    PodIdentityAssociation in another cluster of the account (or for another service account)
    cannot use the role.

    Session tags `eks-cluster-name`, `kubernetes-namespace`, `kubernetes-service-account`: the
    namespace/service-account condition is the EKS user guide's own example
    (https://docs.aws.amazon.com/eks/latest/userguide/pod-id-role.html); the list of tags incl.
    `eks-cluster-arn`/`eks-cluster-name` is from awsdocs/amazon-eks-user-guide PR #1047
    (pod-id-role.adoc). They are present unless an association sets `disableSessionTags`
    (none here). `aws:SourceAccount` (and `aws:SourceArn` = cluster ARN) on the EKS Auth call:
    UNVERIFIED in AWS documentation (research memo runs.md item 20) - kept from the previous
    policy, the session tags are the documented pin.

    The ONE builder of Pod Identity trust: every role `pods.eks.amazonaws.com` may assume is
    made here, and all three pins are required (tests/platform/test_trust.py checks every such
    role of the synthesized stacks; the policy pack's gpu-platform-aws-pod-identity-pinned rule
    refuses one without them)."""
    equals: dict[str, Any] = {
        "aws:SourceAccount": account_id,
        "aws:RequestTag/eks-cluster-name": cluster_name,
        "aws:RequestTag/kubernetes-namespace": namespace,
        "aws:RequestTag/kubernetes-service-account": service_account,
    }
    condition: dict[str, Any] = {"StringEquals": equals}
    if cluster_arn is not None:
        condition["ArnEquals"] = {"aws:SourceArn": cluster_arn}
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Service": POD_IDENTITY_PRINCIPAL},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Condition": condition,
            }
        ],
    }


def irsa_trust_policy(
    oidc_provider_arn: str, oidc_issuer: str, namespace: str, service_account: str
) -> dict[str, Any]:
    """Trust for IRSA, scoped to exactly one service account (`sub`) and to STS (`aud`)."""
    issuer = oidc_issuer.removeprefix("https://")
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"Federated": oidc_provider_arn},
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringEquals": {
                        f"{issuer}:sub": f"system:serviceaccount:{namespace}:{service_account}",
                        f"{issuer}:aud": "sts.amazonaws.com",
                    }
                },
            }
        ],
    }
