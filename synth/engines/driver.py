"""The controllers no engine here runs, played one tick at a time (docs/real-engines.md): the
cluster-autoscaler answering ProvisioningRequests, the CSI drivers provisioning claims, Karpenter
(and the autoscaler) launching for unschedulable pods; and the few cluster queries the runs share.
Every act is recorded in the node fleet's `acts`."""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from synth.engines import nodes
from synth.engines.client import ApiError, Client

WORKLOAD_API: Final = "kueue.x-k8s.io/v1beta1"
PR_API: Final = "autoscaling.x-k8s.io/v1"


def pods_of(client: Client, namespace: str, selector: str) -> list[dict[str, Any]]:
    return client.list("v1", "Pod", namespace, labels=selector)


def unschedulable(pod: Mapping[str, Any]) -> bool:
    if (pod.get("spec") or {}).get("nodeName") or (pod.get("spec") or {}).get("schedulingGates"):
        return False
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "False":
            return bool(condition.get("reason") == "Unschedulable")
    return False


@dataclass
class Driver:
    """Plays the controllers no engine here runs, one tick at a time."""

    client: Client
    fleet: nodes.Fleet
    sources: list[nodes.Source]
    provisioned: list[str] = field(default_factory=list)

    def tick(self) -> None:
        self._provisioning_requests()
        nodes.provision_claims(
            self.client,
            [
                c
                for c in self.client.list("v1", "PersistentVolumeClaim")
                if (c.get("status") or {}).get("phase") != "Bound"
            ],
            self.fleet.acts,
        )
        for pod in self.client.list("v1", "Pod"):
            if unschedulable(pod):
                self.fleet.launch_for(pod, self.sources)

    def _provisioning_requests(self) -> None:
        try:
            requests = self.client.list(PR_API, "ProvisioningRequest")
        except ApiError:
            return
        for request in requests:
            conditions = (request.get("status") or {}).get("conditions") or []
            if any(c["type"] == "Provisioned" and c["status"] == "True" for c in conditions):
                continue
            self._provision(request)

    def _provision(self, request: Mapping[str, Any]) -> None:
        meta = request["metadata"]
        made: list[str] = []
        for pod_set in request["spec"].get("podSets") or []:
            template = self.client.get(
                "v1", "PodTemplate", pod_set["podTemplateRef"]["name"], meta["namespace"]
            )
            spec = template["template"]["spec"]
            requests = nodes.pod_requests(spec)
            group = next(
                (
                    s
                    for s in self.sources
                    if s.autoscaled
                    and nodes.tolerated(spec, s.taints)
                    and nodes.selects(
                        spec,
                        self.fleet.node_labels(s, s.instance_types[0], s.zones[0])
                        | {"kubernetes.io/hostname": "new"},
                    )
                    and nodes.fits(requests, self.fleet.shapes[s.instance_types[0]].allocatable)
                ),
                None,
            )
            if group is None:
                continue
            made += self.fleet.grow_group(
                group,
                int(pod_set["count"]),
                f"cluster-autoscaler (group {group.name}) for ProvisioningRequest "
                f"{meta['namespace']}/{meta['name']}",
            )
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        status = "True" if made else "False"
        self.client.merge_patch(
            PR_API,
            "ProvisioningRequest",
            meta["name"],
            {
                "status": {
                    "conditions": [
                        {
                            "type": "Accepted",
                            "status": "True",
                            "reason": "Accepted",
                            "message": "stand-in cluster-autoscaler",
                            "lastTransitionTime": now,
                        },
                        {
                            "type": "Provisioned",
                            "status": status,
                            "reason": "Provisioned" if made else "NoGroupFits",
                            "message": f"stand-in cluster-autoscaler: {len(made)} nodes",
                            "lastTransitionTime": now,
                        },
                    ]
                }
            },
            namespace=meta["namespace"],
            subresource="status",
        )
        self.provisioned.append(f"{meta['namespace']}/{meta['name']}")


def workload_of(client: Client, namespace: str, owner: str) -> dict[str, Any] | None:
    for workload in client.list(WORKLOAD_API, "Workload", namespace):
        if any(o.get("name") == owner for o in workload["metadata"].get("ownerReferences") or []):
            return workload
    return None


def force_delete_pods(client: Client, namespace: str, selector: str) -> None:
    # No kubelet confirms a graceful deletion: pods would stay Terminating and hold quota.
    for pod in pods_of(client, namespace, selector):
        try:
            client.request(
                "DELETE",
                client.path("v1", "Pod", pod["metadata"]["name"], namespace),
                {"gracePeriodSeconds": 0},
            )
        except ApiError as error:
            if error.status != 404:
                raise
