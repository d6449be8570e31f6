"""Central logs: the Amazon CloudWatch Observability EKS add-on (CloudWatch agent + Fluent Bit)
ships container, node and kernel logs into log groups this component creates first, encrypted
with a dedicated KMS key and kept `security.logging.retentionDays`; metric filters and alarms
catch NCCL watchdog timeouts / communicator aborts and GPU XID errors; saved Logs Insights
queries give each team its namespace's logs and the platform who-submitted-which-job from the
EKS audit log (control-plane log types are the cluster's `logTypes`; prod enables `audit`).

Two phases, because the control plane must find its log group: `Logging(...)` (before the
cluster) creates the key and the log groups, including `/aws/eks/<cluster>/cluster` whenever
the cluster sends control-plane logs; `install(cluster)` (after it) adds the add-on, alarms
and queries. EKS creates `/aws/eks/<cluster>/cluster` itself on first delivery, with no KMS key
and no expiry, unless it exists: the established fix is to create it first with the cluster's
name and make the cluster depend on it (terraform-aws-modules/terraform-aws-eks@v21.19.0:
main.tf#L230-245 `aws_cloudwatch_log_group.this` named `/aws/eks/${var.name}/cluster`, and
`depends_on = [..., aws_cloudwatch_log_group.this]` on `aws_eks_cluster.this`, #L199-205).

Facts (aws-observability/helm-charts@amazon-cloudwatch-observability-4.10.0:charts/
amazon-cloudwatch-observability/values.yaml, vendored in schemas/charts/): Fluent Bit
writes `/aws/containerinsights/<cluster>/{application,dataplane,host}` with
`auto_create_group true` (which would create unencrypted, never-expiring groups: hence created
here, before the add-on); kernel messages (`Systemd_Filter _TRANSPORT=kernel`, NVRM Xid lines)
go to `host`; the agent's performance events to `performance`. The add-on ships its own DCGM
exporter and Neuron monitor: the GPU Operator's DCGM exporter already runs, so both are off.
Log lines matched (PyTorch ProcessGroupNCCL.cpp): "Watchdog caught collective operation
timeout", "NCCL communicator was aborted", "Some NCCL operations have failed or timed out";
NVIDIA driver: "NVRM: Xid". `?"a" ?"b"` matches either term, a quoted term is matched literally
(filter syntax as AWS documents it, e.g. "?ERROR ?Exception" in https://docs.aws.amazon.com/
sdk-for-kotlin/api/latest/lightsail/aws.sdk.kotlin.services.lightsail.model/
-get-container-log-request/filter-pattern.html).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pulumi
import pulumi_aws as aws

from components import addons
from components.config.security import LoggingConfig
from components.platform.cluster import iam
from components.resource_options import child_options

if TYPE_CHECKING:
    from components.config import StackConfig, TeamConfig
    from components.platform.cluster.iam import AwsAccount

#: The EKS add-on, its pinned build and its namespace: its row in the add-on registry.
ADDON: Final = str(addons.CLOUDWATCH_OBSERVABILITY.eks_addon)
ADDON_VERSION: Final = str(addons.CLOUDWATCH_OBSERVABILITY.version)
AGENT_SERVICE_ACCOUNT: Final = "cloudwatch-agent"
AGENT_NAMESPACE: Final = addons.CLOUDWATCH_OBSERVABILITY.namespace
LOG_GROUPS: Final = ("application", "dataplane", "host", "performance")
METRIC_NAMESPACE: Final = "GPUPlatform/Training"
#: name -> (log group, filter pattern, what it means).
LOG_ALERTS: Final = {
    "NcclFailures": (
        "application",
        '?"Watchdog caught collective operation timeout" ?"NCCL communicator was aborted" '
        '?"Some NCCL operations have failed or timed out"',
        "NCCL watchdog timeout or communicator abort in a training pod",
    ),
    "GpuXidErrors": ("host", '"NVRM: Xid"', "GPU XID error in a node's kernel log"),
}


def log_group_name(cluster: str, group: str) -> str:
    return f"/aws/containerinsights/{cluster}/{group}"


def control_plane_log_group(cluster: str) -> str:
    return f"/aws/eks/{cluster}/cluster"


def logs_key_policy(account: AwsAccount) -> dict[str, Any]:
    """The account administers the key; CloudWatch Logs may use it for this account's log
    groups only (the `aws:logs:arn` encryption context, as AWS's published key policy)."""
    root = f"arn:{account.partition}:iam::{account.account_id}:root"
    groups = f"arn:{account.partition}:logs:{account.region}:{account.account_id}:log-group:*"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AccountAdministers",
                "Effect": "Allow",
                "Principal": {"AWS": root},
                "Action": "kms:*",
                "Resource": "*",
            },
            {
                "Sid": "CloudWatchLogsUse",
                "Effect": "Allow",
                "Principal": {"Service": f"logs.{account.region}.amazonaws.com"},
                "Action": [
                    "kms:Encrypt*",
                    "kms:Decrypt*",
                    "kms:ReEncrypt*",
                    "kms:GenerateDataKey*",
                    "kms:Describe*",
                ],
                "Resource": "*",
                "Condition": {"ArnLike": {"kms:EncryptionContext:aws:logs:arn": groups}},
            },
        ],
    }


