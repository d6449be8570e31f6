"""Test helpers: a config's facts and verdicts the way the program builds them (validate is
assumed: the tests' configs are valid), a variant job's verdict, and a verdict read as the report
renders it (its typed parts as the report's words, its problems as they are)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from components.analysis.facts import JobFacts, StackFacts, build, job_facts
from components.analysis.nodes import NodeSource
from components.analysis.willrun import (
    Verdict,
    training_verdict,
    validation_verdicts,
    verdicts,
)
from components.config import StackConfig, TrainingJobConfig
from synth.verdict_text import VerdictText, render


@dataclasses.dataclass(frozen=True)
class Read:
    """A verdict and its text: text fields (admission, placement, zone, ...) read as the report
    prints them, everything else (problems, runnable, key, workload, typed parts under
    `.verdict`) from the verdict."""

    verdict: Verdict
    text: VerdictText

    def __getattr__(self, name: str) -> Any:
        if name in VerdictText.__dataclass_fields__:
            return getattr(self.text, name)
        return getattr(self.verdict, name)


def read(cfg: StackConfig, verdict: Verdict) -> Read:
    return Read(verdict, render(cfg, verdict))


def sources_of(cfg: StackConfig) -> list[NodeSource]:
    return list(build(cfg).sources)


def facts_of(cfg: StackConfig, job: TrainingJobConfig, index: int | None = None) -> JobFacts:
    """The facts of `job` (the config's or a variant of it) at `trainingJobs[index]` (default:
    where the config has a job of its name, else 0)."""
    facts = build(cfg)
    if index is None:
        index = next((i for i, j in enumerate(cfg.training_jobs) if j.name == job.name), 0)
    return job_facts(
        cfg,
        index,
        job,
        facts.teams[job.team],
        sources=facts.sources,
        provisioners=facts.provisioners,
    )


def verdict_for(cfg: StackConfig, index: int, job: TrainingJobConfig, **kwargs: Any) -> Read:
    """The verdict of `job` (the config's or a variant of it) at `trainingJobs[index]`."""
    return read(cfg, training_verdict(build(cfg), facts_of(cfg, job, index), **kwargs))


def verdicts_for(cfg: StackConfig) -> list[Read]:
    return [read(cfg, v) for v in verdicts(build(cfg))]


def validation_for(cfg: StackConfig, sources: Sequence[NodeSource] | None = None) -> list[Read]:
    facts: StackFacts = build(cfg)
    if sources is not None:
        facts = dataclasses.replace(facts, sources=tuple(sources))
    return [read(cfg, v) for v in validation_verdicts(facts)]
