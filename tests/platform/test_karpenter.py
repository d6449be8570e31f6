"""Karpenter: pure NodePool/EC2NodeClass/IAM builders, the component under mocks (dev and prod),
chart values against the pinned chart, upstream CRD validation, config errors."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from components import catalog
from components.config import (
    KarpenterConfig,
    KarpenterFeatureGates,
    KarpenterNodeClass,
    KarpenterPool,
)
from components.platform.capacity import karpenter_builders as kpb
from components.platform.cluster.node_group_builders import gpu_group_labels
from synth import report
from synth.harness import Registration, SynthResult
from synth.validate import default_validator
from tests.conftest import config_error_test, karpenter_gpu_overrides, stack_values
from tests.helm_values import missing_keys

RELEASE = "kubernetes:helm.sh/v3:Release"
NODEPOOL = "kubernetes:karpenter.sh/v1:NodePool"
NODECLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


def _pool(**fields: Any) -> KarpenterPool:
    return KarpenterPool.model_validate(fields)


def _spot_l4() -> KarpenterPool:
    return _pool(name="l4-spot", gpuClass="l4-x1", capacityType="spot", limits={"gpus": 8})


def _od_l4() -> KarpenterPool:
    return _pool(
        name="l4-od",
        gpuClass="l4-x1",
        capacityType="on-demand",
        instanceTypes=["g6.xlarge"],
        limits={"gpus": 2},
    )


def _cpu() -> KarpenterPool:
    return _pool(
        name="general",
        capacityType="spot",
        workloadType="general",
        instanceTypes=["m6i.large", "m6i.xlarge", "m7i.xlarge"],
        limits={"cpu": 16},
    )


def _requirement(spec: dict[str, Any], key: str) -> dict[str, Any]:
    matches = [r for r in spec["template"]["spec"]["requirements"] if r["key"] == key]
    assert len(matches) == 1, key
    return matches[0]


# --- pure builders ----------------------------------------------------------------------------


def test_gpu_pool_is_tainted_labelled_like_managed_groups_and_capped() -> None:
    spec = kpb.nodepool_spec(_spot_l4(), node_class="gpu")
    assert spec["template"]["spec"]["taints"] == [catalog.gpu_taint()]
    labels = spec["template"]["metadata"]["labels"]
    assert labels == {
        **catalog.gpu_node_labels(
            gpu_class="l4-x1",
            gpu_model="l4",
            capacity_type="spot",
            workload_type="training",
            provisioner="karpenter",
        ),
        catalog.LABEL_NODE_POOL: "l4-spot",
    }
    assert all(key.startswith(f"{catalog.LABEL_DOMAIN}/") for key in labels)
    assert spec["limits"] == {"nvidia.com/gpu": 8}
    assert spec["template"]["spec"]["nodeClassRef"] == {
        "group": "karpenter.k8s.aws",
        "kind": "EC2NodeClass",
        "name": "gpu",
    }


def test_gpu_pool_requires_capacity_type_family_types_and_gpu_count() -> None:
    spec = kpb.nodepool_spec(_spot_l4(), node_class="gpu")
    assert _requirement(spec, "karpenter.sh/capacity-type")["values"] == ["spot"]
    assert _requirement(spec, "karpenter.k8s.aws/instance-family")["values"] == ["g6"]
    assert _requirement(spec, "karpenter.k8s.aws/instance-gpu-count")["values"] == ["1"]
    types = _requirement(spec, "node.kubernetes.io/instance-type")["values"]
    assert types == sorted(config_types := _spot_l4().resolved_instance_types)
    assert all(catalog.instance(t).gpu_model == "l4" for t in config_types)
    assert len(types) >= 3


def test_spot_pool_falls_back_to_on_demand_by_weight() -> None:
    spot = kpb.nodepool_spec(_spot_l4(), node_class="gpu")
    on_demand = kpb.nodepool_spec(_od_l4(), node_class="gpu")
    assert spot["weight"] > on_demand["weight"]


def test_gpu_pool_disruption_is_training_friendly_by_default() -> None:
    spec = kpb.nodepool_spec(_spot_l4(), node_class="gpu")
    assert spec["disruption"]["consolidationPolicy"] == "WhenEmpty"
    assert spec["disruption"]["budgets"] == [{"nodes": "10%"}]
    assert spec["template"]["spec"]["expireAfter"] == "720h"
    assert spec["template"]["spec"]["terminationGracePeriod"] == "24h"


def test_freeze_window_becomes_a_zero_node_budget() -> None:
    pool = _pool(
        name="x",
        gpuClass="l4-x1",
        capacityType="spot",
        limits={"gpus": 4},
        disruption={"freezeSchedule": "0 6 * * 1-5", "freezeDuration": "12h"},
    )
    budgets = kpb.nodepool_spec(pool, node_class="gpu")["disruption"]["budgets"]
    assert {"nodes": "0", "schedule": "0 6 * * 1-5", "duration": "12h"} in budgets


def test_cpu_pool_has_no_taint_no_gpu_requirement_and_a_cpu_limit() -> None:
    spec = kpb.nodepool_spec(_cpu(), node_class="cpu")
    assert "taints" not in spec["template"]["spec"]
    keys = {r["key"] for r in spec["template"]["spec"]["requirements"]}
    assert "karpenter.k8s.aws/instance-gpu-count" not in keys
    assert spec["limits"] == {"cpu": 16}
    assert kpb.pool_node_class(_cpu()) == "cpu"


def test_ec2nodeclass_pins_alias_requires_imdsv2_and_encrypts_gp3_root() -> None:
    disk = KarpenterNodeClass(disk_size_gib=500, disk_throughput_mibps=1000, disk_iops=16000)
    spec = kpb.ec2nodeclass_spec(
        cluster_name="c",
        ami_alias="al2023@v20251023",
        instance_profile="c-karpenter-node",
        security_group_id="sg-0123",
        disk=disk,
        instance_store_raid0=True,
        tags={"team": "t"},
    )
    assert spec["amiSelectorTerms"] == [{"alias": "al2023@v20251023"}]
    assert spec["metadataOptions"]["httpTokens"] == "required"
    assert spec["metadataOptions"]["httpPutResponseHopLimit"] == 1
    (root,) = spec["blockDeviceMappings"]
    assert root["rootVolume"] is True
    assert root["ebs"] == {
        "volumeSize": "500Gi",
        "volumeType": "gp3",
        "iops": 16000,
        "throughput": 1000,
        "encrypted": True,
        "deleteOnTermination": True,
    }
    assert spec["instanceStorePolicy"] == "RAID0"
    assert spec["subnetSelectorTerms"] == [{"tags": {"karpenter.sh/discovery": "c"}}]
    # Defect 9: the node security group by id, no discovery tag on a group pulumi-eks owns.
    assert spec["securityGroupSelectorTerms"] == [{"id": "sg-0123"}]
    assert "capacityReservationSelectorTerms" not in spec
    no_nvme = kpb.ec2nodeclass_spec(
        cluster_name="c",
        ami_alias="al2023@latest",
        instance_profile="p",
        security_group_id="sg-0123",
        disk=disk,
        instance_store_raid0=False,
        tags={},
        capacity_reservations=[{"id": "cr-0abc"}],
    )
    assert "instanceStorePolicy" not in no_nvme
    assert no_nvme["userData"] == kpb.FAST_IMAGE_PULL_USER_DATA
    off = kpb.ec2nodeclass_spec(
        cluster_name="c",
        ami_alias="al2023@latest",
        instance_profile="p",
        security_group_id="sg-0123",
        disk=disk.model_copy(update={"fast_image_pull": False}),
        instance_store_raid0=False,
        tags={},
    )
    assert "userData" not in off
    assert no_nvme["capacityReservationSelectorTerms"] == [{"id": "cr-0abc"}]


def test_interruption_queue_accepts_only_eventbridge_rules() -> None:
    rules = ["arn:aws:events:eu-west-1:1:rule/a", "arn:aws:events:eu-west-1:1:rule/b"]
    policy = kpb.interruption_queue_policy("arn:aws:sqs:eu-west-1:1:q", rules)
    allows = [s for s in policy["Statement"] if s["Effect"] == "Allow"]
    assert len(allows) == 1
    assert allows[0]["Principal"] == {"Service": "events.amazonaws.com"}
    assert allows[0]["Action"] == "sqs:SendMessage"
    assert allows[0]["Condition"] == {"ArnEquals": {"aws:SourceArn": rules}}


def test_five_interruption_event_patterns_as_upstream() -> None:
    # aws/karpenter-provider-aws@v1.14.1 cloudformation.yaml#L410-464: five rules, the last one
    # for interruptible capacity reservations.
    detail_types = {p["detail-type"][0] for p in kpb.INTERRUPTION_EVENTS.values()}
    assert detail_types == {
        "EC2 Spot Instance Interruption Warning",
        "EC2 Instance Rebalance Recommendation",
        "EC2 Instance State-change Notification",
        "AWS Health Event",
        "EC2 Capacity Reservation Instance Interruption Warning",
    }


# --- chart values -------------------------------------------------------------------------------

#: Free-form maps of the karpenter chart (keys below them are ours to choose).
KARPENTER_OPEN = frozenset({"podAnnotations", "podLabels", "additionalLabels"})


def test_every_helm_values_key_exists_in_the_pinned_chart(dev: SynthResult) -> None:
    helper = kpb.helm_values(
        cluster_name="c",
        queue_name="q",
        region="r",
        replicas=2,
        feature_gates=KarpenterFeatureGates(node_repair=True),
    )
    assert helper["settings"]["featureGates"] == {"reservedCapacity": True, "nodeRepair": True}
    assert missing_keys("karpenter", helper, open_keys=KARPENTER_OPEN) == []
    (controller,) = [r for r in dev.of_type(RELEASE) if r.inputs["name"] == "karpenter"]
    values = controller.inputs["values"]
    assert missing_keys("karpenter", values, open_keys=KARPENTER_OPEN) == []
    assert missing_keys("karpenter", {"settings": {"nope": 1}}) == ["settings.nope"]


def test_controller_region_is_explicit_because_pods_cannot_reach_imds(dev: SynthResult) -> None:
    (controller,) = [r for r in dev.of_type(RELEASE) if r.inputs["name"] == "karpenter"]
    env = controller.inputs["values"]["controller"]["env"]
    assert {"name": "AWS_REGION", "value": "us-east-1"} in env


# --- the component under mocks -----------------------------------------------------------------


def _one(result: SynthResult, type_token: str, name: str) -> Registration:
    (match,) = [r for r in result.of_type(type_token) if r.name == name]
    return match


def _karpenter(result: SynthResult) -> list[Registration]:
    return [r for r in result.resources if "gpu-platform:karpenter:Karpenter$" in r.urn]


@pytest.fixture(params=["dev", "prod"])
def stack(request: pytest.FixtureRequest) -> SynthResult:
    result: SynthResult = request.getfixturevalue(request.param)
    return result


def test_interruption_queue_and_five_rules_target_it(stack: SynthResult) -> None:
    (queue,) = stack.of_type("aws:sqs/queue:Queue")
    assert queue.inputs["messageRetentionSeconds"] == 300
    assert queue.inputs["sqsManagedSseEnabled"] is True
    rules = stack.of_type("aws:cloudwatch/eventRule:EventRule")
    assert len(rules) == 5
    patterns = {json.loads(r.inputs["eventPattern"])["detail-type"][0] for r in rules}
    assert patterns == {p["detail-type"][0] for p in kpb.INTERRUPTION_EVENTS.values()}
    targets = stack.of_type("aws:cloudwatch/eventTarget:EventTarget")
    assert len(targets) == 5
    assert {t.inputs["arn"] for t in targets} == {
        f"arn:aws:sqs:us-east-1:123456789012:{queue.inputs['name']}"
    }
    (policy,) = stack.of_type("aws:sqs/queuePolicy:QueuePolicy")
    document = json.loads(policy.inputs["policy"])
    allow = [s for s in document["Statement"] if s["Effect"] == "Allow"]
    assert [s["Principal"] for s in allow] == [{"Service": "events.amazonaws.com"}]
    assert len(allow[0]["Condition"]["ArnEquals"]["aws:SourceArn"]) == 5


def test_crds_come_from_their_own_release_installed_first(stack: SynthResult) -> None:
    releases = {r.inputs["name"]: r for r in stack.of_type(RELEASE)}
    crd, controller = releases["karpenter-crd"], releases["karpenter"]
    assert crd.inputs["chart"] == "oci://public.ecr.aws/karpenter/karpenter-crd"
    assert controller.inputs["chart"] == "oci://public.ecr.aws/karpenter/karpenter"
    assert crd.inputs["version"] == controller.inputs["version"] == "1.14.1"
    assert controller.inputs["skipCrds"] is True
    assert crd.urn in controller.dependencies
    settings = controller.inputs["values"]["settings"]
    (queue,) = stack.of_type("aws:sqs/queue:Queue")
    assert settings["interruptionQueue"] == queue.inputs["name"]
    assert settings["clusterName"] == stack_values(stack.stack)["gpu-platform:cluster"]["name"]


def test_controller_runs_on_the_system_node_group(stack: SynthResult) -> None:
    (controller,) = [r for r in stack.of_type(RELEASE) if r.inputs["name"] == "karpenter"]
    selector = controller.inputs["values"]["nodeSelector"]
    system = _one(stack, "eks:index:ManagedNodeGroup", "cluster-system")
    assert catalog.system_node_labels()
    for key, value in catalog.system_node_labels().items():
        assert selector[key] == value == system.inputs["labels"][key]
    assert system.urn in controller.dependencies


def test_controller_identity_is_pod_identity_for_the_chart_service_account(
    stack: SynthResult,
) -> None:
    (association,) = [
        r
        for r in _karpenter(stack)
        if r.type == "aws:eks/podIdentityAssociation:PodIdentityAssociation"
    ]
    (controller,) = [r for r in stack.of_type(RELEASE) if r.inputs["name"] == "karpenter"]
    assert association.inputs["namespace"] == controller.inputs["namespace"] == "kube-system"
    assert (
        association.inputs["serviceAccount"]
        == controller.inputs["values"]["serviceAccount"]["name"]
    )
    role = _one(stack, "aws:iam/role:Role", "karpenter-controller")
    assert association.inputs["roleArn"].endswith("/karpenter-controller")
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "pods.eks.amazonaws.com"}
    (policy,) = [r for r in _karpenter(stack) if r.type == "aws:iam/rolePolicy:RolePolicy"]
    passing = [
        s for s in json.loads(policy.inputs["policy"])["Statement"] if "PassRole" in s["Action"]
    ]
    assert [s["Resource"] for s in passing] == ["arn:aws:iam::123456789012:role/karpenter-node"]


def test_node_role_has_instance_profile_and_ec2_linux_access_entry(stack: SynthResult) -> None:
    # Team job-stack roles have access entries too (team_deploy.py); Karpenter's is its own.
    (entry,) = [r for r in _karpenter(stack) if r.type == "aws:eks/accessEntry:AccessEntry"]
    assert entry.inputs["type"] == "EC2_LINUX"
    assert entry.inputs["principalArn"] == "arn:aws:iam::123456789012:role/karpenter-node"
    (profile,) = stack.of_type("aws:iam/instanceProfile:InstanceProfile")
    classes = stack.of_type(NODECLASS)
    assert classes
    assert {c.inputs["spec"]["instanceProfile"] for c in classes} == {profile.inputs["name"]}


def test_node_classes_select_the_node_security_group_by_id_and_tag_nothing(
    stack: SynthResult,
) -> None:
    # Defect 9: no aws.ec2.Tag on the pulumi-eks node security group (it would fight its owner).
    assert not [r for r in stack.resources if r.type == "aws:ec2/tag:Tag"]
    (_cluster,) = stack.of_type("eks:index:Cluster")
    classes = stack.of_type(NODECLASS)
    assert classes
    ids = {term["id"] for c in classes for term in c.inputs["spec"]["securityGroupSelectorTerms"]}
    assert len(ids) == 1 and next(iter(ids)).startswith("sg-")


def test_stack_has_gpu_spot_gpu_on_demand_and_cpu_pools(stack: SynthResult) -> None:
    pools = stack.of_type(NODEPOOL)
    assert len(pools) >= 3
    kinds = set()
    for pool in pools:
        spec = pool.inputs["spec"]
        capacity = _requirement(spec, "karpenter.sh/capacity-type")["values"]
        gpu = "taints" in spec["template"]["spec"]
        kinds.add(("gpu" if gpu else "cpu", tuple(capacity)))
        if gpu:
            assert spec["limits"]["nvidia.com/gpu"] >= 1
    assert {("gpu", ("spot",)), ("gpu", ("on-demand",))} <= kinds
    assert any(kind == "cpu" for kind, _ in kinds)


def test_gpu_pools_use_the_managed_group_label_keys(prod_static: SynthResult) -> None:
    stack = prod_static
    group_keys = {
        frozenset(g.inputs["labels"])
        for g in stack.of_type("eks:index:ManagedNodeGroup")
        if catalog.LABEL_GPU_CLASS in g.inputs["labels"]
    }
    pool_keys = {
        frozenset(p.inputs["spec"]["template"]["metadata"]["labels"])
        for p in stack.of_type(NODEPOOL)
        if "taints" in p.inputs["spec"]["template"]["spec"]
    }
    assert len(group_keys) == 1
    # Managed groups carry the autoscaler's GPU label on top of the shared keys.
    assert {keys - {catalog.CA_GPU_LABEL} for keys in group_keys} == pool_keys


def test_prod_pins_the_ami_and_dev_opts_into_latest(dev: SynthResult, prod: SynthResult) -> None:
    prod_aliases = {
        c.inputs["spec"]["amiSelectorTerms"][0]["alias"] for c in prod.of_type(NODECLASS)
    }
    assert prod_aliases and all(not a.endswith("@latest") for a in prod_aliases)
    dev_aliases = {c.inputs["spec"]["amiSelectorTerms"][0]["alias"] for c in dev.of_type(NODECLASS)}
    assert dev_aliases == {"al2023@latest"}


def test_gpu_node_class_uses_raid0_and_cpu_class_does_not(prod: SynthResult) -> None:
    classes = {c.inputs["metadata"]["name"]: c.inputs["spec"] for c in prod.of_type(NODECLASS)}
    # SOCI parallel pull on every class by default (nodeadm FastImagePull feature gate).
    assert classes["gpu"]["userData"] == kpb.FAST_IMAGE_PULL_USER_DATA
    assert yaml.safe_load(classes["gpu"]["userData"]) == {
        "apiVersion": "node.eks.aws/v1alpha1",
        "kind": "NodeConfig",
        "spec": {"featureGates": {"FastImagePull": True}},
    }
    assert classes["gpu"]["instanceStorePolicy"] == "RAID0"
    assert "instanceStorePolicy" not in classes["cpu"]
    assert classes["gpu"]["blockDeviceMappings"][0]["ebs"]["throughput"] > 125
    assert classes["gpu"]["tags"]["gpu-platform:cluster"] == "gpu-prod"


def test_teardown_deletes_pools_and_classes_before_the_controller(stack: SynthResult) -> None:
    # Pulumi deletes a resource before everything it depends on: these edges are the order.
    controller = _one(stack, RELEASE, "karpenter-controller")
    crd = _one(stack, RELEASE, "karpenter-crd")
    assert crd.urn in controller.dependencies
    classes = {c.inputs["metadata"]["name"]: c for c in stack.of_type(NODECLASS)}
    assert classes
    for node_class in classes.values():
        assert controller.urn in node_class.dependencies
    pools = stack.of_type(NODEPOOL)
    assert pools
    for pool in pools:
        class_name = pool.inputs["spec"]["template"]["spec"]["nodeClassRef"]["name"]
        assert controller.urn in pool.dependencies
        assert classes[class_name].urn in pool.dependencies


def test_every_kubernetes_resource_uses_the_cluster_provider(stack: SynthResult) -> None:
    k8s = [r for r in _karpenter(stack) if r.type.startswith("kubernetes:")]
    assert len(k8s) >= 5
    provider = _one(stack, "pulumi:providers:kubernetes", "cluster-k8s")
    assert all(r.provider.startswith(provider.urn) for r in k8s)


def test_report_lists_every_pool_with_cost_and_the_idle_cost(stack: SynthResult) -> None:
    text = report.report(stack)
    pools = stack.of_type(NODEPOOL)
    assert pools
    for pool in pools:
        assert f"| {pool.inputs['metadata']['name']} |" in text
    assert "## Idle cost" in text and "EKS control plane" in text and "NAT gateways" in text


def test_idle_cost_counts_control_plane_system_nodes_and_nat(prod: SynthResult) -> None:
    items = {i.item: (i.count, i.usd_each) for i in report.idle_cost(prod).items}
    assert items["EKS control plane"] == (1, catalog.EKS_CONTROL_PLANE_USD_PER_HOUR)
    assert items["NAT gateways"] == (3, catalog.NAT_GATEWAY_USD_PER_HOUR)
    system = [v for k, v in items.items() if k.startswith("node group system")]
    assert system == [(3, catalog.instance("m6i.xlarge").on_demand_usd_per_hour)]


# --- upstream CRD validation ------------------------------------------------------------------


def test_every_karpenter_object_passes_the_upstream_crds(
    dev: SynthResult, prod: SynthResult
) -> None:
    objects = [
        r.inputs
        for result in (dev, prod)
        for r in result.of_type(NODEPOOL) + result.of_type(NODECLASS)
    ]
    assert len(objects) >= 8
    assert default_validator().validate_all(objects) == []
    # The check has teeth: a misspelt disruption field is caught, not pruned silently.
    pool = copy.deepcopy(next(o for o in objects if o["kind"] == "NodePool"))
    pool["spec"]["disruption"]["consolidateAftr"] = "5m"
    (problem,) = default_validator().validate(pool)
    assert problem.path == "spec.disruption.consolidateAftr"
    # ... and so are the CRD's CEL rules: the karpenter.sh label domain is reserved.
    pool = copy.deepcopy(next(o for o in objects if o["kind"] == "NodePool"))
    pool["spec"]["template"]["metadata"] = {"labels": {"karpenter.sh/nodepool": "x"}}
    (problem,) = default_validator().validate(pool)
    assert problem.message == 'label "karpenter.sh/nodepool" is restricted'


# --- config errors ------------------------------------------------------------------------------


def _prod_cfg() -> dict[str, Any]:
    """Prod with the L4/L40S/CPU pools at indexes 0-4, the H100 pools (reserved, on-demand) at
    5 and 6, and static GPU managed groups (for the shared-name rule)."""
    cfg = copy.deepcopy({**stack_values("prod"), **karpenter_gpu_overrides()})
    pools = cfg["gpu-platform:karpenter"]["pools"]
    h100 = [p for p in pools if p.get("gpuClass") == "h100-x8"]
    cfg["gpu-platform:karpenter"]["pools"] = [p for p in pools if p not in h100] + h100
    # One managed group of a class no pool serves (for the shared-name rule).
    group = {"name": "l4-spot", "capacityType": "spot", "maxSize": 2}
    group["instanceTypes"] = ["g5.xlarge", "g5.2xlarge", "g5.4xlarge"]
    cfg["gpu-platform:nodeGroups"]["gpu"] = [group]
    return cfg


def _pools(cfg: dict[str, Any]) -> list[dict[str, Any]]:
    pools: list[dict[str, Any]] = cfg["gpu-platform:karpenter"]["pools"]
    return pools


INVALID: list[tuple[str, Callable[[dict[str, Any]], Any], str, str]] = [
    (
        "GPU pool without a GPU limit",
        lambda c: _pools(c)[0].update(limits={"cpu": 64}),
        "gpu-platform:karpenter.pools[0].limits.gpus",
        "required for a GPU pool",
    ),
    (
        "unknown instance type",
        lambda c: _pools(c)[1].update(instanceTypes=["g6.xlarge", "p9.mega"]),
        "gpu-platform:karpenter.pools[1].instanceTypes[1]",
        "an instance type from components/catalog.py",
    ),
    (
        "spot pool with two instance types",
        lambda c: _pools(c)[0].update(instanceTypes=["g6.xlarge", "g6.2xlarge"]),
        "gpu-platform:karpenter.pools[0].instanceTypes",
        "at least 3 instance types",
    ),
    (
        "spot pool whose GPU class has too few types",
        lambda c: _pools(c).append(
            {
                "name": "h100-spot",
                "gpuClass": "h100-x8",
                "capacityType": "spot",
                "limits": {"gpus": 8},
            }
        ),
        "gpu-platform:karpenter.pools[7].gpuClass",
        "at least 3 instance types",
    ),
    (
        "latest AMI alias where the stack forbids it",
        lambda c: c["gpu-platform:karpenter"].update(amiAlias="al2023@latest"),
        "gpu-platform:karpenter.amiAlias",
        "pinned al2023@vYYYYMMDD",
    ),
    (
        "unknown GPU class",
        lambda c: _pools(c)[0].update(gpuClass="l4-x3"),
        "gpu-platform:karpenter.pools[0].gpuClass",
        "one of",
    ),
    (
        "type outside the pool's GPU class",
        lambda c: _pools(c)[1].update(instanceTypes=["g6.xlarge", "g5.xlarge"]),
        "gpu-platform:karpenter.pools[1].instanceTypes[1]",
        "a type of GPU class l4-x1",
    ),
    (
        "on-demand weighted above spot",
        lambda c: _pools(c)[1].update(weight=90),
        "gpu-platform:karpenter.pools",
        "higher weight",
    ),
    (
        "GPU class without an on-demand fallback",
        lambda c: _pools(c).pop(1),
        "gpu-platform:karpenter.pools",
        "every GPU class needs an on-demand pool",
    ),
    (
        "pool named like a managed node group",
        lambda c: _pools(c)[0].update(name="l4-spot"),
        "gpu-platform:karpenter.pools[0].name",
        "no managed node group uses",
    ),
    (
        "CPU pool without a CPU limit",
        lambda c: _pools(c)[4].update(limits={"memoryGib": 64}),
        "gpu-platform:karpenter.pools[4].limits.cpu",
        "required for a CPU pool",
    ),
    (
        "bad consolidateAfter",
        lambda c: _pools(c)[0].update(disruption={"consolidateAfter": "soon"}),
        "gpu-platform:karpenter.pools[0].disruption.consolidateAfter",
        "should match pattern",
    ),
]


test_invalid_karpenter_config_exits_2_with_key_path = config_error_test(INVALID, _prod_cfg)


def test_latest_alias_is_accepted_where_the_stack_allows_it() -> None:
    cfg = stack_values("dev")["gpu-platform:karpenter"]
    parsed = KarpenterConfig.model_validate(cfg)
    assert parsed.ami_alias == "al2023@latest" and parsed.allow_latest_ami is True


def test_prod_config_defaults_forbid_latest() -> None:
    assert KarpenterConfig.model_fields["allow_latest_ami"].default is False


def test_managed_group_labels_and_pool_labels_share_one_definition() -> None:
    # Both go through catalog.gpu_node_labels, so a flavor selecting gpu-class matches both.
    pool_labels = kpb.pool_labels(_od_l4())
    from components.config import GpuNodeGroup

    group = GpuNodeGroup(
        name="l4-od", instance_types=["g6.xlarge"], capacity_type="on-demand", max_size=1
    )
    group_labels = gpu_group_labels(group)
    # The same keys and values, but for the provisioner that tells them apart, and the
    # autoscaler's GPU label only the managed group needs.
    assert group_labels.pop(catalog.CA_GPU_LABEL) == "nvidia-l4"
    assert pool_labels.pop(catalog.LABEL_PROVISIONER) == "karpenter"
    assert group_labels.pop(catalog.LABEL_PROVISIONER) == "node-group"
    assert pool_labels == group_labels
