"""Karpenter: GPU autoscaling, spot first with on-demand fallback, and interruption handling.

Owns the controller (two pinned Helm releases: `karpenter-crd` first so CRDs are upgraded with
the chart, then `karpenter` with `skip_crds`), its Pod Identity role scoped to this cluster and
region, the node role with its instance profile and `EC2_LINUX` access entry, the SQS
interruption queue with its four EventBridge rules, and the EC2NodeClasses and NodePools built
from the stack config.

Teardown order is carried by `depends_on`: NodePools depend on their EC2NodeClass and on the
controller release, EC2NodeClasses on the controller release, the controller on the CRD
release. Pulumi deletes dependents first, so on `pulumi destroy` the NodePools go (Karpenter's
finalizers terminate their instances) while the controller still runs; see docs/karpenter.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import catalog
from components.config import KarpenterConfig, KarpenterNodeClass, KarpenterPool
from components.platform import iam
from components.platform.cluster import NODE_MANAGED_POLICIES, Cluster
from components.platform.iam import AwsAccount

if TYPE_CHECKING:
    from components.config import StackConfig


CHART_REGISTRY: Final = "oci://public.ecr.aws/karpenter"
CONTROLLER_CHART: Final = f"{CHART_REGISTRY}/karpenter"
CRD_CHART: Final = f"{CHART_REGISTRY}/karpenter-crd"
SERVICE_ACCOUNT: Final = "karpenter"
DISCOVERY_TAG: Final = "karpenter.sh/discovery"
NODECLASS_GROUP: Final = "karpenter.k8s.aws"
NODECLASS_API_VERSION: Final = f"{NODECLASS_GROUP}/v1"
NODEPOOL_API_VERSION: Final = "karpenter.sh/v1"
GPU_NODE_CLASS: Final = "gpu"
CPU_NODE_CLASS: Final = "cpu"

# Well-known requirement keys (karpenter.sh/docs/concepts/scheduling, AWS provider labels).
KEY_CAPACITY_TYPE: Final = "karpenter.sh/capacity-type"
KEY_INSTANCE_TYPE: Final = "node.kubernetes.io/instance-type"
KEY_INSTANCE_FAMILY: Final = "karpenter.k8s.aws/instance-family"
KEY_GPU_COUNT: Final = "karpenter.k8s.aws/instance-gpu-count"

#: EventBridge rules Karpenter's interruption controller understands (rule key -> pattern).
INTERRUPTION_EVENTS: Final[dict[str, dict[str, list[str]]]] = {
    "spot-interruption": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Spot Instance Interruption Warning"],
    },
    "rebalance": {"source": ["aws.ec2"], "detail-type": ["EC2 Instance Rebalance Recommendation"]},
    "instance-state-change": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Instance State-change Notification"],
    },
    "health": {"source": ["aws.health"], "detail-type": ["AWS Health Event"]},
}
#: Karpenter deletes a message once handled; older ones describe instances long gone.
INTERRUPTION_RETENTION_S: Final = 300


# --- pure builders ------------------------------------------------------------------------------


def pool_node_class(pool: KarpenterPool) -> str:
    """The EC2NodeClass a pool launches from."""
    return GPU_NODE_CLASS if pool.is_gpu else CPU_NODE_CLASS


def pool_labels(pool: KarpenterPool) -> dict[str, str]:
    """Node labels: the catalog's keys, the same as managed node groups carry."""
    if pool.is_gpu:
        labels = catalog.gpu_node_labels(
            gpu_class=pool.resolved_gpu_class,
            gpu_model=pool.gpu_model,
            capacity_type=pool.capacity_type,
            workload_type=pool.workload_type,
        )
    else:
        labels = catalog.cpu_node_labels(
            capacity_type=pool.capacity_type, workload_type=pool.workload_type
        )
    return {**labels, catalog.LABEL_NODE_POOL: pool.name}


