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
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Annotated, Any, Final, Literal

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


# --- scheduling (Kueue, Volcano, Kubeflow Trainer) ------------------------------------------


Duration = Annotated[str, StringConstraints(pattern=r"^([0-9]+(s|m|h))+$")]


class WaitForPodsReady(_Model):
    """Kueue's all-or-nothing start: a workload whose pods are not all ready in time is evicted,
    releases its quota and is requeued with exponential backoff."""

    #: Multi-GB training images on a fresh GPU node take minutes to pull.
    timeout: Duration = "10m"
    #: A running workload that loses a pod (spot reclaim) gets this long to recover.
    recovery_timeout: Duration = "5m"
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
    scheduling: SchedulingConfig = Field(default_factory=SchedulingConfig)
    teams: list[TeamConfig] = []

    @model_validator(mode="after")
    def _teams(self) -> StackConfig:
        problems = check_teams(self)
        if problems:
            raise _problems(problems)
        return self


def gpu_capacity(cfg: StackConfig) -> dict[tuple[str, catalog.CapacityType], int]:
    """GPUs each (GPU class, capacity type) flavor can provide at most: the one capacity figure
    Kueue quotas are checked against (Kueue itself is capacity-blind).

    Today: every managed GPU node group at `maxSize` x GPUs per node. This is the single place
    where the Karpenter NodePools' `limits.gpus` get added, keyed the same way, once the
    `karpenter` section exists.
    """
    capacity: dict[tuple[str, catalog.CapacityType], int] = {}
    for group in cfg.node_groups.gpu:
        key = (group.gpu_class, group.capacity_type)
        capacity[key] = capacity.get(key, 0) + group.max_size * group.gpus_per_node
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
