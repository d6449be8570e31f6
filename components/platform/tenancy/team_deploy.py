"""Team deploy identity: the IAM roles a team's job stack (jobs/) runs with in CI, and what they
may do in the cluster — the team's namespace, nothing cluster-wide.

Per team with `deploy:` set:
- a deploy role, assumable only by GitHub Actions OIDC tokens of `deploy.githubRepo` on the
  listed branches or environments; its EKS access entry carries the team's Kubernetes group
  (so the team's `team-member` Role, which covers the TrainJob and Volcano Job CRDs, applies)
  and `AmazonEKSEditPolicy` associated with scope `namespace` = the team's namespace only;
- a preview role for the repository's pull requests with `AmazonEKSViewPolicy`, same scope.
  pulumi-kubernetes previews need `patch` for a server-side dry run and fall back to a
  client-side preview when it is forbidden (pulumi/pulumi-kubernetes#2213, #2419), so a
  read-only role previews without being able to change anything.
The preview role has no IAM policy: the job stack reads the platform's kubeconfig from its stack
output and `aws eks get-token` signs with STS only (no IAM permission needed). The deploy role
has one policy, for the team's own images (docs/images.md, "A custom image"): push to the team's
ECR repository `<cluster>/teams/<team>` (the ECR user guide's push actions, on that repository
only; `ecr:GetAuthorizationToken` has no resource-level scope) and sign with the platform key
(`kms:Sign`, `kms:GetPublicKey`, `kms:DescribeKey`: what cosign's AWS KMS signer calls, on that
key only), so prod's admission, which trusts the platform key, admits what the team's CI built.

EKS facts: access policy scopes are `cluster` or `namespace` with a list of namespaces
(https://docs.aws.amazon.com/eks/latest/APIReference/API_AccessScope.html); the cluster uses
authentication mode API (components/platform/cluster/cluster.py). GitHub OIDC subjects are
`repo:<owner>/<repo>:ref:refs/heads/<branch>`, `...:environment:<name>` and `...:pull_request`,
audience `sts.amazonaws.com` (docs.github.com, "Configuring OpenID Connect in Amazon Web
Services"); the account's provider for `token.actions.githubusercontent.com` is created once per
account, outside this program (the platform's own CI uses it too).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import pulumi
import pulumi_aws as aws

from components.config import TeamConfig, TeamDeploy
from components.contract.platform_contract import deploy_role_name, preview_role_name
from components.resource_options import child_options

GITHUB_OIDC_HOST: Final = "token.actions.githubusercontent.com"
#: Pushing an image (ECR user guide, "Required IAM permissions for pushing an image").
ECR_PUSH_ACTIONS: Final = (
    "ecr:BatchCheckLayerAvailability",
    "ecr:BatchGetImage",
    "ecr:CompleteLayerUpload",
    "ecr:DescribeImages",
    "ecr:GetDownloadUrlForLayer",
    "ecr:InitiateLayerUpload",
    "ecr:PutImage",
    "ecr:UploadLayerPart",
)
#: What cosign's AWS KMS signer calls (sigstore/sigstore pkg/signature/kms/aws client).
KMS_SIGN_ACTIONS: Final = ("kms:DescribeKey", "kms:GetPublicKey", "kms:Sign")
EDIT_POLICY: Final = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSEditPolicy"
VIEW_POLICY: Final = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSViewPolicy"


def github_subjects(deploy: TeamDeploy, *, preview: bool) -> list[str]:
    """OIDC `sub` values that may assume the role: pull requests for previews; the listed
    branches and environments for deploys."""
    repo = f"repo:{deploy.github_repo}"
    if preview:
        return [f"{repo}:pull_request"]
    return [
        *(f"{repo}:ref:refs/heads/{branch}" for branch in deploy.branches),
        *(f"{repo}:environment:{env}" for env in deploy.environments),
    ]


def github_trust_policy(account_id: str, deploy: TeamDeploy, *, preview: bool) -> dict[str, Any]:
    """Trust policy: web identity from this account's GitHub OIDC provider, audience STS, the
    subjects of `github_subjects` exactly (StringEquals: no wildcard reaches another repo)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {
                    "Federated": f"arn:aws:iam::{account_id}:oidc-provider/{GITHUB_OIDC_HOST}"
                },
                "Action": "sts:AssumeRoleWithWebIdentity",
                "Condition": {
                    "StringEquals": {
                        f"{GITHUB_OIDC_HOST}:aud": "sts.amazonaws.com",
                        f"{GITHUB_OIDC_HOST}:sub": github_subjects(deploy, preview=preview),
                    }
                },
            }
        ],
    }


