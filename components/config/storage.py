"""Storage slice: S3 buckets (lifecycle, protection) and the RWX file system (EFS / FSx)."""

from __future__ import annotations

from typing import Annotated, ClassVar, Final, Literal

from pydantic import Field, StringConstraints, model_validator
from pydantic.alias_generators import to_camel

from components.config.base import (
    DigestImage,
    Model,
    Problem,
    problems_error,
)

#: FSx for Lustre SSD throughput tiers (MB/s per TiB) that AWS accepts per deployment type.
FSX_THROUGHPUT_TIERS: Final[dict[str, tuple[int, ...]]] = {
    "PERSISTENT_1": (50, 100, 200),
    "PERSISTENT_2": (125, 250, 500, 1000),
}
#: Persistent SSD file systems: 1.2 TiB, then multiples of 2.4 TiB (FSx for Lustre user guide).
FSX_MIN_CAPACITY_GIB: Final = 1200
FSX_CAPACITY_INCREMENT_GIB: Final = 2400
#: The longest `{prefix}-{role}-{account id}` bucket name must fit S3's 63 characters.
BUCKET_PREFIX_MAX: Final = 63 - len("-access-logs-") - 12
LustreEvent = Literal["NEW", "CHANGED", "DELETED"]


class BucketLifecycle(Model):
    """Lifecycle rules shared by the data buckets (checkpoints, datasets, artifacts)."""

    #: Failed multipart uploads of multi-GB checkpoints are billed until aborted.
    abort_incomplete_multipart_days: Annotated[int, Field(ge=1, le=30)] = 7
    #: Versioning protects against overwrites; old versions are kept this long, then expire.
    noncurrent_version_expiration_days: Annotated[int, Field(ge=1, le=365)] = 30
    #: Move checkpoints older than this to `checkpointTransitionClass`; null keeps them in
    #: STANDARD. S3 bills STANDARD_IA / GLACIER_IR for at least 30 days, hence the minimum.
    checkpoint_transition_days: Annotated[int, Field(ge=30, le=3650)] | None = 60
    checkpoint_transition_class: Literal["STANDARD_IA", "INTELLIGENT_TIERING", "GLACIER_IR"] = (
        "STANDARD_IA"
    )
    #: Server access logs are kept this long in the log bucket.
    access_log_expiration_days: Annotated[int, Field(ge=30, le=3650)] = 365


