"""Topology in the verdicts (components/analysis/willrun.py `network_part`, facts.build's
network exclusions): the NCCL test's network part as a Volcano gang's, on the type its pods land
on; a job on a class the network does not place carries why."""

from __future__ import annotations

from components.analysis import check, topology, topology_checks
from components.analysis.facts import build
from tests.analysis.test_topology import _nccl_in_one_block_on_static_h100, _parse
from tests.conftest import l40s_topology_values, stack_values


def test_the_nccl_tests_network_part_is_a_volcano_gangs_on_its_host_type() -> None:
    """The NCCL test's PodGroup is Volcano's (Gang.volcano), on its pool's node source, and the
    level's effect is read for the type its pods land on (nccl.host)."""
    nccl = _nccl_in_one_block_on_static_h100()
    network = nccl.network
    assert network is not None and network.volcano is True
    levels = ("zone", "layer-1", "layer-2", "layer-3", "hostname")
    assert network.request == topology.JobTopology("required", "layer-3", levels, False, "asked")
    assert network.honours == (
        topology_checks.SourceHonour(
            "ng-h100-static",
            "static",
            "yes",
            "its nodes exist before the gang: the gang waits until one layer-3 domain has room "
            "for all of it",
        ),
    )
    assert network.when_full == "waits: the gang stays Pending until one tier-1 HyperNode holds it"
    assert network.effect == topology_checks.level_effect("layer-3", levels, "p5.48xlarge")
    assert "(p5.48xlarge, EC2 DescribeInstanceTypes, published)" in network.effect.text


def test_a_job_on_a_class_the_network_does_not_place_carries_why() -> None:
    facts, judgement = check(_parse(stack_values("dev")))
    why = facts.network_exclusions["a10g-x1"]
    assert why == topology.why_not_eligible(facts.cfg, "a10g-x1") and why
    jobs = judgement.verdicts[: len(facts.jobs)]
    on_a10g = [v for v, jf in zip(jobs, facts.jobs, strict=True) if jf.job.gpu_class == "a10g-x1"]
    assert on_a10g and all(v.network is None for v in on_a10g)
    assert {v.network_exclusion for v in on_a10g} == {why}
    # Every class a source or a job names and the network does not place, jobs or not: prod
    # declares no jobs of its own (its teams' job stacks do) and places l40s-x1 only.
    prod = build(_parse(stack_values("prod")))
    assert not prod.cfg.training_jobs and set(prod.topologies) == {"l40s-x1"}
    assert list(prod.network_exclusions) == ["h100-x8", "l4-x1"]


def test_the_nccl_test_on_an_autoscaled_group_is_scored_by_volcano() -> None:
    """Its default request (preferred, the closest layer) on an autoscaled group: Volcano, not
    Kueue's second pass, packs the gang."""
    raw = l40s_topology_values()
    raw["gpu-platform:validation"] = {
        **raw["gpu-platform:validation"],
        "enabled": True,
        "nccl": {"pool": "ng-l40s-od", "minBusBandwidthGbps": 1},
    }
    _, judgement = check(_parse(raw))
    nccl = next(v for v in judgement.verdicts if v.key == "validation.nccl")
    assert nccl.problems == () and nccl.network is not None
    assert nccl.network.honours == (
        topology_checks.SourceHonour(
            "ng-l40s-od",
            "autoscaler",
            "best effort",
            "the autoscaler raises the group blind to the hierarchy; Volcano scores the closest "
            "nodes",
        ),
    )
