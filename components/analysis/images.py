"""Where does a job's image come from, and will admission let it in?

Source (`image_source`): every image a job runs is pinned by a digest that comes from a
registry, never from config — the reference trainer built and pushed by this stack
(`images.trainer.build`), a tag in an ECR registry resolved to its digest at deploy time (a
published trainer tag, or a job's own tag where `training.requireImageDigest` is off), or a
digest the config gives. A tag that cannot be resolved is a job that cannot run
(`image_source_problems`).

Admission: the pre-deploy side of the two admission policies the platform renders into team
namespaces (components/platform/registry/admission.py): the ValidatingAdmissionPolicy (allowed
registry, digest) and Kyverno's ImageValidatingPolicy (a signature by the one trusted signer on
every image from those registries).

Under `security.imageAdmission.action: Deny` an image either policy rejects is a job that
cannot run, so it is a config error naming `trainingJobs[i].image` (platform and job stacks
alike: both run analysis.check). Under Audit, admission lets the pod in and records it.

What can be known offline, and is checked here: the registry, the digest, and whether the image
comes from a repository the trusted signer signs (the platform key: the platform's own ECR
repositories; a keyless or public-key signer: `signatures.signedRepositories`), so an image
elsewhere can never carry its signature. Whether an image actually carries the signature cannot
be seen without the registry (docs/security.md).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from components import catalog
from components.config import Problem, StackConfig, TrainingJobConfig
from components.config.images import TRAINER_REPOSITORY

#: The account's own ECR (`<account>.dkr.ecr.<region>.amazonaws.com`), always allowed. The
#: account is known only at deploy time: any account here, the exact one in the admission policy.
ECR_HOST: Final = r"[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com"
DIGEST: Final = re.compile(r"@sha256:[a-f0-9]{64}$")
#: A tag-only reference into an ECR registry: account, region, repository, tag.
ECR_TAG: Final = re.compile(
    r"^(?P<account>[0-9]{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com/"
    r"(?P<repository>[a-z0-9._/-]+):(?P<tag>[A-Za-z0-9_][A-Za-z0-9._-]{0,127})$"
)


@dataclass(frozen=True)
class EcrTag:
    """A tag in an ECR repository, resolved to its digest at deploy time (ECR DescribeImages
    through `aws.ecr.get_image`). `account`/`region` None: the stack's own."""

    repository: str
    tag: str
    account: str | None = None
    region: str | None = None


@dataclass(frozen=True)
class ImageSource:
    """Where one job's image digest comes from."""

    #: built: the reference trainer, built and pushed by this stack; resolved: an ECR tag the
    #: deploy resolves to its digest; digest: given by digest in the config.
    kind: Literal["built", "resolved", "digest"]
    #: The reference trainer (images/trainer) rather than an image of the job's own.
    trainer: bool
    #: The configured reference (`repo[:tag][@sha256:...]`); None for the reference trainer.
    reference: str | None = None
    #: What a `resolved` source resolves.
    ecr: EcrTag | None = None

    @property
    def identity(self) -> str:
        """What the source is, known before the deploy (the run's config hash reads it): the
        digest reference, the ECR tag, or the trainer's build context (its content decides the
        tag the build pushes)."""
        if self.ecr is not None:
            where = f"{self.ecr.account or ''}/{self.ecr.region or ''}"
            return f"ecr:{where}/{self.ecr.repository}:{self.ecr.tag}"
        return self.reference or "built:images/trainer"


def image_source(cfg: StackConfig, job: TrainingJobConfig) -> ImageSource | None:
    """Where `job`'s digest comes from; None for a tag that no deploy can resolve (a registry
    other than ECR, or no tag at all) — `image_source_problems` says why."""
    image = job.image or cfg.training.default_image
    if image is None:
        trainer = cfg.images.trainer
        if trainer.build:
            return ImageSource(kind="built", trainer=True)
        repository = f"{cfg.cluster.name}/{TRAINER_REPOSITORY}"
        tag = trainer.tag or ""
        return ImageSource(kind="resolved", trainer=True, ecr=EcrTag(repository, tag))
    if DIGEST.search(image):
        return ImageSource(kind="digest", trainer=False, reference=image)
    match = ECR_TAG.match(image)
    if match is None:
        return None
    ecr = EcrTag(match["repository"], match["tag"], match["account"], match["region"])
    return ImageSource(kind="resolved", trainer=False, reference=image, ecr=ecr)


def image_source_problems(cfg: StackConfig, key: str, job: TrainingJobConfig) -> list[Problem]:
    """A job whose image no deploy can pin to a digest cannot run: `{key}.image`. Nor one that
    resolves a tag the platform's repositories let tools move (catalog.ECR_MUTABLE_TAG_FILTERS:
    the trainer build's staging tag, BuildKit's cache, cosign's signatures): the digest it
    resolved to is left untagged when the tag moves, and untagged images expire
    (components/platform/registry/registry.py `lifecycle_policy`)."""
    source = image_source(cfg, job)
    if source is not None:
        if source.ecr is not None and not source.trainer and catalog.ecr_tag_moves(source.ecr.tag):
            moving = ", ".join(catalog.ECR_MUTABLE_TAG_FILTERS)
            return [
                Problem(
                    f"{key}.image",
                    job.image,
                    f"a tag that never moves, or an image by digest: {moving} are rewritten by "
                    "the deploy's tools, and the digest a moved tag left behind expires",
                )
            ]
        return []
    return [
        Problem(
            f"{key}.image",
            job.image,
            "an image by digest (repo[:tag]@sha256:...), or a tag in an ECR registry "
            "(<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>) that the deploy resolves "
            "to its digest; a tag in another registry cannot be resolved at deploy time",
        )
    ]


