"""Teams: pure builders (quota, queues, network, IAM), the per-team objects in both stacks, the
generated IAM documents, and the config errors of the `teams` section."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from components import catalog
from components import config as stack_config
from components.analysis.capacity import gpu_capacity
from components.analysis.facts import build
from components.platform.scheduling.scheduling import flavors
from components.platform.tenancy.team_queues import cluster_queue_spec
from components.platform.tenancy.teams import (
    NON_PUBLIC_CIDRS,
    TRAINER_SERVICE_ACCOUNT,
    data_buckets,
    network_policies,
    role_rules,
    trainer_policy,
)
from synth.harness import SynthResult
from synth.mocks import ACCOUNT_ID
from tests.conftest import config_error_test, stack_values

RELEASE = "kubernetes:helm.sh/v3:Release"
NAMESPACE = "kubernetes:core/v1:Namespace"
QUOTA = "kubernetes:core/v1:ResourceQuota"
LIMIT_RANGE = "kubernetes:core/v1:LimitRange"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"
POD_IDENTITY = "aws:eks/podIdentityAssociation:PodIdentityAssociation"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"


def _config(stack: str) -> stack_config.StackConfig:
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in stack_values(stack).items()}
    return stack_config.parse(stack_config.namespace_values(raw))


def _in_namespace(result: SynthResult, type_token: str, namespace: str) -> list[dict[str, Any]]:
    return [
        r.inputs
        for r in result.of_type(type_token)
        if r.inputs.get("metadata", {}).get("namespace") == namespace
    ]


# --- pure builders ------------------------------------------------------------------------------


def test_cluster_queue_preempts_by_priority_reclaims_in_cohort_and_tries_spot_first() -> None:
    prod = _config("prod")
    research = next(t for t in prod.teams if t.name == "research")
    spec = cluster_queue_spec(research, flavors(build(prod)), "gpu-platform")
    assert spec["cohortName"] == "gpu-platform"
    assert spec["preemption"]["withinClusterQueue"] == "LowerPriority"
    assert spec["preemption"]["reclaimWithinCohort"] == "Any"
    (group,) = spec["resourceGroups"]
    assert group["coveredResources"] == ["cpu", "memory", catalog.GPU_RESOURCE]
    names = [f["name"] for f in group["flavors"]]
    assert names.index("l4-x1-spot") < names.index("l4-x1-on-demand")
    for flavor in group["flavors"]:
        assert [r["name"] for r in flavor["resources"]] == group["coveredResources"]
    spot = next(f for f in group["flavors"] if f["name"] == "l4-x1-spot")
    gpu = spot["resources"][2]
    assert (gpu["nominalQuota"], gpu["borrowingLimit"]) == ("12", "4")
    # CPU borrowing scales with the GPUs that may be borrowed (96 cores for 12 GPUs -> 32).
    assert spot["resources"][0]["borrowingLimit"] == "32"


def test_network_policies_deny_foreign_ingress_and_restrict_egress() -> None:
    prod = _config("prod")
    policies = network_policies(prod.teams[0], "monitoring")
    deny = policies["default-deny-ingress"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress"]}
    assert policies["allow-same-namespace"]["ingress"] == [{"from": [{"podSelector": {}}]}]
    egress = policies["restrict-egress"]["egress"]
    dns = [rule for rule in egress if {"protocol": "UDP", "port": 53} in rule.get("ports", [])]
    assert dns and dns[0]["to"][0]["podSelector"] == {"matchLabels": {"k8s-app": "kube-dns"}}
    https = [rule for rule in egress if {"protocol": "TCP", "port": 443} in rule.get("ports", [])]
    blocks = [block["ipBlock"] for rule in https for block in rule["to"]]
    assert {b["cidr"] for b in blocks if "except" not in b} == set(prod.teams[0].egress.https_cidrs)
    # S3: public address space only; the VPC, other private ranges and link-local stay closed.
    (s3,) = [b for b in blocks if "except" in b]
    assert s3 == {"cidr": "0.0.0.0/0", "except": list(NON_PUBLIC_CIDRS)}
    assert {"10.0.0.0/8", "169.254.0.0/16"} <= set(s3["except"])


def test_s3_egress_needs_no_hand_kept_cidrs_and_can_be_turned_off() -> None:
    prod = _config("prod")
    # Defect 11: prod's teams list no S3 CIDRs any more (they went stale with ip-ranges.json).
    assert all(team.egress.https_cidrs == ["10.0.0.0/16"] for team in prod.teams)
    closed = prod.teams[0].model_copy(
        update={"egress": prod.teams[0].egress.model_copy(update={"s3": False})}
    )
    egress = network_policies(closed, "monitoring")["restrict-egress"]["egress"]
    assert "0.0.0.0/0" not in json.dumps(egress)


def test_all_https_egress_only_when_the_stack_says_so() -> None:
    dev = _config("dev")
    assert dev.teams[0].egress.allow_all_https
    egress = network_policies(dev.teams[0], "monitoring")["restrict-egress"]["egress"]
    open_rules = [
        r
        for r in egress
        if any("ipBlock" in t and t["ipBlock"]["cidr"] == "0.0.0.0/0" for t in r["to"])
    ]
    assert open_rules == [
        {"to": [{"ipBlock": {"cidr": "0.0.0.0/0"}}], "ports": [{"protocol": "TCP", "port": 443}]}
    ]


def test_team_role_has_no_wildcards_and_no_cluster_scope() -> None:
    rules = role_rules()
    assert rules
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert "*" not in rule["apiGroups"]
    resources = {r for rule in rules for r in rule["resources"]}
    assert {"jobs", "pods/log", "trainjobs", "workloads"} <= resources
    assert not {"secrets", "roles", "rolebindings", "pods/exec"} & resources


# --- IAM documents ------------------------------------------------------------------------------


def _policies(result: SynthResult) -> dict[str, dict[str, Any]]:
    """team name -> the trainer role's policy document as the program generated it."""
    found = {}
    for resource in result.of_type(ROLE_POLICY):
        if resource.name.startswith("team-") and resource.name.endswith("-trainer-s3"):
            team = resource.name.removeprefix("team-").removesuffix("-trainer-s3")
            found[team] = json.loads(resource.inputs["policy"])
    return found


