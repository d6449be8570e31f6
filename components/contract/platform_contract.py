"""The platform's `jobPlatform` (contract/job_platform.py `PlatformContract`): how a platform
stack writes it, and how a team's job stack reads it and judges its jobs on it.

Writing: `platform_contract(facts, ...)` builds the model from the platform's facts, purely:
per team its namespace, queues, claims, quotas and limits; the GPU classes with each flavor's
capacity and instance types; the data buckets, the RWX storage class, the training settings
and the platform's config itself (`platformConfig`, its training jobs left out). The
composition root (__main__.py) builds it once the values known only at deploy time resolved
(the trainer's pushed digest, the teams' repository URLs: contract/schema.py `resolved`) and
exports `exported(...)`.

Reading: `read_job_platform` parses what a job stack's StackReference read, once: a platform's
`PlatformContract` or a fleet manager's `FleetContract` (contract/fleet_contract.py), or
`ConfigError` naming `platformStack` when the output is missing or of another version — the
version is the model's schema's, the config model nested, so a change to either is a contract
change by construction (deploy the platform first). `job_stack_config` then rebuilds the
platform's `StackConfig` with the stack's jobs and judges them by exactly the rules the
platform's own jobs are (analysis.validate / build / judge: quota, will it run) against the
platform's real capacity and quotas, without the platform's stack file.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from components import analysis, catalog
from components.analysis import Judgement, StackFacts
from components.analysis.trainer import runtime_problems
from components.config import (
    ConfigError,
    Problem,
    StackConfig,
    TeamConfig,
    trainer_runtime_names,
)
from components.config.errors import problem_lines
from components.config.job_stack import JOBS_NAMESPACE, JobStackConfig, jobs_lines
from components.contract.fleet_platform import FleetContract
from components.contract.job_platform import (
    KUBECONFIG_OUTPUT,
    ClusterRef,
    GpuFlavor,
    PlatformContract,
    PlatformTeam,
    TeamClaims,
    TeamLimits,
    TeamQuota,
)
from components.contract.schema import Contract, ContractError, dumped, parse_contract


def deploy_role_name(cluster_name: str, team: str) -> str:
    """IAM role a team's job stack deploys with (CI assumes it through GitHub OIDC)."""
    return f"{cluster_name}-{team}-jobs-deploy"[:64]


def preview_role_name(cluster_name: str, team: str) -> str:
    """IAM role a team's pull-request previews run with (read-only in the namespace)."""
    return f"{cluster_name}-{team}-jobs-preview"[:64]


def role_arns(
    account_id: str, cluster_name: str, team: str, has_roles: bool
) -> tuple[str | None, str | None]:
    """A team's deploy and preview role ARNs (components/platform/tenancy/team_deploy.py),
    None where it has no CI identity."""
    if not has_roles:
        return None, None
    return (
        f"arn:aws:iam::{account_id}:role/{deploy_role_name(cluster_name, team)}",
        f"arn:aws:iam::{account_id}:role/{preview_role_name(cluster_name, team)}",
    )


def _flavors(facts: StackFacts) -> dict[str, dict[catalog.CapacityType, GpuFlavor]]:
    """GPU class -> capacity type -> GPUs the pools provide and the instance types they launch."""
    cfg = facts.cfg
    out: dict[str, dict[catalog.CapacityType, GpuFlavor]] = {}
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
        out.setdefault(gpu_class, {})[capacity_type] = GpuFlavor(
            flavor=catalog.gpu_flavor_name(gpu_class, capacity_type),
            gpus=gpus,
            instance_types=sorted(types.get((gpu_class, capacity_type), set())),
        )
    return out


def _team(
    team: TeamConfig, *, cluster_name: str, account_id: str, image_repository: str | None
) -> PlatformTeam:
    """One team as a job stack needs it: namespace, queues, claims, quota, limits, CI roles."""
    deploy_role, preview_role = role_arns(
        account_id, cluster_name, team.name, team.deploy is not None
    )
    return PlatformTeam(
        namespace=team.namespace,
        local_queue=team.name,
        volcano_queue=team.name,
        service_account=catalog.TRAINER_SERVICE_ACCOUNT,
        group=team.group,
        claims=TeamClaims(checkpoints=f"{team.name}-checkpoints", datasets=f"{team.name}-datasets"),
        image_repository=image_repository,
        quota=[
            TeamQuota(
                flavor=entry.flavor,
                gpu_class=entry.gpu_class,
                capacity_type=entry.capacity_type,
                gpus=entry.gpus,
                borrowing_limit_gpus=entry.borrowing_limit_gpus,
            )
            for entry in team.quota
        ],
        limits=TeamLimits(
            gpus=team.limits.gpus, cpu=team.limits.cpu, memory_gib=team.limits.memory_gib
        ),
        deploy_role_arn=deploy_role,
        preview_role_arn=preview_role,
    )


