"""The stack configuration: one frozen pydantic model, validated once before any resource exists.

Keys live in the `gpu-platform:` namespace of `Pulumi.<stack>.yaml` and are camelCase. Every
problem in a config is reported at once, one line each, as
`gpu-platform:<key path>: got <value>; <what is allowed>`, through `ConfigError` — a
`pulumi.RunError`, which the Pulumi CLI prints without a traceback and `python -m synth` turns
into exit code 2. Defaults are the production-safe choice; the dev stack relaxes explicitly.
"""

from __future__ import annotations

import difflib
import ipaddress
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, Final, Literal

import pulumi
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError

from components import catalog

NAMESPACE: Final = "gpu-platform"

#: (relative key path, offending value, what is allowed) — one config problem.
Problem = tuple[str, Any, str]


class ConfigError(pulumi.RunError):
    """An invalid stack config; `lines` holds one human-readable line per problem."""

    def __init__(self, lines: Sequence[str]) -> None:
        self.lines = list(lines)
        super().__init__(
            f"invalid stack config ({len(self.lines)} problem"
            f"{'s' if len(self.lines) != 1 else ''}):\n" + "\n".join(self.lines)
        )


def _problems(problems: Sequence[Problem]) -> PydanticCustomError:
    """A cross-field failure that carries several key paths; `format_errors` expands it."""
    return PydanticCustomError(
        "gpu_platform",
        "; ".join(f"{path}: {allowed}" for path, _, allowed in problems),
        {"problems": list(problems)},
    )


class _Model(BaseModel):
    model_config = ConfigDict(
        frozen=True,
        extra="forbid",
        alias_generator=to_camel,
        populate_by_name=True,
        validate_default=True,
    )


Name = Annotated[
    str, StringConstraints(pattern=r"^[a-z0-9]([a-z0-9-]{0,38}[a-z0-9])?$", max_length=40)
]
AddonVersion = Annotated[str, StringConstraints(pattern=r"^v\d+\.\d+\.\d+-eksbuild\.\d+$")]
RoleArn = Annotated[
    str,
    StringConstraints(
        pattern=r"^arn:aws[a-z-]*:iam::[0-9]{12}:role/[A-Za-z0-9+=,.@_/-]+$", max_length=600
    ),
]
SubnetId = Annotated[str, StringConstraints(pattern=r"^subnet-[0-9a-f]{8,17}$")]

SUPPORTED_KUBERNETES_VERSIONS: Final = ("1.32", "1.33", "1.34")
LogType = Literal["api", "audit", "authenticator", "controllerManager", "scheduler"]
LOG_TYPES: Final[tuple[LogType, ...]] = (
    "api",
    "audit",
    "authenticator",
    "controllerManager",
    "scheduler",
)


# --- network --------------------------------------------------------------------------------


class ExistingVpc(_Model):
    """Use a VPC and subnets that already exist instead of creating them."""

    vpc_id: Annotated[str, StringConstraints(pattern=r"^vpc-[0-9a-f]{8,17}$")]
    private_subnet_ids: Annotated[list[SubnetId], Field(min_length=2)]
    public_subnet_ids: list[SubnetId] = []


