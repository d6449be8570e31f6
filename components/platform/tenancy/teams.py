"""Teams: one tenant per `teams[]` entry — namespace, quotas, identity, RBAC, network, queues.

A Team owns its namespace (pod-security `restricted` enforced), the ResourceQuota that caps it
whatever Kueue admits, a LimitRange so containers without requests still get a fair CPU share,
the `trainer` ServiceAccount with an IAM role (EKS Pod Identity) limited to the team's S3
prefixes, a Role + RoleBinding for the team's group (edit-like on jobs, never cluster-wide),
NetworkPolicies (deny ingress from outside, allow the namespace, DNS and HTTPS), its Kueue
ClusterQueue in the shared cohort with a LocalQueue, and its Volcano Queue."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, cast

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import addons, catalog
from components.analysis import limit_range, pod_security, volcano
from components.catalog import KUEUE_QUEUE_LABEL, TRAINER_SERVICE_ACCOUNT, VOLCANO_SCHEDULER
from components.config import TeamConfig
from components.platform.cluster import iam
from components.platform.cluster.handles import ClusterHandles
from components.platform.scheduling.scheduling import (
    KUEUE_API,
    QUEUE_OPEN_AWAIT,
    VOLCANO_QUEUE_API,
    Flavor,
    SchedulingHandles,
)
from components.platform.tenancy.team_queues import cluster_queue_spec
from components.resource_options import child_options, owned_namespace

if TYPE_CHECKING:
    from components.platform.cluster.iam import AwsAccount


#: The EKS Pod Identity agent listens on this link-local address on every node; pods with a
#: restricted egress must still reach it to get credentials.
POD_IDENTITY_AGENT_CIDR: Final = "169.254.170.23/32"
POD_IDENTITY_AGENT_PORT: Final = 80
#: Address space that is never S3: RFC 1918 (the VPC, other VPCs, on-prem), link-local (IMDS,
#: the Pod Identity agent), CGNAT. The S3 egress rule allows 443 everywhere else.
NON_PUBLIC_CIDRS: Final = (
    "10.0.0.0/8",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "169.254.0.0/16",
    "100.64.0.0/10",
)
RBAC_API: Final = "rbac.authorization.k8s.io"
EDIT_VERBS: Final = ("get", "list", "watch", "create", "update", "patch", "delete")
READ_VERBS: Final = ("get", "list", "watch")


def data_buckets(prefix: str, account_id: str) -> dict[str, str]:
    """Names of the data buckets Storage creates (same function: catalog.bucket_name)."""
    return {
        purpose: catalog.bucket_name(prefix, purpose, account_id)
        for purpose in catalog.DATA_BUCKET_PURPOSES
    }


def team_prefix(team: TeamConfig) -> str:
    """The team's own prefix in the checkpoints and artifacts buckets (with the slash, so
    `research/` never matches `research2/`)."""
    return f"{team.name}/"


# --- pure builders ------------------------------------------------------------------------------


def namespace_labels(team: TeamConfig) -> dict[str, str]:
    return {
        f"{catalog.LABEL_DOMAIN}/team": team.name,
        f"{catalog.LABEL_DOMAIN}/kueue-queue": team.name,
        f"{catalog.LABEL_DOMAIN}/volcano-queue": team.name,
        # PSS restricted enforced: every pod the platform renders is restricted (pod_security).
        **pod_security.RESTRICTED_NAMESPACE_LABELS,
    }


def resource_quota_spec(team: TeamConfig) -> dict[str, Any]:
    limits = team.limits
    return {
        "hard": {
            f"requests.{catalog.GPU_RESOURCE}": str(limits.gpus),
            "requests.cpu": str(limits.cpu),
            "requests.memory": f"{limits.memory_gib}Gi",
            "limits.memory": f"{limits.memory_gib}Gi",
            "persistentvolumeclaims": str(limits.persistent_volume_claims),
            "requests.storage": f"{limits.storage_gib}Gi",
        }
    }


def limit_range_spec(team: TeamConfig) -> dict[str, Any]:
    """The team namespace's LimitRange (components/analysis/limit_range.py, which will-it-run
    replays Kueue over)."""
    return limit_range.limit_range_spec(team.container_defaults)


def volcano_queue_spec(team: TeamConfig) -> dict[str, Any]:
    """The team's Volcano Queue; its figures are components/analysis/volcano.py's (capability,
    and guarantee = deserved = the nominal quota: docs/scheduling.md)."""
    spec: dict[str, Any] = {
        "weight": team.volcano.weight,
        "reclaimable": True,
        "capability": volcano.quantities(volcano.queue_capability(team)),
    }
    guarantee = volcano.quantities(volcano.queue_guarantee(team))
    if guarantee:
        spec["guarantee"] = {"resource": guarantee}
        spec["deserved"] = dict(guarantee)
    return spec


def role_rules() -> list[dict[str, Any]]:
    """Edit-like rights on the workloads a team runs; read on what controllers make for it."""
    return [
        {
            "apiGroups": [""],
            "resources": ["services", "configmaps", "persistentvolumeclaims"],
            "verbs": list(EDIT_VERBS),
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": [*READ_VERBS, "delete"]},
        {"apiGroups": [""], "resources": ["pods/log", "events"], "verbs": list(READ_VERBS)},
        {"apiGroups": ["batch"], "resources": ["jobs", "cronjobs"], "verbs": list(EDIT_VERBS)},
        {
            "apiGroups": ["trainer.kubeflow.org"],
            "resources": ["trainjobs"],
            "verbs": list(EDIT_VERBS),
        },
        {
            "apiGroups": ["trainer.kubeflow.org"],
            "resources": ["trainingruntimes", "clustertrainingruntimes"],
            "verbs": list(READ_VERBS),
        },
        {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets"], "verbs": list(EDIT_VERBS)},
        {"apiGroups": ["batch.volcano.sh"], "resources": ["jobs"], "verbs": list(EDIT_VERBS)},
        {
            "apiGroups": ["scheduling.volcano.sh"],
            "resources": ["podgroups"],
            "verbs": list(READ_VERBS),
        },
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["workloads", "localqueues"],
            "verbs": list(READ_VERBS),
        },
    ]


def network_policies(team: TeamConfig, monitoring_namespace: str) -> dict[str, dict[str, Any]]:
    """name -> NetworkPolicy spec. Ingress: from the namespace (NCCL, rendezvous) and from the
    monitoring namespace to the training metrics port only. Egress: the namespace, cluster DNS,
    the Pod Identity agent and HTTPS to configured CIDRs."""
    everyone: dict[str, Any] = {}
    return {
        "default-deny-ingress": {"podSelector": everyone, "policyTypes": ["Ingress"]},
        "allow-same-namespace": {
            "podSelector": everyone,
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [{"podSelector": {}}]}],
        },
        # Prometheus scrapes the trainers (the team PodMonitor) and nothing else.
        "allow-metrics-scrape": _metrics_scrape_policy(monitoring_namespace),
        "restrict-egress": {
            "podSelector": everyone,
            "policyTypes": ["Egress"],
            "egress": _egress_rules(team),
        },
    }


def _metrics_scrape_policy(monitoring_namespace: str) -> dict[str, Any]:
    """Ingress to training pods' metrics port from the monitoring namespace, nothing more."""
    return {
        "podSelector": {
            "matchExpressions": [{"key": catalog.TRAINING_JOB_LABEL, "operator": "Exists"}]
        },
        "policyTypes": ["Ingress"],
        "ingress": [
            {
                "from": [
                    {
                        "namespaceSelector": {
                            "matchLabels": {"kubernetes.io/metadata.name": monitoring_namespace}
                        }
                    }
                ],
                "ports": [{"protocol": "TCP", "port": catalog.TRAINING_METRICS_PORT}],
            }
        ],
    }


