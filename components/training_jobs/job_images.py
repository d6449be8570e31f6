"""Each job's image as the deploy pins it (plan.JobImage), from where the analysis says its
digest comes from (components/analysis/images.py `ImageSource`):

- the reference trainer (built or resolved by the platform stack): the trainer's `JobImage`,
  whose reference is an Output of the push (or of the tag's resolution);
- a tag in an ECR registry: resolved to its digest at deploy time (ECR ListImages), the
  program failing naming `trainingJobs[i].image` when the tag is absent;
- an image given by digest: as given.

A job whose source is None never gets here: the config check refused it first.
"""

from __future__ import annotations

from collections.abc import Mapping

import pulumi

from components.analysis.facts import StackFacts
from components.analysis.images import ImageSource
from components.ecr_tags import resolve_tag
from components.training_jobs.plan import JobImage, JobPlan, digest_image, plan_job


def ecr_host(account: str, region: str) -> str:
    return f"{account}.dkr.ecr.{region}.amazonaws.com"


def job_image(
    key: str,
    source: ImageSource,
    *,
    trainer: JobImage | None,
    account_id: str,
    region: str,
    parent: pulumi.Resource | None = None,
) -> JobImage:
    """The JobImage of one job (`key` = `trainingJobs[i]`), resolving an ECR tag (an invoke,
    under `parent` when one is given)."""
    if source.trainer:
        if trainer is None:
            raise ValueError(f"{key}: runs the reference trainer, and no trainer image was given")
        return trainer
    if source.kind == "digest" and source.reference is not None:
        return digest_image(source.reference)
    if source.ecr is None:
        raise ValueError(f"{key}: an image with no digest and no tag to resolve")
    ecr = source.ecr
    account, where = ecr.account or account_id, ecr.region or region
    digest = resolve_tag(
        f"{key}.image",
        registry_id=account,
        repository=ecr.repository,
        tag=ecr.tag,
        remedy="push the tag, or give the image by digest",
        parent=parent,
        region=ecr.region,
    )
    reference = pulumi.Output.concat(ecr_host(account, where), "/", ecr.repository, "@", digest)
    return JobImage(reference=reference, digest=digest, identity=source.identity)


def job_images(
    sources: Mapping[str, ImageSource | None],
    *,
    trainer: JobImage | None,
    account_id: str,
    region: str,
    parent: pulumi.Resource | None = None,
) -> dict[str, JobImage]:
    """`job_image` of every job, keyed as `sources` is (`trainingJobs[i]`)."""
    return {
        key: job_image(
            key, source, trainer=trainer, account_id=account_id, region=region, parent=parent
        )
        for key, source in sources.items()
        if source is not None
    }


def plan_jobs(
    facts: StackFacts,
    *,
    trainer: JobImage | None,
    account_id: str,
    region: str,
    provenance: Mapping[str, str],
) -> tuple[JobPlan, ...]:
    """Every job's plan, with the image the deploy pins for it: once per job per run, at the
    composition root (the components and the report read these)."""
    images = job_images(
        {jf.key: jf.image for jf in facts.jobs},
        trainer=trainer,
        account_id=account_id,
        region=region,
    )
    return tuple(
        plan_job(facts.cfg, jf, account_id, provenance, image=images[jf.key]) for jf in facts.jobs
    )
