"""`admission_verdict` (synth/report_security.py): what the signature policy does with one image,
as far as synth can tell without the registry — the digest rule first, then the policy's image
scope, then the repositories the trusted signer signs. The report's table (tests/platform/
test_signed_images.py) shows it per job; here each branch, the Audit wording included."""

from __future__ import annotations

import fnmatch
import re
from typing import Any

from synth.report_security import admission_verdict

ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
GLOBS = [re.compile(fnmatch.translate(f"{ECR}/*")), re.compile(fnmatch.translate("ghcr.io/*"))]
SIGNED = {f"{ECR}/gpu-prod"}
DIGEST = "@sha256:" + "0" * 64


def _verdict(image: str, **overrides: Any) -> str:
    rule: dict[str, Any] = {"globs": GLOBS, "signed": SIGNED, "verify_digest": True, "deny": True}
    rule.update(overrides)
    return admission_verdict(image, **rule)


def test_an_image_by_tag_is_rejected_before_any_signature_check() -> None:
    expected = "rejected: no digest (`verifyDigest`), before any signature check"
    assert _verdict(f"{ECR}/gpu-prod/trainer:1.0") == expected
    # Even outside the policy's scope: the digest rule comes first.
    assert _verdict("docker.io/library/busybox:1.36") == expected


def test_without_the_digest_rule_a_tag_is_judged_by_scope_and_signer() -> None:
    verdict = _verdict(f"{ECR}/gpu-prod/trainer:1.0", verify_digest=False)
    assert verdict == "signature required; **not verifiable offline**"


def test_an_image_outside_the_globs_is_left_to_the_trusted_images_policy() -> None:
    verdict = _verdict("docker.io/library/busybox" + DIGEST)
    assert verdict == "not checked by Kyverno (outside `matchImageReferences`)"


def test_a_repository_the_signer_never_signs_cannot_pass() -> None:
    image = "ghcr.io/gpu-platform/tools" + DIGEST
    only = f": the trusted signer signs only `{ECR}/gpu-prod`"
    assert _verdict(image) == "**rejected**" + only
    assert _verdict(image, deny=False) == "fails (Audit: recorded, admitted)" + only


def test_a_signed_repository_or_one_below_it_needs_a_signature_synth_cannot_see() -> None:
    expected = "signature required; **not verifiable offline**"
    assert _verdict(f"{ECR}/gpu-prod" + DIGEST) == expected
    assert _verdict(f"{ECR}/gpu-prod/trainer" + DIGEST) == expected
    # No signer scope known (no annotation): every image in scope needs a signature.
    assert _verdict("ghcr.io/gpu-platform/tools" + DIGEST, signed=set()) == expected