def _egress_rules(team: TeamConfig) -> list[dict[str, Any]]:
    """Where a team's pods may connect: the namespace, cluster DNS, the Pod Identity agent,
    and HTTPS to the team's CIDRs (and S3) only."""
    https_blocks = ["0.0.0.0/0"] if team.egress.allow_all_https else list(team.egress.https_cidrs)
    egress: list[dict[str, Any]] = [
        {"to": [{"podSelector": {}}]},
        {
            "to": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "kube-system"}
                    },
                    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                }
            ],
            "ports": [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}],
        },
        {
            "to": [{"ipBlock": {"cidr": POD_IDENTITY_AGENT_CIDR}}],
            "ports": [{"protocol": "TCP", "port": POD_IDENTITY_AGENT_PORT}],
        },
    ]
    if https_blocks:
        egress.append(
            {
                "to": [{"ipBlock": {"cidr": cidr}} for cidr in https_blocks],
                "ports": [{"protocol": "TCP", "port": 443}],
            }
        )
    if team.egress.s3 and not team.egress.allow_all_https:
        # S3 (through the gateway endpoint's route: the addresses stay S3's public ones).
        egress.append(
            {
                "to": [{"ipBlock": {"cidr": "0.0.0.0/0", "except": list(NON_PUBLIC_CIDRS)}}],
                "ports": [{"protocol": "TCP", "port": 443}],
            }
        )
    return egress