def pool_requirements(pool: KarpenterPool) -> list[dict[str, Any]]:
    """Requirements: capacity type, exact instance types (and their families), GPU count."""
    types = pool.resolved_instance_types
    families = sorted({catalog.instance(t).family for t in types})
    requirements: list[dict[str, Any]] = [
        {"key": KEY_CAPACITY_TYPE, "operator": "In", "values": [pool.capacity_type]},
        {"key": KEY_INSTANCE_FAMILY, "operator": "In", "values": families},
        {"key": KEY_INSTANCE_TYPE, "operator": "In", "values": sorted(types)},
    ]
    if pool.is_gpu:
        requirements.append(
            {"key": KEY_GPU_COUNT, "operator": "In", "values": [str(pool.gpus_per_node)]}
        )
    requirements += [
        {"key": "kubernetes.io/arch", "operator": "In", "values": ["amd64"]},
        {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]},
    ]
    return requirements


def pool_limits(pool: KarpenterPool) -> dict[str, int | str]:
    """`spec.limits`: the GPU cap first (the config model requires it for GPU pools)."""
    limits: dict[str, int | str] = {}
    if pool.limits.gpus is not None:
        limits[catalog.GPU_RESOURCE] = pool.limits.gpus
    if pool.limits.cpu is not None:
        limits["cpu"] = pool.limits.cpu
    if pool.limits.memory_gib is not None:
        limits["memory"] = f"{pool.limits.memory_gib}Gi"
    return limits


def nodepool_spec(pool: KarpenterPool, *, node_class: str) -> dict[str, Any]:
    """The NodePool `spec` for one pool of the config."""
    disruption = pool.disruption
    budgets: list[dict[str, str]] = [{"nodes": f"{disruption.max_disrupted_percent}%"}]
    if disruption.freeze_schedule is not None and disruption.freeze_duration is not None:
        budgets.append(
            {
                "nodes": "0",
                "schedule": disruption.freeze_schedule,
                "duration": disruption.freeze_duration,
            }
        )
    template_spec: dict[str, Any] = {
        "nodeClassRef": {"group": NODECLASS_GROUP, "kind": "EC2NodeClass", "name": node_class},
        "requirements": pool_requirements(pool),
        "expireAfter": disruption.expire_after,
        "terminationGracePeriod": disruption.termination_grace_period,
    }
    if pool.is_gpu:
        template_spec["taints"] = [catalog.gpu_taint()]
    return {
        "weight": pool.effective_weight,
        "limits": pool_limits(pool),
        "disruption": {
            "consolidationPolicy": disruption.consolidation_policy,
            "consolidateAfter": disruption.consolidate_after,
            "budgets": budgets,
        },
        "template": {"metadata": {"labels": pool_labels(pool)}, "spec": template_spec},
    }


def ec2nodeclass_spec(
    *,
    cluster_name: str,
    ami_alias: str,
    instance_profile: str,
    disk: KarpenterNodeClass,
    instance_store_raid0: bool,
    tags: dict[str, str],
) -> dict[str, Any]:
    """The EC2NodeClass `spec`: AL2023 by alias (Karpenter picks the NVIDIA variant for GPU
    types), discovery-tag subnets and security groups, IMDSv2 with hop limit 1 (pods reach AWS
    through Pod Identity, never the node's credentials), an encrypted gp3 root sized for
    multi-GB images and, where every type has NVMe instance store, RAID0 over it for the image
    cache and ephemeral storage."""
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": ami_alias}],
        "instanceProfile": instance_profile,
        "subnetSelectorTerms": [{"tags": {DISCOVERY_TAG: cluster_name}}],
        "securityGroupSelectorTerms": [{"tags": {DISCOVERY_TAG: cluster_name}}],
        "metadataOptions": {
            "httpEndpoint": "enabled",
            "httpProtocolIPv6": "disabled",
            "httpPutResponseHopLimit": 1,
            "httpTokens": "required",
        },
        "blockDeviceMappings": [
            {
                "deviceName": "/dev/xvda",
                "rootVolume": True,
                "ebs": {
                    "volumeSize": f"{disk.disk_size_gib}Gi",
                    "volumeType": "gp3",
                    "iops": disk.disk_iops,
                    "throughput": disk.disk_throughput_mibps,
                    "encrypted": True,
                    "deleteOnTermination": True,
                },
            }
        ],
        "tags": tags,
    }
    if instance_store_raid0:
        spec["instanceStorePolicy"] = "RAID0"
    return spec


