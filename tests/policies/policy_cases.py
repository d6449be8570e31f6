"""Synthetic resources for the policy tests: for every rule, violating and compliant stacks.

Why this module is long: it is a table, one entry per policy-pack rule (44 rules, each with
at least one violating and one compliant case); splitting it would scatter the table a test
checks for completeness.

Each case is (policy name, description, resources, config for the pack, expect a violation).
Resources are (type token, name, wire-format inputs, names of resources they depend on), shaped
like the registrations synth captures (camelCase inputs, as the pulumi providers send them).
"""

from __future__ import annotations

import json
from typing import Any

from components import catalog
from components.analysis import pod_security
from components.platform.cluster import iam

Res = tuple[str, str, dict[str, Any], tuple[str, ...]]
Case = tuple[str, str, list[Res], dict[str, Any], bool]

OIDC = "arn:aws:iam::123456789012:oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/ABC"
ISSUER = "https://oidc.eks.us-east-1.amazonaws.com/id/ABC"
DIGEST = "sha256:" + "a" * 64
IMAGE = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/trainer:1.4.0@{DIGEST}"
PROD = {"gpu-platform-k8s-image-pinned": {"requireDigest": True}}
DEV = {
    "gpu-platform-k8s-image-pinned": {"requireDigest": False},
    "gpu-platform-eks-private-endpoint": {"requirePrivateEndpoint": False},
    "gpu-platform-karpenter-node-class-hardened": {"forbidLatestAmiAlias": False},
}


def r(typ: str, name: str, inputs: dict[str, Any], *deps: str) -> Res:
    return (typ, name, inputs, deps)


def doc(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


# --- S3 -------------------------------------------------------------------------------------------

BUCKET = r("aws:s3/bucket:Bucket", "data", {"bucket": "gpu-prod-data"})
SSE_KMS = r(
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
    "data-sse",
    {
        "bucket": "data-1",
        "rules": [
            {
                "applyServerSideEncryptionByDefault": {
                    "sseAlgorithm": "aws:kms",
                    "kmsMasterKeyId": "k",
                }
            }
        ],
    },
    "data",
)
SSE_AES = r(
    SSE_KMS[0],
    "data-sse",
    {"rules": [{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]},
    "data",
)
VERSIONING = r(
    "aws:s3/bucketVersioning:BucketVersioning",
    "data-versioning",
    {"bucket": "data-1", "versioningConfiguration": {"status": "Enabled"}},
    "data",
)
PAB = r(
    "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock",
    "data-pab",
    {
        "bucket": "data-1",
        "blockPublicAcls": True,
        "blockPublicPolicy": True,
        "ignorePublicAcls": True,
        "restrictPublicBuckets": True,
    },
    "data",
)
PAB_OFF = r(
    PAB[0],
    "data-pab",
    {**PAB[2], "blockPublicPolicy": False, "restrictPublicBuckets": False},
    "data",
)
TLS_DENY = {
    "Sid": "DenyPlainHttp",
    "Effect": "Deny",
    "Principal": "*",
    "Action": "s3:*",
    "Resource": ["arn:aws:s3:::gpu-prod-data", "arn:aws:s3:::gpu-prod-data/*"],
    "Condition": {"Bool": {"aws:SecureTransport": "false"}},
}
BUCKET_POLICY = r(
    "aws:s3/bucketPolicy:BucketPolicy",
    "data-policy",
    {"bucket": "data-1", "policy": doc(TLS_DENY)},
    "data",
)
PUBLIC_POLICY = r(
    BUCKET_POLICY[0],
    "data-policy",
    {
        "policy": doc(
            TLS_DENY,
            {
                "Sid": "Public",
                "Effect": "Allow",
                "Principal": "*",
                "Action": "s3:GetObject",
                "Resource": "arn:aws:s3:::gpu-prod-data/*",
            },
        )
    },
    "data",
)
GOOD_BUCKET = [BUCKET, SSE_KMS, VERSIONING, PAB, BUCKET_POLICY]

# --- IAM ------------------------------------------------------------------------------------------

S3_STAR = {"Effect": "Allow", "Action": "s3:*", "Resource": "*"}
S3_SCOPED = {
    "Effect": "Allow",
    "Action": ["s3:GetObject", "s3:PutObject"],
    "Resource": "arn:aws:s3:::gpu-prod-data/team-a/*",
}
IRSA_GOOD = json.dumps(iam.irsa_trust_policy(OIDC, ISSUER, "team-a", "trainer"))
IRSA_WILDCARD = doc(
    {
        "Effect": "Allow",
        "Principal": {"Federated": OIDC},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {
            "StringLike": {
                "oidc.eks.us-east-1.amazonaws.com/id/ABC:sub": "system:serviceaccount:team-a:*"
            }
        },
    }
)

# --- Kubernetes workloads -------------------------------------------------------------------------


def container(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "trainer",
        "image": IMAGE,
        "resources": {
            "requests": {"cpu": "8", "memory": "64Gi"},
            "limits": {"nvidia.com/gpu": 8, "memory": "64Gi"},
        },
        # Restricted like every platform pod, so a case violates only the rule it is about.
        "securityContext": pod_security.container_security_context(),
    }
    base.update(over)
    return base


def pod_spec(**over: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [container()],
        "tolerations": [catalog.gpu_toleration()],
        "restartPolicy": "Never",
        **pod_security.restricted_pod_fields(),
    }
    spec.update(over)
    return spec


def job(
    name: str = "train",
    namespace: str = "team-a",
    labels: dict[str, str] | None = None,
    parallelism: int = 1,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> Res:
    return r(
        "kubernetes:batch/v1:Job",
        name,
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
            "spec": {
                "parallelism": parallelism,
                "completions": parallelism,
                "template": {
                    "metadata": {"annotations": annotations or {}},
                    "spec": pod_spec(**spec),
                },
            },
        },
    )


def deployment(namespace: str, **spec: Any) -> Res:
    return r(
        "kubernetes:apps/v1:Deployment",
        "svc",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "svc", "namespace": namespace},
            "spec": {
                "template": {
                    "spec": {
                        "containers": [
                            container(resources={"requests": {"cpu": "1", "memory": "1Gi"}})
                        ],
                        **spec,
                    }
                }
            },
        },
    )


