"""gpu-platform composition root: load the stack config, build the platform, export.

`pulumi up` runs this file; the whole program is one typed function,
`components.roots.platform_stack.platform` (docs/architecture.md "Composition roots").
`result` is what it built and judged, which `python -m synth` reads (synth/harness.py);
`pulumi up` ignores it.
"""

from pathlib import Path

from components.roots.platform_stack import platform
from components.roots.results import PlatformRoot

result: PlatformRoot = platform(Path(__file__).parent)
