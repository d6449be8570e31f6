"""Pure analysis of a validated stack config: the cross-area facts (capacity per flavor, job
resources, admission against quota, checkpoint planning, costs) computed once, here, and the
rules built on them. Config validators, components, the report and the policies ask this package
instead of recomputing. It imports the config model and the catalog, never a Pulumi resource.

`check(cfg)` runs every cross-area rule right after the model is built and before any resource
is registered; its problems come out in the config-error format (one line per problem naming the
key path), as `ConfigError`.
"""

from __future__ import annotations

from components.analysis.efa_placement import check_node_group_zones, check_placement_group
from components.analysis.facts import stack_facts
from components.analysis.jobs import check_training_jobs
from components.analysis.quota import check_reachable_sources
from components.analysis.readiness import check_pods_ready
from components.analysis.volcano import check_queues
from components.analysis.willrun import check_will_it_run
from components.config import ConfigError, Problem, StackConfig
from components.config.errors import problem_lines


def problems(cfg: StackConfig) -> list[Problem]:
    """Every cross-area problem of `cfg` (key paths from the config namespace's root)."""
    facts = stack_facts(cfg)
    found = [
        *facts.team_problems,
        *check_reachable_sources(cfg, facts.sources),
        *check_pods_ready(cfg, facts.sources),
        *check_queues(cfg),
        *check_training_jobs(cfg),
        *check_placement_group(cfg),
        *check_node_group_zones(cfg),
    ]
    if found:
        # "Will it run" builds on a consistent config (known teams, classes, quotas).
        return found
    return check_will_it_run(cfg)


def check(cfg: StackConfig) -> StackConfig:
    """`cfg` unchanged when every cross-area rule holds; `ConfigError` otherwise."""
    found = problems(cfg)
    if found:
        raise ConfigError(problem_lines(found))
    return cfg
