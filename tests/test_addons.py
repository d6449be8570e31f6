"""The add-on registry (components/addons.py) against what the stacks render and what the repository
vendors: every namespace a stack renders outside its team namespaces belongs to an add-on the
stack installs (or to Kubernetes); every add-on a stack installs is rendered as its row says
(release, chart, repository, namespace, version from its config key, --wait budget, EKS add-on
build) and nothing else is; and the rows agree with the config model, the vendored charts and
CRDs, and each other."""

from __future__ import annotations

import typing
from collections.abc import Iterable
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from components import addons
from components.analysis.addons import Installed, config_value, installed, manager_installed
from components.config import StackConfig
from synth.harness import Registration, SynthResult
from tests.conftest import SCHEMAS

RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
EKS_ADDON = "aws:eks/addon:Addon"
POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
#: Every platform stack and the fleet's manager (their session fixtures, tests/conftest.py).
STACKS = ("dev", "prod", "prod_use1", "prod_usw2", "fleet_prod")


def _installed_and_teams(result: SynthResult) -> tuple[tuple[Installed, ...], set[str]]:
    """What the registry says `result`'s config installs, and its team namespaces."""
    if result.fleet is not None:
        return manager_installed(result.fleet.cfg), {t.namespace for t in result.fleet.teams}
    cfg: StackConfig = result.config
    return installed(cfg), {t.namespace for t in cfg.teams}


def rendered_namespaces(result: SynthResult) -> dict[str, str]:
    """Every namespace `result` renders or installs into -> one resource that does: Namespace
    objects, Helm releases, namespaced Kubernetes objects, Pod Identity associations."""
    found: dict[str, str] = {}
    for r in result.resources:
        metadata = r.inputs.get("metadata") if r.type.startswith("kubernetes:") else None
        if r.type == NAMESPACE:
            found.setdefault(str(r.inputs["metadata"]["name"]), r.name)
        elif r.type in (RELEASE, POD_IDENTITY):
            found.setdefault(str(r.inputs["namespace"]), r.name)
        elif isinstance(metadata, dict) and metadata.get("namespace"):
            found.setdefault(str(metadata["namespace"]), r.name)
    return found


