"""Images the team namespaces' admission policies would reject are refused before deploy under
Deny (prod), and let through under Audit (dev), as admission itself does."""

from __future__ import annotations

import copy
import json
from typing import Any

from components.analysis import problems
from components.analysis.images import image_problems
from components.config.load import namespace_values, parse
from tests.conftest import stack_values, values_with_jobs

DIGEST = "@sha256:" + "e" * 64
RELEASED = f"ghcr.io/gpu-platform/trainer:0.2.0{DIGEST}"
ECR_IMAGE = f"123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:1{DIGEST}"


def _cfg(stack: str, image: str | None = None) -> Any:
    raw = copy.deepcopy(values_with_jobs(stack) if stack == "prod" else stack_values(stack))
    values = namespace_values(
        {k: v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}
    )
    if image is not None:
        values["trainingJobs"][0]["image"] = image
    return parse(values)


def test_prod_refuses_what_admission_would_deny() -> None:
    cfg = _cfg("prod")
    assert image_problems(cfg, "k", RELEASED) == []
    (problem,) = image_problems(cfg, "k", f"docker.io/library/python:3.11{DIGEST}")
    assert "trusted-images admission policy denies" in problem[2]
    (problem,) = image_problems(cfg, "k", "ghcr.io/gpu-platform/trainer:0.2.0")
    assert "pinned by digest" in problem[2]
    # Allowed registry, but the release identity never signs this repository.
    (problem,) = image_problems(cfg, "k", ECR_IMAGE)
    assert "ghcr.io/gpu-platform/trainer" in problem[2] and "signature" in problem[2]
    (problem,) = image_problems(cfg, "k", f"ghcr.io/gpu-platform/tools:1{DIGEST}")
    assert "signature" in problem[2]


def test_a_prod_job_with_such_an_image_is_a_config_error_naming_it() -> None:
    found = problems(_cfg("prod", ECR_IMAGE))
    assert any(key == "trainingJobs[0].image" and value == ECR_IMAGE for key, value, _ in found)
    assert not problems(_cfg("prod", RELEASED))


def test_dev_audits_and_lets_it_through() -> None:
    cfg = _cfg("dev")
    assert cfg.security.image_admission.action == "Audit"
    assert image_problems(cfg, "k", ECR_IMAGE) == []
    assert image_problems(cfg, "k", f"docker.io/library/python:3.11{DIGEST}") == []


def test_no_signed_repositories_means_no_signature_check() -> None:
    cfg = _cfg("prod")
    admission = cfg.security.image_admission
    open_signer = admission.model_copy(
        update={"signatures": admission.signatures.model_copy(update={"signed_repositories": []})}
    )
    security = cfg.security.model_copy(update={"image_admission": open_signer})
    assert image_problems(cfg.model_copy(update={"security": security}), "k", ECR_IMAGE) == []
