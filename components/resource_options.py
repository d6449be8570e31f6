"""Resource options of a component's children: one helper, so every child is parented to its
component and carries the options the component was created with (the house rule: merge the
caller's options, never drop them)."""

from __future__ import annotations

from typing import Any

import pulumi


def child_options(
    component: pulumi.Resource, opts: pulumi.ResourceOptions | None = None, **extra: Any
) -> pulumi.ResourceOptions:
    """`opts` (the component's own, may be None) merged with `parent=component` and `extra`
    (provider, depends_on, ...): what a child resource of `component` is created with."""
    return pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(parent=component, **extra))
