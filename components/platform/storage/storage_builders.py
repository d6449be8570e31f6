"""Pure builders of the storage layer: bucket, key and CSI IAM documents, lifecycle rules, CSI
chart values, StorageClasses and per-team volumes. Functions from config to dicts, tested
without Pulumi; `components.platform.storage.storage` turns them into resources."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final, Literal

from components import catalog
from components.analysis import storage as analysis_storage
from components.config import BucketLifecycle

if TYPE_CHECKING:
    pass


BUCKET_ROLES: Final = catalog.DATA_BUCKET_PURPOSES
LOG_BUCKET_ROLE: Final = "access-logs"
EFS_CONTROLLER_SA: Final = "efs-csi-controller-sa"
FSX_CONTROLLER_SA: Final = "fsx-csi-controller-sa"
EFS_STORAGE_CLASS: Final = analysis_storage.EFS_STORAGE_CLASS
FSX_STORAGE_CLASS: Final = analysis_storage.FSX_STORAGE_CLASS
NFS_PORT: Final = 2049
#: Lustre: 988 for LNet, 1018-1023 for the reserved client ports (FSx for Lustre user guide).
LUSTRE_PORTS: Final = ((988, 988), (1018, 1023))
#: Access points get this POSIX identity: a re-created PVC reaches its old directory again.
EFS_POSIX_ID: Final = "1000"
FSX_S3_SERVICE_ROLE: Final = (
    "role/aws-service-role/s3.data-source.lustre.fsx.amazonaws.com/AWSServiceRoleForFSxS3Access_*"
)

RwxType = Literal["efs", "fsx"]

#: FSx for Lustre team directories. A new file system's root belongs to root (only root may
#: create in it), and neither Kubernetes nor the CSI driver can hand a directory to the trainer:
#: the driver's CSIDriver keeps the chart's `fsGroupPolicy: ReadWriteOnceWithFSType`
#: (kubernetes-sigs/aws-fsx-csi-driver@helm-chart-aws-fsx-csi-driver-1.17.0:charts/
#: aws-fsx-csi-driver/values.yaml#L10-11), so the kubelet applies no fsGroup to these RWX volumes
#: without fsType, and `File` would chown recursively on mounts from many nodes at once (the
#: chart's CHANGELOG warns of deadlocks); the driver has no dynamic directory provisioning (a
#: PVC is a whole new file system) and NodePublishVolume only mounts `<dnsname>@tcp:/<mountname>`
#: (driver v1.9.0: pkg/driver/node.go#L107-119). So a platform Job creates `/teams/<team>` owned
#: by the trainer's UID/GID, mode 0770, once per team, and the team's PV mounts that
#: subdirectory (Lustre mounts a subdirectory by path, as the datasets PV already does).
FSX_TEAMS_DIR: Final = "/teams"


# --- names and documents --------------------------------------------------------------------


def _deny_insecure_transport(bucket_arn: str) -> list[dict[str, Any]]:
    resources = [bucket_arn, f"{bucket_arn}/*"]
    return [
        {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": resources,
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        },
        {
            "Sid": "DenyOutdatedTls",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": resources,
            "Condition": {"NumericLessThan": {"s3:TlsVersion": "1.2"}},
        },
    ]


def bucket_policy(bucket_arn: str) -> dict[str, Any]:
    """Data bucket policy: no request without TLS 1.2+. Access itself is granted by IAM."""
    return {"Version": "2012-10-17", "Statement": _deny_insecure_transport(bucket_arn)}


def log_bucket_policy(
    bucket_arn: str, source_bucket_arns: list[str], account_id: str
) -> dict[str, Any]:
    """Log bucket policy: TLS only, and the S3 logging service may write for our buckets only.

    With BucketOwnerEnforced, ACL grants are ignored: log delivery needs this policy instead.
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            *_deny_insecure_transport(bucket_arn),
            {
                "Sid": "AllowServerAccessLogDelivery",
                "Effect": "Allow",
                "Principal": {"Service": "logging.s3.amazonaws.com"},
                "Action": "s3:PutObject",
                "Resource": f"{bucket_arn}/*",
                "Condition": {
                    "ArnLike": {"aws:SourceArn": sorted(source_bucket_arns)},
                    "StringEquals": {"aws:SourceAccount": account_id},
                },
            },
        ],
    }


