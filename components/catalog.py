"""Cross-cutting facts with exactly one home.

GPU taint and label keys, the instance-type table (GPUs, EFA devices, vCPU, memory, prices)
and pinned versions live here and nowhere else, so managed node groups, Karpenter NodePools,
Kueue ResourceFlavors, tolerations and training jobs can never disagree.

Why this module is long: it is that one home, read by every layer and by the policy pack (which
imports nothing else of the program): the instance table and the upstream names and field sets
(Kueue, Trainer, MultiKueue) each need their citation beside them, and splitting them by topic
would give a reader two places to look for one fact.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

# --- Scheduling vocabulary ---------------------------------------------------------------------

#: Domain of the labels this platform owns. Karpenter reserves `karpenter.sh`/`kubernetes.io`
#: domains for its own labels, so ours live under a domain of their own.
LABEL_DOMAIN: Final = "gpu-platform.io"
LABEL_GPU_VENDOR: Final = f"{LABEL_DOMAIN}/gpu-vendor"
LABEL_GPU_MODEL: Final = f"{LABEL_DOMAIN}/gpu-model"
LABEL_GPU_CLASS: Final = f"{LABEL_DOMAIN}/gpu-class"
LABEL_CAPACITY_TYPE: Final = f"{LABEL_DOMAIN}/capacity-type"
LABEL_WORKLOAD_TYPE: Final = f"{LABEL_DOMAIN}/workload-type"
LABEL_NODE_POOL: Final = f"{LABEL_DOMAIN}/node-pool"
#: What brings a node up: `node-group` (an EKS managed node group, resized by the
#: cluster-autoscaler) or `karpenter` (a Karpenter NodePool). Every node source sets it and every
#: Kueue ResourceFlavor selects on it, so a pending pod is answered by one provisioner only: a pod
#: both could serve gets a node from each (docs/node-groups.md#one-provisioner-per-pod).
LABEL_PROVISIONER: Final = f"{LABEL_DOMAIN}/provisioner"
Provisioner = Literal["node-group", "karpenter"]
#: The cluster-autoscaler AWS provider's GPU label: a node that carries it but has not yet
#: advertised `nvidia.com/gpu` counts as a GPU node still starting, so the autoscaler does not
#: scale up a second time while the device plugin starts (kubernetes/autoscaler@
#: cluster-autoscaler-1.33.6 cloudprovider/aws/README.md "Special note on GPU instances";
#: aws_cloud_provider.go#L38 `GPULabel = "k8s.amazonaws.com/accelerator"`).
CA_GPU_LABEL: Final = "k8s.amazonaws.com/accelerator"

#: The taint every GPU node carries: only pods that tolerate it (GPU workloads and the GPU
#: operator's daemons) may land on expensive capacity.
GPU_TAINT_KEY: Final = "nvidia.com/gpu"
GPU_TAINT_VALUE: Final = "true"
GPU_TAINT_EFFECT: Final = "NoSchedule"
GPU_RESOURCE: Final = "nvidia.com/gpu"
#: The taint of spot managed-group nodes: only pods that accept interruption land there.
SPOT_TAINT_KEY: Final = f"{LABEL_DOMAIN}/spot"

#: `reserved`: an EC2 On-Demand Capacity Reservation or a Capacity Block, launched by Karpenter
#: as its own capacity type (aws/karpenter-provider-aws@v1.14.1:
#: website/content/en/docs/tasks/odcrs.md#L38-46: "Karpenter doesn't model ODCRs as standard
#: on-demand capacity, and instead uses a dedicated capacity type: `reserved`").
CapacityType = Literal["on-demand", "spot", "reserved"]
WorkloadType = Literal["system", "training", "general"]

#: The order Kueue tries flavors in and Karpenter weights pools by: capacity already paid for
#: (reservations) first, then spot, then on-demand list price.
CAPACITY_ORDER: Final[dict[CapacityType, int]] = {"reserved": 0, "spot": 1, "on-demand": 2}

#: EKS managed node groups spell capacity types differently from Karpenter and Kubernetes labels.
#: A group's `reserved` capacity is a Capacity Block (`CAPACITY_BLOCK`, awsdocs
#: amazon-eks-user-guide nodes/capacity-blocks-mng.adoc).
EKS_CAPACITY_TYPE: Final[dict[CapacityType, str]] = {
    "on-demand": "ON_DEMAND",
    "spot": "SPOT",
    "reserved": "CAPACITY_BLOCK",
}
#: The resource a pulumi-eks ManagedNodeGroup registers for the EKS node group (its child).
EKS_NODE_GROUP_TYPE: Final = "aws:eks/nodeGroup:NodeGroup"


def gpu_node_labels(
    *,
    gpu_class: str,
    gpu_model: str,
    capacity_type: CapacityType,
    workload_type: WorkloadType,
    provisioner: Provisioner,
) -> dict[str, str]:
    """Labels of a GPU node: the same keys for managed node groups and Karpenter NodePools, the
    provisioner label telling them apart."""
    return {
        LABEL_GPU_VENDOR: "nvidia",
        LABEL_GPU_MODEL: gpu_model,
        LABEL_GPU_CLASS: gpu_class,
        LABEL_CAPACITY_TYPE: capacity_type,
        LABEL_WORKLOAD_TYPE: workload_type,
        LABEL_PROVISIONER: provisioner,
    }


def system_node_labels() -> dict[str, str]:
    """Labels of the on-demand CPU nodes that run the platform's controllers."""
    return {LABEL_CAPACITY_TYPE: "on-demand", LABEL_WORKLOAD_TYPE: "system"}


def gpu_taint() -> dict[str, str]:
    """The GPU taint in Kubernetes form (key, value, effect)."""
    return {"key": GPU_TAINT_KEY, "value": GPU_TAINT_VALUE, "effect": GPU_TAINT_EFFECT}