def platform_contract(
    facts: StackFacts,
    *,
    account_id: str,
    storage_class: str,
    trainer_image: str | None = None,
    image_repositories: Mapping[str, str] | None = None,
) -> PlatformContract:
    """The `jobPlatform` output of a platform stack (module docstring), from plain values.
    `trainer_image`: the reference trainer's `repo@sha256:...` (its push or resolution), or
    None where `training.defaultImage` gives the default by digest. `image_repositories`:
    team -> the URL of its own image repository (teams with a deploy identity;
    components/platform/registry/registry.py)."""
    cfg = facts.cfg
    buckets = {
        purpose: catalog.bucket_name(cfg.bucket_prefix, purpose, account_id)
        for purpose in catalog.DATA_BUCKET_PURPOSES
    }
    teams = {
        team.name: _team(
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
    return PlatformContract(
        version=PlatformContract.current_version(),
        environment=cfg.environment,
        account_id=account_id,
        cluster=ClusterRef(name=cfg.cluster.name, kubeconfig_output=KUBECONFIG_OUTPUT),
        buckets=buckets,
        storage_class=storage_class,
        teams=teams,
        gpu_classes=_flavors(facts),
        training=cfg.training,
        trainer_image=trainer_image if trainer_image is not None else cfg.training.default_image,
        training_runtimes=list(trainer_runtime_names()),
        platform_jobs={ns: sorted(names) for ns, names in sorted(platform_jobs.items())},
        platform_config=cfg.model_copy(update={"training_jobs": []}),
    )


def exported(contract: Contract | pulumi.Output[Contract]) -> pulumi.Output[dict[str, Any]]:
    """A `jobPlatform` (or an Output of one) as `pulumi.export` should publish it: its dump,
    plain, unless a key of the platform's namespace was set as a secret (`pulumi config set
    --secret`): `platformConfig` then carries its value, so the whole output is marked secret
    rather than leak it (no key is one today; a job stack reads a secret output all the same).
    `is_config_secret` is the pinned SDK's."""
    from pulumi.runtime import config as runtime_config

    given_contract: pulumi.Output[Contract] = pulumi.Output.from_input(contract)
    value = given_contract.apply(dumped)
    given = runtime_config.CONFIG.get()
    if any(k.startswith("gpu-platform:") and runtime_config.is_config_secret(k) for k in given):
        return pulumi.Output.secret(value)
    return value


def _platform_problem(platform_stack: str, what: str) -> ConfigError:
    return ConfigError([f"{JOBS_NAMESPACE}:platformStack: got {platform_stack!r}; {what}"])


@dataclass(frozen=True)
class JudgedJobs:
    """A job stack's jobs on its platform: the platform's config with the stack's jobs, its
    facts, and the judgement of the jobs (what jobs/__main__.py holds and deploys from)."""

    config: StackConfig
    facts: StackFacts
    judgement: Judgement


def read_job_platform(value: object, jobs: JobStackConfig) -> PlatformContract | FleetContract:
    """What a job stack read of its `platformStack`'s `jobPlatform`, parsed: a fleet manager's
    (it has `fleet`) or a platform's; `ConfigError` when it is missing or of another version
    or shape than this revision reads."""
    model: type[PlatformContract | FleetContract] = (
        FleetContract if isinstance(value, Mapping) and "fleet" in value else PlatformContract
    )
    try:
        contract = parse_contract(model, value)
    except ContractError as exc:
        raise _platform_problem(
            jobs.platform_stack,
            f"{exc.problem}: deploy the platform stack from this repository's revision first "
            "(the version follows the contract's models, the config model included)",
        ) from None
    if contract is None:
        raise _platform_problem(
            jobs.platform_stack, f"a deployed platform stack exporting `{model.OUTPUT}`"
        )
    return contract


def job_stack_config(contract: PlatformContract, jobs: JobStackConfig) -> JudgedJobs:
    """The platform's StackConfig with this job stack's jobs in place of the platform's own,
    built and judged; `ConfigError` (keys in the job project's namespace) when the team is
    unknown or a job cannot run on the platform."""
    teams = contract.teams
    if jobs.team not in teams:
        raise ConfigError(
            [
                f"{JOBS_NAMESPACE}:team: got {jobs.team!r}; a team of {jobs.platform_stack} "
                f"({', '.join(sorted(teams))})"
            ]
        )
    cfg = contract.platform_config.model_copy(update={"training_jobs": list(jobs.training_jobs)})
    found = job_stack_image_problems(cfg, contract.trainer_image)
    for index, job in enumerate(jobs.training_jobs):
        found += runtime_problems(f"trainingJobs[{index}]", job, contract.training_runtimes)
    namespace = teams[jobs.team].namespace
    taken = set(contract.platform_jobs.get(namespace, []))
    for index, job in enumerate(jobs.training_jobs):
        if job.name in taken:
            found.append(
                Problem(
                    f"trainingJobs[{index}].name",
                    job.name,
                    f"a name the platform stack's own jobs do not use in {namespace}",
                )
            )
    return judge_jobs(cfg, found)


def job_stack_image_problems(cfg: StackConfig, trainer_image: str | None) -> list[Problem]:
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
        elif job.image is None and not (trainer_image is not None and "@" in trainer_image):
            problems.append(
                Problem(
                    key,
                    None,
                    "an image by digest: the platform stack publishes no trainerImage in "
                    f"`{PlatformContract.OUTPUT}` (deploy it first)",
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
