"""Cluster: pure builders, then the component as synthesized for prod and dev."""

from __future__ import annotations

import json
from typing import Any

import pulumi

from components import catalog
from components.analysis.nodes import managed_gpu_taints
from components.config import LOG_TYPES, GpuNodeGroup
from components.platform.cluster.cluster import CLUSTER_ADMIN_POLICY
from components.platform.cluster.node_group_builders import (
    eks_taints,
    gpu_group_labels,
    launch_template_spec,
    node_group_transform,
)
from synth.harness import SynthResult, run_program
from synth.report import report
from tests.conftest import node_group_overrides, stack_values


def test_launch_template_requires_imdsv2_and_encrypts_the_root_volume() -> None:
    spec = launch_template_spec(disk_size_gib=300, disk_iops=6000, disk_throughput_mibps=500)
    assert spec["metadata_options"]["http_tokens"] == "required"
    assert spec["metadata_options"]["http_put_response_hop_limit"] == 1
    (mapping,) = spec["block_device_mappings"]
    assert mapping["ebs"]["encrypted"] == "true"
    assert (mapping["ebs"]["volume_type"], mapping["ebs"]["volume_size"]) == ("gp3", 300)


def test_gpu_group_labels_use_the_catalog_keys() -> None:
    group = GpuNodeGroup(
        name="a10g-spot",
        instance_types=["g5.xlarge", "g5.2xlarge", "g5.4xlarge"],
        capacity_type="spot",
        max_size=2,
    )
    labels = gpu_group_labels(group)
    assert labels[catalog.LABEL_GPU_VENDOR] == "nvidia"
    assert labels[catalog.LABEL_GPU_MODEL] == "a10g"
    assert labels[catalog.LABEL_GPU_CLASS] == "a10g-x1"
    assert labels[catalog.LABEL_CAPACITY_TYPE] == "spot"
    assert labels[catalog.LABEL_WORKLOAD_TYPE] == "training"
    assert labels[catalog.LABEL_PROVISIONER] == "node-group"
    # The autoscaler's GPU label: it waits for the device plugin instead of scaling twice.
    assert labels[catalog.CA_GPU_LABEL] == "nvidia-a10g"
    assert eks_taints(managed_gpu_taints(group)) == [
        {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"},
        {"key": catalog.SPOT_TAINT_KEY, "value": "true", "effect": "NO_SCHEDULE"},
    ]


def test_prod_control_plane_is_private_api_authenticated_encrypted_and_fully_logged(
    prod: SynthResult,
) -> None:
    (cluster,) = prod.of_type("eks:index:Cluster")
    inputs = cluster.inputs
    assert inputs["authenticationMode"] == "API"
    assert inputs["endpointPrivateAccess"] is True
    assert inputs["endpointPublicAccess"] is False
    assert "publicAccessCidrs" not in inputs
    assert sorted(inputs["enabledClusterLogTypes"]) == sorted(LOG_TYPES)
    assert inputs["encryptionConfigKeyArn"].startswith("arn:aws:kms:")
    assert inputs["createOidcProvider"] is True
    assert inputs["skipDefaultNodeGroup"] is True
    assert inputs["version"] == "1.33"
    (key,) = [k for k in prod.of_type("aws:kms/key:Key") if k.name == "cluster-secrets"]
    assert key.inputs["enableKeyRotation"] is True
    assert key.urn in cluster.dependencies


def test_admin_roles_get_cluster_admin_access_entries(prod: SynthResult) -> None:
    (cluster,) = prod.of_type("eks:index:Cluster")
    entries = cluster.inputs["accessEntries"]
    assert {e["principalArn"] for e in entries.values()} == {
        "arn:aws:iam::123456789012:role/platform-admin",
        "arn:aws:iam::123456789012:role/platform-breakglass",
    }
    for entry in entries.values():
        (policy,) = entry["accessPolicies"].values()
        assert policy == {"policyArn": CLUSTER_ADMIN_POLICY, "accessScope": {"type": "cluster"}}


def test_dev_public_endpoint_is_limited_to_its_allow_list(dev: SynthResult) -> None:
    (cluster,) = dev.of_type("eks:index:Cluster")
    assert cluster.inputs["endpointPublicAccess"] is True
    assert cluster.inputs["publicAccessCidrs"] == ["203.0.113.0/24"]


def test_managed_addons_are_pinned_with_network_policy_enforcement(prod: SynthResult) -> None:
    (cluster,) = prod.of_type("eks:index:Cluster")
    assert cluster.inputs["vpcCniOptions"]["enableNetworkPolicy"] is True
    assert cluster.inputs["vpcCniOptions"]["addonVersion"].startswith("v1.")
    assert "eksbuild" in cluster.inputs["kubeProxyAddonOptions"]["version"]
    addons = {
        a.inputs["addonName"]: a
        for a in prod.of_type("aws:eks/addon:Addon")
        if a.name.startswith("cluster")  # the Logging component owns the CloudWatch add-on
    }
    assert set(addons) == {
        "aws-ebs-csi-driver",
        "coredns",
        "eks-node-monitoring-agent",
        "eks-pod-identity-agent",
    }
    assert all("eksbuild" in a.inputs["addonVersion"] for a in addons.values())
    ebs = addons["aws-ebs-csi-driver"]
    assert addons["eks-pod-identity-agent"].urn in ebs.dependencies
    (association,) = ebs.inputs["podIdentityAssociations"]
    assert association["serviceAccount"] == "ebs-csi-controller-sa"


def test_coredns_addon_waits_for_the_system_nodes_and_pulumi_eks_creates_none(
    prod: SynthResult,
) -> None:
    # Defect 5: pulumi-eks's own CoreDNS add-on has no node-group dependency and times out
    # DEGRADED (pulumi/pulumi-eks#1819); ours is created after the system node group.
    (cluster,) = prod.of_type("eks:index:Cluster")
    options = cluster.inputs["corednsAddonOptions"]
    # configurationValues would re-enable pulumi-eks's add-on (corednsExplicitlyEnabled).
    assert options["enabled"] is False and "configurationValues" not in options
    (system,) = [
        g for g in prod.of_type("eks:index:ManagedNodeGroup") if g.name == "cluster-system"
    ]
    (coredns,) = [
        a for a in prod.of_type("aws:eks/addon:Addon") if a.inputs["addonName"] == "coredns"
    ]
    assert system.urn in coredns.dependencies
    assert coredns.inputs["resolveConflictsOnCreate"] == "OVERWRITE"
    # The node monitoring agent (node health conditions for repair) waits for nodes too.
    (agent,) = [
        a
        for a in prod.of_type("aws:eks/addon:Addon")
        if a.inputs["addonName"] == "eks-node-monitoring-agent"
    ]
    assert system.urn in agent.dependencies
    assert coredns.inputs["addonVersion"] == "v1.12.2-eksbuild.4"


#: The pins, each the newest build read upstream (components/config/cluster.py DEFAULT_ADDONS has
#: where): kube-proxy from the EKS user guide's add-on table (managing-kube-proxy), the node
#: monitoring agent from the image tag of its newest release (aws/eks-node-monitoring-agent
#: v1.7.0, charts/eks-node-monitoring-agent/values.yaml).
NEWEST_KUBE_PROXY = {
    "1.32": "v1.32.13-eksbuild.16",
    "1.33": "v1.33.10-eksbuild.13",
    "1.34": "v1.34.6-eksbuild.13",
}
NEWEST_NODE_MONITORING_AGENT = "v1.7.0-eksbuild.1"


def test_kube_proxy_and_node_monitoring_agent_pins_are_the_newest_builds_read(
    prod: SynthResult,
) -> None:
    from components.config.cluster import DEFAULT_ADDONS

    for version, pins in DEFAULT_ADDONS.items():
        assert pins["kube_proxy"] == NEWEST_KUBE_PROXY[version]
        # kube-proxy must be of the cluster's own minor.
        assert pins["kube_proxy"].startswith(f"v{version}.")
        assert pins["node_monitoring_agent"] == NEWEST_NODE_MONITORING_AGENT
    (cluster,) = prod.of_type("eks:index:Cluster")
    assert cluster.inputs["kubeProxyAddonOptions"]["version"] == NEWEST_KUBE_PROXY["1.33"]
    (agent,) = [
        a
        for a in prod.of_type("aws:eks/addon:Addon")
        if a.inputs["addonName"] == "eks-node-monitoring-agent"
    ]
    assert agent.inputs["addonVersion"] == NEWEST_NODE_MONITORING_AGENT


def test_addon_pins_follow_the_kubernetes_version() -> None:
    from components.config import ClusterConfig
    from components.config.cluster import DEFAULT_ADDONS

    assert set(DEFAULT_ADDONS) == {"1.32", "1.33", "1.34"}
    for version, pins in DEFAULT_ADDONS.items():
        resolved = ClusterConfig(name="c", kubernetes_version=version).resolved_addons
        assert resolved.model_dump() == pins
        assert resolved.kube_proxy.startswith(f"v{version}.")
    override = ClusterConfig.model_validate(
        {"name": "c", "kubernetesVersion": "1.34", "addons": {"coredns": "v1.12.9-eksbuild.1"}}
    )
    assert override.resolved_addons.coredns == "v1.12.9-eksbuild.1"
    assert override.resolved_addons.kube_proxy == DEFAULT_ADDONS["1.34"]["kube_proxy"]


def test_unpinned_kubernetes_version_is_a_config_error(
    expect_config_error: Any,
) -> None:
    cfg = stack_values("prod")
    cfg["gpu-platform:cluster"]["kubernetesVersion"] = "1.35"
    expect_config_error(cfg, "gpu-platform:cluster.kubernetesVersion", "a version with add-on pins")


def test_node_security_group_allows_all_traffic_to_itself_for_efa(prod: SynthResult) -> None:
    (rule,) = [
        r
        for r in prod.of_type("aws:ec2/securityGroupRule:SecurityGroupRule")
        if r.name == "cluster-node-efa-self-egress"
    ]
    assert rule.inputs["type"] == "egress" and rule.inputs["self"] is True
    assert (rule.inputs["protocol"], rule.inputs["fromPort"], rule.inputs["toPort"]) == ("-1", 0, 0)
    (_cluster,) = prod.of_type("eks:index:Cluster")
    assert rule.inputs["securityGroupId"].startswith("sg-")


def test_spot_service_linked_role_only_when_asked(prod: SynthResult) -> None:
    assert not prod.of_type("aws:iam/serviceLinkedRole:ServiceLinkedRole")
    cluster = {**stack_values("prod")["gpu-platform:cluster"], "createSpotServiceLinkedRole": True}
    result = run_program("prod", overrides={"gpu-platform:cluster": cluster})
    (slr,) = result.of_type("aws:iam/serviceLinkedRole:ServiceLinkedRole")
    assert slr.inputs["awsServiceName"] == "spot.amazonaws.com"


def test_gpu_groups_at_zero_are_the_autoscalers_and_the_system_group_is_fixed(
    prod: SynthResult, dev: SynthResult
) -> None:
    for result in (prod, dev):
        groups = {g.name: g.inputs for g in result.of_type("eks:index:ManagedNodeGroup")}
        system = groups.pop("cluster-system")
        sizes = system["scalingConfig"]
        # The autoscaler discovers every managed group: the system group gives it no room.
        assert sizes["minSize"] == sizes["desiredSize"] == sizes["maxSize"]
        assert system.get("ignoreScalingChanges") is False
        assert groups
        for group in groups.values():
            assert group["scalingConfig"]["minSize"] == 0 == group["scalingConfig"]["desiredSize"]
            # The autoscaler owns desiredSize; `up` must not revert it.
            assert group["ignoreScalingChanges"] is True
            assert group["nodeGroupName"].startswith(result.config.cluster.name + "-")
        assert result.of_type("kubernetes:helm.sh/v3:Release")
        releases = {r.inputs["name"] for r in result.of_type("kubernetes:helm.sh/v3:Release")}
        assert "cluster-autoscaler" in releases


def test_a_fixed_group_keeps_its_size_owned_by_pulumi() -> None:
    groups = [
        {
            "name": "h100-fixed",
            "capacityType": "on-demand",
            "instanceTypes": ["p5.48xlarge"],
            "minSize": 2,
            "desiredSize": 2,
            "maxSize": 2,
        }
    ]
    result = run_program("prod", overrides=node_group_overrides(groups))
    (group,) = [g for g in result.of_type("eks:index:ManagedNodeGroup") if "fixed" in g.name]
    assert group.inputs["ignoreScalingChanges"] is False


def test_static_gpu_groups_are_tainted_labelled_and_start_with_nodes(
    prod_static: SynthResult,
) -> None:
    groups = {g.name: g.inputs for g in prod_static.of_type("eks:index:ManagedNodeGroup")}
    assert len(groups) >= 3
    system = groups["cluster-system"]
    assert system["amiType"] == "AL2023_x86_64_STANDARD" and system["capacityType"] == "ON_DEMAND"
    gpu = {n: g for n, g in groups.items() if g["amiType"] == "AL2023_x86_64_NVIDIA"}
    spot = [g for g in gpu.values() if g["capacityType"] == "SPOT"]
    on_demand = [g for g in gpu.values() if g["capacityType"] == "ON_DEMAND"]
    assert spot and on_demand
    assert all(len(g["instanceTypes"]) >= 3 for g in spot)
    gpu_taint = {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}
    spot_taint = {"key": catalog.SPOT_TAINT_KEY, "value": "true", "effect": "NO_SCHEDULE"}
    for group in gpu.values():
        assert group["scalingConfig"]["minSize"] >= 1
        spot = group["capacityType"] == "SPOT"
        assert group["taints"] == ([gpu_taint, spot_taint] if spot else [gpu_taint])
        labels = group["labels"]
        for key in (
            catalog.LABEL_GPU_VENDOR,
            catalog.LABEL_GPU_MODEL,
            catalog.LABEL_CAPACITY_TYPE,
            catalog.LABEL_WORKLOAD_TYPE,
        ):
            assert key in labels
        expected = "spot" if group["capacityType"] == "SPOT" else "on-demand"
        assert labels[catalog.LABEL_CAPACITY_TYPE] == expected


def test_every_node_group_uses_an_imdsv2_encrypted_launch_template(
    prod_static: SynthResult,
) -> None:
    prod = prod_static
    templates = {t.name: t for t in prod.of_type("aws:ec2/launchTemplate:LaunchTemplate")}
    (node_class, *_) = prod.of_type("kubernetes:karpenter.k8s.aws/v1:EC2NodeClass")
    (term,) = node_class.inputs["spec"]["securityGroupSelectorTerms"]
    node_sg = term["id"]
    assert node_sg.startswith("sg-")
    groups = prod.of_type("eks:index:ManagedNodeGroup")
    assert groups
    for group in groups:
        template = templates[group.name]
        assert template.urn in group.dependencies
        assert template.inputs["metadataOptions"]["httpTokens"] == "required"
        # One node security group for managed and Karpenter nodes alike (on every interface
        # of an EFA group's template).
        interfaces = template.inputs.get("networkInterfaces")
        if interfaces:
            assert {sg for i in interfaces for sg in i["securityGroups"]} == {node_sg}
            assert "vpcSecurityGroupIds" not in template.inputs
        else:
            assert template.inputs["vpcSecurityGroupIds"] == [node_sg]
        (mapping,) = template.inputs["blockDeviceMappings"]
        assert mapping["ebs"]["encrypted"] == "true"
        if group.inputs["amiType"] == "AL2023_x86_64_NVIDIA":
            assert mapping["ebs"]["volumeSize"] >= 200


def test_node_role_has_no_admin_policy(prod: SynthResult) -> None:
    (role,) = [r for r in prod.of_type("aws:iam/role:Role") if r.name == "cluster-node"]
    assert not any("AdministratorAccess" in arn for arn in role.inputs["managedPolicyArns"])
    trust = json.loads(role.inputs["assumeRolePolicy"])
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}


