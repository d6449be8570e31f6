"""The job program as the Pulumi language host runs it, not as synth does: a fresh interpreter
in jobs/, the repository root not importable, `runpy.run_path(".")` inside
`pulumi.runtime.run_in_stack` on a running event loop (pulumi/pulumi
sdk/python/cmd/pulumi-language-python-exec). This is where the sys.path fix of jobs/__main__.py
and the synchronous StackReference read of components/training_jobs/job_stack.py must hold."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from synth.harness import SynthResult, load_stack_config
from synth.jobs import JOBS_ROOT

HOST = """
import asyncio, json, runpy, sys
import pulumi
from pulumi.runtime import mocks

outputs, config = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
seen = []

class Platform(mocks.Mocks):
    def new_resource(self, args):
        seen.append(args.typ)
        if args.typ == "pulumi:pulumi:StackReference":
            state = {"name": args.inputs.get("name"), "outputs": outputs,
                     "secretOutputNames": ["kubeconfig"]}
            return args.name, state
        return args.name + "-id", args.inputs

    def call(self, args):
        return {}, []

pulumi.runtime.set_mocks(Platform(), project="gpu-platform-jobs", stack="t", preview=True)
pulumi.runtime.set_all_config(config, [])
pulumi.runtime.settings.ROOT.set(None)
assert "components" not in sys.modules
assert not any(__import__("os").path.isdir(p + "/components") for p in sys.path if p), sys.path
# The loop set_mocks bound the mock monitor to (the real host makes its loop before running).
loop = asyncio.get_event_loop()
try:
    loop.run_until_complete(
        pulumi.runtime.run_in_stack(lambda: runpy.run_path(".", run_name="__main__"))
    )
except pulumi.RunError as exc:
    print(str(exc), file=sys.stderr)
    sys.exit(1)
print(json.dumps(sorted(seen)))
"""


def _host(
    tmp_path: Path, outputs: dict[str, Any], config: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    (tmp_path / "outputs.json").write_text(json.dumps(outputs))
    (tmp_path / "config.json").write_text(json.dumps(config))
    (tmp_path / "host.py").write_text(HOST)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PULUMI_CONFIG")}
    files = [str(tmp_path / name) for name in ("host.py", "outputs.json", "config.json")]
    return subprocess.run(
        [sys.executable, *files],
        cwd=JOBS_ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=env,
        timeout=300,  # a hang (e.g. an await on the wrong loop) fails instead of blocking CI
    )


def test_job_program_runs_under_the_language_host(tmp_path: Path, dev: SynthResult) -> None:
    _, config, _ = load_stack_config("research-dev", JOBS_ROOT)
    proc = _host(tmp_path, dev.outputs, config)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert "pulumi:pulumi:StackReference" in seen
    assert "kubernetes:batch/v1:Job" in seen


def test_job_that_cannot_run_fails_the_language_host_without_traceback(
    tmp_path: Path, dev: SynthResult
) -> None:
    _, config, _ = load_stack_config("research-dev", JOBS_ROOT)
    jobs = json.loads(config["gpu-platform-jobs:trainingJobs"])
    jobs[0]["gpuClass"] = "h100-x8"
    config["gpu-platform-jobs:trainingJobs"] = json.dumps(jobs)
    proc = _host(tmp_path, dev.outputs, config)
    assert proc.returncode == 1
    assert "gpu-platform-jobs:trainingJobs[0].gpuClass: got" in proc.stderr
    assert "Traceback" not in proc.stderr
    # Nothing but the read of the platform stack happened before the check.
    assert "kubernetes:batch/v1:Job" not in proc.stdout