def lifecycle_rules(lifecycle: BucketLifecycle, *, role: str) -> list[dict[str, Any]]:
    """Lifecycle rules of a data bucket (pulumi-aws `BucketLifecycleConfiguration.rules`)."""
    rules: list[dict[str, Any]] = [
        {
            "id": "abort-incomplete-multipart-uploads",
            "status": "Enabled",
            "filter": {},
            "abort_incomplete_multipart_upload": {
                "days_after_initiation": lifecycle.abort_incomplete_multipart_days
            },
        },
        {
            "id": "expire-noncurrent-versions",
            "status": "Enabled",
            "filter": {},
            "noncurrent_version_expiration": {
                "noncurrent_days": lifecycle.noncurrent_version_expiration_days
            },
            # Delete markers left alone once their last noncurrent version expired.
            "expiration": {"expired_object_delete_marker": True},
        },
    ]
    if role == "checkpoints" and lifecycle.checkpoint_transition_days is not None:
        rules.append(
            {
                "id": "transition-old-checkpoints",
                "status": "Enabled",
                "filter": {},
                "transitions": [
                    {
                        "days": lifecycle.checkpoint_transition_days,
                        "storage_class": lifecycle.checkpoint_transition_class,
                    }
                ],
            }
        )
    return rules


def log_lifecycle_rules(lifecycle: BucketLifecycle) -> list[dict[str, Any]]:
    """The log bucket keeps access logs for a fixed time, old versions for the usual time."""
    return [
        {
            "id": "expire-access-logs",
            "status": "Enabled",
            "filter": {},
            "expiration": {"days": lifecycle.access_log_expiration_days},
            "noncurrent_version_expiration": {
                "noncurrent_days": lifecycle.noncurrent_version_expiration_days
            },
            "abort_incomplete_multipart_upload": {
                "days_after_initiation": lifecycle.abort_incomplete_multipart_days
            },
        }
    ]


def kms_key_policy(
    account_id: str, region: str, *, fsx_data_repository: bool, access_logging: bool = False
) -> dict[str, Any]:
    """Key policy of the storage key: the account administers it through IAM (AWS's default
    statement); with FSx, the per-file-system S3 service-linked role may use it through S3 for
    the data repository association (its name carries the file-system id, hence the pattern);
    with access logging, S3's log delivery may encrypt log objects with it (SSE-KMS log targets
    need a customer managed key whose policy admits `logging.s3.amazonaws.com`)."""
    statements: list[dict[str, Any]] = [
        {
            "Sid": "AccountAdministersThroughIam",
            "Effect": "Allow",
            "Principal": {"AWS": f"arn:aws:iam::{account_id}:root"},
            "Action": "kms:*",
            "Resource": "*",
        }
    ]
    if fsx_data_repository:
        statements.append(_fsx_data_repository_statement(account_id, region))
    if access_logging:
        statements.append(_log_delivery_statement(account_id))
    return {"Version": "2012-10-17", "Statement": statements}


def _fsx_data_repository_statement(account_id: str, region: str) -> dict[str, Any]:
    """FSx's per-file-system S3 role may use the key, only through S3 of this account."""
    return {
        "Sid": "FsxDataRepositoryThroughS3",
        "Effect": "Allow",
        "Principal": {"AWS": "*"},
        "Action": [
            "kms:Encrypt",
            "kms:Decrypt",
            "kms:ReEncrypt*",
            "kms:GenerateDataKey*",
            "kms:DescribeKey",
        ],
        "Resource": "*",
        "Condition": {
            "ArnLike": {"aws:PrincipalArn": f"arn:aws:iam::{account_id}:{FSX_S3_SERVICE_ROLE}"},
            "StringEquals": {
                "kms:CallerAccount": account_id,
                "kms:ViaService": f"s3.{region}.amazonaws.com",
            },
        },
    }


def _log_delivery_statement(account_id: str) -> dict[str, Any]:
    """S3 log delivery may encrypt this account's access-log objects with the key."""
    return {
        "Sid": "S3LogDeliveryEncrypts",
        "Effect": "Allow",
        "Principal": {"Service": "logging.s3.amazonaws.com"},
        "Action": ["kms:GenerateDataKey", "kms:Decrypt"],
        "Resource": "*",
        "Condition": {"StringEquals": {"aws:SourceAccount": account_id}},
    }