class NetworkConfig(_Model):
    """VPC layout: subnets per AZ, NAT gateways, S3 gateway endpoint."""

    vpc_cidr: str = "10.0.0.0/16"
    #: Three AZs is the safe default (control plane and nodes survive an AZ outage).
    az_count: Annotated[int, Field(ge=2, le=6)] = 3
    #: One NAT gateway per AZ keeps egress alive when an AZ fails; `single` saves money in dev.
    nat_gateways: Literal["perAz", "single"] = "perAz"
    existing_vpc: ExistingVpc | None = None

    @field_validator("vpc_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            net = ipaddress.IPv4Network(value, strict=True)
        except ValueError as exc:
            raise ValueError(f"must be an IPv4 network like 10.0.0.0/16 ({exc})") from None
        if not 16 <= net.prefixlen <= 20:
            raise ValueError("prefix length must be between /16 and /20 (EKS pods need IPs)")
        if not net.is_private:
            raise ValueError("must be a private (RFC 1918) range")
        return value


# --- cluster --------------------------------------------------------------------------------


class AddonVersions(_Model):
    """EKS managed add-on versions, pinned (`aws eks describe-addon-versions` lists them)."""

    vpc_cni: AddonVersion = "v1.20.1-eksbuild.3"
    coredns: AddonVersion = "v1.12.2-eksbuild.4"
    kube_proxy: AddonVersion = "v1.33.3-eksbuild.4"
    ebs_csi: AddonVersion = "v1.48.0-eksbuild.2"
    pod_identity_agent: AddonVersion = "v1.3.8-eksbuild.2"


class ClusterConfig(_Model):
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
            raise _problems(problems)
        return self


# --- node groups ----------------------------------------------------------------------------


def _check_sizes(min_size: int, desired: int, max_size: int) -> list[Problem]:
    problems: list[Problem] = []
    if min_size > max_size:
        problems.append(("minSize", min_size, f"must be <= maxSize ({max_size})"))
    if not min_size <= desired <= max_size:
        problems.append(
            ("desiredSize", desired, f"must be between minSize ({min_size}) and maxSize")
        )
    return problems


class SystemNodeGroup(_Model):
    """On-demand CPU nodes for controllers (Karpenter, operators, monitoring)."""

    instance_types: Annotated[list[str], Field(min_length=1)] = ["m6i.xlarge"]
    min_size: Annotated[int, Field(ge=1)] = 2
    desired_size: Annotated[int, Field(ge=1)] = 2
    max_size: Annotated[int, Field(ge=1, le=50)] = 4
    disk_size_gib: Annotated[int, Field(ge=20, le=1000)] = 50

    @model_validator(mode="after")
    def _check(self) -> SystemNodeGroup:
        problems = _check_sizes(self.min_size, self.desired_size, self.max_size)
        for index, name in enumerate(self.instance_types):
            if name not in catalog.CPU_INSTANCE_TYPES:
                problems.append(
                    (
                        f"instanceTypes[{index}]",
                        name,
                        f"one of {', '.join(sorted(catalog.CPU_INSTANCE_TYPES))}",
                    )
                )
        if problems:
            raise _problems(problems)
        return self


class GpuNodeGroup(_Model):
    """A managed GPU node group: one GPU model and GPU count, one capacity type."""

    name: Name
    instance_types: Annotated[list[str], Field(min_length=1)]
    capacity_type: catalog.CapacityType
    min_size: Annotated[int, Field(ge=0)] = 0
    desired_size: Annotated[int, Field(ge=0)] = 0
    max_size: Annotated[int, Field(ge=1, le=100)]
    #: Training images are 10-20 GB compressed; unpacked layers plus the image cache need room.
    disk_size_gib: Annotated[int, Field(ge=100, le=16000)] = 300
    disk_throughput_mibps: Annotated[int, Field(ge=125, le=1000)] = 500
    disk_iops: Annotated[int, Field(ge=3000, le=16000)] = 6000
    workload_type: Literal["training", "general"] = "training"

    @property
    def gpu_model(self) -> str:
        return catalog.instance(self.instance_types[0]).gpu_model or ""

    @property
    def gpus_per_node(self) -> int:
        return catalog.instance(self.instance_types[0]).gpus

    @property
    def gpu_class(self) -> str:
        """GPU model and count, e.g. `a10g-x1`: the unit queues and jobs are placed by."""
        return f"{self.gpu_model}-x{self.gpus_per_node}"

    @model_validator(mode="after")
    def _check(self) -> GpuNodeGroup:
        problems = _check_sizes(self.min_size, self.desired_size, self.max_size)
        unknown = False
        for index, name in enumerate(self.instance_types):
            if name not in catalog.GPU_INSTANCE_TYPES:
                unknown = True
                problems.append(
                    (
                        f"instanceTypes[{index}]",
                        name,
                        "a GPU instance type from components/catalog.py "
                        f"({', '.join(sorted(catalog.GPU_INSTANCE_TYPES))})",
                    )
                )
        if len(set(self.instance_types)) != len(self.instance_types):
            problems.append(("instanceTypes", self.instance_types, "must not repeat a type"))
        if not unknown:
            shapes = {
                (catalog.instance(n).gpu_model, catalog.instance(n).gpus)
                for n in self.instance_types
            }
            if len(shapes) > 1:
                problems.append(
                    (
                        "instanceTypes",
                        self.instance_types,
                        "all types of a group must have the same GPU model and GPU count "
                        "(torchrun's --nproc-per-node and queue flavors depend on it)",
                    )
                )
        if self.capacity_type == "spot" and len(self.instance_types) < 3:
            problems.append(
                (
                    "instanceTypes",
                    self.instance_types,
                    "spot groups need at least 3 instance types (spot pools run dry)",
                )
            )
        if problems:
            raise _problems(problems)
        return self


class NodeGroupsConfig(_Model):
    """The system group and the managed GPU groups."""

    system: SystemNodeGroup = Field(default_factory=SystemNodeGroup)
    gpu: Annotated[list[GpuNodeGroup], Field(min_length=2)]

    @model_validator(mode="after")
    def _check(self) -> NodeGroupsConfig:
        problems: list[Problem] = []
        seen: dict[str, int] = {}
        for index, group in enumerate(self.gpu):
            if group.name in seen:
                problems.append(
                    (
                        f"gpu[{index}].name",
                        group.name,
                        f"a unique name (gpu[{seen[group.name]}] already uses it)",
                    )
                )
            seen.setdefault(group.name, index)
        capacity = {group.capacity_type for group in self.gpu}
        for needed in ("on-demand", "spot"):
            if needed not in capacity:
                problems.append(
                    (
                        "gpu",
                        sorted(capacity),
                        f"at least one {needed} GPU group (spot first, on-demand fallback)",
                    )
                )
        if problems:
            raise _problems(problems)
        return self


# --- storage --------------------------------------------------------------------------------

#: FSx for Lustre SSD throughput tiers (MB/s per TiB) that AWS accepts per deployment type.
FSX_THROUGHPUT_TIERS: Final[dict[str, tuple[int, ...]]] = {
    "PERSISTENT_1": (50, 100, 200),
    "PERSISTENT_2": (125, 250, 500, 1000),
}
#: Persistent SSD file systems: 1.2 TiB, then multiples of 2.4 TiB (FSx for Lustre user guide).
FSX_MIN_CAPACITY_GIB: Final = 1200
FSX_CAPACITY_INCREMENT_GIB: Final = 2400
#: The longest `{prefix}-{role}-{account id}` bucket name must fit S3's 63 characters.
BUCKET_PREFIX_MAX: Final = 63 - len("-access-logs-") - 12
LustreEvent = Literal["NEW", "CHANGED", "DELETED"]


class BucketLifecycle(_Model):
    """Lifecycle rules shared by the data buckets (checkpoints, datasets, artifacts)."""

    #: Failed multipart uploads of multi-GB checkpoints are billed until aborted.
    abort_incomplete_multipart_days: Annotated[int, Field(ge=1, le=30)] = 7
    #: Versioning protects against overwrites; old versions are kept this long, then expire.
    noncurrent_version_expiration_days: Annotated[int, Field(ge=1, le=365)] = 30
    #: Move checkpoints older than this to `checkpointTransitionClass`; null keeps them in
    #: STANDARD. S3 bills STANDARD_IA / GLACIER_IR for at least 30 days, hence the minimum.
    checkpoint_transition_days: Annotated[int, Field(ge=30, le=3650)] | None = 60
    checkpoint_transition_class: Literal["STANDARD_IA", "INTELLIGENT_TIERING", "GLACIER_IR"] = (
        "STANDARD_IA"
    )
    #: Server access logs are kept this long in the log bucket.
    access_log_expiration_days: Annotated[int, Field(ge=30, le=3650)] = 365


class RwxConfig(_Model):
    """The shared ReadWriteMany file system: `type: efs` or `type: fsx` (FSx for Lustre).

    EFS keys: throughputMode, provisionedThroughputMibps. FSx keys: deploymentType,
    perUnitStorageThroughput, storageCapacityGib, subnetIndex, dataCompression, importEvents,
    exportEvents, datasetsPath, automaticBackupRetentionDays. A key of the other type is an error.
    """

    type: Literal["efs", "fsx"] = "efs"
    # EFS
    throughput_mode: Literal["elastic", "bursting", "provisioned"] | None = None
    provisioned_throughput_mibps: Annotated[int, Field(ge=1, le=3414)] | None = None
    # FSx for Lustre
    deployment_type: Literal["PERSISTENT_1", "PERSISTENT_2"] | None = None
    per_unit_storage_throughput: int | None = None
    storage_capacity_gib: int | None = None
    #: Lustre is single-AZ: the file system lives in this private subnet (by index).
    subnet_index: Annotated[int, Field(ge=0, le=5)] | None = None
    data_compression: Literal["NONE", "LZ4"] | None = None
    #: S3 events the datasets data-repository association imports / exports.
    import_events: list[LustreEvent] | None = None
    export_events: list[LustreEvent] | None = None
    #: Where the datasets bucket appears inside the file system.
    datasets_path: Annotated[str, StringConstraints(pattern=r"^/[a-z0-9][a-z0-9_/-]*$")] | None = (
        None
    )
    automatic_backup_retention_days: Annotated[int, Field(ge=0, le=90)] | None = None

    _EFS_KEYS: ClassVar[tuple[str, ...]] = ("throughput_mode", "provisioned_throughput_mibps")
    _FSX_KEYS: ClassVar[tuple[str, ...]] = (
        "deployment_type",
        "per_unit_storage_throughput",
        "storage_capacity_gib",
        "subnet_index",
        "data_compression",
        "import_events",
        "export_events",
        "datasets_path",
        "automatic_backup_retention_days",
    )

    # Effective values: the defaults of the selected type.
    @property
    def efs_throughput_mode(self) -> str:
        return self.throughput_mode or "elastic"

    @property
    def fsx_deployment_type(self) -> str:
        return self.deployment_type or "PERSISTENT_2"

    @property
    def fsx_throughput(self) -> int:
        return self.per_unit_storage_throughput or 250

    @property
    def fsx_capacity_gib(self) -> int:
        return self.storage_capacity_gib or FSX_MIN_CAPACITY_GIB

    @property
    def fsx_subnet_index(self) -> int:
        return self.subnet_index or 0

    @property
    def fsx_import_events(self) -> list[str]:
        return list(self.import_events if self.import_events is not None else ["NEW", "CHANGED"])

    @property
    def fsx_export_events(self) -> list[str]:
        return list(self.export_events or [])

    @property
    def fsx_datasets_path(self) -> str:
        return self.datasets_path or "/datasets"

    @model_validator(mode="after")
    def _check(self) -> RwxConfig:
        problems: list[Problem] = []
        other = self._FSX_KEYS if self.type == "efs" else self._EFS_KEYS
        for key in other:
            value = getattr(self, key)
            if value is not None:
                problems.append(
                    (
                        to_camel(key),
                        value,
                        f"only applies to type {'fsx' if self.type == 'efs' else 'efs'}",
                    )
                )
        if self.type == "efs":
            provisioned = self.efs_throughput_mode == "provisioned"
            if provisioned and self.provisioned_throughput_mibps is None:
                problems.append(
                    (
                        "provisionedThroughputMibps",
                        None,
                        "required when throughputMode is provisioned",
                    )
                )
            if not provisioned and self.provisioned_throughput_mibps is not None:
                problems.append(
                    (
                        "provisionedThroughputMibps",
                        self.provisioned_throughput_mibps,
                        "only with throughputMode: provisioned",
                    )
                )
        else:
            tiers = FSX_THROUGHPUT_TIERS[self.fsx_deployment_type]
            if self.fsx_throughput not in tiers:
                problems.append(
                    (
                        "perUnitStorageThroughput",
                        self.fsx_throughput,
                        f"{self.fsx_deployment_type} allows {', '.join(map(str, tiers))} MB/s/TiB",
                    )
                )
            capacity = self.fsx_capacity_gib
            if capacity < FSX_MIN_CAPACITY_GIB or (
                capacity != FSX_MIN_CAPACITY_GIB and capacity % FSX_CAPACITY_INCREMENT_GIB
            ):
                problems.append(
                    (
                        "storageCapacityGib",
                        capacity,
                        f"{self.fsx_deployment_type} SSD needs {FSX_MIN_CAPACITY_GIB} GiB or a "
                        f"multiple of {FSX_CAPACITY_INCREMENT_GIB} GiB (minimum "
                        f"{FSX_MIN_CAPACITY_GIB})",
                    )
                )
            for key in ("import_events", "export_events"):
                events = getattr(self, key) or []
                if len(set(events)) != len(events):
                    problems.append((to_camel(key), events, "must not repeat an event"))
        if problems:
            raise _problems(problems)
        return self


class StorageConfig(_Model):
    """S3 buckets for checkpoints, datasets and artifacts, and the RWX shared file system."""

    #: Bucket names are `{prefix}-{role}-{account id}`; defaults to the cluster name.
    bucket_prefix: (
        Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]*[a-z0-9]$")] | None
    ) = None
    #: `protect` + `retainOnDelete` on buckets, the KMS key and the file system: a
    #: `pulumi destroy` or a refactor that drops them leaves the data (docs/storage.md).
    protect_data: bool = True
    #: Server access logs of the data buckets into a dedicated log bucket.
    access_logging: bool = True
    kms_deletion_window_days: Annotated[int, Field(ge=7, le=30)] = 30
    lifecycle: BucketLifecycle = Field(default_factory=BucketLifecycle)
    rwx: RwxConfig = Field(default_factory=RwxConfig)
    #: Requested size of a team's checkpoint PVC (EFS ignores it; Lustre PVs report it).
    team_checkpoint_size: Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]*(Gi|Ti)$")] = "1Ti"
    efs_csi_chart_version: str = "4.4.1"
    fsx_csi_chart_version: str = "1.17.0"

    @model_validator(mode="after")
    def _check(self) -> StorageConfig:
        problems: list[Problem] = []
        if self.bucket_prefix is not None and len(self.bucket_prefix) > BUCKET_PREFIX_MAX:
            problems.append(
                (
                    "bucketPrefix",
                    self.bucket_prefix,
                    f"at most {BUCKET_PREFIX_MAX} characters (S3 names are <= 63)",
                )
            )
        if problems:
            raise _problems(problems)
        return self


