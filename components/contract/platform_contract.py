"""What a team's job stack needs from the platform stack: the `jobPlatform` stack output.

`platform_contract(facts, ...)` computes it from the platform's facts, purely: per team
its namespace, Kueue LocalQueue, Volcano queue, service account, storage claims, quotas per
flavor and namespace limits; the GPU classes with each flavor's capacity and instance types; the
data buckets, the RWX storage class and the training settings. It also carries the platform
config itself (`platformConfig`, trainingJobs left out): the job stack rebuilds the platform's
`StackConfig` from it (`job_stack_config`) so that its jobs are judged by exactly the rules the
platform's own jobs are (analysis.validate / build / judge: quota, will it run) against the
platform's real capacity and quotas, without the platform's stack file.

The output is versioned, and the version is derived from what it carries (`contract_version`):
the JSON schema of the config model `platformConfig` is validated against, plus a revision of
the contract's own keys. A change to the config model is a contract change by construction, and
a job stack refuses an output of another version rather than misreading it (deploy the platform
first). The kubeconfig is not in it: it is the platform's separate, secret `kubeconfig` output,
so this one stays plain (readable with `pulumi stack output`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from pydantic import BaseModel

from components import analysis, catalog
from components.analysis import Judgement, StackFacts
from components.analysis.trainer import runtime_problems
from components.config import (
    ConfigError,
    Problem,
    StackConfig,
    TeamConfig,
    parse,
    trainer_runtime_names,
)
from components.config.errors import problem_lines
from components.config.job_stack import JOBS_NAMESPACE, JobStackConfig, jobs_lines

#: The revision of the contract's own keys (bump it when `platform_contract` changes shape);
#: 2 added `trainerImage` and the teams' `imageRepository`; 3 `trainingRuntimes` (TrainJobs
#: name a runtime per priority and grace period, no longer one per priority).
CONTRACT_REVISION: Final = 3


def contract_version(model: type[BaseModel] = StackConfig) -> str:
    """`<revision>-<sha256 of the config model's JSON schema, 16 hex>`: derived from the schema
    `platformConfig` is validated against, so any change to the config model changes it."""
    schema = json.dumps(model.model_json_schema(by_alias=True), sort_keys=True)
    return f"{CONTRACT_REVISION}-{hashlib.sha256(schema.encode()).hexdigest()[:16]}"


#: The platform stack output a job stack reads, and the one holding the (secret) kubeconfig.
JOB_PLATFORM_OUTPUT: Final = "jobPlatform"
KUBECONFIG_OUTPUT: Final = "kubeconfig"


def deploy_role_name(cluster_name: str, team: str) -> str:
    """IAM role a team's job stack deploys with (CI assumes it through GitHub OIDC)."""
    return f"{cluster_name}-{team}-jobs-deploy"[:64]


def preview_role_name(cluster_name: str, team: str) -> str:
    """IAM role a team's pull-request previews run with (read-only in the namespace)."""
    return f"{cluster_name}-{team}-jobs-preview"[:64]


def _flavors(facts: StackFacts) -> dict[str, dict[str, dict[str, Any]]]:
    """GPU class -> capacity type -> GPUs the pools provide and the instance types they launch."""
    cfg = facts.cfg
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
    for (gpu_class, capacity_type), gpus in sorted(facts.capacity.items()):
        out.setdefault(gpu_class, {})[capacity_type] = {
            "flavor": catalog.gpu_flavor_name(gpu_class, capacity_type),
            "gpus": gpus,
            "instanceTypes": sorted(types.get((gpu_class, capacity_type), set())),
        }
    return out


def _team_entry(
    team: TeamConfig, *, cluster_name: str, account_id: str, image_repository: Any
) -> dict[str, Any]:
    """One team as a job stack needs it: namespace, queues, claims, quota, limits, CI roles."""
    return {
        "namespace": team.namespace,
        "localQueue": team.name,
        "volcanoQueue": team.name,
        "serviceAccount": catalog.TRAINER_SERVICE_ACCOUNT,
        "group": team.group,
        "claims": {role: f"{team.name}-{role}" for role in ("checkpoints", "datasets")},
        # Where the team's CI pushes (and signs) its own images; None without a deploy role.
        "imageRepository": image_repository,
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
                f"arn:aws:iam::{account_id}:role/{name(cluster_name, team.name)}"
                if team.deploy is not None
                else None
            )
            for kind, name in (("deploy", deploy_role_name), ("preview", preview_role_name))
        },
    }


