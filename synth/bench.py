"""`python -m synth.bench --stack prod`: synth's cost next to importing the Pulumi SDKs it uses.

1. Runs synth once under `python -X importtime` to learn which `pulumi*` modules it imports.
2. Alternates, `--runs` times each, a fresh `python -m synth --stack S` process and a fresh
   process that only imports those modules, and reports the medians and their ratio.
Both are measured in the same run on the same machine, so machine speed cancels out.
"""

from __future__ import annotations

import argparse
import compileall
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def sdk_modules(stack: str, out: Path) -> list[str]:
    """The `pulumi*` modules a synth run imports, in import order."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "synth", "--stack", stack, "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    )
    modules = []
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        name = line.rsplit("|", 1)[1].strip()
        if name.split(".", 1)[0] in {
            "pulumi",
            "pulumi_aws",
            "pulumi_eks",
            "pulumi_kubernetes",
            "pulumi_policy",
        }:
            modules.append(name)
    return modules


def _time(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    return time.perf_counter() - start


def compile_project() -> None:
    """Byte-compile the program's own modules, as Python's first import normally does.

    Site-packages were byte-compiled by pip; with PYTHONDONTWRITEBYTECODE set (as in some CI
    sandboxes) the project's modules would be recompiled in every synth process and not in the
    import-only baseline, which measures the environment rather than the program.
    """
    compileall.compile_dir(ROOT / "components", quiet=1)
    compileall.compile_dir(ROOT / "synth", quiet=1)
    compileall.compile_dir(ROOT / "policies", quiet=1)


def measure(stack: str, runs: int) -> dict[str, float]:
    compile_project()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        modules = sdk_modules(stack, out)
        import_cmd = [sys.executable, "-c", "\n".join(f"import {m}" for m in modules)]
        synth_cmd = [sys.executable, "-m", "synth", "--stack", stack, "--out", str(out)]
        _time(import_cmd)  # warm the OS file cache for both
        synth, imports = [], []
        for _ in range(runs):
            synth.append(_time(synth_cmd))
            imports.append(_time(import_cmd))
    synth_s, import_s = statistics.median(synth), statistics.median(imports)
    return {
        "modules": float(len(modules)),
        "synth_s": synth_s,
        "import_s": import_s,
        "ratio": synth_s / import_s,
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m synth.bench")
    parser.add_argument("--stack", default="prod")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-ratio", type=float, default=None, help="exit 1 above this")
    args = parser.parse_args()
    result = measure(args.stack, args.runs)
    print(
        f"stack {args.stack}: synth {result['synth_s']:.2f} s, SDK imports "
        f"({int(result['modules'])} modules) {result['import_s']:.2f} s, "
        f"ratio {result['ratio']:.2f} (median of {args.runs})"
    )
    if args.max_ratio is not None and result["ratio"] > args.max_ratio:
        print(f"ratio above {args.max_ratio}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
