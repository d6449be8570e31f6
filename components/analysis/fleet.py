"""A fleet's facts and rules (docs/fleet.md): what the manager reads of its workers, every way
the fleet can be miswired, the manager's queues, and whether a job can run — on which workers.

The manager reads each worker's platform stack through a StackReference: `fleetWorker` (its
region, VPC, endpoint, Kueue's job kinds) and `jobPlatform` (the contract a job stack reads:
teams, buckets, trainer, and the platform's whole config without jobs). From that config this
module rebuilds each worker's `StackFacts` (facts.build, with the worker's region on its node
sources) and judges a job on every worker with the platform's own three phases — exactly the
judgement the worker's own stack would give the job — so "will it run" names the regions that
can run a job and, for the others, why not (quota, GPU class, EFA, reservations, region pins).

What MultiKueue does with a job, at the pinned Kueue v0.19.2 (kubernetes-sigs/kueue,
pkg/controller/admissionchecks/multikueue/workload.go, site/content/en/docs/concepts/
multikueue.md), and what follows for the rules here:
- the manager's workload needs quota on the manager first, then a copy goes to every connected
  worker (AllAtOnce) and the first worker to admit it wins; the copy keeps the workload's
  namespace and LocalQueue name, so every worker has each team's namespace and LocalQueue;
- only the job object is mirrored (an adapter per job kind: batch Job, TrainJob, ...; none for
  Volcano Jobs). The headless Service of a native multi-node job, a job's DeepSpeed ConfigMap
  and its ExternalSecrets stay on the manager, so a fleet job may depend on none of them;
- the copy is the manager's object: its image, bucket and everything in its pod template are
  the same in every region. A fleet job therefore reads its region's buckets from the worker's
  `gpu-platform-data` ConfigMap, runs the reference trainer through the worker's own
  ClusterTrainingRuntime (a TrainJob without an image), and its pod size is pinned to what
  every worker that can run it offers.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Final

from components import catalog
from components.analysis import judge, validate
from components.analysis.costs import PlatformCosts, Replication, manager_costs, replication
from components.analysis.facts import JobFacts, StackFacts, build
from components.analysis.quota import worker_quota
from components.analysis.readiness import PodsReady, minutes
from components.analysis.willrun import Verdict, limit_range_problems
from components.config import (
    ConfigError,
    FlavorQuota,
    Problem,
    StackConfig,
    TeamConfig,
    TrainingJobConfig,
    parse,
    trainer_runtime_names,
)
from components.config.errors import problem_lines
from components.config.fleet import FleetManagerConfig, WorkerRef
from components.config.fleet_stack import fleet_lines

#: The `fleetWorker` revision this manager reads (components/platform/fleet/worker.py).
WORKER_REVISION: Final = 1
#: Margin of the manager's waitForPodsReady over its slowest worker's: a worker evicts first,
#: after its own timeout, and the manager sees the remote status a watch event later
#: (multikueue workload.go copies it back); the manager's own eviction would only cut that
#: short. [inference: no upstream figure for the status round trip; five minutes covers a
#: reconnect within the first backoff steps (multikueuecluster.go retryAfter: 5 s .. 80 s).]
MANAGER_READY_MARGIN_S: Final = 300


@dataclass(frozen=True)
class WorkerInput:
    """What the manager read of one worker stack, plain: `fleetWorker` and `jobPlatform`."""

    ref: WorkerRef
    facts: Mapping[str, Any] | None
    platform: Mapping[str, Any] | None


@dataclass(frozen=True)
class Worker:
    """One worker as the manager knows it: its exports and its rebuilt platform facts."""

    index: int
    ref: WorkerRef
    facts: Mapping[str, Any]
    platform: Mapping[str, Any]
    stack: StackFacts

    @property
    def name(self) -> str:
        return self.ref.name

    @property
    def region(self) -> str:
        return str(self.facts["region"])

    @property
    def cfg(self) -> StackConfig:
        return self.stack.cfg

    @property
    def label(self) -> str:
        """How the report names it: `use1 (us-east-1)`."""
        return f"{self.name} ({self.region})"

    @property
    def trainer_image(self) -> str | None:
        image = self.platform.get("trainerImage")
        return str(image) if isinstance(image, str) and "@" in image else None


@dataclass(frozen=True)
class FleetFacts:
    """The fleet as its manager builds it: config, region, workers, and the manager's teams
    (each worker's team with the quota of every worker added up, per flavor)."""

    cfg: FleetManagerConfig
    region: str
    workers: tuple[Worker, ...]
    teams: tuple[TeamConfig, ...]
    #: (GPU class, capacity type) of every manager flavor, in a ClusterQueue's order.
    flavors: tuple[tuple[str, catalog.CapacityType], ...]
    pods_ready: PodsReady
    #: The manager's own cost figures, as report.md renders them (costs.manager_costs).
    costs: PlatformCosts
    #: (team, flavor) -> each worker's nominal GPUs of it, what `teams` adds up
    #: (quota.worker_quota).
    worker_quota: Mapping[tuple[str, str], tuple[tuple[str, int], ...]]

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(w.region for w in self.workers))

    @property
    def replication_pairs(self) -> int:
        """Ordered worker pairs: S3 replicates checkpoints and datasets from every worker to
        every other (components/platform/fleet/links.py)."""
        return len(self.workers) * (len(self.workers) - 1)


