"""Central logs: encrypted log groups with per-stack retention created before the CloudWatch
Observability add-on, its configuration against the chart it is built from, log-based alarms
for NCCL failures and GPU XIDs, per-team and audit queries."""

from __future__ import annotations

import json
import re
from typing import Any

from components.platform.cluster.iam import AwsAccount
from components.platform.observability import cluster_logs as platform_logging
from synth.harness import SynthResult, run_program
from tests.conftest import stack_values
from tests.platform.test_security_charts import chart_missing_keys

GROUP = "aws:cloudwatch/logGroup:LogGroup"
ADDON = "aws:eks/addon:Addon"
FILTER = "aws:cloudwatch/logMetricFilter:LogMetricFilter"
ALARM = "aws:cloudwatch/metricAlarm:MetricAlarm"
QUERY = "aws:cloudwatch/queryDefinition:QueryDefinition"


def _groups(result: SynthResult) -> dict[str, dict[str, object]]:
    return {
        r.inputs["name"]: r.inputs
        for r in result.of_type(GROUP)
        if r.inputs["name"].startswith("/aws/containerinsights/")
    }


def test_log_groups_are_encrypted_with_retention_per_stack(
    prod: SynthResult, dev: SynthResult
) -> None:
    for result, cluster, days in ((prod, "gpu-prod", 365), (dev, "gpu-dev", 30)):
        groups = _groups(result)
        assert set(groups) == {
            f"/aws/containerinsights/{cluster}/{g}"
            for g in ("application", "dataplane", "host", "performance")
        }
        for group in groups.values():
            assert str(group["kmsKeyId"]).startswith("arn:aws:kms:")
            assert group["retentionInDays"] == days


def test_the_addon_waits_for_the_groups_and_runs_with_pod_identity(prod: SynthResult) -> None:
    (addon,) = [a for a in prod.of_type(ADDON) if a.inputs["addonName"] == platform_logging.ADDON]
    assert addon.inputs["addonVersion"] == platform_logging.ADDON_VERSION
    group_urns = {r.urn for r in prod.of_type(GROUP)}
    assert len(group_urns & set(addon.dependencies)) == 4
    (association,) = addon.inputs["podIdentityAssociations"]
    assert association["serviceAccount"] == "cloudwatch-agent"
    assert json.loads(addon.inputs["configurationValues"])["dcgmExporter"] == {"enabled": False}


def test_addon_configuration_keys_exist_in_its_chart() -> None:
    config = platform_logging.addon_configuration()
    assert chart_missing_keys("amazon-cloudwatch-observability", config) == []
    assert chart_missing_keys("amazon-cloudwatch-observability", {"nope": 1}) == ["nope"]


def _matches(pattern: str, line: str) -> bool:
    """CloudWatch unstructured filter semantics for the patterns used: `?"a" ?"b"` is any of
    the quoted terms, a single `"a"` is that substring."""
    terms = re.findall(r'"([^"]+)"', pattern)
    return any(term in line for term in terms)


def test_alarms_fire_on_nccl_and_xid_lines(prod: SynthResult) -> None:
    filters = {f.inputs["metricTransformation"]["name"]: f.inputs for f in prod.of_type(FILTER)}
    assert set(filters) == {"NcclFailures", "GpuXidErrors"}
    nccl = filters["NcclFailures"]["pattern"]
    assert filters["NcclFailures"]["logGroupName"].endswith("/application")
    assert filters["GpuXidErrors"]["logGroupName"].endswith("/host")
    # Real log lines (PyTorch ProcessGroupNCCL.cpp, NVIDIA driver) and a quiet one.
    assert _matches(
        nccl,
        "[rank0]:[E1218 20:27:21.426 ProcessGroupNCCL.cpp:629] [Rank 0] Watchdog caught "
        "collective operation timeout: WorkNCCL(SeqNum=1, OpType=BROADCAST) ran for 600081 ms",
    )
    assert _matches(
        nccl, "torch.distributed.DistBackendError: NCCL communicator was aborted on rank 2."
    )
    assert not _matches(nccl, "step 1200 loss 2.31 tokens/s 1.2e6")
    assert _matches(
        filters["GpuXidErrors"]["pattern"],
        "kernel: NVRM: Xid (PCI:0000:01:00): 79, pid=1122, GPU has fallen off the bus.",
    )
    alarms = {
        a.inputs["metricName"]: a.inputs
        for a in prod.of_type(ALARM)
        if a.inputs.get("namespace") == platform_logging.METRIC_NAMESPACE
    }
    assert set(alarms) == set(filters)
    for alarm in alarms.values():
        assert alarm["threshold"] == 1 and alarm["alarmActions"]