def gpu_toleration() -> dict[str, str]:
    """The toleration matching `gpu_taint()`; every GPU workload and GPU daemon carries it."""
    return toleration_of(gpu_taint())


def gpu_daemon_tolerations() -> list[dict[str, str]]:
    """What every DaemonSet that must run on every GPU node tolerates (device plugins, GPU
    Operator operands, NFD worker, node-exporter): every taint, like the EKS add-ons' node
    agents. A GPU node carries the GPU taint, a spot group's also the spot taint, and a group
    may add its own (`nodeGroups.gpu[].taints`): a device plugin that did not tolerate one of
    them would leave the node without `nvidia.com/gpu`, so no GPU pod could ever run there.
    Where they run is decided by their node selectors and affinities, not by taints."""
    return [{"operator": "Exists"}]


def toleration_of(taint: dict[str, str]) -> dict[str, str]:
    """The toleration of one taint, whatever its value (`operator: Exists` on its key and
    effect): `gpu_toleration` and `spot_toleration` are this for the GPU and spot taints."""
    return {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]}


def spot_taint() -> dict[str, str]:
    """The taint of spot managed-group nodes (Kubernetes spelling)."""
    return {"key": SPOT_TAINT_KEY, "value": "true", "effect": "NoSchedule"}


def spot_toleration() -> dict[str, str]:
    """The toleration of `spot_taint()`: pods that may run on spot (spot-safe training jobs,
    the node-group spot flavors' admitted pods, GPU daemons)."""
    return toleration_of(spot_taint())


# --- Instance types -----------------------------------------------------------------------------


@dataclass(frozen=True)
class InstanceType:
    """What the platform needs to know about an EC2 instance type."""

    name: str
    vcpu: int
    memory_gib: int
    gpus: int
    gpu_model: str | None
    #: Memory of ONE GPU in MiB as EC2 DescribeInstanceTypes reports it (GpuInfo.Gpus[].
    #: MemoryInfo.SizeInMiB): 22888 MiB for a "24 GB" A10G/L4, i.e. 24e9 bytes, not 24 GiB.
    gpu_memory_mib: int
    efa_devices: int
    #: NVMe instance-store disks and their total size (GB): what `instanceStorePolicy: RAID0`
    #: stripes into one array for containerd, kubelet and pod logs (components/config/karpenter.py
    #: `instanceStoreRaid0`).
    nvme_disks: int
    nvme_gb: int
    on_demand_usd_per_hour: float
    spot_usd_per_hour: float

    @property
    def nvme_instance_store(self) -> bool:
        return self.nvme_disks > 0

    @property
    def family(self) -> str:
        return self.name.split(".", 1)[0]

    @property
    def gpu_memory_gib(self) -> float:
        """GPU memory of the whole instance in GiB (every GPU together)."""
        return self.gpus * self.gpu_memory_mib / 1024