def _stack_problem(index: int, ref: WorkerRef, allowed: str) -> Problem:
    return Problem(f"workers[{index}].stack", ref.stack, allowed)


def read_workers(
    cfg: FleetManagerConfig, region: str, inputs: Sequence[WorkerInput], contract: str
) -> FleetFacts:
    """The fleet's facts from what the manager read, or `ConfigError` (keys in the manager's
    namespace) for every way the fleet is miswired; `contract`: the `jobPlatform` version this
    revision reads (contract.platform_facts.contract_version)."""
    problems: list[Problem] = []
    workers: list[Worker] = []
    for index, given in enumerate(inputs):
        worker, found = _worker(cfg, index, given, contract)
        problems += found
        if worker is not None:
            workers.append(worker)
    if not problems:
        problems += _network_problems(cfg, workers)
        problems += _name_problems(workers)
        problems += _team_problems(workers)
        names = sorted(t.name for t in workers[0].cfg.teams)
        problems += [
            Problem(f"teamDeploy.{team}", team, f"a team of the fleet ({', '.join(names)})")
            for team in cfg.team_deploy
            if team not in names
        ]
    if problems:
        raise ConfigError(fleet_lines(problem_lines(problems)))
    teams = manager_teams(workers)
    return FleetFacts(
        cfg=cfg,
        region=region,
        workers=tuple(workers),
        teams=teams,
        flavors=manager_flavors(teams),
        pods_ready=manager_pods_ready(workers),
        costs=manager_costs(cfg.system_nodes),
        worker_quota=worker_quota(teams, [(w.name, w.cfg.teams) for w in workers]),
    )


def _worker(
    cfg: FleetManagerConfig, index: int, given: WorkerInput, contract: str
) -> tuple[Worker | None, list[Problem]]:
    """One worker's facts, or why the manager cannot take it."""
    ref, facts, platform = given.ref, given.facts, given.platform
    if not isinstance(facts, Mapping) or not isinstance(platform, Mapping):
        return None, [
            _stack_problem(
                index,
                ref,
                "a deployed platform stack with `fleet` set (it exports no fleetWorker / "
                "jobPlatform: set gpu-platform:fleet and `pulumi up` it first)",
            )
        ]
    found: list[Problem] = []
    if facts.get("version") != WORKER_REVISION:
        found.append(
            _stack_problem(
                index,
                ref,
                f"fleetWorker revision {WORKER_REVISION} (it has {facts.get('version')}): "
                "deploy the worker from this repository's revision",
            )
        )
    if facts.get("fleet") != cfg.name:
        found.append(
            _stack_problem(
                index, ref, f"a worker of fleet {cfg.name!r} (it serves {facts.get('fleet')!r})"
            )
        )
    if platform.get("version") != contract:
        found.append(
            _stack_problem(
                index,
                ref,
                f"jobPlatform version {contract} (it has {platform.get('version')}): deploy "
                "the worker from this repository's revision",
            )
        )
    missing = [
        f for f in catalog.MULTIKUEUE_FRAMEWORKS if f not in facts.get("kueueFrameworks", [])
    ]
    if missing:
        found.append(
            _stack_problem(
                index,
                ref,
                f"a worker whose Kueue manages {', '.join(missing)} (the job kinds the manager "
                "dispatches: their CRDs, controllers and Kueue integrations)",
            )
        )
    runtimes = sorted(set(trainer_runtime_names()) ^ set(platform.get("trainingRuntimes") or ()))
    if runtimes:
        found.append(
            _stack_problem(
                index,
                ref,
                "a worker with the manager's ClusterTrainingRuntimes (MultiKueue copies no "
                "runtime, and a TrainJob's pods come from the worker's: "
                "kubernetes-sigs/kueue@v0.19.2 site/content/en/docs/tasks/run/multikueue/"
                f"trainjob.md L39-50); these differ: {', '.join(runtimes)}",
            )
        )
    if found:
        return None, found
    try:
        stack_cfg = parse(dict(platform["platformConfig"]))
    except ConfigError as exc:
        return None, [
            _stack_problem(index, ref, "a config this revision reads: " + "; ".join(exc.lines))
        ]
    stack = build(stack_cfg, region=str(facts["region"]))
    return Worker(index, ref, facts, platform, stack), []


