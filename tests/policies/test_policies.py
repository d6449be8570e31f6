"""The policy pack: every rule on violating and compliant synthetic stacks, the whole pack over
the synthesized dev and prod stacks, the config files against the rules' schemas, the private
servicer API synth mirrors, the pack as a gRPC server, and `python -m synth` exiting 1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from components import catalog
from policies.rules import all_policies
from synth import __main__ as synth_cli
from synth import policy as runner
from synth.harness import PROJECT_ROOT, Registration, SynthResult
from tests.conftest import stack_values
from tests.policies.policy_cases import CASES, Res

POLICIES = all_policies()
BY_NAME = {p.name: p for p in POLICIES}


def synthetic(resources: list[Res]) -> SynthResult:
    urns = {name: f"urn:pulumi:t::gpu-platform::{typ}::{name}" for typ, name, _, _ in resources}
    return SynthResult(
        stack="t",
        resources=[
            Registration(
                urn=urns[name],
                type=typ,
                name=name,
                parent="",
                provider="",
                dependencies=tuple(urns[d] for d in deps),
                custom=True,
                inputs=json.loads(json.dumps(inputs)),
            )
            for typ, name, inputs, deps in resources
        ],
    )


def violations_of(name: str, resources: list[Res], config: dict[str, Any]) -> list[str]:
    found = runner.evaluate(synthetic(resources), [BY_NAME[name]], config)
    return [v.message for v in found]


# --- the rules ------------------------------------------------------------------------------------


def test_pack_has_at_least_30_named_documented_rules() -> None:
    assert len(POLICIES) >= 30
    assert len(BY_NAME) == len(POLICIES)
    for policy in POLICIES:
        assert policy.name.startswith("gpu-platform-"), policy.name
        assert policy.description and policy.remediation_steps and policy.severity
        assert policy.enforcement_level is not None


def test_security_and_spend_rules_are_mandatory() -> None:
    advisory = {p.name for p in POLICIES if p.enforcement_level.value != "mandatory"}
    assert advisory == {
        "gpu-platform-k8s-resource-requests",
        "gpu-platform-training-deepspeed-batch",
    }


def test_every_rule_has_a_violating_and_a_compliant_case() -> None:
    for policy in POLICIES:
        outcomes = {expect for name, _, _, _, expect in CASES if name == policy.name}
        assert outcomes == {True, False}, policy.name


@pytest.mark.parametrize(
    ("name", "resources", "config", "expect"),
    [pytest.param(n, res, cfg, exp, id=f"{n}: {what}") for n, what, res, cfg, exp in CASES],
)
def test_rule(name: str, resources: list[Res], config: dict[str, Any], expect: bool) -> None:
    assert resources, "a case without resources proves nothing"
    found = violations_of(name, resources, config)
    assert bool(found) == expect, found


def test_violations_carry_level_severity_and_urn() -> None:
    case = next(c for c in CASES if c[0] == "gpu-platform-k8s-image-pinned" and c[4])
    [violation] = runner.evaluate(synthetic(case[2]), POLICIES, case[3])
    assert violation.policy == "gpu-platform-k8s-image-pinned"
    assert (violation.enforcement, violation.severity) == ("mandatory", "high")
    assert violation.urn.endswith("::train")


def test_config_can_change_enforcement_level() -> None:
    case = next(c for c in CASES if c[0] == "gpu-platform-k8s-image-pinned" and c[4])
    config = {
        "gpu-platform-k8s-image-pinned": {"enforcementLevel": "advisory", "requireDigest": True}
    }
    [violation] = runner.evaluate(synthetic(case[2]), POLICIES, config)
    assert violation.enforcement == "advisory"
    assert runner.evaluate(synthetic(case[2]), POLICIES, {"all": "disabled"}) == []


# --- the four violations the issue names, at rule level. End to end (synth exits 1) below: the
# trainer role with s3:* on * and the unpinned prod image. A public bucket cannot be configured
# (no such key, by design) and a GPU pool without a limit is refused by the config model first
# (exit 2, tests/platform/test_karpenter.py): for those two the pack is the second line of
# defence. ---


@pytest.mark.parametrize(
    ("name", "what"),
    [
        ("gpu-platform-s3-public-access-block", "public bucket: block off"),
        ("gpu-platform-iam-no-wildcard-permissions", "training role with s3:* on *"),
        ("gpu-platform-karpenter-gpu-pool-limit", "GPU pool without limit"),
        ("gpu-platform-k8s-image-pinned", "prod: unpinned image"),
    ],
)
def test_named_violations_are_mandatory(name: str, what: str) -> None:
    [case] = [c for c in CASES if c[0] == name and c[1] == what]
    found = runner.evaluate(synthetic(case[2]), POLICIES, case[3])
    assert any(v.policy == name and runner.is_mandatory(v) for v in found)


# --- config files ---------------------------------------------------------------------------------


def pack_schema() -> dict[str, Any]:
    """The JSON schema of a pack config file, from the rules' config schemas."""
    levels = {"enum": ["advisory", "mandatory", "remediate", "disabled"]}
    properties: dict[str, Any] = {"all": levels}
    for policy in POLICIES:
        settings = dict(policy.config_schema.properties) if policy.config_schema else {}
        settings["enforcementLevel"] = levels
        properties[policy.name] = {
            "anyOf": [
                levels,
                {"type": "object", "properties": settings, "additionalProperties": False},
            ]
        }
    return {"type": "object", "properties": properties, "additionalProperties": False}


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_stack_config_file_matches_the_rule_schemas(stack: str) -> None:
    path = runner.config_path(PROJECT_ROOT, stack)
    data = json.loads(path.read_text())
    assert data
    jsonschema.validate(data, pack_schema())
    assert runner.load_config(path, POLICIES) == data


