"""Per-team volumes on the RWX file system: the checkpoint claim (and a datasets claim) in a
team's namespace, with their PersistentVolumes on FSx (static provisioning) and, on FSx, the
one-shot Job that creates the team's `/teams/<team>` owned by the trainer's UID first — the
resources behind `Storage.team_volumes`, built from `storage_builders`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.platform.storage.fsx_team_dirs import (
    FSX_ADMIN_NAMESPACE,
    fsx_admin_objects,
    team_dirs_job,
    team_dirs_timeout,
)
from components.platform.storage.storage_builders import (
    LustreVolume,
    RwxType,
    team_volume_specs,
)


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
    directories: list[pulumi.Resource] | None = None,
) -> list[pulumi.CustomResource]:
    """Turn `team_volume_specs` into Kubernetes resources (PVs first, then their claims); on
    FSx the PVs come after the Job that creates the team directories (`directories`)."""
    if rwx == "fsx" and lustre is None:
        raise ValueError("FSx team volumes need the Lustre file system")

    def specs(volume: LustreVolume | None) -> list[dict[str, Any]]:
        return team_volume_specs(
            team=team,
            namespace=namespace,
            rwx=rwx,
            checkpoint_size=checkpoint_size,
            datasets=datasets,
            lustre=volume,
        )

    shapes = specs(LustreVolume("fs-0", "", "", "") if rwx == "fsx" else None)
    created: list[pulumi.CustomResource] = []
    volumes: list[pulumi.Resource] = []
    for index, shape in enumerate(shapes):
        spec: Any = _spec_at(specs, lustre, index) if lustre is not None else shape["spec"]
        is_volume = shape["kind"] == "PersistentVolume"
        # A PV waits for the team directories (the checkpoint PV mounts /teams/<team>: Lustre
        # refuses a missing directory), a claim for the PVs before it.
        after = list(directories or []) if is_volume else volumes
        resource = _volume_object(
            name,
            shape,
            spec,
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=after)),
        )
        if is_volume:
            volumes.append(resource)
        created.append(resource)
    return created


def _spec_at(
    specs: Callable[[LustreVolume], list[dict[str, Any]]],
    lustre: pulumi.Output[LustreVolume],
    at: int,
) -> pulumi.Output[Any]:
    """Object `at`'s spec, rendered once the file system's id and names are known."""
    return lustre.apply(lambda volume: specs(volume)[at]["spec"])


def _volume_object(
    name: str, shape: dict[str, Any], spec: Any, opts: pulumi.ResourceOptions
) -> pulumi.CustomResource:
    """The PersistentVolume or PersistentVolumeClaim of `shape`, with `spec` (maybe an Output)."""
    object_name = shape["metadata"]["name"]
    if shape["kind"] == "PersistentVolume":
        return k8s.core.v1.PersistentVolume(
            f"{name}-{object_name}-pv", metadata=shape["metadata"], spec=spec, opts=opts
        )
    return k8s.core.v1.PersistentVolumeClaim(
        f"{name}-{object_name}", metadata=shape["metadata"], spec=spec, opts=opts
    )


def create_fsx_admin(
    name: str,
    lustre: pulumi.Output[LustreVolume],
    *,
    capacity: str,
    opts: pulumi.ResourceOptions,
) -> list[pulumi.Resource]:
    """The platform namespace of the team-directory Job, its default-deny policy and its claim
    on the Lustre root (`fsx_team_dirs.fsx_admin_objects`), each after the ones before."""
    shapes = fsx_admin_objects(LustreVolume("fs-0", "", "", ""), capacity)
    created: list[pulumi.Resource] = []
    for index, shape in enumerate(shapes):
        kind = shape["kind"]
        after = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=created))
        resource: pulumi.Resource
        if kind == "Namespace":
            resource = k8s.core.v1.Namespace(
                f"{name}-{FSX_ADMIN_NAMESPACE}", metadata=shape["metadata"], opts=opts
            )
        elif kind == "NetworkPolicy":
            resource = k8s.networking.v1.NetworkPolicy(
                f"{name}-{FSX_ADMIN_NAMESPACE}-deny",
                metadata=shape["metadata"],
                spec=shape["spec"],
                opts=after,
            )
        else:

            def spec_of(volume: LustreVolume, at: int = index) -> Any:
                return fsx_admin_objects(volume, capacity)[at]["spec"]

            cls: Any = (
                k8s.core.v1.PersistentVolume
                if kind == "PersistentVolume"
                else k8s.core.v1.PersistentVolumeClaim
            )
            resource = cls(
                f"{name}-{shape['metadata']['name']}-{kind.lower()}",
                metadata=shape["metadata"],
                spec=lustre.apply(spec_of),
                opts=after,
            )
        created.append(resource)
    return created


def create_team_dirs_job(
    name: str,
    *,
    teams: list[str],
    image: pulumi.Input[str],
    deadline_s: int,
    opts: pulumi.ResourceOptions,
) -> k8s.batch.v1.Job:
    """The Job that creates every team's directory on the Lustre root
    (`fsx_team_dirs.team_dirs_job`); `opts` carry its platform namespace and claim, and the
    Kueue webhook it must pass (the caller's depends_on)."""
    job = team_dirs_job(teams, image, deadline_s)
    timeout = team_dirs_timeout(deadline_s)
    return k8s.batch.v1.Job(
        f"{name}-{job['metadata']['name']}",
        metadata=job["metadata"],
        spec=job["spec"],
        opts=pulumi.ResourceOptions.merge(
            opts,
            pulumi.ResourceOptions(
                # A Job's template is immutable and its name fixed: a new team or image is a
                # new Job (it re-runs, harmlessly: the script is idempotent).
                replace_on_changes=["spec.template"],
                delete_before_replace=True,
                custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout),
            ),
        ),
    )
