"""Pure builders for a training job's declared secrets (`trainingJobs[].secrets`): one External
Secrets Operator `ExternalSecret` per secret (AWS Secrets Manager `teams/<team>/<name>` → a
Kubernetes Secret owned by it, in the team namespace), and the env vars / read-only files the
trainer container gets from that Secret. Only names and paths are rendered: values never pass
through the program, so neither synth output nor the Pulumi state holds one.

API `external-secrets.io/v1` (v1beta1 is no longer served by chart 2.9.0:
external-secrets/external-secrets@helm-chart-2.9.0:config/crds/bases/
external-secrets.io_secretstores.yaml); field names from the same tag's
apis/externalsecrets/v1/externalsecret_types.go.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from components.config.security import SECRET_STORE_NAME, SECRETS_PATH_PREFIX

if TYPE_CHECKING:
    from components.config.training import JobSecret
    from components.training_jobs.plan import JobPlan

ESO_API: Final = "external-secrets.io/v1"
SECRET_FILES_ROOT: Final = "/var/run/secrets/gpu-platform"


def remote_key(team: str, secret: JobSecret) -> str:
    return f"{SECRETS_PATH_PREFIX}/{team}/{secret.name}"


def secret_name(plan: JobPlan, secret: JobSecret) -> str:
    """The Kubernetes Secret ESO writes: per job, so deleting the job removes its copy."""
    return f"{plan.name}-{secret.name}"


def _properties(secret: JobSecret) -> list[str]:
    return sorted({*secret.env.values(), *secret.files})


def external_secret(plan: JobPlan, secret: JobSecret, refresh_interval: str) -> dict[str, Any]:
    name = secret_name(plan, secret)
    return {
        "apiVersion": ESO_API,
        "kind": "ExternalSecret",
        "metadata": {
            "name": name,
            "namespace": plan.namespace,
            "labels": {"gpu-platform.io/training-job": plan.name},
        },
        "spec": {
            "refreshInterval": refresh_interval,
            # The team's own namespaced store: it can reach only teams/<team>/*.
            "secretStoreRef": {"kind": "SecretStore", "name": SECRET_STORE_NAME},
            "target": {"name": name, "creationPolicy": "Owner", "deletionPolicy": "Delete"},
            "data": [
                {
                    "secretKey": prop,
                    "remoteRef": {"key": remote_key(plan.team.name, secret), "property": prop},
                }
                for prop in _properties(secret)
            ],
        },
    }


def external_secrets(plan: JobPlan, refresh_interval: str = "1h") -> list[dict[str, Any]]:
    return [external_secret(plan, s, refresh_interval) for s in plan.job.secrets]


def env_rows(plan: JobPlan) -> list[dict[str, Any]]:
    return [
        {
            "name": var,
            "valueFrom": {"secretKeyRef": {"name": secret_name(plan, secret), "key": prop}},
        }
        for secret in plan.job.secrets
        for var, prop in sorted(secret.env.items())
    ]


def volumes(plan: JobPlan) -> list[dict[str, Any]]:
    return [
        {
            "name": f"secret-{secret.name}",
            "secret": {
                "secretName": secret_name(plan, secret),
                "items": [{"key": prop, "path": prop} for prop in sorted(secret.files)],
                "defaultMode": 0o440,
            },
        }
        for secret in plan.job.secrets
        if secret.files
    ]


def volume_mounts(plan: JobPlan) -> list[dict[str, Any]]:
    return [
        {
            "name": f"secret-{secret.name}",
            "mountPath": f"{SECRET_FILES_ROOT}/{secret.name}",
            "readOnly": True,
        }
        for secret in plan.job.secrets
        if secret.files
    ]
