"""Placement rules: a Karpenter EC2NodeClass that launches into a placement group must also
confine its subnets to one availability zone.

Why: Karpenter v1.14.1 resolves `spec.placementGroupSelector` and adds only the
`karpenter.k8s.aws/placement-group-id` requirement for a cluster group; it does not narrow the
offerings to the group's zone (aws/karpenter-provider-aws@v1.14.1:pkg/providers/instancetype/
offering/offering.go#L142-172), while a cluster placement group cannot span zones
(https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/placement-strategies.html). A class with
a group and every tagged subnet would offer zones the group can never launch into. The class
of reserved capacity is exempt: EC2 launches a reservation in its own AZ
(components/analysis/efa_placement.py).
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.rules.common import (
    HIGH,
    MANDATORY,
    Config,
    Resource,
    as_list,
    is_map,
    resource_rule,
)

EC2_NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


def _check_one_zone(resource: Resource, _config: Config) -> Iterator[str]:
    spec = resource.props.get("spec") or {}
    if not spec.get("placementGroupSelector") or spec.get("capacityReservationSelectorTerms"):
        return
    terms = as_list(spec.get("subnetSelectorTerms"))
    by_id = [t for t in terms if is_map(t) and set(t.keys()) == {"id"}]
    if len(terms) != 1 or len(by_id) != 1:
        yield (
            f"placementGroupSelector with {len(terms)} subnetSelectorTerms, {len(by_id)} by id "
            "alone: select exactly one subnet by id (the group's AZ)"
        )


POLICIES = [
    resource_rule(
        name="gpu-platform-karpenter-placement-group-one-zone",
        description="An EC2NodeClass launching into a placement group selects one subnet by id "
        "(a cluster placement group lives in one AZ; Karpenter does not narrow the zones).",
        types=(EC2_NODE_CLASS,),
        check=_check_one_zone,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Build the class with ec2nodeclass_spec(subnet_ids=[the "
        "network.efaPlacementGroup.zoneIndex subnet]) (components/platform/capacity/karpenter.py).",
    ),
]
