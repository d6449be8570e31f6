"""Resource options of a component's children and the namespaces components own: one helper
each, the one convention every child follows (tests/test_layout.py keeps it).

A child gets `parent=<its component>` and the options it needs itself (provider, depends_on,
...), never a copy of the component's own options. What a child should share with its component
reaches it through `parent`: the Python SDK fills an unset `protect` and the providers map from
the parent (pulumi/pulumi sdk/python/lib/pulumi/resource.py@v3.272.0, Resource.__init__: "Infer
protection from parent", "Infer providers and provider maps from parent"), and the engine does
the same for `retainOnDelete` (Pulumi docs, resource options protect, provider, providers,
retainOnDelete: "the default is to inherit this value from the parent resource"). What must not
reach children is exactly what a merge would copy: the component's aliases and import id (they
name the component, not its children), ignore_changes / replace_on_changes (property paths of
another type), custom timeouts, and its depends_on (children that need an ordering say so
themselves, with values their component received)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pulumi
import pulumi_kubernetes as k8s


def child_options(parent: pulumi.Resource, **extra: Any) -> pulumi.ResourceOptions:
    """What a child of `parent` (a component; in the network, a VPC its subnets have always
    been parented to) is created with: `parent` and the child's own `extra` options."""
    return pulumi.ResourceOptions(parent=parent, **extra)


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


def manifest_resource(
    resource_name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    """A custom resource from a rendered manifest (apiVersion, kind, metadata, spec)."""
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=opts,
    )
