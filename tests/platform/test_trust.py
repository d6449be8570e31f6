"""Every cloud identity of the synthesized stacks is pinned to its cluster or repository: each
role EKS Pod Identity may assume carries the cluster, namespace and service-account session-tag
pins (and matches a PodIdentityAssociation of that cluster), and each team CI role trusts only
exact GitHub subjects of its repository (a branch, an environment or pull requests)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from components.platform.cluster.iam import POD_IDENTITY_PRINCIPAL
from policies.rules.iam import POD_IDENTITY_PINS
from synth.harness import SynthResult

ROLE = "aws:iam/role:Role"
ASSOCIATION = "aws:eks/podIdentityAssociation:PodIdentityAssociation"


def _statements(role: Any) -> list[dict[str, Any]]:
    doc = role.inputs["assumeRolePolicy"]
    parsed: dict[str, Any] = json.loads(doc) if isinstance(doc, str) else doc
    statements = parsed["Statement"]
    return statements if isinstance(statements, list) else [statements]


def _pod_identity_roles(result: SynthResult) -> list[tuple[Any, dict[str, Any]]]:
    out = []
    for role in result.of_type(ROLE):
        for statement in _statements(role):
            services = statement.get("Principal", {}).get("Service", [])
            if POD_IDENTITY_PRINCIPAL in ([services] if isinstance(services, str) else services):
                out.append((role, statement))
    return out


def unpinned(statement: dict[str, Any], cluster: str) -> list[str]:
    """What a Pod Identity trust statement lacks to be pinned to `cluster`."""
    equals = statement.get("Condition", {}).get("StringEquals", {})
    missing = [key for key in POD_IDENTITY_PINS if not equals.get(key)]
    if equals.get("aws:RequestTag/eks-cluster-name") not in (None, cluster):
        missing.append(f"eks-cluster-name is not {cluster}")
    wild = [key for key in POD_IDENTITY_PINS if any(c in str(equals.get(key, "")) for c in "*?")]
    return missing + wild


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_pod_identity_role_is_pinned_to_the_cluster(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    cluster = result.config.cluster.name
    roles = _pod_identity_roles(result)
    # Karpenter, EBS CSI, the teams' trainers, Kyverno, logging, ESO, EFS/FSx CSI...
    assert len(roles) >= 5
    for role, statement in roles:
        assert unpinned(statement, cluster) == [], role.name
    # Each pinned (namespace, service account) is one a PodIdentityAssociation of this stack
    # (or an add-on's) hands the role to.
    associations = {
        (a.inputs["namespace"], a.inputs["serviceAccount"]) for a in result.of_type(ASSOCIATION)
    }
    pinned = {
        (
            s["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-namespace"],
            s["Condition"]["StringEquals"]["aws:RequestTag/kubernetes-service-account"],
        )
        for _, s in roles
    }
    assert associations <= pinned


def test_the_pin_check_catches_an_account_only_trust(dev: SynthResult) -> None:
    _, statement = _pod_identity_roles(dev)[0]
    loose = json.loads(json.dumps(statement))
    equals = loose["Condition"]["StringEquals"]
    equals.pop("aws:RequestTag/eks-cluster-name")
    assert unpinned(loose, dev.config.cluster.name)
    equals["aws:RequestTag/eks-cluster-name"] = "another-cluster"
    assert unpinned(loose, dev.config.cluster.name)


EXACT_SUBJECT = re.compile(
    r"^repo:[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+:(ref:refs/heads/[A-Za-z0-9_./-]+|environment:[^*?]+|pull_request)$"
)


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_team_ci_roles_trust_exact_repository_subjects(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    repos = {t.name: t.deploy.github_repo for t in result.config.teams if t.deploy}
    seen = 0
    for role in result.of_type(ROLE):
        for statement in _statements(role):
            federated = str(statement.get("Principal", {}).get("Federated", ""))
            if not federated.endswith("token.actions.githubusercontent.com"):
                continue
            seen += 1
            condition = statement["Condition"]
            assert set(condition) == {"StringEquals"}, role.name  # no StringLike
            equals = condition["StringEquals"]
            subs = equals["token.actions.githubusercontent.com:sub"]
            subs = [subs] if isinstance(subs, str) else subs
            assert subs and all(EXACT_SUBJECT.match(s) for s in subs), subs
            assert any(all(s.startswith(f"repo:{r}:") for s in subs) for r in repos.values())
            assert equals["token.actions.githubusercontent.com:aud"] == "sts.amazonaws.com"
    assert seen >= 2 * len(repos)
