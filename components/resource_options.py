"""Resource options of a component's children and the namespaces components own: one helper
each, so every child is parented to its component and carries the options the component was
created with (the house rule: merge the caller's options, never drop them), and everything in a
namespace waits for it."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s


def child_options(
    component: pulumi.Resource, opts: pulumi.ResourceOptions | None = None, **extra: Any
) -> pulumi.ResourceOptions:
    """`opts` (the component's own, may be None) merged with `parent=component` and `extra`
    (provider, depends_on, ...): what a child resource of `component` is created with."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=component, **extra))


def owned_namespace(
    resource_name: str, namespace: str, labels: dict[str, str], opts: pulumi.ResourceOptions
) -> tuple[k8s.core.v1.Namespace, pulumi.ResourceOptions]:
    """A namespace a component owns (`labels`: its Pod Security level or team labels), and the
    options of what lives in it: `opts` plus a dependency on the namespace, so nothing is
    created before it (and deletes run the other way)."""
    created = k8s.core.v1.Namespace(
        resource_name, metadata={"name": namespace, "labels": labels}, opts=opts
    )
    inside = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=[created]))
    return created, inside
