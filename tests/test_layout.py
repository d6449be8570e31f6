"""The house layout holds: no import cycle among project modules, each layer imports only the
layers below it, and no module grows past ~600 lines without a reason written at its top.

The import graph is read from the source (AST), so a cycle hidden behind a lazy import inside a
function counts too, and so do imports under `if TYPE_CHECKING:` (type-only: they never run, but
a cycle through them is still a cycle); neither may point up a layer.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from synth.harness import PROJECT_ROOT

PACKAGES = ("components", "synth", "policies")
#: Folders of Python code the project owns (for the naming rules below).
CODE_ROOTS = (*PACKAGES, "tests", "images", "jobs")
MAX_LINES = 620
LONG_REASON = "Why this module is long:"

#: Layer of each package prefix; a module may import only its own layer or lower ones.
LAYERS: dict[str, float] = {
    "components.catalog": 0,
    "components.addons": 0,
    "components.config": 1,
    # The contracts between the projects, their models only (docs/architecture.md "Contracts
    # between projects"): built on the config model, read by the analysis of a fleet, so
    # between the two; listed before `components.contract`, whose writers and job-stack readers
    # build on the analysis (the first prefix that matches gives the layer).
    "components.contract.schema": 1.5,
    "components.contract.job_platform": 1.5,
    "components.contract.fleet_worker": 1.5,
    "components.contract.fleet_platform": 1.5,
    "components.analysis": 2,
    "components.resource_options": 3,
    "components.ecr_tags": 3,
    "components.platform": 3,
    "components.training_jobs": 3,
    "components.contract": 3,
    # The composition roots' typed functions (components/roots/): they compose everything, and
    # nothing of the project imports them but the three __main__.py shims.
    "components.roots": 4,
}
#: Third-party modules that create cloud resources: never imported below the platform layer.
RESOURCE_SDKS = (
    "pulumi_aws",
    "pulumi_command",
    "pulumi_docker_build",
    "pulumi_eks",
    "pulumi_kubernetes",
)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PROJECT_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _project_files() -> dict[str, Path]:
    files = {}
    for package in PACKAGES:
        for path in sorted((PROJECT_ROOT / package).rglob("*.py")):
            files[_module_name(path)] = path
    return files


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, known: set[str]) -> tuple[set[str], set[str], set[str]]:
    """(runtime project imports, type-only project imports, third-party top-level names)."""
    tree = ast.parse(path.read_text())
    type_only_nodes: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.body:
                type_only_nodes.update(id(n) for n in ast.walk(child))
    runtime: set[str] = set()
    typed: set[str] = set()
    external: set[str] = set()
    for node in ast.walk(tree):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            # `from pkg import sub` imports the submodule when `pkg.sub` is a project module.
            targets = [
                f"{node.module}.{a.name}" if f"{node.module}.{a.name}" in known else node.module
                for a in node.names
            ]
        for target in targets:
            if target in known or any(target.startswith(f"{p}.") for p in PACKAGES):
                (typed if id(node) in type_only_nodes else runtime).add(target)
            else:
                external.add(target.split(".")[0])
    return runtime, typed, external


@pytest.fixture(scope="module")
def graph() -> dict[str, tuple[set[str], set[str], set[str]]]:
    files = _project_files()
    known = set(files)
    return {name: _imports(path, known) for name, path in files.items()}


def _layer(module: str) -> float | None:
    for prefix, layer in LAYERS.items():
        if module == prefix or module.startswith(f"{prefix}."):
            return layer
    return None


def test_the_graph_sees_the_project(graph: dict[str, tuple[set[str], set[str], set[str]]]) -> None:
    assert len(graph) > 40
    assert "components.config.stack" in graph["components.config.errors"][0]
    assert "components.analysis" in graph["__main__"][0] if "__main__" in graph else True


def find_cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Every cycle a depth-first walk meets (a package's own submodules excepted)."""
    state: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(module: str) -> None:
        state[module] = 1
        stack.append(module)
        for target in sorted(edges.get(module, set())):
            # A package's __init__ importing its own submodules is not a cycle through them.
            if target.startswith(f"{module}."):
                continue
            if state.get(target) == 1:
                cycles.append([*stack[stack.index(target) :], target])
            elif target in edges and state.get(target) is None:
                visit(target)
        stack.pop()
        state[module] = 2

    for module in sorted(edges):
        if state.get(module) is None:
            visit(module)
    return cycles


