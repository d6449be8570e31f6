"""Storage: pure builders (policies, lifecycle, StorageClasses, team volumes, Helm values), the
component under mocks for both stacks, per-team volumes, and the storage config errors."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
import pytest
import yaml

from components import addons
from components.config import BucketLifecycle
from components.platform.storage import storage_builders, team_volumes
from synth import __main__ as synth_cli
from synth import harness, mocks
from synth.harness import SynthResult
from synth.validate import default_validator
from tests.conftest import SCHEMAS, stack_values
from tests.helm_values import missing_keys

BUCKET = "aws:s3/bucket:Bucket"
SSE = "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
VERSIONING = "aws:s3/bucketVersioning:BucketVersioning"
PUBLIC_BLOCK = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
POLICY = "aws:s3/bucketPolicy:BucketPolicy"
LIFECYCLE = "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration"
OWNERSHIP = "aws:s3/bucketOwnershipControls:BucketOwnershipControls"
RELEASE = "kubernetes:helm.sh/v3:Release"
STORAGE_CLASS = "kubernetes:storage.k8s.io/v1:StorageClass"


# --- pure builders --------------------------------------------------------------------------


def test_bucket_policy_denies_every_request_without_tls() -> None:
    policy = storage_builders.bucket_policy("arn:aws:s3:::b")
    deny = [s for s in policy["Statement"] if s["Effect"] == "Deny"]
    tls = [s for s in deny if s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}]
    assert tls, policy
    assert tls[0]["Principal"] == "*" and tls[0]["Action"] == "s3:*"
    assert tls[0]["Resource"] == ["arn:aws:s3:::b", "arn:aws:s3:::b/*"]
    assert all(s["Effect"] == "Deny" for s in policy["Statement"])


def test_log_bucket_accepts_logs_only_from_our_buckets_and_account() -> None:
    policy = storage_builders.log_bucket_policy(
        "arn:aws:s3:::logs", ["arn:aws:s3:::b", "arn:aws:s3:::a"], "1"
    )
    allow = [s for s in policy["Statement"] if s["Effect"] == "Allow"]
    assert len(allow) == 1
    assert allow[0]["Principal"] == {"Service": "logging.s3.amazonaws.com"}
    assert allow[0]["Action"] == "s3:PutObject"
    assert allow[0]["Condition"]["ArnLike"]["aws:SourceArn"] == ["arn:aws:s3:::a", "arn:aws:s3:::b"]
    assert allow[0]["Condition"]["StringEquals"]["aws:SourceAccount"] == "1"


def test_lifecycle_aborts_uploads_expires_versions_and_moves_only_checkpoints() -> None:
    lifecycle = BucketLifecycle(
        abort_incomplete_multipart_days=3,
        noncurrent_version_expiration_days=14,
        checkpoint_transition_days=90,
        checkpoint_transition_class="GLACIER_IR",
    )
    rules = {r["id"]: r for r in storage_builders.lifecycle_rules(lifecycle, role="checkpoints")}
    assert rules["abort-incomplete-multipart-uploads"]["abort_incomplete_multipart_upload"] == {
        "days_after_initiation": 3
    }
    assert rules["expire-noncurrent-versions"]["noncurrent_version_expiration"] == {
        "noncurrent_days": 14
    }
    assert rules["transition-old-checkpoints"]["transitions"] == [
        {"days": 90, "storage_class": "GLACIER_IR"}
    ]
    datasets = {r["id"] for r in storage_builders.lifecycle_rules(lifecycle, role="datasets")}
    assert "transition-old-checkpoints" not in datasets
    off = BucketLifecycle(checkpoint_transition_days=None)
    assert "transition-old-checkpoints" not in {
        r["id"] for r in storage_builders.lifecycle_rules(off, role="checkpoints")
    }


def test_kms_key_policy_lets_only_the_fsx_s3_role_use_the_key_through_s3() -> None:
    plain = storage_builders.kms_key_policy("111122223333", "us-east-1", fsx_data_repository=False)
    assert [s["Sid"] for s in plain["Statement"]] == ["AccountAdministersThroughIam"]
    fsx = storage_builders.kms_key_policy("111122223333", "us-east-1", fsx_data_repository=True)
    statement = fsx["Statement"][1]
    assert "kms:*" not in statement["Action"]
    assert statement["Condition"]["StringEquals"] == {
        "kms:CallerAccount": "111122223333",
        "kms:ViaService": "s3.us-east-1.amazonaws.com",
    }
    assert statement["Condition"]["ArnLike"]["aws:PrincipalArn"].startswith(
        "arn:aws:iam::111122223333:role/aws-service-role/s3.data-source.lustre.fsx"
    )


def test_efs_csi_policy_is_scoped_to_one_file_system_and_tagged_access_points() -> None:
    arn = "arn:aws:elasticfilesystem:us-east-1:1:file-system/fs-1"
    policy = storage_builders.efs_csi_policy(arn, "us-east-1", "1")
    assert policy["Statement"]
    for statement in policy["Statement"]:
        resources = statement["Resource"]
        resources = resources if isinstance(resources, list) else [resources]
        if statement["Sid"] != "DescribeZones":
            assert "*" not in resources, statement
    by_sid = {s["Sid"]: s for s in policy["Statement"]}
    assert by_sid["DescribeZones"]["Action"] == "ec2:DescribeAvailabilityZones"
    assert "aws:RequestTag/efs.csi.aws.com/cluster" in str(by_sid["CreateTaggedAccessPoints"])
    assert "aws:ResourceTag/efs.csi.aws.com/cluster" in str(by_sid["DeleteOwnAccessPoints"])


def test_fsx_csi_policy_cannot_create_file_systems() -> None:
    policy = storage_builders.fsx_csi_policy("arn:aws:fsx:us-east-1:1:file-system/fs-1")
    actions = {s["Action"] for s in policy["Statement"]}
    assert actions == {"fsx:DescribeFileSystems", "fsx:UpdateFileSystem"}
    update = next(s for s in policy["Statement"] if s["Action"] == "fsx:UpdateFileSystem")
    assert update["Resource"] == "arn:aws:fsx:us-east-1:1:file-system/fs-1"


def _check_parameters(provisioner: str, parameters: dict[str, str]) -> list[str]:
    """The project's validator (schemas/storageclass-parameters.yaml) on a StorageClass."""
    storage_class = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "t"},
        "provisioner": provisioner,
        "parameters": parameters,
    }
    return [f"{p.path}: {p.message}" for p in default_validator().validate(storage_class)]