def _statements(document: dict[str, Any]) -> list[dict[str, Any]]:
    return list(document["Statement"])


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_team_policies_grant_no_wildcard_action_and_no_wildcard_s3_resource(
    stack: str, dev: SynthResult, prod: SynthResult
) -> None:
    result = {"dev": dev, "prod": prod}[stack]
    documents = _policies(result)
    assert set(documents) == {t.name for t in _config(stack).teams}
    s3_resources = 0
    for team, document in documents.items():
        assert _statements(document), team
        for statement in _statements(document):
            for action in _as_list(statement["Action"]):
                assert "*" not in action, (team, action)
            for resource in _as_list(statement["Resource"]):
                if statement["Action"] and str(_as_list(statement["Action"])[0]).startswith("s3:"):
                    s3_resources += 1
                    assert resource != "*" and not resource.startswith("arn:aws:s3:::*"), resource
                    bucket = resource.removeprefix("arn:aws:s3:::").split("/", 1)[0]
                    assert "*" not in bucket, resource
                assert resource != "*", (team, resource)
    assert s3_resources


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_each_team_reaches_only_its_own_prefixes(
    stack: str, dev: SynthResult, prod: SynthResult
) -> None:
    result = {"dev": dev, "prod": prod}[stack]
    cfg = _config(stack)
    buckets = data_buckets(cfg.cluster.name, ACCOUNT_ID)
    documents = _policies(result)
    for team in cfg.teams:
        allowed_objects = {
            f"arn:aws:s3:::{buckets['datasets']}/{team.dataset_prefix}/*",
            f"arn:aws:s3:::{buckets['checkpoints']}/{team.name}/*",
            f"arn:aws:s3:::{buckets['artifacts']}/{team.name}/*",
        }
        write_objects: set[str] = set()
        for statement in _statements(documents[team.name]):
            actions = _as_list(statement["Action"])
            if not actions[0].startswith("s3:"):
                continue
            for resource in _as_list(statement["Resource"]):
                if "/" in resource.removeprefix("arn:aws:s3:::"):
                    assert resource in allowed_objects, (team.name, resource)
                    if "s3:PutObject" in actions:
                        write_objects.add(resource)
                else:
                    # Bucket-level (ListBucket): only with a prefix condition on the team's own.
                    prefixes = statement["Condition"]["StringLike"]["s3:prefix"]
                    own = {f"{team.dataset_prefix}/", f"{team.name}/"}
                    assert all(any(p.startswith(o) for o in own) for p in prefixes), prefixes
        # Write access: checkpoints and artifacts under the team's name, never the datasets.
        assert write_objects == {
            f"arn:aws:s3:::{buckets['checkpoints']}/{team.name}/*",
            f"arn:aws:s3:::{buckets['artifacts']}/{team.name}/*",
        }
        others = [t for t in cfg.teams if t.name != team.name]
        assert others
        text = json.dumps(documents[team.name])
        for other in others:
            assert f"/{other.name}/" not in text
            if not other.dataset_prefix.startswith(f"{team.dataset_prefix}/"):
                assert f"{other.dataset_prefix}/" not in text


