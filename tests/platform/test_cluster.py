"""Cluster: pure builders, then the component as synthesized for prod and dev."""

from __future__ import annotations

import json

from components import catalog
from components.config import LOG_TYPES, GpuNodeGroup
from components.platform.cluster import (
    CLUSTER_ADMIN_POLICY,
    eks_gpu_taint,
    gpu_group_labels,
    launch_template_spec,
)
from synth.harness import SynthResult


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
    assert eks_gpu_taint() == {"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}


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
    assert "eksbuild" in cluster.inputs["corednsAddonOptions"]["version"]
    assert "eksbuild" in cluster.inputs["kubeProxyAddonOptions"]["version"]
    addons = {
        a.inputs["addonName"]: a
        for a in prod.of_type("aws:eks/addon:Addon")
        if a.name.startswith("cluster")  # the Logging component owns the CloudWatch add-on
    }
    assert set(addons) == {"aws-ebs-csi-driver", "eks-pod-identity-agent"}
    assert all("eksbuild" in a.inputs["addonVersion"] for a in addons.values())
    ebs = addons["aws-ebs-csi-driver"]
    assert addons["eks-pod-identity-agent"].urn in ebs.dependencies
    (association,) = ebs.inputs["podIdentityAssociations"]
    assert association["serviceAccount"] == "ebs-csi-controller-sa"


def test_prod_has_system_on_demand_gpu_and_spot_gpu_groups(prod: SynthResult) -> None:
    groups = {g.name: g.inputs for g in prod.of_type("eks:index:ManagedNodeGroup")}
    assert len(groups) >= 3
    system = groups["cluster-system"]
    assert system["amiType"] == "AL2023_x86_64_STANDARD" and system["capacityType"] == "ON_DEMAND"
    gpu = {n: g for n, g in groups.items() if g["amiType"] == "AL2023_x86_64_NVIDIA"}
    spot = [g for g in gpu.values() if g["capacityType"] == "SPOT"]
    on_demand = [g for g in gpu.values() if g["capacityType"] == "ON_DEMAND"]
    assert spot and on_demand
    assert all(len(g["instanceTypes"]) >= 3 for g in spot)
    for group in gpu.values():
        assert group["scalingConfig"]["minSize"] == 0
        assert group["taints"] == [eks_gpu_taint()]
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


def test_every_node_group_uses_an_imdsv2_encrypted_launch_template(prod: SynthResult) -> None:
    templates = {t.name: t for t in prod.of_type("aws:ec2/launchTemplate:LaunchTemplate")}
    (discovery,) = [
        t
        for t in prod.of_type("aws:ec2/tag:Tag")
        if t.inputs["key"] == "karpenter.sh/discovery" and t.inputs["resourceId"].startswith("sg-")
    ]
    node_sg = discovery.inputs["resourceId"]
    for group in prod.of_type("eks:index:ManagedNodeGroup"):
        template = templates[group.name]
        assert template.urn in group.dependencies
        assert template.inputs["metadataOptions"]["httpTokens"] == "required"
        # One node security group for managed and Karpenter nodes alike.
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
