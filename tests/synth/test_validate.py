"""synth/validate.py: each check rejects a violating object and accepts a compliant one.

Compliant objects are the program's own (dev stack), changed one field at a time; the
x-kubernetes-* extensions the vendored CRDs do not use, and CEL corner cases, are exercised with
a small test CRD.
Whole-stack validation is in test_stack.py."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from synth import output
from synth import validate as validate_cli
from synth.harness import SynthResult
from synth.validate import Problem, Validator, default_validator
from tests.conftest import SCHEMAS


@pytest.fixture(scope="module")
def objects(dev: SynthResult) -> list[dict[str, Any]]:
    return output.manifests(dev)


def _one(
    objects: list[dict[str, Any]], kind: str, name: str | None = None, api: str | None = None
) -> dict[str, Any]:
    for obj in objects:
        names, apis = (None, obj["metadata"]["name"]), (None, obj["apiVersion"])
        if obj["kind"] == kind and name in names and api in apis:
            return copy.deepcopy(obj)
    raise AssertionError(f"no {kind} {name or ''} in the dev stack")


def _problems(obj: dict[str, Any], validator: Validator | None = None) -> list[tuple[str, str]]:
    return [(p.path, p.message) for p in (validator or default_validator()).validate(obj)]


# --- CustomResources against the vendored CRDs ---------------------------------------------------


def test_a_compliant_custom_resource_has_no_problems(objects: list[dict[str, Any]]) -> None:
    pool = _one(objects, "NodePool")
    before = copy.deepcopy(pool)
    assert _problems(pool) == []
    assert pool == before, "validating must not change the object (defaults go on a copy)"


def test_unknown_field_in_a_custom_resource_is_an_error(objects: list[dict[str, Any]]) -> None:
    pool = _one(objects, "NodePool")
    pool["spec"]["template"]["spec"]["nodeClassRef"]["nmae"] = "gpu"
    pool["spec"]["typo"] = 1
    assert _problems(pool) == [
        ("spec.template.spec.nodeClassRef.nmae", "unknown field (not in the schema)"),
        ("spec.typo", "unknown field (not in the schema)"),
    ]


def test_wrong_type_in_a_custom_resource(objects: list[dict[str, Any]]) -> None:
    pool = _one(objects, "NodePool")
    pool["spec"]["weight"] = "10"
    assert _problems(pool) == [("spec.weight", "'10' is not of type 'integer'")]


def test_value_outside_an_enum(objects: list[dict[str, Any]]) -> None:
    pool = _one(objects, "NodePool")
    pool["spec"]["disruption"]["consolidationPolicy"] = "Sometimes"
    ((path, message),) = _problems(pool)
    assert path == "spec.disruption.consolidationPolicy"
    assert message.startswith("'Sometimes' is not one of ['WhenEmpty'")


def test_missing_required_field(objects: list[dict[str, Any]]) -> None:
    pool = _one(objects, "NodePool")
    del pool["spec"]["template"]["spec"]["nodeClassRef"]["name"]
    assert _problems(pool) == [("spec.template.spec.nodeClassRef.name", "required field missing")]


def test_quantity_syntax_in_a_custom_resource(objects: list[dict[str, Any]]) -> None:
    pool = _one(objects, "NodePool")
    pool["spec"]["limits"]["cpu"] = "12 cores"
    assert _problems(pool) == [
        ("spec.limits.cpu", "'12 cores' is not a Kubernetes quantity (e.g. 500m, 2, 16Gi)")
    ]


def test_go_pattern_with_inline_flags_is_checked(objects: list[dict[str, Any]]) -> None:
    # prometheus-operator writes `^(?i)(abort|warn)?$`: valid in Go, moved for Python.
    rule = _one(objects, "PrometheusRule")
    rule["spec"]["groups"][0]["partial_response_strategy"] = "WARN"
    assert _problems(rule) == []
    rule["spec"]["groups"][0]["partial_response_strategy"] = "retry"
    ((path, message),) = _problems(rule)
    assert path == "spec.groups[0].partial_response_strategy"
    assert "does not match" in message


def test_version_not_served_by_the_crd(objects: list[dict[str, Any]]) -> None:
    queue = _one(objects, "ClusterQueue")
    queue["apiVersion"] = "kueue.x-k8s.io/v1alpha1"
    assert _problems(queue) == [
        (
            "apiVersion",
            "kueue.x-k8s.io/v1alpha1 is not served by crds/kueue/kueue.x-k8s.io_clusterqueues.yaml"
            " (served: v1beta1, v1beta2)",
        )
    ]


# --- built-in kinds (kubernetes-validate, strict) ------------------------------------------------


def test_builtin_unknown_field_and_wrong_type(objects: list[dict[str, Any]]) -> None:
    job = _one(objects, "Job", api="batch/v1")
    assert _problems(job) == []
    container = job["spec"]["template"]["spec"]["containers"][0]
    container["imagePullPolcy"] = "Always"
    job["spec"]["backoffLimit"] = "3"
    prefix = "spec.template.spec.containers[0]"
    assert _problems(job) == [
        ("spec.backoffLimit", "'3' is not of type 'integer', 'null'"),
        (f"{prefix}.imagePullPolcy", "unknown field (not in the schema)"),
    ]


def test_builtin_quantity_syntax(objects: list[dict[str, Any]]) -> None:
    quota = _one(objects, "ResourceQuota")
    assert _problems(quota) == []
    quota["spec"]["hard"]["requests.cpu"] = "lots"
    assert _problems(quota) == [
        ('spec.hard["requests.cpu"]', "'lots' is not a Kubernetes quantity (e.g. 500m, 2, 16Gi)")
    ]


def test_pod_failure_condition_status_is_defaulted_like_the_api_server() -> None:
    # The 1.33 schema lists `status` as required; the API server defaults it to "True".
    job: dict[str, Any] = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j"},
        "spec": {
            "podFailurePolicy": {
                "rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]
            },
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c"}]}},
        },
    }
    assert _problems(job) == []
    job["spec"]["podFailurePolicy"]["rules"][0]["onPodConditions"][0]["statuz"] = "True"
    assert _problems(job) == [
        (
            "spec.podFailurePolicy.rules[0].onPodConditions[0].statuz",
            "unknown field (not in the schema)",
        )
    ]


# --- metadata ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "name", "message"),
    [
        ("ConfigMap", None, "required: every object of the program has an explicit name"),
        ("ConfigMap", "Team_A", "'Team_A' is not a DNS-1123 subdomain"),
        ("Namespace", "team.a", "'team.a' is not a DNS-1123 label"),
        ("Service", "1st", "'1st' is not a DNS-1035 label"),
    ],
)
def test_metadata_name_is_present_and_a_dns_name(
    objects: list[dict[str, Any]], kind: str, name: str | None, message: str
) -> None:
    obj = _one(objects, kind)
    assert _problems(obj) == []
    obj["metadata"]["name"] = name
    if name is None:
        del obj["metadata"]["name"]
    problems = _problems(obj)
    assert [p for p, _ in problems] == ["metadata.name"]
    assert problems[0][1].startswith(message)


def test_label_keys_and_values_are_checked(objects: list[dict[str, Any]]) -> None:
    namespace = _one(objects, "Namespace")
    namespace["metadata"]["labels"]["team name"] = "ok"
    namespace["metadata"]["labels"]["tier"] = "not ok!"
    assert _problems(namespace) == [
        ('metadata.labels["team name"]', "invalid label key"),
        ("metadata.labels.tier", "invalid label value 'not ok!'"),
    ]


# --- StorageClass parameters ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"directoryPerm": "700"},
            (
                "parameters.directoryPerm",
                "unknown parameter for efs.csi.aws.com (the driver ignores it)",
            ),
        ),
        ({"provisioningMode": "efs"}, ("parameters.provisioningMode", "'efs' is not one of")),
        ({"directoryPerms": "rwx"}, ("parameters.directoryPerms", "'rwx' does not match")),
        ({"fileSystemIdConfigRef": "cm"}, ("parameters", "exactly one of ['fileSystemId'")),
        ({"gidRangeStart": "1000"}, ("parameters.gidRangeEnd", "required when gidRangeStart")),
        ({"uid": 1000}, ("parameters.uid", "1000 is not of type 'string', 'null'")),
    ],
)
def test_efs_storageclass_parameters(
    objects: list[dict[str, Any]], change: dict[str, Any], expected: tuple[str, str]
) -> None:
    efs = _one(objects, "StorageClass", "efs-rwx")
    assert _problems(efs) == []
    efs["parameters"].update(change)
    ((path, message),) = _problems(efs)
    assert (path, message[: len(expected[1])]) == expected


def test_storageclass_required_and_conditional_parameters() -> None:
    fsx: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": "fsx"},
        "provisioner": "fsx.csi.aws.com",
        "parameters": {"subnetId": "subnet-0a1", "securityGroupIds": "sg-1,sg-2"},
    }
    assert _problems(fsx) == []
    fsx["parameters"].update(storageType="HDD", **{"csi.storage.k8s.io/fstype": "lustre"})
    del fsx["parameters"]["subnetId"]
    assert _problems(fsx) == [
        ("parameters.driveCacheType", "required when {'storageType': 'HDD'}"),
        ("parameters.subnetId", "required parameter missing"),
    ]


def test_other_provisioners_and_static_provisioning_are_not_parameter_checked(
    objects: list[dict[str, Any]],
) -> None:
    ebs = _one(objects, "StorageClass", "gp3")
    ebs["parameters"]["anything"] = "x"
    assert _problems(ebs) == []
    efs = _one(objects, "StorageClass", "efs-rwx")
    del efs["parameters"]
    assert _problems(efs) == []


# --- kinds without a schema ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("api_version", "kind", "message"),
    [
        ("example.com/v1", "Widget", "no schema: no CRD in schemas/crds serves Widget.example.com"),
        ("v1", "Pot", "no schema: v1 Pot is not a Kubernetes 1.33 kind"),
        ("jobset.x-k8s.io/v1alpha2", "JobSet", "no schema: no CRD in schemas/crds serves JobSet"),
    ],
)
def test_an_object_without_a_schema_is_an_error(api_version: str, kind: str, message: str) -> None:
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x"}, "spec": {}}
    ((path, text),) = _problems(obj)
    assert path == "kind" and text.startswith(message)


def test_not_an_object() -> None:
    assert default_validator().validate(["a", "list"]) == [
        Problem("?", "?", "", "not a Kubernetes object: list")
    ]


# --- x-kubernetes-* extensions, on a test CRD ----------------------------------------------------

WIDGET_CRD = """\
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          apiVersion: {type: string}
          kind: {type: string}
          metadata: {type: object}
          spec:
            type: object
            required: [size, mode]
            x-kubernetes-validations:
            - {rule: "!has(self.replicas) || self.replicas <= 10", message: at most 10 replicas}
            - {rule: "self.mode == oldSelf.mode", message: mode is immutable}
            properties:
              size: {x-kubernetes-int-or-string: true, anyOf: [{type: integer}, {type: string}]}
              mode: {type: string, enum: [fast, slow], default: fast}
              replicas: {type: integer, minimum: 1}
              note: {type: string, nullable: true}
              label: {type: string, x-kubernetes-validations: [{rule: "self.reverse() != ''"}]}
              extra: {type: object, x-kubernetes-preserve-unknown-fields: true}
              template:
                type: object
                x-kubernetes-embedded-resource: true
                properties:
                  spec: {type: object, properties: {image: {type: string}}}
              tags: {type: array, x-kubernetes-list-type: set, items: {type: string}}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties: {name: {type: string}, port: {type: integer}}
