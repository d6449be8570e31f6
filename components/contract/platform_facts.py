"""What a team's job stack needs from the platform stack: the `jobPlatform` stack output.

`platform_facts(cfg, ...)` computes it from the platform's validated config, purely: per team
its namespace, Kueue LocalQueue, Volcano queue, service account, storage claims, quotas per
flavor and namespace limits; the GPU classes with each flavor's capacity and instance types; the
data buckets, the RWX storage class and the training settings. It also carries the platform
config itself (`platformConfig`, trainingJobs left out): the job stack rebuilds the platform's
`StackConfig` from it (`job_stack_config`) so that its jobs are judged by exactly the rules the
platform's own jobs are (analysis.jobs/quota and, once it lands, the will-it-run analysis)
against the platform's real capacity and quotas, without the platform's stack file.

The output is versioned (`FACTS_VERSION`): a job stack refuses facts of another version rather
than misreading them. The kubeconfig is not in it: it is the platform's separate, secret
`kubeconfig` output, so these facts stay plain (readable with `pulumi stack output`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from components import analysis, catalog
from components.analysis.facts import stack_facts
from components.config import ConfigError, Problem, StackConfig, parse
from components.config.errors import problem_lines
from components.config.job_stack import JOBS_NAMESPACE, JobStackConfig, jobs_lines

#: 2: `trainerImage` (the reference trainer by the digest the platform's deploy pinned).
FACTS_VERSION: Final = 2
#: The platform stack output a job stack reads, and the one holding the (secret) kubeconfig.
FACTS_OUTPUT: Final = "jobPlatform"
KUBECONFIG_OUTPUT: Final = "kubeconfig"


def deploy_role_name(cluster_name: str, team: str) -> str:
    """IAM role a team's job stack deploys with (CI assumes it through GitHub OIDC)."""
    return f"{cluster_name}-{team}-jobs-deploy"[:64]


def preview_role_name(cluster_name: str, team: str) -> str:
    """IAM role a team's pull-request previews run with (read-only in the namespace)."""
    return f"{cluster_name}-{team}-jobs-preview"[:64]


def _flavors(cfg: StackConfig) -> dict[str, dict[str, dict[str, Any]]]:
    """GPU class -> capacity type -> GPUs the pools provide and the instance types they launch."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    types: dict[tuple[str, str], set[str]] = {}
    for group in cfg.node_groups.gpu:
        types.setdefault((group.gpu_class, group.flavor_capacity_type), set()).update(
            group.instance_types
        )
    for pool in cfg.karpenter.pools:
        if pool.is_gpu:
            key = (pool.resolved_gpu_class, pool.capacity_type)
            types.setdefault(key, set()).update(pool.resolved_instance_types)
    for (gpu_class, capacity_type), gpus in sorted(stack_facts(cfg).capacity.items()):
        out.setdefault(gpu_class, {})[capacity_type] = {
            "flavor": catalog.gpu_flavor_name(gpu_class, capacity_type),
            "gpus": gpus,
            "instanceTypes": sorted(types.get((gpu_class, capacity_type), set())),
        }
    return out


def platform_facts(
    cfg: StackConfig,
    *,
    account_id: str,
    storage_class: str,
    trainer_image: Any = None,
    image_repositories: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """The `jobPlatform` output of a platform stack (plain JSON once resolved; see the module
    docstring). `trainer_image`: the reference trainer's `repo@sha256:...` (an Output of its
    push or resolution), or None where `training.defaultImage` gives the default by digest.
    `image_repositories`: team -> the URL of its own image repository (teams with a deploy
    identity; components/platform/registry/registry.py)."""
    buckets = {
        purpose: catalog.bucket_name(cfg.bucket_prefix, purpose, account_id)
        for purpose in catalog.DATA_BUCKET_PURPOSES
    }
    teams: dict[str, Any] = {}
    for team in cfg.teams:
        teams[team.name] = {
            "namespace": team.namespace,
            "localQueue": team.name,
            "volcanoQueue": team.name,
            "serviceAccount": catalog.TRAINER_SERVICE_ACCOUNT,
            "group": team.group,
            "claims": {role: f"{team.name}-{role}" for role in ("checkpoints", "datasets")},
            # Where the team's CI pushes (and signs) its own images; None without a deploy role.
            "imageRepository": (image_repositories or {}).get(team.name),
            "quota": [
                {
                    "flavor": entry.flavor,
                    "gpuClass": entry.gpu_class,
                    "capacityType": entry.capacity_type,
                    "gpus": entry.gpus,
                    "borrowingLimitGpus": entry.borrowing_limit_gpus,
                }
                for entry in team.quota
            ],
            "limits": {
                "gpus": team.limits.gpus,
                "cpu": team.limits.cpu,
                "memoryGib": team.limits.memory_gib,
            },
            # The team's CI roles (components/platform/tenancy/team_deploy.py), when it has them.
            **{
                f"{kind}RoleArn": (
                    f"arn:aws:iam::{account_id}:role/{name(cfg.cluster.name, team.name)}"
                    if team.deploy is not None
                    else None
                )
                for kind, name in (("deploy", deploy_role_name), ("preview", preview_role_name))
            },
        }
    platform_jobs: dict[str, list[str]] = {}
    namespaces = {team.name: team.namespace for team in cfg.teams}
    for job in cfg.training_jobs:
        platform_jobs.setdefault(namespaces.get(job.team, job.team), []).append(job.name)
    return {
        "version": FACTS_VERSION,
        "environment": cfg.environment,
        "accountId": account_id,
        "cluster": {"name": cfg.cluster.name, "kubeconfigOutput": KUBECONFIG_OUTPUT},
        "buckets": buckets,
        "storageClass": storage_class,
        "teams": teams,
        "gpuClasses": _flavors(cfg),
        "training": cfg.training.model_dump(mode="json", by_alias=True),
        "trainerImage": trainer_image if trainer_image is not None else cfg.training.default_image,
        "platformJobs": {ns: sorted(names) for ns, names in sorted(platform_jobs.items())},
        "platformConfig": cfg.model_dump(mode="json", by_alias=True, exclude={"training_jobs"}),
    }


def exported(facts: dict[str, Any]) -> Any:
    """The facts as `pulumi.export` should publish them: plain, unless a key of the platform's
    namespace was set as a secret (`pulumi config set --secret`): `platformConfig` then carries
    its value, so the whole output is marked secret rather than leak it (no key is one today;
    a job stack reads secret facts all the same). `is_config_secret` is the pinned SDK's."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    given = runtime_config.CONFIG.get()
    if any(k.startswith("gpu-platform:") and runtime_config.is_config_secret(k) for k in given):
        return pulumi.Output.secret(facts)
    return facts


