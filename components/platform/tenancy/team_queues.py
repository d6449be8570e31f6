"""A team's Kueue ClusterQueue spec (pure data): nominal quota per flavor in the cluster's
flavor order, borrowing and lending, preemption, and the ProvisioningRequest admission check on
the flavors of autoscaled node groups. components/platform/tenancy/teams.py creates the object."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from components import catalog
from components.config import FlavorQuota, TeamConfig
from components.platform.scheduling.scheduling import PROVISIONING_CHECK, Flavor

#: Resources every team ClusterQueue covers, in the order each flavor must list them.
COVERED_RESOURCES: Final = catalog.KUEUE_COVERED_RESOURCES


#: The Kubernetes resource and unit of each quantity of a quota entry (FlavorQuota.quantities).
RESOURCE_NAMES: Final[dict[str, tuple[str, str]]] = {
    "cpu": ("cpu", ""),
    "memory": ("memory", "Gi"),
    "gpus": (catalog.GPU_RESOURCE, ""),
}


def flavor_resources(entry: FlavorQuota) -> list[dict[str, Any]]:
    """The entry's resources in a ClusterQueue flavor: nominal quota, borrowing and lending
    limits, as the config model derives them (FlavorQuota.quantities)."""
    rows: list[dict[str, Any]] = []
    for quantity in entry.quantities():
        resource, unit = RESOURCE_NAMES[quantity.name]
        row: dict[str, Any] = {"name": resource, "nominalQuota": f"{quantity.nominal}{unit}"}
        if quantity.borrowing is not None:
            row["borrowingLimit"] = f"{quantity.borrowing}{unit}"
        if quantity.lending is not None:
            row["lendingLimit"] = f"{quantity.lending}{unit}"
        rows.append(row)
    return rows


def ordered_quota(team: TeamConfig, flavors: Sequence[Flavor]) -> list[FlavorQuota]:
    """The team's quota entries in the cluster's flavor order: reserved, spot, on-demand."""
    rank = {flavor.name: index for index, flavor in enumerate(flavors)}
    return sorted(team.quota, key=lambda entry: rank[entry.flavor])


def cluster_queue_spec(team: TeamConfig, flavors: Sequence[Flavor], cohort: str) -> dict[str, Any]:
    """The team's ClusterQueue: nominal quota per flavor, borrowing/lending in the cohort,
    preemption by priority inside the queue and reclaim of lent quota from the cohort."""
    return {
        "cohortName": cohort,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": resource_groups(ordered_quota(team, flavors)),
        **queue_policies(),
        **_admission_checks(team, flavors),
    }


def resource_groups(entries: Sequence[FlavorQuota]) -> list[dict[str, Any]]:
    """One resource group: the covered resources, then each quota entry's flavor in order."""
    return [
        {
            "coveredResources": list(COVERED_RESOURCES),
            "flavors": [
                {"name": entry.flavor, "resources": flavor_resources(entry)} for entry in entries
            ],
        }
    ]


def queue_policies() -> dict[str, Any]:
    """Preemption by priority inside the queue, reclaim of lent quota from the cohort, and the
    next flavor (spot, then on-demand) tried before borrowing or preempting: every team queue's,
    a fleet manager's too (components/platform/fleet/manager.py)."""
    return {
        "preemption": {
            "withinClusterQueue": "LowerPriority",
            "reclaimWithinCohort": "Any",
            "borrowWithinCohort": {"policy": "Never"},
        },
        "flavorFungibility": {"whenCanBorrow": "TryNextFlavor", "whenCanPreempt": "TryNextFlavor"},
    }


def _admission_checks(team: TeamConfig, flavors: Sequence[Flavor]) -> dict[str, Any]:
    """Workloads admitted on an autoscaled node-group flavor wait for the ProvisioningRequest
    check (the autoscaler has raised the groups); Karpenter flavors need none."""
    used = {entry.flavor for entry in team.quota}
    checked = [f.name for f in flavors if f.provisioning_check and f.name in used]
    if not checked:
        return {}
    return {
        "admissionChecksStrategy": {
            "admissionChecks": [{"name": PROVISIONING_CHECK, "onFlavors": checked}]
        }
    }
