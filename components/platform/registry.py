"""The platform's container registry: ECR repositories for its own images (trainer, validation)
and pull-through cache rules for the public registries jobs use.

Repositories are immutable (a tag cannot be moved under a running job; digests are what the
admission policy requires anyway), KMS-encrypted with the registry's own key, scanned on push,
and expire untagged images and old releases. Pull-through caches put one scanning point and one
egress path (ECR's VPC endpoints, not NAT) in front of public.ecr.aws, registry.k8s.io and
quay.io; their repositories are created on first pull from a creation template with the same
KMS key and lifecycle, and stay MUTABLE (the cache re-syncs tags from upstream). nvcr.io is not
a supported upstream (ECR CreatePullThroughCacheRule `upstreamRegistryUrl`): NGC images are
copied into the `validation` repository by digest in CI (docs/security.md#registry).

Amazon Inspector enhanced scanning (continuous) is one registry-wide setting per account and
region: it is managed only where `security.registry.manageRegistryScanning` is true (prod), so
two stacks in one account never fight over it. Signatures per pulumi-aws 7.51.1 (`aws.ecr.*`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pulumi
import pulumi_aws as aws

from components.config.security import RegistryConfig
from components.platform.handles import ClusterHandles
from components.resource_options import child_options

if TYPE_CHECKING:
    from components.config import StackConfig
    from components.platform.iam import AwsAccount

#: What a node needs to pull through a cache rule for the first time (ECR user guide,
#: "IAM permissions required to sync an upstream registry with an Amazon ECR private registry").
PULL_THROUGH_ACTIONS: Final = ("ecr:BatchImportUpstreamImage", "ecr:CreateRepository")


def repository_name(cluster: str, repository: str) -> str:
    """Per cluster, so two stacks in one account own distinct repositories."""
    return f"{cluster}/{repository}"


def cache_prefix(cluster: str, prefix: str) -> str:
    return f"{cluster}-{prefix}"


def lifecycle_policy(config: RegistryConfig) -> dict[str, Any]:
    """Untagged images expire first; then all but the newest `keepReleases` images. ECR
    evaluates rules by priority and a `tagStatus: any` rule must have the highest number."""
    return {
        "rules": [
            {
                "rulePriority": 1,
                "description": "expire untagged images",
                "selection": {
                    "tagStatus": "untagged",
                    "countType": "sinceImagePushed",
                    "countUnit": "days",
                    "countNumber": config.untagged_expire_days,
                },
                "action": {"type": "expire"},
            },
            {
                "rulePriority": 2,
                "description": f"keep the newest {config.keep_releases} images",
                "selection": {
                    "tagStatus": "any",
                    "countType": "imageCountMoreThan",
                    "countNumber": config.keep_releases,
                },
                "action": {"type": "expire"},
            },
        ]
    }


def node_pull_through_policy(account: AwsAccount, cluster: str) -> dict[str, Any]:
    resource = (
        f"arn:{account.partition}:ecr:{account.region}:{account.account_id}:repository/{cluster}-*"
    )
    return {
        "Version": "2012-10-17",
        "Statement": [
            {"Effect": "Allow", "Action": list(PULL_THROUGH_ACTIONS), "Resource": resource}
        ],
    }


@dataclass(frozen=True)
class RegistryArgs:
    """Inputs of the Registry component."""

    config: RegistryConfig
    cluster_name: str
    account: AwsAccount
    #: Node roles (managed node groups, Karpenter) that pull through the caches.
    node_roles: list[aws.iam.Role]
    tags: dict[str, str]

    @classmethod
    def of(
        cls,
        cfg: StackConfig,
        cluster: ClusterHandles,
        karpenter_node_role: aws.iam.Role,
        account: AwsAccount,
        tags: dict[str, str],
    ) -> RegistryArgs:
        return cls(
            config=cfg.security.registry,
            cluster_name=cfg.cluster.name,
            account=account,
            node_roles=[cluster.node_role, karpenter_node_role],
            tags=tags,
        )


class Registry(pulumi.ComponentResource):
    """ECR repositories, lifecycle rules, pull-through caches and (opt-in) registry scanning."""

    #: repository role (`trainer`, `validation`) -> repository URL.
    repository_urls: dict[str, pulumi.Output[str]]

    def __init__(
        self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:security:Registry", name, None, opts)
        config = args.config
        child = child_options(self, opts)
        self.repository_urls = {}
        if not config.enabled:
            self.register_outputs({})
            return
        key = aws.kms.Key(
            f"{name}-key",
            description=f"ECR images of {args.cluster_name}",
            enable_key_rotation=True,
            tags=args.tags,
            opts=child,
        )
        encryption = [
            aws.ecr.RepositoryEncryptionConfigurationArgs(encryption_type="KMS", kms_key=key.arn)
        ]
        lifecycle = json.dumps(lifecycle_policy(config))
        for role in config.repositories:
            repository = aws.ecr.Repository(
                f"{name}-{role}",
                name=repository_name(args.cluster_name, role),
                image_tag_mutability="IMMUTABLE",
                encryption_configurations=encryption,
                image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(
                    scan_on_push=True
                ),
                tags=args.tags,
                opts=child,
            )
            aws.ecr.LifecyclePolicy(
                f"{name}-{role}-lifecycle",
                repository=repository.name,
                policy=lifecycle,
                opts=child,
            )
            self.repository_urls[role] = repository.repository_url
        self._pull_through_caches(name, args, key, lifecycle)
        for index, node_role in enumerate(args.node_roles):
            aws.iam.RolePolicy(
                f"{name}-node-pull-through-{index}",
                role=node_role.id,
                policy=json.dumps(node_pull_through_policy(args.account, args.cluster_name)),
                opts=child,
            )
        if config.manage_registry_scanning:
            aws.ecr.RegistryScanningConfiguration(
                f"{name}-scanning",
                scan_type="ENHANCED",
                rules=[
                    {
                        "scan_frequency": "CONTINUOUS_SCAN",
                        "repository_filters": [{"filter": "*", "filter_type": "WILDCARD"}],
                    }
                ],
                opts=child,
            )
        self.register_outputs({"repositories": sorted(self.repository_urls)})

    def _pull_through_caches(
        self, name: str, args: RegistryArgs, key: aws.kms.Key, lifecycle: str
    ) -> None:
        """Per upstream registry a pull-through cache rule and the creation template its
        repositories get (KMS, lifecycle, tags)."""
        child = child_options(self)
        template_encryption = [
            aws.ecr.RepositoryCreationTemplateEncryptionConfigurationArgs(
                encryption_type="KMS", kms_key=key.arn
            )
        ]
        for cache in args.config.pull_through_caches:
            prefix = cache_prefix(args.cluster_name, cache.prefix)
            template = aws.ecr.RepositoryCreationTemplate(
                f"{name}-cache-{cache.prefix}-template",
                prefix=prefix,
                applied_fors=["PULL_THROUGH_CACHE"],
                image_tag_mutability="MUTABLE",
                encryption_configurations=template_encryption,
                lifecycle_policy=lifecycle,
                resource_tags=args.tags,
                opts=child,
            )
            aws.ecr.PullThroughCacheRule(
                f"{name}-cache-{cache.prefix}",
                ecr_repository_prefix=prefix,
                upstream_registry_url=cache.upstream,
                credential_arn=cache.credential_arn,
                opts=child_options(self, depends_on=[template]),
            )