def _network_problems(cfg: FleetManagerConfig, workers: Sequence[Worker]) -> list[Problem]:
    """VPC peering routes by CIDR: the manager's and every worker's must not overlap (an
    overlapping peer is refused by EC2, and routes could not tell the two apart)."""
    problems: list[Problem] = []
    manager = ipaddress.IPv4Network(cfg.network.vpc_cidr)
    seen: list[tuple[str, ipaddress.IPv4Network]] = [("the manager (network.vpcCidr)", manager)]
    for worker in workers:
        cidr = ipaddress.IPv4Network(str(worker.facts["vpcCidr"]))
        clash = next((name for name, net in seen if net.overlaps(cidr)), None)
        if clash is not None:
            problems.append(
                _stack_problem(
                    worker.index,
                    worker.ref,
                    f"a VPC whose CIDR overlaps no other of the fleet ({cidr} overlaps {clash})",
                )
            )
        seen.append((f"worker {worker.name}", cidr))
    return problems


def _name_problems(workers: Sequence[Worker]) -> list[Problem]:
    """Names one AWS account holds once: cluster names (IAM role names derive from them) and
    bucket names (S3's namespace is global)."""
    problems: list[Problem] = []
    seen: dict[str, str] = {}
    for worker in workers:
        names = [f"cluster {worker.cfg.cluster.name}"] + [
            f"bucket {bucket}" for bucket in sorted((worker.platform.get("buckets") or {}).values())
        ]
        for name in names:
            if name in seen:
                problems.append(
                    _stack_problem(
                        worker.index,
                        worker.ref,
                        f"a worker whose {name} no other worker uses (worker {seen[name]} has it: "
                        "set its cluster.name or storage.bucketPrefix apart)",
                    )
                )
            seen.setdefault(name, worker.name)
    return problems


def _team_problems(workers: Sequence[Worker]) -> list[Problem]:
    """Every worker has the fleet's teams with the same namespace, LocalQueue and group: the
    manager's workload is mirrored into the same namespace and LocalQueue name, and a team's
    members act in the same group everywhere."""
    first = workers[0]
    expected = {t.name: (t.namespace, t.group) for t in first.cfg.teams}
    problems: list[Problem] = []
    for worker in workers[1:]:
        have = {t.name: (t.namespace, t.group) for t in worker.cfg.teams}
        for team in sorted(set(expected) | set(have)):
            if expected.get(team) != have.get(team):
                problems.append(
                    _stack_problem(
                        worker.index,
                        worker.ref,
                        f"a worker whose team {team!r} matches worker {first.name}'s "
                        f"(namespace, LocalQueue and group: {expected.get(team)} there, "
                        f"{have.get(team)} here)",
                    )
                )
    return problems


def _sum_limit(values: Sequence[int | None]) -> int | None:
    """Σ of limits where every worker sets one; one unbounded worker leaves it unbounded."""
    return None if any(v is None for v in values) else sum(v or 0 for v in values)


