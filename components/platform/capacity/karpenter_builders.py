"""Pure builders of the Karpenter layer: NodePool and EC2NodeClass specs, the controller's IAM
policy, the interruption queue policy and the chart values. Functions from config to dicts,
tested without Pulumi; `components.platform.capacity.karpenter` turns them into resources."""

from __future__ import annotations

from typing import Any, Final

from components import catalog
from components.config import KarpenterFeatureGates, KarpenterNodeClass, KarpenterPool

SERVICE_ACCOUNT: Final = "karpenter"
DISCOVERY_TAG: Final = "karpenter.sh/discovery"
NODECLASS_GROUP: Final = "karpenter.k8s.aws"
NODECLASS_API_VERSION: Final = f"{NODECLASS_GROUP}/v1"
NODEPOOL_API_VERSION: Final = "karpenter.sh/v1"
GPU_NODE_CLASS: Final = "gpu"
#: Reserved pools launch from a class of their own: only it carries the reservation selector,
#: so an on-demand or spot pool can never draw a reservation down.
GPU_RESERVED_NODE_CLASS: Final = "gpu-reserved"
CPU_NODE_CLASS: Final = "cpu"
#: EFA pools (every type has EFA) launch from a class of their own: it carries the cluster
#: placement group and one AZ's subnet, which the other GPU pools (spot L4s that should use any
#: zone with capacity) must not inherit - "each EC2NodeClass maps to exactly one placement group"
#: (aws/karpenter-provider-aws@v1.14.1:website/content/en/docs/concepts/nodeclasses.md#L991).
GPU_EFA_NODE_CLASS: Final = "gpu-efa"

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
    # Interruptible ODCRs: Karpenter drains on the 2-minute warning
    # (aws/karpenter-provider-aws@v1.14.1: website/content/en/docs/getting-started/
    # getting-started-with-karpenter/cloudformation.yaml#L454-464,
    # CapacityReservationInterruptionRule;
    # pkg/controllers/interruption/messages/capacityreservationinterruption/parser.go#L42-43).
    "capacity-reservation-interruption": {
        "source": ["aws.ec2"],
        "detail-type": ["EC2 Capacity Reservation Instance Interruption Warning"],
    },
}
#: Karpenter deletes a message once handled; older ones describe instances long gone.
INTERRUPTION_RETENTION_S: Final = 300


# --- pure builders ------------------------------------------------------------------------------


def pool_node_class(pool: KarpenterPool, *, in_placement_group: bool = False) -> str:
    """The EC2NodeClass a pool launches from. `in_placement_group`: the pool launches into the
    EFA cluster placement group (components/analysis/efa_placement.py pool_in_group); reserved
    pools keep their own class, which carries the group only when the reservations were created
    in it."""
    if pool.capacity_type == "reserved":
        return GPU_RESERVED_NODE_CLASS
    if in_placement_group:
        return GPU_EFA_NODE_CLASS
    return GPU_NODE_CLASS if pool.is_gpu else CPU_NODE_CLASS


