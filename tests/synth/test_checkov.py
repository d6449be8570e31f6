"""checkov's Kubernetes framework on every stack's manifests (dev, prod, the team job stacks;
custom-resource pod templates wrapped by synth.checkov_input): 0 failed checks, and every skip
carries a reason.

checkov 3.3.30 pins packaging/boto3/networkx versions that conflict with the platform's own pins,
so it lives in its own virtualenv (requirements-checkov.txt; `.ci/run` builds it and points
CHECKOV at it). Outside CI the run is skipped when no checkov is found; in CI it must run.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.platform.storage import fsx_team_dirs
from synth import checkov_input, output
from synth.harness import SynthResult


def _checkov() -> str:
    path = os.environ.get("CHECKOV") or shutil.which("checkov")
    if not path:
        if os.environ.get("CI") == "true":
            pytest.fail("checkov is required in CI (pip install -r requirements-checkov.txt)")
        pytest.skip("checkov not installed (its own venv: requirements-checkov.txt)")
    return path


def _input(result: SynthResult, tmp_path: Path) -> Path:
    manifests = output.manifests(result)
    if result.platform is not None:
        # A job stack: its pods live under the NetworkPolicies the platform put in the namespace.
        manifests += checkov_input.namespace_policies(manifests, output.manifests(result.platform))
    docs = checkov_input.checkov_documents(manifests)
    path = tmp_path / "checkov-input.yaml"
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
    return path


def _run(checkov: str, manifest: Path) -> dict[str, Any]:
    proc = subprocess.run(
        [
            checkov,
            "-f",
            str(manifest),
            "--framework",
            "kubernetes",
            "--skip-download",
            "-o",
            "json",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    report = json.loads(proc.stdout)
    return report[0] if isinstance(report, list) else report


@pytest.mark.parametrize(
    ("stack", "at_least"),
    [
        ("dev", 100),
        ("prod", 100),
        # The team job stacks (jobs/): their jobs, by the digest the platform pushed (issue 30:
        # a tag-only image failed CKV_K8S_43 twice in research-dev).
        ("research_dev", 20),
        ("pretrain_prod", 20),
        # One TrainJob: its pods are the platform's ClusterTrainingRuntime's (scanned with
        # prod); checkov finds no pod template of the stack's own to check.
        ("research_prod", -1),
    ],
)
def test_checkov_reports_no_failure(
    stack: str, at_least: int, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    checkov = _checkov()
    result: SynthResult = request.getfixturevalue(stack)
    report = _run(checkov, _input(result, tmp_path))
    # With nothing to scan checkov prints its summary alone.
    summary = report.get("summary", report)
    results = report.get("results", {"failed_checks": [], "skipped_checks": []})
    # It looked at something: the training (and validation) Jobs at least.
    assert summary["passed"] > at_least, summary
    failed = [f"{c['check_id']} {c['resource']}" for c in results["failed_checks"]]
    assert not failed, failed
    for skipped in results["skipped_checks"]:
        allowed = {"CKV_K8S_10", "CKV_K8S_11", "CKV_K8S_12", "CKV_K8S_13"}
        if skipped["resource"].startswith(f"Job.{fsx_team_dirs.FSX_ADMIN_NAMESPACE}."):
            # The one root pod: the FSx team-directory Job (docs/security.md exceptions).
            allowed = set(fsx_team_dirs.TEAM_DIR_CHECKOV_SKIPS)
        assert skipped["check_id"] in allowed, skipped
        assert len(skipped["check_result"]["suppress_comment"]) > 20, skipped


def test_checkov_fails_a_root_pod(tmp_path: Path) -> None:
    # The run above can fail: a pod with no securityContext fails the restricted checks.
    checkov = _checkov()
    manifest = tmp_path / "bad.yaml"
    manifest.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "root", "namespace": "team-x"},
                "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "x:1"}]}}},
            }
        )
    )
    failed = {c["check_id"] for c in _run(checkov, manifest)["results"]["failed_checks"]}
    assert {"CKV_K8S_20", "CKV_K8S_23", "CKV_K8S_38", "CKV_K8S_43"} <= failed


def test_custom_resource_pod_templates_are_wrapped(dev: SynthResult) -> None:
    docs = checkov_input.checkov_documents(output.manifests(dev))
    kinds = {(d["apiVersion"], d["kind"]) for d in docs}
    names = {d["metadata"]["name"] for d in docs if d["kind"] == "Job"}
    # The Volcano Job is replaced by its wrapped task; runtimes are wrapped; patches are not.
    assert ("batch.volcano.sh/v1alpha1", "Job") not in kinds
    assert "job-ds-zero2-worker" in names
    assert any(n.startswith("clustertrainingruntime-") for n in names)
    assert not any("runtimepatches" in n.lower() for n in names)
    runtime = next(d for d in docs if d["metadata"]["name"].startswith("clustertraining"))
    assert runtime["metadata"]["annotations"]["checkov.io/skip1"].startswith("CKV_K8S_10=")