def manager_teams(workers: Sequence[Worker]) -> tuple[TeamConfig, ...]:
    """The fleet's teams on the manager: the first worker's team with, per flavor, every
    worker's quota added up — "the quota in the manager cluster should equal the total quota
    available in all worker clusters" (Kueue v0.19.2 concepts/multikueue.md)."""
    out: list[TeamConfig] = []
    for team in workers[0].cfg.teams:
        entries: dict[tuple[str, catalog.CapacityType], list[FlavorQuota]] = {}
        for worker in workers:
            mine = next(t for t in worker.cfg.teams if t.name == team.name)
            for entry in mine.quota:
                entries.setdefault((entry.gpu_class, entry.capacity_type), []).append(entry)
        quota = [
            FlavorQuota(
                gpu_class=gpu_class,
                capacity_type=capacity_type,
                gpus=sum(e.gpus for e in group),
                cpu=sum(e.cpu for e in group),
                memory_gib=sum(e.memory_gib for e in group),
                borrowing_limit_gpus=_sum_limit([e.borrowing_limit_gpus for e in group]),
                lending_limit_gpus=_sum_limit([e.lending_limit_gpus for e in group]),
            )
            for (gpu_class, capacity_type), group in entries.items()
        ]
        out.append(team.model_copy(update={"quota": quota, "deploy": None}))
    return tuple(out)


def manager_flavors(teams: Sequence[TeamConfig]) -> tuple[tuple[str, catalog.CapacityType], ...]:
    """The flavors any team's quota names, reserved, spot, on-demand within a GPU class."""
    found = {(q.gpu_class, q.capacity_type) for team in teams for q in team.quota}
    return tuple(sorted(found, key=lambda f: (f[0], catalog.CAPACITY_ORDER[f[1]])))


def manager_pods_ready(workers: Sequence[Worker]) -> PodsReady:
    """The manager's waitForPodsReady: its slowest worker's plus a margin, so a worker that
    knows its own provisioning path evicts first (MANAGER_READY_MARGIN_S)."""
    slowest = max(w.stack.pods_ready.timeout_s for w in workers)
    timeout = minutes(slowest + MANAGER_READY_MARGIN_S)
    return PodsReady(slowest + MANAGER_READY_MARGIN_S, None, timeout, timeout)


# --- jobs ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Region:
    """A fleet job on one worker: whether that worker can run it, and why not."""

    worker: str
    region: str
    runnable: bool
    problems: tuple[Problem, ...] = ()
    job: JobFacts | None = None
    verdict: Verdict | None = None
    stack: StackFacts | None = None

    @property
    def label(self) -> str:
        return f"{self.worker} ({self.region})"


@dataclass(frozen=True)
class FleetJob:
    """A job submitted to the manager: its own problems under MultiKueue, the job as rendered
    (pod size pinned to what every capable worker offers), and each worker's answer."""

    index: int
    job: TrainingJobConfig
    problems: tuple[Problem, ...] = ()
    regions: tuple[Region, ...] = ()
    #: The regions the analysis pinned a job to that named none, because only the workers there
    #: can run it (region_pin); empty when the job named its regions or runs everywhere.
    auto_pinned: tuple[str, ...] = ()
    #: Its checkpoints copied to the other workers' regions, sized on its home worker
    #: (costs.replication); None for a job refused before any worker judged it.
    replication: Replication | None = None

    @property
    def key(self) -> str:
        return f"trainingJobs[{self.index}]"

    @property
    def runnable_on(self) -> tuple[Region, ...]:
        return tuple(r for r in self.regions if r.runnable)

    @property
    def home(self) -> Region | None:
        """The worker whose facts the job's objects are planned from (the first that can run
        it; every capable worker gets the same pinned pod)."""
        return next(iter(self.runnable_on), None)


