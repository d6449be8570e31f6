"""The restricted pod: every pod template both stacks render passes the PSS `restricted` checks
(policies/rules/security.py, after pod-security-admission v0.33.13), team namespaces enforce it,
and a rendered pod with one field broken is refused."""

from __future__ import annotations

import copy

import pytest

from components.analysis import pod_security
from components.platform.storage import fsx_team_dirs
from policies.rules.common import Resource
from policies.rules.kubernetes import pod_templates
from policies.rules.security import (
    CLUSTER_TRAINING_RUNTIME,
    restricted_problems,
    runtime_templates,
)
from synth.harness import SynthResult

WORKLOAD_KINDS = ("kubernetes:batch/v1:Job", "kubernetes:batch.volcano.sh/v1alpha1:Job")


def _templates(result: SynthResult) -> list[tuple[str, object]]:
    out = []
    for kind in WORKLOAD_KINDS:
        for reg in result.of_type(kind):
            res = Resource(reg.type, reg.name, reg.urn, reg.inputs)
            out += [(reg.name, t) for t in pod_templates(res)]
    # TrainJob pods: the runtime's template (its patches only add placement and volumes).
    for reg in result.of_type(CLUSTER_TRAINING_RUNTIME):
        res = Resource(reg.type, reg.name, reg.urn, reg.inputs)
        out += [(reg.name, t) for t in runtime_templates(res)]
    return out


@pytest.mark.parametrize("stack", ["dev", "prod"])
def test_every_rendered_pod_is_restricted(stack: str, request: pytest.FixtureRequest) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    templates = _templates(result)
    assert len(templates) >= 3
    for name, template in templates:
        if template.namespace == fsx_team_dirs.FSX_ADMIN_NAMESPACE:  # type: ignore[attr-defined]
            # The one written-down exception (docs/security.md): the FSx team-directory Jobs,
            # root with CAP_CHOWN in a PSS-baseline platform namespace
            # (tests/platform/test_fsx_team_dirs.py).
            assert "fsx-team-dirs" in name
            continue
        assert list(restricted_problems(template, complete=True)) == [], name  # type: ignore[arg-type]


def test_prod_team_namespaces_enforce_restricted(prod: SynthResult) -> None:
    namespaces = [
        r.inputs["metadata"]
        for r in prod.of_type("kubernetes:core/v1:Namespace")
        if "gpu-platform.io/team" in r.inputs["metadata"].get("labels", {})
    ]
    assert len(namespaces) == 2
    for meta in namespaces:
        for key, value in pod_security.RESTRICTED_NAMESPACE_LABELS.items():
            assert meta["labels"][key] == value, meta["name"]


def test_a_rendered_pod_made_non_compliant_is_refused(prod_jobs: SynthResult) -> None:
    jobs = prod_jobs.of_type("kubernetes:batch/v1:Job")
    (job,) = [r for r in jobs if r.name.endswith("pretrain-7b-job")]
    inputs = copy.deepcopy(job.inputs)
    spec = inputs["spec"]["template"]["spec"]
    spec["containers"][0]["securityContext"]["runAsUser"] = 0
    spec["containers"][0]["securityContext"].pop("allowPrivilegeEscalation")
    spec["volumes"].append({"name": "host-shm", "hostPath": {"path": "/dev/shm"}})
    (template,) = pod_templates(Resource(job.type, job.name, job.urn, inputs))
    problems = list(restricted_problems(template, complete=True))
    assert any("runAsUser is 0" in p for p in problems)
    assert any("allowPrivilegeEscalation" in p for p in problems)
    assert any("hostPath" in p for p in problems)


def test_checkov_skip_reasons_cannot_break_checkov() -> None:
    assert pod_security.checkov_skips({"CKV_K8S_11": "a reason"}) == {
        "checkov.io/skip1": "CKV_K8S_11=a reason"
    }
    # checkov splits the value on '=' into exactly two parts (its parser raises otherwise).
    with pytest.raises(ValueError, match="no '='"):
        pod_security.checkov_skips({"CKV_K8S_11": "limit=none"})
    with pytest.raises(ValueError):
        pod_security.checkov_skips({"CKV_K8S_11": " "})


# --- the restricted pod's fields, one by one (the mutation run reaches them without a synth) ----


def test_the_pod_and_container_security_contexts_are_pss_restricted_and_checkov_clean() -> None:
    assert pod_security.pod_security_context() == {
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "runAsGroup": 10001,
        "fsGroup": 10001,
        "fsGroupChangePolicy": "OnRootMismatch",
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod_security.pod_security_context(20000)["fsGroup"] == 20000
    container = {
        "allowPrivilegeEscalation": False,
        "privileged": False,
        "readOnlyRootFilesystem": True,
        "runAsNonRoot": True,
        "runAsUser": 10001,
        "capabilities": {"drop": ["ALL"]},
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    assert pod_security.container_security_context() == container
    assert pod_security.container_security_context(20000)["runAsUser"] == 20000
    assert pod_security.restricted_container_fields() == {
        "imagePullPolicy": "Always",
        "securityContext": container,
    }
    assert pod_security.restricted_pod_fields() == {
        "automountServiceAccountToken": False,
        "securityContext": pod_security.pod_security_context(),
    }


def test_the_scratch_volume_is_a_sized_empty_dir_at_tmp() -> None:
    assert pod_security.scratch_volume() == {"name": "scratch", "emptyDir": {"sizeLimit": "20Gi"}}
    assert pod_security.scratch_volume("5Gi")["emptyDir"] == {"sizeLimit": "5Gi"}
    assert pod_security.scratch_mount() == {"name": "scratch", "mountPath": "/tmp"}


def test_checkov_skips_are_numbered_from_one_in_check_order() -> None:
    assert pod_security.checkov_skips({"CKV_B": "b reason", "CKV_A": "a reason"}) == {
        "checkov.io/skip1": "CKV_A=a reason",
        "checkov.io/skip2": "CKV_B=b reason",
    }
    for bad in ("", "  ", "a=b"):
        with pytest.raises(ValueError, match="CKV_X must be non-empty and have no '='"):
            pod_security.checkov_skips({"CKV_X": bad})
    assert pod_security.gpu_pod_skips() == {
        "checkov.io/skip1": f"CKV_K8S_11={pod_security.NO_CPU_LIMIT_REASON}"
    }
    assert pod_security.runtime_template_skips() == {
        f"checkov.io/skip{i}": f"{check}={pod_security.RUNTIME_RESOURCES_REASON}"
        for i, check in enumerate(("CKV_K8S_10", "CKV_K8S_11", "CKV_K8S_12", "CKV_K8S_13"), 1)
    }
