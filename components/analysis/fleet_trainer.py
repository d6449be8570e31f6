"""The fleet's one trainer image, and what each worker's admission makes of an image
(docs/fleet.md "One image in every region").

Why one image. The manager builds a TrainJob's Workload from *its* ClusterTrainingRuntime and a
worker recomputes the pod sets from *its own* when the mirrored job arrives; Kueue v0.19.2
compares the two with `equality.ComparePodSetSlices` — containers and initContainers by full
`DeepEqual`, image and env included (kubernetes-sigs/kueue@v0.19.2
pkg/util/equality/podset.go L41-76) — and on any difference finishes the worker's Workload
`OutOfSync` (pkg/controller/jobframework/reconciler.go L1365-1385, "The prebuilt workload is out
of sync with its user job"); the manager resets the check to Retry and dispatches it again
(pkg/controller/admissionchecks/multikueue/workload.go L397-414), forever. So every runtime and
every fleet job names one image reference, byte for byte, on the manager and on every worker.

How one reference runs well everywhere. One worker, the *trainer home*, builds, pushes, signs
and pins the trainer in its ECR repository; ECR cross-region replication copies the repository
to every other worker's region, digest and cosign signature tags included ("Once replication is
configured for a repository, Amazon ECR keeps the destination and source synchronized"; "The
repository name will remain the same across Regions", ECR user guide, "Private image
replication"). The job objects (what Kueue compares) carry the home's reference; on a worker in
another region a Kyverno MutatingPolicy rewrites it, *on the Pod only*, to the replica in that
region's registry (components/platform/registry/admission.py), so nodes pull in-region and the
worker keeps starting jobs when the home region's registry is down. Kueue never compares Pods.

What a worker's admission makes of an image (`admission_refusal`): the trusted-images
ValidatingAdmissionPolicy (Pods and batch Jobs: its own ECR registry, `allowedRegistries`, and
on a worker that runs its home's trainer exactly the home's trainer repository; by digest where
required) and, under Deny with signatures, the signer's scope: the platform key signs the
worker's own repositories, the trainer home's key the trainer's (home and replica). A worker
that refuses a mirrored Job leaves the job stuck with its MultiKueue check Pending — Kueue
tries no other worker and says so only in the manager's log (workload.go L571-635, "Syncing
remote controller object") — so a fleet job whose image a worker it may be dispatched to would
refuse cannot run (components/analysis/fleet.py).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final, Protocol

from pydantic import JsonValue

from components import catalog
from components.analysis.images import image_pattern
from components.config import ConfigError, Problem, StackConfig
from components.config.errors import problem_lines
from components.contract.fleet_worker import WorkerContract, WorkerTrainer
from components.contract.job_platform import PlatformContract

#: A reference into a private ECR registry, by digest: account, region, repository, digest.
ECR_IMAGE: Final = re.compile(
    r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com/"
    r"(?P<repository>[a-z0-9._/-]+)(:[A-Za-z0-9._-]+)?@(?P<digest>sha256:[a-f0-9]{64})$"
)


def ecr_registry(account_id: str, region: str) -> str:
    """An account's private ECR registry in a region."""
    return f"{account_id}.dkr.ecr.{region}.amazonaws.com"


@dataclass(frozen=True)
class FleetTrainer:
    """The fleet's trainer as a worker that runs its home's knows it: the home's reference
    (`<account>.dkr.ecr.<home region>.amazonaws.com/<home cluster>/trainer@sha256:...`) and
    the public key (PEM) of the key that signed it."""

    image: str
    public_key: str | None = None

    @property
    def repository(self) -> str:
        """The home's trainer repository (`registry/path`)."""
        return catalog.image_repository(self.image)

    @property
    def digest(self) -> str:
        return self.image.rsplit("@", 1)[1]

    @property
    def repository_name(self) -> str:
        """The repository's name in its registry (`<home cluster>/trainer`): the same in every
        region it is replicated to."""
        match = ECR_IMAGE.match(self.image)
        return match["repository"] if match else self.repository.split("/", 1)[-1]

    @property
    def region(self) -> str | None:
        match = ECR_IMAGE.match(self.image)
        return match["region"] if match else None

    def replica_repository(self, region: str) -> str:
        """Where a node in `region` pulls the trainer from: the replica in that region's
        registry (the home's own repository in the home's region)."""
        match = ECR_IMAGE.match(self.image)
        if match is None:
            return self.repository
        return f"{ecr_registry(match['account'], region)}/{match['repository']}"

    def replica(self, region: str) -> str:
        """The reference a Pod in `region` runs (rewritten at Pod admission)."""
        return f"{self.replica_repository(region)}@{self.digest}"

    @property
    def signature_tag(self) -> str:
        """cosign's signature tag of the digest (`sha256-<hex>.sig`, the `.sig` layout the
        deploy signs in: components/platform/registry/trainer_image.py)."""
        return self.digest.replace(":", "-") + ".sig"