def k8s(kind: str, api: str, name: str, namespace: str | None, body: dict[str, Any]) -> Res:
    metadata: dict[str, Any] = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return r(
        f"kubernetes:{api}:{kind}",
        f"{kind}-{namespace}-{name}",
        {"apiVersion": api, "kind": kind, "metadata": metadata, **body},
    )


TEAM_NS = k8s("Namespace", "v1", "team-a", None, {})
TEAM_NS = (TEAM_NS[0].replace("kubernetes:v1", "kubernetes:core/v1"), *TEAM_NS[1:])


def labelled_team_ns(name: str) -> Res:
    """A team Namespace as the Teams component renders it (its team label)."""
    return r(
        "kubernetes:core/v1:Namespace",
        f"team-ns-{name}",
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": name, "labels": {f"{catalog.LABEL_DOMAIN}/team": "a"}},
        },
    )


ESO_RELEASE = r(
    "kubernetes:helm.sh/v3:Release",
    "eso",
    {"name": "external-secrets", "chart": "external-secrets", "namespace": "external-secrets"},
)
VALIDATION_NS = r(
    "kubernetes:core/v1:Namespace",
    "validation-ns",
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-validation"}},
)
CLOUDWATCH_ADDON = r(
    "aws:eks/addon:Addon", "logs", {"addonName": "amazon-cloudwatch-observability"}
)
QUOTA = (
    "kubernetes:core/v1:ResourceQuota",
    "quota",
    {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "quota", "namespace": "team-a"},
        "spec": {"hard": {"requests.nvidia.com/gpu": "16", "requests.cpu": "256"}},
    },
    (),
)
QUOTA_NO_GPU = (
    "kubernetes:core/v1:ResourceQuota",
    "quota",
    {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": "quota", "namespace": "team-a"},
        "spec": {"hard": {"requests.cpu": "256"}},
    },
    (),
)
LIMITS = (
    "kubernetes:core/v1:LimitRange",
    "limits",
    {
        "apiVersion": "v1",
        "kind": "LimitRange",
        "metadata": {"name": "defaults", "namespace": "team-a"},
        "spec": {
            "limits": [{"type": "Container", "defaultRequest": {"cpu": "1", "memory": "2Gi"}}]
        },
    },
    (),
)
DENY = (
    "kubernetes:networking.k8s.io/v1:NetworkPolicy",
    "deny",
    {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "default-deny", "namespace": "team-a"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"]},
    },
    (),
)
ALLOW_ALL = (
    "kubernetes:networking.k8s.io/v1:NetworkPolicy",
    "allow",
    {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "allow", "namespace": "team-a"},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress"], "ingress": [{}]},
    },
    (),
)
PLATFORM_NS = (
    "kubernetes:core/v1:Namespace",
    "karpenter-ns",
    {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "karpenter"}},
    (),
)

# --- capacity -------------------------------------------------------------------------------------

GPU_LABELS = catalog.gpu_node_labels(
    gpu_class="h100-x8",
    gpu_model="h100",
    capacity_type="spot",
    workload_type="training",
    provisioner="karpenter",
)


def node_pool(
    name: str = "h100-spot", *, taint: bool = True, limit: Any = 64, spot: bool = True
) -> Res:
    spec: dict[str, Any] = {
        "template": {
            "metadata": {"labels": GPU_LABELS},
            "spec": {
                "requirements": [
                    {
                        "key": "node.kubernetes.io/instance-type",
                        "operator": "In",
                        "values": ["p5.48xlarge"],
                    },
                    {
                        "key": "karpenter.sh/capacity-type",
                        "operator": "In",
                        "values": ["spot" if spot else "on-demand"],
                    },
                ],
                "taints": [catalog.gpu_taint()] if taint else [],
                "nodeClassRef": {
                    "group": "karpenter.k8s.aws",
                    "kind": "EC2NodeClass",
                    "name": "gpu",
                },
            },
        },
    }
    if limit is not None:
        spec["limits"] = {"nvidia.com/gpu": limit}
    return r(
        "kubernetes:karpenter.sh/v1:NodePool",
        name,
        {
            "apiVersion": "karpenter.sh/v1",
            "kind": "NodePool",
            "metadata": {"name": name},
            "spec": spec,
        },
    )


def node_class(alias: str) -> Res:
    return r(
        "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass",
        "gpu",
        {
            "apiVersion": "karpenter.k8s.aws/v1",
            "kind": "EC2NodeClass",
            "metadata": {"name": "gpu"},
            "spec": {
                "amiSelectorTerms": [{"alias": alias}],
                "metadataOptions": {"httpTokens": "required"},
                "blockDeviceMappings": [
                    {"deviceName": "/dev/xvda", "ebs": {"volumeSize": "500Gi", "encrypted": True}}
                ],
            },
        },
    )


INTERRUPTION = [
    r(
        "aws:sqs/queue:Queue",
        "interruption",
        {"messageRetentionSeconds": 300, "sqsManagedSseEnabled": True},
    ),
    *[
        r(
            "aws:cloudwatch/eventRule:EventRule",
            f"rule-{i}",
            {"eventPattern": json.dumps({"detail-type": [event]})},
        )
        for i, event in enumerate(
            (
                "EC2 Spot Instance Interruption Warning",
                "EC2 Instance Rebalance Recommendation",
                "EC2 Instance State-change Notification",
                "AWS Health Event",
            )
        )
    ],
    r(
        "kubernetes:helm.sh/v3:Release",
        "karpenter",
        {
            "chart": "oci://public.ecr.aws/karpenter/karpenter",
            "version": "1.14.1",
            "values": {"settings": {"interruptionQueue": "interruption-1"}},
        },
    ),
]


def flavor(name: str = "h100-spot") -> Res:
    return r(
        "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor",
        f"flavor-{name}",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ResourceFlavor",
            "metadata": {"name": name},
            "spec": {
                "nodeLabels": {
                    catalog.LABEL_GPU_CLASS: "h100-x8",
                    catalog.LABEL_CAPACITY_TYPE: "spot",
                }
            },
        },
    )


def cluster_queue(gpus: int) -> Res:
    return r(
        "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue",
        "team-a-cq",
        {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "ClusterQueue",
            "metadata": {"name": "team-a"},
            "spec": {
                "resourceGroups": [
                    {
                        "coveredResources": ["nvidia.com/gpu"],
                        "flavors": [
                            {
                                "name": "h100-spot",
                                "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}],
                            }
                        ],
                    }
                ]
            },
        },
    )


