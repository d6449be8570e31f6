"""Time-to-first-step estimate: node launch + image pull + rendezvous, per job."""

from __future__ import annotations

import copy
import json
from typing import Any

from components.analysis import readiness, startup
from components.analysis.facts import build
from components.config import StackConfig
from components.config.load import namespace_values, parse
from synth.harness import SynthResult
from tests.conftest import values_with_jobs


def _prod(change: dict[str, Any] | None = None) -> StackConfig:
    raw = copy.deepcopy(values_with_jobs("prod"))
    for key, value in (change or {}).items():
        raw[key] = value
    return parse(
        namespace_values({k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()})
    )


def _pretrain(cfg: StackConfig) -> startup.StartupEstimate:
    (pretrain,) = (jf for jf in build(cfg).jobs if jf.workload == "team-pretrain/pretrain-7b")
    return pretrain.startup


def test_p5_job_pulls_with_soci_onto_nvme() -> None:
    est = _pretrain(_prod())
    assert est.instance_type == "p5.48xlarge"
    assert est.parallel_pull and est.image_store == "NVMe RAID0 over 8 disk(s), 30400 GB"
    assert est.pull_mibps == readiness.PARALLEL_PULL_MIBPS
    # 8 GiB reference trainer image at 400 MiB/s: 20 s; 420 s launch; 30 + 2 x 2 rendezvous.
    assert est.image_pull_s == 20
    assert est.total_s == 420 + 20 + 34
    assert est.line().startswith(f"time to first step ≈ {est.total_s} s = node launch 420 s")


def test_without_soci_the_pull_is_slower_and_image_size_overrides_apply() -> None:
    raw = values_with_jobs("prod")
    karpenter = copy.deepcopy(raw["gpu-platform:karpenter"])
    karpenter.setdefault("gpuNodeClass", {"diskSizeGib": 300})["fastImagePull"] = False
    training = dict(raw.get("gpu-platform:training", {}), imageSizeGib=30)
    est = _pretrain(_prod({"gpu-platform:karpenter": karpenter, "gpu-platform:training": training}))
    assert not est.parallel_pull and est.pull_mibps == readiness.PULL_MIBPS
    assert est.image_gib == 30
    assert est.image_pull_s == round(30 * 1024 / readiness.PULL_MIBPS)
    jobs = copy.deepcopy(raw["gpu-platform:trainingJobs"])
    for job in jobs:
        job["imageSizeGib"] = 2.5
    assert _pretrain(_prod({"gpu-platform:trainingJobs": jobs})).image_gib == 2.5


def test_ebs_throughput_bounds_the_pull_on_types_without_nvme() -> None:
    est = startup.StartupEstimate("m", 300, 10, 125, "gp3 125 MiB/s", True, 32)
    assert est.image_pull_s == round(10 * 1024 / 125)
    assert est.total_s == 300 + est.image_pull_s + 32


def test_report_shows_time_to_first_step_per_job(prod_jobs: SynthResult) -> None:
    from synth.report import report

    text = report(prod_jobs)
    section = text[text.index("### `team-pretrain/pretrain-7b`") :]
    section = section[: section.index("\n\n###")]
    assert "- time to first step ≈ 474 s = node launch 420 s (p5.48xlarge) + image pull 20 s" in (
        section
    )


def test_without_raid0_the_gp3_root_holds_the_images_and_can_bound_the_pull() -> None:
    raw = values_with_jobs("prod")
    karpenter = copy.deepcopy(raw["gpu-platform:karpenter"])
    karpenter["gpuNodeClass"] = {
        "diskSizeGib": 500,
        "diskThroughputMibps": 125,
        "instanceStoreRaid0": False,
    }
    est = _pretrain(_prod({"gpu-platform:karpenter": karpenter}))
    assert est.image_store == "gp3 125 MiB/s"
    assert est.pull_mibps == 125  # the disk, not SOCI's 400 MiB/s, bounds it
    karpenter["gpuNodeClass"]["instanceStoreRaid0"] = True
    on_nvme = _pretrain(_prod({"gpu-platform:karpenter": karpenter}))
    assert on_nvme.image_store.startswith("NVMe RAID0")
    assert on_nvme.pull_mibps == readiness.PARALLEL_PULL_MIBPS
    assert on_nvme.image_pull_s < est.image_pull_s