#: Prices: Linux on-demand list prices for us-east-1 from aws.amazon.com/ec2/pricing/on-demand
#: (P4d/P5 after the June 2025 price reduction), spot "typical" = the median of the us-east-1
#: spot price history over the 30 days before 2026-10-31 rounded to cents. Recorded on
#: 2026-10-31; they are planning figures for reports, not billing data — re-check before
#: committing a budget.
#: vCPU, memory, GPU count/model/memory, EFA devices and local NVMe: every row equals Karpenter's
#: generated instance-type reference, aws/karpenter-provider-aws@v1.14.1:website/content/en/docs/
#: reference/instance-types.md (DescribeInstanceTypes data; labels karpenter.k8s.aws/instance-cpu,
#: -memory, -gpu-count, -gpu-name, -gpu-memory, -local-nvme and the resource
#: vpc.amazonaws.com/efa = NetworkInfo.EfaInfo.MaximumEfaInterfaces). The rows the catalog needs
#: are extracted in schemas/karpenter-instance-types.yaml and tests/test_catalog.py keeps the two
#: equal. EFA counts there: p4d/p4de 4, p5 32, p5e 32, p5en 16, p6-b200 8, g6e.24xlarge 2,
#: g6e.48xlarge 4, g5/g6 8xlarge and larger and g6e.12xlarge 1, the smaller g sizes none. They
#: choose where the EFA device plugin runs and how many interfaces a static managed group's
#: launch template gets; Karpenter reads the same count from DescribeInstanceTypes. NVMe totals
#: (GB) come from the same reference; the NVMe DISK COUNTS (8 x 3800 GB on p5/p5e/p5en/p6,
#: 8 x 1000 on p4d/p4de, 1-8 on g5/g6/g6e) are UNVERIFIED transcriptions of the EC2
#: instance-store table (docs.aws.amazon.com/ec2/latest/instancetypes/ac.html#ac_instance-store,
#: not reachable offline); only the report's text uses them. Every EFA
#: type here is in the EFA device plugin chart's supported list (tests/platform/test_gpu.py).
_INSTANCE_ROWS: Final[tuple[InstanceType, ...]] = (
    # name, vcpu, mem GiB, gpus, model, MiB per GPU, efa, nvme disks, nvme GB, on-demand $/h,
    # spot $/h
    InstanceType("m6i.large", 2, 8, 0, None, 0, 0, 0, 0, 0.096, 0.04),
    InstanceType("m6i.xlarge", 4, 16, 0, None, 0, 0, 0, 0, 0.192, 0.08),
    InstanceType("m6i.2xlarge", 8, 32, 0, None, 0, 0, 0, 0, 0.384, 0.16),
    InstanceType("m7i.xlarge", 4, 16, 0, None, 0, 0, 0, 0, 0.2016, 0.09),
    InstanceType("m7i.2xlarge", 8, 32, 0, None, 0, 0, 0, 0, 0.4032, 0.17),
    InstanceType("c6i.2xlarge", 8, 16, 0, None, 0, 0, 0, 0, 0.34, 0.14),
    InstanceType("g5.xlarge", 4, 16, 1, "a10g", 22888, 0, 1, 250, 1.006, 0.42),
    InstanceType("g5.2xlarge", 8, 32, 1, "a10g", 22888, 0, 1, 450, 1.212, 0.49),
    InstanceType("g5.4xlarge", 16, 64, 1, "a10g", 22888, 0, 1, 600, 1.624, 0.63),
    InstanceType("g5.8xlarge", 32, 128, 1, "a10g", 22888, 1, 1, 900, 2.448, 0.95),
    InstanceType("g5.16xlarge", 64, 256, 1, "a10g", 22888, 1, 1, 1900, 4.096, 1.49),
    InstanceType("g5.12xlarge", 48, 192, 4, "a10g", 22888, 1, 1, 3800, 5.672, 2.27),
    InstanceType("g5.24xlarge", 96, 384, 4, "a10g", 22888, 1, 1, 3800, 8.144, 3.11),
    InstanceType("g5.48xlarge", 192, 768, 8, "a10g", 22888, 1, 2, 7600, 16.288, 6.12),
    InstanceType("g6.xlarge", 4, 16, 1, "l4", 22888, 0, 1, 250, 0.8048, 0.36),
    InstanceType("g6.2xlarge", 8, 32, 1, "l4", 22888, 0, 1, 450, 0.9776, 0.42),
    InstanceType("g6.4xlarge", 16, 64, 1, "l4", 22888, 0, 1, 600, 1.3232, 0.55),
    InstanceType("g6.8xlarge", 32, 128, 1, "l4", 22888, 1, 2, 900, 2.0144, 0.81),
    InstanceType("g6.16xlarge", 64, 256, 1, "l4", 22888, 1, 2, 1880, 3.3968, 1.32),
    InstanceType("g6.12xlarge", 48, 192, 4, "l4", 22888, 1, 4, 3760, 4.6016, 1.84),
    InstanceType("g6.24xlarge", 96, 384, 4, "l4", 22888, 1, 4, 3760, 6.6752, 2.61),
    InstanceType("g6.48xlarge", 192, 768, 8, "l4", 22888, 1, 8, 7520, 13.3504, 5.21),
    InstanceType("g6e.xlarge", 4, 32, 1, "l40s", 45776, 0, 1, 250, 1.861, 0.78),
    InstanceType("g6e.2xlarge", 8, 64, 1, "l40s", 45776, 0, 1, 450, 2.242, 0.93),
    InstanceType("g6e.4xlarge", 16, 128, 1, "l40s", 45776, 0, 1, 600, 3.004, 1.22),
    InstanceType("g6e.12xlarge", 48, 384, 4, "l40s", 45776, 1, 2, 3800, 10.493, 4.19),
    InstanceType("g6e.24xlarge", 96, 768, 4, "l40s", 45776, 2, 2, 3800, 15.066, 6.02),
    InstanceType("g6e.48xlarge", 192, 1536, 8, "l40s", 45776, 4, 4, 7600, 30.131, 12.05),
    InstanceType("p4d.24xlarge", 96, 1152, 8, "a100", 40960, 4, 8, 8000, 21.958, 9.87),
    InstanceType("p4de.24xlarge", 96, 1152, 8, "a100", 81920, 4, 8, 8000, 27.447, 12.35),
    InstanceType("p5.48xlarge", 192, 2048, 8, "h100", 81920, 32, 8, 30400, 55.04, 24.77),
    InstanceType("p5e.48xlarge", 192, 2048, 8, "h200", 144384, 32, 8, 30400, 63.296, 28.48),
    InstanceType("p5en.48xlarge", 192, 2048, 8, "h200", 144384, 16, 8, 30400, 63.296, 28.48),
    InstanceType("p6-b200.48xlarge", 192, 2048, 8, "b200", 183359, 8, 8, 30400, 113.93, 51.27),
)

INSTANCE_TYPES: Final[dict[str, InstanceType]] = {row.name: row for row in _INSTANCE_ROWS}
GPU_INSTANCE_TYPES: Final[frozenset[str]] = frozenset(
    name for name, row in INSTANCE_TYPES.items() if row.gpus > 0
)
CPU_INSTANCE_TYPES: Final[frozenset[str]] = frozenset(
    name for name, row in INSTANCE_TYPES.items() if row.gpus == 0
)

#: Fixed hourly costs used for the idle-cost line of the report (same source and date).
EKS_CONTROL_PLANE_USD_PER_HOUR: Final = 0.10
NAT_GATEWAY_USD_PER_HOUR: Final = 0.045


def instance(name: str) -> InstanceType:
    """Look an instance type up; callers validate names first, so a miss is a bug."""
    return INSTANCE_TYPES[name]


def price_per_hour(name: str, capacity_type: CapacityType) -> float:
    """Planning price of one instance of `name` on the given capacity type. An On-Demand Capacity
    Reservation bills the on-demand rate whether an instance runs in it or not; a Capacity Block
    has its own (prepaid) price, which `karpenter.reservations[].priceUsdPerHour` carries."""
    row = INSTANCE_TYPES[name]
    return row.spot_usd_per_hour if capacity_type == "spot" else row.on_demand_usd_per_hour


#: PLANNING, UNVERIFIED: seconds from a provisioner's launch call (Karpenter's NodeClaim, the
#: autoscaler's SetDesiredCapacity) to a Ready GPU node, per family prefix (EC2 start, AL2023
#: boot, nodeadm, GPU driver + device plugins; p-family: 8 GPUs, EFA, NVMe RAID build).
NODE_LAUNCH_SECONDS: Final[dict[str, int]] = {"p": 420, "g": 240}
DEFAULT_NODE_LAUNCH_SECONDS: Final = 300