def image_policy(repository_arn: str, signing_key_arn: str | None) -> dict[str, Any]:
    """The deploy role's only policy: push to the team's repository, sign with the platform
    key (when admission trusts it)."""
    statements: list[dict[str, Any]] = [
        {
            "Sid": "RegistryLogin",
            "Effect": "Allow",
            "Action": "ecr:GetAuthorizationToken",
            "Resource": "*",
        },
        {
            "Sid": "PushTeamImages",
            "Effect": "Allow",
            "Action": list(ECR_PUSH_ACTIONS),
            "Resource": repository_arn,
        },
    ]
    if signing_key_arn is not None:
        statements.append(
            {
                "Sid": "SignWithThePlatformKey",
                "Effect": "Allow",
                "Action": list(KMS_SIGN_ACTIONS),
                "Resource": signing_key_arn,
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def namespace_scope(namespace: str) -> dict[str, Any]:
    """The only access scope a team identity gets: its own namespace."""
    return {"type": "namespace", "namespaces": [namespace]}


@dataclass(frozen=True)
class TeamDeployArgs:
    """Inputs of a team's deploy identity."""

    team: TeamConfig
    deploy: TeamDeploy
    cluster_name: pulumi.Input[str]
    #: The cluster's literal name (role names derive from it, so the facts can name the ARN).
    cluster_config_name: str
    account_id: str
    tags: dict[str, str]
    #: The team's image repository (Registry.team_repositories) and the platform signing key.
    image_repository_arn: pulumi.Input[str] | None = None
    signing_key_arn: pulumi.Input[str] | None = None


class TeamDeployIdentity(pulumi.ComponentResource):
    """Deploy and preview roles of one team's job stack, confined to the team's namespace."""

    deploy_role: aws.iam.Role
    preview_role: aws.iam.Role

    def __init__(
        self, name: str, args: TeamDeployArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:teams:TeamDeployIdentity", name, None, opts)
        roles: dict[str, aws.iam.Role] = {}
        for kind, preview, policy, role_name in (
            ("deploy", False, EDIT_POLICY, deploy_role_name),
            ("preview", True, VIEW_POLICY, preview_role_name),
        ):
            role = self._github_role(
                f"{name}-{kind}",
                args,
                kind=kind,
                preview=preview,
                role_name=role_name(args.cluster_config_name, args.team.name),
            )
            self._namespace_access(f"{name}-{kind}", args, role, preview=preview, policy=policy)
            roles[kind] = role
        self.deploy_role = roles["deploy"]
        self.preview_role = roles["preview"]
        if args.image_repository_arn is not None:
            self._image_push(name, args, args.image_repository_arn)
        self.register_outputs(
            {"deployRoleArn": self.deploy_role.arn, "previewRoleArn": self.preview_role.arn}
        )

    def _github_role(
        self, name: str, args: TeamDeployArgs, *, kind: str, preview: bool, role_name: str
    ) -> aws.iam.Role:
        """The role the team's CI assumes (`kind`: deploy or preview) with a GitHub OIDC token."""
        team = args.team
        return aws.iam.Role(
            name,
            name=role_name,
            description=f"Job stack {kind} of team {team.name}: namespace {team.namespace}",
            assume_role_policy=json.dumps(
                github_trust_policy(args.account_id, args.deploy, preview=preview)
            ),
            max_session_duration=3600,
            tags=args.tags,
            opts=child_options(self),
        )

    def _namespace_access(
        self, name: str, args: TeamDeployArgs, role: aws.iam.Role, *, preview: bool, policy: str
    ) -> None:
        """The role's EKS access entry and its access policy, scoped to the team's namespace."""
        team = args.team
        entry = aws.eks.AccessEntry(
            name,
            cluster_name=args.cluster_name,
            principal_arn=role.arn,
            type="STANDARD",
            # The team's group binds its namespaced `team-member` Role (CRDs included);
            # previews get the view policy alone.
            kubernetes_groups=[] if preview else [team.group],
            tags=args.tags,
            opts=child_options(self),
        )
        aws.eks.AccessPolicyAssociation(
            name,
            cluster_name=args.cluster_name,
            principal_arn=role.arn,
            policy_arn=policy,
            access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(
                **namespace_scope(team.namespace)
            ),
            opts=child_options(self, depends_on=[entry]),
        )

    def _image_push(
        self, name: str, args: TeamDeployArgs, repository_arn: pulumi.Input[str]
    ) -> None:
        """The deploy role may push to the team's repository and sign with the platform key."""
        aws.iam.RolePolicy(
            f"{name}-deploy-images",
            role=self.deploy_role.name,
            policy=pulumi.Output.all(repository_arn, args.signing_key_arn).apply(
                lambda arns: json.dumps(image_policy(arns[0], arns[1]))
            ),
            opts=child_options(self),
        )


def deploy_identity(
    team: TeamConfig,
    cluster_config_name: str,
    cluster_name: pulumi.Input[str],
    account_id: str,
    tags: dict[str, str],
    *,
    image_repository_arn: pulumi.Input[str] | None = None,
    signing_key_arn: pulumi.Input[str] | None = None,
) -> TeamDeployIdentity | None:
    """The team's deploy identity when its config asks for one (`teams[].deploy`)."""
    if team.deploy is None:
        return None
    return TeamDeployIdentity(
        f"team-{team.name}-jobs",
        TeamDeployArgs(
            team=team,
            deploy=team.deploy,
            cluster_name=cluster_name,
            cluster_config_name=cluster_config_name,
            account_id=account_id,
            tags=tags,
            image_repository_arn=image_repository_arn,
            signing_key_arn=signing_key_arn,
        ),
    )