def test_no_import_cycle_among_project_modules(
    graph: dict[str, tuple[set[str], set[str], set[str]]],
) -> None:
    # Type-only imports count: a cycle through `if TYPE_CHECKING:` never fails at run time, but
    # it is the same tangle to a reader and to mypy (components take values, not components).
    edges = {module: runtime | typed for module, (runtime, typed, _) in graph.items()}
    cycles = find_cycles(edges)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_cycle() -> None:
    # The check above must be able to fail: config -> training -> config, as it once was.
    edges = {
        "c.config": {"c.training"},
        "c.training": {"c.config", "c.catalog"},
        "c.catalog": set(),
    }
    assert find_cycles(edges) == [["c.config", "c.training", "c.config"]]
    assert find_cycles({"c.a": {"c.b"}, "c.b": set()}) == []


def test_each_layer_imports_only_layers_below(
    graph: dict[str, tuple[set[str], set[str], set[str]]],
) -> None:
    upward = []
    for module, (runtime, typed, _) in graph.items():
        layer = _layer(module)
        if layer is None:
            continue
        for target in runtime | typed:
            target_layer = _layer(target)
            if target_layer is None:
                continue
            same_family = module.split(".")[:2] == target.split(".")[:2]
            if target_layer > layer or (target_layer == layer and not same_family and layer < 3):
                upward.append(f"{module} -> {target}")
            # Workloads sit beside the platform: they may name its types, never run its code.
            if (
                module.startswith("components.training_jobs")
                and target.startswith("components.platform")
                and target in runtime
            ):
                upward.append(f"{module} -> {target} (workloads must not run platform code)")
    assert not upward, "\n".join(sorted(upward))


def test_config_and_analysis_import_no_resource_sdk(
    graph: dict[str, tuple[set[str], set[str], set[str]]],
) -> None:
    offenders = [
        f"{module} imports {sdk}"
        for module, (_, _, external) in graph.items()
        if (_layer(module) or 0) <= 2 and module.startswith("components")
        for sdk in RESOURCE_SDKS
        if sdk in external
    ]
    assert not offenders, offenders


def test_no_module_is_long_without_a_reason() -> None:
    long = []
    roots = [*(PROJECT_ROOT / p for p in PACKAGES), PROJECT_ROOT / "tests"]
    for root in roots:
        for path in root.rglob("*.py"):
            text = path.read_text()
            if text.count("\n") > MAX_LINES and LONG_REASON not in text[:3000]:
                long.append(f"{path.relative_to(PROJECT_ROOT)}: {text.count(chr(10))} lines")
    assert not long, long


def test_no_module_is_named_after_a_standard_library_module() -> None:
    """`logging.py` beside `cluster.py` reads as the standard library's to a newcomer (and is
    one relative import away from shadowing it)."""
    import sys

    clashes = [
        str(path.relative_to(PROJECT_ROOT))
        for root in CODE_ROOTS
        for path in (PROJECT_ROOT / root).rglob("*.py")
        if path.stem in sys.stdlib_module_names
    ]
    assert not clashes, clashes


def test_folder_names_say_what_they_hold() -> None:
    """Training-job components and the trainer image once were both `workloads/`."""
    folders = [p for p in PROJECT_ROOT.rglob("*") if p.is_dir() and ".venv" not in p.parts]
    assert not [p for p in folders if p.name == "workloads"]
    assert (PROJECT_ROOT / "components" / "training_jobs").is_dir()
    assert (PROJECT_ROOT / "images" / "trainer" / "Dockerfile").is_file()


