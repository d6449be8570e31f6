"""The one Helm release builder: a chart of the add-on registry (components/addons.py) as a
`helm.v3.Release`, with the row's release name, chart, repository, namespace, CRD handling and
`--wait` budget. The component that installs the add-on passes what only it knows: the version
from its config slice (the row's `version_key`), a namespace its config moved, the values and
what the release waits for. Every release is atomic: a failed install is rolled back, so a
half-installed controller never serves later objects (tests/synth/test_awaits.py).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.addons import Addon


def helm_release(
    resource_name: str,
    addon: Addon,
    *,
    opts: pulumi.ResourceOptions,
    version: str | None = None,
    namespace: str | None = None,
    values: Mapping[str, Any] | None = None,
) -> k8s.helm.v3.Release:
    """`addon`'s chart as a release named `resource_name`. `version`: the chart version of the
    stack's config (default: the row's pinned one); `namespace`: where the config put it
    (default: the row's). Inputs a row does not use stay unset (not empty), as Helm's
    defaults."""
    if addon.chart is None:
        raise ValueError(f"add-on {addon.key} is not a Helm chart")
    chart_version = version if version is not None else addon.version
    if chart_version is None:
        raise ValueError(f"add-on {addon.key}: no chart version (config {addon.version_key})")
    return k8s.helm.v3.Release(
        resource_name,
        name=addon.release,
        chart=addon.chart,
        version=chart_version,
        repository_opts={"repo": addon.repository} if addon.repository is not None else None,
        namespace=namespace if namespace is not None else addon.namespace,
        create_namespace=True if addon.namespace_mode == "helm" else None,
        skip_crds=True if addon.skip_crds else None,
        values=dict(values) if values is not None else None,
        atomic=True,
        timeout=addon.timeout_s,
        opts=opts,
    )
