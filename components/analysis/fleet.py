"""A fleet's facts and rules (docs/fleet.md): what the manager reads of its workers, every way
the fleet can be miswired, the manager's queues, and whether a job can run — on which workers.

The manager reads each worker's platform stack through a StackReference: `fleetWorker` (its
region, VPC, endpoint, Kueue's job kinds) and `jobPlatform` (the contract a job stack reads:
teams, buckets, trainer, and the platform's whole config without jobs), each parsed into its
model where it is read (components/contract/fleet_worker.py `WorkerContract`, job_platform.py
`PlatformContract`; another version or shape is refused there). From that config this
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
  `gpu-platform-data` ConfigMap, runs the fleet's one trainer by the same reference everywhere
  (components/analysis/fleet_trainer.py), and its pod size is pinned to what every worker that
  can run it offers;
- a worker recomputes a TrainJob's pod sets from its own runtime and a worker may refuse the
  mirrored job at admission: every runtime must render the manager's containers, every worker
  admit the fleet's trainer and a job's image (components/analysis/fleet_trainer.py says why).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from pydantic import JsonValue

from components import catalog
from components.analysis.addons import allowed, manager_installed, reserved
from components.analysis.capacity import FlavorCommitment, flavor_commitments
from components.analysis.costs import PlatformCosts, manager_costs
from components.analysis.facts import StackFacts, build
from components.analysis.fleet_trainer import (
    FleetTrainer,
    admission_refusal,
    parse_trainer,
    trainer_problems,
)
from components.analysis.quota import worker_quota
from components.analysis.readiness import PodsReady, minutes
from components.config import (
    ConfigError,
    FlavorQuota,
    Problem,
    StackConfig,
    TeamConfig,
    trainer_runtime_names,
)
from components.config.errors import problem_lines
from components.config.fleet import FleetManagerConfig, WorkerRef
from components.config.fleet_stack import fleet_lines
from components.config.teams import ResourceQuota
from components.contract.fleet_worker import WorkerContract, WorkerTrainer
from components.contract.job_platform import PlatformContract

#: Margin of the manager's waitForPodsReady over its slowest worker's: a worker evicts first,
#: after its own timeout, and the manager sees the remote status a watch event later
#: (multikueue workload.go copies it back); the manager's own eviction would only cut that
#: short. [inference: no upstream figure for the status round trip; five minutes covers a
#: reconnect within the first backoff steps (multikueuecluster.go retryAfter: 5 s .. 80 s).]
MANAGER_READY_MARGIN_S: Final = 300


@dataclass(frozen=True)
class WorkerInput:
    """What the manager read of one worker stack, parsed where it was read
    (components/platform/fleet/reading.py `worker_input`): its `fleetWorker` and `jobPlatform`,
    None where the stack exports none; `unreadable`: why an output it exports could not be
    taken (another version or shape: components/contract/schema.py `parse_contract`)."""

    ref: WorkerRef
    fleet_worker: WorkerContract | None
    job_platform: PlatformContract | None
    unreadable: tuple[str, ...] = ()


@dataclass(frozen=True)
class Worker:
    """One worker as the manager knows it: its exports and its rebuilt platform facts."""

    index: int
    ref: WorkerRef
    fleet_worker: WorkerContract
    job_platform: PlatformContract
    stack: StackFacts

    @property
    def name(self) -> str:
        return self.ref.name

    @property
    def region(self) -> str:
        return self.fleet_worker.region

    @property
    def cfg(self) -> StackConfig:
        return self.stack.cfg

    @property
    def label(self) -> str:
        """How the report names it: `use1 (us-east-1)`."""
        return f"{self.name} ({self.region})"

    @property
    def stack_ref(self) -> str:
        """The worker's stack as the manager's config names it (`workers[i].stack`)."""
        return self.ref.stack

    @property
    def trainer_image(self) -> str | None:
        image = self.job_platform.trainer_image
        return image if image is not None and "@" in image else None

    @property
    def account_id(self) -> str:
        return self.job_platform.account_id

    @property
    def trainer_block(self) -> WorkerTrainer:
        """`fleetWorker.trainer`: its trainer home, replicas, signing key, runtimes."""
        return self.fleet_worker.trainer

    @property
    def runtime_pod_sets(self) -> Mapping[str, JsonValue]:
        """What Kueue compares of this worker's ClusterTrainingRuntimes, as it rendered them
        (`fleetWorker.trainer.runtimes`: components/training_jobs/manifests.py)."""
        return self.trainer_block.pod_sets()

    @property
    def fleet_trainer(self) -> FleetTrainer | None:
        """The trainer as this worker's admission knows it: its home's, where it runs one."""
        if not self.trainer_block.home:
            return None
        return parse_trainer(self.trainer_image, self.trainer_block.signing_public_key)

    def refuses(self, image: str) -> str | None:
        """Why this worker's admission refuses `image` in a team namespace (None: admits)."""
        return admission_refusal(self.cfg, self.account_id, self.region, image, self.fleet_trainer)


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
    #: Per manager flavor, the teams' summed nominal GPUs against every worker's pools added
    #: up: what MultiKueue can dispatch to (capacity.flavor_commitments).
    commitments: tuple[FlavorCommitment, ...]

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(w.region for w in self.workers))

    @property
    def replication_pairs(self) -> int:
        """Ordered worker pairs: S3 replicates checkpoints and datasets from every worker to
        every other (components/platform/fleet/links.py)."""
        return len(self.workers) * (len(self.workers) - 1)

    @property
    def trainer_image(self) -> str:
        """The fleet's one trainer (every worker's, read_workers checks it): what the
        manager's runtimes name and what a fleet job without an image of its own runs."""
        return self.workers[0].trainer_image or ""


