"""Will admission let a job's image in? The pre-deploy side of the two admission policies the
platform renders into team namespaces (components/platform/admission.py): the
ValidatingAdmissionPolicy (allowed registry, digest) and Kyverno's ImageValidatingPolicy (a
signature by the platform's release identity on every image from those registries).

Under `security.imageAdmission.action: Deny` an image either policy rejects is a job that
cannot run, so it is a config error naming `trainingJobs[i].image` (platform and job stacks
alike: both run analysis.check). Under Audit, admission lets the pod in and records it.

What can be known offline, and is checked here: the registry, the digest, and whether the image
comes from a repository the trusted signer publishes (`signatures.signedRepositories`: keyless
identity `release.yml@refs/tags/*` pushes only the trainer repository, so an image elsewhere can
never carry its signature). Whether a released image actually carries the signature cannot be
seen without the registry (docs/security.md).
"""

from __future__ import annotations

import re
from typing import Final

from components import catalog
from components.config import Problem, StackConfig

#: The account's own ECR (`<account>.dkr.ecr.<region>.amazonaws.com`), always allowed. The
#: account is known only at deploy time: any account here, the exact one in the admission policy.
ECR_HOST: Final = r"[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com"
DIGEST: Final = re.compile(r"@sha256:[a-f0-9]{64}$")


def image_pattern(
    registries: list[str], *, require_digest: bool, extra_hosts: tuple[str, ...] = ()
) -> str:
    """An RE2- and Python-compatible pattern for an allowed image reference: one of the
    registries (or an `extra_hosts` pattern), a repository path, an optional tag and (when
    required) a sha256 digest. The ValidatingAdmissionPolicy's CEL matches with it
    (components/platform/admission.py), and `image_problems` below."""
    # Registry prefixes are [a-z0-9.:/_-] only (config.security.RegistryPrefix): escaping the
    # dots is all it takes, and the pattern reads the same in RE2 (CEL) and Python.
    hosts = "|".join([*(r.replace(".", "\\.") for r in registries), *extra_hosts])
    digest = "@sha256:[a-f0-9]{64}" if require_digest else "(@sha256:[a-f0-9]{64})?"
    return f"^({hosts})/[a-z0-9._/-]+(:[A-Za-z0-9._-]+)?{digest}$"


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
            (
                key,
                image,
                f"an image from {shown} (<registry>/<lowercase path>[:tag]); the trusted-images "
                "admission policy denies any other",
            )
        ]
    if admission.require_digest and not DIGEST.search(image):
        return [(key, image, "an image pinned by digest (admission denies tag-only references)")]
    signatures = admission.signatures
    signed = set(signatures.signed_repositories)
    if signatures.enabled and signed and catalog.image_repository(image) not in signed:
        return [
            (
                key,
                image,
                f"an image from {', '.join(sorted(signed))}: admission (Kyverno, Deny) requires a "
                "signature by the platform's release identity, which signs only those "
                "(security.imageAdmission.signatures.signedRepositories)",
            )
        ]
    return []
