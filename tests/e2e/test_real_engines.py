"""The real-engine tier (`pytest -m e2e`, docs/real-engines.md): every platform stack, the
fleet's manager with its workers, and every job stack, applied to real kube-apiservers and run
by the real scheduler, controller-manager and Kueue; every workload compared with "will it run".

Skips, saying why, when the engines' binaries are not there (synth/engines/assets.py). Each
group's record is written to build/e2e/<group>.json (what the closing figures come from).
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest

from synth.engines import tier
from synth.engines.__main__ import summary
from synth.engines.fleet import FleetRun
from synth.engines.run import ClusterRun, Toolkit
from tests.e2e.conftest import RECORDS

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

GROUPS = {g.name: g for g in tier.plan()}


@pytest.fixture(scope="module")
def run_of(kit: Toolkit) -> Callable[[str], ClusterRun | FleetRun]:
    """Each group run once for the module, its record written."""
    done: dict[str, ClusterRun | FleetRun] = {}

    def run(name: str) -> ClusterRun | FleetRun:
        if name not in done:
            done[name] = tier.run_group(kit, GROUPS[name])
            _record(done[name])
        return done[name]

    return run


def _record(run: ClusterRun | FleetRun) -> None:
    """The run's record and summary; its processes' logs stay only when it disagreed."""
    RECORDS.mkdir(parents=True, exist_ok=True)
    if not run.problems:
        shutil.rmtree(RECORDS / "logs" / run.name.replace("/", "-"), ignore_errors=True)
    path = RECORDS / f"{run.name.replace('/', '-')}.json"
    path.write_text(json.dumps(asdict(run), indent=1, default=str))
    Path(path.with_suffix(".txt")).write_text("\n".join(summary(run)) + "\n")


@pytest.mark.parametrize("name", sorted(GROUPS))
def test_every_object_is_accepted_and_every_workload_runs_where_will_it_run_said(
    run_of: Callable[[str], ClusterRun | FleetRun], name: str
) -> None:
    run = run_of(name)
    print("\n".join(summary(run)))
    assert run.problems == []
    clusters = list(run.clusters.values()) if isinstance(run, FleetRun) else [run]
    workloads = run.workloads
    assert all(c.applied > 0 and not c.rejected for c in clusters)
    assert workloads, "no workload was submitted"
    for workload in workloads:
        assert workload.expected_pods > 0 and len(workload.pods) == workload.expected_pods
        if workload.predicted_queue or isinstance(run, FleetRun):
            assert workload.admitted_queue, f"{workload.ref} never admitted"


def test_the_fleet_dispatches_through_real_tokens_and_keeps_pinned_jobs_home(
    run_of: Callable[[str], ClusterRun | FleetRun],
) -> None:
    fleets = [g.name for g in GROUPS.values() if g.kind == "fleet"]
    assert fleets
    run = run_of(fleets[0])
    assert isinstance(run, FleetRun)
    assert run.connections and all(s.startswith("Active") for s in run.connections.values())
    # pretrain-7b is pinned to us-east-1 (jobs/Pulumi.pretrain-fleet.yaml): worker use1 only.
    pinned = next(w for w in run.workloads if w.ref.endswith("/pretrain-7b"))
    assert pinned.admitted_queue.endswith("@use1"), pinned.admitted_queue
    assert all(p.node.startswith("use1/") for p in pinned.pods)
    # sft-7b is pinned to us-west-2, off the manager's region: the worker there admits the
    # mirrored job (the fleet's one trainer, by the home's reference: docs/fleet.md) and binds
    # its pods. Before the fleet ran one trainer, its trusted-images policy refused the copy
    # and the job stayed Pending on the manager.
    west = next(w for w in run.workloads if w.ref.endswith("/sft-7b"))
    assert west.admitted_queue.endswith("@usw2"), west.admitted_queue
    assert west.pods and all(p.node.startswith("usw2/") for p in west.pods)
