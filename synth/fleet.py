"""Offline synth of a fleet's manager (`python -m synth --project fleet --stack <s>`): the whole
fleet, in one process.

The manager program (fleet/__main__.py) reads each worker's platform stack through a
StackReference. Offline, each reference is answered with the outputs of the platform's own
synth of that worker stack (Pulumi.<worker>.yaml in the repository root), run first in the same
process — the same code and stack files `pulumi up` of the workers would run, with mock ids —
and then the manager runs under the same mocks (docs/fleet.md). A job stack whose
`platformStack` is a manager is synthesized against this (synth/jobs.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from components.config.fleet_stack import FLEET_NAMESPACE, fleet_namespace_values, parse_fleet
from synth.harness import PROJECT_ROOT, SynthResult, load_stack_config, run_program, with_overrides

FLEET_ROOT: Final = PROJECT_ROOT / "fleet"
#: The manager project's name (fleet/Pulumi.yaml), as a job stack's `platformStack` names it.
FLEET_PROJECT: Final = "gpu-platform-fleet"


def run_fleet(
    stack: str,
    *,
    overrides: Mapping[str, Any] | None = None,
    workers: Mapping[str, SynthResult] | None = None,
    root: Path = FLEET_ROOT,
    deploy_env: Mapping[str, str] | None = None,
) -> SynthResult:
    """Synthesize manager stack `stack` and, first, every worker stack it names (`workers`:
    worker stack name -> a synth to use instead, as tests pass theirs). `overrides` replace
    whole `gpu-platform-fleet:` keys (a bare key is put in that namespace)."""
    _, config, _ = load_stack_config(stack, root)
    full = with_overrides(config, overrides, FLEET_NAMESPACE)
    cfg = parse_fleet(fleet_namespace_values(config))
    given = dict(workers or {})
    refs: dict[str, SynthResult] = {}
    for ref in cfg.workers:
        # A worker that runs another's trainer (fleet.trainerHome) reads that worker's synth.
        if ref.stack_name not in given:
            given[ref.stack_name] = run_program(ref.stack_name, workers=given)
        refs[ref.stack] = given[ref.stack_name]
    result = run_program(stack, root=root, overrides=full, stack_refs=refs, deploy_env=deploy_env)
    result.workers = dict(refs)
    return result
