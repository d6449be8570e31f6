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
    """EKS managed add-on versions, pinned (`aws eks describe-addon-versions` lists them)."""

    vpc_cni: AddonVersion = "v1.20.1-eksbuild.3"
    coredns: AddonVersion = "v1.12.2-eksbuild.4"
    kube_proxy: AddonVersion = "v1.33.3-eksbuild.4"
    ebs_csi: AddonVersion = "v1.48.0-eksbuild.2"
    pod_identity_agent: AddonVersion = "v1.3.8-eksbuild.2"


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

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, value: str) -> str:
        if value not in SUPPORTED_KUBERNETES_VERSIONS:
            raise ValueError(f"must be one of {', '.join(SUPPORTED_KUBERNETES_VERSIONS)}")
        return value

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