def mng(
    typ: str = "eks:index:ManagedNodeGroup",
    *,
    taints: list[dict[str, str]] | None = None,
    max_size: int = 4,
    launch_template: bool = True,
) -> Res:
    inputs: dict[str, Any] = {
        "amiType": "AL2023_x86_64_NVIDIA",
        "capacityType": "ON_DEMAND",
        "instanceTypes": ["p5.48xlarge"],
        "labels": GPU_LABELS,
        "scalingConfig": {"minSize": 0, "desiredSize": 0, "maxSize": max_size},
        "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
        if taints is None
        else taints,
    }
    if launch_template:
        inputs["launchTemplate"] = {"id": "lt-123", "version": "1"}
    return r(typ, "h100", inputs)


SPOT_SELECTOR = {"karpenter.sh/capacity-type": "spot"}
CHECKPOINT_ENV = [{"name": "CHECKPOINT_URI", "value": "s3://gpu-prod-data/team-a/ckpt"}]


def ds_config(total: int) -> Res:
    ds = {
        "train_batch_size": total,
        "train_micro_batch_size_per_gpu": 4,
        "gradient_accumulation_steps": 2,
        "bf16": {"enabled": True},
        "zero_optimization": {"stage": 3},
    }
    return r(
        "kubernetes:core/v1:ConfigMap",
        "ds",
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "ds", "namespace": "team-a"},
            "data": {"ds_config.json": json.dumps(ds)},
        },
    )


DS_JOB = job(
    parallelism=2,
    labels={"kueue.x-k8s.io/queue-name": "team-a"},
    volumes=[{"name": "ds", "configMap": {"name": "ds"}}],
)


def eks_child(**over: Any) -> Res:
    inputs: dict[str, Any] = {
        "vpcConfig": {
            "endpointPrivateAccess": True,
            "endpointPublicAccess": False,
            "subnetIds": ["s"],
        },
        "enabledClusterLogTypes": [
            "api",
            "audit",
            "authenticator",
            "controllerManager",
            "scheduler",
        ],
        "encryptionConfig": {
            "provider": {"keyArn": "arn:aws:kms:us-east-1:123456789012:key/k"},
            "resources": ["secrets"],
        },
        "accessConfig": {"authenticationMode": "API"},
    }
    inputs.update(over)
    return r("aws:eks/cluster:Cluster", "cluster-eks-eksCluster", inputs)


def eks_component(**over: Any) -> Res:
    inputs: dict[str, Any] = {
        "endpointPrivateAccess": True,
        "endpointPublicAccess": False,
        "enabledClusterLogTypes": [
            "api",
            "audit",
            "authenticator",
            "controllerManager",
            "scheduler",
        ],
        "encryptionConfigKeyArn": "arn:aws:kms:us-east-1:123456789012:key/k",
        "authenticationMode": "API",
    }
    inputs.update(over)
    return r("eks:index:Cluster", "cluster-eks", inputs)


LT = "aws:ec2/launchTemplate:LaunchTemplate"

