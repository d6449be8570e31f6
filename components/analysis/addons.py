"""What a stack installs, read from the add-on registry (components/addons.py) with the stack's
config, and the namespaces that leaves to no team.

A team's namespace is rendered as a Namespace object of its own, labelled and restricted, with a
quota, a LimitRange and a default-deny policy; an add-on's objects (or Helm, or EKS) would land
in the same namespace if the names met, and the team's Namespace would be rendered over the
add-on's (or beside it: two objects of one name). So a team may take neither a namespace of an
add-on this stack installs — where the stack's config put it — nor one of Kubernetes' own
(`addons.KUBERNETES_NAMESPACES`). The reserved names are what the stack installs, never a list
kept by hand: a stack without FSx may have a team called `gpu-platform-storage`; one whose
`observability.namespace` is `metrics` reserves `metrics`, not `monitoring`. A fleet's manager
runs its own add-ons (Kueue, Trainer, External Secrets, CloudWatch) in the same cluster as the
fleet's teams (`manager_installed`): components/analysis/fleet.py holds them to the same rule.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from components import addons
from components.addons import Addon
from components.config import Problem, StackConfig
from components.config.fleet import FleetManagerConfig


@dataclass(frozen=True)
class Installed:
    """An add-on a stack installs, in the namespace the stack's config gives it."""

    addon: Addon
    namespace: str


def config_value(cfg: BaseModel, key: str) -> Any:
    """The value at `key` (camelCase, dotted from `cfg`'s root, as the stack file spells it)."""
    node: Any = cfg
    for part in key.split("."):
        fields = {(field.alias or name): name for name, field in type(node).model_fields.items()}
        node = getattr(node, fields[part])
    return node


def _namespace(cfg: BaseModel, addon: Addon, key: str | None) -> str:
    return str(config_value(cfg, key)) if key is not None else addon.namespace


def installed(cfg: StackConfig) -> tuple[Installed, ...]:
    """The add-ons a platform stack installs (their `installed` predicate) and where."""
    return tuple(
        Installed(addon, _namespace(cfg, addon, addon.namespace_key))
        for addon in addons.ADDONS
        if addon.installed(cfg)
    )


def manager_installed(cfg: FleetManagerConfig) -> tuple[Installed, ...]:
    """The add-ons a fleet's manager installs (their `manager` predicate) and where."""
    return tuple(
        Installed(addon, _namespace(cfg, addon, addon.manager_namespace_key))
        for addon in addons.ADDONS
        if addon.manager is not None and addon.manager(cfg)
    )


def reserved(found: Sequence[Installed]) -> dict[str, str]:
    """Namespace -> who uses it: Kubernetes, or the add-ons of `found` (by title)."""
    owners = dict.fromkeys(addons.KUBERNETES_NAMESPACES, "Kubernetes")
    for item in found:
        if item.namespace not in addons.KUBERNETES_NAMESPACES:
            owners[item.namespace] = (
                f"{owners[item.namespace]}, {item.addon.title}"
                if item.namespace in owners
                else item.addon.title
            )
    return owners


def allowed(namespace: str, owners: dict[str, str], whose: str = "this stack's") -> str:
    """What a team namespace may be, said where `namespace` is one of `owners`' (the add-ons
    of `whose` cluster)."""
    return (
        f"a namespace of the team's own (this one belongs to {owners[namespace]}; {whose} "
        f"add-ons and Kubernetes use {', '.join(sorted(owners))})"
    )


def namespace_problems(cfg: StackConfig) -> list[Problem]:
    """A team namespace that an add-on of this stack, or Kubernetes, uses."""
    owners = reserved(installed(cfg))
    return [
        Problem(f"teams[{index}].namespace", team.namespace, allowed(team.namespace, owners))
        for index, team in enumerate(cfg.teams)
        if team.namespace in owners
    ]
