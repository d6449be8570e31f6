"""Cross-area rules of `trainingJobs`. Structural (`validate_training_jobs`, before the facts are
built): known team, unique names per namespace, images, DeepSpeed batch arithmetic, a GPU class
and capacity type the pools provide, whole nodes. On the facts (`judge_training_jobs`,
`quota_problems`): EFA asks the types cannot meet, quota and pool capacity."""

from __future__ import annotations

from components import catalog
from components.analysis import capacity, quota
from components.analysis.facts import JobFacts, StackFacts
from components.analysis.images import (
    image_problems,
    image_source,
    image_source_problems,
    trainer_problems,
)
from components.config import Problem, StackConfig, TrainingJobConfig, gpus_of_class


def validate_training_jobs(cfg: StackConfig) -> list[Problem]:
    """The structural rules of `trainingJobs`, before any fact is built: known team, unique
    names per namespace, images that can be pinned and admitted, DeepSpeed/FSDP batch
    arithmetic, a GPU class and capacity type the pools provide, whole nodes."""
    problems: list[Problem] = []
    teams = {team.name: team for team in cfg.teams}
    provided = capacity.flavors(cfg)
    classes = sorted({gpu_class for gpu_class, _ in provided})
    seen: dict[tuple[str, str], int] = {}
    for index, job in enumerate(cfg.training_jobs):
        key = f"trainingJobs[{index}]"
        team = teams.get(job.team)
        if team is None:
            problems.append(
                Problem(f"{key}.team", job.team, f"a team ({', '.join(sorted(teams))})")
            )
        else:
            where = (team.namespace, job.name)
            if where in seen:
                problems.append(
                    Problem(
                        f"{key}.name",
                        job.name,
                        f"a unique name in {team.namespace} (trainingJobs[{seen[where]}])",
                    )
                )
            seen.setdefault(where, index)
        if job.regions is not None and cfg.fleet is None:
            problems.append(
                Problem(
                    f"{key}.regions",
                    job.regions,
                    "left out: a platform stack is one region; regions pick among a fleet's "
                    "workers (a job stack on the fleet's manager, docs/fleet.md)",
                )
            )
        problems.extend(_image_problems(cfg, key, job))
        problems.extend(_batch_problems(key, job))
        problems.extend(_trainer_batch_problems(cfg, key, job))
        problems.extend(_class_problems(key, job, provided, classes))
    return problems


def _class_problems(
    key: str,
    job: TrainingJobConfig,
    provided: frozenset[tuple[str, catalog.CapacityType]],
    classes: list[str],
) -> list[Problem]:
    """A GPU class and capacity type the pools provide, and whole nodes of it."""
    if job.gpu_class not in classes:
        return [
            Problem(
                f"{key}.gpuClass",
                job.gpu_class,
                f"a GPU class the pools provide ({', '.join(classes)})",
            )
        ]
    if all((job.gpu_class, c) not in provided for c in job.capacity_types):
        return [
            Problem(
                f"{key}.capacity", job.capacity, f"no {job.capacity} pool provides {job.gpu_class}"
            )
        ]
    class_gpus = gpus_of_class(job.gpu_class)
    if job.gpus_per_node is not None and job.gpus_per_node != class_gpus:
        return [
            Problem(
                f"{key}.gpusPerNode",
                job.gpus_per_node,
                f"{class_gpus}: the GPUs of a {job.gpu_class} instance (whole nodes only)",
            )
        ]
    return []


def quota_problems(facts: StackFacts) -> dict[int, list[Problem]]:
    """Each Kueue job against its team's quota, the namespace limit and the pools' capacity
    (quota.job_quota_problems), by job index: the one rule that reports them (the will-it-run
    verdict reads only whether a job is over quota)."""
    return {
        jf.index: found
        for jf in facts.jobs
        if jf.job.scheduler == "kueue"
        and (
            found := quota.job_quota_problems(
                jf.key, jf.job, jf.team, facts.capacity, jf.resources, cohort=facts.cfg.teams
            )
        )
    }


def judge_training_jobs(facts: StackFacts) -> list[Problem]:
    """The rules of `trainingJobs` that need the facts: EFA asks that can never be met."""
    return [p for jf in facts.jobs for p in _efa_problems(jf)]


def _image_problems(cfg: StackConfig, key: str, job: TrainingJobConfig) -> list[Problem]:
    """A digest where the stack requires one; a source that pins one at deploy; else what the
    namespace's admission would reject (an image admission refuses is a job that cannot run)."""
    image = job.image or cfg.training.default_image
    if image is None:
        # The reference trainer: always pinned by the digest its push (or tag) resolves to.
        return trainer_problems(cfg, f"{key}.image")
    if cfg.training.require_image_digest and "@sha256:" not in image:
        return [
            Problem(
                f"{key}.image",
                image,
                "an image pinned by digest (repo[:tag]@sha256:...); "
                "training.requireImageDigest is on",
            )
        ]
    return image_source_problems(cfg, key, job) or image_problems(cfg, f"{key}.image", image)