def node_class_tags(tags: dict[str, str], *, cluster_name: str, node_class: str) -> dict[str, str]:
    """Tags on every instance and volume Karpenter launches: cost allocation and cleanup."""
    return {
        **tags,
        "managed-by": "karpenter",
        "gpu-platform:cluster": cluster_name,
        "gpu-platform:node-class": node_class,
    }


def controller_policy(
    *,
    cluster_name: str,
    region: str,
    account_id: str,
    partition: str,
    queue_arn: str,
    node_role_arn: str,
    instance_profile_arn: str,
) -> dict[str, Any]:
    """The controller's IAM policy, after upstream's getting-started CloudFormation (v1),
    narrowed: the instance profile is ours (no profile management), every EC2 write is tied to
    this cluster's tags, reads to the requested region, `iam:PassRole` to the node role only."""
    ec2 = f"arn:{partition}:ec2:{region}"
    cluster_tag = f"kubernetes.io/cluster/{cluster_name}"
    created = [
        f"{ec2}:*:{kind}/*"
        for kind in (
            "fleet",
            "instance",
            "volume",
            "network-interface",
            "launch-template",
            "spot-instances-request",
        )
    ]
    request_tags = {
        "StringEquals": {
            f"aws:RequestTag/{cluster_tag}": "owned",
            "aws:RequestTag/eks:eks-cluster-name": cluster_name,
        },
        "StringLike": {"aws:RequestTag/karpenter.sh/nodepool": "*"},
    }
    owned = {
        "StringEquals": {f"aws:ResourceTag/{cluster_tag}": "owned"},
        "StringLike": {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
    }
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AllowScopedEC2InstanceAccessActions",
                "Effect": "Allow",
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
                "Resource": [
                    f"{ec2}::image/*",
                    f"{ec2}::snapshot/*",
                    f"{ec2}:*:security-group/*",
                    f"{ec2}:*:subnet/*",
                    f"{ec2}:*:capacity-reservation/*",
                    f"{ec2}:*:placement-group/*",
                ],
            },
            {
                "Sid": "AllowScopedEC2LaunchTemplateAccessActions",
                "Effect": "Allow",
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
                "Resource": f"{ec2}:*:launch-template/*",
                "Condition": owned,
            },
            {
                "Sid": "AllowScopedEC2InstanceActionsWithTags",
                "Effect": "Allow",
                "Action": ["ec2:RunInstances", "ec2:CreateFleet", "ec2:CreateLaunchTemplate"],
                "Resource": created,
                "Condition": request_tags,
            },
            {
                "Sid": "AllowScopedResourceCreationTagging",
                "Effect": "Allow",
                "Action": "ec2:CreateTags",
                "Resource": created,
                "Condition": {
                    "StringEquals": {
                        **request_tags["StringEquals"],
                        "ec2:CreateAction": [
                            "RunInstances",
                            "CreateFleet",
                            "CreateLaunchTemplate",
                        ],
                    },
                    "StringLike": request_tags["StringLike"],
                },
            },
            {
                "Sid": "AllowScopedResourceTagging",
                "Effect": "Allow",
                "Action": "ec2:CreateTags",
                "Resource": f"{ec2}:*:instance/*",
                "Condition": {
                    **owned,
                    "StringEqualsIfExists": {"aws:RequestTag/eks:eks-cluster-name": cluster_name},
                    "ForAllValues:StringEquals": {
                        "aws:TagKeys": ["eks:eks-cluster-name", "karpenter.sh/nodeclaim", "Name"]
                    },
                },
            },
            {
                "Sid": "AllowScopedDeletion",
                "Effect": "Allow",
                "Action": ["ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"],
                "Resource": [f"{ec2}:*:instance/*", f"{ec2}:*:launch-template/*"],
                "Condition": owned,
            },
            {
                "Sid": "AllowRegionalReadActions",
                "Effect": "Allow",
                "Action": [
                    "ec2:DescribeAvailabilityZones",
                    "ec2:DescribeCapacityReservations",
                    "ec2:DescribeImages",
                    "ec2:DescribeInstances",
                    "ec2:DescribeInstanceTypeOfferings",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplates",
                    "ec2:DescribePlacementGroups",
                    "ec2:DescribeSecurityGroups",
                    "ec2:DescribeSpotPriceHistory",
                    "ec2:DescribeSubnets",
                ],
                "Resource": "*",
                "Condition": {"StringEquals": {"aws:RequestedRegion": region}},
            },
            {
                "Sid": "AllowSSMReadActions",
                "Effect": "Allow",
                "Action": "ssm:GetParameter",
                "Resource": f"arn:{partition}:ssm:{region}::parameter/aws/service/*",
            },
            {
                # The Price List API lives in us-east-1/ap-south-1 only: no region condition.
                "Sid": "AllowPricingReadActions",
                "Effect": "Allow",
                "Action": "pricing:GetProducts",
                "Resource": "*",
            },
            {
                "Sid": "AllowInterruptionQueueActions",
                "Effect": "Allow",
                "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
                "Resource": queue_arn,
            },
            {
                "Sid": "AllowPassingInstanceRole",
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": node_role_arn,
                "Condition": {"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}},
            },
            {
                "Sid": "AllowInstanceProfileReadActions",
                "Effect": "Allow",
                "Action": "iam:GetInstanceProfile",
                "Resource": instance_profile_arn,
            },
            {
                "Sid": "AllowAPIServerEndpointDiscovery",
                "Effect": "Allow",
                "Action": "eks:DescribeCluster",
                "Resource": f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}",
            },
        ],
    }


