"""Validate rendered Kubernetes manifests against the upstream schemas vendored in `schemas/`.

    python -m synth.validate build/dev/manifests.yaml build/prod/manifests.yaml

One line per problem (`Kind/name: path: message`), then `validated N objects: N ok, N failed`;
exit 1 when any object failed. What is checked, per object:

- CustomResources: against the openAPIV3Schema of the served version in the vendored CRD
  (`schemas/crds/`), after the schema defaults are applied as the API server would. Unknown
  fields are errors: the API server prunes them silently, which for us means a typo that does
  nothing. x-kubernetes-int-or-string, -preserve-unknown-fields and -embedded-resource are
  honoured, list-type set/map entries must be unique, and the CEL rules
  (x-kubernetes-validations) are evaluated with cel-python, except transition rules (`oldSelf`:
  update only).
- Built-in kinds: against the strict (no unknown fields) schemas that kubernetes-validate ships
  for Kubernetes 1.33, with resource quantities held to the Kubernetes quantity syntax.
- Every object: metadata.name present and a valid DNS name, label keys and values valid.
- StorageClasses of the EFS and FSx CSI drivers: parameters against
  `schemas/storageclass-parameters.yaml` (the drivers ignore unknown keys without a word).
- An object whose kind has no schema is an error: unvalidated is not valid.

Not checked: string formats, CEL cost limits, admission webhooks, anything that needs a live
cluster. `.ci/run` may add a second, independent validator as an extra check; the tests never
depend on it.
"""

from __future__ import annotations

import argparse
import copy
import functools
import json
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import celpy
import jsonschema
import yaml
from celpy import celtypes
from celpy.adapter import json_to_cel
from kubernetes_validate import utils as kv_utils
from referencing import Registry, Resource

SCHEMAS_DIR = Path(__file__).resolve().parent.parent / "schemas"
K8S_VERSION = "1.33"
#: Where kubernetes-validate's shared definitions live; CRD schemas borrow ObjectMeta from it.
_DEFS_URI = "https://kubernetes.io/api/_definitions.json"
_OBJECT_META = {"$ref": f"{_DEFS_URI}#/$defs/io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta"}
#: resource.Quantity as controller-gen writes it into CRDs; kubernetes-validate allows any string.
QUANTITY = (
    r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|"
    r"([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$"
)
#: API groups served by Kubernetes itself; any other group needs a CRD.
_BUILTIN_GROUPS = frozenset({"", "apps", "batch", "autoscaling", "policy"})
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = re.compile(rf"^{_DNS_LABEL}(\.{_DNS_LABEL})*$")
_DNS1123_LABEL = re.compile(rf"^{_DNS_LABEL}$")
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
#: Kinds whose names the API server holds to a DNS label (they become DNS names or hostnames).
_NAME_RULES: dict[str, tuple[re.Pattern[str], int, str]] = {
    "Namespace": (_DNS1123_LABEL, 63, "a DNS-1123 label"),
    "Service": (_DNS1035_LABEL, 63, "a DNS-1035 label"),
}


@dataclass(frozen=True)
class Problem:
    """One reason the API server would reject the object, or would silently drop part of it."""

    kind: str
    name: str
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}/{self.name}: {self.path or '(object)'}: {self.message}"


@dataclass(frozen=True)
class Crd:
    """A CustomResourceDefinition: the file it came from and the schema of each served version."""

    source: str
    served: tuple[str, ...]
    schemas: dict[str, dict[str, Any]]


