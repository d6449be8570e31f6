"""Pure builders of the Karpenter layer: NodePool and EC2NodeClass specs, the controller's IAM
policy, the interruption queue policy and the chart values. Functions from config to dicts,
tested without Pulumi; `components.platform.karpenter` turns them into resources."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from components import catalog
from components.config import KarpenterNodeClass, KarpenterPool

if TYPE_CHECKING:
    pass


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
    """Chart values (every key exists in the chart's values.yaml;
    tests/platform/test_karpenter.py)."""
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
