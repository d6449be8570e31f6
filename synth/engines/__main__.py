"""`python -m synth.engines`: the stacks on the real engines (docs/real-engines.md).

    python -m synth.engines [--group dev] [--group fleet/prod] [--json out.json]

Brings up, per group (tier.py), local control planes with the real kube-apiserver, scheduler,
controller-manager and Kueue, applies what the stacks synthesize, submits every workload and
compares with "will it run". Prints what ran and what stood in for what did not. Exit 0: every
object accepted, every workload admitted and bound where will-it-run said; 1: a disagreement
(each printed); 2: bad usage; 77: the engines' binaries are not here (the reason is printed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path

from synth.engines import assets, tier
from synth.engines.controlplane import stop_on_sigterm
from synth.engines.fleet import FleetRun
from synth.engines.run import ClusterRun, Toolkit

EXIT_OK, EXIT_DISAGREE, EXIT_USAGE, EXIT_NO_ASSETS = 0, 1, 2, 77


def summary(run: ClusterRun | FleetRun) -> list[str]:
    """What a reader needs of one group's run, a line each."""
    clusters = run.clusters.values() if isinstance(run, FleetRun) else [run]
    workloads = (
        run.workloads if isinstance(run, FleetRun) else [w for c in clusters for w in c.workloads]
    )
    lines = [f"## {run.name}: {run.seconds:.1f} s"]
    for cluster in clusters:
        lines.append(
            f"- {cluster.name}: {cluster.applied} objects applied, "
            f"{cluster.accepted_v1beta2} Kueue v1beta2 objects accepted on the v0.19.2 CRDs, "
            f"{len(cluster.rejected)} refused"
        )
    if isinstance(run, FleetRun):
        for name, state in run.connections.items():
            lines.append(f"- MultiKueueCluster {name}: {state}")
    for w in workloads:
        where = f"admitted to {w.admitted_queue}" if w.admitted_queue else "not queued"
        flavors = f" on {', '.join(w.admitted_flavors)}" if w.admitted_flavors else ""
        pods = f"{len(w.pods)}/{w.expected_pods} pods bound"
        on = sorted({p.source for p in w.pods})
        blocks = sorted({p.block for p in w.pods if p.block})
        lines.append(
            f"- {w.ref}: {where}{flavors}, {pods}"
            + (f" on {', '.join(on)}" if on else "")
            + (f", topology {', '.join(w.topology)}" if w.topology else "")
            + (f", {len(blocks)} network block(s)" if blocks else "")
            + (f" [stand-in: {w.stand_in}]" if w.stand_in else "")
            + ("" if w.ok else " — DISAGREES")
        )
    acts = [*run.acts] if isinstance(run, FleetRun) else []
    acts += [a for c in clusters for a in c.acts]
    lines += [f"  - {a}" for a in acts]
    lines += [f"! {p}" for p in run.problems]
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m synth.engines", description=__doc__)
    parser.add_argument("--group", action="append", help="dev, prod, fleet/prod (default: all)")
    parser.add_argument("--json", help="write every run's record here")
    parser.add_argument("--logs", help="copy every control plane's process logs under this folder")
    args = parser.parse_args(argv)
    try:
        found = assets.find()
    except assets.MissingAssetsError as missing:
        print(f"skipped: {missing}", file=sys.stderr)
        return EXIT_NO_ASSETS
    groups = tier.plan()
    if args.group:
        unknown = sorted(set(args.group) - {g.name for g in groups})
        if unknown:
            print(
                f"no such group: {', '.join(unknown)} (have {', '.join(g.name for g in groups)})",
                file=sys.stderr,
            )
            return EXIT_USAGE
        groups = [g for g in groups if g.name in args.group]
    stop_on_sigterm()
    kit = Toolkit.load(found, log_root=Path(args.logs) if args.logs else None)
    began = time.monotonic()
    runs = []
    for group in groups:
        run = tier.run_group(kit, group)
        print("\n".join(summary(run)), flush=True)
        runs.append(run)
    problems = [p for r in runs for p in r.problems]
    print(
        f"\n{len(runs)} groups in {time.monotonic() - began:.1f} s, {len(problems)} disagreements"
    )
    if args.json:
        with open(args.json, "w") as out:
            json.dump([asdict(r) for r in runs], out, indent=1, default=str)
    return EXIT_DISAGREE if problems else EXIT_OK


if __name__ == "__main__":
    raise SystemExit(main())
