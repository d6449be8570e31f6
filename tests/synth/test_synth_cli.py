"""`python -m synth` as a user runs it: files, exit codes, no traceback for config errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from synth import __main__ as synth_cli
from synth.harness import PROJECT_ROOT
from tests.conftest import stack_values

FILES = ("resources.json", "manifests.yaml", "helm-releases.yaml", "report.md")


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PULUMI_CONFIG"}
    return subprocess.run(
        [sys.executable, "-m", "synth", *args],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )


def test_cli_synthesizes_dev_and_writes_all_files(tmp_path: Path) -> None:
    proc = _run("--stack", "dev", "--out", str(tmp_path))
    assert proc.returncode == 0, proc.stderr
    for name in FILES:
        assert (tmp_path / name).stat().st_size > 0, name
    resources = json.loads((tmp_path / "resources.json").read_text())
    assert resources == sorted(resources, key=lambda r: r["urn"])
    assert {"urn", "type", "name", "parent", "provider", "dependencies", "custom", "inputs"} == set(
        resources[0]
    )


def test_cli_config_error_exits_2_without_traceback(
    make_stack: Callable[[dict[str, Any]], Path],
) -> None:
    cfg = stack_values("dev")
    cfg["gpu-platform:cluster"]["kubernetesVersion"] = "1.9"
    project = make_stack(cfg)
    proc = _run("--stack", "t", "--project-dir", str(project))
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.startswith('gpu-platform:cluster.kubernetesVersion: got "1.9"')


def test_missing_stack_file_exits_2() -> None:
    proc = _run("--stack", "does-not-exist")
    assert proc.returncode == 2
    assert "Pulumi.does-not-exist.yaml: file not found" in proc.stderr


def test_internal_error_exits_3_with_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from synth import harness

    def broken(*_: Any, **__: Any) -> None:
        raise RuntimeError("bug")

    monkeypatch.setattr(harness, "run_program", broken)
    assert synth_cli.main(["--stack", "dev"]) == synth_cli.EXIT_INTERNAL
    assert "Traceback" in capsys.readouterr().err