def node_launch_seconds(name: str) -> int:
    """Planning seconds from launch to a Ready GPU node of instance type `name`."""
    return NODE_LAUNCH_SECONDS.get(name[0], DEFAULT_NODE_LAUNCH_SECONDS)


def efa_instance_types() -> list[str]:
    """Catalog types with at least one EFA device: where the EFA device plugin runs."""
    return sorted(name for name, row in INSTANCE_TYPES.items() if row.efa_devices > 0)


# --- Network topology (EC2 instance topology, EKS network-node labels) ---------------------------

#: The label EKS puts on a node for each layer of its EC2 network-node set, layer 1 the top of
#: the hierarchy (kubernetes/cloud-provider-aws@v1.33.4 pkg/providers/v1/well_known_labels.go
#: L19-27 `LabelNetworkNodePrefix`, "The suffix should be an incremented integer starting at 1";
#: instances_v2.go L85-108 writes one label per network node DescribeInstanceTopology returns,
#: `layer := index + 1`). The cloud-controller-manager sets them while it initializes the node,
#: in the update that lifts the `node.cloudprovider.kubernetes.io/uninitialized` taint
#: (kubernetes/cloud-provider@v0.33.13 controllers/node/node_controller.go L413-484), so every
#: EKS node of a supported type - Karpenter's, a managed group's - has them before it takes a
#: pod, and never gets them refreshed (L308-356). Nothing of ours may set them: a label already
#: present is kept (L546-567).
NETWORK_NODE_LABEL_PREFIX: Final = "topology.k8s.aws/network-node-layer-"
#: The well-known hostname label (the lowest level of every Topology the platform renders).
HOSTNAME_LABEL: Final = "kubernetes.io/hostname"
#: Network-node layers EC2 DescribeInstanceTopology returns per instance family, for the
#: catalog's GPU families: "Prerequisites for Amazon EC2 topology", Instance types
#: (https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/ec2-instance-topology-prerequisites.html):
#: 3 network nodes for every g6e size, p4d.24xlarge, p4de.24xlarge, p5.48xlarge, p5e.48xlarge,
#: p5en.48xlarge; 4 for p6-b200.48xlarge. g5 and g6 are not listed: EC2 returns no topology for
#: them and their nodes carry no network-node label. The list has grown between versions of
#: that page: re-read it before adding a family. The topology describes the hierarchy "within
#: an Availability Zone" (EC2 API reference, DescribeInstanceTopology).
NETWORK_NODE_LAYERS: Final[dict[str, int]] = {
    "g6e": 3,
    "p4d": 3,
    "p4de": 3,
    "p5": 3,
    "p5e": 3,
    "p5en": 3,
    "p6-b200": 4,
}


def network_layers(name: str) -> int:
    """Network-node layers a node of instance type `name` is labelled with (0: none)."""
    return NETWORK_NODE_LAYERS.get(INSTANCE_TYPES[name].family, 0)


def network_node_label(layer: int) -> str:
    """The label of network-node layer `layer` (1 = top of the hierarchy)."""
    return f"{NETWORK_NODE_LABEL_PREFIX}{layer}"


#: Baseline network bandwidth of one instance, Mbps, as EC2 DescribeInstanceTypes publishes it
#: (Karpenter's `karpenter.k8s.aws/instance-network-bandwidth`, "Number of baseline megabits
#: ... available on the instance": aws/karpenter-provider-aws@v1.14.1 website/content/en/docs/
#: concepts/scheduling.md L178; the figures of schemas/karpenter-instance-types.yaml, which
#: tests/test_catalog.py keeps these equal to). What one node can put on the network whatever
#: its place in the topology: AWS publishes no figure per network layer (docs/topology.md).
NETWORK_BASELINE_MBPS: Final[dict[str, int]] = {
    "g5.xlarge": 2500,
    "g5.2xlarge": 5000,
    "g5.4xlarge": 10000,
    "g5.8xlarge": 25000,
    "g5.16xlarge": 25000,
    "g5.12xlarge": 40000,
    "g5.24xlarge": 50000,
    "g5.48xlarge": 100000,
    "g6.xlarge": 2500,
    "g6.2xlarge": 5000,
    "g6.4xlarge": 10000,
    "g6.8xlarge": 25000,
    "g6.16xlarge": 25000,
    "g6.12xlarge": 40000,
    "g6.24xlarge": 50000,
    "g6.48xlarge": 100000,
    "g6e.xlarge": 2500,
    "g6e.2xlarge": 5000,
    "g6e.4xlarge": 20000,
    "g6e.12xlarge": 100000,
    "g6e.24xlarge": 200000,
    "g6e.48xlarge": 400000,
    "p4d.24xlarge": 400000,
    "p4de.24xlarge": 400000,
    "p5.48xlarge": 3200000,
    "p5e.48xlarge": 3200000,
    "p5en.48xlarge": 3200000,
    "p6-b200.48xlarge": 3200000,
}


# --- EKS AMI releases ---------------------------------------------------------------------------

#: Release tags of awslabs/amazon-eks-ami that a pinned Karpenter alias (`al2023@vYYYYMMDD`) may
#: name: the tags Sept 2025 - Jul 2026 of the repository snapshot (HEAD 81fec2e8, 2026-07-23),
#: `git tag` (/work/research/runs.md Q2). v20251020 is NOT a release (no tag, no CHANGELOG entry):
#: Karpenter resolves the alias through the SSM parameter
#: /aws/service/eks/optimized-ami/<k8s>/amazon-linux-2023/x86_64/nvidia/
#: amazon-eks-node-al2023-x86_64-nvidia-<k8s>-<release>/image_id
#: (aws/karpenter-provider-aws@v1.14.1:pkg/providers/amifamily/al2023.go#L73-79) and a missing
#: one leaves the EC2NodeClass AMIsReady=False. Add a tag here when you promote a newer release.
EKS_AMI_RELEASES: Final[frozenset[str]] = frozenset(
    {
        "v20250904",
        "v20250915",
        "v20250920",
        "v20251002",
        "v20251007",
        "v20251016",
        "v20251023",
        "v20251029",
        "v20251103",
        "v20251108",
        "v20251112",
        "v20251120",
        "v20260625",
        "v20260707",
        "v20260709",
        "v20260714",
        "v20260724",
    }
)


