"""GPU managed node groups resized by the cluster-autoscaler: the chart and its values against the
vendored upstream chart, the least-privilege role, discovery and the priority expander, the
ProvisioningRequest path into Kueue, scale-from-zero tags, reservation binding, and one
provisioner per pod in the "will it run" analysis."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import pytest
import yaml

from components import catalog
from components.analysis import problems
from components.analysis.nodes import tolerates
from components.config import GpuNodeGroup, StackConfig
from components.config.autoscaler import IMAGE_FOR_MINOR
from components.config.load import namespace_values, parse
from components.platform.capacity import autoscaler
from components.platform.cluster.node_group_builders import (
    autoscaler_group_tags,
    node_group_instance_types,
    reservation_spec,
)
from components.training_jobs.plan import SAFE_TO_EVICT
from synth.golden import with_policy
from synth.harness import SynthResult, run_program
from synth.report import report
from tests.analysis.judged import sources_of
from tests.conftest import SCHEMAS, node_group_overrides, stack_values, values_with_jobs
from tests.helm_values import missing_keys

RELEASE = "kubernetes:helm.sh/v3:Release"
ROLE_POLICY = "aws:iam/rolePolicy:RolePolicy"


def _release(result: SynthResult, name: str) -> Any:
    (release,) = [r for r in result.of_type(RELEASE) if r.inputs["name"] == name]
    return release


def _cfg(values: dict[str, Any]) -> StackConfig:
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return parse(namespace_values(raw))


# --- the chart ------------------------------------------------------------------------------------


def test_values_exist_in_the_pinned_chart_and_the_image_is_the_cluster_minor(
    prod: SynthResult,
) -> None:
    release = _release(prod, "cluster-autoscaler")
    values = release.inputs["values"]
    assert missing_keys("cluster-autoscaler", values, open_keys=frozenset({"extraArgs"})) == []
    chart = yaml.safe_load((SCHEMAS / "charts/cluster-autoscaler/Chart.yaml").read_text())
    assert release.inputs["version"] == chart["version"] == "9.59.0"
    # The chart ships 1.35; upstream supports the autoscaler with its own Kubernetes minor.
    assert chart["appVersion"] == "1.35.0"
    assert values["image"]["tag"] == IMAGE_FOR_MINOR["1.33"] == "v1.33.6"
    assert values["awsRegion"] == "us-east-1"
    assert values["nodeSelector"] == catalog.system_node_labels()
    assert values["serviceMonitor"]["enabled"] is True


def test_the_unknown_key_check_catches_a_typo() -> None:
    assert missing_keys("cluster-autoscaler", {"autoDiscovery": {"clustername": "x"}}) == [
        "autoDiscovery.clustername"
    ]


def test_discovery_finds_this_clusters_groups_only(prod: SynthResult) -> None:
    values = _release(prod, "cluster-autoscaler").inputs["values"]
    assert values["autoDiscovery"] == {
        "clusterName": "gpu-prod",
        "tags": ["k8s.io/cluster-autoscaler/enabled", "k8s.io/cluster-autoscaler/gpu-prod"],
    }


def test_expander_prefers_reserved_then_on_demand_then_spot() -> None:
    groups = [
        GpuNodeGroup(
            name="spot",
            instance_types=["g6.xlarge", "g6.2xlarge", "g6.4xlarge"],
            capacity_type="spot",
            max_size=2,
        ),
        GpuNodeGroup(
            name="od", instance_types=["p5.48xlarge"], capacity_type="on-demand", max_size=2
        ),
        GpuNodeGroup(
            name="odcr",
            instance_types=["p5.48xlarge"],
            capacity_type="on-demand",
            capacity_reservation_id="cr-0123456789abcdef0",
            max_size=2,
        ),
    ]
    tiers = autoscaler.expander_priorities("gpu-prod", groups)
    assert list(tiers) == ["30", "20", "10", "0"]
    (reserved,) = tiers["30"]
    # EKS names a managed group's Auto Scaling group eks-<nodegroup-name>-<uuid>.
    assert re.match(reserved, "eks-gpu-prod-odcr-7cc4b1f2-0d3e-5c6a-9d1e-2a3b4c5d6e7f")
    assert not re.match(reserved, "eks-gpu-prod-od-7cc4b1f2-0d3e-5c6a-9d1e-2a3b4c5d6e7f")
    assert not re.match(tiers["20"][0], "eks-gpu-dev-od-7cc4b1f2")
    assert tiers["0"] == [".*"]


# --- IAM ------------------------------------------------------------------------------------------


def test_role_resizes_only_this_clusters_groups_and_trusts_one_service_account(
    prod: SynthResult,
) -> None:
    (policy,) = [p for p in prod.of_type(ROLE_POLICY) if p.name == "autoscaler-policy"]
    statements = {s["Sid"]: s for s in json.loads(policy.inputs["policy"])["Statement"]}
    resize = statements["ResizeThisClustersGroups"]
    assert set(resize["Action"]) == set(
        autoscaler.policy(cluster_name="c", region="r", account_id="1")["Statement"][2]["Action"]
    )
    assert resize["Condition"] == {
        "StringEquals": {"aws:ResourceTag/k8s.io/cluster-autoscaler/gpu-prod": "owned"}
    }
    assert statements["DescribeThisClustersNodegroups"]["Resource"].endswith(
        ":nodegroup/gpu-prod/*"
    )
    (role,) = [r for r in prod.of_type("aws:iam/role:Role") if r.name == "autoscaler-role"]
    trust = json.loads(role.inputs["assumeRolePolicy"])["Statement"][0]
    tags = trust["Condition"]["StringEquals"]
    assert tags["aws:RequestTag/kubernetes-namespace"] == "kube-system"
    assert tags["aws:RequestTag/kubernetes-service-account"] == "cluster-autoscaler"
    assert tags["aws:RequestTag/eks-cluster-name"] == "gpu-prod"
    (association,) = [
        a
        for a in prod.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
        if a.name == "autoscaler-pod-identity"
    ]
    assert association.inputs["serviceAccount"] == autoscaler.SERVICE_ACCOUNT


# --- the ProvisioningRequest path -----------------------------------------------------------------


def test_kueue_starts_after_the_provisioning_request_crd_the_autoscaler_serves(
    dev: SynthResult,
) -> None:
    (crd,) = [
        c
        for c in dev.of_type("kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition")
        if c.inputs["metadata"]["name"] == "provisioningrequests.autoscaling.x-k8s.io"
    ]
    assert crd.urn in _release(dev, "kueue").dependencies
    args = _release(dev, "cluster-autoscaler").inputs["values"]["extraArgs"]
    assert args["enable-provisioning-requests"] is True
    assert args["kube-api-content-type"] == "application/json"
    assert args["expander"] == "priority,least-waste"


#: What the chart's own ClusterRole grants on provisioningrequests (kubernetes/autoscaler@
#: cluster-autoscaler-chart-9.59.0 cluster-autoscaler/charts/cluster-autoscaler/templates/
#: clusterrole.yaml#L219-229) and what the autoscaler's FAQ at 1.33.6 asks for ("Enabling
#: ProvisioningRequest Support", step 4).
CHART_PROVREQ_VERBS = {"get", "list", "watch", "update", "patch"}
FAQ_PROVREQ_VERBS = {"watch", "list", "get", "create", "update", "patch", "delete"}


def test_the_autoscaler_may_create_and_delete_provisioning_requests(dev: SynthResult) -> None:
    # Without `delete` its garbage collection of week-old finished requests fails on every loop.
    values = _release(dev, "cluster-autoscaler").inputs["values"]
    rules = values["rbac"]["additionalRules"]
    assert rules == [
        {
            "apiGroups": ["autoscaling.x-k8s.io"],
            "resources": ["provisioningrequests", "provisioningrequests/status"],
            "verbs": sorted(FAQ_PROVREQ_VERBS, key=list(autoscaler.PROVREQ_RULE["verbs"]).index),
        }
    ]
    granted = CHART_PROVREQ_VERBS | {verb for rule in rules for verb in rule["verbs"]}
    assert granted == FAQ_PROVREQ_VERBS
    assert missing_keys("cluster-autoscaler", values, open_keys=frozenset({"extraArgs"})) == []


def test_no_provisioning_request_rbac_without_provisioning_requests() -> None:
    config = autoscaler.ClusterAutoscalerConfig(provisioning_requests=False)
    values = autoscaler.chart_values(config, cluster_name="c", region="us-east-1", groups=[])
    assert "additionalRules" not in values["rbac"]


def test_training_pods_keep_their_nodes_from_the_autoscalers_scale_down(
    dev: SynthResult,
) -> None:
    jobs = [j for j in dev.of_type("kubernetes:batch/v1:Job") if "training" in j.name]
    assert jobs
    for job in jobs:
        annotations = job.inputs["spec"]["template"]["metadata"]["annotations"]
        assert annotations[SAFE_TO_EVICT] == "false"


def test_jobs_on_node_groups_come_after_the_autoscaler(dev: SynthResult) -> None:
    release = _release(dev, "cluster-autoscaler")
    jobs = {j.inputs["metadata"]["name"]: j for j in dev.of_type("kubernetes:batch/v1:Job")}
    assert release.urn in jobs["ddp-l4-nodegroup"].dependencies
    assert release.urn not in jobs["ddp-smoke"].dependencies


# --- scale from zero, reservations ----------------------------------------------------------------


def test_efa_groups_tell_the_autoscaler_their_efa_devices(prod: SynthResult) -> None:
    groups = {g.name: g.inputs for g in prod.of_type("eks:index:ManagedNodeGroup")}
    tags = groups["cluster-ng-h100-od"]["tags"]
    key = "k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa"
    assert tags[key] == "32"
    assert key not in groups["cluster-ng-l40s-spot"]["tags"]
    assert groups["cluster-ng-h100-od"]["labels"][catalog.CA_GPU_LABEL] == "nvidia-h100"
    assert groups["cluster-ng-h100-od"]["releaseVersion"] == "1.33.5-20251023"


def test_capacity_block_and_odcr_bind_through_the_launch_template() -> None:
    block = GpuNodeGroup(
        name="cb",
        instance_types=["p5.48xlarge"],
        capacity_type="capacity-block",
        capacity_reservation_id="cr-0123456789abcdef0",
        max_size=2,
    )
    assert block.flavor_capacity_type == "reserved"
    assert reservation_spec(block) == {
        "instance_market_options": {"market_type": "capacity-block"},
        "capacity_reservation_specification": {
            "capacity_reservation_target": {"capacity_reservation_id": "cr-0123456789abcdef0"}
        },
        # EKS rejects a Capacity Block group whose launch template has no InstanceType.
        "instance_type": "p5.48xlarge",
    }
    # ... and then takes no instanceTypes through its own API; other groups keep theirs.
    assert node_group_instance_types(block) is None
    odcr = block.model_copy(update={"capacity_type": "on-demand"})
    assert node_group_instance_types(odcr) == ["p5.48xlarge"]
    assert "instance_market_options" not in reservation_spec(odcr)
    assert "instance_type" not in reservation_spec(odcr)
    assert autoscaler_group_tags(block) == {
        "k8s.io/cluster-autoscaler/node-template/resources/vpc.amazonaws.com/efa": "32"
    }


#: Prod with its on-demand H100 group, a Capacity Block group of two p5 (the reserved H100
#: flavor, instead of Karpenter's kp-h100-reserved) and its spot L40S group.
CAPACITY_BLOCK_GROUP = {
    "name": "ng-h100-cb",
    "capacityType": "capacity-block",
    "capacityReservationId": "cr-0123456789abcdef0",
    "reservationZoneIndex": 2,
    "instanceTypes": ["p5.48xlarge"],
    "minSize": 0,
    "desiredSize": 0,
    "maxSize": 2,
}


def test_a_capacity_block_group_carries_its_type_in_the_launch_template() -> None:
    groups = stack_values("prod")["gpu-platform:nodeGroups"]["gpu"]
    overrides = node_group_overrides([*groups, CAPACITY_BLOCK_GROUP])
    # The block replaces Karpenter's reserved pool and its ODCR.
    overrides["gpu-platform:karpenter"]["reservations"] = []
    result = run_program("prod", overrides=overrides)
    templates = {t.name: t.inputs for t in result.of_type("aws:ec2/launchTemplate:LaunchTemplate")}
    node_groups = {g.name: g.inputs for g in result.of_type("eks:index:ManagedNodeGroup")}
    block, block_template = node_groups["cluster-ng-h100-cb"], templates["cluster-ng-h100-cb"]
    # What EKS requires of a CAPACITY_BLOCK group (capacity-blocks-mng.adoc): market type,
    # the block, and the type - in the launch template, and not again through the EKS API.
    assert block["capacityType"] == "CAPACITY_BLOCK"
    assert block_template["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert block_template["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}
    }
    assert block_template["instanceType"] == "p5.48xlarge"
    assert "instanceTypes" not in block
    # Only the block's zone; a Capacity Block is not created in the EFA placement group.
    assert len(block["subnetIds"]) == 1
    assert "placement" not in block_template
    assert len(block_template["networkInterfaces"]) == 32
    # On-demand and spot groups keep their types on the node group, none in the template.
    assert node_groups["cluster-ng-l40s-spot"]["instanceTypes"] == [
        "g6e.xlarge",
        "g6e.2xlarge",
        "g6e.4xlarge",
    ]
    assert node_groups["cluster-ng-h100-od"]["instanceTypes"] == ["p5.48xlarge"]
    for name in ("cluster-ng-l40s-spot", "cluster-ng-h100-od"):
        assert "instanceType" not in templates[name]
    # The report and the policies still see the block's eight GPUs per node.
    assert "| ng-h100-cb | h100-x8 | reserved | p5.48xlarge | 0/2 | 8 | 16 |" in report(result)
    violations = with_policy(result).policy_violations or []
    assert [v for v in violations if v["enforcement"] == "mandatory"] == []


def test_an_odcr_group_launches_in_the_reservations_zone_only() -> None:
    values = stack_values("prod")
    groups = copy.deepcopy(values["gpu-platform:nodeGroups"])
    groups["gpu"][0].update(capacityReservationId="cr-0123456789abcdef0", reservationZoneIndex=1)
    result = run_program("prod", overrides={"gpu-platform:nodeGroups": groups})
    (lt,) = [
        t
        for t in result.of_type("aws:ec2/launchTemplate:LaunchTemplate")
        if t.name == "cluster-ng-h100-od"
    ]
    target = lt.inputs["capacityReservationSpecification"]["capacityReservationTarget"]
    assert target == {"capacityReservationId": "cr-0123456789abcdef0"}
    (group,) = [
        g for g in result.of_type("eks:index:ManagedNodeGroup") if g.name == "cluster-ng-h100-od"
    ]
    assert len(group.inputs["subnetIds"]) == 1


def test_a_group_confined_by_zone_index_launches_in_that_subnet_only(dev: SynthResult) -> None:
    """`zoneIndex` (efa_placement.node_group_zone_index): the group's one private subnet."""

    def l4_group(result: SynthResult) -> Any:
        groups = result.of_type("eks:index:ManagedNodeGroup")
        (group,) = [g for g in groups if g.name == "cluster-ng-l4-spot"]
        return group

    spread = l4_group(dev).inputs["subnetIds"]
    assert len(spread) == 2
    groups = copy.deepcopy(stack_values("dev")["gpu-platform:nodeGroups"])
    groups["gpu"][0]["zoneIndex"] = 1
    result = run_program("dev", overrides={"gpu-platform:nodeGroups": groups})
    assert l4_group(result).inputs["subnetIds"] == [spread[1]]