CASES: list[Case] = [
    # S3
    ("gpu-platform-s3-encryption-kms", "bucket without SSE", [BUCKET], {}, True),
    ("gpu-platform-s3-encryption-kms", "bucket with SSE-S3 only", [BUCKET, SSE_AES], {}, True),
    ("gpu-platform-s3-encryption-kms", "bucket with SSE-KMS", GOOD_BUCKET, {}, False),
    ("gpu-platform-s3-versioning", "bucket without versioning", [BUCKET], {}, True),
    (
        "gpu-platform-s3-versioning",
        "versioning suspended",
        [
            BUCKET,
            r(VERSIONING[0], "v", {"versioningConfiguration": {"status": "Suspended"}}, "data"),
        ],
        {},
        True,
    ),
    ("gpu-platform-s3-versioning", "versioning enabled", GOOD_BUCKET, {}, False),
    (
        "gpu-platform-s3-public-access-block",
        "public bucket: block off",
        [BUCKET, PAB_OFF],
        {},
        True,
    ),
    ("gpu-platform-s3-public-access-block", "no public access block", [BUCKET], {}, True),
    ("gpu-platform-s3-public-access-block", "all four blocks on", GOOD_BUCKET, {}, False),
    (
        "gpu-platform-s3-tls-only",
        "no TLS-only statement",
        [BUCKET, r(BUCKET_POLICY[0], "p", {"policy": doc(S3_SCOPED)}, "data")],
        {},
        True,
    ),
    ("gpu-platform-s3-tls-only", "TLS-only policy", GOOD_BUCKET, {}, False),
    ("gpu-platform-s3-no-public-access", "Allow Principal *", [BUCKET, PUBLIC_POLICY], {}, True),
    (
        "gpu-platform-s3-no-public-access",
        "public-read ACL",
        [r("aws:s3/bucketAcl:BucketAcl", "acl", {"acl": "public-read"})],
        {},
        True,
    ),
    ("gpu-platform-s3-no-public-access", "deny-only policy", GOOD_BUCKET, {}, False),
    # IAM
    (
        "gpu-platform-iam-no-wildcard-permissions",
        "training role with s3:* on *",
        [
            r(
                "aws:iam/rolePolicy:RolePolicy",
                "team-a-train",
                {"role": "team-a", "policy": doc(S3_STAR)},
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-iam-no-wildcard-permissions",
        "inline Action *",
        [
            r(
                "aws:iam/role:Role",
                "x",
                {
                    "assumeRolePolicy": IRSA_GOOD,
                    "inlinePolicies": [
                        {
                            "name": "all",
                            "policy": doc(
                                {"Effect": "Allow", "Action": "*", "Resource": "arn:aws:s3:::b"}
                            ),
                        }
                    ],
                },
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-iam-no-wildcard-permissions",
        "scoped S3 access",
        [r("aws:iam/rolePolicy:RolePolicy", "team-a-train", {"policy": doc(S3_SCOPED)})],
        {},
        False,
    ),
    (
        "gpu-platform-iam-no-admin-policies",
        "AdministratorAccess on a role",
        [
            r(
                "aws:iam/role:Role",
                "team-a",
                {
                    "assumeRolePolicy": IRSA_GOOD,
                    "managedPolicyArns": ["arn:aws:iam::aws:policy/AdministratorAccess"],
                },
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-iam-no-admin-policies",
        "attachment of AmazonS3FullAccess",
        [
            r(
                "aws:iam/rolePolicyAttachment:RolePolicyAttachment",
                "a",
                {"role": "x", "policyArn": "arn:aws:iam::aws:policy/AmazonS3FullAccess"},
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-iam-no-admin-policies",
        "node policies",
        [
            r(
                "aws:iam/role:Role",
                "node",
                {"managedPolicyArns": ["arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy"]},
            )
        ],
        {},
        False,
    ),
    (
        "gpu-platform-iam-trust-scoped",
        "IRSA trust with a wildcard sub",
        [r("aws:iam/role:Role", "team-a", {"assumeRolePolicy": IRSA_WILDCARD})],
        {},
        True,
    ),
    (
        "gpu-platform-iam-trust-scoped",
        "trust Principal *",
        [
            r(
                "aws:iam/role:Role",
                "x",
                {
                    "assumeRolePolicy": doc(
                        {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}
                    )
                },
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-iam-trust-scoped",
        "Pod Identity trust without source account",
        [
            r(
                "aws:iam/role:Role",
                "x",
                {
                    "assumeRolePolicy": doc(
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "pods.eks.amazonaws.com"},
                            "Action": ["sts:AssumeRole", "sts:TagSession"],
                        }
                    )
                },
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-iam-trust-scoped",
        "IRSA trust for one service account",
        [r("aws:iam/role:Role", "team-a", {"assumeRolePolicy": IRSA_GOOD})],
        {},
        False,
    ),
    (
        "gpu-platform-iam-trust-scoped",
        "Pod Identity trust",
        [
            r(
                "aws:iam/role:Role",
                "x",
                {
                    "assumeRolePolicy": json.dumps(
                        iam.pod_identity_trust_policy(
                            "123456789012",
                            cluster_name="gpu-dev",
                            namespace="kube-system",
                            service_account="x",
                        )
                    )
                },
            )
        ],
        {},
        False,
    ),
    (
        "gpu-platform-iam-pod-identity-pinned",
        "Pod Identity trust pinned to the account only (any cluster could bind it)",
        [
            r(
                "aws:iam/role:Role",
                "x",
                {
                    "assumeRolePolicy": doc(
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "pods.eks.amazonaws.com"},
                            "Action": ["sts:AssumeRole", "sts:TagSession"],
                            "Condition": {"StringEquals": {"aws:SourceAccount": "123456789012"}},
                        }
                    )
                },
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-iam-pod-identity-pinned",
        "Pod Identity trust with a wildcard service account",
        [
            r(
                "aws:iam/role:Role",
                "x",
                {
                    "assumeRolePolicy": doc(
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "pods.eks.amazonaws.com"},
                            "Action": ["sts:AssumeRole", "sts:TagSession"],
                            "Condition": {
                                "StringEquals": {
                                    "aws:RequestTag/eks-cluster-name": "gpu-dev",
                                    "aws:RequestTag/kubernetes-namespace": "kube-system",
                                    "aws:RequestTag/kubernetes-service-account": "*",
                                }
                            },
                        }
                    )
                },
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-iam-pod-identity-pinned",
        "Pod Identity trust from the platform's builder",
        [
            r(
                "aws:iam/role:Role",
                "x",
                {
                    "assumeRolePolicy": json.dumps(
                        iam.pod_identity_trust_policy(
                            "123456789012",
                            cluster_name="gpu-dev",
                            namespace="karpenter",
                            service_account="karpenter",
                        )
                    )
                },
            )
        ],
        {},
        False,
    ),
    (
        "gpu-platform-iam-trust-scoped",
        "GitHub OIDC trust with a wildcard subject (StringLike)",
        [
            r(
                "aws:iam/role:Role",
                "x",
                {
                    "assumeRolePolicy": doc(
                        {
                            "Effect": "Allow",
                            "Principal": {
                                "Federated": "arn:aws:iam::123456789012:oidc-provider/"
                                "token.actions.githubusercontent.com"
                            },
                            "Action": "sts:AssumeRoleWithWebIdentity",
                            "Condition": {
                                "StringEquals": {
                                    "token.actions.githubusercontent.com:aud": "sts.amazonaws.com"
                                },
                                "StringLike": {
                                    "token.actions.githubusercontent.com:sub": "repo:acme/*"
                                },
                            },
                        }
                    )
                },
            )
        ],
        {},
        True,
    ),
    # EKS, both layers
    (
        "gpu-platform-eks-private-endpoint",
        "public endpoint (component)",
        [eks_component(endpointPublicAccess=True, publicAccessCidrs=["203.0.113.0/24"])],
        {},
        True,
    ),
    (
        "gpu-platform-eks-private-endpoint",
        "endpoint unset defaults to public (child)",
        [eks_child(vpcConfig={"subnetIds": ["s"]})],
        {},
        True,
    ),
    (
        "gpu-platform-eks-private-endpoint",
        "dev: public to the world",
        [eks_component(endpointPublicAccess=True)],
        DEV,
        True,
    ),
    (
        "gpu-platform-eks-private-endpoint",
        "dev: public to the office",
        [eks_component(endpointPublicAccess=True, publicAccessCidrs=["203.0.113.0/24"])],
        DEV,
        False,
    ),
    (
        "gpu-platform-eks-private-endpoint",
        "private (component and child)",
        [eks_component(), eks_child()],
        {},
        False,
    ),
    (
        "gpu-platform-eks-secrets-encryption",
        "no KMS key (component)",
        [eks_component(encryptionConfigKeyArn=None)],
        {},
        True,
    ),
    (
        "gpu-platform-eks-secrets-encryption",
        "no encryptionConfig (child)",
        [eks_child(encryptionConfig=None)],
        {},
        True,
    ),
    ("gpu-platform-eks-secrets-encryption", "encrypted", [eks_component(), eks_child()], {}, False),
    (
        "gpu-platform-eks-control-plane-logs",
        "api only",
        [eks_component(enabledClusterLogTypes=["api"])],
        {},
        True,
    ),
    ("gpu-platform-eks-control-plane-logs", "all logs", [eks_component(), eks_child()], {}, False),
    (
        "gpu-platform-eks-api-auth-mode",
        "aws-auth ConfigMap (child)",
        [eks_child(accessConfig={"authenticationMode": "CONFIG_MAP"})],
        {},
        True,
    ),
    ("gpu-platform-eks-api-auth-mode", "API", [eks_component(), eks_child()], {}, False),
    (
        "gpu-platform-kms-key-rotation",
        "rotation off",
        [r("aws:kms/key:Key", "k", {"enableKeyRotation": False})],
        {},
        True,
    ),
    (
        "gpu-platform-kms-key-rotation",
        "rotation on",
        [r("aws:kms/key:Key", "k", {"enableKeyRotation": True})],
        {},
        False,
    ),
    (
        "gpu-platform-ec2-imdsv2",
        "IMDSv1 allowed",
        [r(LT, "lt", {"metadataOptions": {"httpTokens": "optional"}})],
        {},
        True,
    ),
    (
        "gpu-platform-ec2-imdsv2",
        "hop limit 2",
        [
            r(
                LT,
                "lt",
                {"metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 2}},
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-ec2-imdsv2",
        "IMDSv2, hop limit 1",
        [
            r(
                LT,
                "lt",
                {"metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1}},
            )
        ],
        {},
        False,
    ),
    (
        "gpu-platform-ec2-encrypted-volumes",
        "unencrypted root",
        [
            r(
                LT,
                "lt",
                {
                    "blockDeviceMappings": [
                        {"deviceName": "/dev/xvda", "ebs": {"encrypted": "false"}}
                    ]
                },
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-ec2-encrypted-volumes",
        "unencrypted EFS",
        [r("aws:efs/fileSystem:FileSystem", "efs", {})],
        {},
        True,
    ),
    (
        "gpu-platform-ec2-encrypted-volumes",
        "encrypted root and EFS",
        [
            r(
                LT,
                "lt",
                {
                    "blockDeviceMappings": [
                        {"deviceName": "/dev/xvda", "ebs": {"encrypted": "true"}}
                    ]
                },
            ),
            r("aws:efs/fileSystem:FileSystem", "efs", {"encrypted": True}),
        ],
        {},
        False,
    ),
    (
        "gpu-platform-eks-node-group-launch-template",
        "child node group without template",
        [mng("aws:eks/nodeGroup:NodeGroup", launch_template=False)],
        {},
        True,
    ),
    (
        "gpu-platform-eks-node-group-launch-template",
        "with template",
        [mng(), mng("aws:eks/nodeGroup:NodeGroup")],
        {},
        False,
    ),
    (
        "gpu-platform-sqs-encryption",
        "plain queue",
        [r("aws:sqs/queue:Queue", "q", {"messageRetentionSeconds": 300})],
        {},
        True,
    ),
    (
        "gpu-platform-sqs-encryption",
        "SSE queue",
        [r("aws:sqs/queue:Queue", "q", {"sqsManagedSseEnabled": True})],
        {},
        False,
    ),
    (
        "gpu-platform-ec2-no-open-ingress",
        "SSH from anywhere",
        [
            r(
                "aws:ec2/securityGroup:SecurityGroup",
                "sg",
                {
                    "ingress": [
                        {
                            "fromPort": 22,
                            "toPort": 22,
                            "protocol": "tcp",
                            "cidrBlocks": ["0.0.0.0/0"],
                        }
                    ]
                },
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-ec2-no-open-ingress",
        "IPv6 rule",
        [
            r(
                "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule",
                "in",
                {"cidrIpv6": "::/0", "fromPort": 443, "toPort": 443},
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-ec2-no-open-ingress",
        "VPC-only ingress, open egress",
        [
            r(
                "aws:ec2/securityGroupRule:SecurityGroupRule",
                "in",
                {"type": "ingress", "cidrBlocks": ["10.0.0.0/16"]},
            ),
            r(
                "aws:ec2/securityGroupRule:SecurityGroupRule",
                "out",
                {"type": "egress", "cidrBlocks": ["0.0.0.0/0"]},
            ),
        ],
        {},
        False,
    ),
    # Kubernetes
    (
        "gpu-platform-k8s-gpu-pod-tolerates-taint",
        "GPU job without toleration",
        [job(tolerations=[])],
        {},
        True,
    ),
    ("gpu-platform-k8s-gpu-pod-tolerates-taint", "GPU job with toleration", [job()], {}, False),
    (
        "gpu-platform-k8s-gpu-in-limits",
        "GPU in requests only",
        [
            job(
                containers=[
                    container(
                        resources={"requests": {"nvidia.com/gpu": 1, "cpu": "1", "memory": "1Gi"}}
                    )
                ]
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-gpu-in-limits",
        "toleration without GPUs",
        [deployment("team-a", tolerations=[catalog.gpu_toleration()])],
        {},
        True,
    ),
    ("gpu-platform-k8s-gpu-in-limits", "GPU in limits", [job()], {}, False),
    (
        "gpu-platform-k8s-no-privileged",
        "privileged trainer",
        [job(containers=[container(securityContext={"privileged": True})])],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-no-privileged",
        "SYS_ADMIN",
        [job(containers=[container(securityContext={"capabilities": {"add": ["SYS_ADMIN"]}})])],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-no-privileged",
        "privileged platform daemon",
        [deployment("kube-system", containers=[container(securityContext={"privileged": True})])],
        {},
        False,
    ),
    (
        "gpu-platform-k8s-no-host-path",
        "hostPath in a team job",
        [job(volumes=[{"name": "h", "hostPath": {"path": "/"}}])],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-no-host-path",
        "shm emptyDir",
        [job(volumes=[{"name": "shm", "emptyDir": {"medium": "Memory"}}])],
        {},
        False,
    ),
    ("gpu-platform-k8s-no-host-namespaces", "hostNetwork", [job(hostNetwork=True)], {}, True),
    ("gpu-platform-k8s-no-host-namespaces", "pod network", [job()], {}, False),
    (
        "gpu-platform-k8s-image-pinned",
        "prod: unpinned image",
        [job(containers=[container(image="ghcr.io/acme/trainer:1.4.0")])],
        PROD,
        True,
    ),
    (
        "gpu-platform-k8s-image-pinned",
        ":latest",
        [job(containers=[container(image="ghcr.io/acme/trainer:latest")])],
        DEV,
        True,
    ),
    (
        "gpu-platform-k8s-image-pinned",
        "no tag",
        [job(containers=[container(image="localhost:5000/trainer")])],
        DEV,
        True,
    ),
    ("gpu-platform-k8s-image-pinned", "prod: digest", [job()], PROD, False),
    (
        "gpu-platform-k8s-image-pinned",
        "dev: tag",
        [job(containers=[container(image="localhost:5000/trainer:1.4.0")])],
        DEV,
        False,
    ),
    (
        "gpu-platform-k8s-resource-requests",
        "no requests",
        [job(containers=[container(resources={"limits": {"nvidia.com/gpu": 1}})])],
        {},
        True,
    ),
    ("gpu-platform-k8s-resource-requests", "cpu and memory requested", [job()], {}, False),
    (
        "gpu-platform-k8s-no-cluster-admin-binding",
        "team group as cluster-admin",
        [
            k8s(
                "ClusterRoleBinding",
                "rbac.authorization.k8s.io/v1",
                "team-a-admin",
                None,
                {
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "cluster-admin",
                    },
                    "subjects": [{"kind": "Group", "name": "team-a"}],
                },
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-no-cluster-admin-binding",
        "team SA as cluster-admin",
        [
            k8s(
                "ClusterRoleBinding",
                "rbac.authorization.k8s.io/v1",
                "sa-admin",
                None,
                {
                    "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
                    "subjects": [
                        {"kind": "ServiceAccount", "name": "trainer", "namespace": "team-a"}
                    ],
                },
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-no-cluster-admin-binding",
        "system:masters; edit for a team",
        [
            k8s(
                "ClusterRoleBinding",
                "rbac.authorization.k8s.io/v1",
                "masters",
                None,
                {
                    "roleRef": {"kind": "ClusterRole", "name": "cluster-admin"},
                    "subjects": [{"kind": "Group", "name": "system:masters"}],
                },
            ),
            k8s(
                "RoleBinding",
                "rbac.authorization.k8s.io/v1",
                "edit",
                "team-a",
                {
                    "roleRef": {"kind": "ClusterRole", "name": "edit"},
                    "subjects": [{"kind": "Group", "name": "team-a"}],
                },
            ),
        ],
        {},
        False,
    ),
    (
        "gpu-platform-k8s-storageclass-encrypted",
        "unencrypted gp3",
        [
            k8s(
                "StorageClass",
                "storage.k8s.io/v1",
                "gp3",
                None,
                {"provisioner": "ebs.csi.aws.com", "parameters": {"type": "gp3"}},
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-storageclass-encrypted",
        "encrypted gp3; EFS",
        [
            k8s(
                "StorageClass",
                "storage.k8s.io/v1",
                "gp3",
                None,
                {
                    "provisioner": "ebs.csi.aws.com",
                    "parameters": {"type": "gp3", "encrypted": "true"},
                },
            ),
            k8s(
                "StorageClass", "storage.k8s.io/v1", "efs", None, {"provisioner": "efs.csi.aws.com"}
            ),
        ],
        {},
        False,
    ),
    ("gpu-platform-k8s-team-quota-bounds-gpus", "quota without GPUs", [QUOTA_NO_GPU], {}, True),
    ("gpu-platform-k8s-team-quota-bounds-gpus", "quota with GPUs", [QUOTA], {}, False),
    ("gpu-platform-k8s-team-resource-quota", "team namespace alone", [TEAM_NS], {}, True),
    (
        "gpu-platform-k8s-team-resource-quota",
        "complete team namespace; platform namespace",
        [TEAM_NS, QUOTA, LIMITS, DENY, PLATFORM_NS],
        {},
        False,
    ),
    ("gpu-platform-k8s-team-limit-range", "team namespace alone", [TEAM_NS, QUOTA], {}, True),
    (
        "gpu-platform-k8s-team-limit-range",
        "complete team namespace",
        [TEAM_NS, QUOTA, LIMITS, DENY],
        {},
        False,
    ),
    ("gpu-platform-k8s-team-default-deny", "allow-all policy only", [TEAM_NS, ALLOW_ALL], {}, True),
    ("gpu-platform-k8s-team-default-deny", "default deny", [TEAM_NS, DENY, ALLOW_ALL], {}, False),
    # #36 finding 10: a team namespace an add-on of the stack (or Kubernetes) also uses.
    (
        "gpu-platform-k8s-team-namespace-not-platform",
        "team namespace a Helm release installs into (ESO's, by createNamespace)",
        [ESO_RELEASE, labelled_team_ns("external-secrets")],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-team-namespace-not-platform",
        "team namespace over a platform Namespace (GPU validation's)",
        [VALIDATION_NS, labelled_team_ns("gpu-validation")],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-team-namespace-not-platform",
        "team namespace of an EKS add-on (CloudWatch's)",
        [CLOUDWATCH_ADDON, labelled_team_ns("amazon-cloudwatch")],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-team-namespace-not-platform",
        "team namespace kube-system",
        [labelled_team_ns("kube-system")],
        {},
        True,
    ),
    (
        "gpu-platform-k8s-team-namespace-not-platform",
        "team namespaces of their own beside the add-ons; an add-on's namespace not installed",
        [
            ESO_RELEASE,
            VALIDATION_NS,
            CLOUDWATCH_ADDON,
            labelled_team_ns("team-a"),
            labelled_team_ns("kyverno"),
        ],
        {},
        False,
    ),
    # Platform
    (
        "gpu-platform-eks-gpu-node-group-taint",
        "GPU group without taint",
        [mng(taints=[])],
        {},
        True,
    ),
    (
        "gpu-platform-eks-gpu-node-group-taint",
        "child GPU group without taint",
        [mng("aws:eks/nodeGroup:NodeGroup", taints=[])],
        {},
        True,
    ),
    (
        "gpu-platform-eks-gpu-node-group-taint",
        "tainted GPU group; untainted CPU group",
        [
            mng(),
            r(
                "eks:index:ManagedNodeGroup",
                "system",
                {
                    "amiType": "AL2023_x86_64_STANDARD",
                    "instanceTypes": ["m6i.xlarge"],
                    "taints": [],
                },
            ),
        ],
        {},
        False,
    ),
    ("gpu-platform-eks-gpu-node-group-bounded", "100 p5 nodes", [mng(max_size=100)], {}, True),
    ("gpu-platform-eks-gpu-node-group-bounded", "4 p5 nodes", [mng(max_size=4)], {}, False),
    (
        "gpu-platform-karpenter-gpu-pool-taint",
        "GPU pool without taint",
        [node_pool(taint=False)],
        {},
        True,
    ),
    ("gpu-platform-karpenter-gpu-pool-taint", "tainted GPU pool", [node_pool()], {}, False),
    (
        "gpu-platform-karpenter-gpu-pool-limit",
        "GPU pool without limit",
        [node_pool(limit=None)],
        {},
        True,
    ),
    (
        "gpu-platform-karpenter-gpu-pool-limit",
        "limit above the budget",
        [node_pool(limit="1024")],
        {},
        True,
    ),
    (
        "gpu-platform-karpenter-gpu-pool-limit",
        "GPU pool with limit",
        [node_pool(limit="64")],
        {},
        False,
    ),
    (
        "gpu-platform-karpenter-node-class-hardened",
        "prod: @latest alias",
        [node_class("al2023@latest")],
        {},
        True,
    ),
    (
        "gpu-platform-karpenter-node-class-hardened",
        "prod: pinned alias",
        [node_class("al2023@v20251010")],
        {},
        False,
    ),
    (
        "gpu-platform-karpenter-node-class-hardened",
        "dev: @latest allowed",
        [node_class("al2023@latest")],
        DEV,
        False,
    ),
    (
        "gpu-platform-karpenter-spot-interruption-queue",
        "spot pool, no queue",
        [node_pool()],
        {},
        True,
    ),
    (
        "gpu-platform-karpenter-spot-interruption-queue",
        "spot pool with queue, rules, setting",
        [node_pool(), *INTERRUPTION],
        {},
        False,
    ),
    (
        "gpu-platform-karpenter-spot-interruption-queue",
        "on-demand pool only",
        [node_pool(spot=False)],
        {},
        False,
    ),
    (
        "gpu-platform-kueue-quota-within-pools",
        "quota 128 > pool 64",
        [node_pool(limit=64), flavor(), cluster_queue(128)],
        {},
        True,
    ),
    (
        "gpu-platform-kueue-quota-within-pools",
        "flavor not declared",
        [node_pool(limit=64), cluster_queue(8)],
        {},
        True,
    ),
    (
        "gpu-platform-kueue-quota-within-pools",
        "quota 64 = pool 64",
        [node_pool(limit=64), flavor(), cluster_queue(64)],
        {},
        False,
    ),
    ("gpu-platform-training-gang-scheduled", "4-node job, no gang", [job(parallelism=4)], {}, True),
    (
        "gpu-platform-training-gang-scheduled",
        "Volcano minAvailable < replicas",
        [
            r(
                "kubernetes:batch.volcano.sh/v1alpha1:Job",
                "v",
                {
                    "apiVersion": "batch.volcano.sh/v1alpha1",
                    "kind": "Job",
                    "metadata": {"name": "v", "namespace": "team-a"},
                    "spec": {
                        "minAvailable": 1,
                        "schedulerName": "volcano",
                        "tasks": [
                            {"name": "worker", "replicas": 4, "template": {"spec": pod_spec()}}
                        ],
                    },
                },
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-training-gang-scheduled",
        "Kueue and Volcano at once",
        [
            job(
                parallelism=2,
                labels={"kueue.x-k8s.io/queue-name": "team-a"},
                annotations={"scheduling.k8s.io/group-name": "g"},
                schedulerName="volcano",
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-training-gang-scheduled",
        "Kueue-queued 4-node job; PyTorchJob via Kueue",
        [
            job(parallelism=4, labels={"kueue.x-k8s.io/queue-name": "team-a"}),
            r(
                "kubernetes:kubeflow.org/v1:PyTorchJob",
                "pt",
                {
                    "apiVersion": "kubeflow.org/v1",
                    "kind": "PyTorchJob",
                    "metadata": {
                        "name": "pt",
                        "namespace": "team-a",
                        "labels": {"kueue.x-k8s.io/queue-name": "team-a"},
                    },
                    "spec": {
                        "pytorchReplicaSpecs": {
                            "Master": {"replicas": 1, "template": {"spec": pod_spec()}},
                            "Worker": {"replicas": 3, "template": {"spec": pod_spec()}},
                        }
                    },
                },
            ),
        ],
        {},
        False,
    ),
    (
        "gpu-platform-training-spot-resilience",
        "spot job without safeguards",
        [job(nodeSelector=SPOT_SELECTOR)],
        {},
        True,
    ),
    (
        "gpu-platform-training-spot-resilience",
        "spot job with checkpoint, grace, do-not-disrupt",
        [
            job(
                nodeSelector=SPOT_SELECTOR,
                annotations={"karpenter.sh/do-not-disrupt": "true"},
                terminationGracePeriodSeconds=300,
                containers=[container(env=CHECKPOINT_ENV)],
            )
        ],
        {},
        False,
    ),
    (
        "gpu-platform-training-deepspeed-batch",
        "64 != 4 x 2 x 16",
        [DS_JOB, ds_config(64)],
        {},
        True,
    ),
    (
        "gpu-platform-training-deepspeed-batch",
        "128 = 4 x 2 x 16",
        [DS_JOB, ds_config(128)],
        {},
        False,
    ),
    (
        "gpu-platform-helm-chart-pinned",
        "version range",
        [r("kubernetes:helm.sh/v3:Release", "kueue", {"chart": "kueue", "version": "^0.19"})],
        {},
        True,
    ),
    (
        "gpu-platform-helm-chart-pinned",
        "no version",
        [r("kubernetes:helm.sh/v4:Chart", "x", {"chart": "oci://r/x"})],
        {},
        True,
    ),
    ("gpu-platform-helm-chart-pinned", "exact version", INTERRUPTION[-1:], {}, False),
]

# --- tenancy: a team job stack stays in its namespace -------------------------------------------

TEAM_NS = {"gpu-platform-job-stack-confined": {"teamNamespace": "team-research"}}
TEAM_JOB = r(
    "kubernetes:batch/v1:Job", "train", {"metadata": {"name": "t", "namespace": "team-research"}}
)
TEAM_COMPONENT = r("gpu-platform:training:TrainingJob", "train", {})
CASES += [
    (
        "gpu-platform-job-stack-confined",
        "job in the team namespace",
        [TEAM_COMPONENT, TEAM_JOB],
        TEAM_NS,
        False,
    ),
    (
        "gpu-platform-job-stack-confined",
        "job in another team's namespace",
        [r("kubernetes:batch/v1:Job", "x", {"metadata": {"name": "x", "namespace": "team-a"}})],
        TEAM_NS,
        True,
    ),
    (
        "gpu-platform-job-stack-confined",
        "cluster-scoped object",
        [
            r(
                "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
                "crb",
                {"metadata": {"name": "crb"}},
            )
        ],
        TEAM_NS,
        True,
    ),
    (
        "gpu-platform-job-stack-confined",
        "cloud resource",
        [r("aws:s3/bucket:Bucket", "b", {"bucket": "b"})],
        TEAM_NS,
        True,
    ),
    (
        "gpu-platform-job-stack-confined",
        "platform stack (no team namespace configured)",
        [r("kubernetes:core/v1:Namespace", "ns", {"metadata": {"name": "team-research"}})],
        {},
        False,
    ),
]

# --- IAM: GitHub OIDC trusts of team deploy roles ------------------------------------------------


GITHUB = "token.actions.githubusercontent.com"


def _github_role(sub: Any, aud: str = "sts.amazonaws.com") -> Res:
    trust = {
        "Effect": "Allow",
        "Principal": {"Federated": f"arn:aws:iam::123456789012:oidc-provider/{GITHUB}"},
        "Action": "sts:AssumeRoleWithWebIdentity",
        "Condition": {
            "StringEquals": {
                "token.actions.githubusercontent.com:aud": aud,
                "token.actions.githubusercontent.com:sub": sub,
            }
        },
    }
    return r("aws:iam/role:Role", "deploy", {"assumeRolePolicy": doc(trust)})


def _team_deploy_trust() -> Res:
    from components.config import TeamDeploy
    from components.platform.tenancy.team_deploy import github_trust_policy

    deploy = TeamDeploy.model_validate({"githubRepo": "org/repo", "environments": ["prod"]})
    policy = github_trust_policy("123456789012", deploy, preview=False)
    return r("aws:iam/role:Role", "deploy", {"assumeRolePolicy": json.dumps(policy)})


CASES += [
    (
        "gpu-platform-iam-trust-scoped",
        "GitHub trust of the team deploy role (exact repo subjects)",
        [_team_deploy_trust()],
        {},
        False,
    ),
    (
        "gpu-platform-iam-trust-scoped",
        "GitHub trust with a wildcard subject",
        [_github_role(["repo:org/*"])],
        {},
        True,
    ),
    (
        "gpu-platform-iam-trust-scoped",
        "GitHub trust without the STS audience",
        [_github_role(["repo:org/repo:pull_request"], aud="")],
        {},
        True,
    ),
]

# The security rules' cases live in their own table (tests/policies/security_cases.py).
from tests.policies.security_cases import SECURITY_CASES  # noqa: E402

CASES += SECURITY_CASES

# The placement rule's cases (tests/policies/placement_cases.py).
from tests.policies.placement_cases import PLACEMENT_CASES  # noqa: E402

CASES += PLACEMENT_CASES

# The fleet rules' cases (tests/policies/fleet_cases.py).
from tests.policies.fleet_cases import FLEET_CASES  # noqa: E402

CASES += FLEET_CASES

# --- node-group autoscaling (policies/rules/autoscaling.py) ---------------------------------------


def _spot_group(types: list[str]) -> Res:
    name, typ, inputs, deps = mng()[1], mng()[0], dict(mng()[2]), ()
    inputs.update(capacityType="SPOT", instanceTypes=types)
    return (typ, name, inputs, deps)


AUTOSCALER_RELEASE = r(
    "kubernetes:helm.sh/v3:Release",
    "autoscaler",
    {"chart": "cluster-autoscaler", "version": "9.59.0", "name": "cluster-autoscaler"},
)
_RESIZE = ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]
_ASG = "arn:aws:autoscaling:us-east-1:123456789012:autoScalingGroup:*"


def _autoscaler_policy(statement: dict[str, Any]) -> Res:
    return r("aws:iam/rolePolicy:RolePolicy", "ca", {"role": "ca", "policy": doc(statement)})


CASES += [
    (
        "gpu-platform-eks-spot-group-diversified",
        "spot group of one type",
        [_spot_group(["g6.xlarge"])],
        {},
        True,
    ),
    (
        "gpu-platform-eks-spot-group-diversified",
        "spot group of three types; on-demand group of one",
        [_spot_group(["g6.xlarge", "g6.2xlarge", "g6.4xlarge"]), mng()],
        {},
        False,
    ),
    (
        "gpu-platform-eks-resizable-group-has-autoscaler",
        "group 0..4 and no autoscaler",
        [mng()],
        {},
        True,
    ),
    (
        "gpu-platform-eks-resizable-group-has-autoscaler",
        "group 0..4 with the autoscaler",
        [mng(), AUTOSCALER_RELEASE],
        {},
        False,
    ),
    (
        "gpu-platform-iam-autoscaler-scoped",
        "resize any Auto Scaling group",
        [_autoscaler_policy({"Effect": "Allow", "Action": _RESIZE, "Resource": "*"})],
        {},
        True,
    ),
    (
        "gpu-platform-iam-autoscaler-scoped",
        "conditioned on the 'enabled' tag only (every cluster's groups)",
        [
            _autoscaler_policy(
                {
                    "Effect": "Allow",
                    "Action": _RESIZE,
                    "Resource": _ASG,
                    "Condition": {
                        "StringEquals": {
                            "aws:ResourceTag/k8s.io/cluster-autoscaler/enabled": "true"
                        }
                    },
                }
            )
        ],
        {},
        True,
    ),
    (
        "gpu-platform-iam-autoscaler-scoped",
        "resize only this cluster's groups",
        [
            _autoscaler_policy(
                {
                    "Effect": "Allow",
                    "Action": _RESIZE,
                    "Resource": _ASG,
                    "Condition": {
                        "StringEquals": {
                            "aws:ResourceTag/k8s.io/cluster-autoscaler/gpu-prod": "owned"
                        }
                    },
                }
            )
        ],
        {},
        False,
    ),
]

from tests.policies.topology_cases import TOPOLOGY_CASES  # noqa: E402

CASES += TOPOLOGY_CASES
