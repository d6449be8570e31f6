"""CI workflows: prod is only reachable from a runner inside its VPC; releases sign images as the
identity prod admission trusts."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path
from typing import Any

import yaml

from components.config.load import parse
from synth.harness import PROJECT_ROOT
from tests.conftest import stack_values, values_with_jobs

WORKFLOWS = PROJECT_ROOT / ".github" / "workflows"
PROD_RUNNER = ["self-hosted", "gpu-platform-prod"]
#: Inside the fleet manager's VPC: the manager's and, over the peering, the workers' private
#: endpoints (docs/fleet.md).
FLEET_RUNNER = ["self-hosted", "gpu-platform-fleet"]


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
    seen, fleet = [], []
    for workflow in ("deploy.yml", "preview.yml"):
        for name, job in _jobs(workflow).items():
            for command, stack in _commands(job):
                if stack.endswith("/gpu-platform/prod"):
                    seen.append((workflow, command))
                    assert job["runs-on"] == PROD_RUNNER, (workflow, name)
                elif "gpu-platform-fleet/" in stack or (
                    "matrix.stack" in stack and "fleet" in name
                ):
                    fleet.append((workflow, command))
                    assert job["runs-on"] == FLEET_RUNNER, (workflow, name)
                else:
                    assert job["runs-on"] != PROD_RUNNER, (workflow, name)
    assert sorted(seen) == [("deploy.yml", "up"), ("preview.yml", "preview")]
    # The fleet's workers and manager: previews and deploys, on the fleet's runner.
    assert sorted(set(fleet)) == [("deploy.yml", "up"), ("preview.yml", "preview")]


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
    assert {"gpu-platform-prod", "gpu-platform-fleet"} <= set(
        config["self-hosted-runner"]["labels"]
    )
    assert Path(WORKFLOWS / "deploy.yml").exists()


def _documented_keyless_config() -> dict[str, Any]:
    """The config docs/images.md gives a stack that runs release.yml's image."""
    text = (PROJECT_ROOT / "docs" / "images.md").read_text()
    block = text.split("instead of building its own sets:")[1].split("```yaml")[1].split("```")[0]
    return dict(yaml.safe_load(textwrap.dedent(block)))


def test_the_release_workflow_signs_as_the_documented_keyless_config_trusts() -> None:
    """release.yml publishes the trainer to GHCR signed keylessly; a stack that runs that
    release (docs/images.md) trusts exactly its identity: the workflow must run on tags, get an
    OIDC token, sign the pushed digest (never a tag), and push the repository the config lists."""
    workflow = yaml.safe_load((WORKFLOWS / "release.yml").read_text())
    triggers = workflow[True]  # YAML 1.1 reads the key `on` as True
    assert list(triggers) == ["push"] and triggers["push"]["tags"] == ["v*"]
    (job,) = workflow["jobs"].values()
    assert job["permissions"]["id-token"] == "write"
    runs = [step.get("run", "") for step in job["steps"]]
    (sign,) = [r for r in runs if r.startswith("cosign sign")]
    assert '"${IMAGE}@${DIGEST}"' in sign
    assert any(r.startswith("cosign verify") for r in runs)
    raw = values_with_jobs("prod")
    documented = _documented_keyless_config()
    raw["gpu-platform:security"]["imageAdmission"] = documented["gpu-platform:security"][
        "imageAdmission"
    ]
    cfg = parse({k.split(":", 1)[1]: v for k, v in raw.items() if k.startswith("gpu-platform:")})
    signatures = cfg.security.image_admission.signatures
    assert signatures.signer == "keyless"
    assert signatures.keyless_issuer == "https://token.actions.githubusercontent.com"
    subject = "https://github.com/gpu-platform/gpu-platform/.github/workflows/release.yml@refs/tags/v0.2.0"
    assert re.match(signatures.keyless_subject_regexp or "", subject)
    assert not re.match(signatures.keyless_subject_regexp or "", subject.replace("release", "ci"))
    # The repository it pushes is the one the config says the identity signs.
    assert job["env"]["IMAGE"] in signatures.signed_repositories
    # The image it pushes is in a registry the admission policy allows.
    assert any(
        job["env"]["IMAGE"].startswith(prefix)
        for prefix in cfg.security.image_admission.allowed_registries
    )


def test_the_deploy_jobs_can_build_and_sign_the_trainer() -> None:
    """`pulumi up` builds the trainer (BuildKit) and signs it (cosign): both deploy jobs set
    them up first, with actions pinned by SHA (docs/images.md)."""
    for name, job in _jobs("deploy.yml").items():
        if any("gpu-platform-fleet/" in stack for _, stack in _commands(job)):
            continue  # a fleet's manager builds no image (its workers do)
        uses = [step.get("uses", "") for step in job["steps"]]
        up = next(i for i, u in enumerate(uses) if u.startswith("pulumi/actions@"))
        for action in ("docker/setup-buildx-action@", "sigstore/cosign-installer@"):
            found = [i for i, u in enumerate(uses) if u.startswith(action)]
            assert found and found[0] < up, f"{name}: {action} before pulumi up"
            assert re.fullmatch(r"[0-9a-f]{40}", uses[found[0]].split("@")[1].split()[0])


