"""Karpenter: GPU autoscaling, spot first with on-demand fallback, and interruption handling.

Owns the controller (two pinned Helm releases: `karpenter-crd` first so CRDs are upgraded with
the chart, then `karpenter` with `skip_crds`), its Pod Identity role scoped to this cluster and
region, the node role with its instance profile and `EC2_LINUX` access entry, the SQS
interruption queue with its five EventBridge rules, and the EC2NodeClasses and NodePools built
from the stack config.

Teardown order is carried by `depends_on`: NodePools depend on their EC2NodeClass and on the
controller release, EC2NodeClasses on the controller release, the controller on the CRD
release. Pulumi deletes dependents first, so on `pulumi destroy` the NodePools go (Karpenter's
finalizers terminate their instances) while the controller still runs; see docs/karpenter.md.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import addons, catalog
from components.config import KarpenterConfig, KarpenterPool
from components.platform.addons import helm_release
from components.platform.capacity.karpenter_builders import (
    CPU_NODE_CLASS,
    GPU_EFA_NODE_CLASS,
    GPU_NODE_CLASS,
    GPU_RESERVED_NODE_CLASS,
    INTERRUPTION_EVENTS,
    INTERRUPTION_RETENTION_S,
    NODECLASS_API_VERSION,
    NODEPOOL_API_VERSION,
    SERVICE_ACCOUNT,
    controller_policy,
    ec2nodeclass_spec,
    helm_values,
    interruption_queue_policy,
    node_class_tags,
    nodepool_spec,
    pool_node_class,
)
from components.platform.cluster import iam
from components.platform.cluster.handles import ClusterHandles
from components.platform.cluster.iam import AwsAccount
from components.resource_options import child_options

if TYPE_CHECKING:
    from components.analysis.facts import StackFacts


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
    cluster: ClusterHandles
    #: Cost-allocation tags for every taggable resource.
    tags: dict[str, str]
    #: Pools that launch into the EFA cluster placement group (StackFacts.pools).
    placement_pools: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        facts: StackFacts,
        cluster: ClusterHandles,
        aws_account: AwsAccount,
        tags: dict[str, str],
    ) -> KarpenterArgs:
        """This component's slice of the stack config, the pools' placement-group membership as
        the facts hold it (the analysis reads the same), and the cluster it scales."""
        cfg = facts.cfg
        return cls(
            aws_account=aws_account,
            config=cfg.karpenter,
            cluster_name=cfg.cluster.name,
            cluster=cluster,
            tags=tags,
            placement_pools=frozenset(
                name for name, member in facts.pools.items() if member.placement_group
            ),
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
        child = child_options(self)
        cluster, tags = args.cluster, args.tags
        cluster_name = args.cluster_name

        # --- nodes: role, instance profile, access entry, security-group discovery tag ---
        self.node_role = iam.node_role(f"{name}-node", tags=tags, opts=child)
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
        # Subnets carry the discovery tag from the Network component; the node security group
        # is selected by id in the EC2NodeClasses (no tag on a group pulumi-eks owns).

        # --- interruption handling: queue, four rules, queue policy ---
        queue_name = f"{cluster_name}-karpenter"
        queue_policy = self._interruption_queue(name, args, queue_name, child)

        # --- controller identity: Pod Identity role scoped to this cluster and region ---
        role_policy, pod_identity = self._controller_identity(name, args, child)

        # --- Helm: CRDs first (Helm never upgrades a chart's crds/), then the controller ---
        k8s_child = child_options(self, provider=cluster.k8s_provider)
        self._releases(
            name, args, queue_name, k8s_child, after=[pod_identity, role_policy, queue_policy]
        )

        # --- EC2NodeClasses and NodePools: deleted before the controller on destroy ---
        k8s_nodes = pulumi.ResourceOptions.merge(
            k8s_child,
            pulumi.ResourceOptions(
                depends_on=[self.controller_release, instance_profile, access_entry]
            ),
        )
        self._node_classes(name, args, profile_name, k8s_nodes)
        self._node_pools(name, args, k8s_child)

        self.register_outputs(
            {
                "nodeRoleArn": self.node_role.arn,
                "controllerRoleArn": self.controller_role.arn,
                "interruptionQueueUrl": self.interruption_queue.url,
                "nodePools": sorted(self.node_pools),
            }
        )

    def _controller_identity(
        self, name: str, args: KarpenterArgs, child: pulumi.ResourceOptions
    ) -> tuple[aws.iam.RolePolicy, aws.eks.PodIdentityAssociation]:
        """The controller's role (trust pinned to this cluster's Karpenter service account),
        its least-privilege policy and the Pod Identity association."""
        config, cluster, tags = args.config, args.cluster, args.tags
        cluster_name = args.cluster_name
        account_id = args.aws_account.account_id
        region = args.aws_account.region
        partition = args.aws_account.partition
        self.controller_role = iam.pod_identity_role(
            f"{name}-controller",
            account_id=account_id,
            cluster_name=cluster_name,
            namespace=config.namespace,
            service_account=SERVICE_ACCOUNT,
            tags=tags,
            opts=child,
        )
        controller_policy_doc = pulumi.Output.all(
            self.interruption_queue.arn, self.node_role.arn
        ).apply(
            lambda arns: json.dumps(
                controller_policy(
                    cluster_name=cluster_name,
                    region=region,
                    account_id=account_id,
                    partition=partition,
                    queue_arn=arns[0],
                    node_role_arn=arns[1],
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
        return role_policy, pod_identity

    def _releases(
        self,
        name: str,
        args: KarpenterArgs,
        queue_name: str,
        k8s_child: pulumi.ResourceOptions,
        *,
        after: list[pulumi.Resource],
    ) -> None:
        """The CRD chart, then the controller chart once its identity, permissions and queue
        exist (`after`) and the system nodes it is pinned to run."""
        config, cluster = args.config, args.cluster
        cluster_name, region = args.cluster_name, args.aws_account.region
        self.crd_release = helm_release(
            f"{name}-crd",
            addons.KARPENTER_CRD,
            version=config.chart_version,
            namespace=config.namespace,
            opts=k8s_child,
        )
        # Rolled back on failure (every release is): a half-installed controller never holds
        # NodePools.
        self.controller_release = helm_release(
            f"{name}-controller",
            addons.KARPENTER,
            version=config.chart_version,
            namespace=config.namespace,
            values=helm_values(
                cluster_name=cluster_name,
                queue_name=queue_name,
                region=region,
                replicas=config.replicas,
                feature_gates=config.feature_gates,
            ),
            opts=pulumi.ResourceOptions.merge(
                k8s_child,
                pulumi.ResourceOptions(
                    depends_on=[self.crd_release, *after, cluster.system_node_group]
                ),
            ),
        )

    def _interruption_queue(
        self, name: str, args: KarpenterArgs, queue_name: str, child: pulumi.ResourceOptions
    ) -> aws.sqs.QueuePolicy:
        """The SQS queue Karpenter reads spot interruptions, rebalance recommendations, state
        changes and scheduled health events from, the EventBridge rules that feed it and the
        queue policy that lets them."""
        tags, cluster_name = args.tags, args.cluster_name
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

        return queue_policy

    def _class_of(self, args: KarpenterArgs, pool: KarpenterPool) -> str:
        return pool_node_class(pool, in_placement_group=pool.name in args.placement_pools)

    def _node_classes(
        self, name: str, args: KarpenterArgs, profile_name: str, k8s_nodes: pulumi.ResourceOptions
    ) -> None:
        """One EC2NodeClass per kind of node the pools need (GPU, GPU in the EFA placement
        group, GPU on reservations, CPU), after the controller, its instance profile and access
        entry."""
        config, cluster, tags = args.config, args.cluster, args.tags
        cluster_name = args.cluster_name

        classes = {
            class_name: (
                config.cpu_node_class if class_name == CPU_NODE_CLASS else config.gpu_node_class,
                [p for p in config.pools if self._class_of(args, p) == class_name],
            )
            for class_name in (
                GPU_NODE_CLASS,
                GPU_EFA_NODE_CLASS,
                GPU_RESERVED_NODE_CLASS,
                CPU_NODE_CLASS,
            )
        }
        placement_group = cluster.efa_placement_group
        reservation_terms = [r.selector_term() for r in config.reservations]
        self.node_classes = {}
        for class_name, (disk, pools) in classes.items():
            if not pools:
                continue
            types = {t for pool in pools for t in pool.resolved_instance_types}
            # The reserved class joins the group only with its pools (reservations created in
            # it); it keeps every subnet: EC2 launches a reservation in its own AZ.
            grouped = placement_group is not None and any(
                p.name in args.placement_pools for p in pools
            )
            spec = ec2nodeclass_spec(
                cluster_name=cluster_name,
                ami_alias=config.ami_alias,
                instance_profile=profile_name,
                security_group_id=cluster.node_security_group_id,
                disk=disk,
                instance_store_raid0=disk.instance_store_raid0
                and all(catalog.instance(t).nvme_instance_store for t in types),
                tags=node_class_tags(tags, cluster_name=cluster_name, node_class=class_name),
                capacity_reservations=(
                    reservation_terms if class_name == GPU_RESERVED_NODE_CLASS else None
                ),
                placement_group_id=placement_group.id if grouped and placement_group else None,
                subnet_ids=(
                    [cluster.efa_subnet_id]
                    if class_name == GPU_EFA_NODE_CLASS and cluster.efa_subnet_id is not None
                    else None
                ),
            )
            self.node_classes[class_name] = k8s.apiextensions.CustomResource(
                f"{name}-class-{class_name}",
                api_version=NODECLASS_API_VERSION,
                kind="EC2NodeClass",
                metadata={"name": class_name},
                spec=spec,
                opts=k8s_nodes,
            )

    def _node_pools(
        self, name: str, args: KarpenterArgs, k8s_child: pulumi.ResourceOptions
    ) -> None:
        """One NodePool per configured pool, after its EC2NodeClass."""
        self.node_pools = {}
        for pool in args.config.pools:
            node_class = self._class_of(args, pool)
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