class Validator:
    """Schemas are loaded once and validators compiled on first use of a kind."""

    def __init__(self, schemas_dir: Path = SCHEMAS_DIR, k8s_version: str = K8S_VERSION) -> None:
        self.k8s_version = k8s_version
        self._crds = _load_crds(schemas_dir / "crds")
        rules = yaml.safe_load((schemas_dir / "storageclass-parameters.yaml").read_text())
        self._sc_rules: dict[str, dict[str, Any]] = rules["provisioners"]
        self._schema_dir = _builtin_schema_dir(k8s_version)
        defs = kv_utils.schema_contents(f"{self._schema_dir}/_definitions.json", k8s_version)
        defs["$defs"]["io.k8s.apimachinery.pkg.api.resource.Quantity"] = {
            "anyOf": [{"type": "string", "pattern": QUANTITY}, {"type": "number"}]
        }
        self._registry: Registry[Any] = Resource.from_contents(defs) @ Registry()
        self._validators: dict[tuple[str, str], Any] = {}

    # -- entry points

    def validate(self, obj: Any) -> list[Problem]:
        if not isinstance(obj, dict):
            return [Problem("?", "?", "", f"not a Kubernetes object: {type(obj).__name__}")]
        kind, name = str(obj.get("kind", "?")), _name(obj)
        api_version = str(obj.get("apiVersion", ""))
        group, _, version = api_version.rpartition("/")
        problems = [Problem(kind, name, p, m) for p, m in _check_metadata(obj, kind)]
        crd = self._crds.get((group, kind))
        if crd is not None:
            if version not in crd.schemas:
                served = ", ".join(crd.served)
                msg = f"{api_version} is not served by {crd.source} (served: {served})"
                return [*problems, Problem(kind, name, "apiVersion", msg)]
            validator = self._cr_validator(crd, version)
            schema = crd.schemas[version]
            instance = copy.deepcopy(obj)
            _apply_defaults(instance, schema)
            found = [*_schema_errors(validator, instance), *_list_type_errors(instance, schema)]
            if not found:
                # As the API server: CEL runs on a well-typed object only (rules assume the
                # schema holds, so on a malformed one they fail with noise).
                found = list(_cel_errors(instance, schema))
        elif group in _BUILTIN_GROUPS or group.endswith(".k8s.io"):
            validator = self._builtin_validator(api_version, kind)
            if validator is None:
                msg = f"no schema: {api_version} {kind} is not a Kubernetes {self.k8s_version} kind"
                return [*problems, Problem(kind, name, "kind", msg)]
            found = list(_schema_errors(validator, _builtin_defaults(obj)))
            if kind == "StorageClass" and group == "storage.k8s.io":
                found += _storageclass_errors(obj, self._sc_rules)
        else:
            msg = f"no schema: no CRD in schemas/crds serves {kind}.{group}"
            return [*problems, Problem(kind, name, "kind", msg)]
        return problems + [Problem(kind, name, p, m) for p, m in sorted(found)]

    def validate_all(self, objects: Iterable[Any]) -> list[Problem]:
        return [problem for obj in objects for problem in self.validate(obj)]

    # -- validators, compiled once per kind

    def _cr_validator(self, crd: Crd, version: str) -> Any:
        key = (crd.source, version)
        if key not in self._validators:
            schema = _to_json_schema(crd.schemas[version], crd.source, root=True)
            self._validators[key] = jsonschema.Draft202012Validator(schema, registry=self._registry)
        return self._validators[key]

    def _builtin_validator(self, api_version: str, kind: str) -> Any:
        # kubernetes-validate names its files <kind>-<group without domain>-<version>.json.
        short = re.sub(r"^([^./]*)(?:\.[^/]*)?/", r"\1-", api_version)
        filename = f"{self._schema_dir}/{kind.lower()}-{short}.json"
        key = ("builtin", filename)
        if key not in self._validators:
            try:
                schema = kv_utils.schema_contents(filename, self.k8s_version)
            except FileNotFoundError:
                schema = None
            self._validators[key] = (
                None
                if schema is None
                else jsonschema.Draft202012Validator(
                    schema, registry=Resource.from_contents(schema) @ self._registry
                )
            )
        return self._validators[key]


@functools.cache
def default_validator() -> Validator:
    """The validator for the vendored schemas and Kubernetes 1.33, built once per process."""
    return Validator()


# --- loading -------------------------------------------------------------------------------------


def _builtin_schema_dir(k8s_version: str) -> str:
    # Exactly the minor version asked for: an older schema set would hide fields we rely on.
    wanted = kv_utils.major_minor(k8s_version)
    versions = [v for v in kv_utils.all_versions() if kv_utils.major_minor(v) == wanted]
    if not versions:
        raise ValueError(f"kubernetes-validate has no schemas for Kubernetes {k8s_version}")
    return f"kubernetes-json-schema/v{versions[-1]}-local-strict"


