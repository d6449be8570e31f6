"""Team deploy identity: roles trusted by one GitHub repository, EKS access scoped to the team's
namespace, nothing cluster-wide (components/platform/tenancy/team_deploy.py)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from components.config import TeamDeploy
from components.platform.tenancy.team_deploy import (
    EDIT_POLICY,
    VIEW_POLICY,
    github_subjects,
    github_trust_policy,
)
from synth.harness import Registration, SynthResult
from tests.conftest import stack_values

ASSOCIATION = "aws:eks/accessPolicyAssociation:AccessPolicyAssociation"
ENTRY = "aws:eks/accessEntry:AccessEntry"
ROLE = "aws:iam/role:Role"
POLICY = "aws:iam/rolePolicy:RolePolicy"


def _identity(stack: SynthResult, team: str) -> list[Registration]:
    prefix = f"team-{team}-jobs"
    return [r for r in stack.resources if r.name.startswith(prefix)]


@pytest.mark.parametrize(("stack_name", "team"), [("dev", "research"), ("prod", "pretrain")])
def test_team_identity_is_scoped_to_the_team_namespace(
    stack_name: str, team: str, request: pytest.FixtureRequest
) -> None:
    stack: SynthResult = request.getfixturevalue(stack_name)
    resources = _identity(stack, team)
    associations = [r for r in resources if r.type == ASSOCIATION]
    assert len(associations) == 2
    assert {a.inputs["policyArn"] for a in associations} == {EDIT_POLICY, VIEW_POLICY}
    for association in associations:
        assert association.inputs["accessScope"] == {
            "type": "namespace",
            "namespaces": [f"team-{team}"],
        }
    # Nothing else grants the roles anything: no other access entries, and one IAM policy, the
    # deploy role's, for the team's own images (push to its repository, sign with the key).
    assert {r.type for r in resources} == {
        "gpu-platform:teams:TeamDeployIdentity",
        ROLE,
        ENTRY,
        ASSOCIATION,
        POLICY,
    }
    roles = {r.inputs["name"] for r in resources if r.type == ROLE}
    attached = [
        r
        for r in stack.resources
        if r.type.startswith("aws:iam/") and r.type != ROLE and _names_role(r, roles)
    ]
    assert [r.name for r in attached] == [f"team-{team}-jobs-deploy-images"]


def test_the_deploy_role_pushes_to_its_teams_repository_and_signs_with_the_platform_key(
    prod: SynthResult,
) -> None:
    (policy,) = [r for r in prod.of_type(POLICY) if r.name == "team-research-jobs-deploy-images"]
    statements = {s["Sid"]: s for s in json.loads(policy.inputs["policy"])["Statement"]}
    assert statements["RegistryLogin"]["Resource"] == "*"  # no resource-level scope exists
    assert statements["RegistryLogin"]["Action"] == "ecr:GetAuthorizationToken"
    push = statements["PushTeamImages"]
    assert push["Resource"].endswith(":repository/gpu-prod/teams/research")
    assert "ecr:PutImage" in push["Action"] and not any("*" in a for a in push["Action"])
    sign = statements["SignWithThePlatformKey"]
    assert sign["Action"] == ["kms:DescribeKey", "kms:GetPublicKey", "kms:Sign"]
    assert sign["Resource"].startswith("arn:aws:kms:") and sign["Resource"].endswith("-mock-key")
    repositories = {r.inputs["name"] for r in prod.of_type("aws:ecr/repository:Repository")}
    assert {"gpu-prod/teams/research", "gpu-prod/teams/pretrain"} <= repositories
    teams = prod.outputs["jobPlatform"]["teams"]
    assert teams["research"]["imageRepository"].endswith("/gpu-prod/teams/research")


def _names_role(resource: Registration, roles: set[str]) -> bool:
    return any(str(resource.inputs.get(k)) in roles for k in ("role", "roles"))


def test_only_teams_with_deploy_config_get_an_identity(dev: SynthResult) -> None:
    assert _identity(dev, "research")
    assert _identity(dev, "applied") == []


def test_team_identity_can_create_nothing_cluster_scoped(dev: SynthResult) -> None:
    """What the identity may do in Kubernetes: its access policies (namespace-scoped, above) and
    the RBAC of the group its deploy entry carries. That group is bound only by RoleBindings in
    the team's namespace to a namespaced Role: no ClusterRoleBinding names it."""
    (entry,) = [
        r for r in _identity(dev, "research") if r.type == ENTRY and r.inputs["kubernetesGroups"]
    ]
    (group,) = entry.inputs["kubernetesGroups"]
    assert group == "gpu-platform:team-research"
    bindings = [
        r
        for r in dev.resources
        if r.type.endswith(("v1:RoleBinding", "v1:ClusterRoleBinding"))
        and any(s.get("name") == group for s in r.inputs.get("subjects", []))
    ]
    assert bindings
    for binding in bindings:
        assert binding.type == "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
        assert binding.inputs["metadata"]["namespace"] == "team-research"
        assert binding.inputs["roleRef"]["kind"] == "Role"
    preview = [r for r in _identity(dev, "research") if r.type == ENTRY and r is not entry]
    assert [p.inputs.get("kubernetesGroups", []) for p in preview] == [[]]


