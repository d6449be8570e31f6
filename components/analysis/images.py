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
ECR_REGISTRY: Final = re.compile(r"^[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com$")
DIGEST: Final = re.compile(r"@sha256:[a-f0-9]{64}$")


def _allowed_registry(image: str, registries: list[str]) -> bool:
    host = image.split("/", 1)[0]
    return bool(ECR_REGISTRY.match(host)) or any(image.startswith(f"{r}/") for r in registries)


def image_problems(cfg: StackConfig, key: str, image: str) -> list[Problem]:
    """Why admission would reject `image` in a team namespace under Deny; [] under Audit."""
    admission = cfg.security.image_admission
    if admission.action != "Deny":
        return []
    registries = list(admission.allowed_registries)
    shown = ", ".join(["<account>.dkr.ecr.<region>.amazonaws.com", *registries])
    if not _allowed_registry(image, registries):
        return [(key, image, f"an image from {shown}; the trusted-images admission policy denies")]
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
