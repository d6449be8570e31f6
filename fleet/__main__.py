"""gpu-platform-fleet composition root: the manager of a fleet of platform stacks (docs/fleet.md).

`pulumi up` runs this file; the whole program is one typed function,
`components.roots.fleet_manager.fleet_manager` (docs/architecture.md "Composition roots").
`result` is what it built and judged, which `python -m synth` reads (synth/harness.py);
`pulumi up` ignores it.
"""

import sys
from pathlib import Path

# `pulumi up` runs the project directory with `runpy.run_path` (pulumi/pulumi
# sdk/python/cmd/pulumi-language-python-exec): fleet/ is on sys.path; the platform's packages
# (components/) live one level up, in the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.roots.fleet_manager import fleet_manager
from components.roots.results import FleetRoot

result: FleetRoot = fleet_manager()