def _load_crds(crd_dir: Path) -> dict[tuple[str, str], Crd]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    crds: dict[tuple[str, str], Crd] = {}
    for path in sorted(crd_dir.rglob("*.yaml")):
        source = path.relative_to(crd_dir.parent).as_posix()
        for doc in yaml.load_all(path.read_text(), Loader=loader):
            if not isinstance(doc, dict) or doc.get("kind") != "CustomResourceDefinition":
                continue
            spec = doc["spec"]
            key = (spec["group"], spec["names"]["kind"])
            if key in crds:
                # Two CRDs for one kind cannot both be installed; which one counts is ambiguous.
                raise ValueError(
                    f"{source}: {key[1]}.{key[0]} is also defined by {crds[key].source}"
                )
            served = [v for v in spec["versions"] if v.get("served")]
            crds[key] = Crd(
                source=source,
                served=tuple(v["name"] for v in served),
                schemas={v["name"]: v["schema"]["openAPIV3Schema"] for v in served},
            )
    return crds


def load_manifests(paths: Iterable[Path]) -> list[Any]:
    """Every non-empty YAML document of the files, in order."""
    return [
        doc for path in paths for doc in yaml.safe_load_all(path.read_text()) if doc is not None
    ]


def _builtin_defaults(obj: dict[str, Any]) -> dict[str, Any]:
    """The API server's defaults for fields that the published schema marks required although
    the server fills them before validating: Job podFailurePolicy onPodConditions[].status
    defaults to "True" (SetDefaults_Job; the 1.33 schema still lists it as required)."""
    rules = (obj.get("spec") or {}).get("podFailurePolicy", {}).get("rules", [])
    if obj.get("kind") != "Job" or not rules:
        return obj
    obj = copy.deepcopy(obj)
    for rule in obj["spec"]["podFailurePolicy"]["rules"]:
        for condition in rule.get("onPodConditions") or []:
            condition.setdefault("status", "True")
    return obj


# --- CRD schema (structural OpenAPI v3) to JSON Schema ------------------------------------------

#: Value validations that mean the same in OpenAPI v3 and JSON Schema.
_SAME = (
    "enum",
    "minimum",
    "maximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
    "multipleOf",
    "required",
)


def _to_json_schema(
    s: dict[str, Any], source: str, *, root: bool = False, structural: bool = True
) -> dict[str, Any]:
    """Translate a CRD schema node. `structural`: the node prunes (not inside allOf/anyOf/oneOf/
    not, which only add value checks), so fields it does not declare are unknown fields."""
    out, types = _value_rules(s, source)
    _add_object_rules(out, s, source, root=root, structural=structural)
    if isinstance(s.get("items"), dict):
        out["items"] = _to_json_schema(s["items"], source, structural=structural)
    for key in ("allOf", "anyOf", "oneOf"):
        if key in s and not (types[:2] == ["integer", "string"] and _only_types(s[key])):
            out[key] = [_to_json_schema(x, source, structural=False) for x in s[key]]
    if "not" in s:
        out["not"] = _to_json_schema(s["not"], source, structural=False)
    return out


def _value_rules(s: dict[str, Any], source: str) -> tuple[dict[str, Any], list[str]]:
    """The node's type and value checks in JSON Schema's spelling, and its types (nullable
    and int-or-string widen them)."""
    out: dict[str, Any] = {k: s[k] for k in _SAME if k in s}
    if s.get("x-kubernetes-int-or-string"):
        types: list[str] = ["integer", "string"]
    else:
        types = [s["type"]] if "type" in s else []
    if s.get("nullable"):
        types.append("null")
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    if types:
        out["type"] = types[0] if len(types) == 1 else types
    for bound in ("minimum", "maximum"):
        # OpenAPI v3.0 writes exclusive bounds as a boolean next to the bound.
        exclusive = "exclusive" + bound.capitalize()
        if s.get(exclusive) is True and bound in out:
            out[exclusive] = out.pop(bound)
    if "pattern" in s:
        out["pattern"] = _python_pattern(s["pattern"], source)
    return out, types