def test_default_storage_class_is_encrypted_gp3(prod: SynthResult) -> None:
    (sc,) = [
        s
        for s in prod.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
        if s.inputs["metadata"]["name"] == "gp3"
    ]
    assert (
        sc.inputs["metadata"]["annotations"]["storageclass.kubernetes.io/is-default-class"]
        == "true"
    )
    assert sc.inputs["parameters"]["type"] == "gp3"
    assert sc.inputs["parameters"]["encrypted"] == "true"
    assert sc.inputs["volumeBindingMode"] == "WaitForFirstConsumer"


def test_efa_static_group_gets_one_interface_per_efa_card(prod_static: SynthResult) -> None:
    templates = {t.name: t for t in prod_static.of_type("aws:ec2/launchTemplate:LaunchTemplate")}
    interfaces = templates["cluster-h100-od"].inputs["networkInterfaces"]
    assert len(interfaces) == catalog.instance("p5.48xlarge").efa_devices == 32
    assert (interfaces[0]["deviceIndex"], interfaces[0]["interfaceType"]) == (0, "efa")
    assert {(i["deviceIndex"], i["interfaceType"]) for i in interfaces[1:]} == {(1, "efa-only")}
    assert [i["networkCardIndex"] for i in interfaces] == list(range(32))
    # g6.xlarge .. g6.4xlarge have no EFA: plain security group, no interfaces.
    assert "networkInterfaces" not in templates["cluster-l4-spot"].inputs