def pool_labels(pool: KarpenterPool) -> dict[str, str]:
    """Node labels: the catalog's keys, the same as managed node groups carry."""
    if pool.is_gpu:
        labels = catalog.gpu_node_labels(
            gpu_class=pool.resolved_gpu_class,
            gpu_model=pool.gpu_model,
            capacity_type=pool.capacity_type,
            workload_type=pool.workload_type,
            provisioner="karpenter",
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


#: nodeadm NodeConfig that enables SOCI parallel pull (`spec.featureGates.FastImagePull`,
#: awslabs/amazon-eks-ami@81fec2e8:nodeadm/api/v1alpha1/nodeconfig_types.go#L37,#L159-170; first
#: in release v20250821, `git tag --contains 28454ab9`). nodeadm then configures containerd for the
#: soci snapshotter's parallel pull mode — only on nodes with >= 4 vCPU and >= 7 GiB
#: (nodeadm/internal/containerd/config.go#L167-187) — and, with RAID0 instance store, keeps
#: /var/lib/soci-snapshotter-grpc on the NVMe array (nodeconfig_types.go#L115-160). Karpenter takes
#: plain NodeConfig YAML as custom userData and puts it before its own NodeConfig in the MIME
#: archive; nodeadm merges the two (aws/karpenter-provider-aws@v1.14.1:
#: pkg/providers/amifamily/bootstrap/nodeadm.go#L49-53,#L125-150).
FAST_IMAGE_PULL_USER_DATA: Final = """\
apiVersion: node.eks.aws/v1alpha1
kind: NodeConfig
spec:
  featureGates:
    FastImagePull: true
"""


def ec2nodeclass_spec(
    *,
    cluster_name: str,
    ami_alias: str,
    instance_profile: str,
    security_group_id: Any,
    disk: KarpenterNodeClass,
    instance_store_raid0: bool,
    tags: dict[str, str],
    capacity_reservations: list[dict[str, Any]] | None = None,
    placement_group_id: Any | None = None,
    subnet_ids: list[Any] | None = None,
) -> dict[str, Any]:
    """The EC2NodeClass `spec`: AL2023 by alias (Karpenter picks the NVIDIA variant for GPU
    types), discovery-tag subnets, the node security group by id, IMDSv2 with hop limit 1 (pods
    reach AWS through Pod Identity, never the node's credentials), an encrypted gp3 root sized
    for multi-GB images and, where every type has NVMe instance store, RAID0 over it for the
    image cache and ephemeral storage.

    The security group is selected by id (`securityGroupSelectorTerms[].id`,
    aws/karpenter-provider-aws@v1.14.1:pkg/apis/v1/ec2nodeclass.go#L187-200): it is the
    pulumi-eks node security group every managed node group's launch template uses, so all
    nodes share one group (pod-to-pod traffic, DNS, NCCL/EFA self-traffic) without tagging a
    group another resource owns (an aws.ec2.Tag on a pulumi-eks-managed group fights its owner).

    EFA: Karpenter adds one EFA interface per network card when a pod requests
    `vpc.amazonaws.com/efa` (pkg/providers/instance/instance.go#L699-721,
    launchtemplate.go#L334-350), with these security groups; each takes a subnet address.
    `capacity_reservations`: `capacityReservationSelectorTerms` for the reserved class.

    `placement_group_id`: `placementGroupSelector: {id}` (ec2nodeclass.go#L56-60, #L224-233:
    `name` or `id`; the id, because the group is this stack's own and names are only unique per
    account and region). `subnet_ids`: subnets by id instead of the discovery tag - the one AZ
    of a cluster placement group (components/analysis/efa_placement.py)."""
    spec: dict[str, Any] = {
        "amiSelectorTerms": [{"alias": ami_alias}],
        "instanceProfile": instance_profile,
        "subnetSelectorTerms": _subnet_terms(cluster_name, subnet_ids),
        "securityGroupSelectorTerms": [{"id": security_group_id}],
        "metadataOptions": _imds_options(),
        "blockDeviceMappings": [_root_volume(disk)],
        "tags": tags,
        **_node_bootstrap(disk, instance_store_raid0=instance_store_raid0),
    }
    if capacity_reservations:
        spec["capacityReservationSelectorTerms"] = capacity_reservations
    if placement_group_id is not None:
        spec["placementGroupSelector"] = {"id": placement_group_id}
    return spec


def _node_bootstrap(disk: KarpenterNodeClass, *, instance_store_raid0: bool) -> dict[str, Any]:
    """What nodeadm sets up at boot, where asked: RAID0 over NVMe instance store, fast pulls."""
    bootstrap: dict[str, Any] = {}
    if instance_store_raid0:
        bootstrap["instanceStorePolicy"] = "RAID0"
    if disk.fast_image_pull:
        bootstrap["userData"] = FAST_IMAGE_PULL_USER_DATA
    return bootstrap


def _subnet_terms(cluster_name: str, subnet_ids: list[Any] | None) -> list[dict[str, Any]]:
    """Subnets by id where the class is pinned to them (a placement group's AZ), else by tag."""
    if subnet_ids:
        return [{"id": subnet} for subnet in subnet_ids]
    return [{"tags": {DISCOVERY_TAG: cluster_name}}]


def _imds_options() -> dict[str, Any]:
    """IMDSv2 with hop limit 1: pods get AWS credentials from Pod Identity, never the node's."""
    return {
        "httpEndpoint": "enabled",
        "httpProtocolIPv6": "disabled",
        "httpPutResponseHopLimit": 1,
        "httpTokens": "required",
    }


def _root_volume(disk: KarpenterNodeClass) -> dict[str, Any]:
    """The encrypted gp3 root volume, sized and provisioned for pulling multi-GB images."""
    return {
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
) -> dict[str, Any]:
    """The controller's IAM policy: upstream's v1.14.1 getting-started CloudFormation
    (aws/karpenter-provider-aws@v1.14.1:website/content/en/docs/getting-started/
    getting-started-with-karpenter/cloudformation.yaml#L27-378, six managed policies) as one
    inline policy, statement for statement, with every EC2 write tied to this cluster's tags and
    reads to the requested region. Nothing is left out: `iam:ListInstanceProfiles` on `*` and
    `iam:GetInstanceProfile` on `instance-profile/*` are needed even though the EC2NodeClasses
    name our instance profile, because the EC2NodeClass finalizer lists and reads profiles on
    delete and only NotFound is ignored - without them `pulumi destroy` hangs on the finalizer
    (https://github.com/aws/karpenter-provider-aws/issues/9185;
    pkg/controllers/nodeclass/controller.go#L175-234 at v1.14.1). tests/platform/
    test_karpenter.py keeps upstream's action list as data and checks every action is here."""
    ec2 = f"arn:{partition}:ec2:{region}"
    iam = f"arn:{partition}:iam::{account_id}"
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
            # --- KarpenterControllerNodeLifecyclePolicy (CFN#L27-169) ---
            {
                "Sid": "AllowScopedEC2InstanceAccessActions",
                "Effect": "Allow",
                "Action": ["ec2:RunInstances", "ec2:CreateFleet"],
                "Resource": [
                    f"{ec2}::image/*",
                    f"{ec2}::snapshot/*",
                    f"{ec2}:*:security-group/*",
                    f"{ec2}:*:subnet/*",
                    # Reserved pools launch into ODCRs / Capacity Blocks (CFN#L46).
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
            # --- KarpenterControllerIAMIntegrationPolicy (CFN#L170-254) ---
            {
                "Sid": "AllowPassingInstanceRole",
                "Effect": "Allow",
                "Action": "iam:PassRole",
                "Resource": node_role_arn,
                "Condition": {
                    "StringEquals": {
                        "iam:PassedToService": ["ec2.amazonaws.com", "ec2.amazonaws.com.cn"]
                    }
                },
            },
            {
                # Karpenter manages profiles only for EC2NodeClasses with `spec.role`; ours use
                # `spec.instanceProfile`, but the statements stay so a class switched to a role
                # works and its finalizer can clean up (all scoped to this cluster's tags).
                "Sid": "AllowScopedInstanceProfileCreationActions",
                "Effect": "Allow",
                "Action": "iam:CreateInstanceProfile",
                "Resource": f"{iam}:instance-profile/*",
                "Condition": {
                    "StringEquals": {
                        f"aws:RequestTag/{cluster_tag}": "owned",
                        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
                        "aws:RequestTag/topology.kubernetes.io/region": region,
                    },
                    "StringLike": {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileTagActions",
                "Effect": "Allow",
                "Action": "iam:TagInstanceProfile",
                "Resource": f"{iam}:instance-profile/*",
                "Condition": {
                    "StringEquals": {
                        f"aws:ResourceTag/{cluster_tag}": "owned",
                        "aws:ResourceTag/topology.kubernetes.io/region": region,
                        f"aws:RequestTag/{cluster_tag}": "owned",
                        "aws:RequestTag/eks:eks-cluster-name": cluster_name,
                        "aws:RequestTag/topology.kubernetes.io/region": region,
                    },
                    "StringLike": {
                        "aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*",
                        "aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*",
                    },
                },
            },
            {
                "Sid": "AllowScopedInstanceProfileActions",
                "Effect": "Allow",
                "Action": [
                    "iam:AddRoleToInstanceProfile",
                    "iam:RemoveRoleFromInstanceProfile",
                    "iam:DeleteInstanceProfile",
                ],
                "Resource": f"{iam}:instance-profile/*",
                "Condition": {
                    "StringEquals": {
                        f"aws:ResourceTag/{cluster_tag}": "owned",
                        "aws:ResourceTag/topology.kubernetes.io/region": region,
                    },
                    "StringLike": {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
                },
            },
            # --- KarpenterControllerEKSIntegrationPolicy (CFN#L255-273) ---
            {
                "Sid": "AllowAPIServerEndpointDiscovery",
                "Effect": "Allow",
                "Action": "eks:DescribeCluster",
                "Resource": f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}",
            },
            # --- KarpenterControllerInterruptionPolicy (CFN#L274-296) ---
            {
                "Sid": "AllowInterruptionQueueActions",
                "Effect": "Allow",
                "Action": ["sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"],
                "Resource": queue_arn,
            },
            # --- KarpenterControllerZonalShiftPolicy (CFN#L297-320) ---
            {
                "Sid": "AllowZonalShiftStatusReadOnly",
                "Effect": "Allow",
                "Action": "arc-zonal-shift:GetManagedResource",
                "Resource": "*",
                "Condition": {
                    "StringEquals": {
                        "arc-zonal-shift:ResourceIdentifier": (
                            f"arn:{partition}:eks:{region}:{account_id}:cluster/{cluster_name}"
                        )
                    }
                },
            },
            # --- KarpenterControllerResourceDiscoveryPolicy (CFN#L321-378) ---
            {
                "Sid": "AllowRegionalReadActions",
                "Effect": "Allow",
                "Action": [
                    "ec2:DescribeAvailabilityZones",
                    "ec2:DescribeCapacityReservations",
                    "ec2:DescribeImages",
                    "ec2:DescribeInstances",
                    "ec2:DescribeInstanceStatus",
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
                # The EC2NodeClass finalizer lists profiles under /karpenter/<region>/<cluster>/
                # (issue #9185): unscoped upstream because ListInstanceProfiles takes no ARN.
                "Sid": "AllowUnscopedInstanceProfileListAction",
                "Effect": "Allow",
                "Action": "iam:ListInstanceProfiles",
                "Resource": "*",
            },
            {
                # Any profile, not only ours: the finalizer also reads the legacy
                # `<cluster>_<hash>` name and a 403 (not a 404) wedges it.
                "Sid": "AllowInstanceProfileReadActions",
                "Effect": "Allow",
                "Action": "iam:GetInstanceProfile",
                "Resource": f"{iam}:instance-profile/*",
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
    *,
    cluster_name: str,
    queue_name: str,
    region: str,
    replicas: int,
    feature_gates: KarpenterFeatureGates,
) -> dict[str, Any]:
    """Chart values (every key exists in the chart's values.yaml;
    tests/platform/test_karpenter.py)."""
    return {
        "replicas": replicas,
        "serviceAccount": {"name": SERVICE_ACCOUNT},
        "settings": {
            "clusterName": cluster_name,
            "interruptionQueue": queue_name,
            # Explicit, not the chart default: reserved pools and node repair depend on them
            # (charts/karpenter/values.yaml#L230-248 at v1.14.1; KarpenterFeatureGates says why).
            "featureGates": {
                "reservedCapacity": feature_gates.reserved_capacity,
                "nodeRepair": feature_gates.node_repair,
            },
        },
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
