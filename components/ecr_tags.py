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


def replicated(
    key: str,
    *,
    image: str,
    repository: str,
    signature_tag: str,
    remedy: str,
    parent: pulumi.Resource | None = None,
) -> pulumi.Output[str]:
    """`image` (`repo@sha256:...`) once this region's replica of `repository` holds its digest
    and its cosign signature tag, read at deploy (and preview) time from the replica's image
    list (ECR ListImages, in the stack's own region); else the program fails naming `key`
    before anything runs the image (a fleet worker outside its trainer home's region:
    components/analysis/fleet_trainer.py)."""
    digest = image.rsplit("@", 1)[1]
    found = aws.ecr.get_images_output(
        repository_name=repository, opts=pulumi.InvokeOutputOptions(parent=parent)
    )

    def check(image_ids: object) -> str:
        entries = image_ids if isinstance(image_ids, list) else []
        digests = {_field(entry, "image_digest") for entry in entries}
        tags = {_field(entry, "image_tag") for entry in entries}
        missing = [
            what
            for what, present in (
                (f"the digest {digest}", digest in digests),
                (f"its signature tag {signature_tag}", signature_tag in tags),
            )
            if not present
        ]
        if missing:
            raise pulumi.RunError(
                f"gpu-platform:{key}: the replica {repository} in this region lacks "
                f"{' and '.join(missing)}; {remedy}"
            )
        return image

    return found.image_ids.apply(check)