# --- Queueing vocabulary -------------------------------------------------------------------------


def gpu_flavor_labels(
    *, gpu_class: str, capacity_type: CapacityType, provisioner: Provisioner
) -> dict[str, str]:
    """The node labels a Kueue ResourceFlavor selects by: the GPU-class, capacity-type and
    provisioner keys of `gpu_node_labels`. A flavor selects managed node groups or Karpenter
    NodePools, never both (StackConfig refuses a GPU class and capacity type served by both)."""
    return {
        LABEL_GPU_CLASS: gpu_class,
        LABEL_CAPACITY_TYPE: capacity_type,
        LABEL_PROVISIONER: provisioner,
    }


def gpu_flavor_name(gpu_class: str, capacity_type: CapacityType) -> str:
    """ResourceFlavor name of a (GPU class, capacity type) pair, e.g. `l4-x1-spot`."""
    return f"{gpu_class}-{capacity_type}"


# --- Data buckets --------------------------------------------------------------------------------

#: What each S3 data bucket holds; teams get prefixes inside them (docs/scheduling.md).
DATA_BUCKET_PURPOSES: Final = ("checkpoints", "datasets", "artifacts")


def bucket_name(prefix: str, purpose: str, account_id: str) -> str:
    """Globally unique, predictable S3 name `{prefix}-{purpose}-{account id}`; the prefix is the
    cluster name unless the stack sets another. Storage creates the buckets, Teams scope IAM to
    prefixes inside them: both derive the name here."""
    return f"{prefix}-{purpose}-{account_id}"


# --- Storage prices -----------------------------------------------------------------------------

#: Storage list prices for us-east-1, USD per GB-month unless named otherwise, transcribed on
#: 2026-11-21 from aws.amazon.com/s3/pricing (first 50 TB tier), aws.amazon.com/efs/pricing
#: (Regional, Standard), aws.amazon.com/fsx/lustre/pricing (SSD, per provisioned GB-month by
#: throughput tier) and aws.amazon.com/kms/pricing. This environment is offline, so they were not
#: re-fetched that day: planning figures for the report, not billing data — re-check them before
#: committing a budget. Request, data-transfer and EFS Elastic-throughput charges are excluded.
S3_USD_PER_GB_MONTH: Final[dict[str, float]] = {
    "STANDARD": 0.023,
    "INTELLIGENT_TIERING": 0.023,
    "STANDARD_IA": 0.0125,
    "GLACIER_IR": 0.004,
}
EFS_STANDARD_USD_PER_GB_MONTH: Final = 0.30
#: EFS provisioned throughput is billed per MiB/s-month above what the stored data includes.
EFS_PROVISIONED_USD_PER_MIBPS_MONTH: Final = 6.00
#: (deployment type, MB/s per TiB) → USD per provisioned GB-month (SSD storage).
FSX_LUSTRE_USD_PER_GB_MONTH: Final[dict[tuple[str, int], float]] = {
    ("PERSISTENT_1", 50): 0.140,
    ("PERSISTENT_1", 100): 0.210,
    ("PERSISTENT_1", 200): 0.290,
    ("PERSISTENT_2", 125): 0.145,
    ("PERSISTENT_2", 250): 0.210,
    ("PERSISTENT_2", 500): 0.340,
    ("PERSISTENT_2", 1000): 0.600,
}
KMS_KEY_USD_PER_MONTH: Final = 1.00
# --- GPU features -------------------------------------------------------------------------------

#: GPU models that support Multi-Instance GPU (NVIDIA MIG user guide, "Supported GPUs").
MIG_CAPABLE_GPU_MODELS: Final[frozenset[str]] = frozenset({"a100", "h100", "h200", "b200"})

#: GPU models whose GPUs talk to the EFA NIC directly (GPUDirect RDMA): libfabric needs
#: FI_EFA_USE_DEVICE_RDMA=1 for it (aws/aws-ofi-nccl docs; A100/H100/H200/B200 instances: p4d,
#: p4de, p5, p5e, p5en, p6). The training pods and the NCCL validation test read this one set.
EFA_RDMA_GPU_MODELS: Final[frozenset[str]] = frozenset({"a100", "h100", "h200", "b200"})
#: GPU models that are NVLink/NVSwitch-connected in every catalog type carrying them (the SXM
#: p4d/p4de/p5/p5e/p5en/p6 boards); the smoke test runs `nvidia-smi nvlink -s` there. A10G, L4 and
#: L40S (g5/g6/g6e) are PCIe-only.
NVLINK_GPU_MODELS: Final[frozenset[str]] = frozenset({"a100", "h100", "h200", "b200"})


@dataclass(frozen=True)
class NcclBusBandwidth:
    """The NCCL all-reduce bus bandwidth (GB/s) of 2 nodes of one type at a 1 GiB message."""

    #: Published nccl-tests figure; None where none was found (then `source` says UNVERIFIED).
    published_gbps: float | None
    #: What the validation test requires: a stated fraction of the published figure (80 %:
    #: run-to-run spread, PyTorch all_reduce instead of all_reduce_perf), rounded down;
    #: conservative where unverified.
    min_gbps: float
    source: str


