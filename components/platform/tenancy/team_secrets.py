"""Team secrets: External Secrets Operator (chart 2.9.0) syncs AWS Secrets Manager
`teams/<team>/*` into each team namespace through a namespaced `SecretStore`.

Why ESO over the Secrets Store CSI driver + AWS provider: the CSI driver fetches every secret at
every pod mount, so a 32-node gang start is 32 x N Secrets Manager calls and a throttled call
blocks a pod; its DaemonSets also need privileged hostPath mounts. ESO syncs once per refresh
into a Secret (etcd is KMS-encrypted by the cluster's secrets key) and pods mount it like any
Secret, which PSS restricted allows (docs/security.md#secrets).

Identity: the ESO controller gets an IAM role by EKS Pod Identity whose only right is to assume
the per-team roles; each team's SecretStore names its team's role, which may read
`arn:...:secret:teams/<team>/*` only (ESO's AWS provider assumes `spec.provider.aws.role` with
the controller's SDK-default credentials: external-secrets/external-secrets@helm-chart-2.9.0:
apis/externalsecrets/v1/secretstore_aws_types.go; IAM actions per its docs/provider/
aws-access.md). Teams get no RBAC on external-secrets.io (components/platform/tenancy/teams.py
role_rules), so only this program writes stores, and ClusterSecretStores are switched off in the
controller: no team can point a store at another team's role.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import addons
from components.config.security import SECRET_STORE_NAME, SECRETS_PATH_PREFIX, SecretsConfig
from components.platform.addons import helm_release
from components.platform.cluster import iam
from components.platform.cluster.handles import ClusterHandles
from components.resource_options import child_options

if TYPE_CHECKING:
    from components.config import StackConfig, TeamConfig
    from components.platform.cluster.iam import AwsAccount

ESO_API: Final = "external-secrets.io/v1"
ESO_SERVICE_ACCOUNT: Final = "external-secrets"
#: Read-only Secrets Manager actions ESO's AWS provider uses (docs/provider/aws-access.md).
READ_ACTIONS: Final = (
    "secretsmanager:GetSecretValue",
    "secretsmanager:DescribeSecret",
    "secretsmanager:ListSecretVersionIds",
    "secretsmanager:GetResourcePolicy",
)


def team_secret_arn(account: AwsAccount, team: str) -> str:
    """Secrets Manager appends `-<6 random chars>` to a secret's ARN: the trailing `*` covers it,
    the `/` before it keeps `teams/research/` from matching `teams/research2/`."""
    return (
        f"arn:{account.partition}:secretsmanager:{account.region}:{account.account_id}:"
        f"secret:{SECRETS_PATH_PREFIX}/{team}/*"
    )


def team_read_policy(account: AwsAccount, team: str) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ReadTeamSecrets",
                "Effect": "Allow",
                "Action": list(READ_ACTIONS),
                "Resource": team_secret_arn(account, team),
            },
            {
                # Secrets encrypted with a customer key: decrypt only through Secrets Manager.
                "Sid": "DecryptThroughSecretsManager",
                "Effect": "Allow",
                "Action": "kms:Decrypt",
                "Resource": "*",
                "Condition": {
                    "StringEquals": {
                        "kms:ViaService": f"secretsmanager.{account.region}.amazonaws.com"
                    }
                },
            },
        ],
    }


def team_trust_policy(controller_role_arn: str) -> dict[str, Any]:
    """Only the ESO controller's role may assume a team's secrets role."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Principal": {"AWS": controller_role_arn},
                "Action": ["sts:AssumeRole", "sts:TagSession"],
            }
        ],
    }


def controller_policy(role_arns: list[str]) -> dict[str, Any]:
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Effect": "Allow",
                "Action": ["sts:AssumeRole", "sts:TagSession"],
                "Resource": role_arns,
            }
        ],
    }


def secret_store(namespace: str, region: str, role_arn: str) -> dict[str, Any]:
    return {
        "apiVersion": ESO_API,
        "kind": "SecretStore",
        "metadata": {"name": SECRET_STORE_NAME, "namespace": namespace},
        "spec": {
            "provider": {"aws": {"service": "SecretsManager", "region": region, "role": role_arn}}
        },
    }


def eso_values() -> dict[str, Any]:
    """CRDs from the chart; no cluster-wide stores (a team could read through one); the service
    account named for the Pod Identity association."""
    return {
        "installCRDs": True,
        "processClusterStore": False,
        "processClusterExternalSecret": False,
        "serviceAccount": {"name": ESO_SERVICE_ACCOUNT},
    }


def _store_spec(role_arn: pulumi.Output[str], namespace: str, region: str) -> pulumi.Output[Any]:
    return role_arn.apply(lambda arn: secret_store(namespace, region, arn)["spec"])


