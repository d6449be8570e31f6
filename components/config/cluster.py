"""Cluster slice: EKS version, endpoint access, admins, logs, add-on pins."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from components.config.base import (
    Model,
    Problem,
    problems_error,
)

AddonVersion = Annotated[str, StringConstraints(pattern=r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")]
RoleArn = Annotated[
    str,
    StringConstraints(
        pattern=r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+$", max_length=600
    ),
]
SUPPORTED_KUBERNETES_VERSIONS: Final = ("1.32", "1.33", "1.34")
LogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
LOG_TYPES: Final[tuple[LogType, ...]] = (
    "api",
    "audit",
    "authenticator",
    "controllerManager",
    "scheduler",
)


class AddonVersions(Model):
    """EKS managed add-on versions, pinned (`aws eks describe-addon-versions` lists them). Unset
    fields take the default of the cluster's Kubernetes version (DEFAULT_ADDONS); set one to
    override that default."""

    vpc_cni: AddonVersion | None = None
    coredns: AddonVersion | None = None
    kube_proxy: AddonVersion | None = None
    ebs_csi: AddonVersion | None = None
    pod_identity_agent: AddonVersion | None = None
    #: EKS node monitoring agent: node health conditions for managed-node-group auto repair and
    #: Karpenter's NodeRepair (docs/runbooks.md#node-repair).
    node_monitoring_agent: AddonVersion | None = None


#: Add-on defaults per supported Kubernetes version. The 1.33 row is the one this platform was
#: deployed with. CoreDNS in the 1.32 and 1.34 rows: the versions AWS lists as "the latest version
#: of the Amazon EKS add-on type for each Kubernetes version" in https://docs.aws.amazon.com/eks/
#: latest/userguide/managing-coredns.html (1.34 v1.12.4-eksbuild.1, 1.32 v1.11.4-eksbuild.24) as
#: retrieved in the docs snapshot of late 2025. kube-proxy, every row: the newest table of that
#: kind found, https://docs.aws.amazon.com/ja_jp/eks/latest/userguide/managing-kube-proxy.md
#: (the snapshot whose table lists 1.31 to 1.36: 1.34 v1.34.6-eksbuild.13, 1.33
#: v1.33.10-eksbuild.13, 1.32 v1.32.13-eksbuild.16); older snapshots of the same page list
#: v1.33.10-eksbuild.2 (docs.amazonaws.cn zh_cn copy) and v1.33.5-eksbuild.2 (English, late
#: 2025), so the 1.33 row's earlier v1.33.3-eksbuild.4 was several builds behind.
#: `eks-node-monitoring-agent` v1.7.0-eksbuild.1 is the agent image tag of its newest release,
#: v1.7.0 (aws/eks-node-monitoring-agent@c399089d "ci: add 1.7.0 release", 2026-08-04:
#: charts/eks-node-monitoring-agent/values.yaml `nodeAgent.image.tag`; no later tag in the
#: repository); the agent is not tied to a Kubernetes minor, so every row pins it. Since v1.6.0
#: the agent's chart adds a `dcgm-server` DaemonSet (nv-hostengine from the agent image, hostPort
#: 5555: templates/dcgm-daemonset.yaml at v1.7.0) that the agent reads GPU health from; the GPU
#: Operator's standalone host engine (`dcgm.enabled`) stays off
#: (components/platform/capacity/gpu.py), so
#: nothing else claims that port and its DCGM exporter keeps its embedded engine. That EKS
#: publishes that add-on build for each of these Kubernetes versions is UNVERIFIED (the add-on
#: version table is not in the EKS user guide; research memo runs.md item 18), as it was for the
#: v1.4.0-eksbuild.2 it replaces. Confirm any pin with `aws eks describe-addon-versions
#: --kubernetes-version <v> --addon-name <name>` before the first deploy of that version; a wrong
#: pin fails the add-on's create, not the cluster.
DEFAULT_ADDONS: Final[dict[str, dict[str, str]]] = {
    "1.32": {
        "vpc_cni": "v1.20.1-eksbuild.3",
        "coredns": "v1.11.4-eksbuild.24",
        "kube_proxy": "v1.32.13-eksbuild.16",
        "ebs_csi": "v1.48.0-eksbuild.2",
        "pod_identity_agent": "v1.3.8-eksbuild.2",
        "node_monitoring_agent": "v1.7.0-eksbuild.1",
    },
    "1.33": {
        "vpc_cni": "v1.20.1-eksbuild.3",
        "coredns": "v1.12.2-eksbuild.4",
        "kube_proxy": "v1.33.10-eksbuild.13",
        "ebs_csi": "v1.48.0-eksbuild.2",
        "pod_identity_agent": "v1.3.8-eksbuild.2",
        "node_monitoring_agent": "v1.7.0-eksbuild.1",
    },
    "1.34": {
        "vpc_cni": "v1.20.1-eksbuild.3",
        "coredns": "v1.12.4-eksbuild.1",
        "kube_proxy": "v1.34.6-eksbuild.13",
        "ebs_csi": "v1.48.0-eksbuild.2",
        "pod_identity_agent": "v1.3.8-eksbuild.2",
        "node_monitoring_agent": "v1.7.0-eksbuild.1",
    },
}


class ResolvedAddons(Model):
    """Every add-on version, resolved for the cluster's Kubernetes version."""

    vpc_cni: AddonVersion
    coredns: AddonVersion
    kube_proxy: AddonVersion
    ebs_csi: AddonVersion
    pod_identity_agent: AddonVersion
    node_monitoring_agent: AddonVersion