_ADT = "aws-samples/awsome-distributed-training@7217859f:micro-benchmarks/nccl-tests/README.md"
_TOPO = (
    "aws-samples/awsome-distributed-training@7217859f:micro-benchmarks/nccl-tests/slurm/"
    "topology-aware-nccl-tests/README.md"
)
_EFA_EKS = "aws-samples/aws-efa-eks@9d6557e1:README.md"
#: all_reduce_perf busbw over EFA, float sum, out-of-place column. The validation test runs 2 nodes
#: at 1 GiB (messageSizeMib 1024), so a 2-node 1 GiB figure is used where one is published.
#: - p5.48xlarge: two published 2-node 1 GiB figures, 436.95 (Slurm, _ADT#L221) and 313.29 (EKS
#:   MPIJob, EFA installer 1.28, _ADT#L277). The platform runs on EKS and a gate must not fail a
#:   cluster that matches AWS's own EKS sample, so the threshold is 80 % of the lower one.
#: - p4de.24xlarge: 76.79 (2 nodes, 1 GiB, _ADT#L186) -> 80 %.
#: - p4d.24xlarge: 42.48 (2x p4d, 16 A100-SXM4-40GB ranks, 1 GiB, NCCL 2.9.9, _EFA_EKS#L714)
#:   -> 80 %. The old reuse of p4de's 60 was above this published figure.
#: - p5en.48xlarge: only a 16 GiB figure is published, 369.86 (_TOPO#L265; node count not stated).
#:   busbw at 1 GiB is lower than at 16 GiB: on p5 (same README, _ADT#L221 vs #L225) 436.95 vs
#:   487.09, a ratio of 0.897. Threshold = 80 % x 0.897 = 71.8 % of 369.86.
#: - p5e.48xlarge, p6-b200.48xlarge: UNVERIFIED, no published nccl-tests figure found (searched
#:   awsome-distributed-training, aws-efa-eks, aws-k8s-tester and AWS docs/blogs in the corpora).
#:   They reuse p5's threshold: p5e has p5's 32-device 3200 Gbps EFA, p6-b200 3200 Gbps over 8
#:   devices. (awsome-distributed-training's gpu-cluster-healthcheck 5-nccl-allreduce.sh has
#:   "conservative defaults" of 800/900 GB/s for these types, but they are peak busbw up to 16 GiB
#:   with no measurement behind them, above every published 2-node figure: not used.)
#: Types not listed (g5/g6/g6e) need `validation.nccl.minBusBandwidthGbps`.
NCCL_ALLREDUCE_BUSBW: Final[dict[str, NcclBusBandwidth]] = {
    "p5.48xlarge": NcclBusBandwidth(
        313.29, 250, f"{_ADT}#L277 (2x p5.48xlarge on EKS, 1 GiB: 313.29; Slurm #L221: 436.95)"
    ),
    "p4de.24xlarge": NcclBusBandwidth(76.79, 61, f"{_ADT}#L186 (2x p4de.24xlarge, 1 GiB: 76.79)"),
    "p4d.24xlarge": NcclBusBandwidth(
        42.48, 33, f"{_EFA_EKS}#L714 (2x p4d.24xlarge on EKS, 1 GiB: 42.48)"
    ),
    "p5en.48xlarge": NcclBusBandwidth(
        369.86, 265, f"{_TOPO}#L265 (p5en.48xlarge, 16 GiB: 369.86; 71.8 %, see above)"
    ),
    "p5e.48xlarge": NcclBusBandwidth(
        None, 250, "UNVERIFIED: p5 threshold reused (same 32-device 3200 Gbps EFA)"
    ),
    "p6-b200.48xlarge": NcclBusBandwidth(
        None, 250, "UNVERIFIED: p5 threshold reused as a floor (3200 Gbps EFA over 8 devices)"
    ),
}


def nccl_min_bus_bandwidth(instance_type: str, override: float | None) -> float | None:
    """The NCCL test's threshold on a type: the config override, else the catalog figure."""
    if override is not None:
        return override
    row = NCCL_ALLREDUCE_BUSBW.get(instance_type)
    return row.min_gbps if row else None


#: Label the GPU Operator's device plugin reads to pick a named config per node.
DEVICE_PLUGIN_CONFIG_LABEL: Final = "nvidia.com/device-plugin.config"
#: Label the GPU Operator sets on every node with an NVIDIA GPU.
NVIDIA_GPU_PRESENT_LABEL: Final = "nvidia.com/gpu.present"


def gpu_node_selector() -> dict[str, str]:
    """Selects every GPU node, managed group or Karpenter pool alike."""
    return {LABEL_GPU_VENDOR: "nvidia"}


def cpu_node_labels(*, capacity_type: CapacityType, workload_type: WorkloadType) -> dict[str, str]:
    """Labels of a general-purpose CPU node launched by Karpenter (same keys as GPU nodes)."""
    return {
        LABEL_CAPACITY_TYPE: capacity_type,
        LABEL_WORKLOAD_TYPE: workload_type,
        LABEL_PROVISIONER: "karpenter",
    }


