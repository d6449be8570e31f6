"""Security slice (`gpu-platform:security`): trusted images at admission, the platform's ECR
registry, team secrets, and central logs. Defaults are the production choice; dev relaxes in
Pulumi.dev.yaml (admission audits instead of denying). docs/security.md explains each control.

Nothing secret is configured here: the signing identity is public (a cosign public key or a
keyless OIDC issuer/subject), secrets are named by their AWS Secrets Manager path only.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints, model_validator

from components import addons
from components.config.base import Model, Name, Problem, problems_error

ChartVersion = Annotated[str, StringConstraints(pattern=r"^\d+\.\d+\.\d+$")]
#: A registry host with an optional repository path prefix (`ghcr.io/gpu-platform`,
#: `public.ecr.aws/docker`); regex-safe by construction (no wildcards).
RegistryPrefix = Annotated[
    str, StringConstraints(pattern=r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]+)?(/[a-z0-9._-]+)*$")
]
#: A team's secrets live in AWS Secrets Manager under `teams/<team>/<name>`; its IAM role reads
#: that prefix only, and the namespaced SecretStore of that name is the only store its jobs use.
SECRETS_PATH_PREFIX: Final = "teams"
SECRET_STORE_NAME: Final = "aws-secrets-manager"
#: CloudWatch Logs retention values (PutRetentionPolicy accepts only these).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1827, 3653)


class SignatureConfig(Model):
    """Image signatures verified by Kyverno's ImageValidatingPolicy (cosign): exactly one
    signer is trusted (docs/images.md)."""

    enabled: bool = True
    #: kyverno/kyverno chart 3.9.0 = Kyverno v1.19.0 (supports Kubernetes 1.33-1.35).
    kyverno_chart_version: ChartVersion = "3.9.0"
    #: Trust the platform's own signing key: an asymmetric AWS KMS key (ECC_NIST_P256) this
    #: stack creates. `pulumi up` signs the trainer it builds with it, and team deploy roles
    #: may sign the images they push to their repository. The default: admission then trusts
    #: exactly the signer the deploy path uses. Signs only the platform's ECR repositories.
    platform_key: bool = True
    #: Keyless (Sigstore) instead: the OIDC issuer and a regular expression for the signer's
    #: subject, e.g. this repository's release workflow (.github/workflows/release.yml).
    keyless_issuer: str | None = None
    keyless_subject_regexp: str | None = None
    #: Or a cosign public key (PEM; a public key is not a secret) of a signer outside the stack.
    public_key: str | None = None
    #: Repositories a keyless or public-key signer publishes and signs (the release workflow's
    #: `IMAGE`; an entry covers the repositories below it too). Under Deny, an image in a team
    #: namespace from any other repository of an allowed registry can never carry that
    #: signature: synth refuses it (policy gpu-platform-k8s-signable-images) instead of
    #: admission after `up`. The platform key signs the platform's ECR repositories
    #: (`<account ECR>/<cluster>/...`) and needs no list. Empty: no such check.
    signed_repositories: list[RegistryPrefix] = []

    @model_validator(mode="after")
    def _one_attestor(self) -> SignatureConfig:
        keyless = self.keyless_issuer is not None or self.keyless_subject_regexp is not None
        complete = self.keyless_issuer is not None and self.keyless_subject_regexp is not None
        problems: list[Problem] = []
        if keyless and not complete:
            problems.append(
                Problem(
                    "keylessSubjectRegexp" if self.keyless_issuer else "keylessIssuer",
                    None,
                    "both keylessIssuer and keylessSubjectRegexp for a keyless signer",
                )
            )
        signers = [self.platform_key, keyless, self.public_key is not None]
        if self.enabled and sum(signers) != 1:
            problems.append(
                Problem(
                    "platformKey",
                    self.platform_key,
                    "exactly one signer: platformKey, publicKey or keyless* (turn platformKey "
                    "off to trust another signer)",
                )
            )
        if problems:
            raise problems_error(problems)
        return self

    @property
    def signer(self) -> Literal["platform", "keyless", "publicKey"]:
        """Which signer admission trusts."""
        if self.platform_key:
            return "platform"
        return "publicKey" if self.public_key is not None else "keyless"


class ImageAdmissionConfig(Model):
    """What a team namespace may run: images from these registries, pinned by digest, signed."""

    #: Registries besides the account's own ECR (`<account>.dkr.ecr.<region>.amazonaws.com`,
    #: always allowed: the platform's repositories and pull-through caches live there).
    allowed_registries: list[RegistryPrefix] = ["ghcr.io/gpu-platform"]
    require_digest: bool = True
    #: Deny (prod) rejects at admission; Audit records the violation and lets the pod in (dev).
    action: Literal["Deny", "Audit"] = "Deny"
    signatures: SignatureConfig = Field(default_factory=SignatureConfig)


class PullThroughCache(Model):
    """An ECR pull-through cache rule: `<account ECR>/<prefix>/...` mirrors `upstream`."""

    prefix: Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9._-]{1,29}$")]
    upstream: Literal[
        "public.ecr.aws", "registry.k8s.io", "quay.io", "ghcr.io", "registry-1.docker.io"
    ]
    #: Upstreams that need credentials (ghcr.io, Docker Hub): the ARN of a Secrets Manager
    #: secret named `ecr-pullthroughcache/...` (created outside the stack; never a value here).
    credential_arn: (
        Annotated[
            str,
            StringConstraints(
                pattern=r"^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:[0-9]{12}:secret:"
                r"ecr-pullthroughcache/[A-Za-z0-9/_+=.@-]+$"
            ),
        ]
        | None
    ) = None

    @model_validator(mode="after")
    def _credentials(self) -> PullThroughCache:
        needs = self.upstream in ("ghcr.io", "registry-1.docker.io")
        if needs and self.credential_arn is None:
            allowed = f"a secret ARN: {self.upstream} requires authentication"
            raise problems_error([Problem("credentialArn", None, allowed)])
        return self


class RegistryConfig(Model):
    """ECR repositories for the platform's own images and pull-through caches."""

    enabled: bool = True
    repositories: list[Name] = ["trainer", "validation"]
    #: Untagged images expire this many days after their push. In the platform's own
    #: repositories nothing else expires: every image a job was handed keeps an immutable tag
    #: (docs/images.md), so a count rule could only delete images jobs may still run.
    untagged_expire_days: Annotated[int, Field(ge=1, le=365)] = 7
    #: Pull-through cache repositories keep the newest this many images (an expired one is
    #: pulled from upstream again on its next use).
    cache_keep_images: Annotated[int, Field(ge=1, le=1000)] = 50
    #: `pulumi destroy` deletes the platform's repositories with the images in them (ECR
    #: `force_delete`); without it a repository that holds an image stops the destroy. Off by
    #: default: a prod repository holds the digests running jobs and job stacks pin. Dev turns it
    #: on, so `pulumi destroy -s dev` goes through (docs/security.md).
    force_delete: bool = False
    #: Amazon Inspector enhanced scanning is one registry-wide setting per account and region:
    #: only one stack per account may own it (off by default; prod turns it on).
    manage_registry_scanning: bool = False
    pull_through_caches: list[PullThroughCache] = [
        PullThroughCache(prefix="ecr-public", upstream="public.ecr.aws"),
        PullThroughCache(prefix="k8s", upstream="registry.k8s.io"),
        PullThroughCache(prefix="quay", upstream="quay.io"),
    ]