# --- GPU operator, observability, validation -----------------------------------------------

#: Image references must be pinned by digest: a moved tag must not change what a test runs.
DigestImage = Annotated[
    str, StringConstraints(pattern=r"^[a-z0-9./:_-]+(:[A-Za-z0-9._-]+)?@sha256:[0-9a-f]{64}$")
]
#: Prometheus durations as the rules and the operator take them (`30s`, `15m`, `2h`, `10d`).
Duration = Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]*(s|m|h|d)$")]
ScrapeInterval = Literal["15s", "20s", "30s"]


class TimeSlicingConfig(_Model):
    """GPU time-slicing (oversubscription) for pools that never run training."""

    #: Each physical GPU is advertised this many times on a time-sliced pool.
    replicas: Annotated[int, Field(ge=2, le=16)] = 4
    #: GPU node groups (names from `nodeGroups.gpu`) to time-slice; training pools are refused.
    pools: list[Name] = []


class GpuOperatorConfig(_Model):
    """NVIDIA GPU Operator: which operands run, MIG, time-slicing, DCGM scraping."""

    chart_version: Annotated[str, StringConstraints(pattern=r"^v\d+\.\d+\.\d+$")] = "v26.7.0"
    namespace: Name = "gpu-operator"
    #: The EKS AL2023 NVIDIA AMI ships the driver and the container toolkit; turn these on
    #: only for custom AMIs without them.
    driver_enabled: bool = False
    toolkit_enabled: bool = False
    mig_strategy: Literal["none", "single", "mixed"] = "none"
    time_slicing: TimeSlicingConfig = Field(default_factory=TimeSlicingConfig)
    dcgm_scrape_interval: ScrapeInterval = "15s"


class AlertThresholds(_Model):
    """Every number the platform's alert rules compare against."""

    gpu_util_low_percent: Annotated[float, Field(gt=0, le=100)] = 40
    gpu_util_low_for: Duration = "15m"
    gpu_temperature_celsius: Annotated[float, Field(ge=60, le=110)] = 87
    #: Fraction of wall time (0-1) a GPU spent throttled for thermal or power reasons.
    throttle_fraction: Annotated[float, Field(gt=0, le=1)] = 0.1
    pod_pending_for: Duration = "10m"
    restarts_per_hour: Annotated[int, Field(ge=1, le=100)] = 3
    node_pressure_for: Duration = "5m"
    checkpoint_duration_seconds: Annotated[float, Field(gt=0)] = 600
    checkpoint_max_age_seconds: Annotated[float, Field(gt=0)] = 7200
    #: No `trainer_global_step` progress for this long while the pod runs = a stalled collective.
    training_stall_for: Duration = "15m"
    kueue_wait_seconds: Annotated[float, Field(gt=0)] = 3600
    karpenter_launch_errors_per_15m: Annotated[int, Field(ge=1)] = 3


class ObservabilityConfig(_Model):
    """kube-prometheus-stack: Prometheus, Alertmanager, Grafana and the platform's rules."""

    chart_version: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")] = "88.5.3"
    namespace: Name = "monitoring"
    retention: Duration = "15d"
    storage_gib: Annotated[int, Field(ge=10, le=16000)] = 200
    alertmanager_storage_gib: Annotated[int, Field(ge=1, le=100)] = 10
    grafana_storage_gib: Annotated[int, Field(ge=1, le=100)] = 10
    scrape_interval: ScrapeInterval = "30s"
    #: Each alert's `runbook_url` is this document plus the alert's anchor (docs/runbooks.md).
    runbook_base_url: Annotated[str, StringConstraints(pattern=r"^https://\S+$")] = (
        "https://github.com/gpu-platform/gpu-platform/blob/main/docs/runbooks.md"
    )
    thresholds: AlertThresholds = Field(default_factory=AlertThresholds)


class NcclTestConfig(_Model):
    """The multi-node NCCL all-reduce test."""

    #: GPU node group to run on; empty = the first on-demand GPU group.
    pool: Name | None = None
    nodes: Annotated[int, Field(ge=2, le=64)] = 2
    #: Minimum all-reduce bus bandwidth (GB/s) at the largest message size; below it, the Job fails.
    min_bus_bandwidth_gbps: Annotated[float, Field(gt=0)] = 10
    message_size_mib: Annotated[int, Field(ge=1, le=8192)] = 1024


class ValidationConfig(_Model):
    """Post-deploy GPU smoke tests and the NCCL all-reduce test."""

    enabled: bool = False
    namespace: Name = "gpu-validation"
    #: One CUDA + PyTorch image for both tests (nvidia-smi, torch matmul, torch.distributed).
    #: The digest was taken from public material and could not be resolved offline: confirm it
    #: with `crane digest nvcr.io/nvidia/pytorch:25.01-py3` before the first deploy.
    image: DigestImage = (
        "nvcr.io/nvidia/pytorch:25.01-py3"
        "@sha256:96990c82825613c3bdeebb66675c7c91b0123f64a5895623316dc5b824e0d7a9"
    )
    smoke_test: bool = True
    nccl_test: bool = True
    nccl: NcclTestConfig = Field(default_factory=NcclTestConfig)
    #: A test still running after this long is failed (a GPU node that never comes up).
    deadline_seconds: Annotated[int, Field(ge=300, le=86400)] = 3600


# --- karpenter ------------------------------------------------------------------------------

#: Karpenter's duration syntax (`30m`, `720h`, `1h30m`).
#: Go durations as Karpenter takes them (`30m`, `720h`, `1h30m`).
GoDuration = Annotated[str, StringConstraints(pattern=r"^([0-9]+(s|m|h))+$")]
#: An AL2023 alias: a pinned EKS AMI release (`al2023@v20251020`) or `al2023@latest`.
AmiAlias = Annotated[str, StringConstraints(pattern=r"^al2023@(latest|v[0-9]{8})$")]
GPU_CLASS_PATTERN: Final = re.compile(r"^(?P<model>[a-z0-9]+)-x(?P<gpus>[0-9]+)$")


def gpu_class_instance_types(gpu_class: str) -> list[str]:
    """Catalog instance types whose GPU model and count make up `gpu_class` (`l4-x1`)."""
    match = GPU_CLASS_PATTERN.match(gpu_class)
    if match is None:
        return []
    model, gpus = match["model"], int(match["gpus"])
    return sorted(
        name
        for name, row in catalog.INSTANCE_TYPES.items()
        if row.gpu_model == model and row.gpus == gpus
    )


class KarpenterNodeClass(_Model):
    """Root volume of the nodes an EC2NodeClass launches (encrypted gp3)."""

    disk_size_gib: Annotated[int, Field(ge=20, le=16000)]
    disk_throughput_mibps: Annotated[int, Field(ge=125, le=1000)] = 125
    disk_iops: Annotated[int, Field(ge=3000, le=16000)] = 3000


def _gpu_node_class() -> KarpenterNodeClass:
    # Multi-GB training images: pulls and unpacking are bound by root-volume throughput.
    return KarpenterNodeClass(disk_size_gib=300, disk_throughput_mibps=500, disk_iops=6000)


def _cpu_node_class() -> KarpenterNodeClass:
    return KarpenterNodeClass(disk_size_gib=100)


class KarpenterLimits(_Model):
    """Upper bounds of what a NodePool may launch in all (Karpenter `spec.limits`)."""

    #: `nvidia.com/gpu`; required for GPU pools (unbounded GPU spend otherwise).
    gpus: Annotated[int, Field(ge=1)] | None = None
    cpu: Annotated[int, Field(ge=1)] | None = None
    memory_gib: Annotated[int, Field(ge=1)] | None = None


class KarpenterDisruption(_Model):
    """When Karpenter may take nodes away. Defaults suit training: only empty nodes go."""

    #: `WhenEmpty` never evicts running pods to consolidate (in-flight GPU work survives).
    consolidation_policy: Literal["WhenEmpty", "WhenEmptyOrUnderutilized"] = "WhenEmpty"
    consolidate_after: GoDuration = "30m"
    #: Nodes are replaced after this age (new AMI, patched kernel); `Never` keeps them.
    expire_after: GoDuration | Literal["Never"] = "720h"
    #: How long a draining node waits for pods (checkpointing jobs) before it is terminated.
    termination_grace_period: GoDuration = "24h"
    #: Share of the pool's nodes that may be disrupted at once.
    max_disrupted_percent: Annotated[int, Field(ge=0, le=100)] = 10
    #: Optional cron window (UTC) in which no node is disrupted voluntarily, e.g. `0 8 * * 1-5`.
    freeze_schedule: (
        Annotated[str, StringConstraints(pattern=r"^(\S+\s){4}\S+$|^@(daily|weekly|hourly)$")]
        | None
    ) = None
    freeze_duration: Annotated[str, StringConstraints(pattern=r"^([0-9]+h)?([0-9]+m)?$")] | None = (
        None
    )

    @model_validator(mode="after")
    def _window(self) -> KarpenterDisruption:
        if (self.freeze_schedule is None) != (self.freeze_duration is None):
            raise _problems(
                [
                    (
                        "freezeDuration",
                        self.freeze_duration,
                        "freezeSchedule and freezeDuration must be set together",
                    )
                ]
            )
        return self


