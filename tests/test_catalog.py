"""The catalog's instance table equals the upstream figures it cites.

schemas/karpenter-instance-types.yaml is extracted from Karpenter v1.14.1's generated instance-type
reference (DescribeInstanceTypes data; provenance in its header and schemas/sources.yaml). A hand
edit of a vCPU, memory, GPU or EFA figure in components/catalog.py that the source does not back
fails here.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components import catalog
from tests.conftest import SCHEMAS

EXTRACT = SCHEMAS / "karpenter-instance-types.yaml"


def _extract() -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = yaml.safe_load(EXTRACT.read_text())["instanceTypes"]
    return rows


def test_the_extract_covers_every_catalog_type_and_nothing_else() -> None:
    rows = _extract()
    assert rows, "empty extract"
    assert set(rows) == set(catalog.INSTANCE_TYPES)


@pytest.mark.parametrize("name", sorted(catalog.INSTANCE_TYPES))
def test_catalog_row_equals_karpenter_v1_14_1(name: str) -> None:
    src = _extract()[name]
    row = catalog.instance(name)
    assert row.vcpu == src["vcpu"]
    assert row.memory_gib * 1024 == src["memoryMiB"]
    assert row.gpus == src["gpus"]
    assert row.gpu_model == src["gpuName"]
    assert row.gpu_memory_mib == src["gpuMemoryMiB"]
    assert row.efa_devices == src["efa"]
    assert row.nvme_gb == src["localNvmeGB"]
    # The disk count is an UNVERIFIED transcription (catalog.py); only its presence is checked.
    assert (row.nvme_disks > 0) == (src["localNvmeGB"] > 0) == row.nvme_instance_store


def test_gpu_memory_is_reported_in_gib_of_the_whole_instance() -> None:
    # DescribeInstanceTypes gives 22888 MiB per A10G (24e9 bytes): 4 of them are ~89.4 GiB, not 96.
    row = catalog.instance("g5.12xlarge")
    assert row.gpu_memory_gib == pytest.approx(4 * 22888 / 1024)
    assert catalog.instance("p5.48xlarge").gpu_memory_gib == 640


@pytest.mark.parametrize("name", sorted(catalog.GPU_INSTANCE_TYPES))
def test_baseline_network_bandwidth_equals_karpenter_v1_14_1(name: str) -> None:
    labels = _extract()[name]["labels"]
    published = int(labels["karpenter.k8s.aws/instance-network-bandwidth"])
    assert catalog.NETWORK_BASELINE_MBPS[name] == published


def test_network_layers_follow_the_ec2_topology_prerequisites() -> None:
    # g6e, p4d/p4de, p5/p5e/p5en: 3 network nodes; p6-b200: 4; g5 and g6: not supported.
    assert catalog.network_layers("g6e.xlarge") == catalog.network_layers("p5.48xlarge") == 3
    assert catalog.network_layers("p6-b200.48xlarge") == 4
    assert catalog.network_layers("g5.48xlarge") == catalog.network_layers("g6.xlarge") == 0
    assert catalog.network_layers("m6i.large") == 0
    families = {row.family for row in catalog.INSTANCE_TYPES.values()}
    assert set(catalog.NETWORK_NODE_LAYERS) <= families
    assert catalog.network_node_label(2) == "topology.k8s.aws/network-node-layer-2"
