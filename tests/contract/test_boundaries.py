"""No untyped value of a contract crosses a project boundary (issue #39): a stack output another
project reads is parsed where it is read (components/contract/schema.py `parse_contract`), and
only its model travels inward.

- The reading functions and the values they hand on (the manager's workers, a job stack's
  platform, a worker's trainer home) are typed with the contract models: no `Any`, `object`,
  `Mapping[str, Any]` or `dict[str, Any]` in their signatures, fields or properties — except
  the raw value a boundary parser takes.
- No code outside components/contract/ reads an output by its name as a dict
  (`outputs["fleetWorker"]`, `.get("jobPlatform")`): the name is the model's `OUTPUT`.
- Every module that reads a StackReference's output parses what it read.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import typing
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from pydantic import JsonValue

from synth.harness import PROJECT_ROOT

#: The reading functions and the types that carry what they read, by module.
READERS: dict[str, tuple[str, ...]] = {
    "components.platform.fleet.reading": ("worker_input", "read_worker", "read_trainer_home"),
    "components.training_jobs.job_stack": (
        "PlatformStack",
        "read_platform",
        "trainer_image",
        "plan_fleet_jobs",
    ),
    "components.contract.platform_contract": (
        "read_job_platform",
        "job_stack_config",
        "job_stack_image_problems",
    ),
    "components.contract.fleet_contract": ("fleet_contract", "fleet_job_stack", "FleetJobs"),
    "components.analysis.fleet": ("WorkerInput", "Worker", "read_workers"),
    "components.analysis.fleet_trainer": (
        "home_trainer",
        "parse_trainer",
        "TrainerWorker",
        "first_difference",
        "runtime_problem",
        "manager_runtime_problems",
    ),
    "synth.engines.fleet": ("Member", "members_of"),
}
#: The raw values the boundary parsers take (what a StackReference read: any JSON, or nothing).
RAW: frozenset[tuple[str, str]] = frozenset(
    {
        ("worker_input", "fleet_worker"),
        ("worker_input", "job_platform"),
        ("read_job_platform", "value"),
    }
)
#: Not a contract: pulumi-eks's kubeconfig, handed to the Kubernetes provider as it is.
NOT_A_CONTRACT = frozenset({("PlatformStack", "kubeconfig")})
#: Project code (tests aside) and the contract package, where the output names live.
CODE = [
    *(PROJECT_ROOT / "components").rglob("*.py"),
    *(PROJECT_ROOT / "synth").rglob("*.py"),
    *(PROJECT_ROOT / "policies").rglob("*.py"),
    PROJECT_ROOT / "__main__.py",
    PROJECT_ROOT / "jobs" / "__main__.py",
    PROJECT_ROOT / "fleet" / "__main__.py",
]
CONTRACT_PACKAGE = PROJECT_ROOT / "components" / "contract"
OUTPUT_NAMES = frozenset({"jobPlatform", "fleetWorker"})


def untyped(hint: object) -> list[str]:
    """The parts of `hint` that say nothing of a contract's shape: `Any`, `object`, and mappings
    to `Any` (`JsonValue` is typed JSON: a Kubernetes object inside a contract)."""
    if hint is Any:
        return ["Any"]
    if hint is object:
        return ["object"]
    if hint is JsonValue:
        return []
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    found = []
    if origin in (dict, Mapping) and args and args[-1] is Any:
        found.append(f"{getattr(origin, '__name__', origin)}[..., Any]")
        args = args[:-1]
    for arg in args:
        found += untyped(arg)
    return found


def _hints(target: object) -> Iterator[tuple[str, object]]:
    """(name, hint) of a function's parameters and return, a class's fields and properties."""
    if inspect.isclass(target):
        yield from typing.get_type_hints(target).items()
        for name, member in inspect.getmembers(target):
            if isinstance(member, property) and member.fget is not None:
                yield name, typing.get_type_hints(member.fget).get("return")
            elif inspect.isfunction(member) and not name.startswith("_"):
                for param, hint in typing.get_type_hints(member).items():
                    yield f"{name}.{param}", hint
    else:
        yield from typing.get_type_hints(target).items()


def _readers() -> Iterator[tuple[str, object]]:
    for module_name, names in READERS.items():
        module = importlib.import_module(module_name)
        for name in names:
            yield name, getattr(module, name)


@pytest.mark.parametrize(("name", "target"), list(_readers()), ids=lambda v: str(v)[:40])
def test_the_readers_hand_on_typed_values(name: str, target: object) -> None:
    found = [
        f"{field}: {part}"
        for field, hint in _hints(target)
        if (name, field) not in RAW | NOT_A_CONTRACT
        for part in untyped(hint)
    ]
    assert not found, f"{name} takes or gives an untyped contract value: {found}"


def test_the_check_sees_an_untyped_mapping() -> None:
    def reader(facts: Mapping[str, Any], other: dict[str, int]) -> object:
        return facts

    assert [part for _, hint in _hints(reader) for part in untyped(hint)] == [
        "Mapping[..., Any]",
        "object",
    ]
    assert untyped(Mapping[str, JsonValue]) == []


def _output_reads(tree: ast.AST) -> list[int]:
    """Lines that read `jobPlatform` / `fleetWorker` by name from a dict."""
    lines = []
    for node in ast.walk(tree):
        key: ast.expr | None = None
        if isinstance(node, ast.Subscript):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
        ):
            key = node.args[0]
        if isinstance(key, ast.Constant) and key.value in OUTPUT_NAMES:
            lines.append(node.lineno)
    return lines


def test_no_code_reads_an_output_as_a_dict() -> None:
    found = [
        f"{path.relative_to(PROJECT_ROOT)}:{line}"
        for path in CODE
        if CONTRACT_PACKAGE not in path.parents
        for line in _output_reads(ast.parse(path.read_text()))
    ]
    assert not found, found
    assert _output_reads(ast.parse('outputs["fleetWorker"]["vpcId"]; o.get("jobPlatform")')) == [
        1,
        1,
    ]


def _calls(tree: ast.AST, names: Callable[[str], bool]) -> bool:
    return any(
        isinstance(node, ast.Call)
        and names(
            node.func.attr
            if isinstance(node.func, ast.Attribute)
            else node.func.id
            if isinstance(node.func, ast.Name)
            else ""
        )
        for node in ast.walk(tree)
    )


def test_every_module_that_reads_an_output_parses_it() -> None:
    readers = []
    for path in CODE:
        tree = ast.parse(path.read_text())
        if _calls(tree, lambda name: name == "get_output_details"):
            readers.append(path.relative_to(PROJECT_ROOT))
            assert _calls(tree, lambda name: name in {"parse_contract", "read_job_platform"}), (
                f"{path.relative_to(PROJECT_ROOT)} reads a stack output and parses none"
            )
    assert sorted(map(str, readers)) == [
        "components/platform/fleet/reading.py",
        "components/training_jobs/job_stack.py",
    ]


def test_the_parsers_are_the_only_raw_readers() -> None:
    """The boundary parsers' raw parameters are exactly those RAW names: a new one is a
    decision, made here."""
    found = set()
    for name, target in _readers():
        for field, hint in _hints(target):
            if untyped(hint) and (name, field) not in NOT_A_CONTRACT:
                found.add((name, field))
    assert found == RAW


def test_the_listed_modules_exist() -> None:
    for module_name in READERS:
        path = PROJECT_ROOT / Path(*module_name.split("."))
        assert path.with_suffix(".py").is_file(), module_name