def interruption_queue_policy(queue_arn: str, rule_arns: list[str]) -> dict[str, Any]:
    """Only this stack's EventBridge rules may send; nothing reaches the queue without TLS."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "AllowEventBridgeRules",
                "Effect": "Allow",
                "Principal": {"Service": "events.amazonaws.com"},
                "Action": "sqs:SendMessage",
                "Resource": queue_arn,
                "Condition": {"ArnEquals": {"aws:SourceArn": sorted(rule_arns)}},
            },
            {
                "Sid": "DenyHTTP",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "sqs:*",
                "Resource": queue_arn,
                "Condition": {"Bool": {"aws:SecureTransport": "false"}},
            },
        ],
    }


def helm_values(
    *, cluster_name: str, queue_name: str, region: str, replicas: int
) -> dict[str, Any]:
    """Chart values (every key exists in the chart's values.yaml; tests/test_karpenter.py)."""
    return {
        "replicas": replicas,
        "serviceAccount": {"name": SERVICE_ACCOUNT},
        "settings": {"clusterName": cluster_name, "interruptionQueue": queue_name},
        "controller": {
            # Hop limit 1 keeps pods away from IMDS, so the SDK cannot discover the region.
            "env": [{"name": "AWS_REGION", "value": region}],
            "resources": {
                "requests": {"cpu": "1", "memory": "1Gi"},
                "limits": {"memory": "1Gi"},
            },
        },
        # On the system node group: never on capacity Karpenter itself manages.
        "nodeSelector": {"kubernetes.io/os": "linux", **catalog.system_node_labels()},
        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
    }


# --- the component ------------------------------------------------------------------------------


@dataclass(frozen=True)
class KarpenterArgs:
    """Inputs of the Karpenter component."""

    #: Account, region and partition of the deployment (looked up once).
    aws_account: AwsAccount

    config: KarpenterConfig
    #: Physical EKS cluster name (plain: it goes into names, tags and IAM conditions).
    cluster_name: str
    #: The cluster: its name output, OIDC, node security group, system nodes, k8s provider.
    cluster: Cluster
    #: Cost-allocation tags for every taggable resource.
    tags: dict[str, str]

    @classmethod
    def of(
        cls, cfg: StackConfig, cluster: Cluster, aws_account: AwsAccount, tags: dict[str, str]
    ) -> KarpenterArgs:
        """This component's slice of the stack config and the cluster it scales."""
        return cls(
            aws_account=aws_account,
            config=cfg.karpenter,
            cluster_name=cfg.cluster.name,
            cluster=cluster,
            tags=tags,
        )


class Karpenter(pulumi.ComponentResource):
    """The Karpenter controller, its IAM and interruption queue, EC2NodeClasses and NodePools."""

    node_role: aws.iam.Role
    controller_role: aws.iam.Role
    interruption_queue: aws.sqs.Queue
    crd_release: k8s.helm.v3.Release
    controller_release: k8s.helm.v3.Release
    node_classes: dict[str, k8s.apiextensions.CustomResource]
    node_pools: dict[str, k8s.apiextensions.CustomResource]

    def __init__(
        self, name: str, args: KarpenterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:karpenter:Karpenter", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        config, cluster, tags = args.config, args.cluster, args.tags
        cluster_name = args.cluster_name
        account_id = args.aws_account.account_id
        region = args.aws_account.region
        partition = args.aws_account.partition

        # --- nodes: role, instance profile, access entry, security-group discovery tag ---
        self.node_role = aws.iam.Role(
            f"{name}-node",
            assume_role_policy=json.dumps(iam.service_trust_policy("ec2.amazonaws.com")),
            managed_policy_arns=[f"{iam.AWS_MANAGED}/{p}" for p in NODE_MANAGED_POLICIES],
            tags=tags,
            opts=child,
        )
        profile_name = f"{cluster_name}-karpenter-node"
        instance_profile = aws.iam.InstanceProfile(
            f"{name}-node",
            name=profile_name,
            role=self.node_role.name,
            tags=tags,
            opts=child,
        )
        access_entry = aws.eks.AccessEntry(
            f"{name}-node",
            cluster_name=cluster.name,
            principal_arn=self.node_role.arn,
            type="EC2_LINUX",
            tags=tags,
            opts=child,
        )
        # Subnets carry the discovery tag from the Network component; the node SG gets it here.
        sg_tag = aws.ec2.Tag(
            f"{name}-node-sg-discovery",
            resource_id=cluster.node_security_group_id,
            key=DISCOVERY_TAG,
            value=cluster_name,
            opts=child,
        )

        # --- interruption handling: queue, four rules, queue policy ---
        queue_name = f"{cluster_name}-karpenter"
        self.interruption_queue = aws.sqs.Queue(
            f"{name}-interruption",
            name=queue_name,
            message_retention_seconds=INTERRUPTION_RETENTION_S,
            sqs_managed_sse_enabled=True,
            tags=tags,
            opts=child,
        )
        rules: list[aws.cloudwatch.EventRule] = []
        for key, pattern in INTERRUPTION_EVENTS.items():
            rule = aws.cloudwatch.EventRule(
                f"{name}-{key}",
                name=f"{cluster_name}-karpenter-{key}",
                description=f"Karpenter interruption handling: {pattern['detail-type'][0]}",
                event_pattern=json.dumps(pattern),
                tags=tags,
                opts=child,
            )
            aws.cloudwatch.EventTarget(
                f"{name}-{key}",
                rule=rule.name,
                target_id="karpenter-interruption-queue",
                arn=self.interruption_queue.arn,
                opts=child,
            )
            rules.append(rule)
        queue_policy = aws.sqs.QueuePolicy(
            f"{name}-interruption",
            queue_url=self.interruption_queue.url,
            policy=pulumi.Output.all(self.interruption_queue.arn, *[r.arn for r in rules]).apply(
                lambda arns: json.dumps(interruption_queue_policy(arns[0], list(arns[1:])))
            ),
            opts=child,
        )

        # --- controller identity: Pod Identity role scoped to this cluster and region ---
        self.controller_role = aws.iam.Role(
            f"{name}-controller",
            assume_role_policy=json.dumps(iam.pod_identity_trust_policy(account_id)),
            tags=tags,
            opts=child,
        )
        controller_policy_doc = pulumi.Output.all(
            self.interruption_queue.arn, self.node_role.arn, instance_profile.arn
        ).apply(
            lambda arns: json.dumps(
                controller_policy(
                    cluster_name=cluster_name,
                    region=region,
                    account_id=account_id,
                    partition=partition,
                    queue_arn=arns[0],
                    node_role_arn=arns[1],
                    instance_profile_arn=arns[2],
                )
            )
        )
        role_policy = aws.iam.RolePolicy(
            f"{name}-controller",
            role=self.controller_role.id,
            policy=controller_policy_doc,
            opts=child,
        )
        pod_identity = aws.eks.PodIdentityAssociation(
            f"{name}-controller",
            cluster_name=cluster.name,
            namespace=config.namespace,
            service_account=SERVICE_ACCOUNT,
            role_arn=self.controller_role.arn,
            tags=tags,
            opts=child,
        )

        # --- Helm: CRDs first (Helm never upgrades a chart's crds/), then the controller ---
        k8s_child = pulumi.ResourceOptions(parent=self, provider=cluster.k8s_provider)
        self.crd_release = k8s.helm.v3.Release(
            f"{name}-crd",
            name="karpenter-crd",
            chart=CRD_CHART,
            version=config.chart_version,
            namespace=config.namespace,
            opts=k8s_child,
        )
        self.controller_release = k8s.helm.v3.Release(
            f"{name}-controller",
            name="karpenter",
            chart=CONTROLLER_CHART,
            version=config.chart_version,
            namespace=config.namespace,
            skip_crds=True,
            values=helm_values(
                cluster_name=cluster_name,
                queue_name=queue_name,
                region=region,
                replicas=config.replicas,
            ),
            opts=pulumi.ResourceOptions.merge(
                k8s_child,
                pulumi.ResourceOptions(
                    depends_on=[
                        self.crd_release,
                        pod_identity,
                        role_policy,
                        queue_policy,
                        cluster.system_node_group,
                    ]
                ),
            ),
        )

        # --- EC2NodeClasses and NodePools: deleted before the controller on destroy ---
        classes = {
            GPU_NODE_CLASS: (config.gpu_node_class, [p for p in config.pools if p.is_gpu]),
            CPU_NODE_CLASS: (config.cpu_node_class, [p for p in config.pools if not p.is_gpu]),
        }
        self.node_classes = {}
        for class_name, (disk, pools) in classes.items():
            if not pools:
                continue
            types = {t for pool in pools for t in pool.resolved_instance_types}
            spec = ec2nodeclass_spec(
                cluster_name=cluster_name,
                ami_alias=config.ami_alias,
                instance_profile=profile_name,
                disk=disk,
                instance_store_raid0=all(catalog.instance(t).nvme_instance_store for t in types),
                tags=node_class_tags(tags, cluster_name=cluster_name, node_class=class_name),
            )
            self.node_classes[class_name] = k8s.apiextensions.CustomResource(
                f"{name}-class-{class_name}",
                api_version=NODECLASS_API_VERSION,
                kind="EC2NodeClass",
                metadata={"name": class_name},
                spec=spec,
                opts=pulumi.ResourceOptions.merge(
                    k8s_child,
                    pulumi.ResourceOptions(
                        depends_on=[
                            self.controller_release,
                            instance_profile,
                            access_entry,
                            sg_tag,
                        ]
                    ),
                ),
            )
        self.node_pools = {}
        for pool in config.pools:
            node_class = pool_node_class(pool)
            self.node_pools[pool.name] = k8s.apiextensions.CustomResource(
                f"{name}-pool-{pool.name}",
                api_version=NODEPOOL_API_VERSION,
                kind="NodePool",
                metadata={"name": pool.name},
                spec=nodepool_spec(pool, node_class=node_class),
                opts=pulumi.ResourceOptions.merge(
                    k8s_child,
                    pulumi.ResourceOptions(
                        depends_on=[self.controller_release, self.node_classes[node_class]]
                    ),
                ),
            )

        self.register_outputs(
            {
                "nodeRoleArn": self.node_role.arn,
                "controllerRoleArn": self.controller_role.arn,
                "interruptionQueueUrl": self.interruption_queue.url,
                "nodePools": sorted(self.node_pools),
            }
        )
