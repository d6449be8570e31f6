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
#: deployed with. In the 1.32 and 1.34 rows, CoreDNS and kube-proxy are the versions AWS lists as
#: "the latest version of the Amazon EKS add-on type for each Kubernetes version" in
#: https://docs.aws.amazon.com/eks/latest/userguide/managing-coredns.html (1.34 v1.12.4-eksbuild.1,
#: 1.32 v1.11.4-eksbuild.24) and .../managing-kube-proxy.html (1.34 v1.34.1-eksbuild.2, 1.32
#: v1.32.9-eksbuild.2; the same table in the docs.amazonaws.cn copy of that page), as retrieved in
#: the docs snapshot of late 2025 (both pages have moved on since; any listed build stays
#: installable). The earlier kube-proxy pins (v1.34.0-eksbuild.5, v1.32.6-eksbuild.13) came from
#: the SELF-MANAGED image table of that page (awsdocs/amazon-eks-user-guide PR #1146 renames
#: v1.34.0-minimal-eksbuild.5 there), not from the add-on table, and the earlier CoreDNS ones from
#: no source. `eks-node-monitoring-agent` v1.4.0-eksbuild.2 is the agent image tag of its 1.4.0
#: release (aws/eks-node-monitoring-agent@5fd79da8:charts/eks-node-monitoring-agent/values.yaml
#: `nodeAgent.image.tag`, "ci: add 1.4.0 release", 2025-09-09); that EKS offers that add-on build
#: for each of these Kubernetes versions is UNVERIFIED (the add-on version table is not in the
#: EKS user guide; research memo runs.md item 18). Confirm any pin with `aws eks
#: describe-addon-versions --kubernetes-version <v> --addon-name <name>` before the first deploy of
#: that version; a wrong pin fails the add-on's create, not the cluster.
DEFAULT_ADDONS: Final[dict[str, dict[str, str]]] = {
    "1.32": {
        "vpc_cni": "v1.20.1-eksbuild.3",
        "coredns": "v1.11.4-eksbuild.24",
        "kube_proxy": "v1.32.9-eksbuild.2",
        "ebs_csi": "v1.48.0-eksbuild.2",
        "pod_identity_agent": "v1.3.8-eksbuild.2",
        "node_monitoring_agent": "v1.4.0-eksbuild.2",
    },
    "1.33": {
        "vpc_cni": "v1.20.1-eksbuild.3",
        "coredns": "v1.12.2-eksbuild.4",
        "kube_proxy": "v1.33.3-eksbuild.4",
        "ebs_csi": "v1.48.0-eksbuild.2",
        "pod_identity_agent": "v1.3.8-eksbuild.2",
        "node_monitoring_agent": "v1.4.0-eksbuild.2",
    },
    "1.34": {
        "vpc_cni": "v1.20.1-eksbuild.3",
        "coredns": "v1.12.4-eksbuild.1",
        "kube_proxy": "v1.34.1-eksbuild.2",
        "ebs_csi": "v1.48.0-eksbuild.2",
        "pod_identity_agent": "v1.3.8-eksbuild.2",
        "node_monitoring_agent": "v1.4.0-eksbuild.2",
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
                problems.append((f"publicAccessCidrs[{index}]", cidr, "must be an IPv4 CIDR"))
                continue
            if net.prefixlen == 0:
                problems.append(
                    (f"publicAccessCidrs[{index}]", cidr, "the whole internet is not allowed")
                )
        if self.endpoint_public_access and not self.public_access_cidrs:
            problems.append(
                (
                    "publicAccessCidrs",
                    [],
                    "a public endpoint needs an explicit CIDR allow-list",
                )
            )
        if self.public_access_cidrs and not self.endpoint_public_access:
            problems.append(
                (
                    "endpointPublicAccess",
                    False,
                    "must be true when publicAccessCidrs is set (or drop the CIDRs)",
                )
            )
        if problems:
            raise problems_error(problems)
        return self