#: Default NodePool weights: spot is tried first, on-demand is the fallback.
DEFAULT_POOL_WEIGHT: Final[dict[catalog.CapacityType, int]] = {"spot": 50, "on-demand": 10}


class KarpenterPool(_Model):
    """One Karpenter NodePool: a GPU class (or CPU instance types) on one capacity type."""

    name: Name
    capacity_type: catalog.CapacityType
    #: `<model>-x<GPUs per node>` (e.g. `l4-x1`): every catalog type of that shape, unless
    #: `instanceTypes` narrows it down.
    gpu_class: str | None = None
    instance_types: list[str] = []
    #: Higher is tried first; defaults: spot 50, on-demand 10.
    weight: Annotated[int, Field(ge=1, le=100)] | None = None
    workload_type: Literal["training", "general"] = "training"
    limits: KarpenterLimits
    disruption: KarpenterDisruption = Field(default_factory=KarpenterDisruption)

    @property
    def resolved_instance_types(self) -> list[str]:
        if self.instance_types:
            return list(self.instance_types)
        return gpu_class_instance_types(self.gpu_class) if self.gpu_class else []

    @property
    def is_gpu(self) -> bool:
        types = self.resolved_instance_types
        return self.gpu_class is not None or any(t in catalog.GPU_INSTANCE_TYPES for t in types)

    @property
    def effective_weight(self) -> int:
        return self.weight if self.weight is not None else DEFAULT_POOL_WEIGHT[self.capacity_type]

    @property
    def gpu_model(self) -> str:
        return catalog.instance(self.resolved_instance_types[0]).gpu_model or ""

    @property
    def gpus_per_node(self) -> int:
        return catalog.instance(self.resolved_instance_types[0]).gpus

    @property
    def resolved_gpu_class(self) -> str:
        return f"{self.gpu_model}-x{self.gpus_per_node}"

    @model_validator(mode="after")
    def _check(self) -> KarpenterPool:
        problems: list[Problem] = []
        unknown = False
        for index, name in enumerate(self.instance_types):
            if name not in catalog.INSTANCE_TYPES:
                unknown = True
                problems.append(
                    (
                        f"instanceTypes[{index}]",
                        name,
                        "an instance type from components/catalog.py "
                        f"({', '.join(sorted(catalog.INSTANCE_TYPES))})",
                    )
                )
        if len(set(self.instance_types)) != len(self.instance_types):
            problems.append(("instanceTypes", self.instance_types, "must not repeat a type"))
        if self.gpu_class is not None:
            members = gpu_class_instance_types(self.gpu_class)
            if not members:
                known = sorted(
                    {
                        f"{row.gpu_model}-x{row.gpus}"
                        for row in catalog.INSTANCE_TYPES.values()
                        if row.gpus
                    }
                )
                problems.append(("gpuClass", self.gpu_class, f"one of {', '.join(known)}"))
            elif not unknown:
                for index, name in enumerate(self.instance_types):
                    if name not in members:
                        problems.append(
                            (
                                f"instanceTypes[{index}]",
                                name,
                                f"a type of GPU class {self.gpu_class} ({', '.join(members)})",
                            )
                        )
        elif not self.instance_types:
            problems.append(("instanceTypes", [], "set gpuClass or list instance types"))
        types = self.resolved_instance_types
        if not unknown and not problems and types:
            kinds = {catalog.instance(t).gpus > 0 for t in types}
            shapes = {(catalog.instance(t).gpu_model, catalog.instance(t).gpus) for t in types}
            if len(kinds) > 1 or (self.is_gpu and len(shapes) > 1):
                problems.append(
                    (
                        "instanceTypes",
                        types,
                        "one GPU model and GPU count per pool (or CPU types only): queue "
                        "flavors and --nproc-per-node depend on it",
                    )
                )
            if self.capacity_type == "spot" and len(types) < 3:
                problems.append(
                    (
                        "instanceTypes" if self.instance_types else "gpuClass",
                        types,
                        "spot pools need at least 3 instance types (spot pools run dry)",
                    )
                )
        if self.is_gpu and self.limits.gpus is None:
            problems.append(
                ("limits.gpus", None, "required for a GPU pool (caps nvidia.com/gpu and spend)")
            )
        if not self.is_gpu:
            if self.limits.gpus is not None:
                problems.append(("limits.gpus", self.limits.gpus, "only for GPU pools"))
            if self.limits.cpu is None:
                problems.append(("limits.cpu", None, "required for a CPU pool (caps spend)"))
        if problems:
            raise _problems(problems)
        return self


class KarpenterConfig(_Model):
    """The Karpenter controller, its node classes and NodePools."""

    #: Published chart version (oci://public.ecr.aws/karpenter/karpenter and karpenter-crd).
    #: The chart's values.yaml/Chart.yaml at git tag v1.14.1 still read 1.13.0 (the release
    #: script rewrites them; ../shared/schemas/SOURCES.md): we pin the chart, never an image tag.
    chart_version: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")] = "1.14.1"
    #: kube-system: upstream's default since v0.33; API Priority and Fairness gives that
    #: namespace's controllers their own flow (leader election keeps working under load).
    namespace: Literal["kube-system", "karpenter"] = "kube-system"
    replicas: Annotated[int, Field(ge=1, le=3)] = 2
    #: Pinned AL2023 EKS AMI release; the NVIDIA variant is chosen per GPU instance type.
    ami_alias: AmiAlias
    #: `@latest` rolls every node whenever AWS publishes an AMI: only where a stack allows it.
    allow_latest_ami: bool = False
    gpu_node_class: KarpenterNodeClass = Field(default_factory=_gpu_node_class)
    cpu_node_class: KarpenterNodeClass = Field(default_factory=_cpu_node_class)
    pools: Annotated[list[KarpenterPool], Field(min_length=3)]

    @model_validator(mode="after")
    def _check(self) -> KarpenterConfig:
        problems: list[Problem] = []
        if self.ami_alias.endswith("@latest") and not self.allow_latest_ami:
            problems.append(
                (
                    "amiAlias",
                    self.ami_alias,
                    "a pinned al2023@vYYYYMMDD release; @latest only where "
                    "allowLatestAmi is true (dev)",
                )
            )
        seen: dict[str, int] = {}
        for index, pool in enumerate(self.pools):
            if pool.name in seen:
                problems.append(
                    (
                        f"pools[{index}].name",
                        pool.name,
                        f"a unique name (pools[{seen[pool.name]}] already uses it)",
                    )
                )
            seen.setdefault(pool.name, index)
        by_class: dict[str, list[KarpenterPool]] = {}
        for pool in self.pools:
            if pool.is_gpu:
                by_class.setdefault(pool.resolved_gpu_class, []).append(pool)
        for gpu_class, pools in sorted(by_class.items()):
            spot = [p.effective_weight for p in pools if p.capacity_type == "spot"]
            on_demand = [p.effective_weight for p in pools if p.capacity_type == "on-demand"]
            if not spot or not on_demand:
                problems.append(
                    (
                        "pools",
                        gpu_class,
                        "every GPU class needs a spot pool and an on-demand pool "
                        "(spot first, on-demand fallback)",
                    )
                )
            elif min(spot) <= max(on_demand):
                problems.append(
                    (
                        "pools",
                        gpu_class,
                        f"spot pools of {gpu_class} need a higher weight than its on-demand "
                        f"pools (spot {min(spot)} <= on-demand {max(on_demand)})",
                    )
                )
        if not any(not pool.is_gpu for pool in self.pools):
            problems.append(("pools", len(self.pools), "at least one CPU pool for general work"))
        if problems:
            raise _problems(problems)
        return self


# --- scheduling (Kueue, Volcano, Kubeflow Trainer) ------------------------------------------


class WaitForPodsReady(_Model):
    """Kueue's all-or-nothing start: a workload whose pods are not all ready in time is evicted,
    releases its quota and is requeued with exponential backoff."""

    #: Multi-GB training images on a fresh GPU node take minutes to pull.
    timeout: GoDuration = "10m"
    #: A running workload that loses a pod (spot reclaim) gets this long to recover.
    recovery_timeout: GoDuration = "5m"
    backoff_base_seconds: Annotated[int, Field(ge=1, le=3600)] = 60
    backoff_max_seconds: Annotated[int, Field(ge=60, le=86400)] = 3600
    #: Requeues before Kueue deactivates the workload; a job that never fits stops retrying.
    backoff_limit_count: Annotated[int, Field(ge=1, le=100)] = 10


class SchedulingConfig(_Model):
    """Kueue (quota and admission), Volcano (the alternative gang scheduler) and Kubeflow
    Trainer v2 (TrainJob through JobSet). Chart versions match ../shared/schemas/SOURCES.md."""

    kueue_chart_version: str = "0.19.2"
    volcano_chart_version: str = "1.15.1"
    trainer_chart_version: str = "2.3.0"
    #: The Kueue cohort every team ClusterQueue joins: unused quota is lent within it.
    cohort: Name = "gpu-platform"
    wait_for_pods_ready: WaitForPodsReady = Field(default_factory=WaitForPodsReady)


# --- teams ------------------------------------------------------------------------------------

DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
S3Prefix = Annotated[
    str,
    StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$", max_length=200),
]
Quantity = Annotated[str, StringConstraints(pattern=r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti)?$")]
#: Namespaces the platform's own controllers use; a team must not land in one of them.
RESERVED_NAMESPACES: Final = frozenset(
    {
        "default",
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "kueue-system",
        "volcano-system",
        "kubeflow-system",
        "karpenter",
        "gpu-operator",
        "monitoring",
    }
)


class FlavorQuota(_Model):
    """A team's nominal share of one ResourceFlavor (GPU class x capacity type) in Kueue."""

    gpu_class: str
    capacity_type: catalog.CapacityType
    gpus: Annotated[int, Field(ge=0)]
    #: CPU cores and memory that go with those GPUs (data loaders, host-side optimizer state).
    cpu: Annotated[int, Field(ge=1)]
    memory_gib: Annotated[int, Field(ge=1)]
    #: GPUs this team may borrow from the cohort on top of `gpus`; unset = no bound.
    borrowing_limit_gpus: Annotated[int, Field(ge=0)] | None = None
    #: GPUs of `gpus` other teams may borrow while idle; unset = all of them.
    lending_limit_gpus: Annotated[int, Field(ge=0)] | None = None

    @property
    def flavor(self) -> str:
        return catalog.gpu_flavor_name(self.gpu_class, self.capacity_type)

    @model_validator(mode="after")
    def _check(self) -> FlavorQuota:
        if self.lending_limit_gpus is not None and self.lending_limit_gpus > self.gpus:
            raise _problems(
                [("lendingLimitGpus", self.lending_limit_gpus, f"at most gpus ({self.gpus})")]
            )
        return self


class NamespaceLimits(_Model):
    """The namespace ResourceQuota: a hard ceiling whatever Kueue admits (borrowing included)."""

    gpus: Annotated[int, Field(ge=0)]
    cpu: Annotated[int, Field(ge=1)]
    memory_gib: Annotated[int, Field(ge=1)]
    persistent_volume_claims: Annotated[int, Field(ge=0)] = 20
    storage_gib: Annotated[int, Field(ge=0)] = 2048


class ContainerDefaults(_Model):
    """LimitRange defaults for containers that declare nothing: a training pod without a CPU
    request is scheduled as if it needed none and starves next to its neighbours."""

    cpu_request: Quantity = "1"
    memory_request: Quantity = "4Gi"
    #: Memory is not compressible: an unbounded container can take the node down.
    memory_limit: Quantity = "16Gi"


class IamStatement(_Model):
    """An extra IAM statement for a team's `trainer` role (e.g. pull from another account's ECR,
    read a shared model registry). Structure only is checked here; what it grants is judged by
    the policy pack (no `*` actions or resources on workload roles)."""

    model_config = ConfigDict(
        frozen=True, extra="forbid", alias_generator=None, populate_by_name=True
    )

    Sid: Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9]+$")]
    Effect: Literal["Allow", "Deny"] = "Allow"
    Action: Annotated[list[str], Field(min_length=1)]
    Resource: Annotated[list[str], Field(min_length=1)]
    Condition: dict[str, dict[str, Any]] | None = None


class TeamEgress(_Model):
    """Egress beyond the namespace and DNS: HTTPS (443) only, to these CIDRs."""

    https_cidrs: list[str] = []
    #: Allow 443 to anywhere (0.0.0.0/0); only when the stack says so explicitly.
    allow_all_https: bool = False

    @field_validator("https_cidrs")
    @classmethod
    def _cidrs(cls, value: list[str]) -> list[str]:
        for cidr in value:
            try:
                ipaddress.IPv4Network(cidr, strict=True)
            except ValueError:
                raise ValueError(f"{cidr!r} is not an IPv4 CIDR") from None
        return value


class VolcanoQueue(_Model):
    """The team's Volcano Queue: share of the cluster by weight (capability = namespace limits)."""

    weight: Annotated[int, Field(ge=1, le=1000)] = 1


class TeamConfig(_Model):
    """One tenant: namespace, queues, quotas, identity and network boundaries."""

    name: Name
    namespace: str
    #: The Kubernetes group (from the IAM access entry / OIDC) whose members run the team's jobs.
    group: Annotated[str, StringConstraints(min_length=1, max_length=200)]
    #: Read-only prefix in the datasets bucket; checkpoints and artifacts live under `<name>/`.
    dataset_prefix: S3Prefix
    quota: Annotated[list[FlavorQuota], Field(min_length=1)]
    limits: NamespaceLimits
    container_defaults: ContainerDefaults = Field(default_factory=ContainerDefaults)
    egress: TeamEgress = Field(default_factory=TeamEgress)
    volcano: VolcanoQueue = Field(default_factory=VolcanoQueue)
    #: Appended to the `trainer` role's policy after the platform's own statements.
    extra_iam_statements: list[IamStatement] = []

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if len(value) > 63 or not DNS_LABEL.match(value):
            raise ValueError(
                "must be a DNS label: at most 63 lowercase letters, digits or '-', "
                "starting and ending with a letter or digit"
            )
        if value in RESERVED_NAMESPACES:
            raise ValueError(
                f"must not be a platform namespace ({', '.join(sorted(RESERVED_NAMESPACES))})"
            )
        return value

    @model_validator(mode="after")
    def _check(self) -> TeamConfig:
        problems: list[Problem] = []
        seen: dict[str, int] = {}
        for index, entry in enumerate(self.quota):
            if entry.flavor in seen:
                problems.append(
                    (
                        f"quota[{index}]",
                        entry.flavor,
                        f"one entry per GPU class and capacity type (quota[{seen[entry.flavor]}])",
                    )
                )
            seen.setdefault(entry.flavor, index)
        nominal = sum(entry.gpus for entry in self.quota)
        if self.limits.gpus < nominal:
            problems.append(
                (
                    "limits.gpus",
                    self.limits.gpus,
                    f"at least the nominal GPU quota ({nominal}), or Kueue admits pods the "
                    "ResourceQuota then rejects",
                )
            )
        if problems:
            raise _problems(problems)
        return self


# --- the whole stack ------------------------------------------------------------------------


class StackConfig(_Model):
    """Everything under the `gpu-platform:` config namespace of a stack."""

    environment: Literal["dev", "staging", "prod"]
    #: Cost-allocation tags put on every AWS resource that takes tags.
    tags: dict[
        Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_ .:/=+@-]+$", max_length=128)],
        Annotated[str, StringConstraints(max_length=256)],
    ] = {}
    network: NetworkConfig = Field(default_factory=NetworkConfig)
    cluster: ClusterConfig
    node_groups: NodeGroupsConfig
    karpenter: KarpenterConfig
    storage: StorageConfig = Field(default_factory=StorageConfig)
    gpu_operator: GpuOperatorConfig = Field(default_factory=GpuOperatorConfig)
    observability: ObservabilityConfig = Field(default_factory=ObservabilityConfig)
    validation: ValidationConfig = Field(default_factory=ValidationConfig)
    scheduling: SchedulingConfig = Field(default_factory=SchedulingConfig)
    teams: list[TeamConfig] = []
    # A lambda: TrainingConfig is defined below this class.
    training: TrainingConfig = Field(default_factory=lambda: TrainingConfig())  # noqa: PLW0108
    training_jobs: list[TrainingJobConfig] = []

    @model_validator(mode="after")
    def _teams(self) -> StackConfig:
        problems = check_teams(self)
        if problems:
            raise _problems(problems)
        return self

    @model_validator(mode="after")
    def _storage_fits(self) -> StackConfig:
        problems: list[Problem] = []
        # Without a prefix, bucket names start with the cluster name: it must fit S3's limit.
        if self.storage.bucket_prefix is None and len(self.cluster.name) > BUCKET_PREFIX_MAX:
            problems.append(
                (
                    "storage.bucketPrefix",
                    None,
                    f"set a prefix of at most {BUCKET_PREFIX_MAX} characters: the cluster "
                    "name is too long for S3 bucket names",
                )
            )
        existing = self.network.existing_vpc
        subnets = len(existing.private_subnet_ids) if existing else self.network.az_count
        index = self.storage.rwx.subnet_index
        if index is not None and index >= subnets:
            problems.append(
                (
                    "storage.rwx.subnetIndex",
                    index,
                    f"an index of one of the {subnets} private subnets (0-{subnets - 1})",
                )
            )
        if problems:
            raise _problems(problems)
        return self

    @model_validator(mode="after")
    def _gpu_sections(self) -> StackConfig:
        problems: list[Problem] = []
        groups = {group.name: group for group in self.node_groups.gpu}
        for index, pool in enumerate(self.gpu_operator.time_slicing.pools):
            key = f"gpuOperator.timeSlicing.pools[{index}]"
            group = groups.get(pool)
            if group is None:
                problems.append((key, pool, f"a GPU node group ({', '.join(sorted(groups))})"))
            elif group.workload_type == "training":
                problems.append(
                    (
                        key,
                        pool,
                        "a pool whose workloadType is not training (time-sliced GPUs share "
                        "memory and break training throughput and isolation)",
                    )
                )
        if self.gpu_operator.mig_strategy != "none" and not any(
            group.gpu_model in catalog.MIG_CAPABLE_GPU_MODELS for group in groups.values()
        ):
            problems.append(
                (
                    "gpuOperator.migStrategy",
                    self.gpu_operator.mig_strategy,
                    "'none' unless a GPU group has a MIG-capable GPU "
                    f"({', '.join(sorted(catalog.MIG_CAPABLE_GPU_MODELS))})",
                )
            )
        nccl = self.validation.nccl
        if self.validation.enabled and self.validation.nccl_test:
            if nccl.pool is not None and nccl.pool not in groups:
                problems.append(
                    ("validation.nccl.pool", nccl.pool, f"one of {', '.join(sorted(groups))}")
                )
            target = groups.get(nccl.pool) if nccl.pool else default_nccl_pool(self.node_groups)
            if target is not None and target.max_size < nccl.nodes:
                problems.append(
                    (
                        "validation.nccl.nodes",
                        nccl.nodes,
                        f"at most the pool's maxSize ({target.name}: {target.max_size})",
                    )
                )
        if problems:
            raise _problems(problems)
        return self

    @model_validator(mode="after")
    def _karpenter_pool_names(self) -> StackConfig:
        # Pools and managed groups share the gpu-platform.io/node-pool label: names must differ.
        groups = {"system", *(group.name for group in self.node_groups.gpu)}
        problems: list[Problem] = [
            (
                f"karpenter.pools[{index}].name",
                pool.name,
                "a name no managed node group uses (both set the gpu-platform.io/node-pool label)",
            )
            for index, pool in enumerate(self.karpenter.pools)
            if pool.name in groups
        ]
        if problems:
            raise _problems(problems)
        return self

    @model_validator(mode="after")
    def _training_jobs(self) -> StackConfig:
        problems = check_training_jobs(self)
        if problems:
            raise _problems(problems)
        return self

    @property
    def bucket_prefix(self) -> str:
        return (self.storage.bucket_prefix or self.cluster.name).lower()

    def nccl_pool(self) -> GpuNodeGroup:
        """The GPU node group the NCCL test runs on (named, or the default)."""
        named = self.validation.nccl.pool
        for group in self.node_groups.gpu:
            if group.name == named:
                return group
        return default_nccl_pool(self.node_groups)


