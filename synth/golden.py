"""Golden hashes of the synth output: `python -m synth.golden --write` records the sha256 of every
file `python -m synth` writes for dev and prod in tests/golden/<stack>.sha256; the test suite
compares against them. A refactor must leave them unchanged; a deliberate change to what the
program registers rewrites them in the same commit, so every output change shows in review."""

from __future__ import annotations

import argparse
import hashlib
import sys
import tempfile
from pathlib import Path

from policies.rules import all_policies
from synth import output, policy
from synth.harness import PROJECT_ROOT, SynthResult, run_program

GOLDEN_DIR = PROJECT_ROOT / "tests" / "golden"
STACKS = ("dev", "prod")


def with_policy(result: SynthResult) -> SynthResult:
    """`result` with the policy pack's verdict, as `python -m synth` adds it before writing."""
    if result.policy_violations is None:
        policies = all_policies()
        pack_config = policy.load_config(policy.config_path(PROJECT_ROOT, result.stack), policies)
        violations = policy.evaluate(result, policies, pack_config)
        result.policy_violations = [v.to_json() for v in violations]
    return result


def digests(result: SynthResult) -> dict[str, str]:
    """File name -> sha256 of what `python -m synth` writes for `result` (policy included)."""
    result = with_policy(result)
    with tempfile.TemporaryDirectory() as tmp:
        paths = output.write(result, Path(tmp))
        return {path.name: hashlib.sha256(path.read_bytes()).hexdigest() for path in paths}


def render(found: dict[str, str]) -> str:
    return "".join(f"{digest}  {name}\n" for name, digest in sorted(found.items()))


def read(stack: str) -> dict[str, str]:
    lines = (GOLDEN_DIR / f"{stack}.sha256").read_text().splitlines()
    return {name: digest for digest, name in (line.split("  ", 1) for line in lines)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m synth.golden", description=__doc__)
    parser.add_argument("--write", action="store_true", help="record the current hashes")
    args = parser.parse_args(argv)
    changed = 0
    for stack in STACKS:
        found = digests(run_program(stack))
        path = GOLDEN_DIR / f"{stack}.sha256"
        if args.write:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(render(found))
        elif not path.exists() or read(stack) != found:
            changed += 1
            print(f"{stack}: output differs from {path.relative_to(PROJECT_ROOT)}")
    return 1 if changed else 0


if __name__ == "__main__":
    sys.exit(main())
