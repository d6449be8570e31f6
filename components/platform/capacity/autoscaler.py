"""The Kubernetes cluster-autoscaler (AWS provider): resizes the GPU managed node groups between
their min and max for pending pods, and serves Kueue's ProvisioningRequests.

What it is pinned to and why (kubernetes/autoscaler, chart `cluster-autoscaler-chart-9.59.0`,
image `v1.33.6` = the control plane's minor; docs/node-groups.md has the full trace):
- Discovery: the tags EKS puts on every managed node group's Auto Scaling group,
  `k8s.io/cluster-autoscaler/enabled` and `k8s.io/cluster-autoscaler/<cluster>` (this cluster's
  groups only). The system group is discovered too; StackConfig keeps it at min = max, and the
  autoscaler never leaves an Auto Scaling group's min/max (cloudprovider/aws/README.md, "It will
  only adjust the desired value").
- IAM (cloudprovider/aws/README.md, "Full Cluster Autoscaler Features Policy", narrowed as it
  recommends): describe/read actions on `*` (they take no resource), `SetDesiredCapacity` and
  `TerminateInstanceInAutoScalingGroup` only on Auto Scaling groups tagged
  `k8s.io/cluster-autoscaler/<cluster>=owned`, `eks:DescribeNodegroup` on this cluster's node
  groups (labels, taints and resource tags of an empty group: scale-from-zero). Credentials by
  Pod Identity; the region is given explicitly (the system nodes' IMDS hop limit is 1).
- Expander `priority,least-waste`: reserved (Capacity Block / ODCR) groups, then on-demand, then
  spot, when a pod could use several; least-waste breaks ties.
- ProvisioningRequests: `--enable-provisioning-requests` with `--kube-api-content-type
  application/json` (FAQ.md "Enabling ProvisioningRequest Support"), the RBAC that FAQ lists
  (the chart's ClusterRole lacks `create` and `delete`: `PROVREQ_RULE`), and the
  ProvisioningRequest CRD, which the chart does not ship (vendored from the 1.33.6 tag).
- Scale-down: training pods carry `cluster-autoscaler.kubernetes.io/safe-to-evict: "false"`
  (FAQ.md "What types of pods can prevent CA from removing a node?"), so a node running one is
  never removed; `--skip-nodes-with-local-storage=false` lets an idle node whose only pods use
  emptyDir (log shippers) go.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s
import yaml

from components import addons, catalog
from components.config import ClusterAutoscalerConfig, GpuNodeGroup, StackConfig
from components.platform.addons import helm_release
from components.platform.cluster import iam
from components.platform.cluster.handles import ClusterHandles
from components.platform.cluster.iam import AwsAccount
from components.resource_options import child_options

NAMESPACE: Final = addons.CLUSTER_AUTOSCALER.namespace
SERVICE_ACCOUNT: Final = "cluster-autoscaler"
#: `fullnameOverride`: the Deployment, Service and priority ConfigMap names do not depend on
#: the release name.
FULLNAME: Final = "cluster-autoscaler"
#: The ProvisioningRequest CRD of the pinned autoscaler (schemas/SOURCES.md has its provenance).
PROVREQ_CRD: Final = (
    Path(__file__).resolve().parents[3]
    / "schemas/crds/cluster-autoscaler/autoscaling.x-k8s.io_provisioningrequests.yaml"
)
#: What the autoscaler may do with ProvisioningRequests, exactly as upstream documents it
#: (kubernetes/autoscaler@cluster-autoscaler-1.33.6 cluster-autoscaler/FAQ.md, "Enabling
#: ProvisioningRequest Support", step 4: verbs watch, list, get, create, update, patch, delete on
#: provisioningrequests and provisioningrequests/status). The chart's ClusterRole grants only
#: get, list, watch, update, patch (cluster-autoscaler-chart-9.59.0 cluster-autoscaler/charts/
#: cluster-autoscaler/templates/clusterrole.yaml#L219-229); without `delete` the garbage collection
#: of requests Provisioned or Failed more than a week ago fails and logs "Couldn't delete old ...
#: Provisioning Request" on every loop (processors/provreq/processor.go `DeleteOldProvReqs`,
#: `defaultTerminalProvReqTTL = 7 * 24 * time.Hour`). Added through the chart's own
#: `rbac.additionalRules`, which its template appends to the same ClusterRole (#L247-249).
PROVREQ_RULE: Final = {
    "apiGroups": ["autoscaling.x-k8s.io"],
    "resources": ["provisioningrequests", "provisioningrequests/status"],
    "verbs": ["watch", "list", "get", "create", "update", "patch", "delete"],
}
#: Priority-expander tiers (higher wins): capacity already paid for, then capacity that is not
#: interrupted, then spot.
PRIORITY: Final = {"reserved": 30, "on-demand": 20, "spot": 10}


def discovery_tags(cluster_name: str) -> list[str]:
    """The Auto Scaling group tags EKS sets on every managed group of the cluster."""
    return ["k8s.io/cluster-autoscaler/enabled", f"k8s.io/cluster-autoscaler/{cluster_name}"]


def policy(
    *, cluster_name: str, region: str, account_id: str, partition: str = "aws"
) -> dict[str, Any]:
    """The autoscaler's least-privilege policy (module docstring)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "Describe",
                "Effect": "Allow",
                "Action": [
                    "autoscaling:DescribeAutoScalingGroups",
                    "autoscaling:DescribeAutoScalingInstances",
                    "autoscaling:DescribeLaunchConfigurations",
                    "autoscaling:DescribeScalingActivities",
                    "ec2:DescribeImages",
                    "ec2:DescribeInstanceTypes",
                    "ec2:DescribeLaunchTemplateVersions",
                    "ec2:GetInstanceTypesFromInstanceRequirements",
                ],
                "Resource": "*",
            },
            {
                "Sid": "DescribeThisClustersNodegroups",
                "Effect": "Allow",
                "Action": ["eks:DescribeNodegroup"],
                "Resource": f"arn:{partition}:eks:{region}:{account_id}:nodegroup/{cluster_name}/*",
            },
            {
                "Sid": "ResizeThisClustersGroups",
                "Effect": "Allow",
                "Action": [
                    "autoscaling:SetDesiredCapacity",
                    "autoscaling:TerminateInstanceInAutoScalingGroup",
                ],
                "Resource": f"arn:{partition}:autoscaling:{region}:{account_id}:autoScalingGroup:*",
                "Condition": {
                    "StringEquals": {
                        f"aws:ResourceTag/k8s.io/cluster-autoscaler/{cluster_name}": "owned"
                    }
                },
            },
        ],
    }