def test_efs_storage_class_provisions_an_access_point_per_pvc_with_700() -> None:
    spec = storage_builders.efs_storage_class("fs-0123abcd")
    params = spec["parameters"]
    assert params["provisioningMode"] == "efs-ap"
    assert params["directoryPerms"] == "700"
    assert "${.PVC.name}" in params["subPathPattern"]
    assert all(isinstance(v, str) for v in params.values())
    assert _check_parameters(spec["provisioner"], params) == []
    assert spec["reclaimPolicy"] == "Retain"


def test_parameter_check_catches_a_typo() -> None:
    # Guards the helper above: a misspelled key must not pass.
    problems = _check_parameters(
        "efs.csi.aws.com",
        {"provisioningMode": "efs-ap", "directoryPerm": "700", "fileSystemId": "fs-1"},
    )
    assert problems == [
        "parameters.directoryPerm: unknown parameter for efs.csi.aws.com (the driver ignores it)",
        "parameters.directoryPerms: required parameter missing",
    ]


def test_efs_team_volumes_are_dynamic_rwx_claims() -> None:
    objects = storage_builders.team_volume_specs(
        team="nlp", namespace="team-nlp", rwx="efs", checkpoint_size="1Ti", datasets=True
    )
    assert [(o["kind"], o["metadata"]["name"]) for o in objects] == [
        ("PersistentVolumeClaim", "nlp-checkpoints"),
        ("PersistentVolumeClaim", "nlp-datasets"),
    ]
    checkpoints = objects[0]
    assert checkpoints["metadata"]["namespace"] == "team-nlp"
    assert checkpoints["spec"]["accessModes"] == ["ReadWriteMany"]
    assert checkpoints["spec"]["storageClassName"] == storage_builders.EFS_STORAGE_CLASS
    only = storage_builders.team_volume_specs(
        team="nlp", namespace="team-nlp", rwx="efs", checkpoint_size="1Ti", datasets=False
    )
    assert [o["metadata"]["name"] for o in only] == ["nlp-checkpoints"]


