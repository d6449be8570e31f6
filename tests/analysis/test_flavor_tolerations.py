"""A ResourceFlavor's tolerations and a TrainJob's (issue #36 finding 4b): Kueue v0.19.2 puts the
flavor's tolerations in place of a TrainJob's own, so each flavor tolerates every platform taint
its nodes carry (nodes.flavor_tolerations), and will-it-run refuses a TrainJob that would lose a
node source its own tolerations let it land on (trainer.toleration_problems)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

from components import catalog
from components.analysis import nodes, trainer
from components.analysis.facts import StackFacts, build
from components.analysis.nodes import NodeSource, tolerates
from components.config import Problem, StackConfig
from components.config.load import namespace_values, parse
from synth.harness import SynthResult
from tests.analysis.judged import facts_of, verdict_for
from tests.conftest import stack_values

FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"


def _cfg(stack: str) -> StackConfig:
    raw = stack_values(stack)
    return parse(
        namespace_values({k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()})
    )


def _members(facts: StackFacts, labels: dict[str, str]) -> list[NodeSource]:
    return [s for s in facts.sources if all(s.labels.get(k) == v for k, v in labels.items())]


@pytest.mark.parametrize("stack", ["dev", "prod", "prod_static", "prod_use1"])
def test_every_flavor_tolerates_the_platform_taints_of_its_nodes(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    facts: StackFacts = result.facts
    flavors = [r.inputs["spec"] for r in result.resources if r.type == FLAVOR]
    assert flavors
    for spec in flavors:
        labels = {k: v for k, v in spec["nodeLabels"].items() if k != catalog.REGION_LABEL}
        members = _members(facts, labels)
        assert members, labels
        given = tuple(spec["tolerations"])
        assert given == nodes.flavor_tolerations(members)
        for source in members:
            for taint in source.taints:
                platform = taint["key"] in (catalog.GPU_TAINT_KEY, catalog.SPOT_TAINT_KEY)
                assert tolerates(taint, given) == platform, (source.name, taint)


def test_a_groups_own_taint_is_not_the_flavors() -> None:
    """A group's own taint keeps training pods off it: the flavor must not hand its toleration
    to every pod Kueue admits there (Jobs get the flavor's tolerations added)."""
    facts = build(_cfg("dev"))
    (group,) = [s for s in facts.sources if s.name == "ng-l4-spot"]
    own = {"key": "example.com/dedicated", "value": "eval", "effect": "NoSchedule"}
    tainted = replace(group, taints=(*group.taints, own))
    assert nodes.flavor_tolerations([tainted]) == (
        catalog.gpu_toleration(),
        catalog.spot_toleration(),
    )
    karpenter = next(s for s in facts.sources if s.kind == "karpenter")
    assert nodes.flavor_tolerations([karpenter]) == (catalog.gpu_toleration(),)


def _l4_trainjob(cfg: StackConfig) -> Any:
    """Dev's node-group spot job (l4-x1, spot managed group ng-l4-spot) as a TrainJob."""
    job = next(j for j in cfg.training_jobs if j.name == "ddp-l4-nodegroup")
    return job.model_copy(update={"launcher": "kubeflow"})


def test_a_trainjob_losing_a_taint_it_tolerates_is_refused_naming_the_key() -> None:
    cfg = _cfg("dev")
    job = _l4_trainjob(cfg)
    jf = facts_of(cfg, job)
    facts = build(cfg)
    assert [s.name for s in jf.fit.candidates] == ["ng-l4-spot"]
    # As rendered: the flavor tolerates the GPU and spot taints of its spot group.
    assert (
        trainer.toleration_problems(jf, jf.fit.candidates, facts.sources, facts.provisioners) == []
    )
    # A flavor that tolerated the GPU taint only would strip the job's spot toleration.
    (problem,) = trainer.toleration_problems(
        jf,
        jf.fit.candidates,
        facts.sources,
        facts.provisioners,
        tolerations_of=lambda members: (catalog.gpu_toleration(),),
    )
    assert problem.key == f"{jf.key}.launcher"
    assert "node source ng-l4-spot" in problem.allowed
    assert "gpu-platform.io/spot=true:NoSchedule" in problem.allowed
    # The same job as an Indexed Job keeps its own tolerations (Kueue adds the flavor's).
    native = facts_of(cfg, job.model_copy(update={"launcher": "native"}))
    assert (
        trainer.toleration_problems(
            native,
            native.fit.candidates,
            facts.sources,
            facts.provisioners,
            tolerations_of=lambda members: (catalog.gpu_toleration(),),
        )
        == []
    )


def test_the_trainjob_rule_is_part_of_its_verdict() -> None:
    """A TrainJob whose own tolerations reached a group's own taint (none does today: training
    pods tolerate the platform taints only) would lose the group on admission: its verdict says
    so; an Indexed Job keeps its tolerations and may run there."""
    cfg = _cfg("dev")
    job = _l4_trainjob(cfg)
    index = next(i for i, j in enumerate(cfg.training_jobs) if j.name == job.name)
    own = {"key": "example.com/dedicated", "value": "eval", "effect": "NoSchedule"}
    sources = [
        replace(s, taints=(*s.taints, own)) if s.name == "ng-l4-spot" else s
        for s in build(cfg).sources
    ]
    where = facts_of(cfg, job, index).placement
    tolerant = replace(where, tolerations=(*where.tolerations, catalog.toleration_of(own)))
    assert verdict_for(cfg, index, job).runnable
    verdict = verdict_for(cfg, index, job, sources=sources, placement=tolerant)
    (problem,) = verdict.problems
    assert problem.key == f"trainingJobs[{index}].launcher"
    assert "example.com/dedicated=eval:NoSchedule" in problem.allowed
    native = job.model_copy(update={"launcher": "native"})
    assert verdict_for(cfg, index, native, sources=sources, placement=tolerant).runnable


def _od_twin(facts: StackFacts) -> tuple[NodeSource, list[NodeSource]]:
    """Dev's on-demand Karpenter pool with a value-less taint of its own, and the stack's sources
    with an identical pool the job does not land on listed before it."""
    od = next(s for s in facts.sources if s.name == "kp-a10g-od")
    bare = {"key": "example.com/bare", "effect": "NoSchedule"}
    tainted = replace(od, taints=(*od.taints, bare))
    twin = replace(tainted, name="kp-a10g-od-twin")
    return tainted, [twin, *(tainted if s is od else s for s in facts.sources)]


def test_every_flavor_and_landing_source_is_judged_and_the_refusal_names_each_taint() -> None:
    """Dev's TrainJob (`trainingJobs[2]`, a10g-x1 spot and on-demand): a flavor no provisioner
    serves, and a source of a flavor the job does not land on, end no search; the refusal names
    the flavor's tolerations and each lost taint (`=` and an empty value when it has none)."""
    cfg = _cfg("dev")
    jf = facts_of(cfg, cfg.training_jobs[2], 2)
    facts = build(cfg)
    od, sources = _od_twin(facts)
    landing = [s for s in jf.fit.candidates if s.name != "kp-a10g-od"] + [od]
    given = (
        {"key": "example.com/a", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "example.com/b", "operator": "Exists", "effect": "NoExecute"},
    )
    # The spot flavor, the team's first quota entry, has no provisioner here.
    provisioners = {k: v for k, v in facts.provisioners.items() if k != ("a10g-x1", "spot")}
    found = trainer.toleration_problems(
        jf, landing, sources, provisioners, tolerations_of=lambda members: given
    )
    assert found == [
        Problem(
            "trainingJobs[2].launcher",
            "kubeflow",
            "pods that keep tolerating node source kp-a10g-od (karpenter.pools[1]) on flavor "
            "a10g-x1-on-demand: Kueue v0.19.2 replaces a TrainJob's tolerations with the "
            "flavor's (example.com/a:NoSchedule, example.com/b:NoExecute), which do not tolerate "
            "its taint nvidia.com/gpu=true:NoSchedule, example.com/bare=:NoSchedule (use "
            "launcher native, whose pods get the flavor's tolerations added)",
        )
    ]


def test_a_flavor_without_tolerations_ends_no_search() -> None:
    """The spot flavor renders no tolerations (its pods keep their own); the on-demand flavor
    after it is still judged."""
    cfg = _cfg("dev")
    jf = facts_of(cfg, cfg.training_jobs[2], 2)
    facts = build(cfg)
    strange = ({"key": "example.com/a", "operator": "Exists", "effect": "NoSchedule"},)
    found = trainer.toleration_problems(
        jf,
        jf.fit.candidates,
        facts.sources,
        facts.provisioners,
        tolerations_of=lambda members: () if members[0].capacity_type == "spot" else strange,
    )
    assert [p.allowed.split(":")[0] for p in found] == [
        "pods that keep tolerating node source kp-a10g-od (karpenter.pools[1]) on flavor "
        "a10g-x1-on-demand"
    ]
