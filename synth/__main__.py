"""`python -m synth --stack <name> [--out DIR]`: offline preview of what `pulumi up` would create.

`--project jobs --stack <team>-<env>` synthesizes a team's job stack (jobs/) instead, against
the platform's own synth of the stack it references (synth/jobs.py); output in build/jobs/<stack>.
`--project fleet --stack <s>` synthesizes a fleet's manager (fleet/) and, first, every worker
stack it names (synth/fleet.py); output in build/fleet/<stack>.

Exit codes: 0 synthesized; 1 mandatory policy violation; 2 invalid config (one line per
problem, no traceback); 3 internal error (a bug: the traceback is printed).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import os
import sys
import traceback
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

if TYPE_CHECKING:
    from synth.harness import SynthResult

EXIT_OK = 0
EXIT_POLICY = 1
EXIT_CONFIG = 2
EXIT_INTERNAL = 3
GC_THRESHOLD = 200_000


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m synth", description="Synthesize a stack offline under Pulumi's mocks."
    )
    parser.add_argument("--stack", required=True, help="stack name (reads Pulumi.<stack>.yaml)")
    parser.add_argument("--out", type=Path, help="output directory (default: build/<stack>)")
    parser.add_argument(
        "--project-dir",
        type=Path,
        help="directory with Pulumi.yaml, Pulumi.<stack>.yaml and __main__.py (default: this repo)",
    )
    parser.add_argument(
        "--project",
        choices=("platform", "jobs", "fleet"),
        default="platform",
        help="platform (this repo's root), jobs (a team's job stack, jobs/Pulumi.<stack>.yaml) "
        "or fleet (a fleet's manager, fleet/Pulumi.<stack>.yaml)",
    )
    return parser


def _announce(
    stack: str, result: Any, out_dir: Path, paths: list[Path], violations: list[Any]
) -> None:
    """What was written, and each policy violation (mandatory ones on stderr)."""
    from synth import policy

    print(f"synthesized {stack}: {len(result.resources)} resources -> {out_dir}")
    for path in paths:
        print(f"  {path.name}")
    for v in violations:
        stream = sys.stderr if policy.is_mandatory(v) else sys.stdout
        print(f"{v.enforcement} {v.policy}: {v.urn}: {v.message}", file=stream)


def _synthesize(stack: str, root: Path, *, project: str) -> SynthResult | None:
    """The synthesized stack, or None when the user's input is wrong: the config, what a
    component judged of it, or the stack file (each reason printed on stderr, no traceback)."""
    import pulumi

    from components.config import ConfigError
    from synth.fleet import run_fleet
    from synth.harness import StackFileError, run_program
    from synth.jobs import run_job_stack

    try:
        if project == "jobs":
            return run_job_stack(stack, root=root)
        if project == "fleet":
            return run_fleet(stack, root=root)
        return run_program(stack, root=root)
    except ConfigError as exc:
        for line in exc.lines:
            print(line, file=sys.stderr)
    except pulumi.RunError as exc:
        # Raised by a component for a config the model could not judge alone (e.g. more
        # AZs than the region has): still the user's input, still no traceback.
        print(str(exc), file=sys.stderr)
    except StackFileError as exc:
        print(f"stack {stack}: {exc}", file=sys.stderr)
    return None


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    # A synth allocates ~500k short-lived objects (Outputs, futures) on top of the SDKs' large
    # heap; with the default thresholds the cyclic GC rescans that heap hundreds of times. A
    # short-lived run can collect rarely, as mypy does (its build sets the same thresholds);
    # the command line (below) does not collect at all.
    gc.set_threshold(GC_THRESHOLD, 30, 30)
    try:
        # Imported here so that argument errors answer fast, and import bugs exit 3.
        from policies.rules import all_policies
        from synth import output, policy
        from synth.fleet import FLEET_ROOT
        from synth.harness import PROJECT_ROOT
        from synth.jobs import JOBS_ROOT

        roots = {"jobs": JOBS_ROOT, "fleet": FLEET_ROOT, "platform": PROJECT_ROOT}
        root = args.project_dir or roots[args.project]
        policies = all_policies()
        try:
            pack_config = policy.load_config(policy.config_path(root, args.stack), policies)
        except policy.PolicyConfigError as exc:
            for line in exc.lines:
                print(line, file=sys.stderr)
            return EXIT_CONFIG
        result = _synthesize(args.stack, root, project=args.project)
        if result is None:
            return EXIT_CONFIG
        violations = policy.evaluate(result, policies, pack_config)
        result.policy_violations = [v.to_json() for v in violations]
        default_out = (
            root / "build" if args.project == "platform" else PROJECT_ROOT / "build" / args.project
        )
        out_dir = args.out or default_out / args.stack
        paths = output.write(result, out_dir)
    except Exception:  # noqa: BLE001 - anything else is a bug; Python's own exit 1 would lie
        traceback.print_exc()
        return EXIT_INTERNAL
    mandatory = [v for v in violations if policy.is_mandatory(v)]
    try:
        _announce(args.stack, result, out_dir, paths, violations)
        if mandatory:
            print(f"{len(mandatory)} mandatory policy violation(s)", file=sys.stderr)
    except BrokenPipeError:
        # `python -m synth ... | head`: the reader left. The files are written and the exit
        # code still says what synth found; Python must not complain when flushing at exit.
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - lives until the process exits
    return EXIT_POLICY if mandatory else EXIT_OK


def exit_now(code: int) -> NoReturn:
    """End the process without tearing down the interpreter.

    At exit Python runs a full garbage collection over the synth's heap (the SDKs' modules plus
    hundreds of thousands of Outputs, futures and protobuf messages, most of them in reference
    cycles) and then frees every module: a fifth of a 100-team synth's CPU time, growing with the
    stack. By now every file is written and closed; flushing the standard streams is all that
    is left. mypy ends its command line the same way (`util.hard_exit`).
    """
    for stream in (sys.stdout, sys.stderr):
        # The reader may have left (`| head`) or the stream be closed: nothing to deliver then.
        with contextlib.suppress(BrokenPipeError, ValueError):
            stream.flush()
    os._exit(code)


if __name__ == "__main__":
    # One synth in one process that ends in `exit_now`: the cyclic collector would only delay
    # freeing the cycles the SDK leaves behind (Output and future chains, ~20 MB for 200 teams)
    # until the process ends anyway. Its young-generation passes over the growing heap cost a
    # tenth of a 200-team synth. In-process callers (tests) keep `main`'s thresholds.
    gc.disable()
    exit_now(main())
