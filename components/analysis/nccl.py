"""The NCCL all-reduce test's pods, sized from the node types that can host them: which instance
type of its target source (`validation.nccl.pool`, StackConfig.nccl_pool) they really land on,
what one pod requests there, and hence the bandwidth threshold, metric label, EFA devices and
Volcano guarantee of the test. Pure: node sources in, a host out; facts.py is the caller the
validation component, the Volcano guarantee and the will-it-run verdict read.

Why: each test pod takes a whole node (every GPU, every EFA device of its type) and used to
request a fixed 16 GiB of memory, all of a g5.xlarge's or g6.xlarge's 16 GiB (EKS allocatable is
about 15 GiB): the kube-scheduler answers `Insufficient memory` on dev's `kp-a10g-od` g5.xlarge
(issue 32), Karpenter launches a g5.2xlarge instead, and the Job still named g5.xlarge - the
pool's first type - in its INSTANCE_TYPE, bandwidth threshold and metric label. Now:

- A pod asks for at most `catalog.NCCL_POD_MEMORY_GIB` (16 GiB: host memory of torchrun's agent
  and one rank per GPU on the eight-GPU p5) and never more than the type's allocatable (the
  platform's headroom model, analysis/resources.py, below EKS's real figure), nor less than
  `catalog.NCCL_POD_MIN_MEMORY_GIB`; CPU `catalog.NCCL_POD_CPU`.
- The host is the smallest type of the source whose allocatable holds such a pod (GPUs, EFA
  devices of that type, CPU, memory) - what Karpenter launches (the cheapest type that fits; a
  pool's types share GPU model and count, so the smallest is the cheapest) and, for a group the
  cluster-autoscaler resizes, the first type, the only one it simulates (NodeSource.allocatable
  holds just that one). A static group's existing nodes may be larger; the smallest type's
  threshold is then the conservative one.
- No host: the test would stay Pending until its deadline; the will-it-run verdict names
  `validation.nccl.pool`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from components import catalog
from components.analysis.nodes import Allocatable, NodeSource
from components.config import StackConfig


@dataclass(frozen=True)
class NcclHost:
    """Where the NCCL test's pods land and what each requests there."""

    #: The node source (`validation.nccl.pool`).
    source: str
    #: The instance type the pods get: threshold, EFA count, metric label and INSTANCE_TYPE.
    instance_type: str
    cpu: float
    memory_gib: int
    gpus: int
    efa_devices: int

    @property
    def requests(self) -> dict[str, float]:
        """One pod's requests, in the analysis' units (memory in GiB)."""
        out = {"cpu": self.cpu, "memory": float(self.memory_gib), catalog.GPU_RESOURCE: self.gpus}
        if self.efa_devices:
            out[catalog.EFA_RESOURCE] = self.efa_devices
        return out


def pod_memory_gib(allocatable_gib: int) -> int:
    """One test pod's memory on a node with `allocatable_gib`: the test's figure, or all the
    node offers when that is less."""
    return min(catalog.NCCL_POD_MEMORY_GIB, allocatable_gib)


def _fits(alloc: Allocatable) -> bool:
    return alloc.cpu >= catalog.NCCL_POD_CPU and alloc.memory_gib >= catalog.NCCL_POD_MIN_MEMORY_GIB


def host(source: NodeSource) -> NcclHost | None:
    """The smallest type of `source` that can hold one test pod (module docstring), or None."""
    by_size = sorted(
        source.allocatable.items(),
        key=lambda item: (catalog.instance(item[0]).vcpu, catalog.instance(item[0]).memory_gib),
    )
    for name, alloc in by_size:
        if _fits(alloc):
            return NcclHost(
                source=source.name,
                instance_type=name,
                cpu=float(catalog.NCCL_POD_CPU),
                memory_gib=pod_memory_gib(alloc.memory_gib),
                gpus=alloc.gpus,
                efa_devices=alloc.efa,
            )
    return None


def shortfall(source: NodeSource) -> str:
    """Why no type of `source` holds a test pod (for the verdict's message)."""
    return "; ".join(
        f"{name}: {alloc.cpu:g} CPU / {alloc.memory_gib} GiB allocatable"
        for name, alloc in source.allocatable.items()
    )


def nccl_host(cfg: StackConfig, sources: Sequence[NodeSource]) -> NcclHost | None:
    """The host of the stack's NCCL test: None when no test runs, its pool is not a GPU source,
    or no type of it can hold a pod (the verdict says which)."""
    validation = cfg.validation
    pool = cfg.nccl_pool() if validation.enabled and validation.nccl_test else None
    by_name: Mapping[str, NodeSource] = {s.name: s for s in sources}
    source = by_name.get(pool.name) if pool is not None else None
    return host(source) if source is not None else None