def _batch_problems(key: str, job: TrainingJobConfig) -> list[Problem]:
    """DeepSpeed's and FSDP's global batch = micro x accumulation x world size."""
    problems: list[Problem] = []
    world = job.world_size
    for mode, batch in (("deepspeed", job.deepspeed), ("fsdp", job.fsdp)):
        if batch is None or batch.train_batch_size is None:
            continue
        want = batch.effective_batch(world)
        if batch.train_batch_size != want:
            problems.append(
                Problem(
                    f"{key}.{mode}.trainBatchSize",
                    batch.train_batch_size,
                    f"micro {batch.micro_batch_per_gpu} x accumulation "
                    f"{batch.gradient_accumulation_steps} x world size {world} = "
                    f"{want} (or leave it out)",
                )
            )
    return problems


def _trainer_batch_problems(cfg: StackConfig, key: str, job: TrainingJobConfig) -> list[Problem]:
    """The reference trainer takes one batch per optimizer step: it stops at start on a
    DeepSpeed config with gradient accumulation (images/trainer/gpt_trainer/train.py,
    "set gas to 1"), so such a job could never run it."""
    source = image_source(cfg, job)
    batch = job.deepspeed
    if source is None or not source.trainer or batch is None:
        return []
    if batch.gradient_accumulation_steps == 1:
        return []
    return [
        Problem(
            f"{key}.deepspeed.gradientAccumulationSteps",
            batch.gradient_accumulation_steps,
            "1 with the reference trainer (one batch per optimizer step; it refuses any other "
            "value at start): raise microBatchPerGpu or nodes for a larger batch, or run an "
            "image of your own",
        )
    ]


def _efa_gpu_types() -> str:
    """The catalog's GPU instance types with EFA devices, by family: what an EFA ask can run on
    (the catalog's table, never a list kept by hand: it once left out g6.8xlarge-16xlarge)."""
    by_family: dict[str, list[str]] = {}
    rows = sorted(
        catalog.INSTANCE_TYPES.values(), key=lambda row: (row.name.split(".")[0], row.vcpu)
    )
    for row in rows:
        if row.gpus and row.efa_devices:
            family, size = row.name.split(".", 1)
            by_family.setdefault(family, []).append(size)
    return "; ".join(f"{family}.{'/'.join(sizes)}" for family, sizes in sorted(by_family.items()))


def _efa_problems(jf: JobFacts) -> list[Problem]:
    """EFA asks that can never be met: EFA on types without it, more devices per pod than the
    type has, and a multi-node EFA job allowed to spread across zones."""
    job, key, types = jf.job, jf.key, jf.instance_types
    if not types:
        return []  # unknown class or no capacity: reported above
    counts = {t: catalog.instance(t).efa_devices for t in types}
    asked = job.efa or (job.efa is None and job.efa_devices is not None)
    out: list[Problem] = []
    without = [t for t, n in counts.items() if n == 0]
    if asked and without:
        # An explicit EFA ask on types without EFA would silently run over TCP sockets
        # (job_resources requests no device): refuse it, naming what the class offers.
        out.append(
            Problem(
                f"{key}.efa" if job.efa else f"{key}.efaDevices",
                True if job.efa else job.efa_devices,
                f"a GPU class whose instance types have EFA devices ({', '.join(without)} "
                f"have none; GPU types with EFA: {_efa_gpu_types()})",
            )
        )
        return out
    fewest = min(counts.values())
    if job.efa_devices is not None and fewest and job.efa_devices > fewest:
        # The device plugin advertises exactly the interfaces the node has
        # (aws-efa-k8s-device-plugin): a larger request stays Pending on every node of a type
        # with fewer, and Kueue may admit the gang onto any flavor of the job's types.
        out.append(
            Problem(
                f"{key}.efaDevices",
                job.efa_devices,
                f"at most {fewest} (the EFA devices of "
                + ", ".join(f"{t}: {n}" for t, n in sorted(counts.items()))
                + "); or leave it out for all of them",
            )
        )
    if job.zones == "any" and job.nodes > 1 and jf.resources.efa_devices:
        # EFA traffic does not cross availability zones ("EFA limitations",
        # https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa.html): pods spread over zones
        # could not talk over EFA at all.
        out.append(
            Problem(
                f"{key}.zones",
                "any",
                f"single (or leave it out): a {job.nodes}-node EFA job must keep its pods in one "
                "availability zone, EFA traffic does not cross zones; set efa: false to spread "
                "over TCP instead",
            )
        )
    return out