class RwxConfig(Model):
    """The shared ReadWriteMany file system: `type: efs` or `type: fsx` (FSx for Lustre).

    EFS keys: throughputMode, provisionedThroughputMibps. FSx keys: deploymentType,
    perUnitStorageThroughput, storageCapacityGib, subnetIndex, dataCompression, importEvents,
    exportEvents, datasetsPath, automaticBackupRetentionDays. A key of the other type is an error.
    """

    type: Literal["efs", "fsx"] = "efs"
    # EFS
    throughput_mode: Literal["elastic", "bursting", "provisioned"] | None = None
    provisioned_throughput_mibps: Annotated[int, Field(ge=1, le=3414)] | None = None
    # FSx for Lustre
    deployment_type: Literal["PERSISTENT_1", "PERSISTENT_2"] | None = None
    per_unit_storage_throughput: int | None = None
    storage_capacity_gib: int | None = None
    #: Lustre is single-AZ: the file system lives in this private subnet (by index).
    subnet_index: Annotated[int, Field(ge=0, le=5)] | None = None
    data_compression: Literal["NONE", "LZ4"] | None = None
    #: S3 events the datasets data-repository association imports / exports.
    import_events: list[LustreEvent] | None = None
    export_events: list[LustreEvent] | None = None
    #: Where the datasets bucket appears inside the file system.
    datasets_path: Annotated[str, StringConstraints(pattern=r"^/[a-z0-9][a-z0-9_/-]*$")] | None = (
        None
    )
    automatic_backup_retention_days: Annotated[int, Field(ge=0, le=90)] | None = None

    _EFS_KEYS: ClassVar[tuple[str, ...]] = ("throughput_mode", "provisioned_throughput_mibps")
    _FSX_KEYS: ClassVar[tuple[str, ...]] = (
        "deployment_type",
        "per_unit_storage_throughput",
        "storage_capacity_gib",
        "subnet_index",
        "data_compression",
        "import_events",
        "export_events",
        "datasets_path",
        "automatic_backup_retention_days",
    )

    # Effective values: the defaults of the selected type.
    @property
    def efs_throughput_mode(self) -> str:
        return self.throughput_mode or "elastic"

    @property
    def fsx_deployment_type(self) -> str:
        return self.deployment_type or "PERSISTENT_2"

    @property
    def fsx_throughput(self) -> int:
        return self.per_unit_storage_throughput or 250

    @property
    def fsx_capacity_gib(self) -> int:
        return self.storage_capacity_gib or FSX_MIN_CAPACITY_GIB

    @property
    def fsx_subnet_index(self) -> int:
        return self.subnet_index or 0

    @property
    def fsx_import_events(self) -> list[str]:
        return list(self.import_events if self.import_events is not None else ["NEW", "CHANGED"])

    @property
    def fsx_export_events(self) -> list[str]:
        return list(self.export_events or [])

    @property
    def fsx_datasets_path(self) -> str:
        return self.datasets_path or "/datasets"

    @model_validator(mode="after")
    def _check(self) -> RwxConfig:
        problems = self._other_type_problems()
        problems += self._efs_problems() if self.type == "efs" else self._fsx_problems()
        if problems:
            raise problems_error(problems)
        return self

    def _other_type_problems(self) -> list[Problem]:
        """Keys of the type not selected are errors: they would be silently ignored."""
        problems: list[Problem] = []
        other = self._FSX_KEYS if self.type == "efs" else self._EFS_KEYS
        for key in other:
            value = getattr(self, key)
            if value is not None:
                problems.append(
                    Problem(
                        to_camel(key),
                        value,
                        f"only applies to type {'fsx' if self.type == 'efs' else 'efs'}",
                    )
                )
        return problems

    def _efs_problems(self) -> list[Problem]:
        """A provisioned throughput is given exactly when the throughput mode is provisioned."""
        problems: list[Problem] = []
        provisioned = self.efs_throughput_mode == "provisioned"
        if provisioned and self.provisioned_throughput_mibps is None:
            problems.append(
                Problem(
                    "provisionedThroughputMibps",
                    None,
                    "required when throughputMode is provisioned",
                )
            )
        if not provisioned and self.provisioned_throughput_mibps is not None:
            problems.append(
                Problem(
                    "provisionedThroughputMibps",
                    self.provisioned_throughput_mibps,
                    "only with throughputMode: provisioned",
                )
            )
        return problems

    def _fsx_problems(self) -> list[Problem]:
        """Throughput tier, capacity step and events are what FSx for Lustre accepts."""
        problems: list[Problem] = []
        tiers = FSX_THROUGHPUT_TIERS[self.fsx_deployment_type]
        if self.fsx_throughput not in tiers:
            problems.append(
                Problem(
                    "perUnitStorageThroughput",
                    self.fsx_throughput,
                    f"{self.fsx_deployment_type} allows {', '.join(map(str, tiers))} MB/s/TiB",
                )
            )
        capacity = self.fsx_capacity_gib
        if capacity < FSX_MIN_CAPACITY_GIB or (
            capacity != FSX_MIN_CAPACITY_GIB and capacity % FSX_CAPACITY_INCREMENT_GIB
        ):
            problems.append(
                Problem(
                    "storageCapacityGib",
                    capacity,
                    f"{self.fsx_deployment_type} SSD needs {FSX_MIN_CAPACITY_GIB} GiB or a "
                    f"multiple of {FSX_CAPACITY_INCREMENT_GIB} GiB (minimum "
                    f"{FSX_MIN_CAPACITY_GIB})",
                )
            )
        for key in ("import_events", "export_events"):
            events = getattr(self, key) or []
            if len(set(events)) != len(events):
                problems.append(Problem(to_camel(key), events, "must not repeat an event"))
        return problems


class StorageConfig(Model):
    """S3 buckets for checkpoints, datasets and artifacts, and the RWX shared file system."""

    #: Bucket names are `{prefix}-{role}-{account id}`; defaults to the cluster name.
    bucket_prefix: (
        Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]*[a-z0-9]$")] | None
    ) = None
    #: `protect` + `retainOnDelete` on buckets, the KMS key and the file system: a
    #: `pulumi destroy` or a refactor that drops them leaves the data (docs/storage.md).
    protect_data: bool = True
    #: Server access logs of the data buckets into a dedicated log bucket.
    access_logging: bool = True
    kms_deletion_window_days: Annotated[int, Field(ge=7, le=30)] = 30
    lifecycle: BucketLifecycle = Field(default_factory=BucketLifecycle)
    rwx: RwxConfig = Field(default_factory=RwxConfig)
    #: Requested size of a team's checkpoint PVC (EFS ignores it; Lustre PVs report it).
    team_checkpoint_size: Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]*(Gi|Ti)$")] = "1Ti"
    efs_csi_chart_version: str = "4.4.1"
    fsx_csi_chart_version: str = "1.17.0"
    #: FSx only: the image of the one-shot Job that creates each team's `/teams/<team>` on Lustre
    #: owned by the trainer's UID (sh, mkdir, chown, stat; docs/storage.md). Unset: the trainer
    #: image (`training.defaultImage`, else the digest the deploy built, pushed and signed:
    #: docs/images.md); set it only to run another image, pinned by digest.
    fsx_team_dirs_image: DigestImage | None = None

    @model_validator(mode="after")
    def _check(self) -> StorageConfig:
        problems: list[Problem] = []
        if self.bucket_prefix is not None and len(self.bucket_prefix) > BUCKET_PREFIX_MAX:
            problems.append(
                Problem(
                    "bucketPrefix",
                    self.bucket_prefix,
                    f"at most {BUCKET_PREFIX_MAX} characters (S3 names are <= 63)",
                )
            )
        if problems:
            raise problems_error(problems)
        return self
