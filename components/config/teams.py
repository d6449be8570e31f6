"""Teams slice: namespaces, quotas per flavor, limits, IAM extras, egress, Volcano queues."""

from __future__ import annotations

import ipaddress
import math
import re
from dataclasses import dataclass
from typing import Annotated, Any, Final, Literal

from pydantic import ConfigDict, Field, StringConstraints, field_validator, model_validator

from components import catalog
from components.config.base import (
    Model,
    Name,
    Problem,
    S3Prefix,
    problems_error,
    quantity,
)

DNS_LABEL: Final = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
Quantity = Annotated[str, StringConstraints(pattern=r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti)?$")]


@dataclass(frozen=True)
class ResourceQuota:
    """One resource of a quota entry as the team's ClusterQueue carries it: nominal quota,
    borrowing and lending limits (None: no limit). `name`: "cpu", "memory" (GiB) or "gpus"."""

    name: str
    nominal: int
    borrowing: int | None
    lending: int | None

    @property
    def lendable(self) -> int:
        """What this ClusterQueue puts into its cohort: its nominal quota up to its lending
        limit (kueue v0.19.2 pkg/cache/scheduler/resource_node.go `accumulateFromChild`: a
        child adds SubtreeQuota - localQuota, localQuota = nominal - lendingLimit)."""
        return self.nominal if self.lending is None else min(self.nominal, self.lending)


def _scaled(value: int, gpus_part: int | None, gpus: int) -> int | None:
    """CPU/memory share that goes with `gpus_part` of `gpus` GPUs (None: no bound)."""
    if gpus_part is None or gpus == 0:
        return None
    return math.ceil(value * gpus_part / gpus)


class FlavorQuota(Model):
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

    def quantities(self) -> tuple[ResourceQuota, ResourceQuota, ResourceQuota]:
        """CPU, memory (GiB) and GPUs as the team's ClusterQueue renders them
        (components/platform/tenancy/team_queues.py): the GPU limits as set, and for CPU and
        memory the share that goes with them, rounded up (no GPU limit, or no nominal GPUs:
        no CPU/memory limit either)."""
        return (
            ResourceQuota(
                "cpu",
                self.cpu,
                _scaled(self.cpu, self.borrowing_limit_gpus, self.gpus),
                _scaled(self.cpu, self.lending_limit_gpus, self.gpus),
            ),
            ResourceQuota(
                "memory",
                self.memory_gib,
                _scaled(self.memory_gib, self.borrowing_limit_gpus, self.gpus),
                _scaled(self.memory_gib, self.lending_limit_gpus, self.gpus),
            ),
            ResourceQuota("gpus", self.gpus, self.borrowing_limit_gpus, self.lending_limit_gpus),
        )

    @model_validator(mode="after")
    def _check(self) -> FlavorQuota:
        if self.lending_limit_gpus is not None and self.lending_limit_gpus > self.gpus:
            raise problems_error(
                [
                    Problem(
                        "lendingLimitGpus", self.lending_limit_gpus, f"at most gpus ({self.gpus})"
                    )
                ]
            )
        return self


class NamespaceLimits(Model):
    """The namespace ResourceQuota: a hard ceiling whatever Kueue admits (borrowing included)."""

    gpus: Annotated[int, Field(ge=0)]
    cpu: Annotated[int, Field(ge=1)]
    memory_gib: Annotated[int, Field(ge=1)]
    persistent_volume_claims: Annotated[int, Field(ge=0)] = 20
    storage_gib: Annotated[int, Field(ge=0)] = 2048


class ContainerDefaults(Model):
    """LimitRange defaults for containers that declare nothing: a training pod without a CPU
    request is scheduled as if it needed none and starves next to its neighbours."""

    cpu_request: Quantity = "1"
    memory_request: Quantity = "4Gi"
    #: Memory is not compressible: an unbounded container can take the node down.
    memory_limit: Quantity = "16Gi"
    #: A default CPU limit for containers that set none (none by default: CFS throttling stalls
    #: training pods' data loaders). Kueue applies it to every Workload's containers too, so a
    #: Kueue job that requests more CPU than this is refused (components/analysis/limit_range.py).
    cpu_limit: Quantity | None = None

    @model_validator(mode="after")
    def _check(self) -> ContainerDefaults:
        # The API server refuses a LimitRange whose default request is above its default limit
        # (k8s.io/kubernetes pkg/apis/core/validation ValidateLimitRange).
        found = []
        if quantity(self.memory_request) > quantity(self.memory_limit):
            found.append(
                Problem(
                    "memoryRequest",
                    self.memory_request,
                    f"at most memoryLimit ({self.memory_limit})",
                )
            )
        if self.cpu_limit is not None and quantity(self.cpu_request) > quantity(self.cpu_limit):
            found.append(
                Problem("cpuRequest", self.cpu_request, f"at most cpuLimit ({self.cpu_limit})")
            )
        if found:
            raise problems_error(found)
        return self


class IamStatement(Model):
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


class TeamEgress(Model):
    """Egress beyond the namespace and DNS: HTTPS (443) only (docs/scheduling.md#s3-egress)."""

    #: HTTPS to these CIDRs (the VPC, for interface endpoints such as ECR and STS).
    https_cidrs: list[str] = []
    #: HTTPS to public IPv4 space (0.0.0.0/0 minus private, link-local and CGNAT ranges): how
    #: pods reach S3. S3's addresses are hundreds of changing prefixes (ip-ranges.json) that a
    #: NetworkPolicy cannot follow, and the gateway endpoint's prefix list is not expressible
    #: in one; the data boundary is the trainer role's IAM (team prefixes only). Off: the team
    #: reaches no S3 (checkpoints to S3, datasets) - only where it needs none.
    s3: bool = True
    #: Allow 443 to anywhere (0.0.0.0/0) incl. cluster-internal; only when the stack says so.
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


class VolcanoQueue(Model):
    """The team's Volcano Queue: capability = namespace limits; guarantee (and deserved) = the
    nominal quota, so its PodGroups pass Volcano's enqueue before their GPU nodes exist; what
    exceeds every queue's guarantee is shared by weight."""

    weight: Annotated[int, Field(ge=1, le=1000)] = 1
    #: nominal = guarantee the team's nominal quota (Σ `quota[]` GPUs, CPU, memory and the
    #: EFA devices of those GPUs); none = no guarantee (only with `scheduling.volcanoEnqueue:
    #: false` and no guarantee on any team: components/analysis/volcano.py).
    guarantee: Literal["nominal", "none"] = "nominal"


class TeamDeploy(Model):
    """Who may deploy the team's job stack (jobs/): GitHub Actions of one repository, through
    the account's GitHub OIDC provider. The platform makes a deploy role (edit rights in the
    team's namespace only) and a preview role (read-only there) per team (docs/training-jobs.md).
    """

    #: `owner/repo` whose workflows may assume the roles.
    github_repo: Annotated[
        str, StringConstraints(pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$", max_length=200)
    ]
    #: Branches whose workflows may deploy (`pulumi up`).
    branches: list[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_./-]+$")]] = ["main"]
    #: GitHub environments whose jobs may deploy (e.g. one with required reviewers for prod).
    environments: list[Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_. -]+$")]] = []

    @model_validator(mode="after")
    def _someone(self) -> TeamDeploy:
        if not self.branches and not self.environments:
            raise problems_error(
                [Problem("branches", [], "at least one branch or environment that may deploy")]
            )
        return self


class TeamConfig(Model):
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
    #: CI identity of the team's job stack; unset = no deploy/preview roles for this team.
    deploy: TeamDeploy | None = None

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        if len(value) > 63 or not DNS_LABEL.match(value):
            raise ValueError(
                "must be a DNS label: at most 63 lowercase letters, digits or '-', "
                "starting and ending with a letter or digit"
            )
        # Whether an add-on of the stack (or Kubernetes) uses it is a cross-area rule: it depends
        # on what the stack installs (components/analysis/addons.py).
        return value

    @model_validator(mode="after")
    def _check(self) -> TeamConfig:
        problems: list[Problem] = []
        seen: dict[str, int] = {}
        for index, entry in enumerate(self.quota):
            if entry.flavor in seen:
                problems.append(
                    Problem(
                        f"quota[{index}]",
                        entry.flavor,
                        f"one entry per GPU class and capacity type (quota[{seen[entry.flavor]}])",
                    )
                )
            seen.setdefault(entry.flavor, index)
        nominal = sum(entry.gpus for entry in self.quota)
        if self.limits.gpus < nominal:
            problems.append(
                Problem(
                    "limits.gpus",
                    self.limits.gpus,
                    f"at least the nominal GPU quota ({nominal}), or Kueue admits pods the "
                    "ResourceQuota then rejects",
                )
            )
        if problems:
            raise problems_error(problems)
        return self
