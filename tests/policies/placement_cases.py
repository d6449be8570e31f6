"""Violating and compliant cases of the placement rule (policies/rules/placement.py)."""

from __future__ import annotations

from typing import Any

RULE = "gpu-platform-karpenter-placement-group-one-zone"


def _node_class(**spec: Any) -> tuple[str, str, dict[str, Any], tuple[str, ...]]:
    body = {
        "amiSelectorTerms": [{"alias": "al2023@v20251023"}],
        "metadataOptions": {"httpTokens": "required"},
        **spec,
    }
    return (
        "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
        "gpu-efa",
        {"apiVersion": "karpenter.k8s.aws/v1", "kind": "EC2NodeClass", "spec": body},
        (),
    )


PLACEMENT_CASES: list[tuple[str, str, list[Any], dict[str, Any], bool]] = [
    (
        RULE,
        "placement group with every tagged subnet",
        [
            _node_class(
                placementGroupSelector={"id": "pg-0abc"},
                subnetSelectorTerms=[{"tags": {"karpenter.sh/discovery": "gpu-prod"}}],
            )
        ],
        {},
        True,
    ),
    (
        RULE,
        "placement group with two subnets by id",
        [
            _node_class(
                placementGroupSelector={"id": "pg-0abc"},
                subnetSelectorTerms=[{"id": "subnet-0a"}, {"id": "subnet-0b"}],
            )
        ],
        {},
        True,
    ),
    (
        RULE,
        "placement group with the group's one subnet",
        [
            _node_class(
                placementGroupSelector={"id": "pg-0abc"},
                subnetSelectorTerms=[{"id": "subnet-0a"}],
            )
        ],
        {},
        False,
    ),
    (
        RULE,
        "reserved class in the group keeps every subnet (the ODCR's AZ decides)",
        [
            _node_class(
                placementGroupSelector={"id": "pg-0abc"},
                capacityReservationSelectorTerms=[{"id": "cr-0abc"}],
                subnetSelectorTerms=[{"tags": {"karpenter.sh/discovery": "gpu-prod"}}],
            )
        ],
        {},
        False,
    ),
    (
        RULE,
        "no placement group",
        [_node_class(subnetSelectorTerms=[{"tags": {"karpenter.sh/discovery": "gpu-prod"}}])],
        {},
        False,
    ),
]
