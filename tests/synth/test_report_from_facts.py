"""The report renders values the analysis produced and derives none itself (#39; house rule: "a
derived figure has one home in the facts; renderers read it and never compute it again").

The report's modules are scanned: every call of a function of the analysis or the catalog,
every numeric operator (`-`, `*`, `/`, `//`, `**`, `%`, an augmented assignment to an item) and
every `sum` / `max` / `min` / `round` is a finding, and each finding must be listed in ALLOWED
with the reason it is no derivation (prose the analysis words, a count of the rendered stack,
display units). Re-adding a price, a capacity or a call of an analysis rule to the report fails
here until someone moves it into the facts — or writes down, in review, why it belongs here.
Stale entries fail too, so the list shrinks as the report does.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import types

import pytest

REPORT_MODULES = (
    "synth.report",
    "synth.report_plan",
    "synth.report_fleet",
    "synth.report_security",
    "synth.verdict_text",
)
AGGREGATES = frozenset({"sum", "max", "min", "round"})
NUMERIC = (ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Pow, ast.Mod)

#: (module, function, finding) -> why it is no derivation the analysis owns.
ALLOWED: dict[tuple[str, str, str], str] = {
    ("synth.report", "<module>", "Sub"): "a list index (the section before the last)",
    ("synth.report", "_flavor_commitments", "Mult"): "display unit: the facts' share in %",
    ("synth.report", "_training_jobs", "Div"): "display unit: the facts' interval in minutes",
    ("synth.report_plan", "deploy_plan", "Sub"): "the deploy plan's waves (rendered stack)",
    ("synth.report_plan", "deploy_plan", "max"): "the deploy plan's waves (rendered stack)",
    (
        "synth.report_security",
        "admission_verdict",
        "components.catalog.image_repository",
    ): "Kyverno's match of a rendered image (policies/rules/security.py)",
    (
        "synth.report_security",
        "admission_verdict",
        "components.catalog.in_repositories",
    ): "Kyverno's match of a rendered image (policies/rules/security.py)",
    (
        "synth.verdict_text",
        "placement_group_text",
        "components.analysis.efa_placement.describe",
    ): "prose the analysis words",
    (
        "synth.verdict_text",
        "scale_up_text",
        "components.analysis.willrun.scale_up_path",
    ): "prose the analysis words",
    (
        "synth.verdict_text",
        "volcano_path_text",
        "components.analysis.volcano.describe",
    ): "prose the analysis words",
}


def _is_text(node: ast.expr) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, str)
    )


def _is_built(node: ast.expr) -> bool:
    """Text or a list being put together (what `+=` on a name may add without a figure)."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _is_built(node.left) or _is_built(node.right)
    return _is_text(node) or isinstance(node, ast.List | ast.ListComp | ast.Name)


def _called(module: types.ModuleType, func: ast.expr) -> object | None:
    """What a call's function names: a module global, or an attribute of an imported module."""
    if isinstance(func, ast.Name):
        return vars(module).get(func.id)
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        base = vars(module).get(func.value.id)
        if isinstance(base, types.ModuleType):
            return getattr(base, func.attr, None)
    return None


def derivations(name: str) -> set[tuple[str, str, str]]:
    """(module, enclosing function, finding) for every place `name` computes rather than
    renders (module docstring)."""
    module = importlib.import_module(name)
    found: set[tuple[str, str, str]] = set()

    def visit(node: ast.AST, where: str) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            where = node.name
        if isinstance(node, ast.Call):
            if isinstance(node.func, ast.Name) and node.func.id in AGGREGATES:
                found.add((name, where, node.func.id))
            target = _called(module, node.func)
            owner = getattr(target, "__module__", None) or ""
            if inspect.isroutine(target) and owner.startswith("components"):
                found.add((name, where, f"{owner}.{target.__qualname__}"))
        # `"---|" * n` and `"%s" % x` are text, not figures.
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, NUMERIC)
            and not (_is_text(node.left) or _is_text(node.right))
        ):
            found.add((name, where, type(node.op).__name__))
        # `x[k] += n` and `total += n` tally; `text += "..."`, `rows += [...]` and
        # `parts += lines` build text and lists.
        if isinstance(node, ast.AugAssign) and (
            not isinstance(node.op, ast.Add)
            or not isinstance(node.target, ast.Name)
            or not _is_built(node.value)
        ):
            found.add((name, where, "Aug" + type(node.op).__name__))
        for child in ast.iter_child_nodes(node):
            visit(child, where)

    visit(ast.parse(inspect.getsource(module)), "<module>")
    return found


