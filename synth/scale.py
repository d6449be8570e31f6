"""Team-scale synth: a generated prod-like platform stack with N teams and no training jobs,
and `python -m synth.scale`, the benchmark that times synthesizing it at several sizes.

With training jobs moved to per-team job stacks, what a platform synth costs depends on the
number of teams only. The generated stack is `Pulumi.prod.yaml` without `trainingJobs` and with
`teams` replaced by N generated tenants; the Karpenter pools' GPU limits grow with N so that
the nominal quotas stay within what the pools provide (the config model refuses more).

    python -m synth.scale --teams 100 200 --runs 5 --max-seconds 5 --max-ratio 2.0

synthesizes each size in a fresh `python -m synth` process (imports count the same for every
size), the sizes interleaved run by run, and reports best-of-N wall-clock and CPU seconds and
the ratio of the largest size to the smallest. With `--max-seconds` / `--max-ratio` it exits 1
when the smallest size's best time or the ratio of best times is above the bound; the bounds
apply to CPU time (user + system) unless `--clock wall`, as in `python -m synth.bench`.
"""

from __future__ import annotations

import argparse
import copy
import json
import math
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from components import catalog

ROOT = Path(__file__).resolve().parent.parent
PROJECT = "gpu-platform"
STACK = "scale"
#: The stack the generated one is derived from, and whose policy-pack config it runs with.
BASE_STACK = "prod"
#: What the project directory links to in the real repository (the program, not a copy).
PROGRAM_FILES = ("__main__.py", "Pulumi.yaml", "components")

#: HTTPS egress of every team, as in Pulumi.prod.yaml: the VPC and S3's us-east-1 ranges.
_EGRESS = ["10.0.0.0/16", "52.216.0.0/15", "54.231.0.0/16", "3.5.0.0/19"]
#: Quota shapes teams cycle through: (GPU class, capacity type, GPUs, CPU cores, memory GiB).
#: Only flavors that Karpenter pools provide, so that capacity can grow with the teams (prod's
#: node groups - H100 on-demand, L40S spot and on-demand - keep their fixed maxSize).
_QUOTA_SHAPES: tuple[tuple[tuple[str, str, int, int, int], ...], ...] = (
    (("l4-x1", "spot", 4, 32, 128),),
    (("l4-x1", "spot", 2, 16, 64), ("l4-x1", "on-demand", 1, 8, 32)),
    (("l4-x1", "spot", 4, 32, 128), ("l4-x1", "on-demand", 1, 8, 32)),
)


def team(index: int) -> dict[str, Any]:
    """The `index`-th generated tenant, in the stack file's (camelCase) shape."""
    name = f"team-{index:04d}"
    quota: list[dict[str, Any]] = [
        {
            "gpuClass": gpu_class,
            "capacityType": capacity,
            "gpus": gpus,
            "cpu": cpu,
            "memoryGib": memory,
        }
        for gpu_class, capacity, gpus, cpu, memory in _QUOTA_SHAPES[index % len(_QUOTA_SHAPES)]
    ]
    # Borrowing is bounded for every other team, lending for every third: both code paths.
    if index % 2:
        quota[0]["borrowingLimitGpus"] = 4
    if index % 3 == 1:
        quota[0]["lendingLimitGpus"] = 1
    nominal = sum(entry["gpus"] for entry in quota)
    return {
        "name": name,
        "namespace": name,
        "group": f"gpu-platform:{name}",
        "datasetPrefix": f"corpora/{name}",
        "quota": quota,
        "limits": {"gpus": 2 * nominal, "cpu": 128, "memoryGib": 512, "storageGib": 4096},
        "egress": {"httpsCidrs": list(_EGRESS)},
        "volcano": {"weight": 1 + index % 3},
    }


def scale_config(teams: int, base: Path | None = None) -> dict[str, Any]:
    """The stack file (`{"config": {...}}`) of a prod-like platform with `teams` tenants."""
    stack_file = base or ROOT / f"Pulumi.{BASE_STACK}.yaml"
    data = yaml.safe_load(stack_file.read_text())
    config: dict[str, Any] = copy.deepcopy(data["config"])
    config.pop(f"{PROJECT}:trainingJobs", None)
    tenants = [team(index) for index in range(teams)]
    config[f"{PROJECT}:teams"] = tenants
    needed: dict[tuple[str, str], int] = {}
    for tenant in tenants:
        for entry in tenant["quota"]:
            key = (entry["gpuClass"], entry["capacityType"])
            needed[key] = needed.get(key, 0) + entry["gpus"]
    max_per_pool = _max_gpus_per_pool()
    pools: list[dict[str, Any]] = []
    for pool in config[f"{PROJECT}:karpenter"]["pools"]:
        gpu_class = pool.get("gpuClass")
        key = (gpu_class or "", pool["capacityType"])
        # One pool per flavor in the base stack: it covers the teams' quota on its own (managed
        # groups are headroom), sharded into equal pools where one would exceed the policy
        # pack's per-pool bound.
        total = max(pool["limits"].get("gpus", 0), needed.pop(key, 0))
        if gpu_class is None or total <= max_per_pool:
            if gpu_class is not None:
                pool["limits"]["gpus"] = total
            pools.append(pool)
            continue
        shards = math.ceil(total / max_per_pool)
        for shard in range(shards):
            shard_pool = copy.deepcopy(pool)
            shard_pool["name"] = f"{pool['name']}-{shard}"
            shard_pool["limits"]["gpus"] = total // shards + (shard < total % shards)
            pools.append(shard_pool)
    config[f"{PROJECT}:karpenter"]["pools"] = pools
    if any(count > 0 for count in needed.values()):
        raise ValueError(f"no Karpenter pool provides {sorted(needed)}")
    _explain_unqueued(config, tenants)
    return {"config": config}


