"""Entry point the Pulumi CLI runs: build the pack from the rule modules and serve it."""

import sys
from pathlib import Path

# The rules import `policies.rules` and `components.catalog` from the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pulumi_policy import EnforcementLevel, PolicyPack

from policies.rules import PACK_NAME, all_policies

PolicyPack(PACK_NAME, all_policies(), enforcement_level=EnforcementLevel.ADVISORY)