def efs_csi_policy(file_system_arn: str, region: str, account_id: str) -> dict[str, Any]:
    """EFS CSI controller: access points on this one file system, and only ones it tagged.

    The AWS managed AmazonEFSCSIDriverPolicy grants the same actions on every file system of
    the account; this keeps the tag conditions and narrows the resource to ours.
    """
    access_points = f"arn:aws:elasticfilesystem:{region}:{account_id}:access-point/*"
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "Describe",
                "Effect": "Allow",
                "Action": [
                    "elasticfilesystem:DescribeAccessPoints",
                    "elasticfilesystem:DescribeFileSystems",
                    "elasticfilesystem:DescribeMountTargets",
                ],
                "Resource": [file_system_arn, access_points],
            },
            {
                "Sid": "DescribeZones",
                "Effect": "Allow",
                "Action": "ec2:DescribeAvailabilityZones",
                "Resource": "*",
            },
            {
                "Sid": "CreateTaggedAccessPoints",
                "Effect": "Allow",
                "Action": ["elasticfilesystem:CreateAccessPoint", "elasticfilesystem:TagResource"],
                "Resource": [file_system_arn, access_points],
                "Condition": {"StringLike": {"aws:RequestTag/efs.csi.aws.com/cluster": "true"}},
            },
            {
                "Sid": "DeleteOwnAccessPoints",
                "Effect": "Allow",
                "Action": "elasticfilesystem:DeleteAccessPoint",
                "Resource": access_points,
                "Condition": {"StringEquals": {"aws:ResourceTag/efs.csi.aws.com/cluster": "true"}},
            },
        ],
    }


def fsx_csi_policy(file_system_arn: str) -> dict[str, Any]:
    """FSx CSI controller with static volumes only: describe, and resize our file system.

    No fsx:CreateFileSystem: dynamic provisioning (a new file system per PVC) is not offered.
    """
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "Describe",
                "Effect": "Allow",
                "Action": "fsx:DescribeFileSystems",
                "Resource": "*",
            },
            {
                "Sid": "ResizeOurFileSystem",
                "Effect": "Allow",
                "Action": "fsx:UpdateFileSystem",
                "Resource": file_system_arn,
            },
        ],
    }


# --- Helm values ----------------------------------------------------------------------------


def efs_csi_values() -> dict[str, Any]:
    """aws-efs-csi-driver chart values: controller on system nodes, node plugin everywhere."""
    return {
        "controller": {
            "serviceAccount": {"create": True, "name": EFS_CONTROLLER_SA},
            "nodeSelector": catalog.system_node_labels(),
            # The data under a released access point stays: checkpoints outlive their PVC.
            "deleteAccessPointRootDir": False,
        },
        # The node plugin must mount on GPU nodes too; the chart default tolerates every taint.
        "node": {"serviceAccount": {"create": True, "name": "efs-csi-node-sa"}},
        # Our StorageClass is a typed resource of this program, not a chart template.
        "storageClasses": [],
    }


def fsx_csi_values(region: str) -> dict[str, Any]:
    """aws-fsx-csi-driver chart values: controller on system nodes, node plugin on GPU nodes."""
    return {
        "controller": {
            "serviceAccount": {"create": True, "name": FSX_CONTROLLER_SA},
            "nodeSelector": catalog.system_node_labels(),
            "region": region,
        },
        "node": {"tolerateAllTaints": True},
    }


# --- Kubernetes objects ---------------------------------------------------------------------


def efs_storage_class(file_system_id: str) -> dict[str, Any]:
    """EFS dynamic provisioning: an access point per PVC rooted at /teams/<namespace>/<pvc>.

    `ensureUniqueDirectory: false` plus a fixed POSIX identity: a PVC deleted and re-created
    under the same name finds its checkpoints again; Retain keeps the PV and access point.
    """
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": EFS_STORAGE_CLASS},
        "provisioner": "efs.csi.aws.com",
        "parameters": {
            "provisioningMode": "efs-ap",
            "fileSystemId": file_system_id,
            "directoryPerms": "700",
            "uid": EFS_POSIX_ID,
            "gid": EFS_POSIX_ID,
            "basePath": "/teams",
            "subPathPattern": "${.PVC.namespace}/${.PVC.name}",
            "ensureUniqueDirectory": "false",
        },
        "reclaimPolicy": "Retain",
        "volumeBindingMode": analysis_storage.VOLUME_BINDING_MODE,
    }


