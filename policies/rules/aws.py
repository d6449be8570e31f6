"""AWS rules: S3, IAM, EKS control plane (pulumi-eks component and its `aws:eks` children),
KMS, EC2 launch templates and node groups, SQS, EFS, security groups."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import PolicyResource

from policies.rules.common import (
    CRITICAL,
    HIGH,
    MANDATORY,
    MEDIUM,
    Config,
    Resource,
    as_list,
    dependents,
    dig,
    fmt,
    is_map,
    json_doc,
    resource_rule,
    stack_rule,
    statements,
    truthy,
)

BUCKET = "aws:s3/bucket:Bucket"
BUCKET_SSE = (
    "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration"
)
BUCKET_VERSIONING = "aws:s3/bucketVersioning:BucketVersioning"
BUCKET_PAB = "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock"
BUCKET_POLICY = "aws:s3/bucketPolicy:BucketPolicy"
BUCKET_ACL = "aws:s3/bucketAcl:BucketAcl"
ROLE = "aws:iam/role:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
IAM_POLICY = "aws:iam/policy:Policy"
ROLE_POLICY_ATTACHMENT = "aws:iam/rolePolicyAttachment:RolePolicyAttachment"
EKS_COMPONENT = "eks:index:Cluster"
EKS_CLUSTER = "aws:eks/cluster:Cluster"
MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
LAUNCH_TEMPLATE = "aws:ec2/launchTemplate:LaunchTemplate"
INSTANCE = "aws:ec2/instance:Instance"
EBS_VOLUME = "aws:ebs/volume:Volume"
EFS = "aws:efs/fileSystem:FileSystem"
KMS_KEY = "aws:kms/key:Key"
SQS_QUEUE = "aws:sqs/queue:Queue"
SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
DEFAULT_SECURITY_GROUP = "aws:ec2/defaultSecurityGroup:DefaultSecurityGroup"
SECURITY_GROUP_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
SG_INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"

OPEN_CIDRS = frozenset({"0.0.0.0/0", "::/0"})
EKS_LOG_TYPES = ["api", "audit", "authenticator", "controllerManager", "scheduler"]


# --- S3 -------------------------------------------------------------------------------------------


def _per_bucket(
    resources: Sequence[PolicyResource], companion: str, what: str, ok: Any
) -> Iterator[tuple[str, str | None]]:
    """Every bucket has a companion resource of `companion` type satisfying `ok(props)`."""
    for bucket in resources:
        if bucket.resource_type != BUCKET:
            continue
        found = list(dependents(resources, bucket, companion))
        if not found:
            yield f"bucket {bucket.name!r} has no {companion.rsplit(':', 1)[1]}", bucket.urn
        for item in found:
            if not ok(item.props):
                yield f"bucket {bucket.name!r}: {item.name!r} does not {what}", item.urn


def _sse_is_kms(props: Mapping[str, Any]) -> bool:
    rules = as_list(props.get("rules"))
    return bool(rules) and all(
        dig(rule, "applyServerSideEncryptionByDefault", "sseAlgorithm")
        in ("aws:kms", "aws:kms:dsse")
        for rule in rules
    )


def _check_s3_kms(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    yield from _per_bucket(resources, BUCKET_SSE, "use SSE-KMS (aws:kms)", _sse_is_kms)


def _check_s3_versioning(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    yield from _per_bucket(
        resources,
        BUCKET_VERSIONING,
        "enable versioning",
        lambda p: dig(p, "versioningConfiguration", "status") == "Enabled",
    )


PAB_FIELDS = ("blockPublicAcls", "blockPublicPolicy", "ignorePublicAcls", "restrictPublicBuckets")


def _check_s3_pab(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    yield from _per_bucket(
        resources,
        BUCKET_PAB,
        f"set all of {', '.join(PAB_FIELDS)} to true",
        lambda p: all(truthy(p.get(f)) for f in PAB_FIELDS),
    )


def _denies_plain_http(props: Mapping[str, Any]) -> bool:
    for statement in statements(json_doc(props.get("policy"))):
        secure = dig(statement, "Condition", "Bool", "aws:SecureTransport")
        if statement.get("Effect") == "Deny" and str(secure).lower() == "false":
            return True
    return False


def _check_s3_tls(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    yield from _per_bucket(
        resources, BUCKET_POLICY, "deny requests with aws:SecureTransport=false", _denies_plain_http
    )


def public_principal(principal: Any) -> bool:
    if principal == "*":
        return True
    return is_map(principal) and "*" in as_list(principal.get("AWS"))


def _check_s3_public(resource: Resource, _config: Config) -> Iterator[str]:
    acl = resource.props.get("acl")
    if acl in ("public-read", "public-read-write", "authenticated-read"):
        yield f"ACL {acl!r} makes objects readable outside the account"
    if resource.type == BUCKET_POLICY:
        for statement in statements(json_doc(resource.props.get("policy"))):
            if (
                statement.get("Effect") == "Allow"
                and public_principal(statement.get("Principal"))
                and not statement.get("Condition")
            ):
                yield f"statement {statement.get('Sid', '')!r} allows Principal '*'"


# --- IAM ------------------------------------------------------------------------------------------


# --- EKS control plane ----------------------------------------------------------------------------


def _endpoint(resource: Resource) -> tuple[bool, list[str]]:
    """(public endpoint on?, public CIDRs) for both the component and the aws:eks child."""
    props = resource.props
    if resource.type == EKS_CLUSTER:
        props = props.get("vpcConfig") or {}
    # Both EKS and pulumi-eks default to a public endpoint open to 0.0.0.0/0.
    public = props.get("endpointPublicAccess")
    public_on = True if public is None else truthy(public)
    cidrs = [str(c) for c in as_list(props.get("publicAccessCidrs"))] or ["0.0.0.0/0"]
    return public_on, cidrs


def _check_eks_endpoint(resource: Resource, config: Config) -> Iterator[str]:
    public, cidrs = _endpoint(resource)
    if not public:
        return
    if config["requirePrivateEndpoint"]:
        yield "the API server endpoint is public (endpointPublicAccess must be false)"
    elif OPEN_CIDRS & set(cidrs):
        yield "the public API server endpoint is open to the internet (publicAccessCidrs)"


def _check_eks_secrets(resource: Resource, _config: Config) -> Iterator[str]:
    if resource.type == EKS_COMPONENT:
        if not resource.props.get("encryptionConfigKeyArn"):
            yield "no encryptionConfigKeyArn: Kubernetes secrets are not envelope-encrypted"
        return
    configs = as_list(resource.props.get("encryptionConfig"))
    if not any(
        "secrets" in as_list(dig(c, "resources")) and dig(c, "provider", "keyArn") for c in configs
    ):
        yield "no encryptionConfig for `secrets` with a KMS key"


def _check_eks_logs(resource: Resource, config: Config) -> Iterator[str]:
    enabled = {str(t) for t in as_list(resource.props.get("enabledClusterLogTypes"))}
    missing = [t for t in config["requiredLogTypes"] if t not in enabled]
    if missing:
        yield f"control-plane log types missing: {', '.join(missing)}"


def _check_eks_auth(resource: Resource, config: Config) -> Iterator[str]:
    mode = resource.props.get("authenticationMode")
    if resource.type == EKS_CLUSTER:
        mode = dig(resource.props, "accessConfig", "authenticationMode")
    if mode not in config["allowedModes"]:
        yield f"authenticationMode {mode!r}; allowed: {', '.join(config['allowedModes'])}"


# --- KMS, EC2, node groups, SQS, EFS, security groups ------------------------------------------


def _check_kms_rotation(resource: Resource, _config: Config) -> Iterator[str]:
    spec = resource.props.get("customerMasterKeySpec") or resource.props.get("keySpec")
    if spec not in (None, "SYMMETRIC_DEFAULT"):
        return  # AWS rotates only symmetric keys
    if not truthy(resource.props.get("enableKeyRotation")):
        yield "enableKeyRotation is not true"


def _check_imdsv2(resource: Resource, config: Config) -> Iterator[str]:
    options = resource.props.get("metadataOptions") or {}
    if options.get("httpTokens") != "required":
        yield "metadataOptions.httpTokens must be 'required' (IMDSv2 only)"
    hops = options.get("httpPutResponseHopLimit")
    if hops is not None and int(hops) > config["maxHopLimit"]:
        yield f"httpPutResponseHopLimit {fmt(hops)} lets containers reach the node's credentials"


def _check_encrypted_volumes(resource: Resource, _config: Config) -> Iterator[str]:
    props = resource.props
    if resource.type in (EBS_VOLUME, EFS):
        if not truthy(props.get("encrypted")):
            yield "`encrypted` is not true"
        return
    for mapping in as_list(props.get("blockDeviceMappings")) + (
        [{"deviceName": "root", "ebs": props.get("rootBlockDevice")}]
        if props.get("rootBlockDevice")
        else []
    ):
        ebs = dig(mapping, "ebs")
        if is_map(ebs) and not truthy(ebs.get("encrypted")):
            yield f"EBS volume {dig(mapping, 'deviceName')!r} is not encrypted"


def _check_node_group_template(resource: Resource, _config: Config) -> Iterator[str]:
    if not dig(resource.props, "launchTemplate", "id") and not dig(
        resource.props, "launchTemplate", "name"
    ):
        yield "no launchTemplate: IMDSv2 and root-volume encryption are not under our control"
    if resource.props.get("remoteAccess"):
        yield "remoteAccess opens SSH to the nodes; use SSM Session Manager"


def _check_sqs(resource: Resource, _config: Config) -> Iterator[str]:
    if not truthy(resource.props.get("sqsManagedSseEnabled")) and not resource.props.get(
        "kmsMasterKeyId"
    ):
        yield "neither sqsManagedSseEnabled nor kmsMasterKeyId is set"


def _open_cidrs(rule: Any) -> set[str]:
    found: set[str] = set()
    for key in ("cidrBlocks", "ipv6CidrBlocks", "cidrIpv4", "cidrIpv6"):
        found |= {str(c) for c in as_list(dig(rule, key))} & OPEN_CIDRS
    return found


def _check_open_ingress(resource: Resource, _config: Config) -> Iterator[str]:
    props = resource.props
    if resource.type in (SECURITY_GROUP, DEFAULT_SECURITY_GROUP):
        rules = [r for r in as_list(props.get("ingress")) if is_map(r)]
    elif resource.type == SECURITY_GROUP_RULE:
        rules = [props] if props.get("type") == "ingress" else []
    else:
        rules = [props]
    for rule in rules:
        opened = _open_cidrs(rule)
        if opened:
            ports = f"{fmt(rule.get('fromPort', '?'))}-{fmt(rule.get('toPort', '?'))}"
            yield f"ingress from {', '.join(sorted(opened))} on ports {ports}"


POLICIES = [
    stack_rule(
        name="gpu-platform-s3-encryption-kms",
        description="Every S3 bucket has default encryption with a KMS key (SSE-KMS).",
        check=_check_s3_kms,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Add an aws.s3.BucketServerSideEncryptionConfiguration for the bucket with "
        "sse_algorithm='aws:kms' and the platform's KMS key.",
    ),
    stack_rule(
        name="gpu-platform-s3-versioning",
        description="Every S3 bucket has versioning enabled (checkpoints survive overwrites).",
        check=_check_s3_versioning,
        severity=MEDIUM,
        enforcement=MANDATORY,
        remediation="Add an aws.s3.BucketVersioning with status 'Enabled' for the bucket; "
        "expire old versions with a lifecycle rule instead of disabling versioning.",
    ),
    stack_rule(
        name="gpu-platform-s3-public-access-block",
        description="Every S3 bucket has a public access block with all four settings on.",
        check=_check_s3_pab,
        severity=CRITICAL,
        enforcement=MANDATORY,
        remediation="Add an aws.s3.BucketPublicAccessBlock with block_public_acls, "
        "block_public_policy, ignore_public_acls and restrict_public_buckets all true.",
    ),
    stack_rule(
        name="gpu-platform-s3-tls-only",
        description="Every S3 bucket policy denies requests without TLS.",
        check=_check_s3_tls,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Add a bucket policy statement: Effect Deny, Principal '*', Action 's3:*', "
        "Condition Bool aws:SecureTransport 'false'.",
    ),
    resource_rule(
        name="gpu-platform-s3-no-public-access",
        description="No S3 bucket ACL or bucket policy grants access to everyone.",
        types=(BUCKET, BUCKET_ACL, BUCKET_POLICY),
        check=_check_s3_public,
        severity=CRITICAL,
        enforcement=MANDATORY,
        remediation="Use a private ACL (or none) and name principals explicitly in bucket "
        "policies; share data through IAM roles or presigned URLs.",
    ),
    resource_rule(
        name="gpu-platform-eks-private-endpoint",
        description="The EKS API endpoint is private (prod) and never open to 0.0.0.0/0.",
        types=(EKS_COMPONENT, EKS_CLUSTER),
        check=_check_eks_endpoint,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Set gpu-platform:cluster.endpointPublicAccess to false (reach the API "
        "through the VPC), or for dev restrict publicAccessCidrs.",
        config={"requirePrivateEndpoint": {"type": "boolean", "default": True}},
    ),
    resource_rule(
        name="gpu-platform-eks-secrets-encryption",
        description="Kubernetes secrets are envelope-encrypted with a KMS key.",
        types=(EKS_COMPONENT, EKS_CLUSTER),
        check=_check_eks_secrets,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Pass encryption_config_key_arn (a rotating KMS key) to eks.Cluster.",
    ),
    resource_rule(
        name="gpu-platform-eks-control-plane-logs",
        description="The EKS control plane ships the required log types (audit at least).",
        types=(EKS_COMPONENT, EKS_CLUSTER),
        check=_check_eks_logs,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Add the missing types to gpu-platform:cluster.logTypes.",
        config={
            "requiredLogTypes": {
                "type": "array",
                "items": {"type": "string", "enum": EKS_LOG_TYPES},
                "default": EKS_LOG_TYPES,
            }
        },
    ),
    resource_rule(
        name="gpu-platform-eks-api-auth-mode",
        description="Cluster access is managed by EKS access entries (authenticationMode API), "
        "not the aws-auth ConfigMap.",
        types=(EKS_COMPONENT, EKS_CLUSTER),
        check=_check_eks_auth,
        severity=MEDIUM,
        enforcement=MANDATORY,
        remediation="Set authentication_mode=eks.AuthenticationMode.API and grant access "
        "with access entries.",
        config={
            "allowedModes": {
                "type": "array",
                "items": {"type": "string", "enum": ["API", "API_AND_CONFIG_MAP", "CONFIG_MAP"]},
                "default": ["API"],
            }
        },
    ),
    resource_rule(
        name="gpu-platform-kms-key-rotation",
        description="Symmetric KMS keys rotate automatically.",
        types=(KMS_KEY,),
        check=_check_kms_rotation,
        severity=MEDIUM,
        enforcement=MANDATORY,
        remediation="Set enable_key_rotation=True on the key.",
    ),
    resource_rule(
        name="gpu-platform-ec2-imdsv2",
        description="Launch templates and instances require IMDSv2 with a hop limit that keeps "
        "pods away from node credentials.",
        types=(LAUNCH_TEMPLATE, INSTANCE),
        check=_check_imdsv2,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="metadata_options: http_tokens='required', http_put_response_hop_limit=1 "
        "(components/platform/cluster/cluster.py launch_template_spec).",
        config={"maxHopLimit": {"type": "integer", "minimum": 1, "maximum": 64, "default": 1}},
    ),
    resource_rule(
        name="gpu-platform-ec2-encrypted-volumes",
        description="EBS volumes of launch templates, instances and standalone volumes, and EFS "
        "file systems, are encrypted.",
        types=(LAUNCH_TEMPLATE, INSTANCE, EBS_VOLUME, EFS),
        check=_check_encrypted_volumes,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Set ebs.encrypted='true' on every block device mapping, encrypted=True on "
        "volumes and file systems.",
    ),
    resource_rule(
        name="gpu-platform-eks-node-group-launch-template",
        description="Managed node groups use our launch template (IMDSv2, encrypted root) and "
        "no SSH remote access.",
        types=(MANAGED_NODE_GROUP, EKS_NODE_GROUP),
        check=_check_node_group_template,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Create node groups through Cluster._node_group (launch_template_spec).",
    ),
    resource_rule(
        name="gpu-platform-sqs-encryption",
        description="SQS queues (the Karpenter interruption queue) are encrypted at rest.",
        types=(SQS_QUEUE,),
        check=_check_sqs,
        severity=MEDIUM,
        enforcement=MANDATORY,
        remediation="Set sqs_managed_sse_enabled=True (or kms_master_key_id).",
    ),
    resource_rule(
        name="gpu-platform-ec2-no-open-ingress",
        description="No security group admits ingress from 0.0.0.0/0 or ::/0.",
        types=(SECURITY_GROUP, DEFAULT_SECURITY_GROUP, SECURITY_GROUP_RULE, SG_INGRESS_RULE),
        check=_check_open_ingress,
        severity=CRITICAL,
        enforcement=MANDATORY,
        remediation="Admit traffic from security groups or the VPC CIDR; expose services "
        "through an internal load balancer.",
    ),
]
