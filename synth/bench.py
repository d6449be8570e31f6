"""`python -m synth.bench --stack prod`: synth's cost next to importing the Pulumi SDKs it uses.

1. Runs synth once under `python -X importtime` to learn which `pulumi*` modules it imports.
2. Alternates, `--runs` times each, a fresh `python -m synth --stack S` process and a fresh
   process that only imports those modules, and reports the ratio of their best CPU times
   (and, for reference, of their wall-clock times).
Both are measured in the same run on the same machine, so machine speed cancels out.
"""

from __future__ import annotations

import argparse
import compileall
import resource
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


def time_command(cmd: list[str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds user+system) of one run of `cmd`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, cwd=ROOT, check=True, capture_output=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


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
        imports_py = "\n".join(f"import {m}" for m in modules)
        import_cmd = [sys.executable, "-c", imports_py]
        # The same imports with synth's GC setting (the CLI switches the cyclic collector off):
        # separates what that saves on imports from what it saves on the program's own work.
        tuned_cmd = [sys.executable, "-c", f"import gc; gc.disable()\n{imports_py}"]
        synth_cmd = [sys.executable, "-m", "synth", "--stack", stack, "--out", str(out)]
        time_command(import_cmd)  # warm the OS file cache for both
        synth, imports, tuned = [], [], []
        for _ in range(runs):
            synth.append(time_command(synth_cmd))
            imports.append(time_command(import_cmd))
            tuned.append(time_command(tuned_cmd))
    # Best of N, as timeit advises: interference only ever adds time, so the minimum is the
    # best estimate of each side's own cost. CPU time (user + system) is the gated figure: on
    # a shared VM wall time swings by a third between identical runs; wall is reported too.
    synth_cpu, import_cpu = min(c for _, c in synth), min(c for _, c in imports)
    synth_wall, import_wall = min(w for w, _ in synth), min(w for w, _ in imports)
    return {
        "modules": float(len(modules)),
        "synth_s": synth_cpu,
        "import_s": import_cpu,
        "ratio": synth_cpu / import_cpu,
        "wall_ratio": synth_wall / import_wall,
        "median_wall_ratio": statistics.median(w for w, _ in synth)
        / statistics.median(w for w, _ in imports),
        "tuned_ratio": synth_cpu / min(c for _, c in tuned),
    }


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m synth.bench")
    parser.add_argument("--stack", default="prod")
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--max-ratio", type=float, default=None, help="exit 1 above this")
    args = parser.parse_args()
    result = measure(args.stack, args.runs)
    print(
        f"stack {args.stack}: synth {result['synth_s']:.2f} s CPU, SDK imports "
        f"({int(result['modules'])} modules) {result['import_s']:.2f} s CPU, "
        f"ratio {result['ratio']:.2f} (best of {args.runs}); wall-clock ratio "
        f"{result['wall_ratio']:.2f} best, {result['median_wall_ratio']:.2f} median; "
        f"against imports with synth's GC setting {result['tuned_ratio']:.2f}"
    )
    if args.max_ratio is not None and result["ratio"] > args.max_ratio:
        print(f"ratio above {args.max_ratio}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