def fsx_storage_class() -> dict[str, Any]:
    """The class static Lustre PVs and their claims bind through (no dynamic provisioning)."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": FSX_STORAGE_CLASS},
        "provisioner": "fsx.csi.aws.com",
        "reclaimPolicy": "Retain",
        "volumeBindingMode": analysis_storage.VOLUME_BINDING_MODE,
    }


@dataclass(frozen=True)
class LustreVolume:
    """What a static PV needs to mount the Lustre file system."""

    file_system_id: str
    dns_name: str
    mount_name: str
    datasets_path: str


def fsx_team_dir(team: str) -> str:
    """A team's checkpoint directory inside the Lustre file system."""
    return f"{FSX_TEAMS_DIR}/{team}"


def team_volume_specs(
    *,
    team: str,
    namespace: str,
    rwx: RwxType,
    checkpoint_size: str,
    datasets: bool,
    lustre: LustreVolume | None = None,
) -> list[dict[str, Any]]:
    """A team's checkpoint PVC (RWX) and, optionally, its read-mostly datasets PVC.

    EFS: dynamic claims on the `efs-rwx` class (an access point each). FSx: static PVs bound
    by name — checkpoints mount the team's `/teams/<team>` (made by
    `fsx_team_dirs.team_dirs_job`; one team cannot see another's checkpoints), datasets the
    S3-linked path read-only.
    """
    labels = {f"{catalog.LABEL_DOMAIN}/team": team}
    objects: list[dict[str, Any]] = []
    claims: list[tuple[str, str]] = [("checkpoints", analysis_storage.CHECKPOINT_ACCESS_MODE)]
    if datasets:
        claims.append(("datasets", "ReadOnlyMany" if rwx == "fsx" else "ReadWriteMany"))
    for role, mode in claims:
        claim_name = f"{team}-{role}"
        claim_labels = {**labels, f"{catalog.LABEL_DOMAIN}/volume": role}
        spec: dict[str, Any] = {
            "accessModes": [mode],
            "resources": {"requests": {"storage": checkpoint_size}},
        }
        if rwx == "efs":
            spec["storageClassName"] = EFS_STORAGE_CLASS
        else:
            if lustre is None:
                raise ValueError("FSx team volumes need the Lustre file system's identity")
            volume = _lustre_team_volume(
                lustre,
                team=team,
                namespace=namespace,
                role=role,
                mode=mode,
                size=checkpoint_size,
                claim=claim_name,
                labels=claim_labels,
            )
            objects.append(volume)
            spec["storageClassName"] = FSX_STORAGE_CLASS
            spec["volumeName"] = volume["metadata"]["name"]
        objects.append(_team_claim(claim_name, namespace, claim_labels, spec))
    return objects


def _team_claim(
    name: str, namespace: str, labels: dict[str, str], spec: dict[str, Any]
) -> dict[str, Any]:
    """The claim a team's pods mount, in the team's namespace."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": spec,
    }


def _lustre_team_volume(
    lustre: LustreVolume,
    *,
    team: str,
    namespace: str,
    role: str,
    mode: str,
    size: str,
    claim: str,
    labels: dict[str, str],
) -> dict[str, Any]:
    """The static PV that team claim `claim` binds to on Lustre: the team's own directory, or
    the datasets path read-only, under a volume id of its own."""
    pv_name = f"{namespace}-{role}"
    mount = f"{lustre.mount_name}{fsx_team_dir(team)}"
    if role == "datasets":
        mount = f"{lustre.mount_name}{lustre.datasets_path}"
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": pv_name, "labels": labels},
        "spec": {
            "capacity": {"storage": size},
            "volumeMode": "Filesystem",
            "accessModes": [mode],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": FSX_STORAGE_CLASS,
            "mountOptions": ["flock", "noatime"] + (["ro"] if mode != "ReadWriteMany" else []),
            # The driver keys mounts by volume id: one id per PV, so a pod may
            # mount both of its team's volumes.
            "csi": {
                "driver": "fsx.csi.aws.com",
                "volumeHandle": f"{lustre.file_system_id}::{namespace}-{role}",
                "volumeAttributes": {"dnsname": lustre.dns_name, "mountname": mount},
            },
            "claimRef": {"namespace": namespace, "name": claim},
        },
    }
