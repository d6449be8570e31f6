"""Per-team volumes on the RWX file system: the checkpoint claim (and a datasets claim) in a
team's namespace, with their PersistentVolumes on FSx (static provisioning) — the resources
behind `Storage.team_volumes`, built from `storage_builders.team_volume_specs`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s

from components.platform.storage_builders import (
    LustreVolume,
    RwxType,
    team_volume_specs,
)

if TYPE_CHECKING:
    pass


def create_team_volumes(
    name: str,
    *,
    team: str,
    namespace: str,
    rwx: RwxType,
    checkpoint_size: str,
    datasets: bool,
    lustre: pulumi.Output[LustreVolume] | None,
    opts: pulumi.ResourceOptions,
) -> list[pulumi.CustomResource]:
    """Turn `team_volume_specs` into Kubernetes resources (PVs first, then their claims)."""
    if rwx == "fsx" and lustre is None:
        raise ValueError("FSx team volumes need the Lustre file system")
    placeholder = LustreVolume("fs-0", "", "", "")
    shapes = team_volume_specs(
        team=team,
        namespace=namespace,
        rwx=rwx,
        checkpoint_size=checkpoint_size,
        datasets=datasets,
        lustre=placeholder if rwx == "fsx" else None,
    )
    created: list[pulumi.CustomResource] = []
    volumes: list[pulumi.Resource] = []
    for index, shape in enumerate(shapes):
        kind, object_name = shape["kind"], shape["metadata"]["name"]

        def spec_of(volume: LustreVolume | None, at: int = index) -> Any:
            return team_volume_specs(
                team=team,
                namespace=namespace,
                rwx=rwx,
                checkpoint_size=checkpoint_size,
                datasets=datasets,
                lustre=volume,
            )[at]["spec"]

        spec: Any = lustre.apply(spec_of) if lustre is not None else shape["spec"]
        if kind == "PersistentVolume":
            resource: pulumi.CustomResource = k8s.core.v1.PersistentVolume(
                f"{name}-{object_name}-pv",
                metadata=shape["metadata"],
                spec=spec,
                opts=opts,
            )
            volumes.append(resource)
        else:
            resource = k8s.core.v1.PersistentVolumeClaim(
                f"{name}-{object_name}",
                metadata=shape["metadata"],
                spec=spec,
                opts=pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=volumes)),
            )
        created.append(resource)
    return created