class SecretsConfig(Model):
    """External Secrets Operator: team secrets from AWS Secrets Manager `teams/<team>/*`."""

    enabled: bool = True
    #: external-secrets/external-secrets chart 2.9.0 (API external-secrets.io/v1).
    chart_version: ChartVersion = "2.9.0"
    namespace: Name = addons.EXTERNAL_SECRETS.namespace


class LoggingConfig(Model):
    """Container, node and control-plane logs in CloudWatch Logs, encrypted, with retention."""

    enabled: bool = True
    retention_days: int = 365
    #: Alarms on NCCL watchdog timeouts / aborts (application logs) and GPU XIDs (kernel log).
    alarms: bool = True

    @model_validator(mode="after")
    def _retention(self) -> LoggingConfig:
        if self.retention_days not in LOG_RETENTION_DAYS:
            allowed = ", ".join(map(str, LOG_RETENTION_DAYS))
            problems: list[Problem] = [
                Problem("retentionDays", self.retention_days, f"one of {allowed}")
            ]
            raise problems_error(problems)
        return self


class SecurityConfig(Model):
    """Everything under `gpu-platform:security`."""

    image_admission: ImageAdmissionConfig = Field(default_factory=ImageAdmissionConfig)
    registry: RegistryConfig = Field(default_factory=RegistryConfig)
    secrets: SecretsConfig = Field(default_factory=SecretsConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
