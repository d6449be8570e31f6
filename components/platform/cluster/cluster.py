"""The EKS cluster: control plane (pulumi-eks), access entries, add-ons, node groups, provider.

Owns everything a Kubernetes object needs before it can exist: the control plane with API
authentication and KMS-encrypted secrets, the OIDC provider and Pod Identity agent for workload
IAM, the pinned managed add-ons, the system and GPU managed node groups, the default gp3
StorageClass and the explicit Kubernetes provider every Kubernetes resource must use.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_aws as aws
import pulumi_eks as eks
import pulumi_kubernetes as k8s

from components import catalog
from components.analysis import efa_placement, nodes
from components.config import ClusterConfig, GpuNodeGroup, NodeGroupsConfig
from components.config.node_groups import GPU_AMI_TYPES
from components.platform.cluster import iam
from components.platform.cluster.handles import ClusterHandles, NetworkHandles
from components.platform.cluster.iam import AwsAccount
from components.platform.cluster.node_group_builders import (
    autoscaler_group_tags,
    efa_network_interfaces,
    eks_taints,
    gpu_group_labels,
    launch_template_spec,
    node_group_extras,
    node_group_instance_types,
    node_group_transform,
    reservation_spec,
)
from components.resource_options import child_options

if TYPE_CHECKING:
    from components.analysis.facts import StackFacts


CLUSTER_ADMIN_POLICY = "arn:aws:eks::aws:cluster-access-policy/AmazonEKSClusterAdminPolicy"
EBS_CSI_SERVICE_ACCOUNT = "ebs-csi-controller-sa"


@dataclass(frozen=True)
class ClusterArgs:
    """Inputs of the Cluster component."""

    #: Account, region and partition of the deployment (looked up once).
    aws_account: AwsAccount

    config: ClusterConfig
    node_groups: NodeGroupsConfig
    vpc_id: pulumi.Input[str]
    #: The control plane's subnets (its API-server ENIs) and the node groups': the private ones
    #: only (`_control_plane` says why). Public subnets reach no component: NAT gateways and
    #: load balancers find them by their tags (network.discovery_tags).
    private_subnet_ids: list[pulumi.Output[str]]
    tags: dict[str, str]
    #: Extra node labels per GPU node group name (e.g. the GPU Operator's device-plugin config).
    extra_gpu_labels: dict[str, dict[str, str]] = field(default_factory=dict)
    #: EC2 name of the EFA cluster placement group; None when nothing launches into it.
    placement_group_name: str | None = None
    #: Private-subnet index (AZ) of the placement group's capacity.
    placement_zone_index: int = 0
    #: GPU node groups whose launch templates put their nodes into the group.
    placement_node_groups: frozenset[str] = frozenset()
    #: GPU groups the cluster-autoscaler resizes (StackConfig.autoscaled): they ignore scaling
    #: changes.
    autoscaled_groups: frozenset[str] = frozenset()
    #: The one private-subnet index of each GPU group confined to a zone (a reservation's, the
    #: placement group's or its own `zoneIndex`: StackFacts.node_groups).
    group_zone_index: Mapping[str, int] = field(default_factory=dict)
    #: `/aws/eks/<name>/cluster`, created first (Logging) so that EKS writes control-plane logs
    #: into an encrypted, expiring group instead of creating its own.
    control_plane_log_group: aws.cloudwatch.LogGroup | None = None

    @classmethod
    def of(
        cls,
        facts: StackFacts,
        network: NetworkHandles,
        aws_account: AwsAccount,
        tags: dict[str, str],
        extra_gpu_labels: dict[str, dict[str, str]],
        *,
        control_plane_log_group: aws.cloudwatch.LogGroup | None = None,
    ) -> ClusterArgs:
        """This component's slice of the stack config, the GPU groups' placement-group and zone
        membership as the facts hold it (the analysis reads the same), and the network."""
        cfg = facts.cfg
        return cls(
            aws_account=aws_account,
            config=cfg.cluster,
            node_groups=cfg.node_groups,
            vpc_id=network.vpc_id,
            private_subnet_ids=network.private_subnet_ids,
            tags=tags,
            extra_gpu_labels=extra_gpu_labels,
            placement_group_name=(
                efa_placement.group_name(cfg) if facts.placement_group_needed else None
            ),
            placement_zone_index=cfg.network.efa_placement_group.zone_index,
            placement_node_groups=frozenset(
                name for name, member in facts.node_groups.items() if member.placement_group
            ),
            control_plane_log_group=control_plane_log_group,
            autoscaled_groups=frozenset(g.name for g in cfg.node_groups.gpu if cfg.autoscaled(g)),
            group_zone_index={
                name: member.zone_index
                for name, member in facts.node_groups.items()
                if member.zone_index is not None
            },
        )


class Cluster(pulumi.ComponentResource):
    """EKS with API authentication, encrypted secrets, pinned add-ons and managed node groups."""

    name: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    oidc_provider_arn: pulumi.Output[str]
    oidc_issuer: pulumi.Output[str]
    node_role: aws.iam.Role
    node_security_group_id: pulumi.Output[str]
    k8s_provider: k8s.Provider
    system_node_group: eks.ManagedNodeGroup
    gpu_node_groups: dict[str, eks.ManagedNodeGroup]
    coredns: aws.eks.Addon
    #: The literal cluster name (for IAM conditions that cannot wait for an Output).
    physical_name: str
    #: The EFA cluster placement group and the one private subnet its capacity uses (None when
    #: nothing launches into it; components/analysis/efa_placement.py).
    efa_placement_group: aws.ec2.PlacementGroup | None
    efa_subnet_id: pulumi.Output[str] | None

    @property
    def efa_placement_group_arn(self) -> pulumi.Output[str] | None:
        """What `aws ec2 create-capacity-reservation --placement-group-arn` takes to reserve
        capacity inside the group (`karpenter.reservations[].inPlacementGroup`)."""
        return self.efa_placement_group.arn if self.efa_placement_group is not None else None

    def __init__(
        self, name: str, args: ClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:cluster:Cluster", name, None, opts)
        child = child_options(self)
        config = args.config
        self.physical_name = config.name
        addons = config.resolved_addons
        tags = args.tags

        self.node_role = iam.node_role(f"{name}-node", tags=tags, opts=child)
        cluster = self._control_plane(name, args, child)
        # The literal name, carrying the control plane as a dependency for whoever uses it.
        self.name = cluster.kubeconfig_json.apply(lambda _: config.name)
        self.kubeconfig = pulumi.Output.secret(cluster.kubeconfig_json)
        self.oidc_provider_arn = cluster.oidc_provider_arn
        self.oidc_issuer = cluster.oidc_issuer
        self.node_security_group_id = cluster.node_security_group_id
        self.cluster_security_group_id = cluster.cluster_security_group_id
        self._efa_self_egress(name, child)

        pod_identity_agent = aws.eks.Addon(
            f"{name}-pod-identity-agent",
            cluster_name=self.name,
            addon_name="eks-pod-identity-agent",
            addon_version=addons.pod_identity_agent,
            resolve_conflicts_on_update="OVERWRITE",
            tags=tags,
            opts=child,
        )

        self.system_node_group = self._system_node_group(name, cluster, args)
        self._gpu_node_groups(name, cluster, args, child)

        self._node_addons(name, args, pod_identity_agent, child)

        self._kubernetes(name, cluster, child)

        self._publish()

    def _efa_self_egress(self, name: str, child: pulumi.ResourceOptions) -> None:
        """The node security group's explicit all-traffic egress to itself, for EFA."""
        # EFA needs a security group that allows all traffic to and from itself, inbound AND
        # outbound (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-start.html, "Prepare
        # an EFA-enabled security group"). pulumi-eks gives the node group self ingress
        # (nodejs/eks/nodes/securitygroup.ts#L130-140) and egress to 0.0.0.0/0; the explicit
        # self egress keeps EFA working if that broad egress is ever narrowed.
        aws.ec2.SecurityGroupRule(
            f"{name}-node-efa-self-egress",
            type="egress",
            description="EFA: all traffic to members of the node security group",
            security_group_id=self.node_security_group_id,
            self=True,
            protocol="-1",
            from_port=0,
            to_port=0,
            opts=child,
        )

    def _system_node_group(
        self, name: str, cluster: eks.Cluster, args: ClusterArgs
    ) -> eks.ManagedNodeGroup:
        """The on-demand system node group (controllers, CoreDNS, the platform's add-ons)."""
        return self._node_group(
            f"{name}-system",
            cluster,
            args,
            instance_types=list(args.node_groups.system.instance_types),
            capacity_type="on-demand",
            ami_type="AL2023_x86_64_STANDARD",
            sizes=(
                args.node_groups.system.min_size,
                args.node_groups.system.desired_size,
                args.node_groups.system.max_size,
            ),
            disk=(
                args.node_groups.system.disk_size_gib,
                catalog.SYSTEM_DISK_IOPS,
                catalog.SYSTEM_DISK_THROUGHPUT_MIBPS,
            ),
            labels={
                **catalog.system_node_labels(),
                catalog.LABEL_NODE_POOL: "system",
                catalog.LABEL_PROVISIONER: "node-group",
            },
            taints=[],
            auto_repair=args.node_groups.system.auto_repair,
        )

    def _publish(self) -> None:
        """The values other components get (ClusterHandles) and the component's outputs."""
        self.handles = ClusterHandles(
            name=self.name,
            physical_name=self.physical_name,
            k8s_provider=self.k8s_provider,
            system_node_group=self.system_node_group,
            node_role=self.node_role,
            node_security_group_id=self.node_security_group_id,
            efa_placement_group=self.efa_placement_group,
            efa_subnet_id=self.efa_subnet_id,
            kubeconfig=self.kubeconfig,
            cluster_security_group_id=self.cluster_security_group_id,
        )
        self.register_outputs(
            {
                "name": self.name,
                "oidcProviderArn": self.oidc_provider_arn,
                "nodeRoleArn": self.node_role.arn,
            }
        )

    def _control_plane(
        self, name: str, args: ClusterArgs, child: pulumi.ResourceOptions
    ) -> eks.Cluster:
        """The secrets key and the EKS control plane (pulumi-eks): API authentication with
        access entries, OIDC provider, pinned VPC CNI and kube-proxy, no default node group.

        The control plane gets the private subnets only: EKS puts the API server's ENIs in the
        cluster's subnets, and pulumi-eks would give it public + private
        (pulumi/pulumi-eks@v4.3.0 nodejs/eks/cluster/cluster.ts#L500-510, #L705; 4.4.0: see the
        docs), where an ENI has no route to a fleet's manager. Load balancers still find the
        public subnets by their tags, node groups name their subnets, and on a deployed cluster
        this is an in-place update; the sources are in docs/architecture.md "Network: the
        control plane's subnets"."""
        config, tags, addons = args.config, args.tags, args.config.resolved_addons
        secrets_key = self._secrets_key(
            name, config.name, config.kms_deletion_window_days, tags, child
        )

        # The control plane waits for its log group twice over: `depends_on` on the component
        # (the engine hands it to pulumi-eks's Construct), and the name input, which carries
        # the group as a dependency into the aws.eks.Cluster pulumi-eks creates from `args.name`
        # (pulumi/pulumi-eks@v4.3.0:nodejs/eks/cluster/cluster.ts#L687-690). Same literal
        # value, so an existing cluster sees no diff (no replacement).
        log_group = args.control_plane_log_group
        cluster_name: pulumi.Input[str] = (
            log_group.name.apply(lambda _: config.name) if log_group is not None else config.name
        )
        return eks.Cluster(
            f"{name}-eks",
            name=cluster_name,
            version=config.kubernetes_version,
            vpc_id=args.vpc_id,
            # The private subnets only (docstring): no `public_subnet_ids`, no `subnet_ids`.
            private_subnet_ids=args.private_subnet_ids,
            node_associate_public_ip_address=False,
            endpoint_private_access=True,
            endpoint_public_access=config.endpoint_public_access,
            public_access_cidrs=config.public_access_cidrs or None,
            enabled_cluster_log_types=list(config.log_types),
            encryption_config_key_arn=secrets_key.arn,
            authentication_mode=eks.AuthenticationMode.API,
            access_entries=admin_access_entries(config.admin_role_arns),
            create_oidc_provider=True,
            skip_default_node_group=True,
            deletion_protection=config.deletion_protection,
            vpc_cni_options=eks.VpcCniOptionsArgs(
                addon_version=addons.vpc_cni,
                # NetworkPolicy objects are only enforced when the VPC CNI's agent is on.
                enable_network_policy=True,
            ),
            # Off here, created below after the system node group: pulumi-eks creates its
            # CoreDNS add-on with no dependency on any node group, so with only managed groups
            # it waits 20 min for nodes and fails DEGRADED
            # (https://github.com/pulumi/pulumi-eks/issues/1819; nodejs/eks/cluster/cluster.ts
            # #L1175-1245 at v4.3.0). No configurationValues here: they would re-enable it.
            coredns_addon_options=eks.CoreDnsAddonOptionsArgs(enabled=False),
            kube_proxy_addon_options=eks.KubeProxyAddonOptionsArgs(version=addons.kube_proxy),
            tags=tags,
            cluster_tags=tags,
            opts=child_options(self, depends_on=[log_group] if log_group is not None else []),
        )

    def _secrets_key(
        self,
        name: str,
        cluster_name: str,
        deletion_window_days: int,
        tags: dict[str, str],
        child: pulumi.ResourceOptions,
    ) -> aws.kms.Key:
        """The KMS key (and its alias) EKS envelope-encrypts Kubernetes secrets with."""
        secrets_key = aws.kms.Key(
            f"{name}-secrets",
            description=f"EKS secrets envelope encryption for {cluster_name}",
            enable_key_rotation=True,
            deletion_window_in_days=deletion_window_days,
            tags=tags,
            opts=child,
        )
        aws.kms.Alias(
            f"{name}-secrets",
            name=f"alias/eks/{cluster_name}-secrets",
            target_key_id=secrets_key.key_id,
            opts=child,
        )
        return secrets_key

    def _gpu_node_groups(
        self, name: str, cluster: eks.Cluster, args: ClusterArgs, child: pulumi.ResourceOptions
    ) -> None:
        """The EFA cluster placement group and the managed GPU node groups."""
        tags = args.tags
        # One cluster placement group for EFA capacity (Karpenter's gpu-efa class and EFA
        # managed groups). Karpenter creates none and selects it by id; it lives in one AZ, so
        # its capacity gets that AZ's private subnet only (efa_placement.py has the sources).
        self.efa_placement_group = None
        self.efa_subnet_id = None
        if args.placement_group_name is not None:
            self.efa_placement_group = aws.ec2.PlacementGroup(
                f"{name}-efa",
                name=args.placement_group_name,
                strategy=efa_placement.STRATEGY,
                tags=tags,
                opts=child,
            )
            self.efa_subnet_id = args.private_subnet_ids[args.placement_zone_index]
        self.gpu_node_groups = {
            group.name: self._node_group(
                f"{name}-{group.name}",
                cluster,
                args,
                instance_types=node_group_instance_types(group),
                capacity_type=group.flavor_capacity_type,
                # Driver and container toolkit come with the AMI (the GPU Operator leaves them).
                ami_type=GPU_AMI_TYPES[group.ami_type],
                sizes=(group.min_size, group.desired_size, group.max_size),
                disk=(group.disk_size_gib, group.disk_iops, group.disk_throughput_mibps),
                labels={**gpu_group_labels(group), **args.extra_gpu_labels.get(group.name, {})},
                taints=eks_taints(nodes.managed_gpu_taints(group)),
                efa_devices=group.efa_devices,
                auto_repair=group.auto_repair,
                placement_group=group.name in args.placement_node_groups,
                gpu_group=group,
                autoscaled=group.name in args.autoscaled_groups,
            )
            for group in args.node_groups.gpu
        }

    def _node_addons(
        self,
        name: str,
        args: ClusterArgs,
        pod_identity_agent: aws.eks.Addon,
        child: pulumi.ResourceOptions,
    ) -> None:
        """What needs nodes: CoreDNS, the node monitoring agent, the EBS CSI driver (with its
        Pod Identity role), and the spot service-linked role."""
        config, tags, addons = args.config, args.tags, args.config.resolved_addons
        account_id = args.aws_account.account_id
        # CoreDNS needs nodes: the EKS add-on adopts (OVERWRITE) the self-managed CoreDNS that
        # EKS bootstraps and goes ACTIVE once the system nodes run it (runs.md Q4 workaround).
        self.coredns = aws.eks.Addon(
            f"{name}-coredns",
            cluster_name=self.name,
            addon_name="coredns",
            addon_version=addons.coredns,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=tags,
            opts=child_options(self, depends_on=[self.system_node_group]),
        )
        if config.node_monitoring_agent:
            self._node_monitoring_agent(name, addons.node_monitoring_agent, tags)
        if config.create_spot_service_linked_role:
            aws.iam.ServiceLinkedRole(
                f"{name}-spot-slr",
                aws_service_name="spot.amazonaws.com",
                description="EC2 Spot: lets Karpenter launch spot instances",
                opts=child,
            )

        ebs_csi_role = iam.pod_identity_role(
            f"{name}-ebs-csi",
            account_id=account_id,
            cluster_name=config.name,
            namespace="kube-system",
            service_account=EBS_CSI_SERVICE_ACCOUNT,
            managed_policy_arns=[
                f"{iam.AWS_MANAGED}/service-role/AmazonEBSCSIDriverPolicy",
            ],
            tags=tags,
            opts=child,
        )
        # Needs nodes to report healthy, and the Pod Identity agent to hand out credentials.
        aws.eks.Addon(
            f"{name}-ebs-csi",
            cluster_name=self.name,
            addon_name="aws-ebs-csi-driver",
            addon_version=addons.ebs_csi,
            resolve_conflicts_on_update="OVERWRITE",
            pod_identity_associations=[
                {"role_arn": ebs_csi_role.arn, "service_account": EBS_CSI_SERVICE_ACCOUNT}
            ],
            tags=tags,
            opts=child_options(self, depends_on=[pod_identity_agent, self.system_node_group]),
        )

    def _kubernetes(self, name: str, cluster: eks.Cluster, child: pulumi.ResourceOptions) -> None:
        """The explicit Kubernetes provider and the default gp3 StorageClass."""
        self.k8s_provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=cluster.kubeconfig_json,
            enable_server_side_apply=True,
            opts=child,
        )
        k8s.storage.v1.StorageClass(
            f"{name}-gp3",
            metadata={
                "name": "gp3",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            provisioner="ebs.csi.aws.com",
            parameters={"type": "gp3", "encrypted": "true", "csi.storage.k8s.io/fstype": "ext4"},
            reclaim_policy="Delete",
            allow_volume_expansion=True,
            # Bind where the pod lands, so the volume is created in the pod's AZ.
            volume_binding_mode="WaitForFirstConsumer",
            opts=child_options(self, provider=self.k8s_provider),
        )

    def _node_group(
        self,
        name: str,
        cluster: eks.Cluster,
        args: ClusterArgs,
        *,
        instance_types: list[str] | None,
        capacity_type: catalog.CapacityType,
        ami_type: str,
        sizes: tuple[int, int, int],
        disk: tuple[int, int, int],
        labels: dict[str, str],
        taints: list[dict[str, str]],
        efa_devices: int = 0,
        auto_repair: bool,
        placement_group: bool = False,
        gpu_group: GpuNodeGroup | None = None,
        autoscaled: bool = False,
    ) -> eks.ManagedNodeGroup:
        spec, subnet_ids = self._template_spec(
            args,
            disk=disk,
            efa_devices=efa_devices,
            placement_group=placement_group,
            gpu_group=gpu_group,
        )
        template = self._launch_template(name, args, spec)
        extra = node_group_extras(args.config.name, gpu_group) if gpu_group else {}
        minimum, desired, maximum = sizes
        return eks.ManagedNodeGroup(
            name,
            cluster=cluster,
            node_role=self.node_role,
            subnet_ids=subnet_ids,
            instance_types=instance_types,
            capacity_type=catalog.EKS_CAPACITY_TYPE[capacity_type],
            ami_type=ami_type,
            scaling_config={"min_size": minimum, "desired_size": desired, "max_size": maximum},
            launch_template={"id": template.id, "version": template.latest_version.apply(str)},
            labels=labels,
            taints=taints,
            # A group the cluster-autoscaler resizes keeps the size it set: Pulumi ignores
            # desiredSize changes (pulumi-eks `ignoreScalingChanges`, "useful when using
            # Cluster Autoscaler"). A fixed group's desiredSize is Pulumi's: a manual
            # `aws eks update-nodegroup-config` is reverted on the next `up`.
            ignore_scaling_changes=autoscaled,
            tags={**args.tags, **(autoscaler_group_tags(gpu_group) if gpu_group else {})},
            opts=child_options(
                self,
                transforms=[
                    node_group_transform(
                        auto_repair=auto_repair,
                        max_unavailable=gpu_group.max_unavailable if gpu_group else None,
                    )
                ],
            ),
            **extra,
        )

    def _template_spec(
        self,
        args: ClusterArgs,
        *,
        disk: tuple[int, int, int],
        efa_devices: int,
        placement_group: bool,
        gpu_group: GpuNodeGroup | None,
    ) -> tuple[dict[str, Any], list[pulumi.Output[str]]]:
        """A group's launch-template settings and the subnets it launches into."""
        size, iops, throughput = disk
        spec: dict[str, Any] = launch_template_spec(
            disk_size_gib=size, disk_iops=iops, disk_throughput_mibps=throughput
        )
        # The pulumi-eks node security group, the one Karpenter's nodes select by id: all nodes
        # share it, so pods talk across managed and Karpenter nodes (NCCL, rendezvous, DNS),
        # and it admits the control plane. With a security group in the template, EKS adds no
        # cluster security group of its own. EFA groups carry it on every interface instead
        # (a template may not set both).
        if efa_devices:
            spec["network_interfaces"] = efa_network_interfaces(
                efa_devices, self.node_security_group_id
            )
        else:
            spec["vpc_security_group_ids"] = [self.node_security_group_id]
        subnet_ids = args.private_subnet_ids
        if placement_group and self.efa_placement_group is not None:
            # Launch-template placement, as pulumi-eks's enableEfaSupport does
            # (pulumi/pulumi-eks@v4.3.0:nodejs/eks/nodes/nodegroup.ts#L1974-2004, #L2292-2294),
            # in the group's one AZ: a cluster placement group cannot span zones.
            spec["placement"] = {"group_name": self.efa_placement_group.name}
        if gpu_group is not None:
            spec.update(reservation_spec(gpu_group))
            zone = args.group_zone_index.get(gpu_group.name)
            if zone is not None:
                # A reservation's zone, the placement group's, or the group's own zoneIndex.
                subnet_ids = [args.private_subnet_ids[zone]]
        return spec, subnet_ids

    def _launch_template(
        self, name: str, args: ClusterArgs, spec: dict[str, Any]
    ) -> aws.ec2.LaunchTemplate:
        node_tags = {**args.tags, "gpu-platform:cluster": args.config.name}
        return aws.ec2.LaunchTemplate(
            name,
            description=f"{name}: IMDSv2-only, encrypted gp3 root",
            update_default_version=True,
            tag_specifications=[
                {"resource_type": "instance", "tags": node_tags},
                {"resource_type": "volume", "tags": node_tags},
            ],
            tags=args.tags,
            opts=child_options(self),
            **spec,
        )

    def _node_monitoring_agent(self, name: str, version: str, tags: dict[str, str]) -> None:
        # Node health conditions (AcceleratedHardwareReady: XID/ECC/NVLink from the NVIDIA
        # driver, KernelReady, NetworkingReady, ...) that managed-group auto repair and
        # Karpenter's NodeRepair act on (https://docs.aws.amazon.com/eks/latest/userguide/
        # node-health.html). A DaemonSet: it tolerates every taint, so GPU nodes run it too.
        aws.eks.Addon(
            f"{name}-node-monitoring-agent",
            cluster_name=self.name,
            addon_name="eks-node-monitoring-agent",
            addon_version=version,
            resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="OVERWRITE",
            tags=tags,
            opts=child_options(self, depends_on=[self.system_node_group]),
        )


def admin_access_entries(admin_role_arns: Sequence[str]) -> dict[str, eks.AccessEntryArgs]:
    """One EKS access entry per admin role, with the cluster-scoped AmazonEKSClusterAdminPolicy
    (API authentication mode: no aws-auth ConfigMap)."""
    return {
        f"admin-{index}": eks.AccessEntryArgs(
            principal_arn=arn,
            access_policies={
                "cluster-admin": eks.AccessPolicyAssociationArgs(
                    policy_arn=CLUSTER_ADMIN_POLICY,
                    access_scope=aws.eks.AccessPolicyAssociationAccessScopeArgs(type="cluster"),
                )
            },
        )
        for index, arn in enumerate(admin_role_arns)
    }