def test_fsx_team_volumes_are_static_pvs_with_distinct_handles_and_readonly_datasets() -> None:
    lustre = storage_builders.LustreVolume("fs-1", "fs-1.fsx.example", "abcd1234", "/datasets")
    objects = storage_builders.team_volume_specs(
        team="nlp",
        namespace="team-nlp",
        rwx="fsx",
        checkpoint_size="2Ti",
        datasets=True,
        lustre=lustre,
    )
    volumes = [o for o in objects if o["kind"] == "PersistentVolume"]
    claims = [o for o in objects if o["kind"] == "PersistentVolumeClaim"]
    assert len(volumes) == 2 and len(claims) == 2
    handles = {v["spec"]["csi"]["volumeHandle"] for v in volumes}
    assert len(handles) == 2
    by_name = {v["metadata"]["name"]: v for v in volumes}
    datasets = by_name["team-nlp-datasets"]["spec"]
    assert datasets["accessModes"] == ["ReadOnlyMany"]
    assert "ro" in datasets["mountOptions"]
    assert datasets["csi"]["volumeAttributes"]["mountname"] == "abcd1234/datasets"
    # Checkpoints: the team's own directory (made by the team-directory Job), not the root.
    checkpoints = by_name["team-nlp-checkpoints"]["spec"]
    assert checkpoints["csi"]["volumeAttributes"]["mountname"] == "abcd1234/teams/nlp"
    for claim in claims:
        pv = by_name[claim["spec"]["volumeName"]]
        assert pv["spec"]["claimRef"] == {
            "namespace": "team-nlp",
            "name": claim["metadata"]["name"],
        }
    with pytest.raises(ValueError):
        storage_builders.team_volume_specs(
            team="a", namespace="b", rwx="fsx", checkpoint_size="1Ti", datasets=False
        )


#: Free-form maps of the CSI driver charts (keys below them are ours).
CSI_OPEN = frozenset({"podAnnotations", "podLabels", "tags"})


@pytest.mark.parametrize(
    ("chart", "values"),
    [
        ("aws-efs-csi-driver", storage_builders.efs_csi_values()),
        ("aws-fsx-csi-driver", storage_builders.fsx_csi_values("us-east-1")),
    ],
)
def test_every_helm_value_key_exists_in_the_pinned_chart(
    chart: str, values: dict[str, Any]
) -> None:
    assert values
    assert missing_keys(chart, values, open_keys=CSI_OPEN) == []


def test_chart_versions_match_the_pinned_schemas() -> None:
    from components.config import StorageConfig

    config = StorageConfig()
    for chart, version in (
        ("aws-efs-csi-driver", config.efs_csi_chart_version),
        ("aws-fsx-csi-driver", config.fsx_csi_chart_version),
    ):
        meta = yaml.safe_load((SCHEMAS / "charts" / chart / "Chart.yaml").read_text())
        assert meta["version"] == version


# --- the component under mocks --------------------------------------------------------------


def _for(result: SynthResult, token: str, bucket: str) -> list[harness.Registration]:
    return [r for r in result.of_type(token) if r.inputs.get("bucket") == bucket]


