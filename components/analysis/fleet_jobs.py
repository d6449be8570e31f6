"""Judging a job submitted to a fleet's manager (docs/fleet.md): what MultiKueue cannot carry,
every worker's own judgement of the job (the platform's three phases on the worker's config),
its pod pinned to what every capable worker offers, its regions pinned to the workers that can
run it, and Kueue's LimitRange check on the manager's copy. The fleet itself — what the manager
reads of its workers and every way it can be miswired — is components/analysis/fleet.py; why
MultiKueue needs each rule is in that module's docstring.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from components.analysis import judge, validate
from components.analysis.costs import Replication, replication
from components.analysis.facts import JobFacts, StackFacts, build
from components.analysis.fleet import FleetFacts, Worker
from components.analysis.fleet_trainer import job_image_problems
from components.analysis.willrun import Verdict, limit_range_problems
from components.config import Problem, TrainingJobConfig


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
    # Its image (its own or the fleet's trainer): admitted by every worker it may land on.
    problems += job_image_problems(
        fleet.workers, job.image or fleet.trainer_image, index, job.regions
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
