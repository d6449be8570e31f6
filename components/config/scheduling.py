"""Scheduling slice: Kueue, Volcano, Kubeflow Trainer and the cohort."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from components.config.base import (
    GoDuration,
    Model,
    Name,
)
from components.config.topology import TopologyConfig


class WaitForPodsReady(Model):
    """Kueue's all-or-nothing start: a workload whose pods are not all ready in time is evicted,
    releases its quota and is requeued with exponential backoff."""

    #: From admission to all pods Ready. Unset: derived - the longest provisioning path of any
    #: GPU source a team's quota reaches, plus its image pull, plus margin
    #: (components/analysis/readiness.py); a shorter value is refused.
    timeout: GoDuration | None = None
    #: A running workload that loses a pod (spot reclaim) gets this long to have it Ready again
    #: (a new node: the same path). Unset: the timeout, as Kueue defaults it; "0s" turns the
    #: check off; a shorter value is refused.
    recovery_timeout: GoDuration | None = None
    backoff_base_seconds: Annotated[int, Field(ge=1, le=3600)] = 60
    backoff_max_seconds: Annotated[int, Field(ge=60, le=86400)] = 3600
    #: Requeues before Kueue deactivates the workload; a job that never fits stops retrying.
    backoff_limit_count: Annotated[int, Field(ge=1, le=100)] = 10


class SchedulingConfig(Model):
    """Kueue (quota and admission), Volcano (the alternative gang scheduler) and Kubeflow
    Trainer v2 (TrainJob through JobSet). Chart versions match schemas/SOURCES.md."""

    kueue_chart_version: str = "0.19.2"
    volcano_chart_version: str = "1.15.1"
    trainer_chart_version: str = "2.3.0"
    #: Whether Volcano's scheduler runs its `enqueue` action: a PodGroup gets pods only once
    #: it fits its queue (no two gangs half-fill a namespace quota). With it, each team queue
    #: needs a guarantee (`teams[].volcano.guarantee: nominal`) for jobs on pools that scale
    #: from zero (docs/scheduling.md#volcano-on-capacity-that-scales-from-zero).
    volcano_enqueue: bool = True
    #: The Kueue cohort every team ClusterQueue joins: unused quota is lent within it.
    cohort: Name = "gpu-platform"
    wait_for_pods_ready: WaitForPodsReady = Field(default_factory=WaitForPodsReady)
    #: Topology-aware scheduling on EKS's network-node labels, per GPU class (docs/topology.md).
    topology: TopologyConfig = Field(default_factory=TopologyConfig)
