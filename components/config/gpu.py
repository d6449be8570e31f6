"""GPU slice: NVIDIA GPU Operator operands, MIG and time-slicing."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, StringConstraints

from components import addons
from components.config.base import (
    Model,
    Name,
    ScrapeInterval,
)


class TimeSlicingConfig(Model):
    """GPU time-slicing (oversubscription) for pools that never run training."""

    #: Each physical GPU is advertised this many times on a time-sliced pool.
    replicas: Annotated[int, Field(ge=2, le=16)] = 4
    #: GPU node groups (names from `nodeGroups.gpu`) to time-slice; training pools are refused.
    pools: list[Name] = []


class GpuOperatorConfig(Model):
    """NVIDIA GPU Operator: which operands run, MIG, time-slicing, DCGM scraping."""

    chart_version: Annotated[str, StringConstraints(pattern=r"^v\d+\.\d+\.\d+$")] = "v26.7.0"
    namespace: Name = addons.GPU_OPERATOR.namespace
    #: The EKS AL2023 NVIDIA AMI ships the driver and the container toolkit; turn these on
    #: only for custom AMIs without them.
    driver_enabled: bool = False
    toolkit_enabled: bool = False
    mig_strategy: Literal["none", "single", "mixed"] = "none"
    time_slicing: TimeSlicingConfig = Field(default_factory=TimeSlicingConfig)
    dcgm_scrape_interval: ScrapeInterval = "15s"