def test_a_static_group_mixing_efa_counts_is_refused(expect_config_error: Any) -> None:
    cfg = stack_values("prod")
    cfg["gpu-platform:nodeGroups"]["gpu"] = [
        {
            "name": "g6e-od",
            "capacityType": "on-demand",
            "instanceTypes": ["g6e.12xlarge", "g6e.24xlarge"],
            "maxSize": 1,
        }
    ]
    expect_config_error(
        cfg, "gpu-platform:nodeGroups.gpu[0].instanceTypes", "one EFA device count per group"
    )


def test_node_monitoring_agent_can_be_left_out_until_its_pin_is_confirmed() -> None:
    cluster = {**stack_values("prod")["gpu-platform:cluster"], "nodeMonitoringAgent": False}
    result = run_program("prod", overrides={"gpu-platform:cluster": cluster})
    names = {a.inputs["addonName"] for a in result.of_type("aws:eks/addon:Addon")}
    assert "eks-node-monitoring-agent" not in names and "coredns" in names


def _node_group_child(group: Any) -> dict[str, Any]:
    """The EKS node group pulumi-eks registers as the group's child, after the group's
    transforms (the engine runs them at `up`; the mocks never see that child)."""
    return dict(
        group.child_inputs(
            catalog.EKS_NODE_GROUP_TYPE,
            {"clusterName": "c", "scalingConfig": {"desiredSize": 2}},
        )
    )


