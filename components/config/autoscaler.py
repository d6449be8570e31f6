"""Cluster-autoscaler slice: the Kubernetes cluster-autoscaler (kubernetes/autoscaler, AWS
provider) that scales the GPU managed node groups, pinned (chart and image).

Upstream recommends the autoscaler image whose minor matches the control plane's
(kubernetes/autoscaler cluster-autoscaler/README.md, "Releases"); the chart's default image
(chart 9.59.0 ships v1.35.0) is therefore overridden with `imageTag`, checked against
`cluster.kubernetesVersion` by StackConfig. What it is configured to do and why:
docs/node-groups.md.
"""

from __future__ import annotations

from typing import Annotated, Final

from pydantic import StringConstraints

from components.config.base import Model

#: Image tag per Kubernetes minor: the newest cluster-autoscaler patch release of that minor
#: (tags `cluster-autoscaler-1.32.x` … `1.34.x` of kubernetes/autoscaler).
IMAGE_FOR_MINOR: Final = {"1.32": "v1.32.7", "1.33": "v1.33.6", "1.34": "v1.34.5"}

GoDurationMinutes = Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]*m$")]


class ClusterAutoscalerConfig(Model):
    """The cluster-autoscaler Deployment (kube-system, on the system nodes)."""

    #: Off = no managed GPU group may change size (StackConfig refuses min != max).
    enabled: bool = True
    chart_version: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")] = "9.59.0"
    #: `v1.<minor>.<patch>`; the minor must be the cluster's Kubernetes minor.
    image_tag: Annotated[str, StringConstraints(pattern=r"^v1\.\d+\.\d+$")] = "v1.33.6"
    #: `--scale-down-unneeded-time`: how long an empty GPU node stays before it is removed.
    scale_down_unneeded_time: GoDurationMinutes = "10m"
    #: `--max-node-provision-time`: after this a node that has not joined counts as a failed
    #: scale-up and the group backs off (the autoscaler's default, 15m).
    max_node_provision_time: GoDurationMinutes = "15m"
    #: Kueue's ProvisioningRequest admission check on node-group flavors (docs/node-groups.md).
    provisioning_requests: bool = True