def _facts_problem(platform_stack: str, what: str) -> ConfigError:
    return ConfigError([f"{JOBS_NAMESPACE}:platformStack: got {platform_stack!r}; {what}"])


#: The config the last `job_stack_config` of this process judged and returned: a synth reads it
#: back (`judged`) instead of judging the jobs a second time (jobs/__main__.py already did).
_judged: list[StackConfig] = []


def judged() -> StackConfig | None:
    """The config the last successful `job_stack_config` returned (None before any)."""
    return _judged[-1] if _judged else None


def forget_judged() -> None:
    """Forget it (the synth harness calls this before each program run)."""
    _judged.clear()


def job_stack_config(facts: Mapping[str, Any] | None, jobs: JobStackConfig) -> StackConfig:
    """The platform's StackConfig with this job stack's jobs in place of the platform's own;
    `ConfigError` (keys in the job project's namespace) when the facts are missing or of another
    version, the team is unknown, or a job cannot run on the platform."""
    if not isinstance(facts, Mapping) or "version" not in facts:
        raise _facts_problem(
            jobs.platform_stack, f"a deployed platform stack exporting `{FACTS_OUTPUT}`"
        )
    # Numbers cross the engine's wire as doubles: version 1 arrives as 1.0.
    version = facts["version"]
    if version != FACTS_VERSION:
        shown = int(version) if isinstance(version, float) and version.is_integer() else version
        raise _facts_problem(
            jobs.platform_stack,
            f"`{FACTS_OUTPUT}` version {FACTS_VERSION} (it has {shown}): update the "
            "platform stack or this repository",
        )
    teams = facts.get("teams") or {}
    if jobs.team not in teams:
        raise ConfigError(
            [
                f"{JOBS_NAMESPACE}:team: got {jobs.team!r}; a team of {jobs.platform_stack} "
                f"({', '.join(sorted(teams))})"
            ]
        )
    try:
        platform = parse(dict(facts["platformConfig"]))
    except ConfigError as exc:
        raise _facts_problem(
            jobs.platform_stack, "facts this program can read: " + "; ".join(exc.lines)
        ) from None
    cfg = platform.model_copy(update={"training_jobs": list(jobs.training_jobs)})
    found = job_problems(cfg) + job_stack_image_problems(cfg, facts.get("trainerImage"))
    taken = set(facts.get("platformJobs", {}).get(teams[jobs.team]["namespace"], []))
    for index, job in enumerate(jobs.training_jobs):
        if job.name in taken:
            found.append(
                Problem(
                    f"trainingJobs[{index}].name",
                    job.name,
                    f"a name the platform stack's own jobs do not use in "
                    f"{teams[jobs.team]['namespace']}",
                )
            )
    if found:
        raise ConfigError(jobs_lines(problem_lines(found)))
    _judged[:] = [cfg]
    return cfg


def job_stack_image_problems(cfg: StackConfig, trainer_image: Any) -> list[Problem]:
    """What a job stack cannot do with images: resolve a tag (it makes no AWS call of its own,
    and its deploy role has no ECR permission), or run the reference trainer of a platform that
    publishes none."""
    problems: list[Problem] = []
    for index, job in enumerate(cfg.training_jobs):
        key = f"trainingJobs[{index}].image"
        if job.image is not None and "@sha256:" not in job.image:
            problems.append(
                Problem(
                    key,
                    job.image,
                    "an image by digest (repo[:tag]@sha256:...): a job stack resolves no tags; "
                    "`crane digest <image>` prints it, or leave image out to run the platform's "
                    "reference trainer",
                )
            )
        elif job.image is None and not (isinstance(trainer_image, str) and "@" in trainer_image):
            problems.append(
                Problem(
                    key,
                    None,
                    "an image by digest: the platform stack publishes no trainerImage in "
                    f"`{FACTS_OUTPUT}` (deploy it first)",
                )
            )
    return problems


def job_problems(cfg: StackConfig) -> list[Problem]:
    """WILL-IT-RUN HOOK: every rule a job-stack job is judged by, key paths `trainingJobs[i]...`.

    The platform's own cross-area rules (`analysis.problems`, the list `analysis.check` runs for
    the platform), kept to the `trainingJobs` keys: the rest judges the platform's config, which
    its own stack already passed. Today that is analysis.jobs (team, GPU class and capacity type
    the pools provide, whole nodes, quota + borrowing, namespace limits, pool capacity, DeepSpeed
    batch, image digests). The will-it-run analysis (components/analysis/willrun.py) applies
    here as soon as `analysis.problems` lists it; if it must judge job stacks only, add its
    per-job problems to this list — nothing else changes.
    """
    return [p for p in analysis.problems(cfg) if p[0].startswith("trainingJobs[")]
