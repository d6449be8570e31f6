"""Shared machinery for the rules: policy builders, config defaults and shape helpers.

A rule is written as a plain generator (`check`) that yields violation messages; the builders
wrap it in a pulumi-policy `ResourceValidationPolicy` or `StackValidationPolicy` with the rule's
metadata. Property values come wrapped in pulumi-policy's unknown-checking proxies, which are
`Mapping`/`Sequence` but not `dict`/`list`: the helpers below only rely on the abstract types.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeGuard

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    Severity,
    StackValidationArgs,
    StackValidationPolicy,
)

MANDATORY = EnforcementLevel.MANDATORY
ADVISORY = EnforcementLevel.ADVISORY
LOW, MEDIUM, HIGH, CRITICAL = Severity.LOW, Severity.MEDIUM, Severity.HIGH, Severity.CRITICAL

Config = Mapping[str, Any]
Schema = dict[str, dict[str, Any]]


@dataclass(frozen=True)
class Resource:
    """What a resource check sees: type token, name, URN and (input) properties."""

    type: str
    name: str
    urn: str
    props: Mapping[str, Any]


ResourceCheck = Callable[[Resource, Config], Iterable[str]]
#: Yields (message, urn or None for the stack as a whole).
StackCheck = Callable[[Sequence[PolicyResource], Config], Iterable[tuple[str, str | None]]]


def with_defaults(schema: Schema | None, given: Config) -> dict[str, Any]:
    """The policy's config: schema defaults, overridden by what the stack's config file sets.

    The Pulumi CLI fills in schema defaults before `Configure`; the servicer alone does not.
    """
    config = {key: spec["default"] for key, spec in (schema or {}).items() if "default" in spec}
    config.update({key: value for key, value in given.items() if key != "enforcementLevel"})
    return config


def _schema(schema: Schema | None) -> PolicyConfigSchema | None:
    return PolicyConfigSchema(properties=schema) if schema else None


#: The types each rule built by `resource_rule` checks; `validate` ignores every other type.
_RESOURCE_TYPES: weakref.WeakKeyDictionary[Policy, frozenset[str]] = weakref.WeakKeyDictionary()


def resource_rule(
    *,
    name: str,
    description: str,
    types: Iterable[str],
    check: ResourceCheck,
    severity: Severity,
    enforcement: EnforcementLevel,
    remediation: str,
    config: Schema | None = None,
) -> ResourceValidationPolicy:
    """A resource policy that runs `check` on the resources of the given types."""
    wanted = frozenset(types)

    def validate(args: ResourceValidationArgs, report: ReportViolation) -> None:
        if args.resource_type not in wanted:
            return
        resource = Resource(args.resource_type, args.name, args.urn, args.props)
        for message in check(resource, with_defaults(config, args.get_config())):
            report(message, None)

    policy = ResourceValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=enforcement,
        severity=severity,
        remediation_steps=remediation,
        config_schema=_schema(config),
    )
    _RESOURCE_TYPES[policy] = wanted
    return policy


def resource_types(policy: Policy) -> frozenset[str] | None:
    """The resource types a rule built by `resource_rule` checks; None: it may check any.

    A runner can hand the rule only resources of these types (synth/policy.py) instead of
    calling it for every resource of the stack, with the same result.
    """
    return _RESOURCE_TYPES.get(policy)


def stack_rule(
    *,
    name: str,
    description: str,
    check: StackCheck,
    severity: Severity,
    enforcement: EnforcementLevel,
    remediation: str,
    config: Schema | None = None,
) -> StackValidationPolicy:
    """A stack policy: sees every resource (with parents and dependencies) at once."""

    def validate(args: StackValidationArgs, report: ReportViolation) -> None:
        for message, urn in check(args.resources, with_defaults(config, args.get_config())):
            report(message, urn)

    return StackValidationPolicy(
        name=name,
        description=description,
        validate=validate,
        enforcement_level=enforcement,
        severity=severity,
        remediation_steps=remediation,
        config_schema=_schema(config),
    )


# --- shape helpers ------------------------------------------------------------------------------


def is_map(value: Any) -> TypeGuard[Mapping[str, Any]]:
    return isinstance(value, Mapping)


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def dig(value: Any, *path: str | int) -> Any:
    """`value[p0][p1]...`, or None where a step is missing or of the wrong shape."""
    for step in path:
        if isinstance(step, int):
            if not is_list(value) or step >= len(value):
                return None
        elif not is_map(value) or step not in value:
            return None
        value = value[step]
    return value


def as_list(value: Any) -> list[Any]:
    """A list for a list, [x] for a scalar x, [] for None (IAM documents allow all three)."""
    if value is None:
        return []
    if is_list(value):
        return list(value)
    return [value]


def truthy(value: Any) -> bool:
    """Booleans as AWS and Kubernetes accept them: True or the string "true"."""
    return value is True or (isinstance(value, str) and value.lower() == "true")


def json_doc(value: Any) -> Mapping[str, Any] | None:
    """A JSON policy document given as a string or as a structure; None when unreadable."""
    if is_map(value):
        return value
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return None
        return parsed if isinstance(parsed, dict) else None
    return None


def statements(document: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    if document is None:
        return []
    return [s for s in as_list(document.get("Statement")) if is_map(s)]


def fmt(value: Any) -> str:
    """A value for a message: the wire sends every number as a float, 2 prints as 2, not 2.0."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return repr(value) if isinstance(value, str) else str(value)


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity as a number (plain numbers and the suffixes this platform uses)."""
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    suffixes = {"m": 1e-3, "k": 1e3, "Ki": 1024.0, "Mi": 1024.0**2, "Gi": 1024.0**3}
    for suffix, factor in sorted(suffixes.items(), key=lambda item: -len(item[0])):
        if text.endswith(suffix):
            try:
                return float(text[: -len(suffix)]) * factor
            except ValueError:
                return None
    try:
        return float(text)
    except ValueError:
        return None


def dependents(
    resources: Sequence[PolicyResource], target: PolicyResource, of_type: str
) -> Iterator[PolicyResource]:
    """Resources of `of_type` that depend on `target` (e.g. a bucket's versioning resource)."""
    for resource in resources:
        if resource.resource_type != of_type:
            continue
        deps = list(resource.dependencies)
        for urns in resource.property_dependencies.values():
            deps.extend(urns)
        if any(dep is target or getattr(dep, "urn", None) == target.urn for dep in deps):
            yield resource