def _explain_unqueued(config: dict[str, Any], tenants: list[dict[str, Any]]) -> None:
    """The base stack's GPU sources no generated tenant's quota lists (its H100 and L40S
    capacity) stay as headroom and say so: the config check refuses a GPU source no team's
    queue reaches unless it has an `unqueuedReason`."""
    offered = {(q["gpuClass"], q["capacityType"]) for t in tenants for q in t["quota"]}
    reason = "team-scale benchmark headroom: no generated tenant's quota lists this flavor"
    groups = config[f"{PROJECT}:nodeGroups"]["gpu"]
    for group in groups:
        row = catalog.instance(group["instanceTypes"][0])
        capacity = (
            "reserved" if group["capacityType"] == "capacity-block" else group["capacityType"]
        )
        if (f"{row.gpu_model}-x{row.gpus}", capacity) not in offered:
            group["unqueuedReason"] = reason
    for pool in config[f"{PROJECT}:karpenter"]["pools"]:
        if pool.get("gpuClass") and (pool["gpuClass"], pool["capacityType"]) not in offered:
            pool["unqueuedReason"] = reason


def _max_gpus_per_pool() -> int:
    """The base stack's bound on one NodePool's GPUs (gpu-platform-karpenter-gpu-pool-limit)."""
    pack = json.loads((ROOT / "policies" / f"config.{BASE_STACK}.json").read_text())
    return int(pack["gpu-platform-karpenter-gpu-pool-limit"]["maxGpusPerPool"])


def write_project(directory: Path, teams: int, stack: str = STACK) -> Path:
    """A project directory for `python -m synth --project-dir`: links to the real program, the
    generated `Pulumi.<stack>.yaml`, and the base stack's policy-pack config."""
    directory.mkdir(parents=True, exist_ok=True)
    for name in PROGRAM_FILES:
        link = directory / name
        if not link.exists():
            link.symlink_to(ROOT / name)
    (directory / f"Pulumi.{stack}.yaml").write_text(
        yaml.safe_dump(scale_config(teams), sort_keys=False)
    )
    policies = directory / "policies"
    policies.mkdir(exist_ok=True)
    pack_config = policies / f"config.{stack}.json"
    if not pack_config.exists():
        pack_config.symlink_to(ROOT / "policies" / f"config.{BASE_STACK}.json")
    return directory


# --- benchmark ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timing:
    """Best-of-N figures of one size."""

    teams: int
    resources: int
    wall_s: float
    cpu_s: float


_SYNTHESIZED = re.compile(r"^synthesized \S+: (\d+) resources", re.MULTILINE)


