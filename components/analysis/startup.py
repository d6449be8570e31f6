"""Time from "job admitted" to "first step", estimated per training job from the config: node
launch + image pull + rendezvous. Rendered in report.md's "Will it run" section.

Every figure here is a planning figure, not a measurement: they make the cost of each term and
of each fast-start lever (SOCI parallel pull, NVMe image cache) visible before a deploy; replace
them with what `kubectl get events` / Karpenter's `karpenter_nodeclaims_*` timings show on the
real cluster.

- Node launch (EC2 start, AL2023 boot, nodeadm, GPU driver + device plugins until the node is
  Ready with GPUs allocatable): PLANNING figures per family, UNVERIFIED (no published figure
  found offline); p-family nodes are slower (large instances, 8 GPUs, EFA, NVMe RAID build).
- Image pull: unpacked image size / effective throughput, the lower of what the registry pull
  delivers and what the image store can absorb (analysis/readiness.py pull_rate, which Kueue's
  waitForPodsReady is sized with too). Registry pull: containerd's default is 3 concurrent
  layer downloads and a serial unpack; SOCI parallel pull mode (nodeadm `FastImagePull`, on
  Karpenter's GPU node class only: components/platform/capacity/karpenter_builders.py) fetches
  chunks of a layer concurrently and unpacks in parallel — PLANNING figures 150 vs 400 MiB/s,
  UNVERIFIED. Image store: the NVMe RAID0 array where a Karpenter node's type has instance store
  (`instanceStorePolicy: RAID0`, containerd on NVMe), else the gp3 root volume's provisioned
  throughput (`karpenter.gpuNodeClass.diskThroughputMibps`, or a managed group's
  `diskThroughputMibps`).
- Rendezvous: torchrun c10d rendezvous + NCCL communicator init, PLANNING 30 s + 2 s per node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from components import catalog
from components.analysis.nodes import NodeSource
from components.analysis.readiness import pull_rate
from components.config import StackConfig, TrainingJobConfig

#: The pull figures (PULL_MIBPS, PARALLEL_PULL_MIBPS, NVME_MIBPS) live with the readiness model,
#: which sizes Kueue's waitForPodsReady from the same pull (analysis/readiness.py pull_rate).
#: NVMe does not change the figure of a stack whose gp3 root is provisioned above the registry
#: pull (prod: 1000 MiB/s gp3 > 400 MiB/s pull): the pull, not the disk, bounds it, and no
#: published per-disk unpack figure was found offline to model containerd's CPU-bound
#: decompression separately. Where the disk matters: a root volume at gp3's 125 MiB/s baseline.
RENDEZVOUS_BASE_SECONDS: Final = 30
RENDEZVOUS_PER_NODE_SECONDS: Final = 2


@dataclass(frozen=True)
class StartupEstimate:
    """Seconds from admission to the first training step, term by term."""

    instance_type: str
    node_launch_s: int
    image_gib: float
    pull_mibps: int
    image_store: str
    parallel_pull: bool
    rendezvous_s: int

    @property
    def image_pull_s(self) -> int:
        return round(self.image_gib * 1024 / self.pull_mibps)

    @property
    def total_s(self) -> int:
        return self.node_launch_s + self.image_pull_s + self.rendezvous_s

    def line(self) -> str:
        """The report's one-line breakdown."""
        pull = "SOCI parallel pull" if self.parallel_pull else "containerd default pull"
        return (
            f"time to first step ≈ {self.total_s} s = node launch {self.node_launch_s} s "
            f"({self.instance_type}) + image pull {self.image_pull_s} s ({self.image_gib:g} GiB "
            f"at {self.pull_mibps} MiB/s: {pull}, image store {self.image_store}) + rendezvous "
            f"{self.rendezvous_s} s (planning figures: components/analysis/startup.py)"
        )


def estimate(
    cfg: StackConfig, job: TrainingJobConfig, instance_type: str, fitting: Sequence[NodeSource]
) -> StartupEstimate:
    """The estimate for `job` on `instance_type`, the type its pods land on, pulled the way
    that type's source pulls (a Karpenter pool's node class or a managed group's launch
    template); `fitting`: the node sources that hold one of its pods (fit.fit_sources).
    Computed once per job by facts.job_facts (`JobFacts.startup`), which the report reads."""
    # The source of the job's first capacity type (the flavor Kueue tries first).
    order = {capacity: rank for rank, capacity in enumerate(job.capacity_types)}
    sources = sorted(
        (s for s in fitting if instance_type in s.allocatable),
        key=lambda s: order.get(s.capacity_type, len(order)),
    )
    source = sources[0] if sources else None
    rate = pull_rate(
        cfg, source.kind if source else "karpenter", source.name if source else "", instance_type
    )
    return StartupEstimate(
        instance_type=instance_type,
        node_launch_s=catalog.node_launch_seconds(instance_type),
        image_gib=job.image_size_gib or cfg.training.image_size_gib,
        pull_mibps=rate.mibps,
        image_store=rate.image_store,
        parallel_pull=rate.parallel_pull,
        rendezvous_s=RENDEZVOUS_BASE_SECONDS + RENDEZVOUS_PER_NODE_SECONDS * job.nodes,
    )