def group_pattern(cluster_name: str, group: str) -> str:
    """Regex of a managed group's Auto Scaling group name, `eks-<nodegroup-name>-<uuid>`; the
    EKS node group is named `<cluster>-<group>` (components/platform/cluster/cluster.py)."""
    return f"^eks-{re.escape(f'{cluster_name}-{group}')}-[0-9a-f-]+$"


def expander_priorities(cluster_name: str, groups: list[GpuNodeGroup]) -> dict[str, list[str]]:
    """The priority expander's tiers: each GPU group by its capacity type, the rest at 0. Keys
    are strings (Helm values travel as a protobuf Struct); the chart's template renders them
    with `{{ $k | int }}` (templates/priority-expander-configmap.yaml)."""
    tiers: dict[int, list[str]] = {}
    for group in groups:
        tier = PRIORITY[group.flavor_capacity_type]
        if group.capacity_reservation_id is not None:
            tier = PRIORITY["reserved"]
        tiers.setdefault(tier, []).append(group_pattern(cluster_name, group.name))
    tiers[0] = [".*"]
    return {str(tier): patterns for tier, patterns in sorted(tiers.items(), reverse=True)}


def chart_values(
    config: ClusterAutoscalerConfig, *, cluster_name: str, region: str, groups: list[GpuNodeGroup]
) -> dict[str, Any]:
    """Helm values of the cluster-autoscaler chart (every key exists in its values.yaml)."""
    extra_args: dict[str, Any] = {
        "expander": "priority,least-waste",
        "scale-down-unneeded-time": config.scale_down_unneeded_time,
        "max-node-provision-time": config.max_node_provision_time,
        "skip-nodes-with-local-storage": False,
        "balance-similar-node-groups": False,
    }
    rbac: dict[str, Any] = {"serviceAccount": {"name": SERVICE_ACCOUNT}}
    if config.provisioning_requests:
        extra_args["enable-provisioning-requests"] = True
        extra_args["kube-api-content-type"] = "application/json"
        rbac["additionalRules"] = [PROVREQ_RULE]
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        "fullnameOverride": FULLNAME,
        "autoDiscovery": {"clusterName": cluster_name, "tags": discovery_tags(cluster_name)},
        "image": {"tag": config.image_tag},
        "rbac": rbac,
        "extraArgs": extra_args,
        "expanderPriorities": expander_priorities(cluster_name, groups),
        "nodeSelector": catalog.system_node_labels(),
        "resources": {
            "requests": {"cpu": "100m", "memory": "600Mi"},
            "limits": {"memory": "1Gi"},
        },
        "securityContext": {"runAsNonRoot": True, "runAsUser": 65534, "runAsGroup": 65534},
        "containerSecurityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        },
        # Scraped by the platform Prometheus (it selects ServiceMonitors in every namespace);
        # an empty namespace puts it in the release's.
        "serviceMonitor": {"enabled": True, "namespace": "", "interval": "30s"},
    }