class ClusterConfig(Model):
    """The EKS control plane, its access and its add-ons."""

    name: Annotated[str, StringConstraints(pattern=r"^[a-zA-Z][a-zA-Z0-9-]{0,62}$")]
    kubernetes_version: str = "1.33"
    endpoint_public_access: bool = False
    public_access_cidrs: list[str] = []
    log_types: list[LogType] = Field(default_factory=lambda: list(LOG_TYPES))
    admin_role_arns: list[RoleArn] = []
    kms_deletion_window_days: Annotated[int, Field(ge=7, le=30)] = 30
    deletion_protection: bool = True
    addons: AddonVersions = Field(default_factory=AddonVersions)
    #: Create the EC2 Spot service-linked role (AWSServiceRoleForEC2Spot). Karpenter's spot
    #: launches fail with ServiceLinkedRoleCreationNotPermitted without it, but creating it
    #: fails when the account already has one ("Service role name AWSServiceRoleForEC2Spot has
    #: been taken"; karpenter getting-started _index.md#L93-96): on only in the first stack of
    #: an account that never ran spot.
    create_spot_service_linked_role: bool = False
    #: Install the EKS node monitoring agent add-on (node health conditions for repair). Its
    #: default pin is a real agent build, but its availability as an add-on per Kubernetes version
    #: is UNVERIFIED (DEFAULT_ADDONS): confirm or override `addons.nodeMonitoringAgent` before the
    #: first deploy, or turn it off here until then.
    node_monitoring_agent: bool = True

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if value not in SUPPORTED_KUBERNETES_VERSIONS or value not in DEFAULT_ADDONS:
            raise ValueError(
                f"must be one of {', '.join(SUPPORTED_KUBERNETES_VERSIONS)} "
                "(a version with add-on pins in config/cluster.py DEFAULT_ADDONS)"
            )
        return value

    @property
    def resolved_addons(self) -> ResolvedAddons:
        """The add-on pins of this Kubernetes version, with the stack's overrides on top."""
        overrides = {k: v for k, v in self.addons.model_dump().items() if v is not None}
        return ResolvedAddons.model_validate(
            {**DEFAULT_ADDONS[self.kubernetes_version], **overrides}
        )

    @field_validator("log_types")
    @classmethod
    def _unique_logs(cls, value: list[str]) -> list[str]:
        if len(set(value)) != len(value):
            raise ValueError("must not repeat a log type")
        return value

    @model_validator(mode="after")
    def _endpoint(self) -> ClusterConfig:
        problems: list[Problem] = []
        for index, cidr in enumerate(self.public_access_cidrs):
            try:
                net = ipaddress.IPv4Network(cidr, strict=True)
            except ValueError:
                problems.append(
                    Problem(f"publicAccessCidrs[{index}]", cidr, "must be an IPv4 CIDR")
                )
                continue
            if net.prefixlen == 0:
                problems.append(
                    Problem(
                        f"publicAccessCidrs[{index}]", cidr, "the whole internet is not allowed"
                    )
                )
        if self.endpoint_public_access and not self.public_access_cidrs:
            problems.append(
                Problem(
                    "publicAccessCidrs",
                    [],
                    "a public endpoint needs an explicit CIDR allow-list",
                )
            )
        if self.public_access_cidrs and not self.endpoint_public_access:
            problems.append(
                Problem(
                    "endpointPublicAccess",
                    False,
                    "must be true when publicAccessCidrs is set (or drop the CIDRs)",
                )
            )
        if problems:
            raise problems_error(problems)
        return self