def _synth_once(project: Path, out: Path) -> tuple[int, float, float]:
    """(resources, wall seconds, CPU seconds user+system) of one fresh synth process."""
    cmd = [sys.executable, "-m", "synth", "--project-dir", str(project)]
    cmd += ["--stack", STACK, "--out", str(out)]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise RuntimeError(f"synth exited {proc.returncode}:\n{proc.stdout}{proc.stderr}")
    match = _SYNTHESIZED.search(proc.stdout)
    if match is None:
        raise RuntimeError(f"no resource count in synth's output:\n{proc.stdout}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return int(match.group(1)), wall, cpu


def import_seconds(runs: int) -> float:
    """Best-of-`runs` CPU seconds of importing the provider SDK modules a prod synth imports
    (synth/bench.py's baseline): this machine's speed, the unit of `--max-import-multiple`."""
    from synth.bench import sdk_modules, time_command

    with tempfile.TemporaryDirectory(prefix="scale-imports-") as tmp:
        modules = sdk_modules("prod", Path(tmp))
    cmd = [sys.executable, "-c", "\n".join(f"import {m}" for m in modules)]
    time_command(cmd)  # warm the OS file cache
    return min(time_command(cmd)[1] for _ in range(runs))


def measure(sizes: Sequence[int], runs: int) -> list[Timing]:
    """Best-of-`runs` timings per size; sizes interleaved so that load swings hit all alike."""
    from synth.bench import compile_project

    compile_project()
    with tempfile.TemporaryDirectory(prefix="scale-") as tmp:
        projects = {n: write_project(Path(tmp) / f"teams-{n}", n) for n in sizes}
        samples: dict[int, list[tuple[int, float, float]]] = {n: [] for n in sizes}
        _synth_once(projects[sizes[0]], Path(tmp) / "warm")  # OS file cache, bytecode
        for run in range(runs):
            # Alternate the order too: whichever size runs first after a pause is not favoured.
            order = list(sizes) if run % 2 == 0 else list(reversed(sizes))
            for n in order:
                samples[n].append(_synth_once(projects[n], Path(tmp) / f"out-{n}"))
    timings = []
    for n in sizes:
        counts = {count for count, _, _ in samples[n]}
        if len(counts) != 1:
            raise RuntimeError(f"{n} teams: resource counts differ between runs: {counts}")
        timings.append(
            Timing(
                teams=n,
                resources=counts.pop(),
                # Best of N (timeit's advice): interference only ever adds time.
                wall_s=min(wall for _, wall, _ in samples[n]),
                cpu_s=min(cpu for _, _, cpu in samples[n]),
            )
        )
    return timings


def _parser() -> argparse.ArgumentParser:
    """The benchmark's command line: sizes, runs and the bounds a CI gate sets."""
    parser = argparse.ArgumentParser(
        prog="python -m synth.scale",
        description="Time synthesizing generated N-team platform stacks, each in a fresh process.",
    )
    parser.add_argument("--teams", type=int, nargs="+", default=[100, 200])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--max-seconds", type=float, help="exit 1 if the smallest size's best time is above"
    )
    parser.add_argument(
        "--max-ratio", type=float, help="exit 1 if largest/smallest best time is above"
    )
    parser.add_argument(
        "--max-import-multiple",
        type=float,
        help="exit 1 if the smallest size's best CPU time is above this many times the CPU "
        "time of importing the provider SDKs on the same machine (a bound that travels between "
        "machines of different speed; --max-seconds does not)",
    )
    parser.add_argument(
        "--clock",
        choices=("cpu", "wall"),
        default="cpu",
        help="what the bounds apply to (default cpu: synth is single-threaded, so on a quiet "
        "machine the two are close, and on a shared one wall-clock time also measures the "
        "neighbours)",
    )
    parser.add_argument(
        "--write-project",
        type=Path,
        metavar="DIR",
        help="only write a project directory for the first --teams size (to profile it)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    sizes = sorted(set(args.teams))
    if sizes[0] < 1 or args.runs < 1:
        parser.error("--teams and --runs must be at least 1")
    if args.write_project is not None:
        project = write_project(args.write_project, args.teams[0])
        print(f"python -m synth --project-dir {project} --stack {STACK}")
        return 0
    timings = measure(sizes, args.runs)
    for t in timings:
        print(
            f"{t.teams:5d} teams: {t.resources:6d} resources, {t.wall_s:6.2f} s wall, "
            f"{t.cpu_s:6.2f} s CPU (best of {args.runs})"
        )
    # Every bound is checked and reported, in this order, before the exit status is decided.
    exceeded = [
        _ratio_exceeded(timings, args),
        _import_multiple_exceeded(timings[0], args),
        _seconds_exceeded(timings[0], args),
    ]
    return 1 if any(exceeded) else 0


def _ratio_exceeded(timings: list[Timing], args: argparse.Namespace) -> bool:
    """Whether the largest size costs more than `--max-ratio` times the smallest: the work per
    team must not grow with the number of teams."""
    if len(timings) <= 1:
        return False
    smallest, largest = timings[0], timings[-1]
    wall_ratio = largest.wall_s / smallest.wall_s
    cpu_ratio = largest.cpu_s / smallest.cpu_s
    print(
        f"{largest.teams}/{smallest.teams} teams: wall ratio {wall_ratio:.2f}, "
        f"CPU ratio {cpu_ratio:.2f}"
    )
    ratio = cpu_ratio if args.clock == "cpu" else wall_ratio
    if args.max_ratio is not None and ratio > args.max_ratio:
        print(f"{args.clock} ratio {ratio:.2f} above {args.max_ratio}", file=sys.stderr)
        return True
    return False


def _import_multiple_exceeded(smallest: Timing, args: argparse.Namespace) -> bool:
    """Whether the smallest size costs more than `--max-import-multiple` SDK imports of this
    machine: the bound that holds on machines of any speed."""
    if args.max_import_multiple is None:
        return False
    imports = import_seconds(args.runs)
    multiple = smallest.cpu_s / imports
    print(
        f"{smallest.teams} teams: {multiple:.2f} x the SDK imports' {imports:.2f} s CPU "
        f"(bound {args.max_import_multiple})"
    )
    if multiple > args.max_import_multiple:
        print(f"{multiple:.2f} x imports above {args.max_import_multiple}", file=sys.stderr)
        return True
    return False


def _seconds_exceeded(smallest: Timing, args: argparse.Namespace) -> bool:
    """Whether the smallest size took longer than `--max-seconds` (on this machine's clock)."""
    seconds = smallest.cpu_s if args.clock == "cpu" else smallest.wall_s
    if args.max_seconds is not None and seconds > args.max_seconds:
        print(
            f"{smallest.teams} teams: {seconds:.2f} s {args.clock} above {args.max_seconds} s",
            file=sys.stderr,
        )
        return True
    return False


if __name__ == "__main__":
    sys.exit(main())