def _stack_problem(index: int, ref: WorkerRef, allowed: str) -> Problem:
    return Problem(f"workers[{index}].stack", ref.stack, allowed)


def read_workers(cfg: FleetManagerConfig, region: str, inputs: Sequence[WorkerInput]) -> FleetFacts:
    """The fleet's facts from what the manager read, or `ConfigError` (keys in the manager's
    namespace) for every way the fleet is miswired."""
    problems: list[Problem] = []
    workers: list[Worker] = []
    for index, given in enumerate(inputs):
        worker, found = _worker(cfg, index, given)
        problems += found
        if worker is not None:
            workers.append(worker)
    if not problems:
        problems += _network_problems(cfg, workers)
        problems += _name_problems(workers)
        problems += _team_problems(workers)
        problems += _manager_namespace_problems(cfg, workers[0])
        problems += trainer_problems(workers)
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
        commitments=flavor_commitments(teams, fleet_capacity(workers)),
    )


def fleet_capacity(workers: Sequence[Worker]) -> dict[tuple[str, catalog.CapacityType], int]:
    """GPUs per flavor all workers' pools provide together (each worker's gpu_capacity)."""
    total: dict[tuple[str, catalog.CapacityType], int] = {}
    for worker in workers:
        for key, gpus in worker.stack.capacity.items():
            total[key] = total.get(key, 0) + gpus
    return total


def _worker(
    cfg: FleetManagerConfig, index: int, given: WorkerInput
) -> tuple[Worker | None, list[Problem]]:
    """One worker as the manager knows it, or why the manager cannot take it."""
    ref, exports, platform = given.ref, given.fleet_worker, given.job_platform
    if given.unreadable:
        return None, [
            _stack_problem(
                index, ref, f"{problem}: deploy the worker from this repository's revision"
            )
            for problem in given.unreadable
        ]
    if exports is None or platform is None:
        return None, [
            _stack_problem(
                index,
                ref,
                "a deployed platform stack with `fleet` set (it exports no fleetWorker / "
                "jobPlatform: set gpu-platform:fleet and `pulumi up` it first)",
            )
        ]
    found: list[Problem] = []
    if exports.fleet != cfg.name:
        found.append(
            _stack_problem(
                index, ref, f"a worker of fleet {cfg.name!r} (it serves {exports.fleet!r})"
            )
        )
    missing = [f for f in catalog.MULTIKUEUE_FRAMEWORKS if f not in exports.kueue_frameworks]
    if missing:
        found.append(
            _stack_problem(
                index,
                ref,
                f"a worker whose Kueue manages {', '.join(missing)} (the job kinds the manager "
                "dispatches: their CRDs, controllers and Kueue integrations)",
            )
        )
    runtimes = sorted(set(trainer_runtime_names()) ^ set(platform.training_runtimes))
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
    stack = build(platform.platform_config, region=exports.region)
    return Worker(index, ref, exports, platform, stack), []


