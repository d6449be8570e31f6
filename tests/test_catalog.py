"""The instance table's EFA counts and NVMe totals equal upstream's generated instance-type
reference (aws/karpenter-provider-aws@v1.14.1:website/content/en/docs/reference/
instance-types.md: `vpc.amazonaws.com/efa` capacity, `karpenter.k8s.aws/instance-local-nvme`
label in GB), transcribed here so an edit of the catalog that drifts from it fails."""

from __future__ import annotations

from components import catalog

#: type -> (EFA interfaces, local NVMe GB) as the v1.14.1 reference lists them.
KARPENTER_REFERENCE: dict[str, tuple[int, int]] = {
    "g5.xlarge": (0, 250),
    "g5.2xlarge": (0, 450),
    "g5.4xlarge": (0, 600),
    "g5.8xlarge": (1, 900),
    "g5.16xlarge": (1, 1900),
    "g5.12xlarge": (1, 3800),
    "g5.24xlarge": (1, 3800),
    "g5.48xlarge": (1, 7600),
    "g6.xlarge": (0, 250),
    "g6.2xlarge": (0, 450),
    "g6.4xlarge": (0, 600),
    "g6.8xlarge": (1, 900),
    "g6.16xlarge": (1, 1880),
    "g6.12xlarge": (1, 3760),
    "g6.24xlarge": (1, 3760),
    "g6.48xlarge": (1, 7520),
    "g6e.xlarge": (0, 250),
    "g6e.2xlarge": (0, 450),
    "g6e.4xlarge": (0, 600),
    "g6e.12xlarge": (1, 3800),
    "g6e.24xlarge": (2, 3800),
    "g6e.48xlarge": (4, 7600),
    "p4d.24xlarge": (4, 8000),
    "p4de.24xlarge": (4, 8000),
    "p5.48xlarge": (32, 30400),
    "p5e.48xlarge": (32, 30400),
    "p5en.48xlarge": (16, 30400),
    "p6-b200.48xlarge": (8, 30400),
    # No instance store (the m6i/m7i/c6i families are EBS-only; no `-d` suffix).
    "m6i.xlarge": (0, 0),
    "m7i.xlarge": (0, 0),
}


def test_efa_and_nvme_match_the_karpenter_reference() -> None:
    assert set(catalog.GPU_INSTANCE_TYPES) <= set(KARPENTER_REFERENCE)
    for name, (efa, nvme_gb) in KARPENTER_REFERENCE.items():
        row = catalog.instance(name)
        assert (row.efa_devices, row.nvme_gb) == (efa, nvme_gb), name
        assert row.nvme_instance_store == (nvme_gb > 0), name
        assert (row.nvme_disks > 0) == (nvme_gb > 0), name