def test_managed_groups_turn_on_eks_node_auto_repair(prod: SynthResult) -> None:
    groups = prod.of_type("eks:index:ManagedNodeGroup")
    assert groups
    for group in groups:
        child = _node_group_child(group)
        assert child["nodeRepairConfig"] == {"enabled": True}, group.name
        assert child["scalingConfig"] == {"desiredSize": 2}  # the rest passes through
    # Only the EKS node group is touched (the launch template, roles... are not).
    transform = node_group_transform(auto_repair=True, max_unavailable=1)
    other = pulumi.ResourceTransformArgs(
        custom=True,
        type_="aws:ec2/launchTemplate:LaunchTemplate",
        name="lt",
        props={},
        opts=pulumi.ResourceOptions(),
    )
    assert transform(other) is None


def test_gpu_groups_set_max_unavailable_and_the_system_group_keeps_the_eks_default(
    prod: SynthResult,
) -> None:
    groups = {g.name: g for g in prod.of_type("eks:index:ManagedNodeGroup")}
    gpu = [n for n in groups if not n.endswith("system")]
    assert gpu
    for name in gpu:
        assert _node_group_child(groups[name])["updateConfig"] == {"maxUnavailable": 1}, name
    (system,) = [n for n in groups if n.endswith("system")]
    assert "updateConfig" not in _node_group_child(groups[system])
    overrides = stack_values("prod")["gpu-platform:nodeGroups"]
    changed = json.loads(json.dumps(overrides))
    changed["gpu"][0]["maxUnavailable"] = 2
    result = run_program("prod", overrides={"gpu-platform:nodeGroups": changed})
    first = next(
        g
        for g in result.of_type("eks:index:ManagedNodeGroup")
        if g.name.endswith(changed["gpu"][0]["name"])
    )
    assert _node_group_child(first)["updateConfig"] == {"maxUnavailable": 2}


def test_auto_repair_can_be_turned_off_per_group() -> None:
    result = run_program("dev", overrides={"gpu-platform:nodeGroups": _system_repair_off()})
    (system,) = [
        g for g in result.of_type("eks:index:ManagedNodeGroup") if g.name.endswith("system")
    ]
    assert _node_group_child(system)["nodeRepairConfig"] == {"enabled": False}


def _system_repair_off() -> dict[str, Any]:
    groups = json.loads(json.dumps(stack_values("dev").get("gpu-platform:nodeGroups", {})))
    groups.setdefault("system", {})["autoRepair"] = False
    return groups


def test_report_shows_each_managed_groups_auto_repair(dev: SynthResult) -> None:
    table = report(dev).split("auto repair |", 1)[1].split("\n\n", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line]
    assert rows and all(line.rstrip().endswith("| on |") for line in rows), rows
    off = run_program("dev", overrides={"gpu-platform:nodeGroups": _system_repair_off()})
    assert "| off |" in report(off).split("auto repair |", 1)[1].split("\n\n", 1)[0]
