"""The gpu-platform policy rules, one module per area, each exporting a `POLICIES` list."""

from __future__ import annotations

from pulumi_policy import Policy

from policies.rules import (
    autoscaling,
    aws,
    compute,
    fleet,
    iam,
    kubernetes,
    placement,
    security,
    tenancy,
    topology,
)

PACK_NAME = "gpu-platform"


def all_policies() -> list[Policy]:
    """Every rule of the pack, in a stable order (area, then declaration order)."""
    return [
        *aws.POLICIES,
        *iam.POLICIES,
        *kubernetes.POLICIES,
        *compute.POLICIES,
        *autoscaling.POLICIES,
        *placement.POLICIES,
        *topology.POLICIES,
        *security.POLICIES,
        *tenancy.POLICIES,
        *fleet.POLICIES,
    ]
