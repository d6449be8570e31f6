"""Pure builders of the managed node groups' launch templates, labels, taints, tags and the
`transforms` that set what pulumi-eks has no input for. No resources: components/platform/
cluster.py creates the groups from these, and the tests check them directly."""

from __future__ import annotations

from typing import Any, Final

import pulumi

from components import catalog
from components.analysis import nodes
from components.config import GpuNodeGroup

#: Tag prefix the cluster-autoscaler reads a scale-from-zero node's resources from.
AUTOSCALER_TEMPLATE_RESOURCES: Final = "k8s.io/cluster-autoscaler/node-template/resources/"


def launch_template_spec(
    *, disk_size_gib: int, disk_iops: int, disk_throughput_mibps: int
) -> dict[str, Any]:
    """Launch-template settings shared by every node group: IMDSv2 only, encrypted gp3 root.

    Hop limit 1 keeps containers (not on the host network) away from the node's credentials;
    workloads get AWS access through Pod Identity or IRSA instead.
    """
    return {
        "metadata_options": {
            "http_endpoint": "enabled",
            "http_tokens": "required",
            "http_put_response_hop_limit": 1,
        },
        "block_device_mappings": [
            {
                "device_name": "/dev/xvda",
                "ebs": {
                    "volume_size": disk_size_gib,
                    "volume_type": "gp3",
                    "iops": disk_iops,
                    "throughput": disk_throughput_mibps,
                    "encrypted": "true",
                    "delete_on_termination": "true",
                },
            }
        ],
    }


def efa_network_interfaces(efa_devices: int, security_group_id: Any) -> list[dict[str, Any]]:
    """Launch-template network interfaces of an EFA node: one per EFA network card, the first
    an EFA (with ENA) interface at device index 0, the others EFA-only at device index 1 - the
    layout pulumi-eks's `enableEfaSupport` builds (pulumi/pulumi-eks@v4.3.0:
    nodejs/eks/nodes/instances.ts#L86-103, after https://docs.aws.amazon.com/AWSEC2/latest/
    UserGuide/efa-start.html#efa-start-tempinstance: "the first interface ... device index 0,
    all the secondary interfaces ... device index 1"). Managed groups get no EFA interface
    otherwise (Karpenter adds them itself when pods request vpc.amazonaws.com/efa)."""
    return [
        {
            "network_card_index": index,
            "device_index": 0 if index == 0 else 1,
            "interface_type": "efa" if index == 0 else "efa-only",
            "security_groups": [security_group_id],
            "delete_on_termination": "true",
        }
        for index in range(efa_devices)
    ]


def node_group_transform(
    *, auto_repair: bool, max_unavailable: int | None = None
) -> pulumi.ResourceTransform:
    """A `transforms` entry that sets what pulumi-eks 4.4.0 has no input for on the EKS node
    group a `ManagedNodeGroup` creates: `nodeRepairConfig` (runs.md item 9) and, for GPU groups,
    `updateConfig.maxUnavailable` (nodes replaced at a time in a rolling AMI or launch-template
    update). `transforms` - unlike `transformations` - reach the children of packaged
    components such as pulumi-eks's (https://www.pulumi.com/docs/iac/concepts/options/
    transformations/: "Transforms support modifying child resources of packaged components
    (such as those in awsx and eks)"). The engine hands over wire-format properties (camelCase,
    pulumi/runtime/_callbacks.py `deserialize_properties`), hence the keys (pulumi-aws 7.51.1
    NodeGroupNodeRepairConfigArgs `enabled`, NodeGroupUpdateConfigArgs `maxUnavailable`).

    What EKS then does (https://docs.aws.amazon.com/eks/latest/userguide/node-repair.html): on a
    condition the node monitoring agent reports, replace (or, for AcceleratedHardwareReady,
    reboot) the node after 10 min (GPU) or 30 min (Ready, KernelReady, NetworkingReady, ...);
    it stops repairing when more than 20 % of a group of more than five nodes is unhealthy."""
    extra: dict[str, Any] = {"nodeRepairConfig": {"enabled": auto_repair}}
    if max_unavailable is not None:
        extra["updateConfig"] = {"maxUnavailable": max_unavailable}

    def transform(args: pulumi.ResourceTransformArgs) -> pulumi.ResourceTransformResult | None:
        if args.type_ != catalog.EKS_NODE_GROUP_TYPE:
            return None
        return pulumi.ResourceTransformResult(props={**args.props, **extra}, opts=args.opts)

    return transform