def addon_configuration() -> dict[str, Any]:
    """Container logs on; the add-on's own DCGM exporter and Neuron monitor off (the GPU
    Operator's exporter already scrapes the GPUs; no Neuron devices here)."""
    return {
        "containerLogs": {"enabled": True},
        "dcgmExporter": {"enabled": False},
        "neuronMonitor": {"enabled": False},
    }


def team_query(team: TeamConfig) -> str:
    return (
        "fields @timestamp, kubernetes.pod_name, log\n"
        f"| filter kubernetes.namespace_name = '{team.namespace}'\n"
        "| sort @timestamp desc"
    )


#: Who created which training object, from the EKS audit log (Metadata level carries the user
#: and the object reference for every request).
SUBMISSIONS_QUERY: Final = (
    "fields @timestamp, user.username, objectRef.namespace, objectRef.name, objectRef.resource\n"
    "| filter verb = 'create' and objectRef.resource in ['jobs', 'trainjobs', 'externalsecrets']\n"
    "| sort @timestamp desc"
)


@dataclass(frozen=True)
class LoggingArgs:
    """Inputs of the Logging component."""

    config: LoggingConfig
    cluster_name: str
    account: AwsAccount
    teams: list[TeamConfig]
    #: The cluster sends control-plane logs at all (`cluster.logTypes` non-empty).
    control_plane_logs: bool
    #: ... and the audit log among them (the submissions query reads it).
    audit_logs: bool
    tags: dict[str, str]

    @classmethod
    def of(cls, cfg: StackConfig, account: AwsAccount, tags: dict[str, str]) -> LoggingArgs:
        return cls(
            config=cfg.security.logging,
            cluster_name=cfg.cluster.name,
            account=account,
            teams=list(cfg.teams),
            control_plane_logs=bool(cfg.cluster.log_types),
            audit_logs="audit" in cfg.cluster.log_types,
            tags=tags,
        )