def parse_trainer(image: str | None, public_key: str | None = None) -> FleetTrainer | None:
    """A home's trainer from what its stack exports, or None when it names none by digest."""
    if image is None or "@sha256:" not in image:
        return None
    return FleetTrainer(image, public_key)


def allowed_pattern(
    cfg: StackConfig, account_id: str, region: str, trainer: FleetTrainer | None
) -> str:
    """The trusted-images pattern of a stack in `region`: its own ECR registry and
    `allowedRegistries`, plus exactly its trainer home's repository when it runs one."""
    admission = cfg.security.image_admission
    registries = [ecr_registry(account_id, region), *admission.allowed_registries]
    repositories = (trainer.repository,) if trainer is not None else ()
    return image_pattern(
        registries, require_digest=admission.require_digest, repositories=repositories
    )


def trainer_repositories(trainer: FleetTrainer | None, region: str) -> tuple[str, ...]:
    """The repositories the trainer home's key signs as a worker in `region` meets them: the
    home's and the replica here (one and the same in the home's region)."""
    if trainer is None:
        return ()
    return tuple(dict.fromkeys((trainer.repository, trainer.replica_repository(region))))


def signed_by_own_signer(cfg: StackConfig, account_id: str, region: str) -> tuple[str, ...]:
    """The repositories the stack's own trusted signer signs (an entry covers those below it):
    the platform key its own ECR repositories, another signer `signedRepositories`."""
    signatures = cfg.security.image_admission.signatures
    if signatures.signer == "platform":
        return (f"{ecr_registry(account_id, region)}/{cfg.cluster.name}",)
    return tuple(signatures.signed_repositories)


def admission_refusal(
    cfg: StackConfig,
    account_id: str,
    region: str,
    image: str,
    trainer: FleetTrainer | None = None,
) -> str | None:
    """Why the admission of a stack in `region` (its config `cfg`, its account) refuses
    `image` in a team namespace — on the mirrored Job or on the Pods — or None when it admits
    it (always under Audit). `trainer`: the trainer home's, where this stack runs it."""
    admission = cfg.security.image_admission
    if admission.action != "Deny":
        return None
    pattern = allowed_pattern(cfg, account_id, region, trainer)
    if not re.match(pattern, image):
        registries = [ecr_registry(account_id, region), *admission.allowed_registries]
        digest = ", by digest" if admission.require_digest else ""
        also = f" and the trainer repository {trainer.repository}" if trainer else ""
        return f"its trusted-images policy admits {', '.join(registries)}{also} only{digest}"
    signatures = admission.signatures
    if not signatures.enabled:
        return None
    repository = catalog.image_repository(image)
    fleet = trainer_repositories(trainer, region)
    if repository in fleet:
        if trainer is not None and trainer.public_key is None:
            return (
                "its signature policy verifies the fleet's trainer with the trainer home's key, "
                "and the home publishes none (its admission trusts another signer than the key "
                "its deploy signs with)"
            )
        return None
    own = signed_by_own_signer(cfg, account_id, region)
    if own and not catalog.in_repositories(repository, own):
        return (
            f"its signature policy (Deny) requires a signature by its trusted signer, which "
            f"signs {', '.join(own)} only"
        )
    return None


