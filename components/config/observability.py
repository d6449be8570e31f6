"""Observability slice: kube-prometheus-stack and the alert thresholds."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, StringConstraints

from components import addons
from components.config.base import (
    Duration,
    Model,
    Name,
    ScrapeInterval,
)


class AlertThresholds(Model):
    """Every number the platform's alert rules compare against."""

    gpu_util_low_percent: Annotated[float, Field(gt=0, le=100)] = 40
    gpu_util_low_for: Duration = "15m"
    gpu_temperature_celsius: Annotated[float, Field(ge=60, le=110)] = 87
    #: Fraction of wall time (0-1) a GPU spent throttled for thermal or power reasons.
    throttle_fraction: Annotated[float, Field(gt=0, le=1)] = 0.1
    pod_pending_for: Duration = "10m"
    restarts_per_hour: Annotated[int, Field(ge=1, le=100)] = 3
    node_pressure_for: Duration = "5m"
    checkpoint_duration_seconds: Annotated[float, Field(gt=0)] = 600
    checkpoint_max_age_seconds: Annotated[float, Field(gt=0)] = 7200
    #: No `trainer_global_step` progress for this long while the pod runs = a stalled collective.
    training_stall_for: Duration = "15m"
    kueue_wait_seconds: Annotated[float, Field(gt=0)] = 3600
    karpenter_launch_errors_per_15m: Annotated[int, Field(ge=1)] = 3


class ObservabilityConfig(Model):
    """kube-prometheus-stack: Prometheus, Alertmanager, Grafana and the platform's rules."""

    chart_version: Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")] = "88.5.3"
    namespace: Name = addons.KUBE_PROMETHEUS_STACK.namespace
    retention: Duration = "15d"
    storage_gib: Annotated[int, Field(ge=10, le=16000)] = 200
    alertmanager_storage_gib: Annotated[int, Field(ge=1, le=100)] = 10
    grafana_storage_gib: Annotated[int, Field(ge=1, le=100)] = 10
    scrape_interval: ScrapeInterval = "30s"
    #: Each alert's `runbook_url` is this document plus the alert's anchor (docs/runbooks.md).
    runbook_base_url: Annotated[str, StringConstraints(pattern=r"^https://\S+$")] = (
        "https://github.com/gpu-platform/gpu-platform/blob/main/docs/runbooks.md"
    )
    thresholds: AlertThresholds = Field(default_factory=AlertThresholds)