@functools.cache
def provisioning_request_crd() -> dict[str, Any]:
    """The vendored ProvisioningRequest CRD (read once)."""
    loaded: dict[str, Any] = yaml.load(PROVREQ_CRD.read_text(), Loader=yaml.CSafeLoader)
    return loaded


@dataclass(frozen=True)
class ClusterAutoscalerArgs:
    """Inputs of the ClusterAutoscaler component: values, not other components."""

    config: ClusterAutoscalerConfig
    #: The literal cluster name (IAM conditions, discovery tags) and its Output (dependency).
    cluster_name: str
    cluster_name_output: pulumi.Input[str]
    aws_account: AwsAccount
    groups: list[GpuNodeGroup]
    k8s_provider: k8s.Provider
    #: What the release waits for: the system nodes and the prometheus-operator CRDs.
    after: list[pulumi.Resource]
    tags: dict[str, str]

    @classmethod
    def of(
        cls,
        cfg: StackConfig,
        cluster: ClusterHandles,
        aws_account: AwsAccount,
        monitoring: tuple[str, pulumi.Resource],
        tags: dict[str, str],
    ) -> ClusterAutoscalerArgs:
        """The config, the cluster, and the monitoring release whose CRDs the chart's
        ServiceMonitor needs."""
        return cls(
            config=cfg.cluster_autoscaler,
            cluster_name=cfg.cluster.name,
            cluster_name_output=cluster.name,
            aws_account=aws_account,
            groups=list(cfg.node_groups.gpu),
            k8s_provider=cluster.k8s_provider,
            after=[cluster.system_node_group, monitoring[1]],
            tags=tags,
        )


class ClusterAutoscaler(pulumi.ComponentResource):
    """cluster-autoscaler with its Pod Identity role and the ProvisioningRequest CRD."""

    release: k8s.helm.v3.Release
    #: The ProvisioningRequest CRD: Kueue must start after it (module docstring of
    #: components/platform/scheduling/scheduling.py).
    crd: k8s.apiextensions.v1.CustomResourceDefinition
    role: aws.iam.Role

    def __init__(
        self, name: str, args: ClusterAutoscalerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:autoscaler:ClusterAutoscaler", name, None, opts)
        identity = self._pod_identity(name, args)
        k8s_child = pulumi.ResourceOptions.merge(
            child_options(self), pulumi.ResourceOptions(provider=args.k8s_provider)
        )
        crd = provisioning_request_crd()
        self.crd = k8s.apiextensions.v1.CustomResourceDefinition(
            f"{name}-provisioningrequests",
            metadata=crd["metadata"],
            spec=crd["spec"],
            opts=k8s_child,
        )
        self.release = self._release(name, args, k8s_child, [*identity, self.crd, *args.after])
        self.register_outputs({"release": self.release.name, "role": self.role.arn})

    def _pod_identity(self, name: str, args: ClusterAutoscalerArgs) -> list[pulumi.Resource]:
        """The autoscaler's role (`self.role`), its policy and its Pod Identity association:
        returned so the release waits for them and its pods start with AWS credentials."""
        child = child_options(self)
        account = args.aws_account
        self.role = iam.pod_identity_role(
            f"{name}-role",
            account_id=account.account_id,
            cluster_name=args.cluster_name,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            tags=args.tags,
            opts=child,
        )
        role_policy = aws.iam.RolePolicy(
            f"{name}-policy",
            role=self.role.id,
            policy=json.dumps(
                policy(
                    cluster_name=args.cluster_name,
                    region=account.region,
                    account_id=account.account_id,
                    partition=account.partition,
                )
            ),
            opts=child,
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-pod-identity",
            cluster_name=args.cluster_name_output,
            namespace=NAMESPACE,
            service_account=SERVICE_ACCOUNT,
            role_arn=self.role.arn,
            tags=args.tags,
            opts=child,
        )
        return [role_policy, association]

    def _release(
        self,
        name: str,
        args: ClusterAutoscalerArgs,
        k8s_child: pulumi.ResourceOptions,
        after: list[pulumi.Resource],
    ) -> k8s.helm.v3.Release:
        """The chart release with this cluster's values, created after what it needs (`after`)."""
        return helm_release(
            f"{name}-release",
            addons.CLUSTER_AUTOSCALER,
            version=args.config.chart_version,
            values=chart_values(
                args.config,
                cluster_name=args.cluster_name,
                region=args.aws_account.region,
                groups=args.groups,
            ),
            opts=pulumi.ResourceOptions.merge(k8s_child, pulumi.ResourceOptions(depends_on=after)),
        )