def home_trainer(
    cfg: StackConfig,
    region: str,
    home_worker: WorkerContract | None,
    home_platform: PlatformContract | None,
) -> FleetTrainer:
    """The trainer of this worker's trainer home (`fleet.trainerHome`), from what the home's
    stack exports (`fleetWorker`, `jobPlatform`, parsed where they were read:
    components/platform/fleet/reading.py `read_trainer_home`), or `ConfigError` naming
    `fleet.trainerHome` for every reason this worker cannot run it."""
    fleet = cfg.fleet
    assert fleet is not None and fleet.trainer_home is not None
    stack = fleet.trainer_home

    def refused(allowed: str) -> ConfigError:
        return ConfigError(problem_lines([Problem("fleet.trainerHome", stack, allowed)]))

    if home_worker is None or home_platform is None:
        raise refused(
            "a deployed worker of the fleet (it exports no fleetWorker / jobPlatform: deploy the "
            "trainer home first, then the other workers)"
        )
    block = home_worker.trainer
    trainer = parse_trainer(home_platform.trainer_image, block.signing_public_key)
    problems: list[str] = []
    if home_worker.fleet != fleet.name:
        problems.append(f"a worker of fleet {fleet.name!r} (it serves {home_worker.fleet!r})")
    if block.home:
        problems.append(
            f"the fleet's trainer home itself (it runs the trainer of {block.home}: name "
            "that stack)"
        )
    if trainer is None:
        problems.append("a worker that publishes its trainer by digest (jobPlatform.trainerImage)")
    elif trainer.region not in (None, region) and region not in block.replica_regions:
        problems.append(
            f"a home whose trainer repository is replicated to {region} (add {region} to its "
            "fleet.trainerReplicas and `pulumi up` it, then this stack)"
        )
    signatures = cfg.security.image_admission.signatures
    if trainer is not None and signatures.enabled and trainer.public_key is None:
        problems.append(
            "a home whose admission trusts the platform key its deploy signs the trainer with "
            "(it publishes no signing key; this stack verifies the trainer's signature)"
        )
    if problems:
        raise refused("; ".join(problems))
    assert trainer is not None
    return trainer


# --- the fleet's rules (analysis/fleet.py read_workers, fleet_jobs.py judge_fleet_job) -------


class TrainerWorker(Protocol):
    """What the rules below read of a worker (components/analysis/fleet.py `Worker`)."""

    @property
    def index(self) -> int: ...

    @property
    def name(self) -> str: ...

    @property
    def region(self) -> str: ...

    @property
    def label(self) -> str: ...

    @property
    def stack_ref(self) -> str: ...

    @property
    def trainer_image(self) -> str | None: ...

    @property
    def trainer_block(self) -> WorkerTrainer: ...

    @property
    def runtime_pod_sets(self) -> Mapping[str, JsonValue]: ...

    def refuses(self, image: str) -> str | None: ...


def _worker_problem(worker: TrainerWorker, allowed: str) -> Problem:
    return Problem(f"workers[{worker.index}].stack", worker.stack_ref, allowed)


def first_difference(
    path: str, ours: JsonValue, theirs: JsonValue
) -> tuple[str, JsonValue, JsonValue] | None:
    """The first field where two JSON values differ: (path, ours, theirs)."""
    if isinstance(ours, Mapping) and isinstance(theirs, Mapping):
        for key in sorted(set(ours) | set(theirs)):
            found = first_difference(f"{path}.{key}", ours.get(key), theirs.get(key))
            if found is not None:
                return found
        return None
    if isinstance(ours, list) and isinstance(theirs, list) and len(ours) == len(theirs):
        for index, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            found = first_difference(f"{path}[{index}]", a, b)
            if found is not None:
                return found
        return None
    return None if ours == theirs else (path, ours, theirs)


def runtime_problem(
    worker: TrainerWorker, reference: Mapping[str, JsonValue], where: str, hint: str
) -> Problem | None:
    """Why `worker`'s runtimes would put the manager's Workload out of sync: the first
    container field that differs from `reference` (the pod sets rendered `where`)."""
    found = first_difference("", dict(reference), dict(worker.runtime_pod_sets))
    if found is None:
        return None
    path, theirs, ours = found
    runtime, _, field = path.lstrip(".").partition(".")
    return _worker_problem(
        worker,
        f"a worker whose ClusterTrainingRuntime {runtime.split('/')[0]} renders the containers "
        f"{where} renders: {field or 'the runtime'} is {ours!r} here, {theirs!r} there (Kueue "
        "v0.19.2 compares the pod sets a worker recomputes from its runtime with the dispatched "
        "Workload, containers in full, and finishes it OutOfSync: pkg/util/equality/podset.go "
        f"L41-76, jobframework/reconciler.go L1365-1385); {hint}",
    )


