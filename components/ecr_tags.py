"""ECR tags resolved to their digest at deploy (and preview) time: the repository's image list
(ECR ListImages, `aws.ecr.get_images` of pulumi-aws 7.51.1) read by the program, so a tag that is
absent stops the program naming the config key and the tag before anything runs the image. Used
for a published reference trainer (components/platform/registry/trainer_image.py) and for jobs' own
ECR tags (components/training_jobs/job_images.py)."""

from __future__ import annotations

import pulumi
import pulumi_aws as aws


def resolve_tag(
    key: str,
    *,
    registry_id: pulumi.Input[str],
    repository: pulumi.Input[str],
    tag: str,
    remedy: str,
    parent: pulumi.Resource | None = None,
    region: str | None = None,
) -> pulumi.Output[str]:
    """The digest an ECR tag points at, read at deploy (and preview) time from the repository's
    image list (ECR ListImages via `aws.ecr.get_images`); when the tag is absent the program
    fails naming `key` and the tag before anything runs the image."""
    found = aws.ecr.get_images_output(
        registry_id=registry_id,
        repository_name=repository,
        region=region,
        opts=pulumi.InvokeOutputOptions(parent=parent),
    )
    return pulumi.Output.all(repository, found.image_ids).apply(
        lambda values: tag_digest(key, str(values[0]), tag, values[1], remedy)
    )


def tag_digest(key: str, repository: str, tag: str, image_ids: object, remedy: str) -> str:
    """The digest `tag` points at among a repository's image ids (ECR ListImages), or a
    RunError naming the key and the tag."""
    digests = {
        _field(entry, "image_tag"): _field(entry, "image_digest")
        for entry in (image_ids if isinstance(image_ids, list) else [])
    }
    digest = digests.get(tag)
    if not digest:
        published = ", ".join(sorted(t for t in digests if t)) or "none"
        raise pulumi.RunError(
            f"gpu-platform:{key}: got {tag!r}; a tag published in ECR repository {repository} "
            f"(it holds: {published}); {remedy}"
        )
    return digest


def _field(entry: object, name: str) -> str:
    """A field of an invoke result entry: an object under `pulumi up`, a dict under mocks."""
    if isinstance(entry, dict):
        camel = "".join(w.capitalize() if i else w for i, w in enumerate(name.split("_")))
        return str(entry.get(name) or entry.get(camel) or "")
    return str(getattr(entry, name, "") or "")