def _data_buckets(result: SynthResult) -> list[harness.Registration]:
    return [
        b
        for b in result.of_type(BUCKET)
        if b.inputs["tags"].get("gpu-platform.io/bucket-role") in storage_builders.BUCKET_ROLES
    ]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_data_bucket_is_kms_encrypted_versioned_private_tls_only_with_lifecycle(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    buckets = _data_buckets(result)
    assert len(buckets) >= 3
    keys = {k.urn: k for k in result.of_type("aws:kms/key:Key")}
    for bucket in buckets:
        name = bucket.inputs["bucket"]
        (sse,) = _for(result, SSE, name)
        rule = sse.inputs["rules"][0]
        assert rule["applyServerSideEncryptionByDefault"]["sseAlgorithm"] == "aws:kms"
        assert rule["applyServerSideEncryptionByDefault"]["kmsMasterKeyId"].startswith(
            "arn:aws:kms:"
        )
        assert rule["bucketKeyEnabled"] is True
        (versioning,) = _for(result, VERSIONING, name)
        assert versioning.inputs["versioningConfiguration"]["status"] == "Enabled"
        (block,) = _for(result, PUBLIC_BLOCK, name)
        flags = (
            "blockPublicAcls",
            "blockPublicPolicy",
            "ignorePublicAcls",
            "restrictPublicBuckets",
        )
        assert all(block.inputs[f] is True for f in flags)
        (ownership,) = _for(result, OWNERSHIP, name)
        assert ownership.inputs["rule"]["objectOwnership"] == "BucketOwnerEnforced"
        (policy,) = _for(result, POLICY, name)
        assert "aws:SecureTransport" in policy.inputs["policy"]
        (lifecycle,) = _for(result, LIFECYCLE, name)
        assert {r["id"] for r in lifecycle.inputs["rules"]} >= {
            "abort-incomplete-multipart-uploads",
            "expire-noncurrent-versions",
        }
        assert bucket.inputs["tags"]["cost-center"] == "ml-platform"
    storage_keys = [k for k in keys.values() if "storage" in k.urn]
    assert storage_keys and all(k.inputs["enableKeyRotation"] is True for k in storage_keys)


def test_prod_buckets_key_and_file_system_are_protected_and_retained(prod: SynthResult) -> None:
    guarded = [
        *prod.of_type(BUCKET),
        *[k for k in prod.of_type("aws:kms/key:Key") if "storage" in k.urn],
        *prod.of_type("aws:fsx/lustreFileSystem:LustreFileSystem"),
    ]
    assert len(guarded) >= 6
    assert all(r.protect and r.retain_on_delete for r in guarded), [r.name for r in guarded]
    assert all(b.inputs.get("forceDestroy") is False for b in prod.of_type(BUCKET))


def test_dev_buckets_can_be_torn_down(dev: SynthResult) -> None:
    buckets = dev.of_type(BUCKET)
    assert buckets
    assert not any(b.protect or b.retain_on_delete for b in buckets)
    assert all(b.inputs["forceDestroy"] is True for b in buckets)


def test_prod_logs_every_data_bucket_to_a_kms_encrypted_log_bucket(prod: SynthResult) -> None:
    logs = [b for b in prod.of_type(BUCKET) if "access-logs" in b.inputs["bucket"]]
    assert len(logs) == 1
    log_name = logs[0].inputs["bucket"]
    logging = prod.of_type("aws:s3/bucketLogging:BucketLogging")
    assert {r.inputs["bucket"] for r in logging} == {
        b.inputs["bucket"] for b in _data_buckets(prod)
    }
    assert {r.inputs["targetBucket"] for r in logging} == {log_name}
    (sse,) = _for(prod, SSE, log_name)
    default = sse.inputs["rules"][0]["applyServerSideEncryptionByDefault"]
    assert default["sseAlgorithm"] == "aws:kms" and default["kmsMasterKeyId"].startswith("arn:")
    # Log delivery can only use the customer managed key if the key policy admits it.
    (key,) = [k for k in prod.of_type("aws:kms/key:Key") if k.name == "storage-data"]
    statements = json.loads(key.inputs["policy"])["Statement"]
    assert any(st.get("Principal") == {"Service": "logging.s3.amazonaws.com"} for st in statements)


def test_dev_efs_is_encrypted_with_a_mount_target_per_private_subnet_nfs_from_nodes_only(
    dev: SynthResult,
) -> None:
    (fs,) = dev.of_type("aws:efs/fileSystem:FileSystem")
    assert fs.inputs["encrypted"] is True and fs.inputs["kmsKeyId"].startswith("arn:aws:kms:")
    targets = dev.of_type("aws:efs/mountTarget:MountTarget")
    private = [r for r in dev.of_type("aws:ec2/subnet:Subnet") if "private" in r.name]
    assert private and len(targets) == len(private)
    assert len({t.inputs["subnetId"] for t in targets}) == len(targets)
    rules = [
        r
        for r in dev.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.name.startswith("storage-")
    ]
    assert len(rules) == 1
    nodes_sg = dev.named("cluster-eks").inputs  # the node SG comes from the cluster's outputs
    assert nodes_sg is not None
    assert rules[0].inputs["fromPort"] == rules[0].inputs["toPort"] == 2049
    assert rules[0].inputs["referencedSecurityGroupId"].startswith("sg-")
    assert "cidrIpv4" not in rules[0].inputs


def test_dev_efs_csi_driver_is_pinned_and_uses_pod_identity(dev: SynthResult) -> None:
    (release,) = [r for r in dev.of_type(RELEASE) if r.inputs["chart"] == "aws-efs-csi-driver"]
    assert release.inputs["version"] == "4.4.1"
    assert release.inputs["repositoryOpts"]["repo"] == addons.EFS_CSI_DRIVER.repository
    (association,) = [
        r
        for r in dev.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if r.name.startswith("storage-")
    ]
    assert association.inputs["serviceAccount"] == storage_builders.EFS_CONTROLLER_SA
    assert association.urn in release.dependencies
    (policy,) = [
        r for r in dev.of_type("aws:iam/rolePolicy:RolePolicy") if r.name == "storage-efs-csi"
    ]
    document = json.loads(policy.inputs["policy"])
    assert any("file-system/fs-" in str(s["Resource"]) for s in document["Statement"])
    (storage_class,) = [
        r for r in dev.of_type(STORAGE_CLASS) if r.inputs["metadata"]["name"] == "efs-rwx"
    ]
    assert storage_class.provider.startswith("urn:") and "cluster-k8s" in storage_class.provider
    assert _check_parameters("efs.csi.aws.com", storage_class.inputs["parameters"]) == []


def test_prod_lustre_is_persistent_encrypted_linked_to_datasets_and_reachable_from_nodes_only(
    prod: SynthResult,
) -> None:
    (fs,) = prod.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    assert fs.inputs["deploymentType"] == "PERSISTENT_2"
    assert fs.inputs["perUnitStorageThroughput"] == 500
    assert fs.inputs["kmsKeyId"].startswith("arn:aws:kms:")
    (association,) = prod.of_type("aws:fsx/dataRepositoryAssociation:DataRepositoryAssociation")
    (datasets,) = [b for b in prod.of_type(BUCKET) if "-datasets-" in b.inputs["bucket"]]
    assert association.inputs["dataRepositoryPath"] == f"s3://{datasets.inputs['bucket']}"
    assert association.inputs["s3"]["autoImportPolicy"]["events"] == ["NEW", "CHANGED", "DELETED"]
    assert association.inputs["deleteDataInFilesystem"] is False
    ingress = [
        r
        for r in prod.of_type("aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule")
        if r.name.startswith("storage-lustre-")
    ]
    assert {(r.inputs["fromPort"], r.inputs["toPort"]) for r in ingress} == {
        (988, 988),
        (1018, 1023),
    }
    assert all("cidrIpv4" not in r.inputs for r in ingress)
    (release,) = [r for r in prod.of_type(RELEASE) if r.inputs["chart"] == "aws-fsx-csi-driver"]
    assert release.inputs["version"] == "1.17.0"
    assert release.inputs["repositoryOpts"]["repo"] == addons.FSX_CSI_DRIVER.repository
    assert [r for r in prod.of_type(STORAGE_CLASS) if r.inputs["provisioner"] == "fsx.csi.aws.com"]


def test_report_lists_buckets_file_system_and_cost(prod: SynthResult) -> None:
    from synth import report

    text = report.report(prod)
    section = text.split("## Storage", 1)[1].split("\n## ", 1)[0]
    assert "gpu-prod-checkpoints-123456789012" in section
    assert "protect + retainOnDelete" in section
    assert "PERSISTENT_2" in section and "MB/s aggregate" in section
    assert "1,632.00" in section  # 4,800 GiB x $0.34


# --- per-team volumes through the Kubernetes provider -------------------------------------


def test_create_team_volumes_registers_claims_with_the_given_provider() -> None:
    engine = mocks.PlatformMocks("us-east-1")
    monitor = harness.CapturingMonitor(engine)
    pulumi.runtime.set_mocks(
        engine, project="gpu-platform", stack="t", preview=False, monitor=monitor
    )

    @pulumi.runtime.test  # type: ignore[misc]
    def program() -> None:
        provider = k8s.Provider("k8s", kubeconfig="{}")
        lustre = pulumi.Output.from_input(
            storage_builders.LustreVolume("fs-0abc", "fs-0abc.fsx.example", "mnt12345", "/datasets")
        )
        team_volumes.create_team_volumes(
            "storage-nlp",
            team="nlp",
            namespace="team-nlp",
            rwx="fsx",
            checkpoint_size="2Ti",
            datasets=True,
            lustre=lustre,
            opts=pulumi.ResourceOptions(provider=provider),
        )

    program()
    captured = [r for r in monitor.captured if r.type.startswith("kubernetes:core/v1:Persistent")]
    assert len(captured) == 4
    assert all("k8s" in r.provider for r in captured)
    claims = [r for r in captured if r.type == "kubernetes:core/v1:PersistentVolumeClaim"]
    volumes = [r for r in captured if r.type == "kubernetes:core/v1:PersistentVolume"]
    assert {c.inputs["metadata"]["name"] for c in claims} == {"nlp-checkpoints", "nlp-datasets"}
    assert all(c.inputs["metadata"]["namespace"] == "team-nlp" for c in claims)
    handles = {v.inputs["spec"]["csi"]["volumeHandle"] for v in volumes}
    assert handles == {"fs-0abc::team-nlp-checkpoints", "fs-0abc::team-nlp-datasets"}
    urn_of = {v.inputs["metadata"]["name"]: v.urn for v in volumes}
    for claim in claims:
        assert urn_of[claim.inputs["spec"]["volumeName"]] in claim.dependencies


# --- config errors --------------------------------------------------------------------------


def _prod_with_storage(rwx: dict[str, Any] | None = None, **fields: Any) -> dict[str, Any]:
    cfg = copy.deepcopy(stack_values("prod"))
    section = cfg["gpu-platform:storage"]
    if rwx is not None:
        section["rwx"] = {**section["rwx"], **rwx}
    for key, value in fields.items():
        if isinstance(value, dict):
            section[key] = {**section.get(key, {}), **value}
        else:
            section[key] = value
    return cfg


STORAGE_INVALID: list[tuple[str, dict[str, Any], str, str]] = [
    (
        "FSx throughput not allowed for PERSISTENT_2",
        _prod_with_storage(rwx={"perUnitStorageThroughput": 200}),
        "gpu-platform:storage.rwx.perUnitStorageThroughput",
        "PERSISTENT_2 allows 125, 250, 500, 1000",
    ),
    (
        "FSx throughput not allowed for PERSISTENT_1",
        _prod_with_storage(rwx={"deploymentType": "PERSISTENT_1", "perUnitStorageThroughput": 125}),
        "gpu-platform:storage.rwx.perUnitStorageThroughput",
        "PERSISTENT_1 allows 50, 100, 200",
    ),
    (
        "FSx storage below the minimum",
        _prod_with_storage(rwx={"storageCapacityGib": 600}),
        "gpu-platform:storage.rwx.storageCapacityGib",
        "minimum 1200",
    ),
    (
        "FSx storage off the increment",
        _prod_with_storage(rwx={"storageCapacityGib": 3000}),
        "gpu-platform:storage.rwx.storageCapacityGib",
        "multiple of 2400",
    ),
    (
        "EFS key on an FSx file system",
        _prod_with_storage(rwx={"throughputMode": "elastic"}),
        "gpu-platform:storage.rwx.throughputMode",
        "only applies to type efs",
    ),
    (
        "FSx subnet index beyond the private subnets",
        _prod_with_storage(rwx={"subnetIndex": 3}),
        "gpu-platform:storage.rwx.subnetIndex",
        "one of the 3 private subnets",
    ),
    (
        "noncurrent versions expiring after more than a year",
        _prod_with_storage(lifecycle={"noncurrentVersionExpirationDays": 400}),
        "gpu-platform:storage.lifecycle.noncurrentVersionExpirationDays",
        "less than or equal to 365",
    ),
    (
        "checkpoint transition before the 30-day minimum",
        _prod_with_storage(lifecycle={"checkpointTransitionDays": 10}),
        "gpu-platform:storage.lifecycle.checkpointTransitionDays",
        "greater than or equal to 30",
    ),
    (
        "multipart abort of zero days",
        _prod_with_storage(lifecycle={"abortIncompleteMultipartDays": 0}),
        "gpu-platform:storage.lifecycle.abortIncompleteMultipartDays",
        "greater than or equal to 1",
    ),
    (
        "provisioned EFS without a throughput",
        _prod_with_storage(rwx={"type": "efs", "throughputMode": "provisioned"})
        | {
            "gpu-platform:storage": {"rwx": {"type": "efs", "throughputMode": "provisioned"}},
        },
        "gpu-platform:storage.rwx.provisionedThroughputMibps",
        "required when throughputMode is provisioned",
    ),
    (
        "bucket prefix too long for S3",
        _prod_with_storage(bucketPrefix="a" * 40),
        "gpu-platform:storage.bucketPrefix",
        "at most 38 characters",
    ),
]


@pytest.mark.parametrize(
    ("case", "cfg", "path", "allowed"), STORAGE_INVALID, ids=[c[0] for c in STORAGE_INVALID]
)
def test_invalid_storage_config_exits_2_naming_the_key_path(
    case: str,
    cfg: dict[str, Any],
    path: str,
    allowed: str,
    make_stack: Callable[[dict[str, Any]], Path],
    capsys: pytest.CaptureFixture[str],
) -> None:
    project = make_stack(cfg)
    rc = synth_cli.main(["--stack", "t", "--project-dir", str(project)])
    err = capsys.readouterr().err
    assert rc == synth_cli.EXIT_CONFIG, err
    lines = [line for line in err.splitlines() if line.startswith(f"{path}:")]
    assert lines, f"no line names {path}:\n{err}"
    assert any(allowed in line for line in lines), err


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_team_has_an_rwx_checkpoint_claim_in_its_namespace(
    stack: str, dev: SynthResult, prod: SynthResult
) -> None:
    result = {"dev": dev, "prod": prod}[stack]
    namespaces = {
        r.inputs["metadata"]["name"]
        for r in result.resources
        if r.type == "kubernetes:core/v1:Namespace" and r.name.startswith("team-")
    }
    assert len(namespaces) >= 2
    claims = {
        (c.inputs["metadata"]["namespace"], c.inputs["metadata"]["name"]): c
        for c in result.of_type("kubernetes:core/v1:PersistentVolumeClaim")
    }
    for namespace in namespaces:
        checkpoint = [
            c for (ns, name), c in claims.items() if ns == namespace and "checkpoints" in name
        ]
        assert len(checkpoint) == 1, namespace
        assert checkpoint[0].inputs["spec"]["accessModes"] == ["ReadWriteMany"]
        # Created only once the team's namespace exists.
        (ns_resource,) = [
            r
            for r in result.resources
            if r.type == "kubernetes:core/v1:Namespace"
            and r.inputs["metadata"]["name"] == namespace
        ]
        assert ns_resource.urn in checkpoint[0].dependencies