def _network_problems(cfg: FleetManagerConfig, workers: Sequence[Worker]) -> list[Problem]:
    """VPC peering routes by CIDR: the manager's and every worker's must not overlap (an
    overlapping peer is refused by EC2, and routes could not tell the two apart)."""
    problems: list[Problem] = []
    manager = ipaddress.IPv4Network(cfg.network.vpc_cidr)
    seen: list[tuple[str, ipaddress.IPv4Network]] = [("the manager (network.vpcCidr)", manager)]
    for worker in workers:
        cidr = ipaddress.IPv4Network(worker.fleet_worker.vpc_cidr)
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
            f"bucket {bucket}" for bucket in sorted(worker.job_platform.buckets.values())
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


def _manager_namespace_problems(cfg: FleetManagerConfig, first: Worker) -> list[Problem]:
    """The manager renders every fleet team's namespace beside its own add-ons (analysis/
    addons.py): no team may take one of theirs. A worker checked its teams against its own
    add-ons; the manager's may differ (its External Secrets namespace, CloudWatch where a worker
    has none). Keyed by the manager's setting where it has one, else by the worker whose teams
    the fleet has (every worker has the same: _team_problems)."""
    found = manager_installed(cfg)
    owners = reserved(found)
    keys = {i.namespace: i.addon.manager_namespace_key for i in found}
    problems: list[Problem] = []
    for team in first.cfg.teams:
        if team.namespace not in owners:
            continue
        key = keys.get(team.namespace)
        if key is not None:
            problems.append(
                Problem(key, team.namespace, f"a namespace no fleet team uses (team {team.name})")
            )
        else:
            problems.append(
                _stack_problem(
                    first.index,
                    first.ref,
                    f"a worker whose team {team.name!r} has, on the manager too, "
                    + allowed(team.namespace, owners, "the manager's"),
                )
            )
    return problems


def _sum_limit(values: Sequence[int | None]) -> int | None:
    """Σ of limits where every worker sets one; one unbounded worker leaves it unbounded."""
    return None if any(v is None for v in values) else sum(v or 0 for v in values)


def _summed(parts: Sequence[ResourceQuota]) -> ResourceQuota:
    """One resource of the workers' entries added up: nominal quota and each limit."""
    return ResourceQuota(
        parts[0].name,
        sum(p.nominal for p in parts),
        _sum_limit([p.borrowing for p in parts]),
        _sum_limit([p.lending for p in parts]),
    )


class ManagerQuota(FlavorQuota):
    """A manager's quota entry: every worker's entry of the flavor added up (`workers`), its
    ClusterQueue carrying the sum of what the workers' ClusterQueues carry, limits included.

    A worker's CPU and memory limits are its share of its own GPU limits, rounded up
    (FlavorQuota.quantities); the share of the summed figures is not the sum of the shares. A
    worker with 100 CPU for 1 GPU that may borrow 1 GPU borrows up to 100 CPU; summed with a
    worker of 1 CPU for 100 GPUs borrowing none, the share would be 1 CPU, and the manager's
    Kueue would keep pending a job the first worker's Kueue admits (MultiKueue admits on the
    manager before it dispatches). Summing each worker's rendered quantities keeps the
    manager's reach at least every worker's (tests/analysis/test_properties.py)."""

    workers: tuple[FlavorQuota, ...]

    def quantities(self) -> tuple[ResourceQuota, ResourceQuota, ResourceQuota]:
        each = [entry.quantities() for entry in self.workers]
        return (
            _summed([q[0] for q in each]),
            _summed([q[1] for q in each]),
            _summed([q[2] for q in each]),
        )


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
            ManagerQuota(
                gpu_class=gpu_class,
                capacity_type=capacity_type,
                gpus=sum(e.gpus for e in group),
                cpu=sum(e.cpu for e in group),
                memory_gib=sum(e.memory_gib for e in group),
                borrowing_limit_gpus=_sum_limit([e.borrowing_limit_gpus for e in group]),
                lending_limit_gpus=_sum_limit([e.lending_limit_gpus for e in group]),
                workers=tuple(group),
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
