"""The platform's container registry: ECR repositories for its own images (trainer, validation)
and pull-through cache rules for the public registries jobs use.

Repositories' tags are immutable (a tag cannot be moved under a running job; digests are what
the admission policy requires anyway) except three that tools rewrite by design: cosign's
signature tags `sha256-<digest>.sig` (a second signature appends to the tag: sigstore/cosign
issue #313, "Cosign support for registries with immutable tags"), BuildKit's registry cache
tag `buildcache` (rewritten by every build) and the trainer build's staging tag `build` (moved
by every push; the tag jobs run by is the immutable pin tag: trainer_image.py) — ECR's
IMMUTABLE_WITH_EXCLUSION with wildcard filters (pulumi-aws 7.51.1
`aws.ecr.Repository.image_tag_mutability_exclusion_filters`: "filters to specify which image
tags can override the default tag mutability setting"). They are KMS-encrypted with the
registry's own key, scanned on push, and expire untagged images only (`lifecycle_policy`).

The platform's signing key (when admission trusts it, `signatures.platformKey`): an asymmetric
KMS key (ECC_NIST_P256, SIGN_VERIFY) that cosign signs with through `awskms:///<key ARN>`
(components/platform/registry/trainer_image.py); its public key (`kms:GetPublicKey`, read at deploy
time) is what Kyverno verifies against, so the cluster needs no KMS permission. AWS does not
rotate asymmetric keys (the rotation policy exempts them).

Pull-through caches put one scanning point and one egress path (ECR's VPC endpoints, not NAT) in
front of public.ecr.aws, registry.k8s.io and quay.io; their repositories are created on first pull
from a creation template with the same KMS key and lifecycle, and stay MUTABLE (the cache re-syncs
tags from upstream). nvcr.io is not a supported upstream (ECR CreatePullThroughCacheRule
`upstreamRegistryUrl`): NGC images are copied into the `validation` repository by digest in CI
(docs/security.md#registry).

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

from components import catalog
from components.config.images import TRAINER_REPOSITORY
from components.config.security import RegistryConfig
from components.platform.cluster.handles import ClusterHandles
from components.resource_options import child_options

if TYPE_CHECKING:
    from components.config import StackConfig
    from components.platform.cluster.iam import AwsAccount

#: Tags exempt from immutability: cosign signatures and BuildKit's registry cache
#: (components/platform/registry/trainer_image.py CACHE_TAG). ECR filters allow letters, digits and
#: `._*-`, at most two wildcards (pulumi-aws 7.51.1 RepositoryImageTagMutabilityExclusionFilter).
MUTABLE_TAG_FILTERS: Final = catalog.ECR_MUTABLE_TAG_FILTERS
#: What a node needs to pull through a cache rule for the first time (ECR user guide,
#: "IAM permissions required to sync an upstream registry with an Amazon ECR private registry").
PULL_THROUGH_ACTIONS: Final = ("ecr:BatchImportUpstreamImage", "ecr:CreateRepository")


def repository_name(cluster: str, repository: str) -> str:
    """Per cluster, so two stacks in one account own distinct repositories."""
    return f"{cluster}/{repository}"


def team_repository_name(cluster: str, team: str) -> str:
    """Where a team's CI pushes its own images (signable with the platform key)."""
    return f"{cluster}/teams/{team}"


def signing_key_alias(cluster: str) -> str:
    return f"alias/{cluster}-image-signing"


def cache_prefix(cluster: str, prefix: str) -> str:
    return f"{cluster}-{prefix}"


def _untagged_rule(config: RegistryConfig) -> dict[str, Any]:
    return {
        "rulePriority": 1,
        "description": "expire untagged images",
        "selection": {
            "tagStatus": "untagged",
            "countType": "sinceImagePushed",
            "countUnit": "days",
            "countNumber": config.untagged_expire_days,
        },
        "action": {"type": "expire"},
    }


def lifecycle_policy(config: RegistryConfig) -> dict[str, Any]:
    """The platform's own repositories: untagged images expire, nothing else. "If you specify
    `untagged`" a rule selects images without tags, while "`any` ... all images have the rule
    evaluated against them" (ECR user guide, lifecycle_policy_parameters: tagStatus). Every
    image a job was handed keeps an immutable tag (the trainer's pin tag, a team's CI tag; a
    job resolves no tag that moves: components/analysis/images.py), so none of them can expire;
    a count rule over `any` or `tagged` images would delete old images a job stack may still
    run by digest. What does expire: a staging push moved away from before it was pinned, a
    cache or signature manifest a later build or signature replaced."""
    return {"rules": [_untagged_rule(config)]}