def fleet_job_problems(fleet: FleetFacts, index: int, job: TrainingJobConfig) -> list[Problem]:
    """What MultiKueue cannot carry (module docstring), each naming its key."""
    key = f"trainingJobs[{index}]"
    problems: list[Problem] = []
    if job.launcher == "volcano" or job.scheduler == "volcano":
        problems.append(
            Problem(
                f"{key}.launcher" if job.launcher == "volcano" else f"{key}.scheduler",
                job.launcher if job.launcher == "volcano" else job.scheduler,
                "kubeflow (or native) with scheduler kueue: Kueue's MultiKueue has no adapter "
                "for Volcano Jobs (no vcjob integration at v0.19.2, and its JobSpec has no "
                "managedBy), so a Volcano job never leaves the cluster it is created in",
            )
        )
    if job.launcher == "native" and job.nodes > 1:
        problems.append(
            Problem(
                f"{key}.launcher",
                "native",
                "kubeflow for a multi-node fleet job: MultiKueue mirrors the Job, not the "
                "headless Service its pods rendezvous through; a TrainJob's JobSet makes its "
                "own on the worker",
            )
        )
    if job.launcher == "native" and job.image is None:
        problems.append(
            Problem(
                f"{key}.image",
                None,
                "an image by digest, or launcher kubeflow: each worker builds its own reference "
                "trainer (its region's registry, its key), and only a TrainJob without an image "
                "runs the worker's own through its ClusterTrainingRuntime",
            )
        )
    if job.secrets or job.secret_env:
        problems.append(
            Problem(
                f"{key}.secrets" if job.secrets else f"{key}.secretEnv",
                [s.name for s in job.secrets] or [s.name for s in job.secret_env],
                "left out of a fleet job: its ExternalSecrets would be created on the manager "
                "and MultiKueue mirrors only the job",
            )
        )
    unknown = [r for r in job.regions or [] if r not in fleet.regions]
    if unknown:
        problems.append(
            Problem(
                f"{key}.regions",
                job.regions,
                f"regions of the fleet's workers ({', '.join(fleet.regions)})",
            )
        )
    if job.checkpoint.volume and job.checkpoint.s3_prefix is None and not _one_region(job, fleet):
        problems.append(
            Problem(
                f"{key}.checkpoint",
                {"volume": True, "s3Prefix": None},
                "an s3Prefix (the fleet's checkpoints buckets replicate between regions), or "
                "regions: [one region]: a checkpoint on a region's RWX volume is not in any "
                "other, so a job dispatched again elsewhere would start over",
            )
        )
    return problems


def _one_region(job: TrainingJobConfig, fleet: FleetFacts) -> bool:
    return (job.regions is not None and len(job.regions) == 1) or len(fleet.regions) == 1


def _rekeyed(problems: Sequence[Problem], index: int, label: str) -> tuple[Problem, ...]:
    """A worker's findings on the job (judged as its trainingJobs[0]) keyed like the job
    stack's entry, naming the worker."""
    return tuple(
        Problem(
            p.key.replace("trainingJobs[0]", f"trainingJobs[{index}]", 1),
            p.value,
            f"{p.allowed} [worker {label}]",
        )
        for p in problems
        if p.key.startswith("trainingJobs[")
    )


def judge_on(worker: Worker, index: int, job: TrainingJobConfig) -> Region:
    """`job` on one worker: the platform's own phases on the worker's config with this job."""
    if job.regions is not None and worker.region not in job.regions:
        return Region(
            worker.name,
            worker.region,
            False,
            (
                Problem(
                    f"trainingJobs[{index}].regions",
                    job.regions,
                    f"pinned elsewhere [worker {worker.label}]",
                ),
            ),
        )
    cfg = worker.cfg.model_copy(update={"training_jobs": [job]})
    found = _rekeyed(validate(cfg), index, worker.label)
    if found:
        return Region(worker.name, worker.region, False, found)
    stack = build(cfg, region=worker.region)
    judgement = judge(stack)
    problems = _rekeyed(judgement.problems, index, worker.label)
    verdict = next((v for v in judgement.verdicts if v.key == "trainingJobs[0]"), None)
    return Region(worker.name, worker.region, not problems, problems, stack.jobs[0], verdict, stack)


def pinned(job: TrainingJobConfig, capable: Sequence[JobFacts]) -> TrainingJobConfig:
    """The job with its pod size explicit: the least CPU, memory and /dev/shm, and the fewest
    EFA devices, of the pods every capable worker would give it — the one pod template the
    manager mirrors fits all of them."""
    if not capable:
        return job
    efa = min(jf.resources.efa_devices for jf in capable)
    return job.model_copy(
        update={
            "cpu": min(jf.resources.cpu for jf in capable),
            "memory_gib": min(jf.resources.memory_gib for jf in capable),
            "shm_gib": min(jf.resources.shm_gib for jf in capable),
            "efa": efa > 0,
            "efa_devices": efa or None,
        }
    )


