"""Job-stack slice: the config of a team's job stack (the `jobs/` Pulumi project).

A job stack holds one team's training jobs. Its keys live in the `gpu-platform-jobs:` namespace
of `jobs/Pulumi.<team>-<env>.yaml`: the platform stack it deploys onto (`platformStack`, read
through a StackReference), the team it belongs to, and `trainingJobs` with the platform's own
schema (`TrainingJobConfig`). A job may leave `team` out (it defaults to the stack's team); a job
naming another team is refused here, before anything is read or registered.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Final

from pydantic import Field, StringConstraints, ValidationError, model_validator

from components.config.base import ConfigError, Model, Name, Problem, problems_error
from components.config.errors import format_errors
from components.config.load import namespace_values, rekeyed, runtime_values
from components.config.training import TrainingJobConfig

#: Config namespace of the job project (`name:` in jobs/Pulumi.yaml).
JOBS_NAMESPACE: Final = "gpu-platform-jobs"
#: `org/project/stack` (Pulumi Cloud) or `organization/project/stack`; the project is the
#: platform's, or a fleet manager's (`gpu-platform-fleet`, docs/fleet.md). A bare stack name
#: (`dev`) is what the DIY backends accept (a platform stack).
PlatformStackRef = Annotated[
    str,
    StringConstraints(pattern=r"^([A-Za-z0-9_.-]+/gpu-platform(-fleet)?/)?[A-Za-z0-9_.-]+$"),
]


class JobStackConfig(Model):
    """Everything under the `gpu-platform-jobs:` namespace of a job stack."""

    #: The platform stack whose `jobPlatform` output this stack deploys onto.
    platform_stack: PlatformStackRef
    #: The team whose namespace, queues and quota the jobs use (a `teams[].name` of the platform).
    team: Name
    training_jobs: Annotated[list[TrainingJobConfig], Field(min_length=1)]

    @model_validator(mode="before")
    @classmethod
    def _default_team(cls, data: Any) -> Any:
        # Jobs inherit the stack's team, so a team's file need not repeat it on every job.
        if not isinstance(data, dict) or not isinstance(data.get("team"), str):
            return data
        jobs = data.get("trainingJobs")
        if isinstance(jobs, list):
            data = {
                **data,
                "trainingJobs": [
                    {"team": data["team"], **job} if isinstance(job, dict) else job for job in jobs
                ],
            }
        return data

    @model_validator(mode="after")
    def _one_team(self) -> JobStackConfig:
        problems: list[Problem] = [
            Problem(
                f"trainingJobs[{index}].team",
                job.team,
                f"{self.team} (a job stack deploys only its own team's jobs)",
            )
            for index, job in enumerate(self.training_jobs)
            if job.team != self.team
        ]
        if problems:
            raise problems_error(problems)
        return self

    @property
    def platform_project(self) -> str:
        """The referenced stack's project (`gpu-platform`, or a fleet's `gpu-platform-fleet`)."""
        parts = self.platform_stack.split("/")
        return parts[1] if len(parts) == 3 else "gpu-platform"

    @property
    def platform_env(self) -> str:
        """The referenced platform stack's own name (`dev` of `org/gpu-platform/dev`)."""
        return self.platform_stack.rsplit("/", 1)[-1]


def jobs_lines(lines: list[str]) -> list[str]:
    """Config-error lines re-keyed from the platform's namespace to the job project's."""
    return rekeyed(lines, JOBS_NAMESPACE)


def parse_job_stack(values: Mapping[str, Any]) -> JobStackConfig:
    """Validate the job project's keys (names without the `gpu-platform-jobs:` prefix)."""
    try:
        return JobStackConfig.model_validate(dict(values))
    except ValidationError as exc:
        raise ConfigError(jobs_lines(format_errors(exc, JobStackConfig))) from None


def job_namespace_values(all_config: Mapping[str, str]) -> dict[str, Any]:
    """The job project's keys from a flat `namespace:key -> value` map, decoded."""
    return namespace_values(all_config, JOBS_NAMESPACE)


def load_job_stack() -> JobStackConfig:
    """Read and validate the job stack's config from the Pulumi runtime (CLI or mocks)."""
    return parse_job_stack(job_namespace_values(runtime_values()))