"""


@pytest.fixture(scope="module")
def widgets(tmp_path_factory: pytest.TempPathFactory) -> Validator:
    root = tmp_path_factory.mktemp("schemas")
    (root / "crds" / "example").mkdir(parents=True)
    (root / "crds" / "example" / "widgets.yaml").write_text(WIDGET_CRD)
    shutil.copy(SCHEMAS / "storageclass-parameters.yaml", root)
    return Validator(root)


def _widget(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": "w", "namespace": "team-a", "labels": {"app": "w"}},
        "spec": {"size": 3, **spec},
    }


def test_int_or_string_defaults_nullable_and_preserved_fields(widgets: Validator) -> None:
    # `mode` is required but defaulted: the API server fills it in before validating.
    assert _problems(_widget(), widgets) == []
    assert _problems(_widget(size="3Gi", note=None, extra={"any": {"deep": [1]}}), widgets) == []
    assert _problems(_widget(size=1.5, replicas=None), widgets) == [
        ("spec.replicas", "None is not of type 'integer'"),
        ("spec.size", "1.5 is not of type 'integer', 'string'"),
    ]
    missing = _widget()
    del missing["spec"]["size"]
    assert _problems(missing, widgets) == [("spec.size", "required field missing")]


def test_embedded_resource_needs_kind_and_api_version_and_gets_object_meta(
    widgets: Validator,
) -> None:
    template = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {"a": "b"}}}
    assert _problems(_widget(template={**template, "spec": {"image": "i"}}), widgets) == []
    bad = {"metadata": {"nmae": "p"}, "spec": {"imgae": "i"}}
    assert _problems(_widget(template=bad), widgets) == [
        ("spec.template.apiVersion", "required field missing"),
        ("spec.template.kind", "required field missing"),
        ("spec.template.metadata.nmae", "unknown field (not in the schema)"),
        ("spec.template.spec.imgae", "unknown field (not in the schema)"),
    ]


def test_list_type_set_and_map_reject_duplicates(widgets: Validator) -> None:
    ports = [{"name": "http", "port": 80}, {"name": "metrics", "port": 80}]
    assert _problems(_widget(tags=["a", "b"], ports=ports), widgets) == []
    ports.append({"name": "http", "port": 8080})
    assert _problems(_widget(tags=["a", "a"], ports=ports), widgets) == [
        ("spec.ports[2]", "duplicate key (name) of item [0] in a map list"),
        ("spec.tags[1]", "duplicate value of item [0] in a set list"),
    ]


def test_two_crds_for_one_kind_or_a_pattern_python_cannot_read_are_errors(
    tmp_path: Path,
) -> None:
    (tmp_path / "crds").mkdir()
    (tmp_path / "crds" / "a.yaml").write_text(WIDGET_CRD)
    (tmp_path / "crds" / "b.yaml").write_text(WIDGET_CRD)
    shutil.copy(SCHEMAS / "storageclass-parameters.yaml", tmp_path)
    with pytest.raises(ValueError, match=r"crds/b.yaml: Widget.example.com is also defined by"):
        Validator(tmp_path)
    (tmp_path / "crds" / "b.yaml").unlink()
    (tmp_path / "crds" / "a.yaml").write_text(
        WIDGET_CRD.replace("{type: string, nullable: true}", "{type: string, pattern: '\\pL'}")
    )
    with pytest.raises(ValueError, match="is not a Python regex"):
        Validator(tmp_path).validate(_widget(note="x"))


def test_cel_rules_are_evaluated_on_create(widgets: Validator) -> None:
    assert _problems(_widget(replicas=10), widgets) == []
    assert _problems(_widget(replicas=11), widgets) == [("spec", "at most 10 replicas")]
    # A function cel-python lacks is reported, never counted as passed.
    assert _problems(_widget(label="n"), widgets) == [
        (
            "spec.label",
            "CEL rule could not be evaluated (undeclared reference to 'reverse'): "
            "self.reverse() != ''",
        )
    ]
    # With a schema error, CEL does not run (as in the API server): one problem, not two.
    assert _problems(_widget(replicas=11, size=1.5), widgets) == [
        ("spec.size", "1.5 is not of type 'integer', 'string'")
    ]


def test_cel_rule_of_the_vendored_karpenter_crd(objects: list[dict[str, Any]]) -> None:
    pool = _one(objects, "NodePool")
    requirement = {"key": "karpenter.sh/nodepool", "operator": "In", "values": ["x"]}
    pool["spec"]["template"]["spec"]["requirements"].append(requirement)
    index = len(pool["spec"]["template"]["spec"]["requirements"]) - 1
    assert _problems(pool) == [
        (
            f"spec.template.spec.requirements[{index}].key",
            'label "karpenter.sh/nodepool" is restricted',
        )
    ]


# --- the CLI -------------------------------------------------------------------------------------


def test_cli_prints_one_line_per_problem_and_exits_1(
    objects: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = _one(objects, "NodePool"), _one(objects, "NodePool")
    bad["spec"]["weight"] = "10"
    path = tmp_path / "manifests.yaml"
    path.write_text(yaml.safe_dump_all([good, bad]))
    assert validate_cli.main([str(path)]) == 1
    name = bad["metadata"]["name"]
    assert capsys.readouterr().out.splitlines() == [
        f"NodePool/{name}: spec.weight: '10' is not of type 'integer'",
        "validated 2 objects: 1 ok, 1 failed",
    ]
    path.write_text(yaml.safe_dump_all([good]))
    assert validate_cli.main([str(path)]) == 0
    assert capsys.readouterr().out == "validated 1 objects: 1 ok, 0 failed\n"