@pytest.mark.parametrize("stack", STACKS)
def test_every_namespace_a_stack_renders_outside_its_teams_belongs_to_an_installed_add_on(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    found, teams = _installed_and_teams(result)
    allowed = set(addons.KUBERNETES_NAMESPACES) | {i.namespace for i in found}
    rendered = rendered_namespaces(result)
    stray = {ns: by for ns, by in rendered.items() if ns not in teams | allowed}
    assert not stray, f"namespaces no installed add-on owns (namespace: a resource): {stray}"
    assert teams and teams <= set(rendered)
    # Every namespace the program declares itself is an add-on's that says so (or a team's).
    declared = {str(r.inputs["metadata"]["name"]) for r in result.of_type(NAMESPACE)} - teams
    program = {i.namespace for i in found if i.addon.namespace_mode == "program"}
    assert declared <= program, declared - program


def test_the_namespace_check_would_catch_a_stray_namespace(dev: SynthResult) -> None:
    # The check above can fail: a namespace no add-on owns shows up.
    stray = Registration(
        urn="urn:stray",
        type=NAMESPACE,
        name="stray",
        parent="",
        provider="",
        dependencies=(),
        custom=True,
        inputs={"metadata": {"name": "cert-manager"}},
    )
    found, teams = _installed_and_teams(dev)
    allowed = set(addons.KUBERNETES_NAMESPACES) | {i.namespace for i in found} | teams
    probe = SynthResult("t", [*dev.resources, stray])
    assert set(rendered_namespaces(probe)) - allowed == {"cert-manager"}


def _releases(result: SynthResult) -> dict[str, Registration]:
    by_name = {str(r.inputs["name"]): r for r in result.of_type(RELEASE)}
    assert len(by_name) == len(result.of_type(RELEASE)), "two releases of one name"
    return by_name


@pytest.mark.parametrize("stack", STACKS)
def test_every_installed_chart_is_rendered_as_its_row_says_and_nothing_else(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    found, _ = _installed_and_teams(result)
    releases = _releases(result)
    charts = [i for i in found if i.addon.chart is not None]
    assert sorted(releases) == sorted(str(i.addon.release) for i in charts)
    for item in charts:
        addon, inputs = item.addon, releases[str(item.addon.release)].inputs
        assert inputs["chart"] == addon.chart, addon.key
        assert inputs.get("repositoryOpts") == (
            {"repo": addon.repository} if addon.repository else None
        ), addon.key
        assert inputs["namespace"] == item.namespace, addon.key
        assert inputs["timeout"] == addon.timeout_s and inputs["atomic"] is True, addon.key
        assert bool(inputs.get("createNamespace")) == (addon.namespace_mode == "helm")
        assert bool(inputs.get("skipCrds")) == addon.skip_crds, addon.key
        if result.fleet is None:  # version keys are the platform's (a manager's: same charts)
            want = config_value(result.config, addon.version_key) if addon.version_key else None
            assert inputs["version"] == (want or addon.version), addon.key
    eks = {str(r.inputs["addonName"]): r for r in result.of_type(EKS_ADDON)}
    for item in found:
        if item.addon.eks_addon is not None:
            assert eks[item.addon.eks_addon].inputs["addonVersion"] == item.addon.version


# --- the rows agree with the model, the vendored files and each other ---------------------------


def _field(model: type[BaseModel], key: str) -> Any:
    """The pydantic field at `key` (camelCase path) of `model`."""
    field: Any = None
    for part in key.split("."):
        fields = {(f.alias or name): f for name, f in model.model_fields.items()}
        field = fields[part]
        inner = [a for a in (field.annotation, *typing.get_args(field.annotation))]
        model = next((a for a in inner if isinstance(a, type) and issubclass(a, BaseModel)), model)
    return field


def test_config_keys_resolve_and_default_to_the_rows_namespace() -> None:
    for addon in addons.ADDONS:
        if addon.version_key is not None:
            field = _field(StackConfig, addon.version_key)
            assert isinstance(field.get_default(call_default_factory=True), str), addon.key
        if addon.namespace_key is not None:
            field = _field(StackConfig, addon.namespace_key)
            assert field.get_default(call_default_factory=True) == addon.namespace, addon.key
            choices = typing.get_args(field.annotation)
            if choices:  # a Literal: the registry lists every value it allows
                assert set(choices) == set(addon.namespaces), addon.key
        assert addon.version_key is None or addon.version is None, addon.key
        assert addon.chart is None or (addon.version_key or addon.version), addon.key


def _crd_groups(folder: str) -> set[str]:
    return {
        doc["spec"]["group"]
        for path in (SCHEMAS / "crds" / folder).glob("*.yaml")
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    }


def test_rows_name_the_vendored_charts_and_crds() -> None:
    for addon in addons.helm_addons():
        assert (SCHEMAS / "charts" / str(addon.chart_name) / "values.yaml").is_file(), addon.key
        if addon.crds is not None:
            assert _crd_groups(addon.crds) == set(addon.crd_groups), addon.key


def _unique(values: Iterable[Any]) -> bool:
    listed = [v for v in values if v is not None]
    return len(listed) == len(set(listed))


def test_rows_are_unique_and_agree_on_shared_namespaces() -> None:
    assert _unique(a.key for a in addons.ADDONS)
    assert _unique(a.release for a in addons.ADDONS)
    assert _unique(g for a in addons.ADDONS for g in a.crd_groups)
    levels: dict[str, set[str]] = {}
    for addon in addons.ADDONS:
        levels.setdefault(addon.namespace, set()).add(addon.pod_security)
        # A namespace nobody creates is one of Kubernetes' own, at its level.
        if addon.namespace_mode == "exists":
            assert addon.namespace in addons.KUBERNETES_NAMESPACES, addon.key
    for name, level in addons.KUBERNETES_NAMESPACES.items():
        levels.setdefault(name, set()).add(level)
    assert all(len(found) == 1 for found in levels.values()), levels


def test_derived_lists() -> None:
    assert addons.kueue_webhook_exempt() == {"kube-system", "kueue-system"}
    assert addons.device_plugins() == {
        "nvidia.com/gpu": "gpu-operator",
        "vpc.amazonaws.com/efa": "aws-efa-k8s-device-plugin",
    }
    assert addons.chart_crds()["karpenter-crd"] == "karpenter-provider-aws"
    assert addons.crd_owners()["external-secrets.io"] == "external-secrets"
    # Exempt from the host-access rules: privileged; from the restricted rule: baseline too.
    privileged = set(addons.namespaces_at(["privileged"]))
    assert privileged == {"kube-system", "gpu-operator", "karpenter", "monitoring"} | {
        "amazon-cloudwatch"
    }
    assert set(addons.namespaces_at(["privileged", "baseline"])) - privileged == {
        "kyverno",
        "external-secrets",
        "gpu-platform-storage",
    }
    assert set(addons.platform_namespaces()) >= set(addons.KUBERNETES_NAMESPACES)
