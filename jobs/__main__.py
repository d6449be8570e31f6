"""gpu-platform-jobs composition root: one team's training jobs on a platform stack.

`pulumi up` runs this file; the whole program is one typed function,
`components.roots.job_stack.team_jobs` (docs/architecture.md "Composition roots").
`result` is what it built and judged, which `python -m synth` reads (synth/harness.py);
`pulumi up` ignores it.
"""

import sys
from pathlib import Path

# `pulumi up` runs the project directory with `runpy.run_path` (pulumi/pulumi
# sdk/python/cmd/pulumi-language-python-exec): jobs/ is on sys.path and `__file__` is this file.
# The platform's packages (components/) live one level up, in the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from components.roots.job_stack import team_jobs
from components.roots.results import FleetJobsRoot, TeamJobsRoot

result: TeamJobsRoot | FleetJobsRoot = team_jobs()