def training_pod_monitor_spec(team: TeamConfig) -> dict[str, Any]:
    """The team's PodMonitor: every training pod's `metrics` port (the reference trainer's
    Prometheus endpoint). kube-prometheus-stack selects PodMonitors in every namespace
    (observability.chart_values: podMonitorSelectorNilUsesHelmValues false, namespace selector
    {}; runs.md Q12)."""
    return {
        "selector": {
            "matchExpressions": [{"key": catalog.TRAINING_JOB_LABEL, "operator": "Exists"}]
        },
        "namespaceSelector": {"matchNames": [team.namespace]},
        "podMetricsEndpoints": [
            {"port": catalog.TRAINING_METRICS_PORT_NAME, "path": "/metrics", "interval": "30s"}
        ],
    }


def trainer_policy(
    team: TeamConfig, buckets: Mapping[str, str], kms_key_arn: str
) -> dict[str, Any]:
    """IAM policy of the team's `trainer` role: read the dataset prefix, read/write the team's
    checkpoint and artifact prefixes, nothing else. No wildcard action, no wildcard bucket."""
    own = team_prefix(team)
    datasets = f"arn:aws:s3:::{buckets['datasets']}"
    writable = [f"arn:aws:s3:::{buckets[p]}" for p in ("checkpoints", "artifacts")]
    statements: list[dict[str, Any]] = [
        *_dataset_statements(datasets, f"{team.dataset_prefix}/"),
        *_own_prefix_statements(writable, own),
        _data_key_statement(kms_key_arn, [datasets, *writable]),
    ]
    statements += [
        statement.model_dump(exclude_none=True) for statement in team.extra_iam_statements
    ]
    return {"Version": "2012-10-17", "Statement": statements}


def _dataset_statements(datasets: str, dataset_prefix: str) -> list[dict[str, Any]]:
    """List and read the team's dataset prefix in the shared datasets bucket, read-only."""
    return [
        {
            "Sid": "ListDatasetPrefix",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": datasets,
            "Condition": {"StringLike": {"s3:prefix": [dataset_prefix, f"{dataset_prefix}*"]}},
        },
        {
            "Sid": "ReadDatasets",
            "Effect": "Allow",
            "Action": ["s3:GetObject", "s3:GetObjectVersion"],
            "Resource": f"{datasets}/{dataset_prefix}*",
        },
    ]


def _own_prefix_statements(writable: list[str], own: str) -> list[dict[str, Any]]:
    """List, read and write the team's own prefix of the checkpoint and artifact buckets."""
    return [
        {
            "Sid": "ListOwnPrefixes",
            "Effect": "Allow",
            "Action": "s3:ListBucket",
            "Resource": writable,
            "Condition": {"StringLike": {"s3:prefix": [own, f"{own}*"]}},
        },
        {
            "Sid": "ReadWriteOwnPrefixes",
            "Effect": "Allow",
            "Action": [
                "s3:GetObject",
                "s3:GetObjectVersion",
                "s3:PutObject",
                "s3:DeleteObject",
                "s3:AbortMultipartUpload",
                "s3:ListMultipartUploadParts",
            ],
            "Resource": [f"{arn}/{own}*" for arn in writable],
        },
    ]


def _data_key_statement(kms_key_arn: str, bucket_arns: list[str]) -> dict[str, Any]:
    """SSE-KMS buckets: the key may be used only through S3, only for these buckets' objects."""
    return {
        "Sid": "UseDataKeyThroughS3",
        "Effect": "Allow",
        "Action": ["kms:Decrypt", "kms:GenerateDataKey"],
        "Resource": kms_key_arn,
        "Condition": {
            "StringLike": {
                "kms:ViaService": "s3.*.amazonaws.com",
                "kms:EncryptionContext:aws:s3:arn": bucket_arns,
            }
        },
    }


