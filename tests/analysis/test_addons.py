"""A team may not take a namespace an add-on of its stack uses, nor one of Kubernetes' own
(#36 finding 10): the reserved names are what the stack installs, read from the add-on registry
with the stack's config (components/analysis/addons.py), checked before any resource is
registered. A fleet's manager holds the fleet's teams to its own add-ons:
tests/fleet/test_fleet_wiring.py."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from components import addons, analysis
from components import config as stack_config
from components.analysis import addons as installed_addons
from tests.analysis.fleet_inputs import fleet_values
from tests.analysis.fleet_inputs import manager_config as fleet_config
from tests.conftest import config_error_test, stack_values


def _values(stack: str) -> dict[str, Any]:
    return copy.deepcopy(stack_values(stack))


def _parse(values: dict[str, Any]) -> stack_config.StackConfig:
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return stack_config.parse(stack_config.namespace_values(raw))


def _team_namespace(values: dict[str, Any], namespace: str, index: int = 0) -> dict[str, Any]:
    values["gpu-platform:teams"][index]["namespace"] = namespace
    return values


def _problems(values: dict[str, Any]) -> list[tuple[str, Any]]:
    return [(p.key, p.value) for p in analysis.validate(_parse(values))]


# --- the config check, through the CLI (exit 2, one line naming the key) ---------------------

KEY = "gpu-platform:teams[0].namespace"

INVALID = [
    (
        "Kubernetes' own namespace",
        lambda c: _team_namespace(c, "kube-system"),
        KEY,
        "a namespace of the team's own (this one belongs to Kubernetes;",
    ),
    (
        "the External Secrets Operator's namespace (an add-on by Helm createNamespace)",
        lambda c: _team_namespace(c, "external-secrets"),
        KEY,
        "(this one belongs to External Secrets Operator; this stack's add-ons and Kubernetes use "
        "amazon-cloudwatch, default, external-secrets,",
    ),
    (
        "Kyverno's namespace",
        lambda c: _team_namespace(c, "kyverno"),
        KEY,
        "(this one belongs to Kyverno;",
    ),
    (
        "the FSx team-directory Jobs' namespace on an FSx stack",
        lambda c: _team_namespace(c, "gpu-platform-storage"),
        KEY,
        "(this one belongs to FSx team-directory Jobs;",
    ),
    (
        "the namespace the stack's config moved kube-prometheus-stack to",
        lambda c: _team_namespace(
            c.update({"gpu-platform:observability": {"namespace": "metrics"}}) or c, "metrics"
        ),
        KEY,
        "(this one belongs to kube-prometheus-stack;",
    ),
]

test_a_team_namespace_an_add_on_uses_exits_2 = config_error_test(INVALID, lambda: _values("prod"))


def test_dev_with_validation_reserves_its_namespace() -> None:
    assert _problems(_team_namespace(_values("dev"), "gpu-validation")) == [
        ("teams[0].namespace", "gpu-validation")
    ]


# --- what is reserved is what the stack installs -----------------------------------------------


def test_a_namespace_of_an_add_on_the_stack_does_not_install_is_free() -> None:
    # prod runs no validation tests; dev uses EFS, not FSx; prod-use1 has no autoscaler.
    assert _problems(_team_namespace(_values("prod"), "gpu-validation")) == []
    assert _problems(_team_namespace(_values("dev"), "gpu-platform-storage")) == []
    values = _values("prod")
    values["gpu-platform:security"] = {
        **values.get("gpu-platform:security", {}),
        "secrets": {"enabled": False},
    }
    assert _problems(_team_namespace(values, "external-secrets")) == []


def test_a_moved_add_on_frees_its_default_namespace() -> None:
    values = _values("prod")
    values["gpu-platform:observability"] = {"namespace": "metrics"}
    assert _problems(_team_namespace(values, "monitoring")) == []


def test_every_committed_stack_passes_and_reserves_kubernetes_namespaces() -> None:
    for stack in ("dev", "prod", "prod-use1", "prod-usw2"):
        cfg = _parse(_values(stack))
        assert installed_addons.namespace_problems(cfg) == [], stack
        owners = installed_addons.reserved(installed_addons.installed(cfg))
        assert set(addons.KUBERNETES_NAMESPACES) <= set(owners)
        assert owners["kube-system"] == "Kubernetes"


def test_config_value_reads_camel_case_keys() -> None:
    cfg = _parse(_values("prod"))
    assert installed_addons.config_value(cfg, "gpuOperator.namespace") == "gpu-operator"
    assert installed_addons.config_value(cfg, "security.secrets.chartVersion") == (
        cfg.security.secrets.chart_version
    )
    with pytest.raises(KeyError):
        installed_addons.config_value(cfg, "gpuOperator.nameSpace")


# --- the values the rule reads, pinned whole (issue #39's mutation run) -------------------------

PROD_RESERVED = (
    "amazon-cloudwatch, default, external-secrets, gpu-operator, gpu-platform-storage, "
    "kube-node-lease, kube-public, kube-system, kubeflow-system, kueue-system, kyverno, "
    "monitoring, volcano-system"
)


def test_each_team_on_a_reserved_namespace_is_named_with_its_owner_and_every_reserved_name() -> (
    None
):
    values = _team_namespace(_team_namespace(_values("prod"), "kyverno", 0), "kube-system", 1)
    assert installed_addons.namespace_problems(_parse(values)) == [
        stack_config.Problem(
            "teams[0].namespace",
            "kyverno",
            "a namespace of the team's own (this one belongs to Kyverno; this stack's add-ons and "
            f"Kubernetes use {PROD_RESERVED})",
        ),
        stack_config.Problem(
            "teams[1].namespace",
            "kube-system",
            "a namespace of the team's own (this one belongs to Kubernetes; this stack's add-ons "
            f"and Kubernetes use {PROD_RESERVED})",
        ),
    ]


def test_a_namespace_two_add_ons_share_names_both_and_kubernetes_keeps_its_own() -> None:
    by_key = {addon.key: addon for addon in addons.ADDONS}
    found = [
        installed_addons.Installed(by_key["kueue"], "shared"),
        installed_addons.Installed(by_key["kyverno"], "shared"),
        installed_addons.Installed(by_key["external-secrets"], "kube-system"),
    ]
    owners = installed_addons.reserved(found)
    assert owners == {
        **dict.fromkeys(addons.KUBERNETES_NAMESPACES, "Kubernetes"),
        "shared": "Kueue, Kyverno",
    }
    assert installed_addons.allowed("shared", owners, "the manager's") == (
        "a namespace of the team's own (this one belongs to Kueue, Kyverno; the manager's add-ons "
        f"and Kubernetes use {', '.join(sorted(owners))})"
    )


def test_prod_installs_each_add_on_in_its_configured_namespace() -> None:
    cfg = _parse(_values("prod"))
    assert [(i.addon.key, i.namespace) for i in installed_addons.installed(cfg)][:3] == [
        ("kueue", "kueue-system"),
        ("volcano", "volcano-system"),
        ("kubeflow-trainer", "kubeflow-system"),
    ]
    values = _values("prod")
    values["gpu-platform:observability"] = {"namespace": "metrics"}
    moved = {i.addon.title: i.namespace for i in installed_addons.installed(_parse(values))}
    assert moved["kube-prometheus-stack"] == "metrics"


def test_a_fleet_manager_installs_its_own_add_ons_where_they_live() -> None:
    assert [
        (i.addon.key, i.namespace) for i in installed_addons.manager_installed(fleet_config())
    ] == [
        ("kueue", "kueue-system"),
        ("kubeflow-trainer", "kubeflow-system"),
        ("amazon-cloudwatch-observability", "amazon-cloudwatch"),
        ("external-secrets", "external-secrets"),
    ]


def test_a_fleet_manager_puts_external_secrets_where_its_config_says() -> None:
    values = fleet_values()
    values["secrets"] = {**(values.get("secrets") or {}), "namespace": "eso"}
    found = installed_addons.manager_installed(fleet_config(values))
    assert [(i.addon.key, i.namespace) for i in found][-1] == ("external-secrets", "eso")
