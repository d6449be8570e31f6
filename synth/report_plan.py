"""Two report.md sections a reviewer reads before `pulumi up`: "Will it run" (per declared
workload: admission, placement, scale-up, gang, storage, what `up` waits for — from
components/analysis/willrun.py) and "Deploy plan" (waves of the dependency graph, what each
wave waits for and how long, ordering bugs — from synth/deploy_plan.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

from components.analysis.fleet_jobs import FleetJudgement
from synth.deploy_plan import ordering_problems, plan, prerequisite_problems
from synth.harness import SynthResult
from synth.verdict_text import render


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def will_it_run(result: SynthResult) -> str:
    if result.fleet_jobs is not None:
        from synth.report_fleet import fleet_will_it_run

        return fleet_will_it_run(result)
    if result.fleet is not None:
        return (
            "A fleet's manager runs no job of its own: team job stacks submit to it, and each "
            "job stack's report judges its jobs on every worker (section Fleet)."
        )
    if result.facts is None or result.judgement is None:
        return "No config captured."
    # Not a fleet job stack (above): a platform's or a job stack's own judgement.
    assert not isinstance(result.judgement, FleetJudgement)
    found = list(result.judgement.verdicts)
    if result.platform is not None:
        # A job stack: its own jobs; the platform's validation Jobs are in the platform's report.
        found = [v for v in found if v.key.startswith("trainingJobs")]
    if not found:
        return "No workloads declared."
    # The time to first step the facts estimated for each training job (JobFacts.startup).
    startup = {jf.workload: jf.startup for jf in result.facts.jobs}
    blocks = []
    for v in found:
        text = render(result.facts.cfg, v)
        verdict = (
            "**runs**"
            if v.runnable
            else "**cannot run**: " + "; ".join(f"`{key}`: {why}" for key, _, why in v.problems)
        )
        lines = [
            f"### `{v.workload}` ({v.kind}, `{v.key}`) — {verdict}",
            "",
            *([f"- image: {text.image}"] if text.image else []),
            f"- admission: {text.admission}",
            f"- placement: {text.placement}",
            f"- scale-up: {text.scale_up}",
            f"- gang: {text.gang}" + (f"; {text.zone}" if text.zone else ""),
            *([f"- network: {text.network}"] if text.network else []),
            f"- storage: {text.storage}",
        ]
        if text.memory:
            lines.append(f"- memory: {text.memory}")
        if text.ready:
            lines.append(f"- pods ready: {text.ready}")
        if v.workload in startup:
            lines.append(f"- {startup[v.workload].line()}")
        lines.append(f"- `pulumi up` waits for: {text.awaits}")
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks) + (
        "\n\nDerived from the config alone (components/analysis/willrun.py); a workload that "
        "cannot run fails synth with exit 2 naming its key."
    )


def deploy_plan(result: SynthResult) -> str:
    steps = [s for s in plan(result) if s.type != "pulumi:pulumi:Stack"]
    rows = []
    for wave in sorted({s.wave for s in steps}):
        here = [s for s in steps if s.wave == wave and not s.type.startswith("gpu-platform:")]
        if not here:
            continue
        kinds = Counter(s.type.split(":")[-1] for s in here)
        awaited = sorted((s for s in here if s.timeout_s), key=lambda s: (-s.timeout_s, s.name))
        waits = ", ".join(f"`{s.name}` {s.awaits} ({s.timeout_s} s)" for s in awaited[:4])
        if len(awaited) > 4:
            waits += f", +{len(awaited) - 4} more"
        rows.append(
            [
                wave,
                len(here),
                ", ".join(f"{kind} x{n}" for kind, n in sorted(kinds.items())),
                waits or "nothing awaited",
                max((s.timeout_s for s in here), default=0),
            ]
        )
    table = _table(["wave", "resources", "kinds", "waits for", "longest timeout s"], rows)
    problems = ordering_problems(result) + prerequisite_problems(result)
    blocked = (
        "\n".join(f"- {line}" for line in problems)
        if problems
        else "None: every custom resource comes after its CRD's release, every Kueue-queued "
        "object after Kueue, no awaited Job starts suspended, every claim after its class, "
        "every requested device resource has its device plugin."
    )
    return (
        f"{table}\n\nA wave starts when everything it depends on is done (dependencies, "
        "components expanded, parents, providers); `up` takes at least the sum of each "
        "wave's longest await. Await rules: synth/deploy_plan.py, docs/deploy-plan.md.\n\n"
        f"### Ordering and prerequisite problems\n\n{blocked}"
    )
