"""`python -m synth.region --stack <s> [--project platform|fleet]`: print the AWS region a stack
deploys to — its stack file's `aws:region`, read as the CLI reads it (harness.load_stack_config).

The deploy and preview workflows configure each stack's AWS credentials for this region
(.github/workflows/deploy.yml, preview.yml): the credentials' region is what every AWS client
`pulumi up` starts reads from the environment (aws-actions/configure-aws-credentials exports
AWS_REGION), and a stack in us-west-2 must not get us-east-1's. cosign's KMS client is one of
them: it takes its region from the environment, not from the key ARN it signs with
(components/platform/registry/trainer_image.py names the upstream lines).

Exit codes: 0 the region printed; 2 the stack file is missing or sets no `aws:region` (one line
naming the file).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from synth.fleet import FLEET_ROOT
from synth.harness import PROJECT_ROOT, StackFileError, load_stack_config

ROOTS = {"platform": PROJECT_ROOT, "fleet": FLEET_ROOT}
EXIT_OK = 0
EXIT_CONFIG = 2


def stack_region(stack: str, root: Path = PROJECT_ROOT) -> str:
    """`aws:region` of stack `stack` of the project in `root` (StackFileError when unset)."""
    _, config, _ = load_stack_config(stack, root)
    # The CLI hands config values over as strings (harness._encode): a region is one as is.
    value = config.get("aws:region", "")
    if not value:
        raise StackFileError(
            f"Pulumi.{stack}.yaml: `aws:region` is not set; the region the stack deploys to "
            "(e.g. `aws:region: us-west-2`)"
        )
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m synth.region", description="Print the AWS region a stack deploys to."
    )
    parser.add_argument("--stack", required=True)
    parser.add_argument("--project", choices=sorted(ROOTS), default="platform")
    args = parser.parse_args(argv)
    try:
        print(stack_region(args.stack, ROOTS[args.project]))
    except StackFileError as exc:
        print(exc, file=sys.stderr)
        return EXIT_CONFIG
    return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
