"""Config model: valid stacks parse; every invalid config exits 2 before any resource exists,
one line per problem naming the key path, the bad value and what is allowed — no traceback."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pulumi
import pytest

from components import config as stack_config
from synth.harness import run_program
from tests.conftest import (
    STATIC_GPU_GROUPS,
    config_error_test,
    node_group_overrides,
    stack_values,
)


def _prod() -> dict[str, Any]:
    cfg = copy.deepcopy(stack_values("prod"))
    cfg.update(copy.deepcopy(node_group_overrides(STATIC_GPU_GROUPS)))
    return cfg


def _set(cfg: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """Set `key.sub[0].leaf` inside the `gpu-platform:key` value."""
    head, *rest = path.replace("[", ".[").split(".")
    key = f"gpu-platform:{head}"
    if not rest:
        cfg[key] = value
        return cfg
    node = cfg[key]
    parts = [int(p[1:-1]) if p.startswith("[") else p for p in rest]
    for part in parts[:-1]:
        node = node[part]
    node[parts[-1]] = value
    return cfg


def _spot(types: list[str]) -> dict[str, Any]:
    return {"name": "x-spot", "capacityType": "spot", "instanceTypes": types, "maxSize": 2}


# (description, mutation, expected key path in the message, expected fragment of what's allowed)
INVALID: list[tuple[str, Callable[[dict[str, Any]], Any], str, str]] = [
    (
        "unknown instance type",
        lambda c: _set(c, "nodeGroups.gpu[0].instanceTypes", ["p9.mega"]),
        "gpu-platform:nodeGroups.gpu[0].instanceTypes[0]",
        "a GPU instance type",
    ),
    (
        "spot group with two instance types",
        lambda c: _set(c, "nodeGroups.gpu[1].instanceTypes", ["g6.xlarge", "g6.2xlarge"]),
        "gpu-platform:nodeGroups.gpu[1].instanceTypes",
        "at least 3 instance types",
    ),
    (
        "unknown capacity type",
        lambda c: _set(c, "nodeGroups.gpu[0].capacityType", "preemptible"),
        "gpu-platform:nodeGroups.gpu[0].capacityType",
        "'on-demand', 'spot' or 'capacity-block'",
    ),
    (
        "max size zero",
        lambda c: _set(c, "nodeGroups.gpu[0].maxSize", 0),
        "gpu-platform:nodeGroups.gpu[0].maxSize",
        "greater than or equal to 1",
    ),
    (
        "min size above max size",
        lambda c: _set(c, "nodeGroups.gpu[2].minSize", 9),
        "gpu-platform:nodeGroups.gpu[2].minSize",
        "must be <= maxSize",
    ),
    (
        "duplicate group name",
        lambda c: _set(c, "nodeGroups.gpu[2].name", "l4-spot"),
        "gpu-platform:nodeGroups.gpu[2].name",
        "a unique name",
    ),
    (
        # Nothing but the cluster-autoscaler resizes a managed group (Karpenter never does).
        "resizable GPU group with the autoscaler off",
        lambda c: _set(c, "clusterAutoscaler", {"enabled": False}),
        "gpu-platform:nodeGroups.gpu[0].maxSize",
        "nothing resizes a managed group while clusterAutoscaler.enabled is false",
    ),
    (
        # One provisioner per flavor: a Karpenter pool beside a group of the same flavor.
        "flavor served by a node group and a Karpenter pool",
        lambda c: c["gpu-platform:karpenter"]["pools"].append(
            {
                "name": "kp-l4-spot",
                "gpuClass": "l4-x1",
                "capacityType": "spot",
                "limits": {"gpus": 4},
            }
        ),
        "gpu-platform:nodeGroups.gpu[1].capacityType",
        "one provisioner per flavor",
    ),
    (
        "system group the autoscaler could resize",
        lambda c: _set(c, "nodeGroups.system.maxSize", 6),
        "gpu-platform:nodeGroups.system.maxSize",
        "the cluster-autoscaler discovers every managed group",
    ),
    (
        "autoscaler image of another Kubernetes minor",
        lambda c: _set(c, "clusterAutoscaler", {"imageTag": "v1.35.0"}),
        "gpu-platform:clusterAutoscaler.imageTag",
        "an image of the cluster's Kubernetes minor 1.33 (e.g. v1.33.6)",
    ),
    (
        "autoscaler template type not the smallest",
        lambda c: _set(
            c, "nodeGroups.gpu[1].instanceTypes", ["g6.2xlarge", "g6.xlarge", "g6.4xlarge"]
        ),
        "gpu-platform:nodeGroups.gpu[1].instanceTypes[0]",
        "the smallest type first (g6.xlarge is smaller)",
    ),
    (
        "Capacity Block group without its reservation",
        lambda c: (
            _set(c, "nodeGroups.gpu[0].capacityType", "capacity-block"),
            _set(c, "nodeGroups.gpu[0].minSize", 0),
            _set(c, "nodeGroups.gpu[0].desiredSize", 0),
        ),
        "gpu-platform:nodeGroups.gpu[0].capacityReservationId",
        "the Capacity Block's id",
    ),
    (
        "Capacity Block group with two types (its launch template carries one InstanceType)",
        lambda c: (
            _set(c, "nodeGroups.gpu[0].capacityType", "capacity-block"),
            _set(c, "nodeGroups.gpu[0].capacityReservationId", "cr-0123456789abcdef0"),
            _set(c, "nodeGroups.gpu[0].minSize", 0),
            _set(c, "nodeGroups.gpu[0].desiredSize", 0),
            _set(c, "nodeGroups.gpu[0].instanceTypes", ["p5.48xlarge", "p5e.48xlarge"]),
        ),
        "gpu-platform:nodeGroups.gpu[0].instanceTypes",
        "launch template carries it as its InstanceType, which EKS requires",
    ),
    (
        "Capacity Block group created with nodes",
        lambda c: (
            _set(c, "nodeGroups.gpu[0].capacityType", "capacity-block"),
            _set(c, "nodeGroups.gpu[0].capacityReservationId", "cr-0123456789abcdef0"),
        ),
        "gpu-platform:nodeGroups.gpu[0].desiredSize",
        "EKS creates Capacity Block groups empty",
    ),
    (
        "capacity reservation on a spot group",
        lambda c: _set(c, "nodeGroups.gpu[1].capacityReservationId", "cr-0123456789abcdef0"),
        "gpu-platform:nodeGroups.gpu[1].capacityReservationId",
        "only on on-demand (ODCR) or capacity-block groups",
    ),
    (
        "reservation in a zone the stack does not have",
        lambda c: (
            _set(c, "nodeGroups.gpu[0].capacityReservationId", "cr-0123456789abcdef0"),
            _set(c, "nodeGroups.gpu[0].reservationZoneIndex", 5),
        ),
        "gpu-platform:nodeGroups.gpu[0].reservationZoneIndex",
        "the index of one of the 3 private subnets",
    ),
    (
        "a group setting the platform's own label",
        lambda c: _set(c, "nodeGroups.gpu[0].labels", {"gpu-platform.io/provisioner": "karpenter"}),
        "gpu-platform:nodeGroups.gpu[0].labels.gpu-platform.io/provisioner",
        "a key outside the platform's and Kubernetes' domains",
    ),
    (
        "a group re-declaring the GPU taint",
        lambda c: _set(c, "nodeGroups.gpu[0].taints", [{"key": "nvidia.com/gpu", "value": "x"}]),
        "gpu-platform:nodeGroups.gpu[0].taints[0].key",
        "a key the platform does not set itself",
    ),
    (
        "a group confined to a zone the stack does not have",
        lambda c: _set(c, "nodeGroups.gpu[1].zoneIndex", 3),
        "gpu-platform:nodeGroups.gpu[1].zoneIndex",
        "the index of one of the 3 private subnets (0-2)",
    ),
    (
        "zoneIndex on a reservation-bound group",
        lambda c: (
            _set(c, "nodeGroups.gpu[0].capacityReservationId", "cr-0123456789abcdef0"),
            _set(c, "nodeGroups.gpu[0].zoneIndex", 1),
        ),
        "gpu-platform:nodeGroups.gpu[0].zoneIndex",
        "reservationZoneIndex names the reservation's zone",
    ),
    (
        "zoneIndex away from the EFA placement group's zone",
        lambda c: _set(c, "nodeGroups.gpu[0].zoneIndex", 2),
        "gpu-platform:nodeGroups.gpu[0].zoneIndex",
        "unset or 0: the group launches into the EFA placement group",
    ),
    (
        "a value-less taint on a group the autoscaler scales from zero",
        lambda c: _set(c, "nodeGroups.gpu[0].taints", [{"key": "example.com/dedicated"}]),
        "gpu-platform:nodeGroups.gpu[0].taints[0].value",
        "a non-empty value on a group the cluster-autoscaler resizes",
    ),
    (
        "reserved capacity on a managed group",
        lambda c: _set(c, "nodeGroups.gpu[0].capacityType", "reserved"),
        "gpu-platform:nodeGroups.gpu[0].capacityType",
        "'capacity-block'",
    ),
    (
        "group mixing GPU models",
        lambda c: _set(
            c,
            "nodeGroups.gpu",
            [*c["gpu-platform:nodeGroups"]["gpu"], _spot(["g5.xlarge", "g6.xlarge", "g6e.xlarge"])],
        ),
        "gpu-platform:nodeGroups.gpu[3].instanceTypes",
        "same GPU model and GPU count",
    ),
    (
        "unsupported Kubernetes version",
        lambda c: _set(c, "cluster.kubernetesVersion", "1.20"),
        "gpu-platform:cluster.kubernetesVersion",
        "must be one of",
    ),
    (
        "public endpoint without allow-list",
        lambda c: _set(c, "cluster.endpointPublicAccess", True),
        "gpu-platform:cluster.publicAccessCidrs",
        "explicit CIDR allow-list",
    ),
    (
        "public endpoint open to the internet",
        lambda c: (
            _set(c, "cluster.endpointPublicAccess", True),
            _set(c, "cluster.publicAccessCidrs", ["0.0.0.0/0"]),
        ),
        "gpu-platform:cluster.publicAccessCidrs[0]",
        "whole internet is not allowed",
    ),
    (
        "malformed admin role ARN",
        lambda c: _set(c, "cluster.adminRoleArns", ["arn:aws:iam::12:user/bob"]),
        "gpu-platform:cluster.adminRoleArns[0]",
        "should match pattern",
    ),
    (
        "VPC CIDR too large",
        lambda c: _set(c, "network", {"vpcCidr": "10.0.0.0/8"}),
        "gpu-platform:network.vpcCidr",
        "between /16 and /20",
    ),
    (
        "single AZ",
        lambda c: _set(c, "network", {"azCount": 1}),
        "gpu-platform:network.azCount",
        "greater than or equal to 2",
    ),
    (
        "unknown NAT mode",
        lambda c: _set(c, "network", {"natGateways": "none"}),
        "gpu-platform:network.natGateways",
        "'perAz' or 'single'",
    ),
    (
        "typo in a top-level key",
        lambda c: c.update({"gpu-platform:netwrok": {"azCount": 3}}),
        "gpu-platform:netwrok",
        "did you mean 'network'",
    ),
    (
        "typo in a nested key",
        lambda c: _set(c, "cluster.endpointPublic", True),
        "gpu-platform:cluster.endpointPublic",
        "did you mean 'endpointPublicAccess'",
    ),
    (
        "cluster without a name",
        lambda c: c["gpu-platform:cluster"].pop("name"),
        "gpu-platform:cluster.name",
        "required key is missing",
    ),
    (
        "unknown environment",
        lambda c: _set(c, "environment", "qa"),
        "gpu-platform:environment",
        "'dev', 'staging' or 'prod'",
    ),
    (
        "unknown control-plane log type",
        lambda c: _set(c, "cluster.logTypes", ["api", "kubelet"]),
        "gpu-platform:cluster.logTypes[1]",
        "'api'",
    ),
    (
        "GPU type in the system group",
        lambda c: _set(c, "nodeGroups.system", {"instanceTypes": ["g5.xlarge"]}),
        "gpu-platform:nodeGroups.system.instanceTypes[0]",
        "m6i.xlarge",
    ),
    (
        "existing VPC with one private subnet",
        lambda c: _set(
            c,
            "network",
            {
                "existingVpc": {
                    "vpcId": "vpc-0123456789abcdef0",
                    "privateSubnetIds": ["subnet-01234567"],
                }
            },
        ),
        "gpu-platform:network.existingVpc.privateSubnetIds",
        "at least 2 items",
    ),
    (
        "GPU root volume too small for training images",
        lambda c: _set(c, "nodeGroups.gpu[0].diskSizeGib", 20),
        "gpu-platform:nodeGroups.gpu[0].diskSizeGib",
        "greater than or equal to 100",
    ),
    # issue 30: the reference trainer exists only as the deploy builds or resolves it.
    (
        "trainer build off without a published tag to resolve",
        lambda c: _set(c, "images", {"trainer": {"build": False}}),
        "gpu-platform:images.trainer.tag",
        "the published tag to resolve",
    ),
    (
        "trainer tag set while the build derives its own",
        lambda c: _set(c, "images", {"trainer": {"tag": "0.2.0"}}),
        "gpu-platform:images.trainer.tag",
        "no tag with build: true",
    ),
    (
        "no registry to push the reference trainer to, and no default image",
        lambda c: c["gpu-platform:security"].update(registry={"enabled": False}),
        "gpu-platform:training.defaultImage",
        "an image by digest, or security.registry enabled",
    ),
    (
        "a default image by tag only",
        lambda c: _set(c, "training", {"defaultImage": "ghcr.io/gpu-platform/trainer:0.2.0"}),
        "gpu-platform:training.defaultImage",
        "sha256",
    ),
    (
        "no signer trusted",
        lambda c: c["gpu-platform:security"].update(
            imageAdmission={"signatures": {"platformKey": False}}
        ),
        "gpu-platform:security.imageAdmission.signatures.platformKey",
        "exactly one signer",
    ),
    (
        "KMS deletion window below the AWS minimum",
        lambda c: _set(c, "cluster.kmsDeletionWindowDays", 3),
        "gpu-platform:cluster.kmsDeletionWindowDays",
        "greater than or equal to 7",
    ),
]


test_invalid_config_exits_2_with_key_path_and_no_traceback = config_error_test(INVALID, _prod)


def test_every_problem_is_reported_at_once_one_line_each() -> None:
    cfg = _prod()
    _set(cfg, "cluster.kubernetesVersion", "1.20")
    _set(cfg, "nodeGroups.gpu[0].capacityType", "preemptible")
    cfg["gpu-platform:netwrok"] = {}
    with pytest.raises(stack_config.ConfigError) as info:
        stack_config.parse(
            stack_config.namespace_values(
                {k: json.dumps(v) if not isinstance(v, str) else v for k, v in cfg.items()}
            )
        )
    assert len(info.value.lines) == 3
    assert {line.split(":", 2)[1] for line in info.value.lines} == {
        "cluster.kubernetesVersion",
        "nodeGroups.gpu[0].capacityType",
        "netwrok",
    }


def test_message_shows_the_bad_value() -> None:
    with pytest.raises(stack_config.ConfigError) as info:
        stack_config.parse(
            {
                "environment": "dev",
                "cluster": {"name": "c", "kubernetesVersion": "1.20"},
                "nodeGroups": {"gpu": [{**STATIC_GPU_GROUPS[0], "minSize": 3}]},
            }
        )
    text = "\n".join(info.value.lines)
    assert 'gpu-platform:cluster.kubernetesVersion: got "1.20"; must be one of' in text
    assert "gpu-platform:nodeGroups.gpu[0].minSize: got 3; must be <= maxSize (2)" in text


def test_config_error_is_a_run_error_so_the_cli_prints_no_traceback() -> None:
    # `pulumi up` prints a RunError's message without a stack trace.
    assert issubclass(stack_config.ConfigError, pulumi.RunError)


def test_invalid_config_registers_no_resource() -> None:
    cfg = stack_values("prod")
    spot = dict(cfg["gpu-platform:nodeGroups"])
    spot["gpu"] = [{**STATIC_GPU_GROUPS[0], "minSize": 3}]
    with pytest.raises(stack_config.ConfigError):
        run_program("prod", overrides={"gpu-platform:nodeGroups": spot})
    from synth import harness

    # The monitor of that run is gone; re-run with a capture to prove nothing was registered.
    captured: list[str] = []
    original = harness.CapturingMonitor.RegisterResource

    def spy(self: harness.CapturingMonitor, request: Any) -> Any:
        captured.append(request.type)
        return original(self, request)

    harness.CapturingMonitor.RegisterResource = spy  # type: ignore[method-assign]
    try:
        with pytest.raises(stack_config.ConfigError):
            run_program("prod", overrides={"gpu-platform:nodeGroups": spot})
    finally:
        harness.CapturingMonitor.RegisterResource = original  # type: ignore[method-assign]
    assert [t for t in captured if t != "pulumi:pulumi:Stack"] == []


def test_load_reads_keys_from_the_cli_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under `pulumi up` the language host passes config in PULUMI_CONFIG; a typo there must fail.
    from pulumi.runtime import config as runtime_config

    values = {k: v if isinstance(v, str) else json.dumps(v) for k, v in _prod().items()}
    values["gpu-platform:clusterr"] = "{}"
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(values))
    token = runtime_config.CONFIG.set({})
    try:
        with pytest.raises(stack_config.ConfigError) as info:
            stack_config.load()
    finally:
        runtime_config.CONFIG.reset(token)
    assert any(line.startswith("gpu-platform:clusterr: unknown key") for line in info.value.lines)


def test_both_stacks_parse_and_prod_keeps_safe_defaults() -> None:
    decode = stack_config.namespace_values
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in stack_values("prod").items()}
    prod = stack_config.parse(decode(raw))
    assert prod.cluster.endpoint_public_access is False
    assert prod.cluster.log_types == list(stack_config.LOG_TYPES)
    assert prod.network.az_count == 3 and prod.network.nat_gateways == "perAz"
    assert prod.cluster.deletion_protection is True
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in stack_values("dev").items()}
    dev = stack_config.parse(decode(raw))
    assert dev.network.az_count == 2 and dev.network.nat_gateways == "single"


def test_gpu_class_names_model_and_count() -> None:
    group = stack_config.GpuNodeGroup(
        name="a", instance_types=["p5.48xlarge"], capacity_type="on-demand", max_size=1
    )
    assert (group.gpu_model, group.gpus_per_node, group.gpu_class) == ("h100", 8, "h100-x8")


def test_group_taints_the_autoscaler_can_see_are_accepted() -> None:
    """The compliant side of the value-less taint rule: a valued taint on a resizable group, and
    a value-less one on a fixed group (never scaled from zero), both parse."""
    base = stack_values("prod")["gpu-platform:nodeGroups"]["gpu"][0]
    valued = {**base, "taints": [{"key": "example.com/dedicated", "value": "pretrain"}]}
    group = stack_config.GpuNodeGroup.model_validate(valued)
    assert group.resizable and group.taints[0].value == "pretrain"
    fixed = {
        **base,
        "minSize": 1,
        "desiredSize": 1,
        "maxSize": 1,
        "taints": [{"key": "example.com/dedicated"}],
    }
    assert not stack_config.GpuNodeGroup.model_validate(fixed).resizable


def test_an_unknown_key_under_a_mapping_of_models_lists_the_allowed_keys() -> None:
    """A path through a dict of models (`teams.<name>.<key>`, as a stack output between the
    projects has them: components/contract) names the model's keys, under the given prefix."""
    from pydantic import BaseModel, ConfigDict, ValidationError

    from components.config.errors import format_errors

    class Entry(BaseModel):
        model_config = ConfigDict(extra="forbid")
        namespace: str

    class Root(BaseModel):
        model_config = ConfigDict(extra="forbid")
        teams: dict[str, Entry]
        flavors: dict[str, dict[str, Entry]] | None = None

    with pytest.raises(ValidationError) as caught:
        Root.model_validate(
            {
                "teams": {"a": {"namespace": "x", "namespce": "y"}},
                "flavors": {"l4": {"spot": {"nmespace": "z"}}},
            }
        )
    assert format_errors(caught.value, Root, prefix="out.") == [
        "out.teams.a.namespce: unknown key (did you mean 'namespace'?); allowed keys: namespace",
        "out.flavors.l4.spot.namespace: required key is missing",
        "out.flavors.l4.spot.nmespace: unknown key (did you mean 'namespace'?); allowed keys: "
        "namespace",
    ]