# --- component ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TeamArgs:
    """Inputs of the Team component."""

    config: TeamConfig
    #: Flavors in the cluster's order (Scheduling.flavors) and the shared cohort.
    flavors: list[Flavor]
    cohort: str
    #: purpose (`checkpoints`, `datasets`, `artifacts`) -> bucket name (Storage's buckets).
    buckets: Mapping[str, pulumi.Input[str]]
    cluster_name: pulumi.Input[str]
    account_id: str
    k8s_provider: k8s.Provider
    #: Kueue and Volcano releases: their CRDs and webhooks must exist before the queues.
    kueue_release: pulumi.Resource
    volcano_release: pulumi.Resource
    tags: dict[str, str]
    #: The literal cluster name the trainer role's trust is pinned to.
    physical_cluster_name: str
    #: The data buckets' KMS key, once Storage passes it; otherwise any key, via S3 only.
    kms_key_arn: pulumi.Input[str] | None = None
    #: Where Prometheus runs, and the release whose CRDs the PodMonitor needs.
    monitoring_namespace: str = addons.KUBE_PROMETHEUS_STACK.namespace
    monitoring_release: pulumi.Resource | None = None

    @classmethod
    def of(
        cls,
        team: TeamConfig,
        *,
        scheduling: SchedulingHandles,
        buckets: Mapping[str, pulumi.Input[str]],
        kms_key_arn: pulumi.Input[str] | None,
        cluster: ClusterHandles,
        aws_account: AwsAccount,
        tags: dict[str, str],
        monitoring: tuple[str, pulumi.Resource] | None = None,
    ) -> TeamArgs:
        """One team's config with the queues, buckets, cluster and monitoring (namespace,
        release) it lives in."""
        return cls(
            config=team,
            flavors=scheduling.flavors,
            cohort=scheduling.cohort,
            buckets=buckets,
            kms_key_arn=kms_key_arn,
            cluster_name=cluster.name,
            physical_cluster_name=cluster.physical_name,
            account_id=aws_account.account_id,
            k8s_provider=cluster.k8s_provider,
            kueue_release=scheduling.kueue,
            volcano_release=scheduling.volcano,
            tags=tags,
            monitoring_namespace=(
                monitoring[0] if monitoring else addons.KUBE_PROMETHEUS_STACK.namespace
            ),
            monitoring_release=monitoring[1] if monitoring else None,
        )


