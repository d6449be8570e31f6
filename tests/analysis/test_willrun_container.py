"""The training container as a job's verdict judges it (components/analysis/willrun.py): its
requests against the team namespace's LimitRange, as Kueue's ValidateResources refuses them;
the EFA devices it carries; the TrainJob runtime it needs from the platform."""

from __future__ import annotations

from typing import Any

from components import catalog
from components.analysis import problems
from components.analysis.facts import build
from components.analysis.willrun import job_container
from tests.analysis.judged import verdict_for
from tests.analysis.test_willrun import _cfg, _job


def test_a_job_over_its_namespaces_default_cpu_limit_is_refused_word_for_word() -> None:
    def tight(values: dict[str, Any]) -> None:
        for team in values["teams"]:
            team["containerDefaults"] = {"cpuLimit": "1", "cpuRequest": "1"}

    cfg = _cfg("dev", tight)
    (index, job) = _job(cfg, cfg.training_jobs[0].name)
    found = [p for p in problems(cfg) if p[0] == f"trainingJobs[{index}].cpu"]
    assert found == [
        (
            f"trainingJobs[{index}].cpu",
            2.0,
            f"requests within the limits team {job.team}'s LimitRange gives its containers in "
            "its namespace (containerDefaults.cpuLimit 1, memoryLimit 16Gi): Kueue refuses the "
            "Workload before it tries a flavor (containers[0]: requests of cpu (2 > 1) exceed "
            "the limits the namespace LimitRange gives them; kubernetes-sigs/kueue@v0.19.2 "
            "pkg/workload/resources.go ValidateResources)",
        )
    ]


def test_the_training_container_carries_its_efa_devices() -> None:
    facts = build(_cfg("prod"))
    efa = [jf for jf in facts.jobs if jf.resources.efa_devices]
    assert efa, "prod declares EFA jobs"
    for jf in efa:
        devices = str(jf.resources.efa_devices)
        container = job_container(jf)
        assert container["requests"][catalog.EFA_RESOURCE] == devices
        assert container["limits"][catalog.EFA_RESOURCE] == devices


def test_a_trainjob_whose_runtime_the_platform_lacks_is_refused_at_its_own_key() -> None:
    cfg = _cfg("dev")
    index, job = next((i, j) for i, j in enumerate(cfg.training_jobs) if j.launcher == "kubeflow")
    found = verdict_for(cfg, index, job, runtimes=()).problems
    assert [p[0] for p in found] == [f"trainingJobs[{index}].checkpoint.saveSeconds"]
    assert verdict_for(cfg, index, job).problems == ()