def default_nccl_pool(node_groups: NodeGroupsConfig) -> GpuNodeGroup:
    """The NCCL test's pool when none is named: the first on-demand GPU group (no preemption)."""
    for group in node_groups.gpu:
        if group.capacity_type == "on-demand":
            return group
    return node_groups.gpu[0]


def gpu_capacity(cfg: StackConfig) -> dict[tuple[str, catalog.CapacityType], int]:
    """GPUs each (GPU class, capacity type) flavor can provide at most: the one capacity figure
    Kueue quotas are checked against (Kueue itself is capacity-blind). Managed GPU node groups
    count `maxSize` x GPUs per node; Karpenter GPU NodePools count their `limits.gpus`."""
    capacity: dict[tuple[str, catalog.CapacityType], int] = {}
    for group in cfg.node_groups.gpu:
        key = (group.gpu_class, group.capacity_type)
        capacity[key] = capacity.get(key, 0) + group.max_size * group.gpus_per_node
    for pool in cfg.karpenter.pools:
        if pool.is_gpu and pool.limits.gpus:
            key = (pool.resolved_gpu_class, pool.capacity_type)
            capacity[key] = capacity.get(key, 0) + pool.limits.gpus
    return capacity


def check_teams(cfg: StackConfig) -> list[Problem]:
    """Cross-section rules of `teams`: unique names and namespaces, known flavors, and the sum of
    nominal GPU quotas per flavor within what the pools provide (`gpu_capacity`)."""
    problems: list[Problem] = []
    capacity = gpu_capacity(cfg)
    classes = sorted({gpu_class for gpu_class, _ in capacity})
    names: dict[str, int] = {}
    namespaces: dict[str, int] = {}
    totals: dict[tuple[str, catalog.CapacityType], int] = {}
    for index, team in enumerate(cfg.teams):
        for field, seen, value in (
            ("name", names, team.name),
            ("namespace", namespaces, team.namespace),
        ):
            if value in seen:
                problems.append(
                    (
                        f"teams[{index}].{field}",
                        value,
                        f"a unique {field} (teams[{seen[value]}] already uses it)",
                    )
                )
            seen.setdefault(value, index)
        for entry_index, entry in enumerate(team.quota):
            path = f"teams[{index}].quota[{entry_index}]"
            if entry.gpu_class not in classes:
                problems.append(
                    (
                        f"{path}.gpuClass",
                        entry.gpu_class,
                        f"a GPU class the pools provide ({', '.join(classes)})",
                    )
                )
                continue
            key = (entry.gpu_class, entry.capacity_type)
            if key not in capacity:
                problems.append(
                    (
                        f"{path}.capacityType",
                        entry.capacity_type,
                        f"no {entry.capacity_type} pool provides {entry.gpu_class}",
                    )
                )
                continue
            before = totals.get(key, 0)
            totals[key] = before + entry.gpus
            if before <= capacity[key] < totals[key]:
                problems.append(
                    (
                        f"{path}.gpus",
                        entry.gpus,
                        f"the nominal GPU quotas of flavor {entry.flavor} add up to "
                        f"{totals[key]} here, over the {capacity[key]} GPUs its pools provide",
                    )
                )
    return problems


# --- loading and error formatting -----------------------------------------------------------


def _path(loc: Iterable[int | str]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += f".{part}" if text else str(part)
    return text


def _model_at(loc: Sequence[int | str]) -> type[BaseModel] | None:
    """The model class whose field set applies at `loc` (to list allowed keys)."""
    model: Any = StackConfig
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        fields = {(f.alias or n): f for n, f in model.model_fields.items()}
        field = fields.get(part)
        if field is None:
            return None
        model = _unwrap_model(field.annotation)
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


def _unwrap_model(annotation: Any) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in getattr(annotation, "__args__", ()) or ():
        found = _unwrap_model(arg)
        if found is not None:
            return found
    meta = getattr(annotation, "__origin__", None)
    if meta is not None and isinstance(meta, type) and issubclass(meta, BaseModel):
        return meta
    return None


def _show(value: Any) -> str:
    text = json.dumps(value, default=str, sort_keys=True)
    return text if len(text) <= 120 else text[:117] + "..."


def format_errors(error: ValidationError) -> list[str]:
    """One line per problem: `gpu-platform:<path>: got <value>; <allowed>`."""
    lines: list[str] = []
    for item in error.errors(include_url=False):
        loc = list(item["loc"])
        if item["type"] == "gpu_platform":
            for sub, value, allowed in item["ctx"]["problems"]:
                path = _path([*loc, *_split(sub)])
                lines.append(f"{NAMESPACE}:{path}: got {_show(value)}; {allowed}")
            continue
        path = _path(loc)
        if item["type"] == "extra_forbidden":
            model = _model_at(loc[:-1])
            allowed = sorted((f.alias or n) for n, f in model.model_fields.items()) if model else []
            close = difflib.get_close_matches(str(loc[-1]), allowed, n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            lines.append(
                f"{NAMESPACE}:{path}: unknown key{hint}; allowed keys: {', '.join(allowed)}"
            )
        elif item["type"] == "missing":
            lines.append(f"{NAMESPACE}:{path}: required key is missing")
        else:
            message = str(item["msg"]).removeprefix("Value error, ")
            lines.append(f"{NAMESPACE}:{path}: got {_show(item['input'])}; {message}")
    return lines


def _split(sub: str) -> list[int | str]:
    parts: list[int | str] = []
    for token in re.findall(r"[^.\[\]]+|\[\d+\]", sub):
        parts.append(int(token[1:-1]) if token.startswith("[") else token)
    return parts


def _decode(raw: str) -> Any:
    # Under the CLI (and synth) structured values arrive JSON-encoded; plain strings stay strings.
    stripped = raw.strip()
    if stripped[:1] in ("{", "["):
        try:
            return json.loads(stripped)
        except json.JSONDecodeError:
            return raw
    return raw


def parse(values: Mapping[str, Any]) -> StackConfig:
    """Validate the namespace's keys (names without the `gpu-platform:` prefix)."""
    try:
        return StackConfig.model_validate(dict(values))
    except ValidationError as exc:
        raise ConfigError(format_errors(exc)) from None


def namespace_values(all_config: Mapping[str, str]) -> dict[str, Any]:
    """The project's keys from a flat `namespace:key -> value` map, decoded."""
    prefix = f"{NAMESPACE}:"
    return {
        key[len(prefix) :]: _decode(value)
        for key, value in all_config.items()
        if key.startswith(prefix)
    }


def load() -> StackConfig:
    """Read and validate this stack's config from the Pulumi runtime (CLI or mocks).

    pulumi.Config only answers for keys we ask for by name; rejecting unknown keys needs the
    full set that was given, which the SDK keeps in `pulumi.runtime.config` (private API — the
    SDK is pinned and tests/test_config.py covers this call).
    """
    from pulumi.runtime import config as runtime_config

    given: dict[str, str] = dict(runtime_config.CONFIG.get())
    given.update(runtime_config.get_config_env())
    return parse(namespace_values(given))


# --- training jobs ----------------------------------------------------------------------------

#: An image reference, by tag and/or digest (`repo[:tag][@sha256:<64 hex>]`).
ImageRef = Annotated[
    str,
    StringConstraints(pattern=r"^[a-z0-9][a-z0-9./_-]*(:[A-Za-z0-9._-]+)?(@sha256:[0-9a-f]{64})?$"),
]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=128)]
#: The reference trainer (workloads/trainer) as its Dockerfile builds it. No release has been
#: pushed yet, so this digest identifies no published image: set `training.defaultImage` (or
#: each job's `image`) to the digest your registry returns after the first push
#: (`crane digest ghcr.io/<org>/trainer:0.1.0`). docs/training-jobs.md says the same.
REFERENCE_TRAINER_IMAGE: Final = (
    "ghcr.io/gpu-platform/trainer:0.1.0"
    "@sha256:3b1f0c6f1d0e2a4c5b7d9e8f7a6b5c4d3e2f1a0b9c8d7e6f5a4b3c2d1e0f9a8b"
)
#: Seconds between the spot interruption notice and the instance's reclaim (EC2 user guide).
SPOT_NOTICE_SECONDS: Final = 120