def cache_lifecycle_policy(config: RegistryConfig) -> dict[str, Any]:
    """Pull-through cache repositories: untagged images expire, then all but the newest
    `cacheKeepImages` (ECR evaluates rules by priority and a `tagStatus: any` rule must have
    the highest number). An expired cached image is pulled from upstream again when used."""
    return {
        "rules": [
            _untagged_rule(config),
            {
                "rulePriority": 2,
                "description": f"keep the newest {config.cache_keep_images} cached images",
                "selection": {
                    "tagStatus": "any",
                    "countType": "imageCountMoreThan",
                    "countNumber": config.cache_keep_images,
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
    #: Create the platform's image-signing key (admission trusts it: signatures.platformKey).
    signing_key: bool = False
    #: Teams with a deploy identity: each gets a repository `<cluster>/teams/<team>` its CI
    #: pushes (and signs) its own images to (components/platform/tenancy/team_deploy.py).
    teams: tuple[str, ...] = ()
    #: The fleet's trainer home (`fleet.trainerReplicas`): the regions the trainer repository
    #: is replicated to (`Registry._replication`).
    replica_regions: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        cfg: StackConfig,
        cluster: ClusterHandles,
        karpenter_node_role: aws.iam.Role,
        account: AwsAccount,
        tags: dict[str, str],
    ) -> RegistryArgs:
        signatures = cfg.security.image_admission.signatures
        return cls(
            config=cfg.security.registry,
            cluster_name=cfg.cluster.name,
            account=account,
            node_roles=[cluster.node_role, karpenter_node_role],
            tags=tags,
            signing_key=signatures.enabled and signatures.signer == "platform",
            teams=tuple(team.name for team in cfg.teams if team.deploy is not None),
            replica_regions=tuple(cfg.fleet.trainer_replicas) if cfg.fleet is not None else (),
        )


class Registry(pulumi.ComponentResource):
    """ECR repositories, lifecycle rules, pull-through caches and (opt-in) registry scanning."""

    #: repository role (`trainer`, `validation`) -> repository URL.
    repository_urls: dict[str, pulumi.Output[str]]
    #: repository role -> repository name (`<cluster>/<role>`).
    repository_names: dict[str, pulumi.Output[str]]
    #: The platform's image-signing key (`signing_key`), and its public key in PEM.
    signing_key_arn: pulumi.Output[str] | None
    signing_public_key: pulumi.Output[str] | None
    #: team -> its repository (`<cluster>/teams/<team>`) for the images its CI builds.
    team_repositories: dict[str, aws.ecr.Repository]
    #: The trainer repository's replication (`replica_regions`): the trainer is pushed after it,
    #: or its first push is never replicated.
    replication: aws.ecr.ReplicationConfiguration | None

    def __init__(
        self, name: str, args: RegistryArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:security:Registry", name, None, opts)
        config = args.config
        child = child_options(self)
        self.repository_urls = {}
        self.repository_names = {}
        self.team_repositories = {}
        self.replication = None
        self.signing_key_arn = self.signing_public_key = None
        if args.signing_key:
            self._signing_key(name, args)
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
        self._repositories(name, args, key, json.dumps(lifecycle_policy(config)))
        if args.replica_regions and TRAINER_REPOSITORY in self.repository_names:
            self.replication = self._replication(name, args)
        self._pull_through_caches(name, args, key, json.dumps(cache_lifecycle_policy(config)))
        self._node_pull_through_access(name, args)
        if config.manage_registry_scanning:
            self._registry_scanning(name)
        self.register_outputs({"repositories": sorted(self.repository_urls)})

    def _repositories(
        self, name: str, args: RegistryArgs, key: aws.kms.Key, lifecycle: str
    ) -> None:
        """The platform's repositories (by role) and one per team, recorded for the outputs."""
        for role in args.config.repositories:
            repository = self._repository(
                f"{name}-{role}", repository_name(args.cluster_name, role), args, key, lifecycle
            )
            self.repository_urls[role] = repository.repository_url
            self.repository_names[role] = repository.name
        for team in args.teams:
            self.team_repositories[team] = self._repository(
                f"{name}-team-{team}",
                team_repository_name(args.cluster_name, team),
                args,
                key,
                lifecycle,
            )

    def _replication(self, name: str, args: RegistryArgs) -> aws.ecr.ReplicationConfiguration:
        """The fleet's trainer home: its trainer repository replicated to every other worker's
        region (module docstring of components/analysis/fleet_trainer.py), and in each a
        creation template for the replica ECR creates on the first replicated push.

        One replication configuration per registry (account and region: "Replication is
        configured for a private registry separately for each Region", ECR user guide), so only
        the trainer home manages it; "Only repository content pushed to a repository after
        replication is configured is replicated", so the trainer is pushed after it
        (`replication`). The replica keeps the repository's name and digests, and cosign's
        signature tags (pushed to the same repository) with them. Its template: tags immutable
        but those the tools move, as here; no lifecycle policy — a job in that region may run
        any pinned digest, and whether a tag *added* to a pushed image (the pin tag) reaches
        the replica is not documented, so an untagged-expiry rule could expire a digest a job
        runs there; encrypted with AES-256 (a KMS key in the other region would need a custom
        role the template assumes, pulumi-aws 7.51.1 `RepositoryCreationTemplate
        .custom_role_arn`: "Required if using repository tags or KMS encryption")."""
        trainer = repository_name(args.cluster_name, TRAINER_REPOSITORY)
        templates = [
            aws.ecr.RepositoryCreationTemplate(
                f"{name}-replica-{region}",
                prefix=args.cluster_name,
                applied_fors=["REPLICATION"],
                description=f"replicas of {trainer} (the fleet's trainer)",
                image_tag_mutability="IMMUTABLE_WITH_EXCLUSION",
                image_tag_mutability_exclusion_filters=[
                    aws.ecr.RepositoryCreationTemplateImageTagMutabilityExclusionFilterArgs(
                        filter=pattern, filter_type="WILDCARD"
                    )
                    for pattern in MUTABLE_TAG_FILTERS
                ],
                encryption_configurations=[
                    aws.ecr.RepositoryCreationTemplateEncryptionConfigurationArgs(
                        encryption_type="AES256"
                    )
                ],
                region=region,
                opts=child_options(self),
            )
            for region in args.replica_regions
        ]
        replication = aws.ecr.ReplicationConfiguration(
            f"{name}-replication",
            replication_configuration={
                "rules": [
                    {
                        "destinations": [
                            {"region": region, "registry_id": args.account.account_id}
                            for region in args.replica_regions
                        ],
                        "repository_filters": [{"filter": trainer, "filter_type": "PREFIX_MATCH"}],
                    }
                ]
            },
            # The templates first: ECR creates each replica on the first replicated push.
            opts=child_options(self, depends_on=templates),
        )
        return replication

    def _node_pull_through_access(self, name: str, args: RegistryArgs) -> None:
        """Node roles may pull through the caches: a first pull imports and creates a repository."""
        for index, node_role in enumerate(args.node_roles):
            aws.iam.RolePolicy(
                f"{name}-node-pull-through-{index}",
                role=node_role.id,
                policy=json.dumps(node_pull_through_policy(args.account, args.cluster_name)),
                opts=child_options(self),
            )

    def _registry_scanning(self, name: str) -> None:
        """Inspector continuous scanning: one setting per account and region, so a stack opts in."""
        aws.ecr.RegistryScanningConfiguration(
            f"{name}-scanning",
            scan_type="ENHANCED",
            rules=[
                {
                    "scan_frequency": "CONTINUOUS_SCAN",
                    "repository_filters": [{"filter": "*", "filter_type": "WILDCARD"}],
                }
            ],
            opts=child_options(self),
        )

    def _repository(
        self, name: str, repo_name: str, args: RegistryArgs, key: aws.kms.Key, lifecycle: str
    ) -> aws.ecr.Repository:
        """One repository: immutable tags (but cosign's and the build cache's), KMS-encrypted
        with the registry key, scanned on push, with the lifecycle rules."""
        repository = aws.ecr.Repository(
            name,
            name=repo_name,
            image_tag_mutability="IMMUTABLE_WITH_EXCLUSION",
            image_tag_mutability_exclusion_filters=[
                aws.ecr.RepositoryImageTagMutabilityExclusionFilterArgs(
                    filter=pattern, filter_type="WILDCARD"
                )
                for pattern in MUTABLE_TAG_FILTERS
            ],
            encryption_configurations=[
                aws.ecr.RepositoryEncryptionConfigurationArgs(
                    encryption_type="KMS", kms_key=key.arn
                )
            ],
            image_scanning_configuration=aws.ecr.RepositoryImageScanningConfigurationArgs(
                scan_on_push=True
            ),
            # "If `true`, will delete the repository even if it contains images" (pulumi-aws
            # 7.51.1 aws.ecr.Repository): only where the stack says so (dev).
            force_delete=args.config.force_delete or None,
            tags=args.tags,
            opts=child_options(self),
        )
        aws.ecr.LifecyclePolicy(
            f"{name}-lifecycle",
            repository=repository.name,
            policy=lifecycle,
            opts=child_options(self),
        )
        return repository

    def _signing_key(self, name: str, args: RegistryArgs) -> None:
        """The asymmetric KMS key cosign signs with, its alias, and its public key."""
        key = aws.kms.Key(
            f"{name}-signing-key",
            description=f"cosign image signatures of {args.cluster_name}",
            customer_master_key_spec="ECC_NIST_P256",
            key_usage="SIGN_VERIFY",
            tags=args.tags,
            opts=child_options(self),
        )
        aws.kms.Alias(
            f"{name}-signing-key",
            name=signing_key_alias(args.cluster_name),
            target_key_id=key.key_id,
            opts=child_options(self),
        )
        self.signing_key_arn = key.arn
        self.signing_public_key = aws.kms.get_public_key_output(
            key_id=key.arn, opts=pulumi.InvokeOutputOptions(parent=self)
        ).public_key_pem

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
