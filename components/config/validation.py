"""Validation slice: post-deploy GPU smoke tests and the NCCL all-reduce test."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from components import addons
from components.config.base import (
    DigestImage,
    Model,
    Name,
)
from components.config.topology import TopologyRequest


class NcclTestConfig(Model):
    """The multi-node NCCL all-reduce test."""

    #: GPU node group to run on; empty = the first on-demand GPU group.
    pool: Name | None = None
    nodes: Annotated[int, Field(ge=2, le=64)] = 2
    #: Minimum all-reduce bus bandwidth (GB/s) at `messageSizeMib`; below it, the Job fails.
    #: None = the catalog's figure for the pool's instance type (catalog.NCCL_ALLREDUCE_BUSBW,
    #: published nccl-tests results at 1 GiB); types without one must set it here.
    min_bus_bandwidth_gbps: Annotated[float, Field(gt=0)] | None = None
    message_size_mib: Annotated[int, Field(ge=1, le=8192)] = 1024
    #: The network block the test's ranks ask for (its Volcano PodGroup's `networkTopology`),
    #: on a pool whose GPU class is placed by the network-node labels. null = `preferred` (soft:
    #: the closest nodes free, never blocked); `required` at a network layer runs the test
    #: inside one block and only on a pool whose nodes exist before it (docs/topology.md).
    topology: TopologyRequest | None = None


#: How long a finished test pod keeps serving its result as Prometheus text (docs/observability.md
#: "Validation results"): several scrapes at the PodMonitor's 30 s interval.
DEFAULT_METRICS_LINGER_SECONDS = 180


class ValidationConfig(Model):
    """Post-deploy GPU smoke tests and the NCCL all-reduce test."""

    enabled: bool = False
    namespace: Name = addons.GPU_VALIDATION.namespace
    #: One CUDA + PyTorch image for both tests (nvidia-smi, torch matmul, torch.distributed).
    #: The digest was taken from public material and could not be resolved offline: confirm it
    #: with `crane digest nvcr.io/nvidia/pytorch:25.01-py3` before the first deploy.
    image: DigestImage = (
        "nvcr.io/nvidia/pytorch:25.01-py3"
        "@sha256:96990c82825613c3bdeebb66675c7c91b0123f64a5895623316dc5b824e0d7a9"
    )
    smoke_test: bool = True
    nccl_test: bool = True
    nccl: NcclTestConfig = Field(default_factory=NcclTestConfig)
    #: A test still running after this long is failed (a GPU node that never comes up).
    deadline_seconds: Annotated[int, Field(ge=300, le=86400)] = 3600
    #: Seconds a finished test pod serves its RESULT on the metrics port before it exits.
    metrics_linger_seconds: Annotated[int, Field(ge=0, le=3600)] = DEFAULT_METRICS_LINGER_SECONDS
