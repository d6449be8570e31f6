"""IAM documents as pure functions: trust policies for EC2 nodes, EKS Pod Identity and IRSA.

Every workload identity in the platform is built from these, so policies and tests check one
shape. Documents are plain dicts; components serialize them with `json.dumps`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

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


POD_IDENTITY_PRINCIPAL: Final = "pods.eks.amazonaws.com"


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


def pod_identity_trust_policy(account_id: str, cluster_arn: str | None = None) -> dict[str, Any]:
    """Trust for EKS Pod Identity. Which service account may use the role is decided by the
    PodIdentityAssociation; the conditions pin the role to this account (and cluster)."""
    condition: dict[str, Any] = {"StringEquals": {"aws:SourceAccount": account_id}}
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