def test_the_report_derives_nothing_the_analysis_owns() -> None:
    found = set().union(*(derivations(name) for name in REPORT_MODULES))
    unexplained = sorted(found - set(ALLOWED))
    assert not unexplained, (
        "the report computes these itself; make each a field of the facts it renders "
        f"(docs/architecture.md) or explain it in ALLOWED: {unexplained}"
    )
    stale = sorted(set(ALLOWED) - found)
    assert not stale, f"no longer found, remove from ALLOWED: {stale}"


@pytest.mark.parametrize(
    "source",
    [
        "def f(result):\n    return nodes * catalog.price_per_hour(t, 'spot')\n",
        "def f(result):\n    return unreachable_sources(result.config, result.facts.sources)\n",
        "def f(rows):\n    return sum(r.usd for r in rows)\n",
        "def f(counts, k):\n    counts[k] += 1\n",
        "def f(groups):\n    total = 0\n    for g in groups:\n        total += g.gpus\n",
    ],
)
def test_the_scan_sees_a_derivation(source: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The scan can fail: a price, an analysis rule, an aggregate or a tally re-added to a
    report module is found."""
    from components import catalog
    from components.analysis.quota import unreachable_sources

    module = types.ModuleType("synth.probe")
    module.catalog = catalog  # type: ignore[attr-defined]
    module.unreachable_sources = unreachable_sources  # type: ignore[attr-defined]
    monkeypatch.setattr(inspect, "getsource", lambda _: source)
    monkeypatch.setattr(importlib, "import_module", lambda _: module)
    assert derivations("synth.probe")


def test_the_report_imports_only_value_types_from_the_analysis() -> None:
    """What the report modules import by name from components.analysis is a value type (the
    facts' fields); a function imported by name would be a derivation waiting to happen."""
    functions = [
        f"{name}: {imported}"
        for name in REPORT_MODULES
        for imported, value in vars(importlib.import_module(name)).items()
        if inspect.isroutine(value)
        and (getattr(value, "__module__", None) or "").startswith("components.analysis")
        and (name, imported) not in IMPORTED_PROSE
    ]
    assert not functions, functions


#: Analysis functions a report module may import by name: prose only.
IMPORTED_PROSE = frozenset({("synth.verdict_text", "scale_up_path")})


@pytest.mark.parametrize("stack", ["dev", "prod", "prod_use1", "prod_usw2", "fleet_prod"])
def test_the_flavor_table_renders_the_commitments_the_analysis_computed(
    stack: str, request: pytest.FixtureRequest
) -> None:
    """Every row of "Per flavor, against what the pools can provide" is a FlavorCommitment of
    the facts — on a fleet worker too, whose flavors carry a region label no rendered pool does
    (the table once summed the rendered pools and printed 0 / "n/a" there), and on a manager,
    whose flavors have the workers' pools behind them."""
    from synth.harness import SynthResult
    from synth.report import report

    result = request.getfixturevalue(stack)
    assert isinstance(result, SynthResult)
    facts = result.facts if result.facts is not None else result.fleet
    assert facts is not None and facts.commitments
    text = report(result)
    for c in facts.commitments:
        assert c.capacity_gpus > 0, c
        share = f"{100 * c.nominal_gpus / c.capacity_gpus:.0f} %"
        assert f"| {c.flavor} | {c.nominal_gpus} | {c.capacity_gpus} | {share} |" in text
