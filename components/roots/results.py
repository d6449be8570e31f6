"""What each composition root built and judged: the one value a root returns.

The synth harness (synth/harness.py) reads it after the program ran, the one channel from the
program to the report; `pulumi up` ignores it. Types only: a result holds values the analysis and
the planners produced, never a component.
"""

from __future__ import annotations

from dataclasses import dataclass

from components.analysis import Judgement
from components.analysis.facts import StackFacts
from components.analysis.fleet import FleetFacts
from components.analysis.fleet_jobs import FleetJudgement
from components.config import StackConfig
from components.contract.fleet_contract import FleetJobs
from components.training_jobs.plan import JobPlan


@dataclass(frozen=True)
class PlatformRoot:
    """A platform stack (`__main__.py`): its facts, the judgement of its workloads, the plans of
    its training jobs."""

    facts: StackFacts
    judgement: Judgement
    plans: tuple[JobPlan, ...]

    @property
    def config(self) -> StackConfig:
        return self.facts.cfg


@dataclass(frozen=True)
class TeamJobsRoot:
    """A team's job stack on a platform (`jobs/__main__.py`): the platform's config with the
    stack's jobs, as judged by the platform's rules, and the jobs' plans."""

    facts: StackFacts
    judgement: Judgement
    plans: tuple[JobPlan, ...]
    namespace: str

    @property
    def config(self) -> StackConfig:
        return self.facts.cfg


@dataclass(frozen=True)
class FleetJobsRoot:
    """A team's job stack on a fleet's manager (`jobs/__main__.py`): each job judged on every
    worker (FleetJobs), and the plans submitted once, to the manager."""

    fleet_jobs: FleetJobs
    plans: tuple[JobPlan, ...]
    namespace: str

    @property
    def judgement(self) -> FleetJudgement:
        return self.fleet_jobs.judgement


@dataclass(frozen=True)
class FleetRoot:
    """A fleet's manager (`fleet/__main__.py`): the fleet as read from its workers."""

    fleet: FleetFacts


RootResult = PlatformRoot | TeamJobsRoot | FleetJobsRoot | FleetRoot