def _stacks_of(job: dict[str, Any]) -> list[tuple[str, str]]:
    """(project, stack) of each platform or fleet stack a job runs `pulumi` on: its
    `stack-name`'s last parts, a matrix expression expanded over the job's matrix."""
    found = []
    for _, name in _commands(job):
        matrix = job.get("strategy", {}).get("matrix", {})
        rows = matrix.get("include") or [{"stack": s} for s in matrix.get("stack", [])] or [{}]
        for row in rows:
            expanded = name
            for key, value in row.items():
                expanded = expanded.replace("${{ matrix." + key + " }}", str(value))
            if "${{ matrix.project == 'fleet'" in expanded:
                project = "fleet" if row.get("project") == "fleet" else "platform"
            else:
                project = "fleet" if "/gpu-platform-fleet/" in expanded else "platform"
            found.append((project, expanded.rsplit("/", 1)[-1]))
    return found


def test_each_stack_gets_aws_credentials_for_its_own_region() -> None:
    """prod-usw2 deploys with us-west-2 credentials: the region comes from the stack file
    (synth.region), never a literal shared by every stack (cosign's KMS client reads it from
    the environment: trainer_image.py)."""
    from synth.region import ROOTS, stack_region

    checked = set()
    for workflow in ("deploy.yml", "preview.yml"):
        for name, job in _jobs(workflow).items():
            steps = job["steps"]
            (aws,) = [
                s for s in steps if s.get("uses", "").startswith("aws-actions/configure-aws-")
            ]
            assert aws["with"]["aws-region"] == "${{ steps.region.outputs.region }}", name
            (region,) = [s for s in steps if s.get("id") == "region"]
            assert steps.index(region) < steps.index(aws)
            script = region["run"]
            for project, stack in _stacks_of(job):
                # The step reads this job's stack, by name or through the matrix variables.
                assert f"--stack {stack}" in script or '--stack "$STACK"' in script, name
                assert project == "platform" or "--project" in script, name
                checked.add((project, stack, stack_region(stack, ROOTS[project])))
    assert ("platform", "prod-usw2", "us-west-2") in checked
    assert {(p, s) for p, s, _ in checked} >= {
        ("platform", "dev"),
        ("platform", "prod"),
        ("platform", "prod-use1"),
        ("fleet", "prod"),
    }


def test_deploy_credentials_last_as_long_as_the_job_may_run() -> None:
    """configure-aws-credentials' session is not renewed, and a first `up` (cluster, node
    groups, the trainer's build and push) runs past the action's one-hour default: each deploy
    job's session lasts its whole timeout."""
    for name, job in _jobs("deploy.yml").items():
        (aws,) = [
            s for s in job["steps"] if s.get("uses", "").startswith("aws-actions/configure-aws-")
        ]
        assert int(aws["with"]["role-duration-seconds"]) == job["timeout-minutes"] * 60, name
    assert _jobs("deploy.yml")["dev"]["timeout-minutes"] * 60 > 3600


def test_every_pulumi_run_records_who_deployed() -> None:
    from components.training_jobs.plan import DEPLOY_RUN_ENV, DEPLOYED_BY_ENV

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


# --- hardening (docs/security.md "Delivery chain") ------------------------------------------

SHA_PIN = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")


def _workflows() -> dict[str, dict[str, Any]]:
    return {path.name: yaml.safe_load(path.read_text()) for path in sorted(WORKFLOWS.glob("*.yml"))}


def test_every_action_is_pinned_to_a_commit_with_its_release_named() -> None:
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for line in path.read_text().splitlines():
            if "uses:" not in line:
                continue
            ref = line.split("uses:", 1)[1].split("#", 1)[0].strip()
            assert SHA_PIN.match(ref), (path.name, line)
            assert re.search(r"# v\d+\.\d+\.\d+$", line), (path.name, line)


def test_no_workflow_grants_write_at_workflow_level() -> None:
    assert _workflows()
    for name, workflow in _workflows().items():
        assert workflow["permissions"] == {}, name
        for job_name, job in workflow["jobs"].items():
            assert "permissions" in job, (name, job_name)


def test_every_checkout_drops_its_credentials() -> None:
    checkouts = 0
    for name, workflow in _workflows().items():
        for job in workflow["jobs"].values():
            for step in job["steps"]:
                if step.get("uses", "").startswith("actions/checkout@"):
                    assert step["with"]["persist-credentials"] is False, name
                    checkouts += 1
    assert checkouts >= len(_workflows())


def test_no_expression_of_matrix_inputs_or_event_data_in_a_script() -> None:
    assert _workflows()
    for name, workflow in _workflows().items():
        for job in workflow["jobs"].values():
            for step in job["steps"]:
                script = step.get("run", "")
                assert "${{" not in script, (name, step.get("name"), script)


def test_workflows_lint_clean_with_actionlint_shellcheck_and_zizmor() -> None:
    import os
    import shutil
    import subprocess
    import sys

    # The virtualenv's own scripts first: README command 2 runs pytest without activating it.
    where = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    tools = {
        name: shutil.which(name, path=where) for name in ("actionlint", "shellcheck", "zizmor")
    }
    assert all(tools.values()), tools  # requirements-dev.txt installs all three
    files = sorted(str(p) for p in WORKFLOWS.glob("*.yml"))
    lint = subprocess.run(
        [str(tools["actionlint"]), "-shellcheck", str(tools["shellcheck"]), *files],
        capture_output=True,
        text=True,
        check=False,
    )
    assert lint.returncode == 0, lint.stdout + lint.stderr
    audit = subprocess.run(
        [
            str(tools["zizmor"]),
            "--offline",
            "--no-progress",
            str(WORKFLOWS),
            str(WORKFLOWS.parent / "dependabot.yml"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert audit.returncode == 0, audit.stdout + audit.stderr