#: Kueue's queue-name label: a job carrying it is suspended until its LocalQueue admits it.
KUEUE_QUEUE_LABEL: Final = "kueue.x-k8s.io/queue-name"
#: Resources every team ClusterQueue covers (components/platform/tenancy/teams.py lists them in each
#: flavor, in this order); the "will it run" analysis checks every request against them.
KUEUE_COVERED_RESOURCES: Final = ("cpu", "memory", GPU_RESOURCE)
#: Extended resources Kueue leaves out of quota (`resources.excludeResourcePrefixes` of its
#: Configuration). Kueue 0.19's default quotaCheckStrategy BlockUndeclared keeps a workload
#: pending with "resource vpc.amazonaws.com/efa unavailable in ClusterQueue" when a request is
#: neither covered nor excluded (kubernetes-sigs/kueue@v0.19.2:
#: pkg/scheduler/flavorassigner/flavorassigner.go#L803-812; apis/config/v1beta2/
#: configuration_types.go#L574-605). EFA interfaces are a per-node device, not a shared budget
#: worth a quota: the GPU count already bounds how many EFA pods a team can run.
KUEUE_EXCLUDED_RESOURCE_PREFIXES: Final = ("vpc.amazonaws.com/",)
#: The job kinds Kueue manages on every platform cluster (`integrations.frameworks` of its
#: Configuration): batch Jobs, the JobSets Trainer creates, and TrainJobs.
KUEUE_FRAMEWORKS: Final = ("batch/job", "jobset.x-k8s.io/jobset", "trainer.kubeflow.org/trainjob")
#: The pod-spec fields a TrainJob runtime patch keeps on the path Kueue v0.19.2 takes: Kueue is
#: built on Trainer v2.2.1's API types (kubernetes-sigs/kueue@v0.19.2 go.mod L14) and writes the
#: whole TrainJob back through them on admission (pkg/controller/jobs/trainjob/
#: trainjob_controller.go L243-290, `c.Update`) and when MultiKueue copies it to a worker
#: (trainjob_multikueue_adapter.go L44-80), so a field its `PodSpecPatch` lacks is dropped
#: (kubeflow/trainer@v2.2.1 pkg/apis/trainer/v1alpha1/trainjob_types.go L384-450; v2.3.0 adds
#: `terminationGracePeriodSeconds`, the only new one).
TRAINER_V221_POD_SPEC_PATCH_FIELDS: Final = frozenset(
    {
        "serviceAccountName",
        "volumes",
        "initContainers",
        "containers",
        "imagePullSecrets",
        "securityContext",
        "nodeSelector",
        "affinity",
        "tolerations",
        "schedulingGates",
    }
)
#: The fields of a container in such a patch (`ContainerPatch`, kubeflow/trainer@v2.2.1
#: pkg/apis/trainer/v1alpha1/trainjob_types.go L452-481): anything else is dropped the same way.
TRAINER_V221_CONTAINER_PATCH_FIELDS: Final = frozenset(
    {"name", "env", "volumeMounts", "securityContext"}
)
#: The platform's ClusterTrainingRuntimes are named `gpu-platform-torch-<priority>-g<grace s>`:
#: one per job priority (its pod PriorityClass) and pod grace period, which Trainer v2 takes from
#: the runtime's pod template (config/training.py POD_GRACE_SECONDS, docs/training-jobs.md).
TRAINER_RUNTIME_PREFIX: Final = "gpu-platform-torch"
_TRAINER_RUNTIME_NAME: Final = re.compile(rf"^{TRAINER_RUNTIME_PREFIX}-[a-z]+-g(?P<grace>[0-9]+)$")


def trainer_runtime_name(priority: str, grace_s: int) -> str:
    """The ClusterTrainingRuntime of a job priority whose pods get `grace_s` seconds."""
    return f"{TRAINER_RUNTIME_PREFIX}-{priority}-g{grace_s}"


def trainer_runtime_grace(name: str) -> int | None:
    """The pod grace period a platform runtime's name states (None: not a platform runtime);
    the policy pack reads a TrainJob's grace this way, the runtime living in another stack."""
    match = _TRAINER_RUNTIME_NAME.match(name)
    return int(match["grace"]) if match else None


#: The job kinds a fleet's manager dispatches (its Kueue's frameworks): the platform's Kueue
#: launchers. Volcano Jobs have no MultiKueue adapter and no `managedBy` field
#: (kubernetes-sigs/kueue@v0.19.2 pkg/controller/jobs: no vcjob integration; volcano-sh/apis
#: batch/v1alpha1 JobSpec), so they never leave the cluster they are created in. JobSets are
#: created by Trainer on the worker, not dispatched.
MULTIKUEUE_FRAMEWORKS: Final = ("batch/job", "trainer.kubeflow.org/trainjob")
#: `managedBy` of a job the manager's MultiKueue runs elsewhere (AdmissionCheck controller
#: name; apis/kueue/v1beta2/constants.go at v0.19.2): the local Job / TrainJob controller skips
#: it (Trainer v2.3.0 pkg/util/trainjob/trainjob.go IsManagedByExternalController).
MULTIKUEUE_CONTROLLER: Final = "kueue.x-k8s.io/multikueue"
#: What the manager's identity may do on a worker, per dispatched framework, as Kueue's own
#: multi-cluster tests grant it (kubernetes-sigs/kueue@v0.19.2 test/util/multikueue.go
#: `frameworkRules`, `MultiKueueRulesForManager`): the job kind itself and its status. Every
#: adapter's watch must be established before the worker counts as connected
#: (pkg/controller/admissionchecks/multikueue/multikueuecluster.go, "Establish every watch
#: before marking the client connected"), so a missing rule leaves the worker inactive.
MULTIKUEUE_JOB_RULES: Final = {
    "batch/job": (("batch", "jobs"),),
    "trainer.kubeflow.org/trainjob": (("trainer.kubeflow.org", "trainjobs"),),
}
#: The verbs on a dispatched job kind (create the mirror, sync, delete it when another worker
#: wins or the manager's workload ends).
MULTIKUEUE_JOB_VERBS: Final = ("create", "update", "patch", "delete", "get", "list", "watch")
#: Planning price of data moved between AWS regions (EC2 and S3 replication "Data transfer OUT
#: to another AWS Region" from US East/West: $0.02/GB on the public pricing pages; other region
#: pairs cost up to several times more). What a fleet's checkpoint replication is priced at.
INTER_REGION_USD_PER_GB: Final = 0.02
#: The per-namespace ConfigMap a fleet worker publishes in each team namespace: a job the manager
#: dispatched reads its region's bucket names from it, so the same object
#: resolves to local data wherever it lands.
FLEET_DATA_CONFIGMAP: Final = "gpu-platform-data"
#: The EFA device resource (aws-efa-k8s-device-plugin; Karpenter's ResourceEFA,
#: aws/karpenter-provider-aws@v1.14.1:pkg/apis/v1/labels.go#L140).
EFA_RESOURCE: Final = "vpc.amazonaws.com/efa"
#: Well-known zone label every node carries (kubelet/cloud provider).
ZONE_LABEL: Final = "topology.kubernetes.io/zone"
#: Well-known region label every node carries; Karpenter's AWS instance types require it
#: (aws/karpenter-provider-aws pkg/providers/instancetype/types.go computeRequirements) and the
#: cluster-autoscaler's ASG node templates set it (cloudprovider/aws aws_manager.go
#: buildGenericLabels), so a scale-up simulates it too.
REGION_LABEL: Final = "topology.kubernetes.io/region"
#: The schedulerName of pods Volcano places (its gang and queue plugins).
VOLCANO_SCHEDULER: Final = "volcano"


