"""ECR: immutable, KMS-encrypted, scanned repositories with lifecycle rules; pull-through caches
with KMS creation templates; the account-wide scanning setting only where a stack owns it."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from components.config.security import PullThroughCache, RegistryConfig
from components.platform.registry import registry
from synth.harness import SynthResult
from tests.conftest import stack_values

REPO = "aws:ecr/repository:Repository"
LIFECYCLE = "aws:ecr/lifecyclePolicy:LifecyclePolicy"
CACHE = "aws:ecr/pullThroughCacheRule:PullThroughCacheRule"
TEMPLATE = "aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate"
SCANNING = "aws:ecr/registryScanningConfiguration:RegistryScanningConfiguration"


def test_platform_repositories_are_immutable_encrypted_and_scanned(prod: SynthResult) -> None:
    repos = prod.of_type(REPO)
    assert sorted(r.inputs["name"] for r in repos) == [
        "gpu-prod/teams/pretrain",
        "gpu-prod/teams/research",
        "gpu-prod/trainer",
        "gpu-prod/validation",
    ]
    for repo in repos:
        # Immutable but for cosign's signature tags and BuildKit's cache tag.
        assert repo.inputs["imageTagMutability"] == "IMMUTABLE_WITH_EXCLUSION"
        assert repo.inputs["imageTagMutabilityExclusionFilters"] == [
            {"filter": "sha256-*", "filterType": "WILDCARD"},
            {"filter": "buildcache", "filterType": "WILDCARD"},
            {"filter": "build", "filterType": "WILDCARD"},
        ]
        (encryption,) = repo.inputs["encryptionConfigurations"]
        assert encryption["encryptionType"] == "KMS" and encryption["kmsKey"].startswith("arn:")
        assert repo.inputs["imageScanningConfiguration"] == {"scanOnPush": True}
    assert len(prod.of_type(LIFECYCLE)) == len(repos)


def test_own_repositories_expire_untagged_images_only() -> None:
    # Every image a job was handed keeps an immutable tag (the trainer's pin tag): a rule over
    # tagged or `any` images could expire a digest a job stack still runs (registry.py).
    (rule,) = registry.lifecycle_policy(RegistryConfig(untagged_expire_days=3))["rules"]
    assert rule["selection"] == {
        "tagStatus": "untagged",
        "countType": "sinceImagePushed",
        "countUnit": "days",
        "countNumber": 3,
    }
    assert rule["action"] == {"type": "expire"}


def test_pull_through_caches_also_keep_only_the_newest_images() -> None:
    rules = registry.cache_lifecycle_policy(
        RegistryConfig(untagged_expire_days=3, cache_keep_images=9)
    )["rules"]
    assert [r["rulePriority"] for r in rules] == [1, 2]
    assert rules[0]["selection"]["tagStatus"] == "untagged"
    # ECR requires the `any` rule to have the highest priority number.
    assert rules[-1]["selection"] == {
        "tagStatus": "any",
        "countType": "imageCountMoreThan",
        "countNumber": 9,
    }


def test_the_synthesized_policies_are_those(prod: SynthResult) -> None:
    import json

    config = RegistryConfig()
    policies = [json.loads(p.inputs["policy"]) for p in prod.of_type(LIFECYCLE)]
    assert policies and all(p == registry.lifecycle_policy(config) for p in policies)
    for template in prod.of_type(TEMPLATE):
        assert json.loads(template.inputs["lifecyclePolicy"]) == registry.cache_lifecycle_policy(
            config
        )


def test_pull_through_caches_for_the_public_registries(prod: SynthResult) -> None:
    caches = {r.inputs["upstreamRegistryUrl"]: r.inputs for r in prod.of_type(CACHE)}
    assert set(caches) == {"public.ecr.aws", "registry.k8s.io", "quay.io"}
    assert caches["registry.k8s.io"]["ecrRepositoryPrefix"] == "gpu-prod-k8s"
    templates = prod.of_type(TEMPLATE)
    assert {t.inputs["prefix"] for t in templates} == {
        c["ecrRepositoryPrefix"] for c in caches.values()
    }
    for template in templates:
        assert template.inputs["appliedFors"] == ["PULL_THROUGH_CACHE"]
        # Cached repositories must stay mutable: ECR re-syncs their tags from upstream.
        assert template.inputs["imageTagMutability"] == "MUTABLE"
        assert template.inputs["encryptionConfigurations"][0]["encryptionType"] == "KMS"
        assert json.loads(template.inputs["lifecyclePolicy"])["rules"]


def test_nodes_may_import_only_into_this_clusters_caches(prod: SynthResult) -> None:
    policies = [
        r for r in prod.of_type("aws:iam/rolePolicy:RolePolicy") if "pull-through" in r.name
    ]
    assert len(policies) == 2  # managed node groups and Karpenter nodes
    for policy in policies:
        (statement,) = json.loads(policy.inputs["policy"])["Statement"]
        assert statement["Resource"].endswith(":repository/gpu-prod-*")


def test_registry_scanning_is_owned_by_one_stack(prod: SynthResult, dev: SynthResult) -> None:
    (scanning,) = prod.of_type(SCANNING)
    assert scanning.inputs["scanType"] == "ENHANCED"
    assert scanning.inputs["rules"][0]["scanFrequency"] == "CONTINUOUS_SCAN"
    assert dev.of_type(SCANNING) == []
    assert dev.of_type(REPO)


def test_authenticated_upstreams_need_a_credential() -> None:
    with pytest.raises(ValueError, match="requires authentication"):
        PullThroughCache(prefix="ghcr", upstream="ghcr.io")
    arn = "arn:aws:secretsmanager:us-east-1:123456789012:secret:ecr-pullthroughcache/ghcr-AbCdEf"
    assert PullThroughCache(prefix="ghcr", upstream="ghcr.io", credential_arn=arn)


def test_a_cache_prefix_too_long_for_the_cluster_is_a_config_error(
    expect_config_error: Callable[[dict[str, Any], str, str], None],
) -> None:
    config = copy.deepcopy(stack_values("dev"))
    config["gpu-platform:security"] = {
        "registry": {"pullThroughCaches": [{"prefix": "a" * 29, "upstream": "quay.io"}]}
    }
    expect_config_error(
        config, "gpu-platform:security.registry.pullThroughCaches[0].prefix", "at most"
    )


def test_the_signing_key_is_an_asymmetric_p256_key_with_an_alias(prod: SynthResult) -> None:
    (key,) = [k for k in prod.of_type("aws:kms/key:Key") if k.name == "registry-signing-key"]
    assert key.inputs["customerMasterKeySpec"] == "ECC_NIST_P256"
    assert key.inputs["keyUsage"] == "SIGN_VERIFY"
    aliases = [a.inputs["name"] for a in prod.of_type("aws:kms/alias:Alias")]
    assert "alias/gpu-prod-image-signing" in aliases


def test_no_signing_key_when_admission_trusts_another_signer() -> None:
    from synth.harness import run_program

    signatures = {"platformKey": False, "publicKey": "-----BEGIN PUBLIC KEY-----\nx\n"}
    result = run_program(
        "dev",
        overrides={
            "gpu-platform:security": {
                "imageAdmission": {"action": "Audit", "signatures": signatures}
            }
        },
    )
    assert not [k for k in result.of_type("aws:kms/key:Key") if "signing" in k.name]
    commands = {c.name for c in result.of_type("command:local:Command")}
    assert commands == {"trainer-image-pin"}, "nothing to sign with; the push is still pinned"
    assert result.of_type("docker-build:index:Image"), "the trainer is still built"


def test_only_dev_destroys_its_repositories_with_their_images(
    dev: SynthResult, prod: SynthResult
) -> None:
    # `pulumi destroy -s dev` must not stop at a repository that holds images; prod keeps the
    # digests its jobs and job stacks run (security.registry.forceDelete, default off).
    assert RegistryConfig().force_delete is False
    dev_repos = dev.of_type(REPO)
    assert dev_repos and all(r.inputs.get("forceDelete") is True for r in dev_repos)
    assert all(not r.inputs.get("forceDelete") for r in prod.of_type(REPO))