def image_pattern(
    registries: list[str],
    *,
    require_digest: bool,
    extra_hosts: tuple[str, ...] = (),
    repositories: tuple[str, ...] = (),
) -> str:
    """An RE2- and Python-compatible pattern for an allowed image reference: one of the
    registries (or an `extra_hosts` pattern) and a repository path below it, or exactly one of
    `repositories` (a fleet worker's trainer home's repository, components/analysis/
    fleet_trainer.py); then an optional tag and (when required) a sha256 digest. The
    ValidatingAdmissionPolicy's CEL matches with it (components/platform/registry/admission.py),
    and `image_problems` below."""
    # Registry prefixes are [a-z0-9.:/_-] only (config.security.RegistryPrefix): escaping the
    # dots is all it takes, and the pattern reads the same in RE2 (CEL) and Python.
    hosts = "|".join([*(r.replace(".", "\\.") for r in registries), *extra_hosts])
    digest = "@sha256:[a-f0-9]{64}" if require_digest else "(@sha256:[a-f0-9]{64})?"
    name = f"({hosts})/[a-z0-9._/-]+"
    if repositories:
        name = f"({name}|{'|'.join(r.replace('.', chr(92) + '.') for r in repositories)})"
    return f"^{name}(:[A-Za-z0-9._-]+)?{digest}$"


def signed_scope(cfg: StackConfig) -> tuple[str, ...]:
    """The repositories the trusted signer signs, as regular expressions over an image's
    repository (`catalog.image_repository`): the platform key signs the platform's own ECR
    repositories (`<account ECR>/<cluster>/...`: the trainer the deploy builds, the teams'
    repositories); a keyless or public-key signer the configured `signedRepositories` (an
    entry covers the repositories below it). Empty: no scope known, nothing is refused."""
    signatures = cfg.security.image_admission.signatures
    if signatures.signer == "platform":
        return (f"{ECR_HOST}/{re.escape(cfg.cluster.name)}/.+",)
    return tuple(f"{re.escape(r)}(/.+)?" for r in signatures.signed_repositories)


def _signer_text(cfg: StackConfig) -> str:
    signatures = cfg.security.image_admission.signatures
    return {
        "platform": "the platform key (security.imageAdmission.signatures.platformKey)",
        "keyless": f"the keyless identity {signatures.keyless_subject_regexp}",
        "publicKey": "the configured public key (signatures.publicKey)",
    }[signatures.signer]


def image_problems(cfg: StackConfig, key: str, image: str) -> list[Problem]:
    """Why admission would reject `image` in a team namespace under Deny; [] under Audit."""
    admission = cfg.security.image_admission
    if admission.action != "Deny":
        return []
    registries = list(admission.allowed_registries)
    shown = ", ".join(["<account>.dkr.ecr.<region>.amazonaws.com", *registries])
    # The admission policy's own pattern (there its account's ECR; any account's here).
    if not re.match(
        image_pattern(registries, require_digest=False, extra_hosts=(ECR_HOST,)), image
    ):
        return [
            Problem(
                key,
                image,
                f"an image from {shown} (<registry>/<lowercase path>[:tag]); the trusted-images "
                "admission policy denies any other",
            )
        ]
    if admission.require_digest and not DIGEST.search(image) and not ECR_TAG.match(image):
        return [
            Problem(key, image, "an image pinned by digest (admission denies tag-only references)")
        ]
    scope = signed_scope(cfg)
    repository = catalog.image_repository(image)
    if (
        admission.signatures.enabled
        and scope
        and not any(re.fullmatch(p, repository) for p in scope)
    ):
        return [
            Problem(
                key,
                image,
                f"an image from a repository {_signer_text(cfg)} signs: admission (Kyverno, "
                "Deny) requires that signature, and nothing signs this repository with it "
                "(docs/images.md)",
            )
        ]
    return []


def trainer_problems(cfg: StackConfig, key: str) -> list[Problem]:
    """The reference trainer is signed with the platform key where this stack builds it; under
    Deny, admission must trust that key, or it rejects every job that runs the trainer."""
    signatures = cfg.security.image_admission.signatures
    if (
        cfg.security.image_admission.action != "Deny"
        or not signatures.enabled
        or signatures.signer == "platform"
        or not cfg.images.trainer.build
    ):
        return []
    return [
        Problem(
            key,
            None,
            "an image by digest signed by the trusted signer: the reference trainer this stack "
            f"builds is signed with the platform key, and admission trusts {_signer_text(cfg)} "
            "(set signatures.platformKey: true, or training.defaultImage / the job's image to "
            "a release that signer signed)",
        )
    ]
