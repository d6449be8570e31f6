"""Security slice (`gpu-platform:security`): trusted images at admission, the platform's ECR
registry, team secrets, and central logs. Defaults are the production choice; dev relaxes in
Pulumi.dev.yaml (admission audits instead of denying). docs/security.md explains each control.

Nothing secret is configured here: the signing identity is public (a cosign public key or a
keyless OIDC issuer/subject), secrets are named by their AWS Secrets Manager path only.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints, model_validator

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
    """Image signatures verified by Kyverno's ImageValidatingPolicy (cosign)."""

    enabled: bool = True
    #: kyverno/kyverno chart 3.9.0 = Kyverno v1.19.0 (supports Kubernetes 1.33-1.35).
    kyverno_chart_version: ChartVersion = "3.9.0"
    #: Keyless (Sigstore): the OIDC issuer and a regular expression for the signer's subject,
    #: e.g. the release workflow of this repository.
    keyless_issuer: str | None = "https://token.actions.githubusercontent.com"
    keyless_subject_regexp: str | None = (
        r"^https://github\.com/gpu-platform/gpu-platform/\.github/workflows/release\.yml@refs/tags/.*$"
    )
    #: Or a cosign public key (PEM; a public key is not a secret) instead of keyless.
    public_key: str | None = None
    #: Repositories the trusted signer publishes and signs (the release workflow's `IMAGE`,
    #: .github/workflows/release.yml). An image in a team namespace from any other repository
    #: of an allowed registry can never carry that signature: under Deny, synth refuses it
    #: (policy gpu-platform-k8s-signable-images) instead of admission rejecting it after `up`.
    #: Empty: no such check (e.g. a key several pipelines share).
    signed_repositories: list[RegistryPrefix] = ["ghcr.io/gpu-platform/trainer"]

    @model_validator(mode="after")
    def _one_attestor(self) -> SignatureConfig:
        keyless = self.keyless_issuer is not None and self.keyless_subject_regexp is not None
        if self.enabled and keyless == (self.public_key is not None):
            raise problems_error(
                [("publicKey", self.public_key, "exactly one of publicKey and keyless*")]
            )
        return self


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
            raise problems_error([("credentialArn", None, allowed)])
        return self


class RegistryConfig(Model):
    """ECR repositories for the platform's own images and pull-through caches."""

    enabled: bool = True
    repositories: list[Name] = ["trainer", "validation"]
    #: Untagged images expire after this many days; at most `keepReleases` tagged images stay.
    untagged_expire_days: Annotated[int, Field(ge=1, le=365)] = 7
    keep_releases: Annotated[int, Field(ge=1, le=1000)] = 50
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
    namespace: Name = "external-secrets"


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
            problems: list[Problem] = [("retentionDays", self.retention_days, f"one of {allowed}")]
            raise problems_error(problems)
        return self


class SecurityConfig(Model):
    """Everything under `gpu-platform:security`."""

    image_admission: ImageAdmissionConfig = Field(default_factory=ImageAdmissionConfig)
    registry: RegistryConfig = Field(default_factory=RegistryConfig)
    secrets: SecretsConfig = Field(default_factory=SecretsConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
