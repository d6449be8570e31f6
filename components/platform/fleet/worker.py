"""A platform stack as a fleet worker (docs/fleet.md): the identity its fleet's manager connects
with, and what the manager reads of it.

- The manager's ServiceAccount in Kueue's namespace: a ClusterRole to read (get, list, watch)
  Workloads and the dispatched job kinds cluster-wide, as MultiKueue's watches need
  (builders.manager_read_rules), and one to write them bound only in the fleet teams'
  namespaces (builders.manager_write_rules, a RoleBinding each), and a
  long-lived token per rotation key: a `kubernetes.io/service-account-token` Secret, which the
  API server fills and revokes with the Secret (Kubernetes "Manually create a long-lived API
  token for a ServiceAccount"). pulumi-kubernetes waits until the token is in the Secret's data
  before it reports the Secret created (pulumi/pulumi-kubernetes provider/pkg/await/awaiters.go
  `untilCoreV1SecretInitialized`, since #2048), and marks `data` secret. Why not an EKS IAM token:
  it lives 15 minutes and Kueue refuses the `exec` kubeconfig that would renew it
  (builders.py); why not a TokenRequest token: it expires, and nothing on the manager renews it.
  Rotation is the config's `fleet.tokenKeys` (two keys overlap, components/config/fleet.py).
- In every team namespace a ConfigMap (`gpu-platform-data`) with this region's bucket names
  (and, for reference, the fleet's trainer): a job the manager dispatched names its data through
  it, so the one object the manager mirrors resolves to local data wherever it lands. Its image
  it does not: that is one reference in every region (components/analysis/fleet_trainer.py).
- The manager's kubeconfig (endpoint, CA, token) as an AWS Secrets Manager secret in this
  region, which the manager's External Secrets Operator syncs into Kueue's namespace: never a
  stack output, never a Secret manifest with values. Its resource policy denies reading the
  value to every principal but the manager's ESO role (named from the fleet:
  builders.eso_role_name, the name the manager gives it), the principal running this `up` and
  `fleet.kubeconfigReaders` (builders.kubeconfig_secret_policy).
- `contract`: the worker's network, endpoint and secret ARN for the manager, and where the
  fleet's trainer comes from (its trainer home, the regions the home replicates it to, the key
  that signs it): a `WorkerContract` (components/contract/fleet_worker.py) built once its IDs
  and ARNs resolved, exported as `fleetWorker`.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import catalog
from components.config.cluster import ClusterConfig
from components.config.fleet import FleetWorkerConfig
from components.contract.fleet_worker import WorkerContract, WorkerTrainer
from components.contract.schema import resolved
from components.platform.cluster.handles import ClusterHandles, NetworkHandles
from components.platform.cluster.iam import AwsAccount
from components.platform.fleet import builders
from components.resource_options import child_options


@dataclass(frozen=True)
class FleetWorkerArgs:
    """Inputs of the FleetWorker component."""

    config: FleetWorkerConfig
    cluster_name: str
    region: str
    #: The account and partition the fleet lives in (the manager's ESO role is in it too).
    account_id: str
    partition: str
    #: The principal running `pulumi up` (iam.deploying_principal_arn): it writes the
    #: kubeconfig secret's versions and reads them back, so the secret's policy lets it read.
    deployer_arn: pulumi.Input[str]
    kubernetes_version: str
    #: The cluster's kubeconfig (pulumi-eks `kubeconfigJson`, secret): server and CA.
    kubeconfig: pulumi.Output[str]
    k8s_provider: k8s.Provider
    #: Kueue's release: its namespace and CRDs exist before the identity is granted.
    kueue_release: pulumi.Resource
    vpc_id: pulumi.Input[str]
    vpc_cidr: pulumi.Input[str]
    private_route_table_ids: Sequence[pulumi.Input[str]]
    #: The security group on the EKS control plane's ENIs (pulumi-eks `clusterSecurityGroupId`):
    #: the manager allows its VPC's CIDR in on 443 there.
    cluster_security_group_id: pulumi.Input[str]
    endpoint_public_access: bool
    #: team name -> (namespace, the team's component: the namespace exists after it).
    teams: Mapping[str, tuple[str, pulumi.Resource]] = field(default_factory=dict)
    #: purpose -> bucket name (this region's).
    buckets: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    #: The trainer this worker's runtimes run (`repo@sha256:...`), if it publishes one.
    trainer_image: pulumi.Input[str] | None = None
    #: The data buckets' KMS key (the manager's replication re-encrypts with it).
    kms_key_arn: pulumi.Input[str] | None = None
    #: The public key (PEM) of the key that signs the trainer this worker runs: its own
    #: platform key on the trainer home, the home's elsewhere (None: none is published).
    trainer_signing_key: pulumi.Input[str] | None = None
    #: What Kueue compares of this worker's ClusterTrainingRuntimes as rendered
    #: (components/training_jobs/manifests.py runtime_pod_sets): the manager checks they equal
    #: its own and every other worker's.
    runtime_pod_sets: Mapping[str, Any] = field(default_factory=dict)
    tags: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of(
        cls,
        config: FleetWorkerConfig,
        *,
        cluster: ClusterConfig,
        account: AwsAccount,
        deployer_arn: pulumi.Input[str],
        network: NetworkHandles,
        handles: ClusterHandles,
        kueue_release: pulumi.Resource,
        teams: Mapping[str, tuple[str, pulumi.Resource]],
        buckets: Mapping[str, pulumi.Input[str]],
        trainer_image: pulumi.Input[str] | None,
        kms_key_arn: pulumi.Input[str] | None,
        tags: dict[str, str],
        trainer_signing_key: pulumi.Input[str] | None = None,
        runtime_pod_sets: Mapping[str, Any] | None = None,
    ) -> FleetWorkerArgs:
        """The worker's slice of the config and what the manager needs of its network and
        cluster; a VPC the stack did not create is looked up (its CIDR, each private subnet's
        route table)."""
        assert handles.kubeconfig is not None and handles.cluster_security_group_id is not None
        cidr = network.vpc_cidr
        if cidr is None:
            cidr = aws.ec2.get_vpc_output(id=network.vpc_id).cidr_block
        tables = network.private_route_table_ids
        if tables is None:
            tables = route_table_ids(network.private_subnet_ids)
        return cls(
            config=config,
            cluster_name=cluster.name,
            region=account.region,
            account_id=account.account_id,
            partition=account.partition,
            deployer_arn=deployer_arn,
            kubernetes_version=cluster.kubernetes_version,
            kubeconfig=handles.kubeconfig,
            k8s_provider=handles.k8s_provider,
            kueue_release=kueue_release,
            vpc_id=network.vpc_id,
            vpc_cidr=cidr,
            private_route_table_ids=tables,
            cluster_security_group_id=handles.cluster_security_group_id,
            endpoint_public_access=cluster.endpoint_public_access,
            teams=teams,
            buckets=buckets,
            trainer_image=trainer_image,
            kms_key_arn=kms_key_arn,
            trainer_signing_key=trainer_signing_key,
            runtime_pod_sets=dict(runtime_pod_sets or {}),
            tags=tags,
        )


class FleetWorker(pulumi.ComponentResource):
    """The manager's grant on this cluster, the team data ConfigMaps and what the manager reads
    of the worker (`contract`, exported as `fleetWorker`)."""

    contract: pulumi.Output[WorkerContract]
    kubeconfig: pulumi.Output[str]
    kubeconfig_secret_arn: pulumi.Output[str]

    def __init__(
        self, name: str, args: FleetWorkerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:fleet:FleetWorker", name, None, opts)
        fleet = args.config.name
        identity = builders.manager_identity(fleet)
        k8s_opts = child_options(self, provider=args.k8s_provider, depends_on=[args.kueue_release])
        account = self._grant(name, identity, args, k8s_opts)
        tokens = [
            self._token(name, fleet, key, account, k8s_opts) for key in args.config.token_keys
        ]
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(args.kubeconfig, tokens[-1]).apply(
                lambda parts: builders.worker_kubeconfig(
                    args.cluster_name, *builders.endpoint_of(parts[0]), parts[1]
                )
            )
        )
        self.kubeconfig_secret_arn = self._publish_kubeconfig(name, fleet, args)
        self._team_data(name, args)
        self.contract = self._contract(args, identity)
        self.register_outputs({"serviceAccount": identity})

    def _grant(
        self, name: str, identity: str, args: FleetWorkerArgs, k8s_opts: pulumi.ResourceOptions
    ) -> k8s.core.v1.ServiceAccount:
        """The manager's ServiceAccount: reading cluster-wide (builders.manager_read_rules, a
        ClusterRoleBinding), writing only in the fleet teams' namespaces
        (builders.manager_write_rules, a RoleBinding in each): it can create a job nowhere
        else, so no pod of it runs outside a fleet team's namespace and quota."""
        account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata={"name": identity, "namespace": builders.KUEUE_NAMESPACE},
            automount_service_account_token=False,
            opts=k8s_opts,
        )
        subject = [
            {"kind": "ServiceAccount", "name": identity, "namespace": builders.KUEUE_NAMESPACE}
        ]
        frameworks = catalog.MULTIKUEUE_FRAMEWORKS
        read = builders.manager_role_name(identity, "read")
        read_role = self._role(
            f"{name}-read", read, builders.manager_read_rules(frameworks), k8s_opts
        )
        k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-read-binding",
            metadata={"name": read},
            role_ref=cast(Any, builders.cluster_role_ref(read)),
            subjects=cast(Any, subject),
            opts=pulumi.ResourceOptions.merge(
                k8s_opts, pulumi.ResourceOptions(depends_on=[read_role])
            ),
        )
        write = builders.manager_role_name(identity, "write")
        write_role = self._role(
            f"{name}-write", write, builders.manager_write_rules(frameworks), k8s_opts
        )
        for team, (namespace, component) in sorted(args.teams.items()):
            k8s.rbac.v1.RoleBinding(
                f"{name}-write-{team}",
                metadata={"name": write, "namespace": namespace},
                role_ref=cast(Any, builders.cluster_role_ref(write)),
                subjects=cast(Any, subject),
                opts=pulumi.ResourceOptions.merge(
                    k8s_opts, pulumi.ResourceOptions(depends_on=[write_role, component])
                ),
            )
        return account

    @staticmethod
    def _role(
        resource: str, name: str, rules: list[dict[str, Any]], k8s_opts: pulumi.ResourceOptions
    ) -> k8s.rbac.v1.ClusterRole:
        return k8s.rbac.v1.ClusterRole(
            resource, metadata={"name": name}, rules=cast(Any, rules), opts=k8s_opts
        )

    def _contract(self, args: FleetWorkerArgs, identity: str) -> pulumi.Output[WorkerContract]:
        """What the manager reads of this worker (`fleetWorker`), once its IDs and ARNs
        resolved."""
        config = args.config

        def build(
            *,
            vpc_id: str,
            vpc_cidr: str,
            private_route_table_ids: list[str],
            cluster_security_group_id: str,
            data_kms_key_arn: str | None,
            kubeconfig_secret_arn: str,
            signing_public_key: str | None,
            runtimes: dict[str, Any],
        ) -> WorkerContract:
            return WorkerContract(
                version=WorkerContract.current_version(),
                fleet=config.name,
                region=args.region,
                cluster_name=args.cluster_name,
                kubernetes_version=args.kubernetes_version,
                vpc_id=vpc_id,
                vpc_cidr=vpc_cidr,
                private_route_table_ids=private_route_table_ids,
                cluster_security_group_id=cluster_security_group_id,
                endpoint_public_access=args.endpoint_public_access,
                data_kms_key_arn=data_kms_key_arn,
                kueue_frameworks=list(catalog.KUEUE_FRAMEWORKS),
                service_account=f"{builders.KUEUE_NAMESPACE}/{identity}",
                token_key=config.token_key,
                kubeconfig_secret_arn=kubeconfig_secret_arn,
                # The fleet's one trainer (components/analysis/fleet_trainer.py): where it
                # comes from, where the home replicates it, the key that signs it.
                trainer=WorkerTrainer(
                    home=config.trainer_home,
                    replica_regions=list(config.trainer_replicas),
                    signing_public_key=signing_public_key,
                    runtimes=runtimes,
                ),
            )

        return resolved(
            build,
            vpc_id=args.vpc_id,
            vpc_cidr=args.vpc_cidr,
            private_route_table_ids=list(args.private_route_table_ids),
            cluster_security_group_id=args.cluster_security_group_id,
            data_kms_key_arn=args.kms_key_arn,
            kubeconfig_secret_arn=self.kubeconfig_secret_arn,
            signing_public_key=args.trainer_signing_key,
            runtimes=dict(args.runtime_pod_sets),
        )

    def _publish_kubeconfig(
        self, name: str, fleet: str, args: FleetWorkerArgs
    ) -> pulumi.Output[str]:
        """The manager's kubeconfig in Secrets Manager (its ARN): in this region, where the
        manager's External Secrets Operator reads it; never a stack output, and no Secret
        manifest on the manager carries it (a new version on rotation; ESO refreshes)."""
        secret = aws.secretsmanager.Secret(
            f"{name}-kubeconfig",
            name=builders.kubeconfig_secret_name(fleet, args.cluster_name),
            description=f"Kueue MultiKueue kubeconfig of fleet {fleet}'s manager for "
            f"{args.cluster_name}",
            recovery_window_in_days=0,
            tags=args.tags,
            opts=child_options(self),
        )
        readers = [
            builders.eso_role_arn(args.partition, args.account_id, fleet),
            *args.config.kubeconfig_readers,
        ]
        policy = aws.secretsmanager.SecretPolicy(
            f"{name}-kubeconfig",
            secret_arn=secret.arn,
            policy=pulumi.Output.from_input(args.deployer_arn).apply(
                lambda deployer: json.dumps(
                    builders.kubeconfig_secret_policy([*readers, deployer]), sort_keys=True
                )
            ),
            block_public_policy=True,
            opts=child_options(self),
        )
        # After the policy: writing a version reads it back (GetSecretValue), which the policy
        # must already allow the principal running this `up` to do.
        aws.secretsmanager.SecretVersion(
            f"{name}-kubeconfig",
            secret_id=secret.id,
            secret_string=self.kubeconfig,
            opts=child_options(self, depends_on=[policy]),
        )
        return secret.arn

    def _token(
        self,
        name: str,
        fleet: str,
        key: str,
        account: k8s.core.v1.ServiceAccount,
        k8s_opts: pulumi.ResourceOptions,
    ) -> pulumi.Output[str]:
        """The long-lived token of rotation key `key` (decoded from the Secret the API server
        filled)."""
        secret = k8s.core.v1.Secret(
            f"{name}-token-{key}",
            metadata={
                "name": builders.token_secret_name(fleet, key),
                "namespace": builders.KUEUE_NAMESPACE,
                "annotations": {
                    "kubernetes.io/service-account.name": builders.manager_identity(fleet)
                },
            },
            type="kubernetes.io/service-account-token",
            opts=pulumi.ResourceOptions.merge(
                k8s_opts, pulumi.ResourceOptions(depends_on=[account])
            ),
        )
        return pulumi.Output.secret(
            secret.data.apply(lambda data: _decoded((data or {}).get("token", "")))
        )

    def _team_data(self, name: str, args: FleetWorkerArgs) -> None:
        """Each team namespace's `gpu-platform-data` ConfigMap: this region's bucket names
        and trainer."""
        data: dict[str, pulumi.Input[str]] = {
            "region": args.region,
            **{f"{purpose}Bucket": bucket for purpose, bucket in sorted(args.buckets.items())},
        }
        if args.trainer_image is not None:
            data["trainerImage"] = args.trainer_image
            data["trainerImageDigest"] = pulumi.Output.from_input(args.trainer_image).apply(
                lambda ref: ref.rsplit("@", 1)[-1]
            )
        for team, (namespace, component) in sorted(args.teams.items()):
            k8s.core.v1.ConfigMap(
                f"{name}-data-{team}",
                metadata={"name": catalog.FLEET_DATA_CONFIGMAP, "namespace": namespace},
                data=data,
                opts=child_options(self, provider=args.k8s_provider, depends_on=[component]),
            )


def _decoded(value: str) -> str:
    """A Secret's data value as text (the API returns base64)."""
    return base64.b64decode(value).decode() if value else ""


def route_table_ids(subnet_ids: Sequence[pulumi.Input[str]]) -> list[pulumi.Output[str]]:
    """The route table of each private subnet of a VPC this stack did not create (its explicit
    association, else the VPC's main table: aws.ec2.get_route_table's rules)."""
    return [aws.ec2.get_route_table_output(subnet_id=subnet).id for subnet in subnet_ids]
