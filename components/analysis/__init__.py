"""Pure analysis of a stack config, in three phases, the way Kueue's scheduler validates a
workload, computes one assignment for it and renders objects and messages from that:

1. `validate(cfg)`: the structural cross-area rules, each problem naming its key (no team takes
   a namespace an add-on of the stack or Kubernetes uses: addons.py; a job's team exists, its
   GPU class and capacity type are provided, names are unique, images can be pinned and
   admitted; the placement group's and node groups' zones);
2. `build(cfg)` (facts.py): the frozen `StackFacts`, built eagerly and once, assuming a config
   that passed `validate`;
3. `judge(facts)`: the rules on the facts — team quotas against capacity, GPU capacity no queue
   reaches, Kueue's readiness timeouts, Volcano's queues, jobs' EFA asks and quotas — and, when
   those hold, whether every workload will run (willrun.py), as typed verdicts.

`check(cfg)` runs the three before any resource is registered and raises `ConfigError` (one
line per problem) when a phase finds problems; the composition root holds what it returns and
passes it down. It imports the config model and the catalog, never a Pulumi resource.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from components.analysis.addons import namespace_problems
from components.analysis.efa_placement import check_node_group_zones, check_placement_group
from components.analysis.facts import StackFacts, build
from components.analysis.jobs import judge_training_jobs, quota_problems, validate_training_jobs
from components.analysis.quota import check_reachable_sources, check_teams
from components.analysis.readiness import check_pods_ready
from components.analysis.topology import check_topology_classes
from components.analysis.volcano import check_queues
from components.analysis.willrun import Verdict, verdicts
from components.config import ConfigError, Problem, StackConfig
from components.config.errors import problem_lines

__all__ = ["Judgement", "StackFacts", "build", "check", "judge", "problems", "validate"]


@dataclass(frozen=True)
class Judgement:
    """What `judge` found: the problems, each owned by the rule that found it, and (when the
    rules on the facts hold) every workload's verdict."""

    problems: tuple[Problem, ...]
    verdicts: tuple[Verdict, ...] = ()
    #: Job index -> its quota problems (quota.job_quota_problems), Kueue jobs only.
    quota: Mapping[int, tuple[Problem, ...]] = field(default_factory=dict)


def validate(cfg: StackConfig) -> list[Problem]:
    """The structural cross-area problems of `cfg` (key paths from the namespace's root)."""
    return [
        *namespace_problems(cfg),
        *validate_training_jobs(cfg),
        *check_placement_group(cfg),
        *check_node_group_zones(cfg),
        *check_topology_classes(cfg),
    ]


def judge(facts: StackFacts) -> Judgement:
    """The rules on the facts; the verdicts when they hold ("will it run" builds on a config
    whose quotas and queues are consistent)."""
    cfg = facts.cfg
    quota = quota_problems(facts)
    found = [
        *check_teams(cfg, facts.capacity),
        *check_reachable_sources(facts.unqueued),
        *check_pods_ready(cfg, facts.sources),
        *check_queues(cfg),
        *judge_training_jobs(facts),
        *(p for jf in facts.jobs for p in quota.get(jf.index, [])),
    ]
    frozen = {index: tuple(found_) for index, found_ in quota.items()}
    if found:
        return Judgement(tuple(found), quota=frozen)
    judged = verdicts(facts, over_quota=frozenset(quota))
    return Judgement(tuple(p for v in judged for p in v.problems), judged, frozen)


def check(cfg: StackConfig) -> tuple[StackFacts, Judgement]:
    """The facts and judgement of `cfg`, or `ConfigError` naming every problem of the first
    phase that found any (nothing is registered before this returns)."""
    structural = validate(cfg)
    if structural:
        raise ConfigError(problem_lines(structural))
    facts = build(cfg)
    judgement = judge(facts)
    if judgement.problems:
        raise ConfigError(problem_lines(judgement.problems))
    return facts, judgement


def problems(cfg: StackConfig) -> list[Problem]:
    """Every problem `check` would raise, as a list (tests, the job stacks' rules)."""
    structural = validate(cfg)
    if structural:
        return structural
    return list(judge(build(cfg)).problems)
