"""Storage: S3 buckets for checkpoints, datasets and artifacts; the RWX shared file system.

Owns the customer-managed KMS key of the data, the three data buckets (SSE-KMS with bucket
keys, versioning, all public-access blocks, BucketOwnerEnforced, TLS-only policy, lifecycle,
access logging into a log bucket), the shared ReadWriteMany file system (EFS with a mount target
per private subnet, or FSx for Lustre linked to the datasets bucket), its CSI driver (Helm, IAM
through Pod Identity), the StorageClass and per-team volumes; builders in `storage_builders`.

Why this module is long: one component owns the data key, the buckets and both RWX backends
(EFS, FSx for Lustre), one small method per group of resources; what is pure (policies, chart
values, specs) is already in `storage_builders`, the per-team objects in `team_volumes`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import addons, catalog
from components.addons import Addon
from components.analysis.readiness import system_pull_rate
from components.config import StorageConfig
from components.platform.addons import helm_release
from components.platform.cluster import iam
from components.platform.cluster.handles import ClusterHandles, NetworkHandles
from components.platform.cluster.iam import AwsAccount
from components.platform.storage.fsx_team_dirs import team_dirs_deadline_s
from components.platform.storage.storage_builders import (
    BUCKET_ROLES,
    EFS_CONTROLLER_SA,
    EFS_STORAGE_CLASS,
    FSX_CONTROLLER_SA,
    FSX_STORAGE_CLASS,
    LOG_BUCKET_ROLE,
    LUSTRE_PORTS,
    NFS_PORT,
    LustreVolume,
    RwxType,
    bucket_policy,
    efs_csi_policy,
    efs_csi_values,
    efs_storage_class,
    fsx_csi_policy,
    fsx_csi_values,
    fsx_storage_class,
    kms_key_policy,
    lifecycle_rules,
    log_bucket_policy,
    log_lifecycle_rules,
)
from components.platform.storage.team_volumes import (
    create_fsx_admin,
    create_team_dirs_job,
    create_team_volumes,
)
from components.resource_options import child_options

if TYPE_CHECKING:
    from components.config import StackConfig


# --- the component --------------------------------------------------------------------------


@dataclass(frozen=True)
class StorageArgs:
    """Inputs of the Storage component."""

    #: Account, region and partition of the deployment (looked up once).
    aws_account: AwsAccount

    config: StorageConfig
    #: `{prefix}-{role}-{account id}` bucket names (config: storage.bucketPrefix or cluster name).
    bucket_prefix: str
    vpc_id: pulumi.Input[str]
    private_subnet_ids: list[pulumi.Output[str]]
    #: Physical EKS cluster name (carries the control plane as a dependency).
    cluster_name: pulumi.Input[str]
    #: The literal cluster name the CSI controller roles' trust is pinned to.
    physical_cluster_name: str
    #: The nodes' security group: the only source allowed to reach the file system.
    node_security_group_id: pulumi.Input[str]
    k8s_provider: k8s.Provider
    #: The CSI controllers are scheduled on system nodes: install after they exist.
    system_node_group: pulumi.Resource
    #: Cost-allocation tags for every taggable resource.
    tags: dict[str, str]
    #: Team names: each gets a directory on an FSx file system (fsx_team_dirs).
    teams: tuple[str, ...] = ()
    #: The FSx team-directory Job's image (fsx_team_dirs_image, or the trainer's pushed digest).
    team_dirs_image: pulumi.Input[str] = ""
    #: Its `activeDeadlineSeconds` (fsx_team_dirs.team_dirs_deadline_s of that image's size).
    team_dirs_deadline_s: int = 0

    @classmethod
    def of(
        cls,
        cfg: StackConfig,
        network: NetworkHandles,
        cluster: ClusterHandles,
        aws_account: AwsAccount,
        tags: dict[str, str],
        *,
        trainer_image: pulumi.Input[str] | None = None,
    ) -> StorageArgs:
        """This component's slice of the stack config, the network and the cluster; the
        trainer's pinned reference (the FSx team-directory Job's image by default)."""
        return cls(
            aws_account=aws_account,
            config=cfg.storage,
            bucket_prefix=cfg.bucket_prefix,
            vpc_id=network.vpc_id,
            private_subnet_ids=network.private_subnet_ids,
            cluster_name=cluster.name,
            physical_cluster_name=cluster.physical_name,
            node_security_group_id=cluster.node_security_group_id,
            k8s_provider=cluster.k8s_provider,
            system_node_group=cluster.system_node_group,
            tags=tags,
            teams=tuple(team.name for team in cfg.teams),
            team_dirs_image=cfg.fsx_team_dirs_image or trainer_image or "",
            # The trainer's size (`training.imageSizeGib`) pulled onto a system node; an image
            # given by `storage.fsxTeamDirsImage` is sized the same (no size of its own is known).
            team_dirs_deadline_s=team_dirs_deadline_s(
                cfg.training.image_size_gib, system_pull_rate().mibps
            ),
        )


class Storage(pulumi.ComponentResource):
    """Encrypted, versioned, TLS-only S3 buckets and the RWX file system with its CSI driver."""

    kms_key_arn: pulumi.Output[str]
    buckets: dict[str, aws.s3.Bucket]
    log_bucket: aws.s3.Bucket | None
    rwx_type: RwxType
    file_system_id: pulumi.Output[str]
    storage_class_name: str

    def __init__(
        self, name: str, args: StorageArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:storage:Storage", name, None, opts)
        self._name = name
        self._args = args
        config = args.config
        # Deliberate: protect stops `pulumi destroy`/a refactor from deleting the data;
        # retain_on_delete leaves it in AWS even if protection is lifted (docs/storage.md).
        keep = child_options(
            self, protect=config.protect_data, retain_on_delete=config.protect_data
        )
        account_id = args.aws_account.account_id
        region = args.aws_account.region
        self.rwx_type = config.rwx.type

        key = self._data_key(keep)
        self.kms_key_arn = key.arn

        self.buckets = {
            role: self._data_bucket(role, key, account_id, keep) for role in BUCKET_ROLES
        }
        self.log_bucket = None
        if config.access_logging:
            self.log_bucket = self._access_logging(key, account_id, keep)

        #: The namespace and root claim the team-directory Jobs need (FSx only).
        self._fsx_admin: list[pulumi.Resource] = []
        self._team_dirs_job: pulumi.Resource | None = None
        if config.rwx.type == "efs":
            self._efs(key, region, account_id, keep)
        else:
            self._fsx(key, region, keep)

        self.register_outputs(
            {
                "buckets": {role: bucket.bucket for role, bucket in self.buckets.items()},
                "fileSystemId": self.file_system_id,
                "storageClass": self.storage_class_name,
            }
        )

    def _data_key(self, keep: pulumi.ResourceOptions) -> aws.kms.Key:
        """The customer-managed key of every bucket and the file system, and its alias."""
        name, args, config = self._name, self._args, self._args.config
        key = aws.kms.Key(
            f"{name}-data",
            description=f"SSE-KMS for {args.bucket_prefix} checkpoints, datasets, artifacts, RWX",
            enable_key_rotation=True,
            deletion_window_in_days=config.kms_deletion_window_days,
            policy=json.dumps(
                kms_key_policy(
                    args.aws_account.account_id,
                    args.aws_account.region,
                    fsx_data_repository=config.rwx.type == "fsx",
                    access_logging=config.access_logging,
                )
            ),
            tags=args.tags,
            opts=keep,
        )
        aws.kms.Alias(
            f"{name}-data",
            name=f"alias/{args.bucket_prefix}-storage",
            target_key_id=key.key_id,
            opts=child_options(self),
        )
        return key

    def _access_logging(
        self, key: aws.kms.Key, account_id: str, keep: pulumi.ResourceOptions
    ) -> aws.s3.Bucket:
        """The log bucket and each data bucket's server access logging into it."""
        log_bucket = self._log_bucket(key, account_id, keep)
        for role, bucket in self.buckets.items():
            aws.s3.BucketLogging(
                f"{self._name}-{role}",
                bucket=bucket.id,
                target_bucket=log_bucket.id,
                target_prefix=f"{role}/",
                opts=child_options(self),
            )
        return log_bucket

    # --- S3 ---------------------------------------------------------------------------------

    def _bucket(
        self,
        role: str,
        account_id: str,
        keep: pulumi.ResourceOptions,
    ) -> tuple[aws.s3.Bucket, aws.s3.BucketPublicAccessBlock, aws.s3.BucketVersioning]:
        """A bucket with versioning, ownership enforced and every public-access block on."""
        name, config = self._name, self._args.config
        bucket = aws.s3.Bucket(
            f"{name}-{role}",
            bucket=catalog.bucket_name(self._args.bucket_prefix, role, account_id),
            # Dev may be torn down with its contents; prod buckets never are.
            force_destroy=not config.protect_data,
            tags={**self._args.tags, f"{catalog.LABEL_DOMAIN}/bucket-role": role},
            opts=keep,
        )
        child = child_options(self)
        aws.s3.BucketOwnershipControls(
            f"{name}-{role}",
            bucket=bucket.id,
            rule={"object_ownership": "BucketOwnerEnforced"},
            opts=child,
        )
        public_access = aws.s3.BucketPublicAccessBlock(
            f"{name}-{role}",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        versioning = aws.s3.BucketVersioning(
            f"{name}-{role}",
            bucket=bucket.id,
            versioning_configuration={"status": "Enabled"},
            opts=child,
        )
        return bucket, public_access, versioning

    def _data_bucket(
        self, role: str, key: aws.kms.Key, account_id: str, keep: pulumi.ResourceOptions
    ) -> aws.s3.Bucket:
        name = self._name
        bucket, public_access, versioning = self._bucket(role, account_id, keep)
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-{role}",
            bucket=bucket.id,
            rules=[
                {
                    "apply_server_side_encryption_by_default": {
                        "sse_algorithm": "aws:kms",
                        "kms_master_key_id": key.arn,
                    },
                    # One data key per bucket instead of a KMS call per object: far fewer
                    # KMS requests (and dollars) for millions of shard files.
                    "bucket_key_enabled": True,
                }
            ],
            opts=child_options(self),
        )
        aws.s3.BucketPolicy(
            f"{name}-{role}",
            bucket=bucket.id,
            policy=bucket.arn.apply(lambda arn: json.dumps(bucket_policy(arn))),
            opts=child_options(self, depends_on=[public_access]),
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-{role}",
            bucket=bucket.id,
            rules=cast(Any, lifecycle_rules(self._args.config.lifecycle, role=role)),
            # Noncurrent-version rules only mean something once versioning is on.
            opts=child_options(self, depends_on=[versioning]),
        )
        return bucket

    def _log_bucket(
        self, key: aws.kms.Key, account_id: str, keep: pulumi.ResourceOptions
    ) -> aws.s3.Bucket:
        """Server access logs land here, SSE-KMS with the storage key (its key policy admits
        S3 log delivery; the AWS managed aws/s3 key would not work for log delivery)."""
        name = self._name
        bucket, public_access, versioning = self._bucket(LOG_BUCKET_ROLE, account_id, keep)
        child = child_options(self)
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-{LOG_BUCKET_ROLE}",
            bucket=bucket.id,
            rules=[
                {
                    "apply_server_side_encryption_by_default": {
                        "sse_algorithm": "aws:kms",
                        "kms_master_key_id": key.arn,
                    },
                    "bucket_key_enabled": True,
                }
            ],
            opts=child,
        )
        sources = [bucket_.arn for bucket_ in self.buckets.values()]
        aws.s3.BucketPolicy(
            f"{name}-{LOG_BUCKET_ROLE}",
            bucket=bucket.id,
            policy=pulumi.Output.all(bucket.arn, *sources).apply(
                lambda arns: json.dumps(log_bucket_policy(arns[0], list(arns[1:]), account_id))
            ),
            opts=child_options(self, depends_on=[public_access]),
        )
        aws.s3.BucketLifecycleConfiguration(
            f"{name}-{LOG_BUCKET_ROLE}",
            bucket=bucket.id,
            rules=cast(Any, log_lifecycle_rules(self._args.config.lifecycle)),
            opts=child_options(self, depends_on=[versioning]),
        )
        return bucket

    # --- RWX file systems -------------------------------------------------------------------

    def _csi_role(
        self, driver: str, addon: Addon, service_account: str, policy: pulumi.Input[str]
    ) -> aws.eks.PodIdentityAssociation:
        """An IAM role for one CSI controller service account (in `addon`'s namespace), handed
        out by Pod Identity."""
        name, args = self._name, self._args
        child = child_options(self)
        account_id = self._args.aws_account.account_id
        role = iam.pod_identity_role(
            f"{name}-{driver}-csi",
            account_id=account_id,
            cluster_name=args.physical_cluster_name,
            namespace=addon.namespace,
            service_account=service_account,
            tags=args.tags,
            opts=child,
        )
        aws.iam.RolePolicy(f"{name}-{driver}-csi", role=role.id, policy=policy, opts=child)
        return aws.eks.PodIdentityAssociation(
            f"{name}-{driver}-csi",
            cluster_name=args.cluster_name,
            namespace=addon.namespace,
            service_account=service_account,
            role_arn=role.arn,
            tags=args.tags,
            opts=child,
        )

    def _security_group(self, purpose: str) -> aws.ec2.SecurityGroup:
        return aws.ec2.SecurityGroup(
            f"{self._name}-{purpose}",
            vpc_id=self._args.vpc_id,
            description=f"{purpose}: reachable from the cluster's nodes only",
            tags={**self._args.tags, "Name": f"{self._args.bucket_prefix}-{purpose}"},
            opts=child_options(self),
        )

    def _efs(
        self, key: aws.kms.Key, region: str, account_id: str, keep: pulumi.ResourceOptions
    ) -> None:
        """The EFS file system, reachable from every AZ, its CSI driver and StorageClass."""
        name, args = self._name, self._args
        file_system = self._efs_file_system(key, keep)
        self._efs_mount_targets(file_system)
        association = self._csi_role(
            "efs",
            addons.EFS_CSI_DRIVER,
            EFS_CONTROLLER_SA,
            file_system.arn.apply(lambda arn: json.dumps(efs_csi_policy(arn, region, account_id))),
        )
        release = self._csi_driver(
            "efs",
            addon=addons.EFS_CSI_DRIVER,
            version=args.config.efs_csi_chart_version,
            values=efs_csi_values(),
            association=association,
        )
        spec = file_system.id.apply(efs_storage_class)
        k8s.storage.v1.StorageClass(
            f"{name}-{EFS_STORAGE_CLASS}",
            metadata={"name": EFS_STORAGE_CLASS},
            provisioner=spec["provisioner"],
            parameters=spec["parameters"],
            reclaim_policy=spec["reclaimPolicy"],
            volume_binding_mode=spec["volumeBindingMode"],
            opts=child_options(self, provider=args.k8s_provider, depends_on=[release]),
        )
        self.file_system_id = file_system.id
        self.storage_class_name = EFS_STORAGE_CLASS
        self._lustre: pulumi.Output[LustreVolume] | None = None

    def _efs_file_system(
        self, key: aws.kms.Key, keep: pulumi.ResourceOptions
    ) -> aws.efs.FileSystem:
        """The encrypted file system (kept like the buckets) and its backup policy."""
        name, args, rwx = self._name, self._args, self._args.config.rwx
        file_system = aws.efs.FileSystem(
            f"{name}-efs",
            encrypted=True,
            kms_key_id=key.arn,
            performance_mode="generalPurpose",
            throughput_mode=rwx.efs_throughput_mode,
            provisioned_throughput_in_mibps=rwx.provisioned_throughput_mibps,
            tags={**args.tags, "Name": f"{args.bucket_prefix}-rwx"},
            opts=keep,
        )
        aws.efs.BackupPolicy(
            f"{name}-efs",
            file_system_id=file_system.id,
            backup_policy={"status": "ENABLED" if args.config.protect_data else "DISABLED"},
            opts=child_options(self),
        )
        return file_system

    def _efs_mount_targets(self, file_system: aws.efs.FileSystem) -> None:
        """A security group that admits NFS from the nodes, and the mount targets behind it."""
        name, args = self._name, self._args
        child = child_options(self)
        group = self._security_group("efs")
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-efs-nfs-from-nodes",
            security_group_id=group.id,
            referenced_security_group_id=args.node_security_group_id,
            ip_protocol="tcp",
            from_port=NFS_PORT,
            to_port=NFS_PORT,
            description="NFS from the cluster's nodes",
            opts=child,
        )
        # One mount target per private subnet: pods in every AZ mount locally.
        for index, subnet_id in enumerate(args.private_subnet_ids):
            aws.efs.MountTarget(
                f"{name}-efs-{index}",
                file_system_id=file_system.id,
                subnet_id=subnet_id,
                security_groups=[group.id],
                opts=child,
            )

    def _csi_driver(
        self,
        driver: str,
        *,
        addon: Addon,
        version: str,
        values: dict[str, Any],
        association: aws.eks.PodIdentityAssociation,
    ) -> k8s.helm.v3.Release:
        """The `aws-<driver>-csi-driver` chart, once its controller's identity and nodes exist."""
        args = self._args
        return helm_release(
            f"{self._name}-{driver}-csi",
            addon,
            version=version,
            values=values,
            opts=child_options(
                self,
                provider=args.k8s_provider,
                depends_on=[association, args.system_node_group],
            ),
        )

    def _lustre_security_group(self) -> aws.ec2.SecurityGroup:
        """The file system's security group and the Lustre ports (LUSTRE_PORTS) between it and
        the nodes: clients reach the servers, the servers reach each other and call clients
        back."""
        name, args = self._name, self._args
        child = child_options(self)
        group = self._security_group("lustre")
        nodes = args.node_security_group_id
        for low, high in LUSTRE_PORTS:
            ports = f"{low}" if low == high else f"{low}-{high}"
            # Clients reach the servers, the servers reach each other and call clients back.
            rules: list[tuple[str, str, pulumi.Input[str], pulumi.Input[str], str]] = [
                ("ingress", "from-nodes", group.id, nodes, "from the cluster's nodes"),
                ("ingress", "from-self", group.id, group.id, "between file servers"),
                ("egress", "to-self", group.id, group.id, "between file servers"),
                ("egress", "to-nodes", group.id, nodes, "to the cluster's nodes"),
            ]
            for direction, role, owner, peer, why in rules:
                rule_type = (
                    aws.vpc.SecurityGroupIngressRule
                    if direction == "ingress"
                    else aws.vpc.SecurityGroupEgressRule
                )
                rule_type(
                    f"{name}-lustre-{ports}-{role}",
                    security_group_id=owner,
                    referenced_security_group_id=peer,
                    ip_protocol="tcp",
                    from_port=low,
                    to_port=high,
                    description=f"Lustre {ports} {why}",
                    opts=child,
                )
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-nodes-lustre-{ports}",
                security_group_id=nodes,
                referenced_security_group_id=group.id,
                ip_protocol="tcp",
                from_port=low,
                to_port=high,
                description=f"Lustre {ports} from the file system",
                opts=child,
            )
        return group

    def _datasets_link(self, file_system: aws.fsx.LustreFileSystem) -> None:
        """The datasets bucket linked into the file system (lazy import on first read; export
        only when configured)."""
        name, args, rwx = self._name, self._args, self._args.config.rwx
        child = child_options(self)
        datasets = self.buckets["datasets"]
        s3_policy: dict[str, Any] = {
            "auto_import_policy": {"events": rwx.fsx_import_events},
        }
        if rwx.fsx_export_events:
            s3_policy["auto_export_policy"] = {"events": rwx.fsx_export_events}
        aws.fsx.DataRepositoryAssociation(
            f"{name}-lustre-datasets",
            file_system_id=file_system.id,
            file_system_path=rwx.fsx_datasets_path,
            data_repository_path=datasets.bucket.apply(lambda bucket: f"s3://{bucket}"),
            batch_import_meta_data_on_create=True,
            # Unlinking must never delete what the file system holds.
            delete_data_in_filesystem=False,
            s3=cast(Any, s3_policy),
            tags=args.tags,
            opts=child,
        )

    def _fsx(self, key: aws.kms.Key, region: str, keep: pulumi.ResourceOptions) -> None:
        """FSx for Lustre linked to the datasets bucket, its CSI driver and StorageClass, and
        what the team-directory Jobs need."""
        name, args, rwx = self._name, self._args, self._args.config.rwx
        file_system = self._lustre_file_system(key, keep)
        self._datasets_link(file_system)
        association = self._csi_role(
            "fsx",
            addons.FSX_CSI_DRIVER,
            FSX_CONTROLLER_SA,
            file_system.arn.apply(lambda arn: json.dumps(fsx_csi_policy(arn))),
        )
        release = self._csi_driver(
            "fsx",
            addon=addons.FSX_CSI_DRIVER,
            version=args.config.fsx_csi_chart_version,
            values=fsx_csi_values(region),
            association=association,
        )
        spec = fsx_storage_class()
        k8s.storage.v1.StorageClass(
            f"{name}-{FSX_STORAGE_CLASS}",
            metadata=spec["metadata"],
            provisioner=spec["provisioner"],
            reclaim_policy=spec["reclaimPolicy"],
            volume_binding_mode=spec["volumeBindingMode"],
            opts=child_options(self, provider=args.k8s_provider, depends_on=[release]),
        )
        self.file_system_id = file_system.id
        self.storage_class_name = FSX_STORAGE_CLASS
        self._lustre = pulumi.Output.all(
            file_system.id, file_system.dns_name, file_system.mount_name
        ).apply(
            lambda values: LustreVolume(
                file_system_id=values[0],
                dns_name=values[1],
                mount_name=values[2],
                datasets_path=rwx.fsx_datasets_path,
            )
        )
        # The platform namespace and root claim of the team-directory Jobs, after the driver.
        self._fsx_admin = create_fsx_admin(
            name,
            self._lustre,
            capacity=f"{rwx.fsx_capacity_gib}Gi",
            opts=child_options(self, provider=args.k8s_provider, depends_on=[release]),
        )

    def _lustre_file_system(
        self, key: aws.kms.Key, keep: pulumi.ResourceOptions
    ) -> aws.fsx.LustreFileSystem:
        """The Lustre file system (kept like the buckets) behind its own security group."""
        name, args, rwx = self._name, self._args, self._args.config.rwx
        group = self._lustre_security_group()
        return aws.fsx.LustreFileSystem(
            f"{name}-lustre",
            deployment_type=rwx.fsx_deployment_type,
            storage_type="SSD",
            storage_capacity=rwx.fsx_capacity_gib,
            per_unit_storage_throughput=rwx.fsx_throughput,
            # Lustre lives in one AZ: GPU nodes in the same AZ avoid cross-AZ traffic.
            subnet_ids=args.private_subnet_ids[rwx.fsx_subnet_index],
            security_group_ids=[group.id],
            kms_key_id=key.arn,
            file_system_type_version="2.15",
            data_compression_type=rwx.data_compression or "LZ4",
            automatic_backup_retention_days=rwx.automatic_backup_retention_days or 0,
            copy_tags_to_backups=True,
            log_configuration={"level": "WARN_ERROR"},
            tags={**args.tags, "Name": f"{args.bucket_prefix}-rwx"},
            opts=keep,
        )

    # --- per team ---------------------------------------------------------------------------

    def team_volumes(
        self,
        team: str,
        namespace: str,
        *,
        datasets: bool = True,
        depends_on: list[pulumi.Resource] | None = None,
    ) -> list[pulumi.CustomResource]:
        """Create a team's checkpoint PVC (and datasets PVC) in its namespace, after the
        namespace (`depends_on`); children of this component on the cluster's provider. On FSx
        the first call also creates the one Job that makes every team's directory, after that
        first team (whose Team component waits for the Kueue webhook a batch Job must pass)."""
        child = child_options(self, provider=self._args.k8s_provider, depends_on=depends_on or [])
        if self.rwx_type == "fsx" and self._team_dirs_job is None:
            self._team_dirs_job = create_team_dirs_job(
                self._name,
                teams=list(self._args.teams),
                image=self._args.team_dirs_image,
                deadline_s=self._args.team_dirs_deadline_s,
                opts=pulumi.ResourceOptions.merge(
                    child, pulumi.ResourceOptions(depends_on=self._fsx_admin)
                ),
            )
        return create_team_volumes(
            f"{self._name}-{team}",
            team=team,
            namespace=namespace,
            rwx=self.rwx_type,
            checkpoint_size=self._args.config.team_checkpoint_size,
            datasets=datasets,
            lustre=self._lustre,
            directories=[self._team_dirs_job] if self._team_dirs_job is not None else [],
            opts=child,
        )