def platform_contract(
    facts: StackFacts,
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
    cfg = facts.cfg
    buckets = {
        purpose: catalog.bucket_name(cfg.bucket_prefix, purpose, account_id)
        for purpose in catalog.DATA_BUCKET_PURPOSES
    }
    teams = {
        team.name: _team_entry(
            team,
            cluster_name=cfg.cluster.name,
            account_id=account_id,
            image_repository=(image_repositories or {}).get(team.name),
        )
        for team in cfg.teams
    }
    platform_jobs: dict[str, list[str]] = {}
    namespaces = {team.name: team.namespace for team in cfg.teams}
    for job in cfg.training_jobs:
        platform_jobs.setdefault(namespaces.get(job.team, job.team), []).append(job.name)
    return {
        "version": contract_version(),
        "environment": cfg.environment,
        "accountId": account_id,
        "cluster": {"name": cfg.cluster.name, "kubeconfigOutput": KUBECONFIG_OUTPUT},
        "buckets": buckets,
        "storageClass": storage_class,
        "teams": teams,
        "gpuClasses": _flavors(facts),
        "training": cfg.training.model_dump(mode="json", by_alias=True),
        "trainerImage": trainer_image if trainer_image is not None else cfg.training.default_image,
        # The ClusterTrainingRuntimes it renders (cluster-scoped: a job stack's TrainJob can
        # only name one of these, components/analysis/trainer.py runtime_problems).
        "trainingRuntimes": list(trainer_runtime_names()),
        "platformJobs": {ns: sorted(names) for ns, names in sorted(platform_jobs.items())},
        "platformConfig": cfg.model_dump(mode="json", by_alias=True, exclude={"training_jobs"}),
    }


def exported(contract: dict[str, Any]) -> Any:
    """The contract as `pulumi.export` should publish them: plain, unless a key of the platform's
    namespace was set as a secret (`pulumi config set --secret`): `platformConfig` then carries
    its value, so the whole output is marked secret rather than leak it (no key is one today;
    a job stack reads a secret output all the same). `is_config_secret` is the pinned SDK's."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    given = runtime_config.CONFIG.get()
    if any(k.startswith("gpu-platform:") and runtime_config.is_config_secret(k) for k in given):
        return pulumi.Output.secret(contract)
    return contract


def _platform_problem(platform_stack: str, what: str) -> ConfigError:
    return ConfigError([f"{JOBS_NAMESPACE}:platformStack: got {platform_stack!r}; {what}"])


@dataclass(frozen=True)
class JudgedJobs:
    """A job stack's jobs on its platform: the platform's config with the stack's jobs, its
    facts, and the judgement of the jobs (what jobs/__main__.py holds and deploys from)."""

    config: StackConfig
    facts: StackFacts
    judgement: Judgement


def check_contract(contract: Mapping[str, Any] | None, jobs: JobStackConfig) -> Mapping[str, Any]:
    """The platform's (or fleet manager's) `jobPlatform`, or `ConfigError` when they are missing or
    of another version than this revision reads."""
    if not isinstance(contract, Mapping) or "version" not in contract:
        raise _platform_problem(
            jobs.platform_stack, f"a deployed platform stack exporting `{JOB_PLATFORM_OUTPUT}`"
        )
    # Numbers cross the engine's wire as doubles: an old integer version 1 arrives as 1.0.
    version, expected = contract["version"], contract_version()
    if version != expected:
        shown = int(version) if isinstance(version, float) and version.is_integer() else version
        raise _platform_problem(
            jobs.platform_stack,
            f"`{JOB_PLATFORM_OUTPUT}` version {expected} (it has {shown}): deploy the platform "
            "stack from this repository's revision first (the contract follows the config model)",
        )
    return contract


def job_stack_config(contract: Mapping[str, Any] | None, jobs: JobStackConfig) -> JudgedJobs:
    """The platform's StackConfig with this job stack's jobs in place of the platform's own,
    built and judged; `ConfigError` (keys in the job project's namespace) when `jobPlatform` is
    missing or of another version, the team is unknown, or a job cannot run on the platform."""
    contract = check_contract(contract, jobs)
    teams = contract.get("teams") or {}
    if jobs.team not in teams:
        raise ConfigError(
            [
                f"{JOBS_NAMESPACE}:team: got {jobs.team!r}; a team of {jobs.platform_stack} "
                f"({', '.join(sorted(teams))})"
            ]
        )
    try:
        platform = parse(dict(contract["platformConfig"]))
    except ConfigError as exc:
        raise _platform_problem(
            jobs.platform_stack, "a `jobPlatform` this program can read: " + "; ".join(exc.lines)
        ) from None
    cfg = platform.model_copy(update={"training_jobs": list(jobs.training_jobs)})
    found = job_stack_image_problems(cfg, contract.get("trainerImage"))
    runtimes = [str(r) for r in contract.get("trainingRuntimes") or ()]
    for index, job in enumerate(jobs.training_jobs):
        found += runtime_problems(f"trainingJobs[{index}]", job, runtimes)
    taken = set(contract.get("platformJobs", {}).get(teams[jobs.team]["namespace"], []))
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
    return judge_jobs(cfg, found)


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
                    f"`{JOB_PLATFORM_OUTPUT}` (deploy it first)",
                )
            )
    return problems


def judge_jobs(cfg: StackConfig, found: list[Problem]) -> JudgedJobs:
    """The platform's own phases on a job stack's jobs (analysis.validate, build, judge), kept
    to the `trainingJobs` keys: the rest judges the platform's config, which its own stack
    already passed. `found`: the job stack's own problems so far, reported with them."""
    found = found + only_jobs(analysis.validate(cfg))
    if found:
        raise ConfigError(jobs_lines(problem_lines(found)))
    facts = analysis.build(cfg)
    judgement = analysis.judge(facts)
    problems = only_jobs(judgement.problems)
    if problems:
        raise ConfigError(jobs_lines(problem_lines(problems)))
    return JudgedJobs(cfg, facts, judgement)


def only_jobs(problems: tuple[Problem, ...] | list[Problem]) -> list[Problem]:
    """The problems of `trainingJobs` keys."""
    return [p for p in problems if p.key.startswith("trainingJobs[")]
