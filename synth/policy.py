"""Run the policy pack in-process over a synthesized stack, as `pulumi preview --policy-pack`
would, and produce the `policy-report.json` records.

Resource policies get a `ResourceValidationArgs` per captured registration (inputs, wire names);
stack policies get every resource once, with parents and dependencies resolved. Both are built
from pulumi-policy's public classes, with the pack's config from `policies/config.<stack>.json`
(the file the CI preview passes as `policyPackConfigs`), schema defaults filled in as the CLI
does. Stack policies see outputs under the real engine; here they see inputs, which is what the
mocks return as outputs too. tests/policies/test_policies.py checks this runner against the
servicer the CLI talks to (`pulumi_policy.policy._PolicyAnalyzerServicer`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import unknown_checking_proxy

from policies.rules.common import resource_types
from synth.harness import Registration, SynthResult

LEVELS = {level.value: level for level in EnforcementLevel}
_TYPES: dict[str, type | tuple[type, ...]] = {
    "boolean": bool,
    "integer": int,
    "number": (int, float),
    "string": str,
    "array": list,
    "object": dict,
}


class PolicyConfigError(Exception):
    """The pack's config file is unreadable or does not match the rules' schemas."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        super().__init__("\n".join(lines))


@dataclass(frozen=True, order=True)
class Violation:
    """One line of policy-report.json."""

    policy: str
    urn: str
    message: str
    enforcement: str
    severity: str

    def to_json(self) -> dict[str, str]:
        return {
            "policy": self.policy,
            "enforcement": self.enforcement,
            "severity": self.severity,
            "urn": self.urn,
            "message": self.message,
        }


def config_path(root: Path, stack: str) -> Path:
    return root / "policies" / f"config.{stack}.json"


def load_config(path: Path, policies: list[Policy]) -> dict[str, Any]:
    """Read a pack config file (`pulumi preview --policy-pack-config` format) and check it
    against the rules: known policy names, known properties of the right JSON type, valid
    enforcement levels. tests/policies/test_policies.py validates the full JSON schemas."""
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise PolicyConfigError([f"{path.name}: not valid JSON ({exc})"]) from None
    if not isinstance(data, dict):
        raise PolicyConfigError([f"{path.name}: expected an object of policy names"])
    by_name = {p.name: p for p in policies}
    problems = []
    for name, raw in data.items():
        where = f"{path.name}: {name}"
        if name != "all" and name not in by_name:
            problems.append(f"{where}: no such policy")
            continue
        value = {"enforcementLevel": raw} if isinstance(raw, str) else raw
        if not isinstance(value, dict):
            problems.append(f"{where}: expected an enforcement level or an object")
            continue
        level = value.get("enforcementLevel")
        if level is not None and level not in LEVELS:
            problems.append(f"{where}.enforcementLevel: got {level!r}; one of {sorted(LEVELS)}")
        schema = by_name[name].config_schema if name in by_name else None
        properties = schema.properties if schema else {}
        for key, item in value.items():
            if key == "enforcementLevel":
                continue
            spec = properties.get(key)
            if spec is None:
                problems.append(f"{where}.{key}: no such setting")
            elif not isinstance(item, _TYPES[spec["type"]]) or (
                spec["type"] in ("integer", "number") and isinstance(item, bool)
            ):
                problems.append(f"{where}.{key}: got {item!r}; expected {spec['type']}")
    if problems:
        raise PolicyConfigError(problems)
    return data


def _settings(config: Mapping[str, Any], name: str) -> tuple[str | None, dict[str, Any]]:
    value = config.get(name, {})
    if isinstance(value, str):
        return value, {}
    value = dict(value)
    return value.pop("enforcementLevel", None), value


def _level(policy: Policy, config: Mapping[str, Any]) -> EnforcementLevel:
    own, _ = _settings(config, policy.name)
    every, _ = _settings(config, "all")
    chosen = own or every
    if chosen is not None:
        return LEVELS[chosen]
    return policy.enforcement_level or EnforcementLevel.ADVISORY


def _options(resource: Registration) -> PolicyResourceOptions:
    return PolicyResourceOptions(
        False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], resource.parent or None
    )


def _collector(
    violations: list[Violation], policy: Policy, level: EnforcementLevel, default_urn: str = ""
) -> ReportViolation:
    severity = policy.severity.value if policy.severity else "unspecified"

    def report(message: str, urn: str | None = None) -> None:
        violations.append(
            Violation(policy.name, urn or default_urn, message, level.value, severity)
        )

    return report


def evaluate(
    result: SynthResult, policies: list[Policy], config: Mapping[str, Any]
) -> list[Violation]:
    """Every violation the pack reports for the stack, sorted."""
    violations: list[Violation] = []
    # Built once per resource, shared by every policy that looks at it.
    props = {r.urn: unknown_checking_proxy(r.inputs) for r in result.resources}
    options = {r.urn: _options(r) for r in result.resources}
    by_type: dict[str, list[Registration]] = {}
    for r in result.resources:
        by_type.setdefault(r.type, []).append(r)
    stack_resources: list[PolicyResource] | None = None
    for policy in policies:
        level = _level(policy, config)
        if level == EnforcementLevel.DISABLED:
            continue
        if level == EnforcementLevel.REMEDIATE:
            level = EnforcementLevel.MANDATORY
        _, settings = _settings(config, policy.name)
        if isinstance(policy, ResourceValidationPolicy):
            # A rule that names its types returns at once for any other: calling it for every
            # resource made the pack's cost (policies x resources) the bulk of its runtime.
            types = resource_types(policy)
            candidates = (
                result.resources
                if types is None
                else [r for t in sorted(types) for r in by_type.get(t, ())]
            )
            for resource in candidates:
                args = ResourceValidationArgs(
                    resource.type,
                    props[resource.urn],
                    resource.urn,
                    resource.name,
                    options[resource.urn],
                    None,
                    settings,
                )
                policy.validate(args, _collector(violations, policy, level, resource.urn))
        elif isinstance(policy, StackValidationPolicy):
            if stack_resources is None:
                stack_resources = _stack_resources(result, props, options)
            policy.validate(
                StackValidationArgs(stack_resources, settings),
                _collector(violations, policy, level),
            )
    return sorted(set(violations))


def _stack_resources(
    result: SynthResult,
    props: Mapping[str, Any],
    options: Mapping[str, PolicyResourceOptions],
) -> list[PolicyResource]:
    by_urn: dict[str, PolicyResource] = {}
    for r in result.resources:
        by_urn[r.urn] = PolicyResource(
            r.type, props[r.urn], r.urn, r.name, options[r.urn], None, None, [], {}
        )
    for r in result.resources:
        resource = by_urn[r.urn]
        resource.parent = by_urn.get(r.parent)
        resource.dependencies = [by_urn[d] for d in r.dependencies if d in by_urn]
    return list(by_urn.values())


def report_json(violations: list[Violation]) -> str:
    return json.dumps({"violations": [v.to_json() for v in violations]}, indent=2) + "\n"


def is_mandatory(violation: Violation) -> bool:
    return violation.enforcement == EnforcementLevel.MANDATORY.value
