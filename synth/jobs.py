"""Offline synth of a team's job stack (`python -m synth --project jobs --stack <team>-<env>`).

The job program (jobs/__main__.py) reads the platform stack through a StackReference. Offline,
that reference is answered with the outputs of the platform's own synth of the referenced stack,
run first in the same process (same code, same stack file: what `pulumi up` of the platform
exports, with mock ids; ~5 s, deterministic, no credentials and no stale file to keep in step).
Then the job program runs under the same mocks; its checks (the platform's job rules and the
will-it-run hook, components/contract/platform_contract.py) raise `ConfigError` naming
`gpu-platform-jobs:trainingJobs[i]...` before anything is registered, and synth exits 2.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from components.config.job_stack import JOBS_NAMESPACE, job_namespace_values, parse_job_stack
from synth.fleet import FLEET_PROJECT, run_fleet
from synth.harness import PROJECT_ROOT, SynthResult, load_stack_config, run_program, with_overrides

JOBS_ROOT: Final = PROJECT_ROOT / "jobs"


def run_job_stack(
    stack: str,
    *,
    overrides: Mapping[str, Any] | None = None,
    platform: SynthResult | None = None,
    root: Path = JOBS_ROOT,
    deploy_env: Mapping[str, str] | None = None,
) -> SynthResult:
    """Synthesize job stack `stack`. `overrides` replace whole `gpu-platform-jobs:` keys (a bare
    key is put in that namespace); `platform` replaces the platform synth (tests pass
    their session's platform synth); `deploy_env` as in `run_program`. Raises like
    `run_program`."""
    _, config, _ = load_stack_config(stack, root)
    full = with_overrides(config, overrides, JOBS_NAMESPACE)
    jobs = parse_job_stack(job_namespace_values(config))
    if platform is None:
        platform = (
            run_fleet(jobs.platform_env)
            if jobs.platform_project == FLEET_PROJECT
            else run_program(jobs.platform_env)
        )
    result = run_program(
        stack,
        root=root,
        overrides=full,
        stack_refs={jobs.platform_stack: platform},
        deploy_env=deploy_env,
    )
    result.platform = platform
    # result.config: what jobs/__main__.py judged its jobs against (the platform's config with
    # this stack's jobs), read back by the harness rather than judged a second time.
    return result