def test_roles_trust_only_the_teams_repository(dev: SynthResult) -> None:
    roles = {r.name: r for r in _identity(dev, "research") if r.type == ROLE}
    assert set(roles) == {"team-research-jobs-deploy", "team-research-jobs-preview"}
    for name, role in roles.items():
        (statement,) = json.loads(role.inputs["assumeRolePolicy"])["Statement"]
        assert statement["Principal"]["Federated"].endswith(
            ":oidc-provider/token.actions.githubusercontent.com"
        )
        equals = statement["Condition"]["StringEquals"]
        assert set(statement["Condition"]) == {"StringEquals"}
        assert equals["token.actions.githubusercontent.com:aud"] == "sts.amazonaws.com"
        want = (
            ["repo:gpu-platform/gpu-platform:pull_request"]
            if name.endswith("preview")
            else ["repo:gpu-platform/gpu-platform:environment:jobs-research-dev"]
        )
        assert equals["token.actions.githubusercontent.com:sub"] == want


def test_subjects_and_trust_are_exact() -> None:
    deploy = TeamDeploy.model_validate(
        {"githubRepo": "org/ml", "branches": ["main", "release/1"], "environments": ["prod"]}
    )
    assert github_subjects(deploy, preview=False) == [
        "repo:org/ml:ref:refs/heads/main",
        "repo:org/ml:ref:refs/heads/release/1",
        "repo:org/ml:environment:prod",
    ]
    assert github_subjects(deploy, preview=True) == ["repo:org/ml:pull_request"]
    policy = github_trust_policy("111122223333", deploy, preview=True)
    (statement,) = policy["Statement"]
    assert statement["Principal"] == {
        "Federated": "arn:aws:iam::111122223333:oidc-provider/token.actions.githubusercontent.com"
    }
    assert not any("*" in s for s in github_subjects(deploy, preview=False))


@pytest.mark.parametrize(
    ("deploy", "path", "allowed"),
    [
        (
            {"githubRepo": "org/ml", "branches": []},
            "gpu-platform:teams[0].deploy.branches",
            "at least one branch or environment",
        ),
        ({"githubRepo": "not a repo"}, "gpu-platform:teams[0].deploy.githubRepo", "should match"),
    ],
)
def test_deploy_config_errors_name_the_key(
    deploy: dict[str, Any],
    path: str,
    allowed: str,
    expect_config_error: Callable[[dict[str, Any], str, str], None],
) -> None:
    cfg = stack_values("dev")
    cfg["gpu-platform:teams"][0]["deploy"] = deploy
    expect_config_error(cfg, path, allowed)