def test_team_prefix_ends_with_a_slash_so_similar_names_do_not_overlap() -> None:
    prod = _config("prod")
    team = prod.teams[0].model_copy(update={"name": "research"})
    document = trainer_policy(team, data_buckets("c", "1"), "arn:aws:kms:us-east-1:1:key/k")
    text = json.dumps(document)
    assert "/research/*" in text and "/research*" not in text


# --- the component as synthesized ---------------------------------------------------------------


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_team_gets_its_namespace_quota_limits_policies_and_identity(
    stack: str, dev: SynthResult, prod: SynthResult
) -> None:
    result = {"dev": dev, "prod": prod}[stack]
    cfg = _config(stack)
    assert len(cfg.teams) >= 2
    namespaces = {r.inputs["metadata"]["name"]: r.inputs for r in result.of_type(NAMESPACE)}
    associations = {
        (r.inputs["namespace"], r.inputs["serviceAccount"]) for r in result.of_type(POD_IDENTITY)
    }
    for team in cfg.teams:
        labels = namespaces[team.namespace]["metadata"]["labels"]
        assert labels["pod-security.kubernetes.io/enforce"] == "restricted"
        assert labels["pod-security.kubernetes.io/enforce-version"] == "v1.33"
        assert labels[f"{catalog.LABEL_DOMAIN}/team"] == team.name
        (quota,) = _in_namespace(result, QUOTA, team.namespace)
        hard = quota["spec"]["hard"]
        assert hard[f"requests.{catalog.GPU_RESOURCE}"] == str(team.limits.gpus)
        assert {
            "requests.cpu",
            "requests.memory",
            "persistentvolumeclaims",
            "requests.storage",
        } <= set(hard)
        (limits,) = _in_namespace(result, LIMIT_RANGE, team.namespace)
        assert limits["spec"]["limits"][0]["defaultRequest"]["cpu"]
        policies = {
            p["metadata"]["name"] for p in _in_namespace(result, NETWORK_POLICY, team.namespace)
        }
        assert policies == {
            "default-deny-ingress",
            "allow-same-namespace",
            "allow-metrics-scrape",
            "restrict-egress",
        }
        accounts = {
            a["metadata"]["name"] for a in _in_namespace(result, SERVICE_ACCOUNT, team.namespace)
        }
        assert TRAINER_SERVICE_ACCOUNT in accounts
        assert (team.namespace, TRAINER_SERVICE_ACCOUNT) in associations
        (binding,) = _in_namespace(result, ROLE_BINDING, team.namespace)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": "team-member",
        }
        assert binding["subjects"] == [
            {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": team.group}
        ]


def test_no_cluster_role_binding_and_no_cluster_admin_for_teams(prod: SynthResult) -> None:
    assert prod.of_type(ROLE_BINDING)
    assert not prod.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
    assert "cluster-admin" not in json.dumps([r.inputs for r in prod.of_type(ROLE_BINDING)])


def test_pod_identity_roles_trust_only_the_pod_identity_service(prod: SynthResult) -> None:
    roles = [r for r in prod.of_type("aws:iam/role:Role") if r.name.endswith("-trainer")]
    assert len(roles) == len(_config("prod").teams)
    for role in roles:
        trust = json.loads(role.inputs["assumeRolePolicy"])
        (statement,) = trust["Statement"]
        assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        assert statement["Condition"]["StringEquals"]["aws:SourceAccount"] == ACCOUNT_ID


def test_cluster_queue_quota_never_exceeds_pool_capacity(prod: SynthResult) -> None:
    capacity = {
        catalog.gpu_flavor_name(c, t): gpus
        for (c, t), gpus in gpu_capacity(_config("prod")).items()
    }
    totals: dict[str, int] = {}
    for queue in prod.of_type(CLUSTER_QUEUE):
        for flavor in queue.inputs["spec"]["resourceGroups"][0]["flavors"]:
            gpu = next(r for r in flavor["resources"] if r["name"] == catalog.GPU_RESOURCE)
            totals[flavor["name"]] = totals.get(flavor["name"], 0) + int(gpu["nominalQuota"])
    assert totals
    assert all(totals[name] <= capacity[name] for name in totals)


# --- config errors ------------------------------------------------------------------------------


def _prod() -> dict[str, Any]:
    return copy.deepcopy(stack_values("prod"))


def _teams(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    teams: list[dict[str, Any]] = cfg["gpu-platform:teams"]
    return teams


INVALID: list[tuple[str, Callable[[dict[str, Any]], Any], str, str]] = [
    (
        "nominal GPU quota over the pools' capacity",
        lambda c: _teams(c)[1]["quota"][0].update(gpus=9),
        "gpu-platform:teams[1].quota[0].gpus",
        "over the 16 GPUs its pools provide",
    ),
    (
        "team referencing an unknown GPU class",
        lambda c: _teams(c)[0]["quota"][1].update(gpuClass="b200-x8"),
        "gpu-platform:teams[0].quota[1].gpuClass",
        "a GPU class the pools provide (h100-x8, l4-x1, l40s-x1)",
    ),
    (
        "GPU class without a pool of that capacity type",
        lambda c: _teams(c)[0]["quota"][0].update(capacityType="spot"),
        "gpu-platform:teams[0].quota[0].capacityType",
        "no spot pool provides h100-x8",
    ),
    (
        "duplicate team name",
        lambda c: _teams(c)[1].update(name="pretrain"),
        "gpu-platform:teams[1].name",
        "a unique name (teams[0] already uses it)",
    ),
    (
        "duplicate team namespace",
        lambda c: _teams(c)[1].update(namespace="team-pretrain"),
        "gpu-platform:teams[1].namespace",
        "a unique namespace",
    ),
    (
        "namespace that is not a DNS label",
        lambda c: _teams(c)[0].update(namespace="Team_Pretrain"),
        "gpu-platform:teams[0].namespace",
        "must be a DNS label",
    ),
    (
        "namespace of a platform controller",
        lambda c: _teams(c)[0].update(namespace="kube-system"),
        "gpu-platform:teams[0].namespace",
        "a namespace of the team's own (this one belongs to Kubernetes;",
    ),
    (
        "namespace ResourceQuota below the Kueue quota",
        lambda c: _teams(c)[0]["limits"].update(gpus=4),
        "gpu-platform:teams[0].limits.gpus",
        "at least the nominal GPU quota (28)",
    ),
    (
        "lending more GPUs than the team holds",
        lambda c: _teams(c)[0]["quota"][0].update(lendingLimitGpus=30),
        "gpu-platform:teams[0].quota[0].lendingLimitGpus",
        "at most gpus (16)",
    ),
    (
        "the same flavor twice in one team",
        lambda c: _teams(c)[1]["quota"].append(dict(_teams(c)[1]["quota"][2])),
        "gpu-platform:teams[1].quota[5]",
        "one entry per GPU class and capacity type",
    ),
    (
        "egress CIDR that is not a CIDR",
        lambda c: _teams(c)[0]["egress"].update(httpsCidrs=["s3.amazonaws.com"]),
        "gpu-platform:teams[0].egress.httpsCidrs",
        "is not an IPv4 CIDR",
    ),
]


test_invalid_teams_config_exits_2_with_the_key_path = config_error_test(INVALID, _prod)


def test_quota_exactly_at_capacity_is_accepted() -> None:
    cfg = _config("prod")
    capacity = gpu_capacity(cfg)
    totals: dict[tuple[str, str], int] = {}
    for team in cfg.teams:
        for entry in team.quota:
            key = (entry.gpu_class, entry.capacity_type)
            totals[key] = totals.get(key, 0) + entry.gpus
    assert all(totals[key] <= capacity[key] for key in totals)
    # The H100 flavor is committed exactly to its capacity, and that is accepted.
    assert totals[("h100-x8", "on-demand")] == capacity[("h100-x8", "on-demand")]


def test_extra_iam_statements_are_appended_after_the_platforms_own() -> None:
    from components.platform.tenancy.teams import trainer_policy

    team = (
        _config("prod")
        .teams[0]
        .model_copy(
            update={
                "extra_iam_statements": [
                    stack_config.IamStatement(
                        Sid="PullSharedModels",
                        Action=["s3:GetObject"],
                        Resource=["arn:aws:s3:::models-shared/llama/*"],
                    )
                ]
            }
        )
    )
    buckets = {p: f"b-{p}" for p in ("checkpoints", "datasets", "artifacts")}
    statements = trainer_policy(team, buckets, "arn:aws:kms:us-east-1:1:key/k")["Statement"]
    assert statements[-1] == {
        "Sid": "PullSharedModels",
        "Effect": "Allow",
        "Action": ["s3:GetObject"],
        "Resource": ["arn:aws:s3:::models-shared/llama/*"],
    }
    assert [s["Sid"] for s in statements[:-1]] == [
        "ListDatasetPrefix",
        "ReadDatasets",
        "ListOwnPrefixes",
        "ReadWriteOwnPrefixes",
        "UseDataKeyThroughS3",
    ]


# --- training metrics (defect 10: trainers were never scraped) ---------------------------------


def test_catalog_metrics_port_is_the_workload_layers() -> None:
    from components.training_jobs import plan

    assert catalog.TRAINING_METRICS_PORT == plan.METRICS_PORT
    assert catalog.TRAINING_JOB_LABEL == plan.JOB_LABEL


def test_each_team_has_a_pod_monitor_on_its_trainers_metrics_port(prod: SynthResult) -> None:
    monitors = prod.of_type("kubernetes:monitoring.coreos.com/v1:PodMonitor")
    teams = _config("prod").teams
    assert {m.inputs["metadata"]["namespace"] for m in monitors} == {t.namespace for t in teams}
    (release,) = [r for r in prod.of_type(RELEASE) if r.inputs["name"] == "kube-prometheus-stack"]
    prometheus = release.inputs["values"]["prometheus"]["prometheusSpec"]
    # Without this, Prometheus selects only PodMonitors labelled with its release (runs.md Q12).
    assert prometheus["podMonitorSelectorNilUsesHelmValues"] is False
    assert prometheus.get("podMonitorNamespaceSelector", {}) == {}
    for monitor in monitors:
        spec = monitor.inputs["spec"]
        (endpoint,) = spec["podMetricsEndpoints"]
        assert endpoint["port"] == "metrics"
        (expression,) = spec["selector"]["matchExpressions"]
        assert expression == {"key": catalog.TRAINING_JOB_LABEL, "operator": "Exists"}
        assert release.urn in monitor.dependencies


def test_trainer_pods_name_the_metrics_port_the_pod_monitor_scrapes(dev: SynthResult) -> None:
    (job,) = [
        j
        for j in dev.of_type("kubernetes:batch/v1:Job")
        if j.inputs["metadata"].get("name") == "ddp-smoke"
    ]
    pod = job.inputs["spec"]["template"]
    assert catalog.TRAINING_JOB_LABEL in pod["metadata"]["labels"]
    ports = [p for c in pod["spec"]["containers"] for p in c.get("ports", [])]
    assert {"name": "metrics", "containerPort": catalog.TRAINING_METRICS_PORT} in ports


def test_monitoring_may_reach_the_metrics_port_only(prod: SynthResult) -> None:
    policies = network_policies(_config("prod").teams[0], "monitoring")
    scrape = policies["allow-metrics-scrape"]
    (rule,) = scrape["ingress"]
    assert rule["ports"] == [{"protocol": "TCP", "port": 9401}]
    assert rule["from"] == [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ]
    names = {
        p.inputs["metadata"]["name"]
        for p in prod.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
    }
    assert "allow-metrics-scrape" in names


def test_pod_identity_roles_are_pinned_to_cluster_namespace_and_service_account(
    prod: SynthResult,
) -> None:
    # Defect 11: a PodIdentityAssociation in any other cluster of the account could use them.
    roles = {
        r.name: json.loads(r.inputs["assumeRolePolicy"]) for r in prod.of_type("aws:iam/role:Role")
    }
    expected = {
        "karpenter-controller": ("gpu-prod", "kube-system", "karpenter"),
        "cluster-ebs-csi": ("gpu-prod", "kube-system", "ebs-csi-controller-sa"),
        "team-pretrain-trainer": ("gpu-prod", "team-pretrain", TRAINER_SERVICE_ACCOUNT),
    }
    for name, (cluster, namespace, account) in expected.items():
        (statement,) = roles[name]["Statement"]
        assert statement["Principal"] == {"Service": "pods.eks.amazonaws.com"}
        assert statement["Condition"]["StringEquals"] == {
            "aws:SourceAccount": ACCOUNT_ID,
            "aws:RequestTag/eks-cluster-name": cluster,
            "aws:RequestTag/kubernetes-namespace": namespace,
            "aws:RequestTag/kubernetes-service-account": account,
        }
