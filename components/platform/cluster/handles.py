"""What components hand each other: values and outputs, never the components themselves.

`Cluster` and `Network` publish a frozen `ClusterHandles` / `NetworkHandles`; every other
component's `XxxArgs.of(...)` takes these (or plain values), so no component module imports
another component's module and the composition root (`__main__.py`) is the only place that
knows the components (the way pulumi-eks and pulumi-awsx components take input values).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s


@dataclass(frozen=True)
class NetworkHandles:
    """The VPC and its subnets (private subnets one per AZ, in AZ order)."""

    vpc_id: pulumi.Output[str]
    private_subnet_ids: list[pulumi.Output[str]]
    public_subnet_ids: list[pulumi.Output[str]]
    #: The VPC's CIDR and each private subnet's route table, where this stack created them
    #: (None for an existing VPC: components/platform/fleet/worker.py looks them up).
    vpc_cidr: pulumi.Output[str] | None = None
    private_route_table_ids: list[pulumi.Output[str]] | None = None


@dataclass(frozen=True)
class ClusterHandles:
    """The EKS cluster as its dependants use it."""

    #: The literal cluster name, carrying the control plane as a dependency.
    name: pulumi.Output[str]
    #: The literal name (for IAM conditions that cannot wait for an Output).
    physical_name: str
    #: The explicit Kubernetes provider every Kubernetes resource must use.
    k8s_provider: k8s.Provider
    #: The system managed node group: controllers wait for the nodes they are pinned to.
    system_node_group: pulumi.Resource
    #: The managed groups' node role (Karpenter has its own; both come from iam.node_role).
    node_role: aws.iam.Role
    #: The node security group every node (managed or Karpenter's) shares.
    node_security_group_id: pulumi.Output[str]
    #: The EFA cluster placement group and its one private subnet (None without EFA capacity).
    efa_placement_group: aws.ec2.PlacementGroup | None
    efa_subnet_id: pulumi.Output[str] | None
    #: The cluster's kubeconfig (secret; pulumi-eks `kubeconfigJson`): its server and CA.
    kubeconfig: pulumi.Output[str] | None = None
    #: The security group on the control plane's ENIs (pulumi-eks `clusterSecurityGroupId`,
    #: pulumi/pulumi-eks nodejs/eks/cluster/cluster.ts: the group it creates and passes as
    #: `vpcConfig.securityGroupIds`): 443 from a peer's CIDR is allowed there.
    cluster_security_group_id: pulumi.Output[str] | None = None
