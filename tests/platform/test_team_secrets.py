"""Team secrets: ESO's release and identity, a SecretStore per team whose IAM role reads only
`teams/<team>/*`, a job's declared secrets rendered as an ExternalSecret plus read-only files
or env refs, and no secret value anywhere in synth output."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from components.platform.cluster.iam import AwsAccount
from components.platform.tenancy import team_secrets as platform_secrets
from synth import __main__ as synth_cli
from synth import output
from synth.harness import SynthResult
from tests.conftest import stack_values
from tests.platform.test_security_charts import chart_missing_keys

ACCOUNT = AwsAccount(account_id="123456789012", region="us-east-1", partition="aws")
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
STORE = "kubernetes:external-secrets.io/v1:SecretStore"
EXTERNAL_SECRET = "kubernetes:external-secrets.io/v1:ExternalSecret"


def _manifests(result: SynthResult, kind: str) -> list[dict[str, Any]]:
    return [m for m in output.manifests(result) if m["kind"] == kind]


def test_every_team_gets_a_store_on_its_own_role(prod: SynthResult) -> None:
    stores = {s["metadata"]["namespace"]: s for s in _manifests(prod, "SecretStore")}
    assert set(stores) == {"team-pretrain", "team-research"}
    for namespace, store in stores.items():
        aws = store["spec"]["provider"]["aws"]
        assert aws["service"] == "SecretsManager"
        assert aws["role"].endswith(f"-{namespace.removeprefix('team-')}")
    assert not [m for m in output.manifests(prod) if m["kind"] == "ClusterSecretStore"]


def test_team_roles_read_only_their_prefix(prod: SynthResult) -> None:
    reads = [r for r in prod.of_type(ROLE_POLICY) if r.name.endswith("-read")]
    assert {r.name for r in reads} == {"secrets-pretrain-read", "secrets-research-read"}
    for policy in reads:
        team = policy.name.removeprefix("secrets-").removesuffix("-read")
        statements = json.loads(policy.inputs["policy"])["Statement"]
        (read,) = [s for s in statements if s["Sid"] == "ReadTeamSecrets"]
        assert read["Resource"].endswith(f":secret:teams/{team}/*")
        assert all(
            a.startswith("secretsmanager:Get") or "Describe" in a or "List" in a
            for a in read["Action"]
        )


def test_team_policy_prefix_cannot_reach_a_longer_team_name() -> None:
    arn = platform_secrets.team_secret_arn(ACCOUNT, "research")
    assert arn == "arn:aws:secretsmanager:us-east-1:123456789012:secret:teams/research/*"


def test_controller_may_only_assume_team_roles(prod: SynthResult) -> None:
    (assume,) = [r for r in prod.of_type(ROLE_POLICY) if r.name == "secrets-eso-controller-assume"]
    (statement,) = json.loads(assume.inputs["policy"])["Statement"]
    assert statement["Action"] == ["sts:AssumeRole", "sts:TagSession"]
    assert len(statement["Resource"]) == 2


def test_eso_values_exist_in_the_chart_and_disable_cluster_stores() -> None:
    values = platform_secrets.eso_values()
    assert chart_missing_keys("external-secrets", values) == []
    assert values["processClusterStore"] is False


def test_a_job_gets_its_declared_secret_as_read_only_files(prod_jobs: SynthResult) -> None:
    (external,) = _manifests(prod_jobs, "ExternalSecret")
    assert external["metadata"]["namespace"] == "team-pretrain"
    assert external["spec"]["secretStoreRef"] == {
        "kind": "SecretStore",
        "name": "aws-secrets-manager",
    }
    assert external["spec"]["data"] == [
        {
            "secretKey": "api_key",
            "remoteRef": {"key": "teams/pretrain/wandb", "property": "api_key"},
        }
    ]
    (job,) = [j for j in _manifests(prod_jobs, "Job") if j["metadata"]["name"] == "pretrain-7b"]
    pod = job["spec"]["template"]["spec"]
    (volume,) = [v for v in pod["volumes"] if v["name"] == "secret-wandb"]
    assert volume["secret"]["secretName"] == "pretrain-7b-wandb"
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "secret-wandb"]
    assert mount == {
        "name": "secret-wandb",
        "mountPath": "/var/run/secrets/gpu-platform/wandb",
        "readOnly": True,
    }


def _with_secrets(config: dict[str, Any]) -> dict[str, Any]:
    config = copy.deepcopy(config)
    for job in config["gpu-platform:trainingJobs"]:
        job["secrets"] = [{"name": "wandb", "env": {"WANDB_API_KEY": "api_key"}, "files": ["key"]}]
    return config


def test_a_job_using_secrets_renders_no_secret_value(
    make_stack: Callable[[dict[str, Any]], Path], capsys: Any
) -> None:
    project = make_stack(_with_secrets(stack_values("dev")))
    assert synth_cli.main(["--stack", "t", "--project-dir", str(project)]) == 0, (
        capsys.readouterr().err
    )
    texts = {p.name: p.read_text() for p in (project / "build" / "t").iterdir()}
    assert set(texts) >= {"manifests.yaml", "resources.json", "report.md", "helm-releases.yaml"}
    manifests = texts["manifests.yaml"]
    # Names and paths only: an ExternalSecret per job, env by reference, no Secret object and
    # no literal value for the variable anywhere (the value lives in Secrets Manager only).
    jobs = len(stack_values("dev")["gpu-platform:trainingJobs"])
    assert manifests.count("kind: ExternalSecret") == jobs == 4
    assert "\nkind: Secret\n" not in manifests
    assert "name: WANDB_API_KEY\n          valueFrom:" in manifests
    for name, text in texts.items():
        assert "WANDB_API_KEY\n          value:" not in text, name
        assert '"name": "WANDB_API_KEY", "value"' not in text, name


def test_a_secret_value_in_config_is_a_config_error(
    expect_config_error: Callable[[dict[str, Any], str, str], None],
) -> None:
    config = copy.deepcopy(stack_values("dev"))
    config["gpu-platform:trainingJobs"][0]["env"] = {"WANDB_API_KEY": "0123abcd"}
    expect_config_error(config, "gpu-platform:trainingJobs[0].env", "declare them under `secrets`")
