"""The trainer's tags across `pulumi up`s (docs/images.md "Tags: why a build pushes twice"),
played against a model of ECR's tag immutability with the repository's real exclusion filters,
the real pin tag and the real lifecycle policy: a second `up`, a rebuild the provider decides on
and an `up` interrupted after its push all succeed, no tag a job was handed moves, and nothing a
job runs is ever untagged (the only thing the lifecycle expires)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from components import catalog
from components.config.security import RegistryConfig
from components.platform.registry.registry import lifecycle_policy
from components.platform.registry.trainer_image import STAGING_TAG, pin_tag

CONTEXT = "ctx-0123456789abcdef"


class TagAlreadyExistsError(Exception):
    """ECR's ImageTagAlreadyExistsException."""


@dataclass
class Ecr:
    """A repository with IMMUTABLE_WITH_EXCLUSION and the platform's exclusion filters. A push
    to an existing immutable tag fails even with the same digest (aws/containers-roadmap#2179)."""

    tags: dict[str, str] = field(default_factory=dict)
    digests: set[str] = field(default_factory=set)

    def push(self, tag: str, digest: str) -> None:
        if tag in self.tags and not catalog.ecr_tag_moves(tag):
            raise TagAlreadyExistsError(tag)
        self.tags[tag] = digest
        self.digests.add(digest)

    def cosign_copy(self, digest: str, tag: str) -> None:
        """cosign copy at v3.0.6 without --force: skip an equal destination, refuse another."""
        if tag in self.tags:
            if self.tags[tag] == digest:
                return
            raise TagAlreadyExistsError(tag)
        self.push(tag, digest)

    def expire(self) -> set[str]:
        """The lifecycle policy: its one rule selects untagged images only."""
        (rule,) = lifecycle_policy(RegistryConfig())["rules"]
        assert rule["selection"]["tagStatus"] == "untagged"
        gone = self.digests - set(self.tags.values())
        self.digests -= gone
        return gone


@dataclass
class Deploy:
    """What one `up` of the trainer does: push the staging tag, then pin the signed digest;
    jobs are handed a digest only once pinned."""

    ecr: Ecr
    handed: list[str] = field(default_factory=list)

    def push(self, digest: str) -> str:
        self.ecr.push(STAGING_TAG, digest)
        return digest

    def pin(self, digest: str) -> None:
        self.ecr.cosign_copy(digest, pin_tag(CONTEXT, digest))
        self.handed.append(digest)


def _digest(n: int) -> str:
    return "sha256:" + f"{n:02x}" * 32


def test_a_rebuild_the_provider_decides_on_pushes_and_pins_again() -> None:
    ecr = Ecr()
    deploy = Deploy(ecr)
    deploy.pin(deploy.push(_digest(1)))
    # Same context, another input changed (cache options, platform, file modes): the provider
    # rebuilds and pushes again; BuildKit's digest differs. The staging tag moves; the new
    # digest gets its own pin tag.
    deploy.pin(deploy.push(_digest(2)))
    assert ecr.tags[STAGING_TAG] == _digest(2)
    assert {ecr.tags[pin_tag(CONTEXT, d)] for d in deploy.handed} == set(deploy.handed)
    assert ecr.expire() == set(), "every digest a job was handed keeps its pin tag"


def test_an_up_interrupted_after_its_push_succeeds_the_next_time() -> None:
    ecr = Ecr()
    deploy = Deploy(ecr)
    deploy.push(_digest(1))  # pushed, then interrupted before the state was saved
    deploy.pin(deploy.push(_digest(2)))  # the next `up` creates the image again
    assert deploy.handed == [_digest(2)]
    # The first push lost its only tag: it expires, and no job was ever handed it.
    assert ecr.expire() == {_digest(1)}


def test_an_up_interrupted_after_its_pin_pins_again_without_error() -> None:
    ecr = Ecr()
    deploy = Deploy(ecr)
    digest = deploy.push(_digest(1))
    ecr.cosign_copy(digest, pin_tag(CONTEXT, digest))  # tagged, state not saved
    deploy.pin(digest)  # the next `up` runs the pin command again
    assert ecr.tags[pin_tag(CONTEXT, digest)] == digest


def test_a_pin_tag_never_moves() -> None:
    ecr = Ecr()
    digest = _digest(1)
    ecr.push(pin_tag(CONTEXT, digest), digest)
    with pytest.raises(TagAlreadyExistsError):
        ecr.push(pin_tag(CONTEXT, digest), _digest(2))
    with pytest.raises(TagAlreadyExistsError):
        ecr.cosign_copy(_digest(2), pin_tag(CONTEXT, digest))


def test_pushing_the_context_tag_itself_broke_every_later_up() -> None:
    # The previous design: the build pushed the immutable `ctx-<hash>`; any second push of it
    # (a provider rebuild, an interrupted `up`) failed, and kept failing.
    ecr = Ecr()
    ecr.push(CONTEXT, _digest(1))
    with pytest.raises(TagAlreadyExistsError):
        ecr.push(CONTEXT, _digest(2))
    with pytest.raises(TagAlreadyExistsError):
        ecr.push(CONTEXT, _digest(1))
