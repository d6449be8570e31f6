"""The composition roots are typed functions and the harness reads their one typed result
(issue #39): each `__main__.py` is a shim that calls its root function and binds `result`; a root
that leaves anything else is refused by the harness, not silently reported as "no config"."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from components.roots.results import FleetJobsRoot, FleetRoot, PlatformRoot, TeamJobsRoot
from synth.harness import ROOT_RESULT, CapturingMonitor, SynthResult, _result
from synth.mocks import PlatformMocks

PROJECT_ROOT = Path(__file__).resolve().parents[2]
SHIMS = {
    "__main__.py": "components.roots.platform_stack",
    "jobs/__main__.py": "components.roots.job_stack",
    "fleet/__main__.py": "components.roots.fleet_manager",
}


@pytest.mark.parametrize("path", sorted(SHIMS))
def test_each_root_file_is_one_call_of_its_typed_function(path: str) -> None:
    """Beside imports and the sys.path line `pulumi up` needs, a root file holds one statement:
    `result: <RootResult type> = <function from components/roots>(...)`."""
    tree = ast.parse((PROJECT_ROOT / path).read_text())
    body = [
        node
        for node in tree.body
        if not isinstance(node, ast.Import | ast.ImportFrom)
        and not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        and not (isinstance(node, ast.Expr) and "sys.path.insert" in ast.unparse(node))
    ]
    assert len(body) == 1, [ast.unparse(n) for n in body]
    (statement,) = body
    assert isinstance(statement, ast.AnnAssign), ast.unparse(statement)
    assert ast.unparse(statement.target) == ROOT_RESULT
    assert isinstance(statement.value, ast.Call)
    called = ast.unparse(statement.value.func)
    imported = {
        alias.name: node.module
        for node in tree.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    assert imported[called] == SHIMS[path]


def test_the_harness_refuses_a_root_that_leaves_no_typed_result() -> None:
    monitor = CapturingMonitor(PlatformMocks("us-east-1", {}, {}))
    with pytest.raises(TypeError, match=r"left result = dict, not a .*RootResult"):
        _result("dev", monitor, {ROOT_RESULT: {"facts": None}}, {}, [])
    with pytest.raises(TypeError, match="left result = NoneType"):
        _result("dev", monitor, {}, {}, [])


def test_each_kind_of_stack_returns_its_root_result(
    dev: SynthResult,
    research_dev: SynthResult,
    pretrain_fleet: SynthResult,
    fleet_prod: SynthResult,
) -> None:
    assert isinstance(dev.root, PlatformRoot)
    assert dev.facts is dev.root.facts and dev.config is dev.root.facts.cfg
    assert dev.plans == dev.root.plans and dev.plans
    assert isinstance(research_dev.root, TeamJobsRoot)
    assert research_dev.root.namespace == research_dev.outputs["namespace"]
    assert research_dev.judgement is research_dev.root.judgement
    assert isinstance(pretrain_fleet.root, FleetJobsRoot)
    assert pretrain_fleet.facts is None and pretrain_fleet.fleet_jobs is not None
    assert pretrain_fleet.judgement is pretrain_fleet.fleet_jobs.judgement
    assert isinstance(fleet_prod.root, FleetRoot)
    assert fleet_prod.fleet is fleet_prod.root.fleet and fleet_prod.plans is None