@dataclass(frozen=True)
class TeamSecretsArgs:
    """Inputs of the TeamSecrets component."""

    config: SecretsConfig
    teams: list[TeamConfig]
    account: AwsAccount
    cluster_name: pulumi.Input[str]
    #: The literal cluster name the controller role's trust is pinned to.
    physical_cluster_name: str
    k8s_provider: k8s.Provider
    system_nodes: pulumi.Resource
    #: team name -> its Team component (the namespace must exist before its store).
    team_components: Mapping[str, pulumi.Resource]
    tags: dict[str, str]

    @classmethod
    def of(
        cls,
        cfg: StackConfig,
        cluster: ClusterHandles,
        account: AwsAccount,
        tags: dict[str, str],
        team_components: Mapping[str, pulumi.Resource],
    ) -> TeamSecretsArgs:
        return cls(
            config=cfg.security.secrets,
            teams=list(cfg.teams),
            account=account,
            cluster_name=cluster.name,
            physical_cluster_name=cluster.physical_name,
            k8s_provider=cluster.k8s_provider,
            system_nodes=cluster.system_node_group,
            team_components=team_components,
            tags=tags,
        )


class TeamSecrets(pulumi.ComponentResource):
    """ESO, its controller identity, and per team an IAM role and a SecretStore."""

    #: team name -> its SecretStore (jobs that declare secrets wait for it).
    stores: dict[str, pulumi.Resource]

    def __init__(
        self, name: str, args: TeamSecretsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:security:TeamSecrets", name, None, opts)
        self.stores = {}
        if not args.config.enabled:
            self.register_outputs({})
            return
        aws_opts = child_options(self)
        controller = iam.pod_identity_role(
            f"{name}-eso-controller",
            account_id=args.account.account_id,
            cluster_name=args.physical_cluster_name,
            namespace=args.config.namespace,
            service_account=ESO_SERVICE_ACCOUNT,
            tags=args.tags,
            opts=aws_opts,
        )
        team_roles = self._team_roles(name, args, controller)
        association = self._controller_access(name, args, controller, team_roles)
        release = self._eso_release(name, args, association)
        self._secret_stores(name, args, team_roles, release)
        self.register_outputs({"stores": sorted(self.stores)})

    def _controller_access(
        self,
        name: str,
        args: TeamSecretsArgs,
        controller: aws.iam.Role,
        team_roles: dict[str, aws.iam.Role],
    ) -> aws.eks.PodIdentityAssociation:
        """The controller may assume the team roles (only them), through Pod Identity."""
        aws_opts = child_options(self)
        aws.iam.RolePolicy(
            f"{name}-eso-controller-assume",
            role=controller.id,
            policy=pulumi.Output.all(*(r.arn for r in team_roles.values())).apply(
                lambda arns: json.dumps(controller_policy(list(arns)))
            ),
            opts=aws_opts,
        )
        return aws.eks.PodIdentityAssociation(
            f"{name}-eso-controller",
            cluster_name=args.cluster_name,
            namespace=args.config.namespace,
            service_account=ESO_SERVICE_ACCOUNT,
            role_arn=controller.arn,
            tags=args.tags,
            opts=aws_opts,
        )

    def _eso_release(
        self, name: str, args: TeamSecretsArgs, association: aws.eks.PodIdentityAssociation
    ) -> k8s.helm.v3.Release:
        """The External Secrets Operator chart, once its nodes and identity exist."""
        return helm_release(
            f"{name}-eso",
            addons.EXTERNAL_SECRETS,
            version=args.config.chart_version,
            namespace=args.config.namespace,
            values=eso_values(),
            opts=child_options(
                self,
                provider=args.k8s_provider,
                depends_on=[args.system_nodes, association],
            ),
        )

    def _secret_stores(
        self,
        name: str,
        args: TeamSecretsArgs,
        team_roles: dict[str, aws.iam.Role],
        release: k8s.helm.v3.Release,
    ) -> None:
        """Per team a SecretStore in its namespace that reads AWS as the team's role."""
        for team in args.teams:
            self.stores[team.name] = k8s.apiextensions.CustomResource(
                f"{name}-{team.name}-store",
                api_version=ESO_API,
                kind="SecretStore",
                metadata={"name": SECRET_STORE_NAME, "namespace": team.namespace},
                spec=_store_spec(team_roles[team.name].arn, team.namespace, args.account.region),
                opts=child_options(
                    self,
                    provider=args.k8s_provider,
                    depends_on=[release, args.team_components[team.name]],
                ),
            )

    def _team_roles(
        self, name: str, args: TeamSecretsArgs, controller: aws.iam.Role
    ) -> dict[str, aws.iam.Role]:
        """Per team a role only the ESO controller may assume, reading that team's secrets."""
        aws_opts = child_options(self)
        team_roles: dict[str, aws.iam.Role] = {}
        for team in args.teams:
            role = aws.iam.Role(
                f"{name}-{team.name}",
                assume_role_policy=controller.arn.apply(
                    lambda arn: json.dumps(team_trust_policy(arn))
                ),
                tags=args.tags,
                opts=aws_opts,
            )
            aws.iam.RolePolicy(
                f"{name}-{team.name}-read",
                role=role.id,
                policy=pulumi.Output.json_dumps(team_read_policy(args.account, team.name)),
                opts=aws_opts,
            )
            team_roles[team.name] = role
        return team_roles
