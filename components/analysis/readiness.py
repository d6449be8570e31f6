"""How long Kueue must give an admitted workload's pods to become Ready: the one derived figure
behind `waitForPodsReady.timeout` and `recoveryTimeout` (docs/scheduling.md#waitforpodsready).
Pure: config and node sources in, figures out; facts.py (`StackFacts.pods_ready`) is the caller
the Kueue configuration (components/platform/scheduling/scheduling.py), the config check and the
will-it-run verdicts read.

The chain from admission to Ready pods, read at the pinned versions:

- Kueue v0.19.2: "Timeout defines the time for an admitted workload to reach the PodsReady=true
  condition. When the timeout is exceeded, the workload evicted and requeued";
  `recoveryTimeout` (a running workload whose PodsReady went false, e.g. a pod lost to a spot
  reclaim that now waits for a new node) "Defaults to the value of timeout"
  (kubernetes-sigs/kueue@v0.19.2 apis/config/v1beta2/configuration_types.go WaitForPodsReady).
  The clock starts at admission.
- Node-group flavors: Kueue admits once the ProvisioningRequest is Provisioned, and a
  best-effort-atomic request on AWS is Provisioned when the Auto Scaling group's desired size was
  raised, not when nodes are Ready (components/platform/scheduling/scheduling.py
  PROVISIONING_CLASS): every node still has to boot after admission. The cluster-autoscaler counts a
  node that has not registered within `--max-node-provision-time`
  (`clusterAutoscaler.maxNodeProvisionTime`, 15m) as a failed scale-up; until then it is a node on
  its way. Its scan adds up to 10 s.
- Karpenter flavors: no admission check, so Kueue admits on quota alone and creates the pods;
  Karpenter batches them (up to 10 s) and launches. A NodeClaim whose node has not registered
  15 min after its Registered condition was set is deleted and launched again
  (kubernetes-sigs/karpenter@v1.14.1 pkg/controllers/nodeclaim/lifecycle/liveness.go
  `registrationTimeout = time.Minute * 15`; the launch itself must succeed within
  `LaunchTimeout`, 5 min, inside that window).
- Then the image pull on that node (the start-up estimate's figures, below) and the container
  start (`READY_MARGIN_S`). Training pods have no readiness probe: Ready = containers running;
  the rendezvous comes after.

A timeout below "provisioner's bound + pull + margin" for any source a queued job can land on
evicts workloads whose nodes the provisioner still counts as coming - requeued with backoff and
evicted again for every slow start (p5 + EFA + a large image). The platform's own figure
(`required`) covers every GPU source a team's quota reaches with the stack's default image
size (`training.imageSizeGib`); a job with a larger image is checked on its own sources.

Image pull (PLANNING figures, UNVERIFIED; components/analysis/startup.py uses the same): the
lower of the registry pull - containerd's default 3 concurrent layer downloads and a serial
unpack, or SOCI parallel pull (nodeadm `FastImagePull`, set by Karpenter's GPU node class only:
components/platform/capacity/karpenter_builders.py) - and what the image store absorbs: the NVMe
RAID0
array on Karpenter nodes whose type has instance store (`instanceStorePolicy: RAID0`), else the
gp3 root volume's throughput (the node class's, or the managed group's `diskThroughputMibps`;
managed groups' launch templates set neither SOCI nor RAID0).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from components import catalog
from components.analysis.nodes import AUTOSCALER_SCAN_SECONDS, KARPENTER_BATCH_SECONDS, NodeSource
from components.config import Problem, StackConfig

#: PLANNING, UNVERIFIED: registry pull throughput (MiB/s) without / with SOCI parallel pull.
PULL_MIBPS: Final = 150
PARALLEL_PULL_MIBPS: Final = 400
#: PLANNING: sustained write throughput of an NVMe instance-store RAID0 array (MiB/s); far above
#: any registry pull, so it never bounds it (startup.py has the reasoning).
NVME_MIBPS: Final = 2000
#: Karpenter deletes a NodeClaim whose node did not register within this (module docstring).
KARPENTER_REGISTRATION_TIMEOUT_S: Final = 15 * 60
#: PLANNING: from a pulled image to a Ready pod - binding, CSI volume mounts (EFS/FSx), container
#: start - plus slack for a registry that is slower than planned.
READY_MARGIN_S: Final = 120
_DURATION_PART: Final = re.compile(r"([0-9]+)(h|m|s)")
_UNIT_S: Final = {"h": 3600, "m": 60, "s": 1}


def duration_s(value: str) -> int:
    """Seconds of a Go duration made of h/m/s parts (`15m`, `1h30m`, `0s`)."""
    return sum(int(n) * _UNIT_S[unit] for n, unit in _DURATION_PART.findall(value))


def minutes(seconds: int) -> str:
    """`seconds` rounded up to whole minutes, as a Go duration."""
    return f"{max(1, math.ceil(seconds / 60))}m"


@dataclass(frozen=True)
class PullRate:
    """How fast an image lands on one node type of one source."""

    mibps: int
    image_store: str
    parallel_pull: bool


def pull_rate(cfg: StackConfig, source_kind: str, source_name: str, instance_type: str) -> PullRate:
    """The image pull throughput on a node of `instance_type` from a Karpenter pool
    (`source_kind` "karpenter": the GPU node class's SOCI and NVMe settings) or a managed group
    (containerd's default pull onto the group's gp3 root)."""
    row = catalog.instance(instance_type)
    if source_kind != "karpenter":
        group = next((g for g in cfg.node_groups.gpu if g.name == source_name), None)
        disk = group.disk_throughput_mibps if group is not None else PULL_MIBPS
        return PullRate(min(PULL_MIBPS, disk), f"gp3 {disk} MiB/s", False)
    node_class = cfg.karpenter.gpu_node_class
    parallel = node_class.fast_image_pull and row.vcpu >= 4 and row.memory_gib >= 7
    registry = PARALLEL_PULL_MIBPS if parallel else PULL_MIBPS
    if node_class.instance_store_raid0 and row.nvme_instance_store:
        store = f"NVMe RAID0 over {row.nvme_disks} disk(s), {row.nvme_gb} GB"
        return PullRate(min(registry, NVME_MIBPS), store, parallel)
    disk = node_class.disk_throughput_mibps
    return PullRate(min(registry, disk), f"gp3 {disk} MiB/s", parallel)


def system_pull_rate() -> PullRate:
    """The image pull throughput on a system node: containerd's default pull onto the system
    group's gp3 root (no SOCI, no NVMe: its launch template sets neither)."""
    disk = catalog.SYSTEM_DISK_THROUGHPUT_MIBPS
    return PullRate(min(PULL_MIBPS, disk), f"gp3 {disk} MiB/s", False)


@dataclass(frozen=True)
class ReadyPath:
    """One node source's longest path from admission to Ready pods."""

    source: str
    #: How long its provisioner waits for a node before it gives up or retries (module
    #: docstring), never below the planning launch time; 0 for a fixed group (nodes exist).
    provision_s: int
    provisioner: str
    #: The slowest image pull over the source's types, and the type it is on.
    pull_s: int
    instance_type: str
    image_gib: float

    @property
    def total_s(self) -> int:
        return self.provision_s + self.pull_s + READY_MARGIN_S

    def text(self) -> str:
        return (
            f"`{self.source}`: {self.provisioner} {self.provision_s} s + image pull "
            f"{self.pull_s} s ({self.image_gib:g} GiB on {self.instance_type}) + "
            f"{READY_MARGIN_S} s margin = {self.total_s} s"
        )


def provision_bound_s(cfg: StackConfig, source: NodeSource) -> tuple[int, str]:
    """How long the source's provisioner keeps waiting for a node, and what that is."""
    if source.scaler == "autoscaler":
        bound = AUTOSCALER_SCAN_SECONDS + duration_s(cfg.cluster_autoscaler.max_node_provision_time)
        what = "cluster-autoscaler scan + maxNodeProvisionTime"
    elif source.scaler == "karpenter":
        bound = KARPENTER_BATCH_SECONDS + KARPENTER_REGISTRATION_TIMEOUT_S
        what = "Karpenter batch + registration timeout"
    else:
        return 0, "fixed group (nodes exist)"
    return max(bound, source.scale_up_seconds), what


def ready_path(cfg: StackConfig, source: NodeSource, image_gib: float) -> ReadyPath:
    """The source's path from admission to Ready pods for an image of `image_gib`."""
    provision, what = provision_bound_s(cfg, source)
    pulls = {
        name: round(image_gib * 1024 / pull_rate(cfg, source.kind, source.name, name).mibps)
        for name in source.allocatable
    }
    slowest = max(pulls, key=lambda name: pulls[name])
    return ReadyPath(source.name, provision, what, pulls[slowest], slowest, image_gib)


@dataclass(frozen=True)
class PodsReady:
    """Kueue's waitForPodsReady timeouts and the figure they are derived from."""

    #: The longest path of any GPU source a team's quota reaches, with the default image.
    required_s: int
    longest: ReadyPath | None
    #: What the Kueue Configuration gets: the configured values, else the derived minimum
    #: (recoveryTimeout: else the timeout, as Kueue itself defaults it).
    timeout: str
    recovery_timeout: str

    @property
    def timeout_s(self) -> int:
        return duration_s(self.timeout)


def queued_sources(cfg: StackConfig, sources: Sequence[NodeSource]) -> list[NodeSource]:
    """The sources a team's ClusterQueue can place pods on (its quota's flavors)."""
    offered = {(q.gpu_class, q.capacity_type) for team in cfg.teams for q in team.quota}
    return [s for s in sources if (s.gpu_class, s.capacity_type) in offered]


def pods_ready(cfg: StackConfig, sources: Sequence[NodeSource]) -> PodsReady:
    """The stack's waitForPodsReady figures (module docstring)."""
    paths = [ready_path(cfg, s, cfg.training.image_size_gib) for s in queued_sources(cfg, sources)]
    longest = max(paths, key=lambda p: p.total_s, default=None)
    required = longest.total_s if longest is not None else READY_MARGIN_S
    ready = cfg.scheduling.wait_for_pods_ready
    timeout = ready.timeout or minutes(required)
    return PodsReady(required, longest, timeout, ready.recovery_timeout or timeout)


def check_pods_ready(cfg: StackConfig, sources: Sequence[NodeSource]) -> list[Problem]:
    """Configured timeouts shorter than the derived minimum, and an autoscaler that gives up on
    a node before the planning launch time of its group's type."""
    figures = pods_ready(cfg, sources)
    ready = cfg.scheduling.wait_for_pods_ready
    why = (
        f"at least {minutes(figures.required_s)} (unset derives it): the longest path from "
        f"admission to Ready pods is {figures.longest.text() if figures.longest else 'none'}; "
        "a shorter timeout evicts and requeues workloads whose nodes are still coming"
    )
    problems: list[Problem] = [
        Problem(f"scheduling.waitForPodsReady.{key}", value, why)
        for key, value in (("timeout", ready.timeout), ("recoveryTimeout", ready.recovery_timeout))
        if value is not None and value != "0s" and duration_s(value) < figures.required_s
    ]
    give_up = cfg.cluster_autoscaler.max_node_provision_time
    autoscaled = [s for s in sources if s.scaler == "autoscaler"]
    slowest = max(autoscaled, key=lambda s: s.scale_up_seconds, default=None)
    launch = slowest.scale_up_seconds - AUTOSCALER_SCAN_SECONDS if slowest else 0
    if slowest is not None and duration_s(give_up) < launch:
        problems.append(
            Problem(
                "clusterAutoscaler.maxNodeProvisionTime",
                give_up,
                f"at least {minutes(launch)}: a {slowest.instance_types[0]} node of "
                f"{slowest.name} takes about {launch} s to become Ready (planning figure, "
                "catalog.NODE_LAUNCH_SECONDS), and the autoscaler would count it failed",
            )
        )
    return problems