class Team(pulumi.ComponentResource):
    """A tenant namespace with its quotas, identity, RBAC, network policies and queues."""

    namespace: k8s.core.v1.Namespace
    trainer_role: aws.iam.Role
    cluster_queue: k8s.apiextensions.CustomResource

    def __init__(
        self, name: str, args: TeamArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:teams:Team", name, None, opts)
        team = args.config
        ns = team.namespace
        k8s_opts = child_options(self, provider=args.k8s_provider)

        self.namespace, in_ns = owned_namespace(
            f"{name}-namespace", ns, namespace_labels(team), k8s_opts
        )
        self._team: TeamConfig = team
        meta = self._meta

        k8s.core.v1.ResourceQuota(
            f"{name}-quota",
            metadata=meta("team-quota"),
            spec=cast(Any, resource_quota_spec(team)),
            opts=in_ns,
        )
        k8s.core.v1.LimitRange(
            f"{name}-limits",
            metadata=meta("container-defaults"),
            spec=cast(Any, limit_range_spec(team)),
            opts=in_ns,
        )

        self._identity(name, args, in_ns, child_options(self))
        self._access(name, args, in_ns)
        self._queues(name, args)

        self.register_outputs(
            {
                "namespace": ns,
                "trainerRoleArn": self.trainer_role.arn,
                "kueueLocalQueue": team.name,
                "kueueQueueLabel": KUEUE_QUEUE_LABEL,
                "volcanoQueue": team.name,
                "volcanoScheduler": VOLCANO_SCHEDULER,
            }
        )

    def _meta(self, object_name: str) -> Any:
        """Metadata of a namespaced team object (a plain dict where the SDK types TypedDicts)."""
        return {
            "name": object_name,
            "namespace": self._team.namespace,
            "labels": {f"{catalog.LABEL_DOMAIN}/team": self._team.name},
        }

    def _identity(
        self,
        name: str,
        args: TeamArgs,
        in_ns: pulumi.ResourceOptions,
        aws_opts: pulumi.ResourceOptions,
    ) -> None:
        """The `trainer` role (S3 prefixes of the team only), its service account and Pod Identity
        association."""
        team, ns, meta = self._team, self._team.namespace, self._meta
        self.trainer_role = iam.pod_identity_role(
            f"{name}-trainer",
            account_id=args.account_id,
            cluster_name=args.physical_cluster_name,
            namespace=ns,
            service_account=TRAINER_SERVICE_ACCOUNT,
            description=f"Training pods of team {team.name}: its S3 prefixes only",
            tags=args.tags,
            opts=aws_opts,
        )
        # Until Storage hands over its key: this account's keys, and (below) only through S3.
        key_arn = args.kms_key_arn or f"arn:aws:kms:*:{args.account_id}:key/*"
        policy = pulumi.Output.all(
            buckets=pulumi.Output.all(**dict(args.buckets)), key=key_arn
        ).apply(lambda v: json.dumps(trainer_policy(team, v["buckets"], v["key"]), sort_keys=True))
        aws.iam.RolePolicy(
            f"{name}-trainer-s3",
            role=self.trainer_role.id,
            policy=policy,
            opts=aws_opts,
        )
        k8s.core.v1.ServiceAccount(
            f"{name}-trainer-sa", metadata=meta(TRAINER_SERVICE_ACCOUNT), opts=in_ns
        )
        aws.eks.PodIdentityAssociation(
            f"{name}-trainer",
            cluster_name=args.cluster_name,
            namespace=ns,
            service_account=TRAINER_SERVICE_ACCOUNT,
            role_arn=self.trainer_role.arn,
            tags=args.tags,
            opts=aws_opts,
        )

    def _access(self, name: str, args: TeamArgs, in_ns: pulumi.ResourceOptions) -> None:
        """Who may do what in the namespace: RBAC for the team group, NetworkPolicies, and the
        PodMonitor Prometheus scrapes the trainers through."""
        team, meta = self._team, self._meta
        role = k8s.rbac.v1.Role(
            f"{name}-members",
            metadata=meta("team-member"),
            rules=cast(Any, role_rules()),
            opts=in_ns,
        )
        k8s.rbac.v1.RoleBinding(
            f"{name}-members",
            metadata=meta("team-member"),
            role_ref=cast(Any, {"apiGroup": RBAC_API, "kind": "Role", "name": "team-member"}),
            subjects=cast(Any, [{"apiGroup": RBAC_API, "kind": "Group", "name": team.group}]),
            opts=child_options(self, provider=args.k8s_provider, depends_on=[role]),
        )
        for policy_name, spec in network_policies(team, args.monitoring_namespace).items():
            k8s.networking.v1.NetworkPolicy(
                f"{name}-{policy_name}",
                metadata=meta(policy_name),
                spec=cast(Any, spec),
                opts=in_ns,
            )
        if args.monitoring_release is not None:
            k8s.apiextensions.CustomResource(
                f"{name}-training-metrics",
                api_version="monitoring.coreos.com/v1",
                kind="PodMonitor",
                metadata=meta("training-metrics"),
                spec=training_pod_monitor_spec(team),
                opts=child_options(
                    self,
                    provider=args.k8s_provider,
                    depends_on=[self.namespace, args.monitoring_release],
                ),
            )

    def _queues(self, name: str, args: TeamArgs) -> None:
        """Kueue ClusterQueue and LocalQueue, and the Volcano Queue (awaited until Open)."""
        team, meta = self._team, self._meta
        kueue_opts = child_options(
            self, provider=args.k8s_provider, depends_on=[args.kueue_release]
        )
        self.cluster_queue = k8s.apiextensions.CustomResource(
            f"{name}-cluster-queue",
            api_version=KUEUE_API,
            kind="ClusterQueue",
            metadata={"name": team.name},
            spec=cluster_queue_spec(team, args.flavors, args.cohort),
            opts=kueue_opts,
        )
        k8s.apiextensions.CustomResource(
            f"{name}-local-queue",
            api_version=KUEUE_API,
            kind="LocalQueue",
            metadata=meta(team.name),
            spec={"clusterQueue": team.name},
            opts=child_options(
                self,
                provider=args.k8s_provider,
                depends_on=[args.kueue_release, self.namespace, self.cluster_queue],
            ),
        )
        k8s.apiextensions.CustomResource(
            f"{name}-volcano-queue",
            api_version=VOLCANO_QUEUE_API,
            kind="Queue",
            metadata={"name": team.name, "annotations": dict(QUEUE_OPEN_AWAIT)},
            spec=volcano_queue_spec(team),
            opts=child_options(self, provider=args.k8s_provider, depends_on=[args.volcano_release]),
        )
