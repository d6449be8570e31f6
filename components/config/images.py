"""Images slice (`gpu-platform:images`): how the reference trainer image (images/trainer) that
every job without an `image` of its own runs comes to exist.

Either `pulumi up` builds it from images/trainer with BuildKit (pulumi-docker-build), pushes it
to the platform's ECR `trainer` repository and signs the digest the push returns with the
platform's KMS key (cosign); or, where `pulumi up` runs without a Docker daemon, `build: false`
names a tag already published in that repository, which the deploy resolves to its digest
(ECR DescribeImages). Either way the digest jobs run comes from the registry at deploy time,
never from this config. docs/images.md describes both paths.
"""

from __future__ import annotations

from typing import Annotated, Final, Literal

from pydantic import Field, StringConstraints, model_validator

from components import catalog
from components.config.base import Model, Problem, problems_error

#: An image tag as the OCI distribution spec allows it
#: (opencontainers/distribution-spec v1.1.1 spec.md: `[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`).
ImageTag = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")]
#: The build context and Dockerfile, relative to the project directory (where `pulumi up` runs
#: the program, and where synth runs it).
TRAINER_CONTEXT: Final = "images/trainer"
#: The ECR repository role (security.registry.repositories) the trainer is pushed to.
TRAINER_REPOSITORY: Final = "trainer"


class TrainerImageConfig(Model):
    """The reference trainer: built and pushed by `pulumi up`, or a published tag resolved."""

    #: Build images/trainer and push it to the platform's ECR `trainer` repository on the
    #: `pulumi up` whose build context changed. Needs a Docker daemon with BuildKit and cosign
    #: where `pulumi up` runs (docs/images.md). Off: resolve `tag` in that repository instead.
    build: bool = True
    #: With `build: false`, the tag published in the platform's `trainer` repository to run
    #: (resolved to its digest at deploy time; the preview fails naming it when it is absent):
    #: a pin tag a build pushed (`ctx-<context hash>-<digest>`, immutable), never one the tools
    #: move (catalog.ECR_MUTABLE_TAG_FILTERS). With `build: true` the tags are derived from the
    #: build context and the pushed digest, and none may be set (docs/images.md).
    tag: ImageTag | None = None
    #: The platform the image is built for: the GPU instance types are x86-64.
    platform: Literal["linux/amd64", "linux/arm64"] = "linux/amd64"
    #: BuildKit's registry cache in the same repository (tag `buildcache`, mode max): an
    #: unchanged base and requirements layer is not rebuilt by the next deploy.
    cache: bool = True

    @model_validator(mode="after")
    def _tag(self) -> TrainerImageConfig:
        if not self.build and self.tag is None:
            raise problems_error(
                [
                    Problem(
                        "tag",
                        None,
                        "the published tag to resolve in the trainer repository "
                        "(required with build: false)",
                    )
                ]
            )
        if self.tag is not None and catalog.ecr_tag_moves(self.tag):
            moving = ", ".join(catalog.ECR_MUTABLE_TAG_FILTERS)
            raise problems_error(
                [
                    Problem(
                        "tag",
                        self.tag,
                        f"a tag that never moves, e.g. a pin tag ctx-<hash>-<digest> a build "
                        f"pushed ({moving} are rewritten by the deploy's tools, and the digest "
                        "a moved tag left behind expires)",
                    )
                ]
            )
        if self.build and self.tag is not None:
            raise problems_error(
                [
                    Problem(
                        "tag",
                        self.tag,
                        "no tag with build: true (the pushed tag is derived from "
                        "the build context); set build: false to run a published tag",
                    )
                ]
            )
        return self


class ImagesConfig(Model):
    """Everything under `gpu-platform:images`."""

    trainer: TrainerImageConfig = Field(default_factory=TrainerImageConfig)