def test_the_estimate_is_a_function_of_values_the_facts_hold_once() -> None:
    """`estimate` takes the job, its pods' type and the sources that fit them: the facts call it
    once per job (JobFacts.startup) and the report reads that field."""
    cfg = _prod()
    (jf,) = (jf for jf in build(cfg).jobs if jf.workload == "team-pretrain/pretrain-7b")
    assert startup.estimate(cfg, jf.job, jf.resources.instance_type, jf.fit.fitting) == jf.startup
    # No fitting source: pulled the way a node of a Karpenter GPU pool pulls.
    bare = startup.estimate(cfg, jf.job, "p5.48xlarge", ())
    expected = readiness.pull_rate(cfg, "karpenter", "", "p5.48xlarge")
    assert (bare.pull_mibps, bare.image_store) == (expected.mibps, expected.image_store)


def test_the_reports_line_names_every_term_and_the_pull() -> None:
    """The report's breakdown, word for word: the pull is SOCI's parallel pull where the node
    class turns it on, containerd's default pull elsewhere."""
    est = startup.StartupEstimate("m7i.large", 300, 10, 125, "gp3 125 MiB/s", True, 32)
    assert est.line() == (
        "time to first step ≈ 414 s = node launch 300 s (m7i.large) + image pull 82 s (10 GiB "
        "at 125 MiB/s: SOCI parallel pull, image store gp3 125 MiB/s) + rendezvous 32 s "
        "(planning figures: components/analysis/startup.py)"
    )
    default = startup.StartupEstimate("m7i.large", 300, 10, 125, "gp3 125 MiB/s", False, 32)
    assert "at 125 MiB/s: containerd default pull, image store" in default.line()


def _l40s_groups_apart() -> StackConfig:
    """Prod with its on-demand L40S group's root volume at gp3's 125 MiB/s baseline, the spot
    group's left at the default: the two managed groups of `finetune-l40s` pull apart."""
    raw = values_with_jobs("prod")
    groups = copy.deepcopy(raw["gpu-platform:nodeGroups"])
    for group in groups["gpu"]:
        if group["name"] == "ng-l40s-od":
            group["diskThroughputMibps"] = 125
    return _prod({"gpu-platform:nodeGroups": groups})


def test_the_pull_is_the_one_of_the_source_of_the_jobs_first_capacity_type() -> None:
    """`finetune-l40s` asks for spot, then on-demand: its estimate is pulled the way the spot
    managed group pulls (containerd's default onto that group's own gp3 root), whatever order
    the fitting sources come in; a source of a capacity type the job does not ask for, or
    without the job's type, is the last choice."""
    cfg = _l40s_groups_apart()
    (jf,) = (jf for jf in build(cfg).jobs if jf.job.name == "finetune-l40s")
    assert jf.job.capacity_types == ("spot", "on-demand")
    spot, on_demand = (
        next(s for s in jf.fit.fitting if s.name == name) for name in ("ng-l40s-spot", "ng-l40s-od")
    )
    kind = jf.resources.instance_type
    spot_disk = next(
        g for g in cfg.node_groups.gpu if g.name == "ng-l40s-spot"
    ).disk_throughput_mibps
    assert spot_disk != 125
    for fitting in ((spot, on_demand), (on_demand, spot)):
        est = startup.estimate(cfg, jf.job, kind, fitting)
        assert (est.image_store, est.parallel_pull) == (f"gp3 {spot_disk} MiB/s", False)
        assert est.pull_mibps == min(readiness.PULL_MIBPS, spot_disk)
    assert jf.startup == startup.estimate(cfg, jf.job, kind, (spot, on_demand))
    # Only the on-demand group: its own 125 MiB/s bounds the pull.
    est = startup.estimate(cfg, jf.job, kind, (on_demand,))
    assert (est.image_store, est.pull_mibps) == ("gp3 125 MiB/s", 125)
    # A spot-only job ranks an on-demand source after its own.
    spot_only = jf.job.model_copy(update={"capacity": "spot"})
    est = startup.estimate(cfg, spot_only, kind, (on_demand, spot))
    assert est.image_store == f"gp3 {spot_disk} MiB/s"
    # A source without the pods' type is passed over.
    est = startup.estimate(cfg, jf.job, "g6e.48xlarge", (spot, on_demand))
    expected = readiness.pull_rate(cfg, "karpenter", "", "g6e.48xlarge")
    assert (est.pull_mibps, est.image_store) == (expected.mibps, expected.image_store)
