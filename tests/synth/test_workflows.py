"""CI workflows: prod's private endpoint is only reachable from a runner inside its VPC."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from synth.harness import PROJECT_ROOT
from tests.conftest import stack_values

WORKFLOWS = PROJECT_ROOT / ".github" / "workflows"
PROD_RUNNER = ["self-hosted", "gpu-platform-prod"]


def _jobs(name: str) -> dict[str, Any]:
    jobs: dict[str, Any] = yaml.safe_load((WORKFLOWS / name).read_text())["jobs"]
    return jobs


def _commands(job: dict[str, Any]) -> list[tuple[str, str]]:
    return [
        (step["with"]["command"], step["with"]["stack-name"])
        for step in job["steps"]
        if step.get("uses", "").startswith("pulumi/actions@")
    ]


def test_prod_has_a_private_endpoint() -> None:
    assert stack_values("prod")["gpu-platform:cluster"].get("endpointPublicAccess") in (None, False)


def test_every_job_touching_prod_runs_on_the_runner_inside_the_vpc() -> None:
    seen = []
    for workflow in ("deploy.yml", "preview.yml"):
        for name, job in _jobs(workflow).items():
            for command, stack in _commands(job):
                if stack.endswith("/prod"):
                    seen.append((workflow, command))
                    assert job["runs-on"] == PROD_RUNNER, (workflow, name)
                else:
                    assert job["runs-on"] != PROD_RUNNER, (workflow, name)
    assert sorted(seen) == [("deploy.yml", "up"), ("preview.yml", "preview")]


def test_prod_deploys_after_dev_and_fork_prs_never_reach_the_prod_runner() -> None:
    deploy = _jobs("deploy.yml")
    assert deploy["prod"]["needs"] == "dev"
    assert deploy["prod"]["environment"] == "production"
    preview = _jobs("preview.yml")
    assert preview["preview-prod"]["if"] == (
        "github.event.pull_request.head.repo.full_name == github.repository"
    )


def test_actionlint_knows_the_self_hosted_label() -> None:
    config = yaml.safe_load((PROJECT_ROOT / ".github" / "actionlint.yaml").read_text())
    assert "gpu-platform-prod" in config["self-hosted-runner"]["labels"]
    assert Path(WORKFLOWS / "deploy.yml").exists()


def test_every_pulumi_run_records_who_deployed() -> None:
    from components.workloads.plan import DEPLOY_RUN_ENV, DEPLOYED_BY_ENV

    seen = 0
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for name, job in _jobs(path.name).items():
            for step in job["steps"]:
                if not step.get("uses", "").startswith("pulumi/actions@"):
                    continue
                seen += 1
                env = step.get("env", {})
                assert env.get(DEPLOYED_BY_ENV) == "${{ github.actor }}", (path.name, name)
                assert env.get(DEPLOY_RUN_ENV, "").endswith("/actions/runs/${{ github.run_id }}")
    assert seen >= 4