# --- one provisioner per pod ----------------------------------------------------------------------


def test_every_node_source_names_its_provisioner(prod: SynthResult, dev: SynthResult) -> None:
    for result in (prod, dev):
        groups = result.of_type("eks:index:ManagedNodeGroup")
        pools = result.of_type("kubernetes:karpenter.sh/v1:NodePool")
        assert groups and pools
        for group in groups:
            assert group.inputs["labels"][catalog.LABEL_PROVISIONER] == "node-group"
        for pool in pools:
            labels = pool.inputs["spec"]["template"]["metadata"]["labels"]
            assert labels[catalog.LABEL_PROVISIONER] == "karpenter"


@pytest.mark.parametrize("scheduler", ["volcano", "kueue"])
def test_a_pod_both_provisioners_could_serve_is_flagged_unless_kueue_picks_one(
    scheduler: str,
) -> None:
    values = values_with_jobs("prod")
    job = next(j for j in values["gpu-platform:trainingJobs"] if j["name"] == "pretrain-7b")
    # reserved = Karpenter (kp-h100-reserved), its on-demand fallback = ng-h100-od.
    job.update(capacity="reserved", scheduler=scheduler, launcher=scheduler)
    if scheduler == "kueue":
        job["launcher"] = "native"
    cfg = _cfg(values)
    index = next(i for i, j in enumerate(cfg.training_jobs) if j.name == "pretrain-7b")
    found = [p for p in problems(cfg) if p[0] == f"trainingJobs[{index}].capacity"]
    if scheduler == "kueue":
        # Each Kueue flavor selects one provisioner: the pod gets exactly one.
        assert found == []
    else:
        assert found and "ng-h100-od" in found[0][2] and "kp-h100-reserved" in found[0][2]


def test_autoscaled_group_sources_need_the_pod_to_fit_the_first_type() -> None:
    sources = {s.name: s for s in sources_of(_cfg(stack_values("dev")))}
    spot = sources["ng-l4-spot"]
    assert spot.scaler == "autoscaler" and spot.max_nodes == 2
    assert list(spot.allocatable) == ["g6.xlarge"]
    assert catalog.spot_taint() in spot.taints


def test_gpu_daemons_tolerate_every_taint_of_every_gpu_source(
    prod: SynthResult, dev: SynthResult
) -> None:
    # A spot group's nodes carry the spot taint: a device plugin that did not tolerate it would
    # leave them without nvidia.com/gpu, and no GPU pod could ever run there.
    for result in (prod, dev):
        values = _release(result, "gpu-operator").inputs["values"]
        daemons = tuple(values["daemonsets"]["tolerations"])
        sources = sources_of(result.config)
        assert sources and all(source.taints for source in sources)
        for source in sources:
            for taint in source.taints:
                assert tolerates(taint, daemons), (source.name, taint)
    assert not tolerates(catalog.spot_taint(), (catalog.gpu_toleration(),))
