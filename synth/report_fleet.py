"""The report.md sections of a fleet (docs/fleet.md): for a manager, its workers, the quota it
holds for each team and what crosses regions; for a job stack on a manager, "will it run" per
job and worker — which regions can run it, why the others cannot — and what its data costs to
keep in every region it may land in."""

from __future__ import annotations

from typing import Any

from components import catalog
from components.analysis.fleet import FleetFacts, Worker
from components.analysis.fleet_jobs import FleetJob
from synth.harness import SynthResult
from synth.verdict_text import render


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def fleet_will_it_run(result: SynthResult) -> str:
    """A job stack on a manager: each job's regions, and the home worker's verdict."""
    fleet_jobs = result.fleet_jobs
    if fleet_jobs is None:
        raise ValueError(f"{result.stack}: no job stack on a fleet's manager")
    fleet = fleet_jobs.fleet
    blocks = []
    for fj in fleet_jobs.judgement.jobs:
        can = [r.label for r in fj.runnable_on]
        cannot = [r for r in fj.regions if not r.runnable]
        home = fj.home
        namespace = next(t.namespace for t in fleet.teams if t.name == fj.job.team)
        lines = [
            f"### `{namespace}/{fj.job.name}` (`{fj.key}`) — **runs in "
            f"{len(can)} of {len(fj.regions)} regions**: {', '.join(can)}",
            "",
        ]
        for region in cannot:
            why = "; ".join(f"`{p.key}`: {p.allowed}" for p in region.problems)
            lines.append(f"- not on {region.label}: {why}")
        if fj.auto_pinned:
            lines.append(
                f"- pinned to {', '.join(fj.auto_pinned)} (a required node affinity on the "
                "region): only the workers there can run it, and MultiKueue would dispatch it "
                "to every worker"
            )
        pinned = fj.job
        lines.append(
            f"- pod, pinned to what every capable worker offers: {pinned.cpu:g} CPU, "
            f"{pinned.memory_gib} GiB, /dev/shm {pinned.shm_gib} GiB, "
            f"{pinned.efa_devices or 0} EFA device(s)"
        )
        if home is not None and home.verdict is not None and home.stack is not None:
            text = render(home.stack.cfg, home.verdict)
            lines += [
                f"- on {home.label} (planned from): admission: {text.admission}",
                f"- placement: {text.placement}",
                f"- scale-up: {text.scale_up}",
                f"- gang: {text.gang}" + (f"; {text.zone}" if text.zone else ""),
            ]
        lines.append(_image_line(fj, fleet))
        lines.append(_data_line(fj))
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + (
        "\n\nEach job is judged by each worker's own rules on its own config (the fleet's "
        "`jobPlatform` carries them); MultiKueue mirrors it to every connected worker and the "
        "first to admit it runs it (docs/fleet.md)."
    )


def _image_line(fj: FleetJob, fleet: FleetFacts) -> str:
    """The one image reference the job carries into every region (docs/fleet.md)."""
    if fj.job.image:
        return f"- image: `{fj.job.image}` (its own; admitted by every worker it may land on)"
    return (
        f"- image: `{fleet.trainer_image}` (the fleet's trainer, the same reference in every "
        "region; nodes outside the trainer home's region pull their region's replica)"
    )


def _trainer_line(fleet: FleetFacts) -> str:
    """Where the fleet's one trainer comes from and where it is replicated."""
    homes = [w for w in fleet.workers if not w.trainer_block.home]

    def replicas(worker: Worker) -> str:
        return ", ".join(worker.trainer_block.replica_regions) or "no region"

    built = ", ".join(f"`{w.name}` ({w.region}, replicated to {replicas(w)})" for w in homes)
    return (
        f"Trainer: `{fleet.trainer_image}`, built by {built}; every worker's and the "
        "manager's ClusterTrainingRuntimes render it (Kueue compares them, docs/fleet.md)."
    )


def _data_line(fj: FleetJob) -> str:
    """Where its checkpoints live and what keeping them in every region costs
    (FleetJob.replication: analysis/costs.py)."""
    prefix = fj.job.checkpoint.s3_prefix
    if prefix is None:
        return "- data: checkpoints on the region's RWX volume only (pinned to one region)"
    copied = fj.replication
    assert copied is not None, "a judged fleet job carries its replication (analysis/fleet.py)"
    where = (
        f"- data: checkpoints in the running region's bucket (`$(CHECKPOINT_BUCKET)`/"
        f"{fj.job.team}/{prefix}), replicated to {copied.other_workers} other region(s)"
    )
    if copied.gib_per_hour is None or copied.usd_per_hour is None:
        return where + " (no modelParameters: no size to price the replication by)"
    return (
        where + f": ≈ {copied.gib_per_hour:.0f} GiB/h, ≈ ${copied.usd_per_hour:.2f}/h cross-region "
        "transfer"
    )


def fleet_section(result: SynthResult) -> str:
    """A manager: workers, the teams' fleet quota, MultiKueue settings and replication."""
    fleet = result.fleet
    if fleet is None:
        raise ValueError(f"{result.stack}: no fleet's manager")
    workers = _table(
        ["worker", "region", "stack", "cluster", "VPC CIDR", "kubeconfig secret"],
        [
            [
                f"`{w.name}`",
                w.region,
                f"`{w.ref.stack}`",
                w.cfg.cluster.name,
                w.fleet_worker.vpc_cidr,
                f"`{w.fleet_worker.kubeconfig_secret_arn}`",
            ]
            for w in fleet.workers
        ],
    )
    quota = _table(
        ["team", "flavor", "nominal GPUs (Σ workers)", "per worker"],
        [
            [
                f"`{team.name}`",
                entry.flavor,
                entry.gpus,
                ", ".join(
                    f"{worker} {gpus}"
                    for worker, gpus in fleet.worker_quota[team.name, entry.flavor]
                ),
            ]
            for team in fleet.teams
            for entry in team.quota
        ],
    )
    mk = fleet.cfg.multi_kueue
    return (
        f"Fleet `{fleet.cfg.name}`: manager in {fleet.region}, {len(fleet.workers)} worker(s), "
        f"dispatch {mk.dispatcher}, workerLostTimeout {mk.worker_lost_timeout}, manager "
        f"waitForPodsReady {fleet.pods_ready.timeout} (slowest worker's + margin).\n\n"
        f"{workers}\n\n{_trainer_line(fleet)}\n\n### Manager quota\n\n{quota}\n\n"
        "The manager admits a job against the fleet's total and mirrors it to every worker; "
        "each worker admits against its own quota (Kueue MultiKueue). Checkpoints and datasets "
        f"replicate between every pair of workers ({fleet.replication_pairs} S3 replication "
        "rules per bucket kind); cross-region transfer is priced at "
        f"${catalog.INTER_REGION_USD_PER_GB}/GB (planning figure, components/catalog.py); "
        "each job stack's report prices its own."
    )