def manager_runtime_problems(
    workers: Sequence[TrainerWorker], pod_sets: Mapping[str, JsonValue]
) -> list[Problem]:
    """Every worker whose ClusterTrainingRuntimes render other containers than the manager's
    own (`pod_sets`, rendered with the fleet's trainer): Kueue would finish every TrainJob
    dispatched there OutOfSync."""
    hint = "deploy every worker and the manager from one revision, with one trainer (docs/fleet.md)"
    found = [runtime_problem(w, pod_sets, "the manager", hint) for w in workers]
    return [p for p in found if p is not None]


def trainer_problems(workers: Sequence[TrainerWorker]) -> list[Problem]:
    """The fleet's one trainer: every worker's runtimes render the first worker's containers
    (the manager renders its own with the first worker's trainer, and checks that too:
    fleet/__main__.py), every worker's admission admits that trainer, and a trainer home
    replicates it to every region a worker runs it in."""
    first = workers[0]
    image = first.trainer_image or ""
    hint = (
        f"build the trainer on one worker and run it everywhere: fleet.trainerHome: "
        f"{first.stack_ref} on the others, fleet.trainerReplicas: their regions on {first.name} "
        "(docs/fleet.md)"
    )
    problems: list[Problem] = []
    for worker in workers[1:]:
        found = runtime_problem(worker, first.runtime_pod_sets, f"worker {first.name}", hint)
        if found is not None:
            problems.append(found)
    for worker in workers:
        refusal = worker.refuses(image) if image else None
        if refusal is not None and not any(
            p.key == f"workers[{worker.index}].stack" for p in problems
        ):
            problems.append(
                _worker_problem(
                    worker,
                    f"a worker whose admission admits the fleet's trainer {image}: {refusal}",
                )
            )
    return problems + _replica_problems(workers)


def _replica_problems(workers: Sequence[TrainerWorker]) -> list[Problem]:
    """A worker that runs its home's trainer names a worker of this fleet, and that home
    replicates the trainer to the worker's region (unless it is its own)."""
    by_stack = {w.stack_ref.rsplit("/", 1)[-1]: w for w in workers}
    problems: list[Problem] = []
    for worker in workers:
        home_stack = worker.trainer_block.home
        if not home_stack:
            continue
        home = by_stack.get(str(home_stack).rsplit("/", 1)[-1])
        if home is None:
            problems.append(
                _worker_problem(
                    worker,
                    f"a worker whose fleet.trainerHome ({home_stack}) is a worker of this "
                    f"manager ({', '.join(w.stack_ref for w in workers)})",
                )
            )
            continue
        replicas = home.trainer_block.replica_regions
        if worker.region != home.region and worker.region not in replicas:
            problems.append(
                _worker_problem(
                    home,
                    f"a trainer home that replicates its trainer to {worker.region}, where worker "
                    f"{worker.name} runs it (fleet.trainerReplicas: {replicas})",
                )
            )
    return problems


def job_image_problems(
    workers: Sequence[TrainerWorker], image: str, index: int, regions: Sequence[str] | None
) -> list[Problem]:
    """A fleet job's image (`trainingJobs[index]`) is admitted by every worker the job may be
    dispatched to — its `regions`, else all: MultiKueue mirrors the job to each of them and the
    first to admit it wins; a winner whose admission refuses the mirrored job keeps it stuck,
    and no other worker is tried (module docstring)."""
    if not image:
        return []
    refused = [
        (worker, reason)
        for worker in workers
        if regions is None or worker.region in regions
        if (reason := worker.refuses(image)) is not None
    ]
    if not refused:
        return []
    refusing = {w.region for w, _ in refused}
    admitting = list(dict.fromkeys(w.region for w in workers if w.region not in refusing))
    remedy = (
        f"pin it with regions: [{', '.join(admitting)}] (the workers that admit it), or push "
        "it where every worker admits it"
        if admitting
        else "push it where every worker admits it (docs/images.md)"
    )
    reasons = "; ".join(f"worker {w.label} refuses it: {reason}" for w, reason in refused)
    return [
        Problem(
            f"trainingJobs[{index}].image",
            image,
            f"an image every worker the job may be dispatched to admits ({reasons}; a worker "
            "that wins the dispatch and refuses the mirrored job leaves it stuck, never tried "
            f"elsewhere); {remedy}",
        )
    ]