class TrainingConfig(_Model):
    """Stack-wide settings of the training-job layer (docs/training-jobs.md)."""

    #: Jobs must reference their image by digest (`@sha256:`): what ran is then known exactly.
    #: The prod-safe default; dev relaxes it to iterate on tags.
    require_image_digest: bool = True
    #: Image of jobs that name none: the reference trainer.
    default_image: ImageRef = REFERENCE_TRAINER_IMAGE
    #: torchrun's c10d rendezvous port on node 0.
    rendezvous_port: Annotated[int, Field(ge=1024, le=65535)] = 29400


class DeepSpeedSettings(_Model):
    """The typed model a job's `ds_config.json` is generated from (never hand-written JSON)."""

    zero_stage: Annotated[int, Field(ge=0, le=3)] = 2
    #: Optimizer state (ZeRO >= 1) and parameters (ZeRO-3 only) offloaded to host memory.
    offload_optimizer: Literal["none", "cpu"] = "none"
    offload_param: Literal["none", "cpu"] = "none"
    bf16: bool = True
    fp16: bool = False
    micro_batch_per_gpu: Annotated[int, Field(ge=1, le=4096)]
    gradient_accumulation_steps: Annotated[int, Field(ge=1, le=4096)] = 1
    #: Optional: when given it must equal micro x accumulation x world size (else derived).
    train_batch_size: Annotated[int, Field(ge=1)] | None = None
    gradient_clipping: Annotated[float, Field(ge=0)] = 1.0
    reduce_bucket_size: Annotated[int, Field(ge=1)] = 500_000_000
    allgather_bucket_size: Annotated[int, Field(ge=1)] = 500_000_000

    @model_validator(mode="after")
    def _check(self) -> DeepSpeedSettings:
        problems: list[Problem] = []
        if self.fp16 and self.bf16:
            problems.append(("fp16", True, "fp16 and bf16 are exclusive: turn one off"))
        if self.offload_param != "none" and self.zero_stage != 3:
            problems.append(
                ("offloadParam", self.offload_param, "parameter offload needs zeroStage 3")
            )
        if self.offload_optimizer != "none" and self.zero_stage == 0:
            problems.append(
                ("offloadOptimizer", self.offload_optimizer, "optimizer offload needs ZeRO >= 1")
            )
        if problems:
            raise _problems(problems)
        return self

    def effective_batch(self, world_size: int) -> int:
        """train_batch_size = micro x accumulation x world size (DeepSpeed's own rule)."""
        return self.micro_batch_per_gpu * self.gradient_accumulation_steps * world_size


class JobCheckpoint(_Model):
    """Where a job checkpoints and how often (docs/training-jobs.md, Young/Daly)."""

    #: Mount the team's RWX checkpoint PVC (`<team>-checkpoints`) and write under `path`.
    volume: bool = True
    #: Directory inside the PVC; defaults to the job name.
    path: Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._/-]*$")] | None = None
    #: Also replicate to `s3://<checkpoints bucket>/<team>/<s3Prefix>`; null = PVC only.
    s3_prefix: S3Prefix | None = None
    #: Time one synchronous save takes (measured: trainer_checkpoint_save_duration_seconds);
    #: the SIGTERM path must finish one within the grace period.
    save_seconds: Annotated[float, Field(gt=0, le=3600)] = 30.0
    #: Time a periodic save blocks the loop (async saves: far below saveSeconds); Young/Daly's
    #: delta. Defaults to saveSeconds.
    blocking_seconds: Annotated[float, Field(gt=0, le=3600)] | None = None
    #: Mean time between *ungraceful* failures of the whole job (hardware, OOM, lost nodes).
    mtbf_seconds: Annotated[float, Field(gt=0)] = 21600.0
    #: Time a restart costs: rescheduling, image pull, resume.
    restart_seconds: Annotated[float, Field(ge=0)] = 300.0
    #: Override of the Young/Daly interval (seconds of compute between periodic saves).
    interval_seconds: Annotated[int, Field(ge=1)] | None = None
    every_steps: Annotated[int, Field(ge=0)] = 0
    keep_last: Annotated[int, Field(ge=1, le=100)] = 3

    @property
    def blocking(self) -> float:
        return self.blocking_seconds if self.blocking_seconds is not None else self.save_seconds

    @property
    def has_storage(self) -> bool:
        return self.volume or self.s3_prefix is not None


