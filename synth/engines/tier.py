"""The real-engine tier's plan: which clusters to bring up and what goes onto each.

- every platform stack (`Pulumi.<s>.yaml`) that is no fleet's worker: one cluster, with the job
  stacks (`jobs/Pulumi.<team>-<env>.yaml`) whose `platformStack` names it;
- every fleet manager (`fleet/Pulumi.<s>.yaml`): one cluster per worker it names and one for
  itself, with the job stacks that name the manager.
A stack file is read exactly as synth reads it; nothing is synthesized until a run needs it.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final, Literal

from components.config.fleet_stack import fleet_namespace_values, parse_fleet
from components.config.job_stack import job_namespace_values, parse_job_stack
from synth.engines.fleet import FleetRun, run_fleet
from synth.engines.run import ClusterRun, Toolkit, region_of, run_cluster
from synth.fleet import FLEET_PROJECT, FLEET_ROOT
from synth.fleet import run_fleet as synth_fleet
from synth.harness import PROJECT_ROOT, load_stack_config, run_program
from synth.jobs import JOBS_ROOT, run_job_stack

PLATFORM_PROJECT: Final = "gpu-platform"


@dataclass(frozen=True)
class Group:
    """One run: a platform stack or a fleet manager, and the job stacks deployed onto it."""

    kind: Literal["platform", "fleet"]
    stack: str
    job_stacks: tuple[str, ...] = ()
    #: A fleet's worker stacks (their own names), in the manager's order.
    workers: tuple[str, ...] = field(default_factory=tuple)

    @property
    def name(self) -> str:
        return self.stack if self.kind == "platform" else f"fleet/{self.stack}"


def _stacks(root: Path) -> list[str]:
    return sorted(
        p.name.removeprefix("Pulumi.").removesuffix(".yaml") for p in root.glob("Pulumi.*.yaml")
    )


def plan(root: Path = PROJECT_ROOT) -> list[Group]:
    """Every group of the repository's stacks (module docstring), platforms first."""
    jobs_on: dict[tuple[str, str], list[str]] = {}
    for stack in _stacks(root / JOBS_ROOT.name):
        _, config, _ = load_stack_config(stack, root / JOBS_ROOT.name)
        parsed = parse_job_stack(job_namespace_values(config))
        jobs_on.setdefault((parsed.platform_project, parsed.platform_env), []).append(stack)
    fleets: list[Group] = []
    in_a_fleet: set[str] = set()
    for stack in _stacks(root / FLEET_ROOT.name):
        _, config, _ = load_stack_config(stack, root / FLEET_ROOT.name)
        workers = tuple(
            ref.stack_name for ref in parse_fleet(fleet_namespace_values(config)).workers
        )
        in_a_fleet.update(workers)
        fleets.append(
            Group("fleet", stack, tuple(jobs_on.get((FLEET_PROJECT, stack), ())), workers)
        )
    platforms = [
        Group("platform", stack, tuple(jobs_on.get((PLATFORM_PROJECT, stack), ())))
        for stack in _stacks(root)
        if stack not in in_a_fleet
    ]
    return [*platforms, *fleets]


def run_group(kit: Toolkit, group: Group) -> ClusterRun | FleetRun:
    """Synthesize a group's stacks (as synth does) and run them on the real engines; the
    control planes' logs go under `kit.log_root/<group>/` when it is set."""
    if kit.log_root is not None:
        kit = replace(kit, log_root=kit.log_root / group.name.replace("/", "-"))
    if group.kind == "fleet":
        manager = synth_fleet(group.stack)
        job_stacks = [run_job_stack(s, platform=manager) for s in group.job_stacks]
        return run_fleet(
            kit, manager, job_stacks, manager_region=region_of(group.stack, FLEET_ROOT)
        )
    platform = run_program(group.stack)
    job_stacks = [run_job_stack(s, platform=platform) for s in group.job_stacks]
    return run_cluster(kit, platform, job_stacks, region=region_of(group.stack))