def _add_object_rules(
    out: dict[str, Any], s: dict[str, Any], source: str, *, root: bool, structural: bool
) -> None:
    """Adds to `out` the node's fields: its properties (an embedded object's implicit ones too)
    and whether others are allowed, which is how a structural schema prunes unknown fields."""
    embedded = root or bool(s.get("x-kubernetes-embedded-resource"))
    props = {
        k: _to_json_schema(v, source, structural=structural)
        for k, v in s.get("properties", {}).items()
    }
    if embedded and structural:
        # apiVersion, kind and metadata are implicit in an embedded object; metadata is
        # ObjectMeta (pruned and validated as such), whatever the CRD spells out for it.
        props.setdefault("apiVersion", {"type": "string"})
        props.setdefault("kind", {"type": "string"})
        meta = s.get("properties", {}).get("metadata", {})
        props["metadata"] = {
            "allOf": [_OBJECT_META, _to_json_schema(meta, source, structural=False)]
        }
        if not root:
            out["required"] = sorted({*out.get("required", []), "apiVersion", "kind"})
    if props:
        out["properties"] = props
    extra = s.get("additionalProperties")
    if isinstance(extra, dict):
        out["additionalProperties"] = _to_json_schema(extra, source, structural=structural)
    elif isinstance(extra, bool):
        out["additionalProperties"] = extra
    elif (
        structural
        and s.get("type") == "object"
        and not s.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False


def _only_types(branches: list[dict[str, Any]]) -> bool:
    # controller-gen spells int-or-string as anyOf [integer, string] next to the extension,
    # which the `type` above already says; kept, it would report every such error twice.
    return all(set(branch) == {"type"} for branch in branches)


def _python_pattern(pattern: str, source: str) -> str:
    """A Go (RE2) pattern as a Python one. Go accepts inline flags anywhere (`^(?i)(a|b)$`),
    Python only at the start; any other difference is an error, never a silently dropped check."""
    moved = re.sub(r"^\^\(\?([a-z]+)\)", r"(?\1)^", pattern)
    try:
        re.compile(moved)
    except re.error as exc:
        raise ValueError(f"{source}: pattern {pattern!r} is not a Python regex: {exc}") from exc
    return moved


def _apply_defaults(value: Any, s: dict[str, Any]) -> None:
    """Structural defaulting as the API server does it before validating: top down, defaults
    themselves defaulted. Without it, fields a CRD marks both required and defaulted fail."""
    if isinstance(value, dict):
        props = s.get("properties", {})
        for key, sub in props.items():
            if key not in value and "default" in sub:
                value[key] = copy.deepcopy(sub["default"])
        extra = s.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                _apply_defaults(item, sub)
    elif isinstance(value, list) and isinstance(s.get("items"), dict):
        for item in value:
            _apply_defaults(item, s["items"])


def _nodes(
    value: Any, s: dict[str, Any], path: str = ""
) -> Iterator[tuple[Any, dict[str, Any], str]]:
    """Every value of the object with the schema node that governs it, top down."""
    yield value, s, path
    if isinstance(value, list) and isinstance(s.get("items"), dict):
        for i, item in enumerate(value):
            yield from _nodes(item, s["items"], f"{path}[{i}]")
    elif isinstance(value, dict):
        props, extra = s.get("properties", {}), s.get("additionalProperties")
        for key, item in value.items():
            sub = props.get(key, extra if isinstance(extra, dict) else None)
            if sub is not None:
                yield from _nodes(item, sub, _join(path, key))


def _list_type_errors(value: Any, s: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """x-kubernetes-list-type set/map: the API server rejects duplicate items or keys."""
    for node, schema, path in _nodes(value, s):
        list_type = schema.get("x-kubernetes-list-type")
        if not isinstance(node, list) or list_type not in ("set", "map"):
            continue
        keys = schema.get("x-kubernetes-list-map-keys", [])
        seen: dict[str, int] = {}
        for i, item in enumerate(node):
            if list_type == "set":
                ident = json.dumps(item, sort_keys=True)
            elif isinstance(item, dict):
                ident = json.dumps([item.get(k) for k in keys])
            else:
                continue
            if ident in seen:
                what = "value" if list_type == "set" else f"key ({', '.join(keys)})"
                yield (
                    f"{path}[{i}]",
                    f"duplicate {what} of item [{seen[ident]}] in a {list_type} list",
                )
            seen.setdefault(ident, i)


# --- CEL (x-kubernetes-validations) --------------------------------------------------------------


def _cel_find(text: celtypes.StringType, pattern: celtypes.StringType) -> celtypes.StringType:
    """Kubernetes' regex library: the first match of `pattern` in `text`, or ""."""
    match = re.search(str(pattern), str(text))
    return celtypes.StringType(match.group(0) if match else "")


def _cel_split(text: celtypes.StringType, separator: celtypes.StringType) -> celtypes.ListType:
    """Kubernetes' strings library (CEL string extensions): `text.split(separator)`."""
    return celtypes.ListType([celtypes.StringType(part) for part in str(text).split(separator)])


#: The Kubernetes CEL library functions the vendored CRDs' rules call beyond standard CEL. A rule
#: that calls another one fails to evaluate and is reported: never skipped without a word.
_CEL_FUNCTIONS: dict[str, Any] = {"find": _cel_find, "split": _cel_split}
_TRANSITION = re.compile(r"\boldSelf\b")


@functools.cache
def _cel_program(rule: str) -> Any:
    environment = celpy.Environment()
    return environment.program(environment.compile(rule), functions=_CEL_FUNCTIONS)


def _cel_errors(value: Any, s: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Evaluate every x-kubernetes-validations rule at the values it governs, as on create.
    Transition rules (they compare with `oldSelf`) run only on update, so not here."""
    for node, schema, path in _nodes(value, s):
        for rule in schema.get("x-kubernetes-validations", []):
            if _TRANSITION.search(rule["rule"]):
                continue
            try:
                result = _cel_program(rule["rule"]).evaluate({"self": json_to_cel(node)})
            except Exception as exc:  # noqa: BLE001 - celpy raises a variety of types
                result = exc
            if isinstance(result, Exception):
                reason = str(result.args[0] if result.args else result).split(" (in activation")[0]
                yield path, f"CEL rule could not be evaluated ({reason}): {rule['rule']}"
            elif not bool(result):
                yield path, rule.get("message") or f"failed CEL rule: {rule['rule']}"


# --- reporting -----------------------------------------------------------------------------------


def _join(path: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{path}[{key}]"
    if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_-]*", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{json.dumps(key)}]"


def _path(parts: Iterable[str | int]) -> str:
    path = ""
    for part in parts:
        path = _join(path, part)
    return path


def _schema_errors(validator: Any, instance: dict[str, Any]) -> Iterator[tuple[str, str]]:
    for error in validator.iter_errors(instance):
        path = _path(error.absolute_path)
        if error.validator == "additionalProperties" and isinstance(error.instance, dict):
            declared = error.schema.get("properties", {})
            for key in error.instance:
                if key not in declared:
                    # Pruned without a word by the API server: a setting that silently does nothing.
                    yield _join(path, key), "unknown field (not in the schema)"
        elif error.validator == "required":
            field = re.match(r"'(.*)' is a required property", error.message)
            yield (_join(path, field.group(1)) if field else path), "required field missing"
        elif _is_quantity_error(error):
            yield path, f"{error.instance!r} is not a Kubernetes quantity (e.g. 500m, 2, 16Gi)"
        else:
            message = error.message
            yield path, message if len(message) <= 300 else message[:300] + "..."


def _is_quantity_error(error: Any) -> bool:
    # The regex itself is no help to a reader; both CRD (pattern) and built-in (anyOf) forms.
    if error.validator == "pattern":
        return bool(error.validator_value == QUANTITY)
    return error.validator == "anyOf" and any(
        c.validator == "pattern" and c.validator_value == QUANTITY for c in error.context or []
    )


def _name(obj: dict[str, Any]) -> str:
    metadata = obj.get("metadata")
    return str(metadata.get("name", "?")) if isinstance(metadata, dict) else "?"


def _check_metadata(obj: dict[str, Any], kind: str) -> Iterator[tuple[str, str]]:
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        yield "metadata", "required field missing"
        return
    name = metadata.get("name")
    if not isinstance(name, str) or not name:
        yield "metadata.name", "required: every object of the program has an explicit name"
    else:
        pattern, limit, what = _NAME_RULES.get(kind, (_DNS_SUBDOMAIN, 253, "a DNS-1123 subdomain"))
        if len(name) > limit or not pattern.match(name):
            yield "metadata.name", f"{name!r} is not {what} (lower case, digits, '-', ≤ {limit})"
    labels = metadata.get("labels") or {}
    if isinstance(labels, dict):
        for key, value in labels.items():
            if not _qualified_name(str(key)):
                yield _join("metadata.labels", str(key)), "invalid label key"
            if not isinstance(value, str) or (
                value and (len(value) > 63 or not _LABEL_NAME.match(value))
            ):
                yield _join("metadata.labels", str(key)), f"invalid label value {value!r}"


def _qualified_name(key: str) -> bool:
    prefix, _, name = key.rpartition("/")
    if prefix and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)):
        return False
    return 0 < len(name) <= 63 and bool(_LABEL_NAME.match(name))


# --- StorageClass parameters ---------------------------------------------------------------------


def _storageclass_errors(obj: dict[str, Any], rules: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """Parameters of the EFS / FSx CSI drivers (rule format: schemas/storageclass-parameters.yaml).
    The drivers ignore keys they do not know, so a misspelt key is a setting silently lost."""
    rule = rules.get(str(obj.get("provisioner")))
    params = obj.get("parameters") or {}
    if rule is None or not params:  # not an AWS CSI driver, or static provisioning
        return
    one_of: list[list[str]] = rule.get("oneOf", [])
    known = {*rule.get("required", []), *rule.get("optional", [])}
    known.update(key for group in one_of for key in group)
    for key, value in params.items():
        path = _join("parameters", key)
        if key.startswith("csi.storage.k8s.io/"):
            continue  # read by the external-provisioner sidecar, not the driver
        if key not in known:
            yield path, f"unknown parameter for {obj['provisioner']} (the driver ignores it)"
        elif not isinstance(value, str):
            continue  # the built-in schema reports it: parameters is a map of strings
        elif value not in rule.get("enum", {}).get(key, [value]):
            yield path, f"{value!r} is not one of {rule['enum'][key]}"
        elif not re.search(rule.get("pattern", {}).get(key, ""), value):
            yield path, f"{value!r} does not match {rule['pattern'][key]!r}"
    for key in rule.get("required", []):
        if key not in params:
            yield _join("parameters", key), "required parameter missing"
    for group in one_of:
        if sum(key in params for key in group) != 1:
            yield "parameters", f"exactly one of {group} is required"
    for key, needs in rule.get("dependsOn", {}).items():
        for need in needs:
            if key in params and need not in params:
                yield _join("parameters", need), f"required when {key} is set"
    for case in rule.get("requiredIf", []):
        if all(params.get(k) == v for k, v in case["when"].items()):
            for need in case["require"]:
                if need not in params:
                    yield _join("parameters", need), f"required when {case['when']}"


# --- CLI -----------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m synth.validate",
        description="Validate manifests against the vendored upstream schemas (schemas/).",
    )
    parser.add_argument("files", nargs="+", type=Path, help="multi-document YAML manifests")
    args = parser.parse_args(argv)
    validator = default_validator()
    failed = 0
    objects = load_manifests(args.files)
    for obj in objects:
        problems = validator.validate(obj)
        failed += bool(problems)
        for problem in problems:
            print(problem)
    print(f"validated {len(objects)} objects: {len(objects) - failed} ok, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
