"""The gates of a team job stack's jobs against the platform (tests/analysis/test_gates.py):
its suspended launchers name a LocalQueue the platform renders; its Volcano jobs pass Volcano's
enqueue on the rendered platform queue with no GPU node up, and a gang over the team's
guarantee exits 2 naming the job stack's key."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from synth import __main__ as synth_cli
from synth.harness import SynthResult
from tests.analysis.test_gates import launchers_of, local_queues, suspended_but_unmanaged
from tests.analysis.test_volcano import assert_enqueues, queues_of, volcano_jobs
from tests.jobs.conftest import job_stack_values


def test_job_stack_volcano_job_fits_the_platform_queue_with_no_node(
    dev: SynthResult, research_dev: SynthResult
) -> None:
    jobs = volcano_jobs(research_dev)
    assert [j["metadata"]["name"] for j in jobs] == ["fsdp-volcano"]
    assert all(j["spec"]["queue"] == "research" for j in jobs)
    for vcjob in jobs:
        assert_enqueues(vcjob, queues_of(dev))


def test_job_stack_volcano_gang_over_the_guarantee_exits_2(
    make_job_stack: Callable[[dict[str, Any], str], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = job_stack_values("research-dev")
    jobs = config["trainingJobs"]
    index = next(i for i, j in enumerate(jobs) if j["launcher"] == "volcano")
    jobs[index]["nodes"] = 4  # research guarantees 3 GPUs (its nominal quota)
    project = make_job_stack(config, "research-dev")
    capsys.readouterr()
    rc = synth_cli.main(["--project", "jobs", "--stack", "t", "--project-dir", str(project)])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert f"gpu-platform-jobs:trainingJobs[{index}].nodes: got 4; " in err
    assert "guarantee" in err and "Traceback" not in err


JOB_STACKS = [("research_dev", "dev"), ("pretrain_prod", "prod"), ("research_prod", "prod")]


@pytest.mark.parametrize(("stack", "platform"), JOB_STACKS)
def test_kueue_resumes_every_suspended_launcher_of_a_job_stack(
    stack: str, platform: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    queues = local_queues(request.getfixturevalue(platform))
    assert suspended_but_unmanaged(launchers_of(result), queues) == []