def gpu_group_labels(group: GpuNodeGroup) -> dict[str, str]:
    """Node labels of a managed GPU group (the same keys Karpenter pools and Kueue use; one
    home: components/analysis/nodes.py, which the "will it run" analysis matches pods against)."""
    return nodes.managed_gpu_labels(group)


def eks_taints(taints: tuple[dict[str, str], ...]) -> list[dict[str, str]]:
    """Kubernetes taints in the EKS node-group API's spelling (NoSchedule -> NO_SCHEDULE)."""
    effect = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}
    return [
        {"key": t["key"], "value": t["value"], "effect": effect.get(t["effect"], "NO_EXECUTE")}
        for t in taints
    ]


def autoscaler_group_tags(group: GpuNodeGroup) -> dict[str, str]:
    """Node-group tags the cluster-autoscaler reads for scale-from-zero: resources it cannot
    infer from its instance-type table. `nvidia.com/gpu` it knows; `vpc.amazonaws.com/efa` it
    does not. At 1.33.6 it reads `k8s.io/cluster-autoscaler/node-template/resources/*` from the
    EKS node group's own tags through eks:DescribeNodegroup (kubernetes/autoscaler@
    cluster-autoscaler-1.33.6 cloudprovider/aws/aws_manager.go#L322-331, "ManagedNodeGroup
    resource-indicating tags override conflicting tags on the ASG"), so no tag on the Auto
    Scaling group itself is needed."""
    if not group.efa_devices:
        return {}
    return {f"{AUTOSCALER_TEMPLATE_RESOURCES}{catalog.EFA_RESOURCE}": str(group.efa_devices)}


def reservation_spec(group: GpuNodeGroup) -> dict[str, Any]:
    """Launch-template settings that bind a group to its capacity reservation: an ODCR through
    the capacity reservation target; a Capacity Block through `instance_market_options` (market
    type `capacity-block`), the reservation and the group's one `instance_type`. EKS requires all
    three in the launch template of a CAPACITY_BLOCK group and rejects a create request missing
    any ("`InstanceType` set to an instance type that supports Capacity Blocks"; awsdocs
    amazon-eks-user-guide@4d52b4d0 latest/ug/ml/capacity-blocks-mng.adoc), so the type goes
    there and not through the EKS API (`node_group_instance_types`), as terraform-aws-eks does
    for exactly this case (terraform-aws-modules/terraform-aws-eks@v21.19.0
    modules/eks-managed-node-group/main.tf: `instance_type = var.capacity_type ==
    "CAPACITY_BLOCK" ? element(var.instance_types, 0) : null`)."""
    if group.capacity_reservation_id is None:
        return {}
    reservation = group.capacity_reservation_id
    target = {"capacity_reservation_target": {"capacity_reservation_id": reservation}}
    if group.capacity_type == "capacity-block":
        return {
            "instance_market_options": {"market_type": "capacity-block"},
            "capacity_reservation_specification": target,
            "instance_type": group.instance_types[0],
        }
    return {"capacity_reservation_specification": target}


def node_group_instance_types(group: GpuNodeGroup) -> list[str] | None:
    """The EKS node group's `instanceTypes`: none for a Capacity Block group, whose type is in
    its launch template (`reservation_spec`) - "If you specify an instance type in a launch
    template, and use that launch template to deploy your node group, then you can't specify
    any instance types ... using other tools that use the Amazon EKS API" (awsdocs
    amazon-eks-user-guide@4d52b4d0 latest/ug/nodes/launch-templates.adoc; terraform-aws-eks
    v21.19.0 main.tf: `instance_types = var.capacity_type == "CAPACITY_BLOCK" ? null :
    var.instance_types`). On-demand and spot groups keep their types on the node group, where
    a spot group's several types become the Auto Scaling group's instance overrides."""
    if group.capacity_type == "capacity-block":
        return None
    return list(group.instance_types)


def node_group_extras(cluster_name: str, group: GpuNodeGroup) -> dict[str, Any]:
    """pulumi-eks ManagedNodeGroup inputs of a GPU group beyond the common ones: its EKS name,
    so the autoscaler's priority expander can match its Auto Scaling group
    (`eks-<nodegroup-name>-<uuid>`, components/platform/capacity/autoscaler.py), and its AMI
    release."""
    extra: dict[str, Any] = {"node_group_name": f"{cluster_name}-{group.name}"}
    if group.release_version is not None:
        extra["release_version"] = group.release_version
    return extra