def test_schema_defaults_are_valid_values() -> None:
    checked = 0
    for policy in POLICIES:
        for key, spec in (policy.config_schema.properties if policy.config_schema else {}).items():
            assert "default" in spec, (policy.name, key)
            jsonschema.validate(spec["default"], spec)
            checked += 1
    assert checked


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ({"gpu-platform-nope": {}}, "no such policy"),
        ({"gpu-platform-k8s-image-pinned": {"requireDigest": "yes"}}, "expected boolean"),
        ({"gpu-platform-k8s-image-pinned": {"digest": True}}, "no such setting"),
        ({"gpu-platform-k8s-image-pinned": "strict"}, "enforcementLevel"),
    ],
)
def test_invalid_pack_config_is_rejected(
    tmp_path: Path, content: dict[str, Any], fragment: str
) -> None:
    path = tmp_path / "config.t.json"
    path.write_text(json.dumps(content))
    with pytest.raises(runner.PolicyConfigError) as error:
        runner.load_config(path, POLICIES)
    assert fragment in "\n".join(error.value.lines)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(content, pack_schema())


# --- the synthesized stacks -----------------------------------------------------------------------


def stack_violations(result: SynthResult) -> list[runner.Violation]:
    config = runner.load_config(runner.config_path(PROJECT_ROOT, result.stack), POLICIES)
    return runner.evaluate(result, POLICIES, config)


def test_prod_has_no_mandatory_violation(prod: SynthResult) -> None:
    assert prod.of_type("eks:index:Cluster") and prod.of_type(
        "aws:ec2/launchTemplate:LaunchTemplate"
    )
    assert [v for v in stack_violations(prod) if runner.is_mandatory(v)] == []


def test_dev_has_no_mandatory_violation(dev: SynthResult) -> None:
    assert dev.of_type("eks:index:ManagedNodeGroup")
    assert [v for v in stack_violations(dev) if runner.is_mandatory(v)] == []


def test_prod_rules_do_look_at_the_foundation(prod: SynthResult) -> None:
    """The same prod stack with its cluster made public and its logs cut must fail: the rules
    read the captured registrations, not an empty list."""
    cluster = prod.of_type("eks:index:Cluster")[0]
    broken = Registration(
        **{
            **cluster.__dict__,
            "inputs": {
                **cluster.inputs,
                "endpointPublicAccess": True,
                "enabledClusterLogTypes": [],
            },
        }
    )
    result = SynthResult("prod", [broken if r is cluster else r for r in prod.resources])
    names = {v.policy for v in stack_violations(result)}
    assert {"gpu-platform-eks-private-endpoint", "gpu-platform-eks-control-plane-logs"} <= names


