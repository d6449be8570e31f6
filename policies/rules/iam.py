"""IAM rules: no wildcard permissions or admin policies, and trust policies that name exactly
who may assume a role — one IRSA service account, exact GitHub repository subjects, and for
EKS Pod Identity one cluster, namespace and service account."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterator, Mapping
from typing import Any, Final

from policies.rules.aws import IAM_POLICY, ROLE, ROLE_POLICY, ROLE_POLICY_ATTACHMENT
from policies.rules.aws import public_principal as _public_principal
from policies.rules.common import (
    CRITICAL,
    MANDATORY,
    Config,
    Resource,
    as_list,
    dig,
    is_map,
    json_doc,
    resource_rule,
    statements,
)


def _policy_documents(resource: Resource) -> Iterator[Mapping[str, Any] | None]:
    if resource.type in (ROLE_POLICY, IAM_POLICY):
        yield json_doc(resource.props.get("policy"))
    elif resource.type == ROLE:
        for inline in as_list(resource.props.get("inlinePolicies")):
            if is_map(inline):
                yield json_doc(inline.get("policy"))


def _check_iam_wildcards(resource: Resource, config: Config) -> Iterator[str]:
    allowed = set(config["allowedServiceWildcards"])
    for document in _policy_documents(resource):
        for statement in statements(document):
            if statement.get("Effect") != "Allow":
                continue
            actions = [str(a) for a in as_list(statement.get("Action"))]
            resources = [str(r) for r in as_list(statement.get("Resource"))]
            if statement.get("NotAction") is not None:
                yield "Allow with NotAction grants everything not listed"
            for action in actions:
                if action == "*":
                    yield "Action '*' grants every AWS API"
                elif action.endswith(":*") and "*" in resources and action not in allowed:
                    yield f"Action {action!r} on Resource '*' grants the whole service"


def _check_iam_admin(resource: Resource, config: Config) -> Iterator[str]:
    forbidden = {str(name) for name in config["forbiddenManagedPolicies"]}
    arns = (
        as_list(resource.props.get("managedPolicyArns"))
        if resource.type == ROLE
        else [resource.props.get("policyArn")]
    )
    for arn in arns:
        if isinstance(arn, str) and arn.rsplit("/", 1)[-1] in forbidden:
            yield f"managed policy {arn} gives administrative rights"


#: GitHub Actions' OIDC issuer (team job-stack deploy roles,
#: components/platform/tenancy/team_deploy.py).
GITHUB_OIDC_HOST = "token.actions.githubusercontent.com"


def _github_trust_problems(condition: Mapping[str, Any]) -> Iterator[str]:
    """GitHub OIDC trusts name exact subjects of one repository (`repo:<owner>/<repo>:...`,
    no wildcard: any repository on GitHub can mint a token for this issuer) and the STS
    audience."""
    equals = dig(condition, "StringEquals") or {}
    subs = [str(v) for k, v in equals.items() if str(k).endswith(":sub") for v in as_list(v)]
    if not subs:
        yield "GitHub OIDC trust has no StringEquals condition on the token's `sub`"
    for text in subs:
        if "*" in text or "?" in text or not re.match(r"^repo:[^/:]+/[^/:]+:.+$", text):
            yield f"GitHub OIDC trust `sub` {text!r} is not one exact repository subject"
    if dig(equals, f"{GITHUB_OIDC_HOST}:aud") != "sts.amazonaws.com":
        yield "GitHub OIDC trust has no StringEquals condition on `aud` (sts.amazonaws.com)"


def _trust_problems(statement: Mapping[str, Any], config: Config) -> Iterator[str]:
    principal = statement.get("Principal")
    if _public_principal(principal):
        yield "trust policy allows Principal '*'"
        return
    if not is_map(principal):
        return
    condition = statement.get("Condition") or {}
    federated = [str(p) for p in as_list(principal.get("Federated"))]
    if any(p.endswith(f":oidc-provider/{GITHUB_OIDC_HOST}") for p in federated):
        yield from _github_trust_problems(condition)
    elif any(":oidc-provider/" in p for p in federated):
        equals = dig(condition, "StringEquals") or {}
        subs = [v for k, v in equals.items() if str(k).endswith(":sub")]
        auds = [v for k, v in equals.items() if str(k).endswith(":aud")]
        if not subs:
            yield "IRSA trust has no StringEquals condition on the token's `sub`"
        for sub in subs:
            for value in as_list(sub):
                text = str(value)
                if "*" in text or not text.startswith("system:serviceaccount:"):
                    yield f"IRSA trust `sub` {text!r} is not one exact service account"
                elif not any(fnmatch.fnmatch(text, p) for p in config["allowedServiceAccounts"]):
                    yield f"IRSA trust `sub` {text!r} is not in allowedServiceAccounts"
        if not auds:
            yield "IRSA trust has no StringEquals condition on `aud` (sts.amazonaws.com)"
    services = [str(s) for s in as_list(principal.get("Service"))]
    if "pods.eks.amazonaws.com" in services and not dig(
        condition, "StringEquals", "aws:SourceAccount"
    ):
        yield "Pod Identity trust has no aws:SourceAccount condition"


#: The session tags EKS Pod Identity adds to every AssumeRole and that pin a role to one cluster,
#: namespace and service account (EKS user guide pod-id-role / pod-id-abac; the platform's one
#: builder is components/platform/cluster/iam.py pod_identity_trust_policy).
POD_IDENTITY_PINS: Final = (
    "aws:RequestTag/eks-cluster-name",
    "aws:RequestTag/kubernetes-namespace",
    "aws:RequestTag/kubernetes-service-account",
)


def _check_pod_identity_pinned(resource: Resource, _config: Config) -> Iterator[str]:
    for statement in statements(json_doc(resource.props.get("assumeRolePolicy"))):
        principal = statement.get("Principal")
        if statement.get("Effect") != "Allow" or not is_map(principal):
            continue
        if "pods.eks.amazonaws.com" not in [str(s) for s in as_list(principal.get("Service"))]:
            continue
        equals = dig(statement.get("Condition") or {}, "StringEquals") or {}
        for key in POD_IDENTITY_PINS:
            value = equals.get(key)
            if not isinstance(value, str) or not value or "*" in value or "?" in value:
                yield (
                    f"Pod Identity trust without StringEquals {key}: any cluster, namespace or "
                    "service account of the account could be associated with the role"
                )


def _check_iam_trust(resource: Resource, config: Config) -> Iterator[str]:
    for statement in statements(json_doc(resource.props.get("assumeRolePolicy"))):
        if statement.get("Effect") == "Allow":
            yield from _trust_problems(statement, config)


POLICIES = [
    resource_rule(
        name="gpu-platform-iam-no-wildcard-permissions",
        description="No IAM policy allows Action '*', NotAction, or a service-wide wildcard "
        "('s3:*') on Resource '*'.",
        types=(ROLE, ROLE_POLICY, IAM_POLICY),
        check=_check_iam_wildcards,
        severity=CRITICAL,
        enforcement=MANDATORY,
        remediation="List the actions the workload needs and scope Resource to its own ARNs "
        "(e.g. the team's bucket and prefix).",
        config={
            "allowedServiceWildcards": {
                "type": "array",
                "items": {"type": "string"},
                "default": [],
                "description": "Service wildcards ('ec2:Describe*' style excepted) allowed on *.",
            }
        },
    ),
    resource_rule(
        name="gpu-platform-iam-no-admin-policies",
        description="No role (node, controller or workload) carries an administrative managed "
        "policy.",
        types=(ROLE, ROLE_POLICY_ATTACHMENT),
        check=_check_iam_admin,
        severity=CRITICAL,
        enforcement=MANDATORY,
        remediation="Replace the managed policy with a scoped inline policy.",
        config={
            "forbiddenManagedPolicies": {
                "type": "array",
                "items": {"type": "string"},
                "default": [
                    "AdministratorAccess",
                    "PowerUserAccess",
                    "IAMFullAccess",
                    "AmazonS3FullAccess",
                    "AmazonEC2FullAccess",
                ],
            }
        },
    ),
    resource_rule(
        name="gpu-platform-iam-trust-scoped",
        description="Role trust policies never trust '*'; IRSA trusts name exactly one service "
        "account and the STS audience; Pod Identity trusts pin the source account.",
        types=(ROLE,),
        check=_check_iam_trust,
        severity=CRITICAL,
        enforcement=MANDATORY,
        remediation="Build trust documents with components/platform/cluster/iam.py "
        "(irsa_trust_policy, "
        "pod_identity_trust_policy).",
        config={
            "allowedServiceAccounts": {
                "type": "array",
                "items": {"type": "string"},
                "default": ["system:serviceaccount:*"],
                "description": "fnmatch patterns of `sub` values IRSA roles may trust.",
            }
        },
    ),
    resource_rule(
        name="gpu-platform-iam-pod-identity-pinned",
        description="A role EKS Pod Identity may assume is pinned to one cluster, namespace and "
        "service account (session tags eks-cluster-name, kubernetes-namespace, "
        "kubernetes-service-account).",
        types=(ROLE,),
        check=_check_pod_identity_pinned,
        severity=CRITICAL,
        enforcement=MANDATORY,
        remediation="Build the trust with components/platform/cluster/iam.py "
        "pod_identity_trust_policy "
        "(cluster_name, namespace and service_account are required).",
    ),
]