def test_logs_key_lets_cloudwatch_use_it_for_this_account_only() -> None:
    account = AwsAccount(account_id="123456789012", region="us-east-1", partition="aws")
    statements = platform_logging.logs_key_policy(account)["Statement"]
    (logs,) = [s for s in statements if s["Sid"] == "CloudWatchLogsUse"]
    assert logs["Principal"] == {"Service": "logs.us-east-1.amazonaws.com"}
    condition = logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
    assert condition == "arn:aws:logs:us-east-1:123456789012:log-group:*"


def test_queries_per_team_and_for_submissions(prod: SynthResult, dev: SynthResult) -> None:
    names = {q.inputs["name"]: q.inputs for q in prod.of_type(QUERY)}
    assert set(names) == {
        "gpu-prod/team-pretrain",
        "gpu-prod/team-research",
        "gpu-prod/training-submissions",
    }
    assert (
        "kubernetes.namespace_name = 'team-pretrain'"
        in names["gpu-prod/team-pretrain"]["queryString"]
    )
    submissions = names["gpu-prod/training-submissions"]
    assert submissions["logGroupNames"] == ["/aws/eks/gpu-prod/cluster"]
    assert "user.username" in submissions["queryString"]
    # Dev's control plane sends audit logs too (its logTypes include audit).
    assert any(q.inputs["name"] == "gpu-dev/training-submissions" for q in dev.of_type(QUERY))


def _control_plane(result: SynthResult) -> tuple[Any, Any]:
    (cluster,) = result.of_type("eks:index:Cluster")
    groups = [g for g in result.of_type(GROUP) if g.inputs["name"].startswith("/aws/eks/")]
    return cluster, groups


def test_control_plane_log_group_exists_first_encrypted_with_retention(
    prod: SynthResult, dev: SynthResult
) -> None:
    for result, days in ((prod, 365), (dev, 30)):
        cluster, groups = _control_plane(result)
        (group,) = groups
        # EKS's own name for the group (terraform-aws-eks main.tf: /aws/eks/${var.name}/cluster).
        assert group.inputs["name"] == f"/aws/eks/{cluster.inputs['name']}/cluster"
        assert group.inputs["retentionInDays"] == days
        (key,) = [r for r in result.of_type("aws:kms/key:Key") if r.urn in group.dependencies]
        assert key.name == "logging-key"
        policy = json.loads(key.inputs["policy"])
        assert any(
            s.get("Principal") == {"Service": "logs.us-east-1.amazonaws.com"}
            for s in policy["Statement"]
        )
        assert str(group.inputs["kmsKeyId"]).startswith("arn:aws:kms:us-east-1:")
        # The same key as the add-on's groups, and the cluster waits for the group.
        application = _groups(result)[
            f"/aws/containerinsights/{cluster.inputs['name']}/application"
        ]
        assert group.inputs["kmsKeyId"] == application["kmsKeyId"]
        assert group.urn in cluster.dependencies
    # The submissions query reads that group.
    (query,) = [q for q in prod.of_type(QUERY) if q.inputs["name"].endswith("submissions")]
    assert query.inputs["logGroupNames"] == ["/aws/eks/gpu-prod/cluster"]


def test_control_plane_log_group_follows_log_types_not_the_addon_switch() -> None:
    cluster_cfg = {**stack_values("prod")["gpu-platform:cluster"], "logTypes": []}
    quiet = run_program("prod", overrides={"gpu-platform:cluster": cluster_cfg})
    cluster, groups = _control_plane(quiet)
    assert cluster.inputs["name"] == "gpu-prod" and groups == []
    assert not any("logGroup" in d for d in cluster.dependencies)

    security = stack_values("prod")["gpu-platform:security"]
    no_addon = {**security, "logging": {**security.get("logging", {}), "enabled": False}}
    result = run_program("prod", overrides={"gpu-platform:security": no_addon})
    assert not [a for a in result.of_type(ADDON) if a.inputs["addonName"] == platform_logging.ADDON]
    cluster, (group,) = _control_plane(result)
    assert group.urn in cluster.dependencies
    assert str(group.inputs["kmsKeyId"]).startswith("arn:aws:kms:")