class SecretEnv(_Model):
    """An environment variable read from a key of a Secret in the team's namespace."""

    name: EnvName
    secret_name: Annotated[str, StringConstraints(pattern=r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")]
    key: Annotated[str, StringConstraints(pattern=r"^[-._a-zA-Z0-9]+$")]


HyperValue = str | int | float | bool


class TrainingJobConfig(_Model):
    """One `trainingJobs[]` entry: a multi-node DDP or DeepSpeed run under torchrun."""

    name: Name
    team: str
    mode: Literal["ddp", "deepspeed"] = "ddp"
    #: native = Indexed Job + headless Service; kubeflow = TrainJob (Trainer v2); volcano =
    #: Volcano Job.
    launcher: Literal["native", "kubeflow", "volcano"] = "native"
    scheduler: Literal["kueue", "volcano"] = "kueue"
    priority: Literal["production", "research", "dev"] = "research"
    image: ImageRef | None = None
    #: PID 1 (exec form): a torchrun-compatible launcher (`torch.distributed.run` CLI).
    entrypoint: Annotated[list[str], Field(min_length=1)] = [
        "python",
        "-m",
        "gpt_trainer.launch",
    ]
    #: The per-rank worker: a module (`-m`) or a script path; exactly one.
    module: str | None = "gpt_trainer.train"
    script: str | None = None
    args: list[str] = []
    #: Rendered as `--<key> <value>` worker flags (true: `--<key>`; false: omitted).
    hyperparameters: dict[
        Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9-]*$")], HyperValue
    ] = {}
    nodes: Annotated[int, Field(ge=1, le=256)] = 1
    #: Defaults to the GPU class's GPUs per node; when given it must equal them.
    gpus_per_node: Annotated[int, Field(ge=1, le=16)] | None = None
    gpu_class: str
    capacity: Literal["spot", "on-demand", "either"] = "on-demand"
    checkpoint: JobCheckpoint = Field(default_factory=JobCheckpoint)
    deepspeed: DeepSpeedSettings | None = None
    #: Per-pod CPU cores / memory; defaults derive from the smallest instance of the class.
    cpu: Annotated[float, Field(gt=0)] | None = None
    memory_gib: Annotated[int, Field(ge=1)] | None = None
    shm_gib: Annotated[int, Field(ge=1)] | None = None
    #: EFA: null = on when the instance type has EFA devices and the job spans nodes.
    efa: bool | None = None
    nccl_debug: Literal["WARN", "INFO", "TRACE", "VERSION"] = "WARN"
    env: dict[EnvName, str] = {}
    secret_env: list[SecretEnv] = []
    max_runtime_seconds: Annotated[int, Field(ge=60)] | None = None
    ttl_seconds_after_finished: Annotated[int, Field(ge=0)] = 86400
    #: Ungraceful failures tolerated per node before the job fails (preemptions never count).
    max_failures_per_node: Annotated[int, Field(ge=0, le=100)] = 3
    #: Provenance: the training code's commit (recorded as GIT_SHA).
    git_sha: Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{7,40}$")] | None = None

    @field_validator("env")
    @classmethod
    def _no_reserved_env(cls, value: dict[str, str]) -> dict[str, str]:
        reserved = {"RUN_ID", "GIT_SHA", "IMAGE_DIGEST", "CONFIG_HASH", "TEAM"}
        clash = sorted(reserved & set(value))
        if clash:
            raise ValueError(f"{', '.join(clash)} are set by the platform (run metadata)")
        return value

    @model_validator(mode="after")
    def _check(self) -> TrainingJobConfig:
        problems: list[Problem] = []
        if (self.module is None) == (self.script is None):
            problems.append(("module", self.module, "exactly one of module and script"))
        if self.mode == "deepspeed" and self.deepspeed is None:
            problems.append(("deepspeed", None, "a deepspeed section (mode is deepspeed)"))
        if self.mode == "ddp" and self.deepspeed is not None:
            problems.append(("deepspeed", "...", "only for mode: deepspeed"))
        if self.launcher == "volcano" and self.scheduler != "volcano":
            problems.append(
                ("scheduler", self.scheduler, "volcano (the Volcano launcher is scheduled by it)")
            )
        if self.launcher != "volcano" and self.scheduler == "volcano":
            problems.append(
                (
                    "launcher",
                    self.launcher,
                    "volcano when scheduler is volcano (native and kubeflow jobs queue in Kueue)",
                )
            )
        if self.capacity != "on-demand" and not self.checkpoint.has_storage:
            problems.append(
                (
                    "checkpoint",
                    {"volume": False, "s3Prefix": None},
                    "a spot job needs checkpoint storage (volume: true and/or s3Prefix)",
                )
            )
        if self.capacity != "on-demand":
            grace = job_grace_seconds(self.checkpoint)
            if grace.termination > SPOT_NOTICE_SECONDS:
                problems.append(
                    (
                        "checkpoint.saveSeconds",
                        self.checkpoint.save_seconds,
                        f"a save that fits the {SPOT_NOTICE_SECONDS} s spot interruption notice "
                        f"(needs a {grace.termination} s grace period); save faster or use "
                        "on-demand",
                    )
                )
        if problems:
            raise _problems(problems)
        return self

    @property
    def capacity_types(self) -> tuple[catalog.CapacityType, ...]:
        if self.capacity == "either":
            return ("spot", "on-demand")
        return (self.capacity,)


class GraceSeconds:
    """The nested shutdown budget: worker --grace-s < torchrun --shutdown-timeout < pod
    terminationGracePeriodSeconds, all above the checkpoint's save time."""

    def __init__(self, save_seconds: float) -> None:
        #: One step to reach a boundary plus the synchronous save, with a margin.
        self.worker = math.ceil(save_seconds) + 20
        self.shutdown_timeout = self.worker + 10
        # At least the spot notice: that time is there anyway, and a slow save gets all of it.
        self.termination = max(self.shutdown_timeout + 10, SPOT_NOTICE_SECONDS)


def job_grace_seconds(checkpoint: JobCheckpoint) -> GraceSeconds:
    return GraceSeconds(checkpoint.save_seconds)


def gpus_of_class(gpu_class: str) -> int | None:
    """GPUs per node a GPU class (`a10g-x4`) stands for, None if it does not parse."""
    match = GPU_CLASS_PATTERN.match(gpu_class)
    return int(match["gpus"]) if match else None


def job_instance_types(cfg: StackConfig, job: TrainingJobConfig) -> list[str]:
    """Instance types the pools can launch for a job's GPU class and capacity types."""
    found: set[str] = set()
    for group in cfg.node_groups.gpu:
        if group.gpu_class == job.gpu_class and group.capacity_type in job.capacity_types:
            found.update(group.instance_types)
    for pool in cfg.karpenter.pools:
        if (
            pool.is_gpu
            and pool.resolved_gpu_class == job.gpu_class
            and pool.capacity_type in job.capacity_types
        ):
            found.update(pool.resolved_instance_types)
    return sorted(found)


def smallest_instance_type(names: Sequence[str]) -> str:
    """The instance every pod must fit on (a managed group may launch any of its types)."""
    return min(names, key=lambda n: (catalog.instance(n).vcpu, catalog.instance(n).memory_gib, n))


def _job_quota_problems(
    cfg: StackConfig, index: int, job: TrainingJobConfig, team: TeamConfig
) -> list[Problem]:
    """Nodes x GPUs (and CPU/memory) within the team's quota for one of the job's flavors
    (nominal + borrowing limit; unbounded borrowing = the pools' capacity), the namespace's
    ResourceQuota, and the pools' capacity. A Kueue podset runs on one flavor, so `either`
    needs one flavor that fits the whole job."""
    # Local import: the pure resource arithmetic lives with the builders.
    from components import training

    key = f"trainingJobs[{index}]"
    capacity = gpu_capacity(cfg)
    gpus = job.nodes * (job.gpus_per_node or gpus_of_class(job.gpu_class) or 0)
    requests = training.job_resources(cfg, job)
    problems: list[Problem] = []
    pools = [capacity.get((job.gpu_class, c), 0) for c in job.capacity_types]
    if gpus > max(pools):
        problems.append(
            (
                f"{key}.nodes",
                job.nodes,
                f"nodes x GPUs = {gpus} is over the {max(pools)} GPUs the "
                f"{job.gpu_class} {'/'.join(job.capacity_types)} pools provide",
            )
        )
    fits: list[str] = []
    quota_text: list[str] = []
    for capacity_type in job.capacity_types:
        entry = next(
            (
                q
                for q in team.quota
                if q.gpu_class == job.gpu_class and q.capacity_type == capacity_type
            ),
            None,
        )
        if entry is None:
            quota_text.append(
                f"no quota for {catalog.gpu_flavor_name(job.gpu_class, capacity_type)}"
            )
            continue
        pool = capacity.get((job.gpu_class, capacity_type), 0)
        gpu_cap = (
            entry.gpus + entry.borrowing_limit_gpus
            if entry.borrowing_limit_gpus is not None
            else max(pool, entry.gpus)
        )
        scale = gpu_cap / entry.gpus if entry.gpus else 0.0
        cpu_cap, mem_cap = entry.cpu * scale, entry.memory_gib * scale
        quota_text.append(
            f"{entry.flavor}: {gpu_cap} GPUs, {cpu_cap:g} CPU, {mem_cap:g} GiB with borrowing"
        )
        if (
            gpus <= gpu_cap
            and requests.cpu * job.nodes <= cpu_cap
            and requests.memory_gib * job.nodes <= mem_cap
        ):
            fits.append(entry.flavor)
    if not fits:
        problems.append(
            (
                f"{key}.nodes",
                job.nodes,
                f"the job ({gpus} GPUs, {requests.cpu * job.nodes:g} CPU, "
                f"{requests.memory_gib * job.nodes} GiB) fits no quota of team {team.name} "
                f"({'; '.join(quota_text)})",
            )
        )
    if gpus > team.limits.gpus:
        problems.append(
            (
                f"{key}.nodes",
                job.nodes,
                f"nodes x GPUs = {gpus} is over team {team.name}'s namespace limit "
                f"({team.limits.gpus} GPUs)",
            )
        )
    return problems


def check_training_jobs(cfg: StackConfig) -> list[Problem]:
    """Cross-section rules of `trainingJobs`: known team and GPU class, GPUs per node, quota and
    pool capacity, DeepSpeed batch arithmetic, image digests, unique names per namespace."""
    problems: list[Problem] = []
    teams = {team.name: team for team in cfg.teams}
    capacity = gpu_capacity(cfg)
    classes = sorted({gpu_class for gpu_class, _ in capacity})
    seen: dict[tuple[str, str], int] = {}
    for index, job in enumerate(cfg.training_jobs):
        key = f"trainingJobs[{index}]"
        team = teams.get(job.team)
        if team is None:
            problems.append((f"{key}.team", job.team, f"a team ({', '.join(sorted(teams))})"))
        else:
            where = (team.namespace, job.name)
            if where in seen:
                problems.append(
                    (
                        f"{key}.name",
                        job.name,
                        f"a unique name in {team.namespace} (trainingJobs[{seen[where]}])",
                    )
                )
            seen.setdefault(where, index)
        image = job.image or cfg.training.default_image
        if cfg.training.require_image_digest and "@sha256:" not in image:
            problems.append(
                (
                    f"{key}.image",
                    image,
                    "an image pinned by digest (repo[:tag]@sha256:...); "
                    "training.requireImageDigest is on",
                )
            )
        if job.deepspeed is not None and job.deepspeed.train_batch_size is not None:
            per_node = job.gpus_per_node or gpus_of_class(job.gpu_class) or 0
            world = job.nodes * per_node
            want = job.deepspeed.effective_batch(world)
            if job.deepspeed.train_batch_size != want:
                problems.append(
                    (
                        f"{key}.deepspeed.trainBatchSize",
                        job.deepspeed.train_batch_size,
                        f"micro {job.deepspeed.micro_batch_per_gpu} x accumulation "
                        f"{job.deepspeed.gradient_accumulation_steps} x world size {world} = "
                        f"{want} (or leave it out)",
                    )
                )
        if job.gpu_class not in classes:
            problems.append(
                (
                    f"{key}.gpuClass",
                    job.gpu_class,
                    f"a GPU class the pools provide ({', '.join(classes)})",
                )
            )
            continue
        missing = [c for c in job.capacity_types if (job.gpu_class, c) not in capacity]
        if len(missing) == len(job.capacity_types):
            problems.append(
                (
                    f"{key}.capacity",
                    job.capacity,
                    f"no {job.capacity} pool provides {job.gpu_class}",
                )
            )
            continue
        class_gpus = gpus_of_class(job.gpu_class)
        if job.gpus_per_node is not None and job.gpus_per_node != class_gpus:
            problems.append(
                (
                    f"{key}.gpusPerNode",
                    job.gpus_per_node,
                    f"{class_gpus}: the GPUs of a {job.gpu_class} instance (whole nodes only)",
                )
            )
            continue
        if team is not None:
            problems.extend(_job_quota_problems(cfg, index, job, team))
    return problems


# The training section is declared after StackConfig; resolve its forward references now.
StackConfig.model_rebuild()
