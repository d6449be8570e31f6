"""The platform and the reference trainer agree: every trainer metric the platform's rules and
dashboards read is one the trainer exports, and the MFU peak the job's pods get is the one the
trainer reads (GPU_PEAK_TFLOPS, from the catalog's dense BF16 figure)."""

from __future__ import annotations

import re

from components import catalog
from components.platform.observability import alerts
from synth.harness import PROJECT_ROOT, SynthResult

TRAINER = PROJECT_ROOT / "images" / "trainer" / "gpt_trainer"


def test_every_trainer_metric_the_platform_reads_is_exported_by_the_trainer() -> None:
    exported = set(re.findall(r'"(trainer_[a-z_]+)"', (TRAINER / "metrics.py").read_text()))
    assert "trainer_mfu_ratio" in exported
    assert alerts.EXPORTER_METRICS["trainer"] <= exported


def test_training_pods_get_their_gpu_peak_for_mfu(prod_jobs: SynthResult) -> None:
    assert "GPU_PEAK_TFLOPS" in (TRAINER / "perf.py").read_text()
    jobs = prod_jobs.of_type("kubernetes:batch/v1:Job")
    (job,) = [r for r in jobs if r.name.endswith("pretrain-7b-job")]
    env = {
        e["name"]: e.get("value")
        for e in job.inputs["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["GPU_PEAK_TFLOPS"] == f"{catalog.GPU_PEAK_BF16_TFLOPS['h100']:g}" == "989"
    assert all(peak > 0 for peak in catalog.GPU_PEAK_BF16_TFLOPS.values())