def judge_fleet_job(fleet: FleetFacts, index: int, job: TrainingJobConfig) -> FleetJob:
    """One job submitted to the manager: its MultiKueue rules, then every worker's judgement
    of it as submitted, then of it with its pod size pinned (what is rendered)."""
    problems = fleet_job_problems(fleet, index, job)
    if problems:
        return FleetJob(index, job, tuple(problems))
    first = [judge_on(worker, index, job) for worker in fleet.workers]
    capable = [r.job for r in first if r.runnable and r.job is not None]
    pin, pin_problems = region_pin(job, index, first)
    if pin_problems:
        return FleetJob(index, job, tuple(pin_problems), tuple(first))
    final = pinned(job, capable)
    if pin:
        final = final.model_copy(update={"regions": list(pin)})
    regions = tuple(judge_on(worker, index, final) for worker in fleet.workers)
    # Kueue judges the manager's copy of the Workload against the manager's namespace first:
    # a refusal there is never dispatched (limit_range.py).
    manager_team = next(t for t in fleet.teams if t.namespace == _team_namespace(fleet, regions))
    on_manager = [
        p
        for r in regions
        if r.runnable and r.job is not None
        for p in limit_range_problems(r.job, manager_team, where="the fleet's manager")
    ][:1]
    if on_manager:
        rekeyed = tuple(
            Problem(
                p.key.replace("trainingJobs[0]", f"trainingJobs[{index}]", 1), p.value, p.allowed
            )
            for p in on_manager
        )
        return FleetJob(index, final, rekeyed, regions, pin)
    judged = FleetJob(index, final, (), regions, pin)
    home = judged.home.job if judged.home is not None else None
    others = len(fleet.workers) - 1
    return replace(
        judged,
        replication=replication(home.model_state_gib, home.checkpoint_interval_s, others)
        if home is not None
        else Replication(others, None, None),
    )


def region_pin(
    job: TrainingJobConfig, index: int, judged: Sequence[Region]
) -> tuple[tuple[str, ...], list[Problem]]:
    """The regions a job that names none must be pinned to, and why it cannot be.

    MultiKueue creates the job's Workload on every connected worker and the first to admit it
    runs it (kubernetes-sigs/kueue@v0.19.2 pkg/controller/admissionchecks/multikueue/
    workload.go: AllAtOnce nominates every worker). A worker that cannot run the job may still
    admit it — Kueue leaves EFA out of quota, never sees an admission policy or a registry
    — and then it never runs there. So a job only some workers can run is pinned to their
    regions (a required node affinity on topology.kubernetes.io/region, which every worker's
    flavors carry: Kueue on another region's worker finds no flavor), or refused when a region
    pin cannot tell the workers apart (a worker that cannot run it shares a region with one
    that can)."""
    if job.regions is not None:
        return (), []
    able = sorted({r.region for r in judged if r.runnable})
    unable = [r for r in judged if not r.runnable]
    if not able or not unable:
        return (), []
    sharing = [r for r in unable if r.region in able]
    return (
        (
            (),
            [
                Problem(
                    f"trainingJobs[{index}].regions",
                    None,
                    f"a fleet whose workers in {r.region} can all run it: worker {r.label} cannot "
                    f"({'; '.join(p.allowed for p in r.problems)}), and a region pin cannot keep "
                    "MultiKueue from dispatching it there",
                )
                for r in sharing
            ],
        )
        if sharing
        else (tuple(able), [])
    )


def _team_namespace(fleet: FleetFacts, regions: Sequence[Region]) -> str:
    """The namespace of the job's team (the same on every worker: read_workers checks it)."""
    for region in regions:
        if region.job is not None:
            return region.job.team.namespace
    return fleet.teams[0].namespace


def fleet_job_errors(judged: Sequence[FleetJob]) -> list[Problem]:
    """The problems that stop a fleet job stack: a job's own, or every worker's when none can
    run it (a job some worker can run is valid; the report names the others)."""
    out: list[Problem] = []
    for fj in judged:
        if fj.problems:
            out += fj.problems
        elif not fj.runnable_on:
            out += [p for r in fj.regions for p in r.problems]
    return out


@dataclass(frozen=True)
class FleetJudgement:
    """Every job of a job stack on the fleet."""

    jobs: tuple[FleetJob, ...] = field(default_factory=tuple)

    @property
    def problems(self) -> tuple[Problem, ...]:
        return tuple(fleet_job_errors(self.jobs))


def judge_fleet_jobs(fleet: FleetFacts, jobs: Sequence[TrainingJobConfig]) -> FleetJudgement:
    """Every job of a job stack submitted to the manager."""
    return FleetJudgement(tuple(judge_fleet_job(fleet, i, job) for i, job in enumerate(jobs)))