class Logging(pulumi.ComponentResource):
    """KMS-encrypted log groups (before the cluster), then the CloudWatch Observability add-on,
    log alarms and queries (`install`, after it)."""

    log_groups: dict[str, aws.cloudwatch.LogGroup]
    #: `/aws/eks/<cluster>/cluster`, when the cluster sends control-plane logs: the cluster
    #: depends on it (ClusterArgs.control_plane_log_group).
    control_plane_log_group: aws.cloudwatch.LogGroup | None

    def __init__(
        self, name: str, args: LoggingArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:security:Logging", name, None, opts)
        config = args.config
        child = child_options(self)
        self._name = name
        self._args = args
        self.log_groups = {}
        self.control_plane_log_group = None
        # The key also encrypts the control-plane group, which exists whenever the cluster sends
        # control-plane logs, even with the add-on pipeline (`enabled`) off.
        if not (config.enabled or args.control_plane_logs):
            return
        key = aws.kms.Key(
            f"{name}-key",
            description=f"CloudWatch Logs of {args.cluster_name}",
            enable_key_rotation=True,
            policy=json.dumps(logs_key_policy(args.account)),
            tags=args.tags,
            opts=child,
        )
        if args.control_plane_logs:
            # The key policy's `aws:logs:arn` context covers every group of the account and
            # region, this one included (CreateLogGroup with kmsKeyId checks it at creation).
            self.control_plane_log_group = aws.cloudwatch.LogGroup(
                f"{name}-control-plane",
                name=control_plane_log_group(args.cluster_name),
                kms_key_id=key.arn,
                retention_in_days=config.retention_days,
                tags=args.tags,
                opts=child,
            )
        if not config.enabled:
            return
        for group in LOG_GROUPS:
            self.log_groups[group] = aws.cloudwatch.LogGroup(
                f"{name}-{group}",
                name=log_group_name(args.cluster_name, group),
                kms_key_id=key.arn,
                retention_in_days=config.retention_days,
                tags=args.tags,
                opts=child,
            )

    def install(self, cluster_name: pulumi.Input[str]) -> None:
        """The add-on (it needs the control plane), log alarms and saved queries."""
        name, args, config = self._name, self._args, self._args.config
        if not config.enabled:
            self.register_outputs({})
            return
        self._addon(name, args, cluster_name)
        if config.alarms:
            self._alarms(name, args)
        self._queries(name, args)
        self.register_outputs({"logGroups": sorted(self.log_groups)})

    def _addon(self, name: str, args: LoggingArgs, cluster_name: pulumi.Input[str]) -> None:
        """The CloudWatch Observability add-on and its agent's role: what ships the logs."""
        role = iam.pod_identity_role(
            f"{name}-agent",
            account_id=args.account.account_id,
            cluster_name=args.cluster_name,
            namespace=AGENT_NAMESPACE,
            service_account=AGENT_SERVICE_ACCOUNT,
            managed_policy_arns=[
                f"arn:{args.account.partition}:iam::aws:policy/CloudWatchAgentServerPolicy"
            ],
            tags=args.tags,
            opts=child_options(self),
        )
        aws.eks.Addon(
            f"{name}-addon",
            cluster_name=cluster_name,
            addon_name=ADDON,
            addon_version=ADDON_VERSION,
            configuration_values=json.dumps(addon_configuration()),
            pod_identity_associations=[
                {"role_arn": role.arn, "service_account": AGENT_SERVICE_ACCOUNT}
            ],
            tags=args.tags,
            # Fluent Bit must find the encrypted groups, not create its own.
            opts=child_options(self, depends_on=list(self.log_groups.values())),
        )

    def _queries(self, name: str, args: LoggingArgs) -> None:
        """Saved Logs Insights queries: each team's logs, and who submitted training (audit)."""
        child = child_options(self)
        for team in args.teams:
            aws.cloudwatch.QueryDefinition(
                f"{name}-query-{team.name}",
                name=f"{args.cluster_name}/team-{team.name}",
                log_group_names=[self.log_groups["application"].name],
                query_string=team_query(team),
                opts=child,
            )
        if args.audit_logs and self.control_plane_log_group is not None:
            aws.cloudwatch.QueryDefinition(
                f"{name}-query-submissions",
                name=f"{args.cluster_name}/training-submissions",
                log_group_names=[self.control_plane_log_group.name],
                query_string=SUBMISSIONS_QUERY,
                opts=child,
            )

    def _alarms(self, name: str, args: LoggingArgs) -> None:
        child = child_options(self)
        topic = aws.sns.Topic(
            f"{name}-alerts", kms_master_key_id="alias/aws/sns", tags=args.tags, opts=child
        )
        for metric, (group, pattern, meaning) in LOG_ALERTS.items():
            aws.cloudwatch.LogMetricFilter(
                f"{name}-{metric}",
                log_group_name=self.log_groups[group].name,
                pattern=pattern,
                metric_transformation={
                    "name": metric,
                    "namespace": METRIC_NAMESPACE,
                    "value": "1",
                    "default_value": "0",
                },
                opts=child,
            )
            aws.cloudwatch.MetricAlarm(
                f"{name}-{metric}-alarm",
                alarm_description=f"{meaning} ({args.cluster_name}); docs/runbooks.md",
                namespace=METRIC_NAMESPACE,
                metric_name=metric,
                statistic="Sum",
                period=300,
                evaluation_periods=1,
                threshold=1,
                comparison_operator="GreaterThanOrEqualToThreshold",
                treat_missing_data="notBreaching",
                alarm_actions=[topic.arn],
                tags=args.tags,
                opts=child,
            )
