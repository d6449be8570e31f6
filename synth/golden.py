"""Golden hashes of the synth output: `python -m synth.golden --write` records the sha256 of every
file `python -m synth` writes for the platform stacks (dev, prod and the fleet's workers:
tests/golden/<stack>.sha256), for every team job stack (`jobs/Pulumi.<stack>.yaml`:
tests/golden/jobs-<stack>.sha256) and every fleet manager (`fleet/Pulumi.<stack>.yaml`:
tests/golden/fleet-<stack>.sha256); the test suite compares against them. A refactor must
leave them unchanged; a deliberate change to what the programs register rewrites them in the
same commit, so every output change shows in review."""

from __future__ import annotations

import argparse
import functools
import hashlib
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from policies.rules import all_policies
from synth import output, policy
from synth.fleet import FLEET_ROOT, run_fleet
from synth.harness import PROJECT_ROOT, SynthResult, run_program
from synth.jobs import JOBS_ROOT, run_job_stack

GOLDEN_DIR = PROJECT_ROOT / "tests" / "golden"


def _stacks(root: Path) -> tuple[str, ...]:
    return tuple(
        sorted(
            p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in root.glob("Pulumi.*.yaml")
        )
    )


#: The platform stacks (the repository root's stack files): dev, prod and the fleet's workers.
STACKS = _stacks(PROJECT_ROOT)
#: The team job stacks, as `python -m synth --project jobs` finds them.
JOB_STACKS = _stacks(JOBS_ROOT)
#: The fleet managers, as `python -m synth --project fleet` finds them.
FLEET_STACKS = _stacks(FLEET_ROOT)
ROOTS = {"platform": PROJECT_ROOT, "jobs": JOBS_ROOT, "fleet": FLEET_ROOT}


def golden_path(stack: str, *, jobs: bool = False, project: str | None = None) -> Path:
    """Where the hashes of `project`'s stack `stack` are recorded (`jobs`: a job stack)."""
    project = project or ("jobs" if jobs else "platform")
    return GOLDEN_DIR / (
        f"{stack}.sha256" if project == "platform" else f"{project}-{stack}.sha256"
    )


def with_policy(
    result: SynthResult, *, jobs: bool = False, project: str | None = None
) -> SynthResult:
    """`result` with the policy pack's verdict, as `python -m synth` adds it before writing
    (a job stack's pack config lives in jobs/policies/, a manager's in fleet/policies/)."""
    if result.policy_violations is None:
        policies = all_policies()
        root = ROOTS[project or ("jobs" if jobs else "platform")]
        pack_config = policy.load_config(policy.config_path(root, result.stack), policies)
        violations = policy.evaluate(result, policies, pack_config)
        result.policy_violations = [v.to_json() for v in violations]
    return result


def digests(
    result: SynthResult, *, jobs: bool = False, project: str | None = None
) -> dict[str, str]:
    """File name -> sha256 of what `python -m synth` writes for `result` (policy included)."""
    result = with_policy(result, jobs=jobs, project=project)
    with tempfile.TemporaryDirectory() as tmp:
        paths = output.write(result, Path(tmp))
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}


def render(found: dict[str, str]) -> str:
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(found.items()))


def read(stack: str, *, jobs: bool = False, project: str | None = None) -> dict[str, str]:
    lines = golden_path(stack, jobs=jobs, project=project).read_text().splitlines()
    return {name: digest for digest, name in (line.split("  ", 1) for line in lines)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m synth.golden", description=__doc__)
    parser.add_argument("--write", action="store_true", help="record the current hashes")
    args = parser.parse_args(argv)
    changed = 0
    # Each synth is hashed before the next runs (the report reads the config its run judged).
    runs: list[tuple[str, str, Callable[[], SynthResult]]] = [
        *((stack, "platform", functools.partial(run_program, stack)) for stack in STACKS),
        *((stack, "jobs", functools.partial(run_job_stack, stack)) for stack in JOB_STACKS),
        *((stack, "fleet", functools.partial(run_fleet, stack)) for stack in FLEET_STACKS),
    ]
    for stack, project, synth in runs:
        found = digests(synth(), project=project)
        path = golden_path(stack, project=project)
        if args.write:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(found))
        elif not path.exists() or read(stack, project=project) != found:
            changed += 1
            print(f"{path.name}: output differs from {path.relative_to(PROJECT_ROOT)}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
