"""The stack's derived facts, computed once per validated config and read everywhere else.

`stack_facts(cfg)` builds, once for a given `StackConfig` object, the figures several rules and
components need: the GPU capacity per flavor, the node sources, each flavor's provisioner, the
team rules' problems, and per training job (`JobFacts`) its instance types, pod resources and
requests, placement and zone pin, the node sources that admit and fit it, its flavors, quota
problems, checkpoint interval and planned waste, and model-state memory. The rules that derive
them (capacity.py, resources.py, placement.py, fit.py, quota.py, checkpoint.py, memory.py)
take values and never ask for the facts themselves, so this module is their only caller in a
synth; the verdicts built on the facts are kept here too (`StackFacts.once`). Everyone who
needs a fact asks here — the config checks (jobs.py, the team rules),
the will-it-run analysis, the start-up estimate, the training-job plan, the scheduling
component and the job stacks' contract — so a synth computes each once, and the preview, the
rules and what is deployed read the same numbers (the way Kueue's scheduler builds one
flavor assignment per workload and every consumer reads it).

The facts are keyed by the config object's identity: a validated config is frozen, so the
object is its own version. A job that is not one of `cfg.training_jobs` (a test's variant) is
computed on the spot, never cached.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Final, TypeVar, cast

from components import catalog
from components.analysis import capacity, memory, nccl, nodes, quota, readiness
from components.analysis import checkpoint as checkpointing
from components.analysis.fit import SourceFit, fit_sources
from components.analysis.images import ImageSource, image_source
from components.analysis.nccl import NcclHost
from components.analysis.nodes import NodeSource
from components.analysis.placement import Placement, job_placement, zone_pin_index
from components.analysis.readiness import PodsReady
from components.analysis.resources import JobResources, pod_requests, resources_on
from components.config import Problem, StackConfig, TeamConfig, TrainingJobConfig

T = TypeVar("T")

#: Configs whose facts are kept: a synth has one (a job stack two: the platform's and its own);
#: tests build many, and an old one is never asked again.
_KEEP: Final = 16


@dataclass(frozen=True)
class JobFacts:
    """One training job's derived facts, built once per job of the config: what its pods are,
    where they may go, who brings their nodes, and how often it checkpoints. The plan
    (components/training_jobs/plan.py), the will-it-run verdict and the report read these."""

    #: Instance types the pools can launch for its GPU class and capacity types
    #: (capacity.job_instance_types); empty when none does.
    instance_types: tuple[str, ...]
    #: CPU, memory, /dev/shm and EFA devices of one pod, sized for the smallest of those types
    #: (resources.resources_on).
    resources: JobResources
    #: Per-pod requests its manifests carry (resources.pod_requests).
    requests: Mapping[str, float]
    #: Node affinity, tolerations and zone term of its pods (placement.job_placement).
    placement: Placement
    #: The private-subnet (AZ) index a single-zone job would be pinned to; None when its pods
    #: may span zones (placement.zone_pin_index).
    zone_pin: int | None
    #: The node sources whose labels and taints admit its pods, and which of them hold one
    #: (fit.fit_sources).
    fit: SourceFit
    #: The provisioners of the flavors it may be placed on (capacity.flavor_provisioners).
    provisioners: frozenset[catalog.Provisioner]
    #: The Kueue ResourceFlavors its team's ClusterQueue offers it, in quota order: the team's
    #: quota entries of its GPU class and capacity types (empty for an unknown team).
    flavors: tuple[str, ...]
    #: Seconds between checkpoints: the job's own, else Young/Daly from its save-blocking time
    #: and MTBF (checkpoint.young_daly_interval_s), unrounded.
    checkpoint_interval_s: float
    #: Expected fraction of wall time lost to checkpoint saves and rework after failures at that
    #: interval (checkpoint.wasted_fraction).
    planned_waste: float
    #: Parameters + gradients + optimizer state per rank in GiB; None without `modelParameters`
    #: (memory.model_state_gib).
    model_state_gib: float | None
    #: Where its image digest comes from (images.image_source); None for a tag no deploy can
    #: resolve (a config error).
    image: ImageSource | None


@dataclass
class StackFacts:
    """The derived facts of one validated config (built lazily, each at most once)."""

    cfg: StackConfig
    _capacity: dict[tuple[str, catalog.CapacityType], int] | None = None
    _provisioners: dict[tuple[str, catalog.CapacityType], catalog.Provisioner] | None = None
    _checked: frozenset[tuple[str, catalog.CapacityType]] | None = None
    _sources: tuple[NodeSource, ...] | None = None
    _jobs: dict[int, JobFacts] = field(default_factory=dict)
    _quota: dict[int, tuple[Problem, ...]] = field(default_factory=dict)
    _team_problems: tuple[Problem, ...] | None = None
    _judged: dict[str, object] = field(default_factory=dict)
    _positions: dict[int, int] | None = None
    _teams: dict[str, TeamConfig] | None = None

    @property
    def capacity(self) -> Mapping[tuple[str, catalog.CapacityType], int]:
        """GPUs each (GPU class, capacity type) flavor can provide (capacity.gpu_capacity)."""
        if self._capacity is None:
            self._capacity = capacity.gpu_capacity(self.cfg)
        return self._capacity

    @property
    def provisioners(self) -> Mapping[tuple[str, catalog.CapacityType], catalog.Provisioner]:
        """The one provisioner of each flavor (capacity.flavor_provisioners)."""
        if self._provisioners is None:
            self._provisioners = capacity.flavor_provisioners(self.cfg)
        return self._provisioners

    def _index(self, job: TrainingJobConfig) -> int | None:
        """`job`'s position in the config, None for a job that is not one of its own (a map
        built once: a scan per lookup would make a synth quadratic in jobs)."""
        if self._positions is None:
            self._positions = {id(j): i for i, j in enumerate(self.cfg.training_jobs)}
        index = self._positions.get(id(job))
        return index if index is not None and self.cfg.training_jobs[index] is job else None

    def team(self, name: str) -> TeamConfig | None:
        """The team called `name` (the first, as the config check reports duplicates), from a
        map built once."""
        if self._teams is None:
            self._teams = {t.name: t for t in reversed(self.cfg.teams)}
        return self._teams.get(name)

    def job(self, job: TrainingJobConfig) -> JobFacts:
        """The derived facts of one job (JobFacts), once per job of the config."""
        index = self._index(job)
        found = self._jobs.get(index) if index is not None else None
        if found is None:
            found = self._job_facts(job)
            if index is not None:
                self._jobs[index] = found
        return found

    def _job_facts(self, job: TrainingJobConfig) -> JobFacts:
        types = tuple(capacity.job_instance_types(self.cfg, job))
        pod = resources_on(job, types)
        checkpoint = job.checkpoint
        interval = (
            float(checkpoint.interval_seconds)
            if checkpoint.interval_seconds is not None
            else checkpointing.young_daly_interval_s(checkpoint.blocking, checkpoint.mtbf_seconds)
        )
        requests = pod_requests(job, pod)
        where = job_placement(job, pod.efa_devices)
        team = self.team(job.team)
        quota_entries = team.quota if team is not None else ()
        return JobFacts(
            instance_types=types,
            resources=pod,
            requests=requests,
            placement=where,
            zone_pin=zone_pin_index(self.cfg, job, pod.efa_devices),
            fit=fit_sources(self.sources, where, requests),
            provisioners=frozenset(
                self.provisioners[(job.gpu_class, c)]
                for c in job.capacity_types
                if (job.gpu_class, c) in self.provisioners
            ),
            flavors=tuple(
                entry.flavor
                for entry in quota_entries
                if entry.gpu_class == job.gpu_class and entry.capacity_type in job.capacity_types
            ),
            checkpoint_interval_s=interval,
            planned_waste=checkpointing.wasted_fraction(
                interval, checkpoint.blocking, checkpoint.mtbf_seconds, checkpoint.restart_seconds
            ),
            model_state_gib=memory.model_state_gib(job, job.world_size),
            image=image_source(self.cfg, job),
        )

    @property
    def provisioning_checked(self) -> frozenset[tuple[str, catalog.CapacityType]]:
        """Flavors behind Kueue's ProvisioningRequest check (capacity.provisioning_checked)."""
        if self._checked is None:
            self._checked = capacity.provisioning_checked(self.cfg)
        return self._checked

    @property
    def pods_ready(self) -> PodsReady:
        """Kueue's waitForPodsReady timeouts and what they derive from (readiness.pods_ready)."""
        return readiness.pods_ready(self.cfg, self.sources)

    @property
    def nccl_host(self) -> NcclHost | None:
        """Where the NCCL test's pods land and what each requests (nccl.nccl_host)."""
        return nccl.nccl_host(self.cfg, self.sources)

    @property
    def sources(self) -> tuple[NodeSource, ...]:
        """Every managed group and Karpenter pool a GPU pod can land on (nodes.node_sources)."""
        if self._sources is None:
            self._sources = tuple(nodes.node_sources(self.cfg))
        return self._sources

    def resources(self, job: TrainingJobConfig) -> JobResources:
        """CPU, memory, /dev/shm and EFA devices of one pod of `job` (JobFacts.resources)."""
        return self.job(job).resources

    @property
    def team_problems(self) -> tuple[Problem, ...]:
        """The `teams` rules over the pool capacity (quota.check_teams)."""
        if self._team_problems is None:
            self._team_problems = tuple(quota.check_teams(self.cfg, self.capacity))
        return self._team_problems

    def quota_problems(self, index: int, job: TrainingJobConfig, team: TeamConfig) -> list[Problem]:
        """`job` (at `trainingJobs[index]`, of `team`) against its team's quota, the namespace
        limit and the pools' capacity (quota.job_quota_problems); once per job of the config —
        the config check and the verdict both ask."""
        own = self._index(job) == index and self.team(team.name) is team
        found = self._quota.get(index) if own else None
        if found is None:
            found = tuple(
                quota.job_quota_problems(
                    f"trainingJobs[{index}]", job, team, self.capacity, self.resources(job)
                )
            )
            if own:
                self._quota[index] = found
        return list(found)

    def once(self, name: str, compute: Callable[[StackConfig], T]) -> T:
        """`compute(cfg)` the first time `name` is asked for, the kept result after: for the
        judgements built on these facts in modules above this one (willrun.verdicts), which
        the config check and the report both read."""
        if name not in self._judged:
            self._judged[name] = compute(self.cfg)
        return cast(T, self._judged[name])


_FACTS: OrderedDict[int, StackFacts] = OrderedDict()


def stack_facts(cfg: StackConfig) -> StackFacts:
    """The facts of `cfg`, built on first use and kept with the config they belong to."""
    facts = _FACTS.get(id(cfg))
    if facts is None or facts.cfg is not cfg:
        facts = StackFacts(cfg)
        _FACTS[id(cfg)] = facts
        while len(_FACTS) > _KEEP:
            _FACTS.popitem(last=False)
    else:
        _FACTS.move_to_end(id(cfg))
    return facts