#: The only functions allowed over 80 lines: tables of data (an IAM policy document, the alert
#: and dashboard tables, the NCCL test's objects), not logic.
LONG_DATA_FUNCTIONS = frozenset(
    {
        "components/platform/capacity/karpenter_builders.py:controller_policy",
        "components/platform/observability/alerts.py:alerts",
        "components/platform/observability/observability.py:dashboards",
        "components/platform/validation/validation.py:nccl_objects",
    }
)


def test_long_functions_are_data_only() -> None:
    roots = [*(PROJECT_ROOT / p for p in PACKAGES), PROJECT_ROOT / "images", PROJECT_ROOT / "jobs"]
    files = [PROJECT_ROOT / "__main__.py", *(f for r in roots for f in r.rglob("*.py"))]
    long = set()
    for path in files:
        if "__pycache__" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            size = (getattr(node, "end_lineno", None) or 0) - getattr(node, "lineno", 0) + 1
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and size > 80:
                long.add(f"{path.relative_to(PROJECT_ROOT).as_posix()}:{node.name}")
    assert long <= LONG_DATA_FUNCTIONS, sorted(long - LONG_DATA_FUNCTIONS)
    assert len(LONG_DATA_FUNCTIONS) <= 5


def _component_classes(tree: ast.Module) -> list[ast.ClassDef]:
    return [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.ClassDef)
        and any(ast.unparse(base).endswith("ComponentResource") for base in node.bases)
    ]


def child_option_offences(source: str, where: str) -> list[str]:
    """Sites off the one child-options convention (components/resource_options.py): a
    `ResourceOptions(parent=...)` built by hand, `child_options` given a second positional
    argument (the component's options, merged into the child), or a component's `opts` used for
    anything but its own registration (`super().__init__`)."""
    tree = ast.parse(source)
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = ast.unparse(node.func)
        if name.endswith("ResourceOptions") and any(k.arg == "parent" for k in node.keywords):
            found.append(f"{where}:{node.lineno}: ResourceOptions(parent=...) by hand")
        if name == "child_options" and len(node.args) != 1:
            found.append(f"{where}:{node.lineno}: child_options with the component's options")
    for cls in _component_classes(tree):
        for method in (n for n in cls.body if isinstance(n, ast.FunctionDef)):
            registration = [
                n
                for n in ast.walk(method)
                if isinstance(n, ast.Call) and ast.unparse(n.func) == "super().__init__"
            ]
            allowed = {id(n) for call in registration for n in ast.walk(call)}
            for n in ast.walk(method):
                loaded = isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)
                if loaded and n.id == "opts" and id(n) not in allowed:
                    found.append(f"{where}:{n.lineno}: {cls.name} passes its opts on")
    return found


def test_every_child_follows_the_child_options_convention() -> None:
    offences = []
    for path in sorted((PROJECT_ROOT / "components").rglob("*.py")):
        if path.name == "resource_options.py":
            continue
        offences += child_option_offences(path.read_text(), str(path.relative_to(PROJECT_ROOT)))
    assert not offences, "\n".join(offences)


def test_the_convention_check_sees_each_way_off_it() -> None:
    source = """
class Thing(pulumi.ComponentResource):
    def __init__(self, name, args, opts=None):
        super().__init__("t:t:T", name, None, opts)
        a = Bucket("a", opts=pulumi.ResourceOptions(parent=self))
        b = Bucket("b", opts=child_options(self, opts))
        c = Bucket("c", opts=pulumi.ResourceOptions.merge(opts, child_options(self)))
        d = Bucket("d", opts=child_options(self, depends_on=[a]))
"""
    found = child_option_offences(source, "x.py")
    assert len(found) == 4, found  # a by hand; b merged (twice: call and name); c passes opts
