"""Storage facts the workloads rely on: the team claims' names, access modes and classes. The
storage builders (components/platform/storage/storage_builders.py) create the claims from these; the
"will it run" analysis checks jobs against them."""

from __future__ import annotations

from typing import Final, Literal

#: StorageClass of each RWX file-system type (EFS: dynamic access points; FSx: static PVs).
EFS_STORAGE_CLASS: Final = "efs-rwx"
FSX_STORAGE_CLASS: Final = "fsx-lustre"
RWX_STORAGE_CLASS: Final[dict[str, str]] = {"efs": EFS_STORAGE_CLASS, "fsx": FSX_STORAGE_CLASS}
#: Both classes bind at creation: the claim is Bound before any pod exists, so pulumi-kubernetes'
#: PVC await (Bound, 5 min; pulumi/pulumi-kubernetes@v4.32.0 provider/pkg/await/awaiters.go
#: #L288-322) succeeds during `up` once the CSI driver and file system are ready.
VOLUME_BINDING_MODE: Final = "Immediate"
#: Every node of a multi-node job mounts the same checkpoint directory.
CHECKPOINT_ACCESS_MODE: Final[Literal["ReadWriteMany"]] = "ReadWriteMany"


def checkpoint_claim(team: str) -> str:
    """Name of a team's checkpoint claim in its namespace."""
    return f"{team}-checkpoints"
