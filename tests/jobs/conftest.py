"""Fixtures of the job-stack tests: job stacks synthesized against the session's platform synths
(the `dev`/`prod` fixtures of tests/conftest.py), and throw-away job projects for the CLI."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from synth.jobs import JOBS_ROOT

#: The committed job stacks: stack name -> (platform fixture, team, team namespace).
JOB_STACKS = {
    "research-dev": ("dev", "research", "team-research"),
    "pretrain-prod": ("prod", "pretrain", "team-pretrain"),
    "research-prod": ("prod", "research", "team-research"),
    "pretrain-fleet": ("fleet_prod", "pretrain", "team-pretrain"),
}


@pytest.fixture
def make_job_stack(tmp_path: Path) -> Callable[[dict[str, Any], str], Path]:
    """A job project directory (links to jobs/__main__.py and jobs/Pulumi.yaml) with stack `t`
    holding `config` (bare keys go in the `gpu-platform-jobs:` namespace) and the pack config of
    committed job stack `like`."""

    def make(config: dict[str, Any], like: str) -> Path:
        for name in ("__main__.py", "Pulumi.yaml"):
            (tmp_path / name).symlink_to(JOBS_ROOT / name)
        full = {(k if ":" in k else f"gpu-platform-jobs:{k}"): v for k, v in config.items()}
        (tmp_path / "Pulumi.t.yaml").write_text(yaml.safe_dump({"config": full}))
        (tmp_path / "policies").mkdir()
        (tmp_path / "policies" / "config.t.json").symlink_to(
            JOBS_ROOT / "policies" / f"config.{like}.json"
        )
        return tmp_path

    return make


def job_stack_values(stack: str) -> dict[str, Any]:
    """A committed job stack's config (bare keys), for tests to modify."""
    data = yaml.safe_load((JOBS_ROOT / f"Pulumi.{stack}.yaml").read_text())["config"]
    return {key.split(":", 1)[1]: value for key, value in data.items()}