# --- the servicer the CLI talks to (private API: pulumi-policy pinned to 1.21.0) ----------------


def analyze_with_servicer(result: SynthResult) -> set[tuple[str, str, str]]:
    from google.protobuf import json_format, struct_pb2
    from pulumi.runtime.proto import analyzer_pb2
    from pulumi_policy.policy import _PolicyAnalyzerServicer
    from pulumi_policy.version import VERSION

    assert VERSION == "1.21.0"
    servicer = _PolicyAnalyzerServicer("gpu-platform", "0.1.0", POLICIES, runner.LEVELS["advisory"])
    servicer.Configure(analyzer_pb2.ConfigureAnalyzerRequest(), None)
    found: set[tuple[str, str, str]] = set()

    def collect(response: Any, default_urn: str) -> None:
        for d in response.diagnostics:
            message = d.message.removeprefix(d.description).lstrip("\n")
            found.add((d.policyName, d.urn or default_urn, message))

    stack_request = analyzer_pb2.AnalyzeStackRequest()
    for r in result.resources:
        props = json_format.ParseDict(r.inputs, struct_pb2.Struct())
        request = analyzer_pb2.AnalyzeRequest(type=r.type, properties=props, urn=r.urn, name=r.name)
        collect(servicer.Analyze(request, None), r.urn)
        stack_request.resources.append(
            analyzer_pb2.AnalyzerResource(
                type=r.type,
                properties=props,
                urn=r.urn,
                name=r.name,
                parent=r.parent,
                dependencies=list(r.dependencies),
            )
        )
    collect(servicer.AnalyzeStack(stack_request, None), "")
    return found


def test_in_process_runner_agrees_with_the_cli_servicer(prod: SynthResult) -> None:
    broken = [c[2] for c in CASES if c[4]]
    resources = [res for group in broken for res in group]
    # Unique names: the cases reuse names across rules.
    renamed = [
        (t, f"{i}-{n}", inp, tuple(f"{i}-{d}" for d in deps))
        for i, group in enumerate(broken)
        for t, n, inp, deps in group
    ]
    result = synthetic(renamed)
    result.resources.extend(prod.resources)
    ours = {(v.policy, v.urn, v.message) for v in runner.evaluate(result, POLICIES, {})}
    assert ours and resources
    assert analyze_with_servicer(result) == ours


# --- the pack as the CLI runs it ------------------------------------------------------------------


