"""Where a job's image digest comes from (built by the stack, an ECR tag resolved at deploy, a
digest given), and images the team namespaces' admission policies would reject: refused before
deploy under Deny (prod), let through under Audit (dev), as admission itself does."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest

from components.analysis import problems
from components.analysis.images import (
    image_pattern,
    image_problems,
    image_source,
    image_source_problems,
    trainer_problems,
)
from components.config import Problem
from components.config.load import namespace_values, parse
from synth.verdict_text import image_text
from tests.conftest import stack_values, values_with_jobs

DIGEST = "@sha256:" + "e" * 64
RELEASED = f"ghcr.io/gpu-platform/trainer:0.2.0{DIGEST}"
ECR = "123456789012.dkr.ecr.us-east-1.amazonaws.com"
ECR_IMAGE = f"{ECR}/mine:1{DIGEST}"
#: The prod cluster's own repositories: what the platform key signs.
PROD_TEAM_IMAGE = f"{ECR}/gpu-prod/teams/pretrain/llm:7{DIGEST}"
KEYLESS = {
    "platformKey": False,
    "keylessIssuer": "https://token.actions.githubusercontent.com",
    "keylessSubjectRegexp": r"^https://github\.com/org/repo/\.github/workflows/release\.yml@.*$",
    "signedRepositories": ["ghcr.io/gpu-platform/trainer"],
}


def _cfg(
    stack: str,
    image: str | None = None,
    *,
    signatures: dict[str, Any] | None = None,
    update: dict[str, Any] | None = None,
) -> Any:
    raw = copy.deepcopy(values_with_jobs(stack) if stack == "prod" else stack_values(stack))
    values = namespace_values(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}
    )
    if image is not None:
        values["trainingJobs"][0]["image"] = image
    if signatures is not None:
        values.setdefault("security", {}).setdefault("imageAdmission", {})
        values["security"]["imageAdmission"]["signatures"] = signatures
    values.update(update or {})
    return parse(values)


def test_prod_trusts_the_platform_key_which_signs_the_platforms_own_repositories() -> None:
    cfg = _cfg("prod")
    assert cfg.security.image_admission.signatures.signer == "platform"
    assert image_problems(cfg, "k", PROD_TEAM_IMAGE) == []
    assert image_problems(cfg, "k", f"{ECR}/gpu-prod/trainer{DIGEST}") == []
    # Allowed registry, but nothing signs it with the platform key.
    for unsigned in (RELEASED, ECR_IMAGE, f"{ECR}/gpu-prod-x/trainer{DIGEST}"):
        (problem,) = image_problems(cfg, "k", unsigned)
        assert "platform key" in problem[2] and "signature" in problem[2], unsigned
    (problem,) = image_problems(cfg, "k", f"docker.io/library/python:3.11{DIGEST}")
    assert "trusted-images admission policy denies" in problem[2]
    (problem,) = image_problems(cfg, "k", "ghcr.io/gpu-platform/trainer:0.2.0")
    assert "pinned by digest" in problem[2]


def test_a_keyless_signer_signs_its_listed_repositories_only() -> None:
    cfg = _cfg("prod", signatures=KEYLESS)
    assert image_problems(cfg, "k", RELEASED) == []
    (problem,) = image_problems(cfg, "k", ECR_IMAGE)
    assert "keyless identity" in problem[2]
    (problem,) = image_problems(cfg, "k", f"ghcr.io/gpu-platform/tools:1{DIGEST}")
    assert "signature" in problem[2]


def test_a_prod_job_with_such_an_image_is_a_config_error_naming_it() -> None:
    found = problems(_cfg("prod", ECR_IMAGE))
    assert any(key == "trainingJobs[0].image" and value == ECR_IMAGE for key, value, _ in found)
    assert not problems(_cfg("prod", PROD_TEAM_IMAGE))


def test_the_built_trainer_under_another_trusted_signer_cannot_run() -> None:
    # The deploy signs the trainer it builds with the platform key; admission trusting only a
    # keyless release identity would deny every job that runs it.
    found = problems(_cfg("prod", signatures=KEYLESS))
    keys = {key for key, _, why in found if "platform key" in why}
    assert "trainingJobs[0].image" in keys
    # A release that signer signed, by digest, runs.
    cfg = _cfg("prod", signatures=KEYLESS, update={"training": {"defaultImage": RELEASED}})
    assert not problems(cfg)


def test_dev_audits_and_lets_it_through() -> None:
    cfg = _cfg("dev")
    assert cfg.security.image_admission.action == "Audit"
    assert image_problems(cfg, "k", ECR_IMAGE) == []
    assert image_problems(cfg, "k", f"docker.io/library/python:3.11{DIGEST}") == []


def test_no_signed_repositories_means_no_signature_check() -> None:
    cfg = _cfg("prod", signatures={**KEYLESS, "signedRepositories": []})
    assert image_problems(cfg, "k", ECR_IMAGE) == []


@pytest.mark.parametrize(
    ("image", "kind", "trainer", "identity"),
    [
        (None, "built", True, "built:images/trainer"),
        (RELEASED, "digest", False, RELEASED),
        (f"{ECR}/mine:1.2", "resolved", False, "ecr:123456789012/us-east-1/mine:1.2"),
    ],
)
def test_each_job_names_where_its_digest_comes_from(
    image: str | None, kind: str, trainer: bool, identity: str
) -> None:
    cfg = _cfg("dev", image)
    source = image_source(cfg, cfg.training_jobs[0])
    assert source is not None
    assert (source.kind, source.trainer, source.identity) == (kind, trainer, identity)
    assert image_text(source, cfg.cluster.name)


def test_a_published_trainer_tag_is_resolved_in_the_platforms_repository() -> None:
    cfg = _cfg("dev", update={"images": {"trainer": {"build": False, "tag": "ctx-0123"}}})
    source = image_source(cfg, cfg.training_jobs[0])
    assert source is not None and source.kind == "resolved" and source.trainer
    assert source.ecr is not None and (source.ecr.repository, source.ecr.tag) == (
        "gpu-dev/trainer",
        "ctx-0123",
    )
    assert "gpu-dev/trainer:ctx-0123" in image_text(source, "gpu-dev")


@pytest.mark.parametrize(
    "image",
    ["ghcr.io/gpu-platform/trainer:0.2.0", f"{ECR}/mine", "docker.io/library/python"],
)
def test_a_tag_no_deploy_can_resolve_is_a_job_that_cannot_run(image: str) -> None:
    cfg = _cfg("dev", image)
    assert image_source(cfg, cfg.training_jobs[0]) is None
    found = [p for p in problems(cfg) if p[0] == "trainingJobs[0].image"]
    assert found and found[0][1] == image and "ECR registry" in found[0][2]


def test_an_ecr_tag_in_dev_is_runnable() -> None:
    cfg = _cfg("dev", f"{ECR}/gpu-dev/teams/research/llm:7")
    assert not [p for p in problems(cfg) if p[0].startswith("trainingJobs[0]")]


# --- each refusal word for word (key, value, allowed) ----------------------------------------

SHOWN = "<account>.dkr.ecr.<region>.amazonaws.com, ghcr.io/gpu-platform"


def test_an_image_from_another_registry_names_every_allowed_one() -> None:
    cfg = _cfg("prod")
    image = f"docker.io/library/python:3.11{DIGEST}"
    assert image_problems(cfg, "trainingJobs[2].image", image) == [
        Problem(
            "trainingJobs[2].image",
            image,
            f"an image from {SHOWN} (<registry>/<lowercase path>[:tag]); the trusted-images "
            "admission policy denies any other",
        )
    ]
    # A tag (no digest) of an allowed registry is past that check and refused for its tag.
    tagged = "ghcr.io/gpu-platform/trainer:0.2.0"
    assert image_problems(cfg, "k", tagged) == [
        Problem("k", tagged, "an image pinned by digest (admission denies tag-only references)")
    ]


@pytest.mark.parametrize(
    ("signatures", "signer"),
    [
        (None, "the platform key (security.imageAdmission.signatures.platformKey)"),
        (
            {**KEYLESS, "keylessIssuer": None, "keylessSubjectRegexp": None, "publicKey": "k"},
            "the configured public key (signatures.publicKey)",
        ),
    ],
)
def test_an_image_nothing_signs_names_the_signer_admission_trusts(
    signatures: dict[str, Any] | None, signer: str
) -> None:
    cfg = _cfg("prod", signatures=signatures)
    image = f"ghcr.io/gpu-platform/tools:1{DIGEST}"
    assert image_problems(cfg, "k", image) == [
        Problem(
            "k",
            image,
            f"an image from a repository {signer} signs: admission (Kyverno, Deny) requires "
            "that signature, and nothing signs this repository with it (docs/images.md)",
        )
    ]


def test_the_built_trainer_under_another_signer_is_told_both_ways_out() -> None:
    cfg = _cfg("prod", signatures=KEYLESS)
    subject = KEYLESS["keylessSubjectRegexp"]
    assert trainer_problems(cfg, "trainingJobs[0].image") == [
        Problem(
            "trainingJobs[0].image",
            None,
            "an image by digest signed by the trusted signer: the reference trainer this stack "
            f"builds is signed with the platform key, and admission trusts the keyless identity "
            f"{subject} (set signatures.platformKey: true, or training.defaultImage / the job's "
            "image to a release that signer signed)",
        )
    ]
    # Signatures off: no signer to distrust the trainer.
    off = _cfg("prod", signatures={**KEYLESS, "enabled": False})
    assert trainer_problems(off, "k") == []


def test_a_tag_no_deploy_can_resolve_names_both_ways_to_pin_it() -> None:
    image = "ghcr.io/gpu-platform/trainer:0.2.0"
    cfg = _cfg("dev", image)
    assert image_source_problems(cfg, "trainingJobs[0]", cfg.training_jobs[0]) == [
        Problem(
            "trainingJobs[0].image",
            image,
            "an image by digest (repo[:tag]@sha256:...), or a tag in an ECR registry "
            "(<account>.dkr.ecr.<region>.amazonaws.com/<repo>:<tag>) that the deploy resolves "
            "to its digest; a tag in another registry cannot be resolved at deploy time",
        )
    ]


def test_the_admission_pattern_escapes_registry_dots_and_requires_a_digest_when_asked() -> None:
    pattern = image_pattern(["ghcr.io/org"], require_digest=True)
    assert pattern == r"^(ghcr\.io/org)/[a-z0-9._/-]+(:[A-Za-z0-9._-]+)?@sha256:[a-f0-9]{64}$"
    assert image_pattern(["ghcr.io/org"], require_digest=False).endswith(
        "(:[A-Za-z0-9._-]+)?(@sha256:[a-f0-9]{64})?$"
    )


def test_a_resolved_ecr_tag_keeps_the_reference_the_job_configured() -> None:
    """`ImageSource.reference` is the configured reference for every source but the reference
    trainer (None), whether the deploy resolves it or it carries its digest."""
    image = f"{ECR}/mine:1.2"
    cfg = _cfg("dev", image)
    source = image_source(cfg, cfg.training_jobs[0])
    assert source is not None and source.ecr is not None
    assert source.reference == image
    trainer = image_source(_cfg("dev"), _cfg("dev").training_jobs[0])
    assert trainer is not None and trainer.reference is None


@pytest.mark.parametrize("tag", ["build", "buildcache", "sha256-" + "0" * 64 + ".sig"])
def test_a_job_resolving_a_tag_the_tools_move_is_refused_naming_them(tag: str) -> None:
    image = f"{ECR}/gpu-dev/teams/research/llm:{tag}"
    cfg = _cfg("dev", image)
    assert image_source_problems(cfg, "trainingJobs[0]", cfg.training_jobs[0]) == [
        Problem(
            "trainingJobs[0].image",
            image,
            "a tag that never moves, or an image by digest: sha256-*, buildcache, build are "
            "rewritten by the deploy's tools, and the digest a moved tag left behind expires",
        )
    ]
    still = _cfg("dev", f"{ECR}/gpu-dev/teams/research/llm:v{tag}")
    assert image_source_problems(still, "trainingJobs[0]", still.training_jobs[0]) == []


def test_the_admission_pattern_takes_exact_repositories_with_their_dots_escaped() -> None:
    one, other = "1.dkr.ecr.us-east-1.amazonaws.com/home/trainer", "ghcr.io/org/trainer"
    pattern = image_pattern(["ghcr.io/mine"], require_digest=False, repositories=(one, other))
    assert pattern == (
        r"^((ghcr\.io/mine)/[a-z0-9._/-]+|1\.dkr\.ecr\.us-east-1\.amazonaws\.com/home/trainer"
        r"|ghcr\.io/org/trainer)(:[A-Za-z0-9._-]+)?(@sha256:[a-f0-9]{64})?$"
    )
    assert re.match(pattern, f"{one}:7") and re.match(pattern, f"{other}{DIGEST}")
    assert not re.match(pattern, "1xdkr.ecr.us-east-1.amazonaws.com/home/trainer:7")
    assert not re.match(pattern, f"{other}/below:7"), "exactly those repositories"
