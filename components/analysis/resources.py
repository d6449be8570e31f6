"""Per-pod resources of a training job: CPU, memory, /dev/shm and EFA devices, derived from the
smallest instance type its pools can launch (every pod must fit on it) minus node headroom."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from components import catalog
from components.analysis.capacity import job_instance_types, smallest_instance_type
from components.config import StackConfig, TrainingJobConfig, gpu_class_instance_types

#: Memory held back per node for kubelet, eviction threshold and daemons (GPU operator, CNI,
#: CSI, exporters): 10 % plus 2 GiB; CPU: 4 % plus one core.
MEMORY_HEADROOM_FRACTION: Final = 0.10
MEMORY_HEADROOM_GIB: Final = 2
CPU_HEADROOM_FRACTION: Final = 0.04
CPU_HEADROOM_CORES: Final = 1


@dataclass(frozen=True)
class JobResources:
    """Per-pod resources, derived from the instance type unless the job overrides them."""

    instance_type: str
    cpu: float
    memory_gib: int
    shm_gib: int
    efa_devices: int


def default_cpu(vcpu: int) -> float:
    return float(max(1, math.floor(vcpu * (1 - CPU_HEADROOM_FRACTION)) - CPU_HEADROOM_CORES))


def default_memory_gib(memory_gib: int) -> int:
    return max(1, math.floor(memory_gib * (1 - MEMORY_HEADROOM_FRACTION)) - MEMORY_HEADROOM_GIB)


def job_resources(cfg: StackConfig, job: TrainingJobConfig) -> JobResources:
    """CPU, memory, /dev/shm and EFA devices of one pod of `job`, computed on the spot (for
    tests and one-off checks; the program reads `JobFacts.resources`, built once by facts.build)."""
    return resources_on(job, job_instance_types(cfg, job))


def resources_on(job: TrainingJobConfig, instance_types: Sequence[str]) -> JobResources:
    """One pod of `job` sized to fit every type its pools launch (`instance_types`; with none,
    the types of its GPU class): Kueue may admit the gang onto any of its flavors and a managed
    group launches any of its types, so each default is the least the types offer — CPU and
    memory of the smallest type, and the fewest EFA devices among them (p5e.48xlarge and
    p5en.48xlarge tie on vCPU and memory but have 32 and 16 EFA interfaces; a pod asking for 32
    never binds on a p5en node)."""
    types = instance_types or gpu_class_instance_types(job.gpu_class)
    if not types:
        return JobResources("", job.cpu or 1.0, job.memory_gib or 1, job.shm_gib or 1, 0)
    name = smallest_instance_type(types)
    rows = [catalog.instance(t) for t in types]
    memory = job.memory_gib or default_memory_gib(min(r.memory_gib for r in rows))
    # /dev/shm is charged to the pod's memory: a quarter of it (NCCL and data loaders).
    shm = job.shm_gib or max(1, min(64, memory // 4))
    efa = min(r.efa_devices for r in rows)
    return JobResources(
        instance_type=name,
        cpu=job.cpu or default_cpu(min(r.vcpu for r in rows)),
        memory_gib=memory,
        shm_gib=shm,
        efa_devices=(job.efa_devices or efa) if efa_on(job, efa) else 0,
    )


def efa_on(job: TrainingJobConfig, type_efa_devices: int) -> bool:
    """Whether the job's pods request EFA devices: `efa` when set; else an explicit
    `efaDevices`, or a multi-node job on a type with EFA (the default)."""
    if job.efa is not None:
        return job.efa
    return job.efa_devices is not None or (type_efa_devices > 0 and job.nodes > 1)


def pod_requests(job: TrainingJobConfig, resources: JobResources) -> dict[str, float]:
    """Per-pod requests the job's manifests carry (manifests.container_resources)."""
    gpus = job.node_gpus
    out = {"cpu": resources.cpu, "memory": float(resources.memory_gib), catalog.GPU_RESOURCE: gpus}
    if resources.efa_devices:
        out[catalog.EFA_RESOURCE] = resources.efa_devices
    return out