def test_pack_serves_grpc_like_the_cli_expects() -> None:
    import grpc
    from google.protobuf import empty_pb2, json_format, struct_pb2
    from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

    process = subprocess.Popen(
        [sys.executable, str(PROJECT_ROOT / "policies" / "__main__.py")],
        cwd=PROJECT_ROOT / "policies",
        stdout=subprocess.PIPE,
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline().decode().strip())
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = analyzer_pb2_grpc.AnalyzerStub(channel)
            info = stub.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
            assert info.name == "gpu-platform"
            assert {p.name for p in info.policies} == set(BY_NAME)
            props = json_format.ParseDict(
                {
                    "policy": json.dumps(
                        {"Statement": [{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}
                    )
                },
                struct_pb2.Struct(),
            )
            response = stub.Analyze(
                analyzer_pb2.AnalyzeRequest(
                    type="aws:iam/rolePolicy:RolePolicy",
                    properties=props,
                    urn="urn:pulumi:prod::gpu-platform::aws:iam/rolePolicy:RolePolicy::train",
                    name="train",
                ),
                timeout=30,
            )
            names = {d.policyName for d in response.diagnostics}
            assert names == {"gpu-platform-iam-no-wildcard-permissions"}
            assert response.diagnostics[0].enforcementLevel == analyzer_pb2.MANDATORY
    finally:
        process.terminate()
        process.wait(timeout=10)


# --- python -m synth ------------------------------------------------------------------------------


def prod_project(tmp_path: Path, mutate: Any) -> Path:
    for name in ("__main__.py", "Pulumi.yaml", "components", "policies"):
        (tmp_path / name).symlink_to(PROJECT_ROOT / name)
    config = stack_values("prod")
    mutate(config)
    (tmp_path / "Pulumi.prod.yaml").write_text(yaml.safe_dump({"config": config}))
    return tmp_path


def test_synth_writes_the_policy_report(tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert synth_cli.main(["--stack", "prod", "--out", str(out)]) == 0
    report = json.loads((out / "policy-report.json").read_text())
    assert report == {"violations": []}
    text = (out / "report.md").read_text()
    assert "## Policy" in text and "| mandatory | 0 |" in text


@pytest.mark.parametrize(
    ("what", "mutate", "rule"),
    [
        (
            "public API endpoint in prod (config allows an allow-listed CIDR)",
            lambda c: c["gpu-platform:cluster"].update(
                endpointPublicAccess=True, publicAccessCidrs=["203.0.113.0/24"]
            ),
            "gpu-platform-eks-private-endpoint",
        ),
        (
            "control-plane logs cut to api",
            lambda c: c["gpu-platform:cluster"].update(logTypes=["api"]),
            "gpu-platform-eks-control-plane-logs",
        ),
        (
            "a team's trainer role granted s3:* on *",
            lambda c: c["gpu-platform:teams"][0].update(
                extraIamStatements=[{"Sid": "Everything", "Action": ["s3:*"], "Resource": ["*"]}]
            ),
            "gpu-platform-iam-no-wildcard-permissions",
        ),
        (
            "H100 group able to grow to 800 GPUs",
            lambda c: c["gpu-platform:nodeGroups"].update(
                gpu=[
                    {
                        "name": "h100-static",
                        "capacityType": "on-demand",
                        "instanceTypes": ["p5.48xlarge"],
                        "maxSize": 100,
                    },
                    # The spot L40S group stays: research's quota lists its flavor.
                    *c["gpu-platform:nodeGroups"]["gpu"][1:],
                ]
            ),
            "gpu-platform-eks-gpu-node-group-bounded",
        ),
    ],
)
def test_synth_exits_1_naming_the_rule(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str, mutate: Any, rule: str
) -> None:
    root = prod_project(tmp_path, mutate)
    code = synth_cli.main(["--stack", "prod", "--project-dir", str(root)])
    captured = capsys.readouterr()
    assert code == 1, captured.err
    assert f"mandatory {rule}:" in captured.err
    report = json.loads((root / "build" / "prod" / "policy-report.json").read_text())
    assert rule in {v["policy"] for v in report["violations"]}
    assert rule in (root / "build" / "prod" / "report.md").read_text()


def test_synth_exits_2_on_an_invalid_pack_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "p"
    root.mkdir()
    for name in ("__main__.py", "Pulumi.yaml", "components", "Pulumi.prod.yaml"):
        (root / name).symlink_to(PROJECT_ROOT / name)
    (root / "policies").mkdir()
    (root / "policies" / "config.prod.json").write_text('{"gpu-platform-nope": {}}')
    assert synth_cli.main(["--stack", "prod", "--project-dir", str(root)]) == 2
    assert "gpu-platform-nope: no such policy" in capsys.readouterr().err


def test_image_repository_strips_tag_and_digest_but_not_a_registry_port() -> None:
    digest = "@sha256:" + "c" * 64
    assert catalog.image_repository(f"ghcr.io/gpu-platform/trainer:0.1.0{digest}") == (
        "ghcr.io/gpu-platform/trainer"
    )
    assert (
        catalog.image_repository(f"ghcr.io/gpu-platform/trainer{digest}")
        == "ghcr.io/gpu-platform/trainer"
    )
    assert (
        catalog.image_repository("registry.local:5000/team/img:1") == "registry.local:5000/team/img"
    )
    assert (
        catalog.image_repository("registry.local:5000/team/img") == "registry.local:5000/team/img"
    )


def test_the_pack_imports_with_only_its_own_requirements() -> None:
    """`pulumi preview --policy-pack policies` runs the pack in a venv from
    policies/requirements.txt (pulumi, pulumi-policy): the rules may import components.catalog,
    never the config model (pydantic) or a resource SDK."""
    blocked = ["pydantic", "pulumi_aws", "pulumi_eks", "pulumi_kubernetes"]
    code = (
        "import sys\n"
        f"for name in {blocked!r}: sys.modules[name] = None\n"
        "import policies.rules\n"
        "print(len(policies.rules.all_policies()))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], cwd=PROJECT_ROOT, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) == len(all_policies())