def gpu_smoke_job_name(pool: str) -> str:
    """The GPU smoke test's Job on node source `pool` (validation.py renders it, will-it-run
    names it)."""
    return f"gpu-smoke-{pool}"


def nccl_job_name(pool: str) -> str:
    """The NCCL all-reduce test's Job on node source `pool`."""
    return f"nccl-allreduce-{pool}"


#: Requests of one NCCL validation pod besides the node's GPUs and EFA devices
#: (components/analysis/nccl.py sizes them per node type;
#: components/platform/validation/validation.py
#: nccl_resources and the validation queue's guarantee read that). Memory: at most
#: NCCL_POD_MEMORY_GIB, never more than the type's allocatable; a type whose allocatable is
#: below NCCL_POD_MIN_MEMORY_GIB (PLANNING: torchrun's agent and one CUDA/NCCL rank, host side)
#: or NCCL_POD_CPU cannot host the test.
NCCL_POD_CPU: Final = 2
NCCL_POD_MEMORY_GIB: Final = 16
NCCL_POD_MIN_MEMORY_GIB: Final = 4
#: Training pods' metrics endpoint: the container port the workload layer declares
#: (components/training_jobs/plan.py METRICS_PORT, named `metrics` in manifests.py) and the one port
#: team NetworkPolicies open to Prometheus. Here because platform code may not import workloads;
#: tests/platform/test_teams.py keeps the two equal.
TRAINING_METRICS_PORT: Final = 9401
TRAINING_METRICS_PORT_NAME: Final = "metrics"
#: Label every training pod carries (training_jobs/plan.py JOB_LABEL): what the PodMonitor selects.
TRAINING_JOB_LABEL: Final = f"{LABEL_DOMAIN}/training-job"
#: The service account every team namespace has for its training pods (Pod Identity IAM).
TRAINER_SERVICE_ACCOUNT: Final = "trainer"

#: Dense BF16 Tensor Core peak per GPU, TFLOP/s: the denominator of MFU (the trainer reads it as
#: GPU_PEAK_TFLOPS, images/trainer/gpt_trainer/perf.py). NVIDIA datasheets give these figures
#: "with sparsity" as twice the dense value; the dense half is used. Transcribed offline from the
#: datasheets (H100/H200 SXM 989, A100 SXM 312, L40S 362, L4 121, A10 125, B200 2250 per GPU of
#: HGX B200); planning figures until checked against the current datasheet (no NVIDIA datasheet
#: is in this environment's offline corpora; re-checked 2026-11-23, nothing changed). A10G (AWS's
#: A10 variant) has no NVIDIA datasheet: the A10 figure stands in, UNVERIFIED, and probably too
#: high — a third-party comparison (baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference)
#: says the A10G trades tensor throughput for CUDA-core throughput, so MFU on g5 reads low.
GPU_PEAK_BF16_TFLOPS: Final[dict[str, float]] = {
    "a10g": 125.0,
    "l4": 121.0,
    "l40s": 362.0,
    "a100": 312.0,
    "h100": 989.0,
    "h200": 989.0,
    "b200": 2250.0,
}


def image_repository(image: str) -> str:
    """`registry/path/name` of an image reference, tag and digest removed (a registry port
    stays): what admission and signatures are decided by (components/analysis/images.py, the
    policy pack, which imports nothing but this module from components)."""
    name = image.split("@", 1)[0]
    if ":" in name.rsplit("/", 1)[-1]:
        name = name[: name.rindex(":")]
    return name


#: The system node group's gp3 root volume: IOPS and throughput (MiB/s), gp3's baseline
#: (components/platform/cluster/cluster.py; what an image pull onto a system node is bounded by:
#: components/analysis/readiness.py `system_pull_rate`).
SYSTEM_DISK_IOPS: Final = 3000
SYSTEM_DISK_THROUGHPUT_MIBPS: Final = 125


#: ECR tags exempt from immutability (IMMUTABLE_WITH_EXCLUSION wildcard filters): cosign's
#: signature tags `sha256-<digest>.sig`, which a second signature rewrites (sigstore/cosign
#: issue #313), BuildKit's registry cache tag, which every build rewrites, and the build's
#: staging tag, which every push of the trainer moves (components/platform/registry/
#: trainer_image.py: the tag jobs run by is another, immutable one; docs/images.md). No job may
#: resolve any of them (components/analysis/images.py, config/images.py).
ECR_MUTABLE_TAG_FILTERS: Final = ("sha256-*", "buildcache", "build")


def ecr_tag_moves(tag: str) -> bool:
    """Whether `tag` is one the platform's repositories let tools move
    (ECR_MUTABLE_TAG_FILTERS, ECR's `*` wildcard)."""
    return any(fnmatch.fnmatchcase(tag, pattern) for pattern in ECR_MUTABLE_TAG_FILTERS)


def in_repositories(repository: str, repositories: Iterable[str]) -> bool:
    """Whether `repository` is one of `repositories` or below one of them (`ghcr.io/org` covers
    `ghcr.io/org/trainer`): the scope of what a signer signs (security.imageAdmission)."""
    return any(repository == r or repository.startswith(f"{r}/") for r in repositories)
