"""FSx for Lustre checkpoint directories the trainer (UID 10001, no capabilities) can write: a
platform Job creates `/teams/<team>` for every team, owned by 10001, in a PSS-baseline platform
namespace; each team's checkpoint PV mounts its directory and waits for the Job; EFS stacks
need none of it (access points carry their own POSIX identity)."""

from __future__ import annotations

import copy
import json
import math
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.analysis import pod_security
from components.analysis.readiness import READY_MARGIN_S, system_pull_rate
from components.config.load import namespace_values, parse
from components.platform.storage import fsx_team_dirs as sb
from synth.harness import SynthResult
from tests.conftest import stack_values

JOB = "kubernetes:batch/v1:Job"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
NAMESPACE = "kubernetes:core/v1:Namespace"
#: PSS baseline's allowed added capabilities (kubernetes/pod-security-admission
#: policy/check_capabilities_baseline.go, `capabilities_allowed_1_0`).
BASELINE_CAPABILITIES = {
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
}
IMAGE = "docker.io/library/busybox:1.37.0@sha256:" + "a" * 64


def test_the_job_is_root_with_chown_only_and_nothing_else() -> None:
    job = sb.team_dirs_job(["nlp", "cv"], IMAGE, 600)
    assert job["metadata"]["namespace"] == sb.FSX_ADMIN_NAMESPACE
    assert job["metadata"]["name"] == "fsx-team-dirs"
    # Awaited (no skipAwait; the bound is the resource's customTimeouts, checked below under
    # mocks), past the Job's own deadline; it never retries forever.
    assert "pulumi.com/skipAwait" not in job["metadata"]["annotations"]
    assert job["spec"]["activeDeadlineSeconds"] == 600
    assert job["spec"]["backoffLimit"] == 3
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    context = container["securityContext"]
    assert pod["securityContext"]["runAsUser"] == 0
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert context["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN"]}
    assert set(context["capabilities"]["add"]) <= BASELINE_CAPABILITIES
    assert context["privileged"] is False and context["allowPrivilegeEscalation"] is False
    assert context["readOnlyRootFilesystem"] is True
    assert pod["automountServiceAccountToken"] is False
    assert "hostPath" not in str(pod["volumes"]) and not pod.get("hostNetwork")
    assert pod["volumes"] == [{"name": "fsx", "persistentVolumeClaim": {"claimName": "fsx-root"}}]
    assert container["image"] == IMAGE
    # Every checkov skip it carries is one of the documented ones, with a reason.
    skips = {k: v for k, v in job["metadata"]["annotations"].items() if "checkov" in k}
    assert {v.split("=")[0] for v in skips.values()} == set(sb.TEAM_DIR_CHECKOV_SKIPS)


def test_the_script_chmods_before_chown_and_never_recurses() -> None:
    script = sb.team_dirs_script(["nlp", "cv"])
    for team in ("cv", "nlp"):
        at = script.index(f'mkdir -m 0770 "/fsx/teams/{team}"')
        assert at < script.index(f'chown 10001:10001 "/fsx/teams/{team}"')
    assert f"chown {pod_security.RUN_AS_USER}:{pod_security.RUN_AS_USER} " in script
    assert "-R" not in script


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("sh"), reason="needs root and sh")
def test_the_script_runs_and_is_idempotent(tmp_path: Path) -> None:
    root = tmp_path / "fsx"
    root.mkdir()
    script = sb.team_dirs_script(["nlp", "cv"]).replace("/fsx", str(root))
    for _ in range(2):  # a re-run (new image, refresh) must succeed and change nothing
        out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True)
        team = root / "teams" / "nlp"
        st = team.stat()
        assert (st.st_uid, st.st_gid) == (pod_security.RUN_AS_USER, pod_security.RUN_AS_USER)
        assert oct(st.st_mode & 0o7777) == "0o770"
        assert out.stdout.strip().endswith("/teams/nlp 10001:10001 770")
        assert (root / "teams" / "cv").stat().st_uid == pod_security.RUN_AS_USER
        # A root-owned checkpoint file inside stays as it is: no recursive chown.
        (team / "keep").write_text("x")
        os.chown(team / "keep", 0, 0)
    assert (team / "keep").stat().st_uid == 0


def test_admin_namespace_is_baseline_and_denies_all_traffic() -> None:
    lustre = sb.LustreVolume("fs-1", "fs-1.fsx.example", "abcd1234", "/datasets")
    objects = {o["kind"]: o for o in sb.fsx_admin_objects(lustre, "1200Gi")}
    labels = objects["Namespace"]["metadata"]["labels"]
    assert labels["pod-security.kubernetes.io/enforce"] == "baseline"
    assert labels["pod-security.kubernetes.io/enforce-version"] == pod_security.PSS_VERSION
    # No team label: the team admission policies and team rules do not select it.
    assert not any(key.startswith("gpu-platform.io/team") for key in labels)
    policy = objects["NetworkPolicy"]["spec"]
    assert policy == {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    pv = objects["PersistentVolume"]["spec"]
    assert pv["csi"]["volumeAttributes"]["mountname"] == "abcd1234"
    assert pv["claimRef"] == {"namespace": sb.FSX_ADMIN_NAMESPACE, "name": sb.FSX_ROOT_CLAIM}
    assert pv["persistentVolumeReclaimPolicy"] == "Retain"


def test_prod_creates_every_team_dir_before_the_team_volumes(prod: SynthResult) -> None:
    (job,) = [
        r
        for r in prod.of_type(JOB)
        if r.inputs["metadata"].get("namespace") == sb.FSX_ADMIN_NAMESPACE
    ]
    assert job.inputs["metadata"]["name"] == sb.TEAM_DIRS_JOB
    teams = sorted(t["name"] for t in stack_values("prod")["gpu-platform:teams"])
    script = job.inputs["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert script == sb.team_dirs_script(teams)
    (root_claim,) = [
        r for r in prod.of_type(PVC) if r.inputs["metadata"]["name"] == sb.FSX_ROOT_CLAIM
    ]
    (namespace,) = [
        r for r in prod.of_type(NAMESPACE) if r.inputs["metadata"]["name"] == sb.FSX_ADMIN_NAMESPACE
    ]
    assert {root_claim.urn, namespace.urn} <= set(job.dependencies)
    # After a Team component (its LocalQueue waits for Kueue, whose webhook sees batch Jobs).
    # (The engine expands a component dependency into the component's resources.)
    assert any("gpu-platform:teams:Team$" in d and "LocalQueue" in d for d in job.dependencies)
    assert job.delete_before_replace and job.replace_on_changes == ("spec.template",)
    # Sized from the trainer's pull onto a system node (several GiB), every attempt: not the
    # few minutes a tiny image needs.
    deadline = job.inputs["spec"]["activeDeadlineSeconds"]
    image_gib = parse(namespace_values(_raw(stack_values("prod")))).training.image_size_gib
    assert deadline == sb.team_dirs_deadline_s(image_gib, system_pull_rate().mibps)
    pull_s = image_gib * 1024 / system_pull_rate().mibps
    attempts = job.inputs["spec"]["backoffLimit"] + 1
    assert deadline >= attempts * (pull_s + READY_MARGIN_S) > 300
    timeouts = dict(job.custom_timeouts)
    assert timeouts["create"] == timeouts["update"] == sb.team_dirs_timeout(deadline)
    assert int(timeouts["create"][:-1]) * 60 > deadline
    # The trainer image: the digest the deploy pushed (and signed), not a public image pinned
    # from a digest nobody here resolved.
    image = job.inputs["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image == prod.outputs["trainerImage"]
    assert image.startswith("123456789012.dkr.ecr.us-east-1.amazonaws.com/gpu-prod/trainer@sha256:")
    for team in teams:
        (pv,) = [
            r
            for r in prod.of_type(PV)
            if r.inputs["metadata"]["name"].endswith(f"{team}-checkpoints")
        ]
        assert pv.inputs["spec"]["csi"]["volumeAttributes"]["mountname"].endswith(f"/teams/{team}")
        assert job.urn in pv.dependencies


def test_efs_stacks_have_no_team_dir_job(dev: SynthResult) -> None:
    assert dev.of_type(JOB)  # the training and validation Jobs
    assert not [
        r
        for r in dev.of_type(JOB)
        if r.inputs["metadata"].get("namespace") == sb.FSX_ADMIN_NAMESPACE
    ]
    assert not [
        r for r in dev.of_type(NAMESPACE) if r.inputs["metadata"]["name"] == sb.FSX_ADMIN_NAMESPACE
    ]


def test_team_dirs_image_must_be_pinned_by_digest(
    expect_config_error: Callable[[dict[str, Any], str, str], None],
) -> None:
    config = copy.deepcopy(stack_values("prod"))
    config["gpu-platform:storage"] = {
        **config["gpu-platform:storage"],
        "fsxTeamDirsImage": "busybox:1.37.0",
    }
    expect_config_error(config, "gpu-platform:storage.fsxTeamDirsImage", "@sha256")


def test_team_dirs_job_runs_an_image_given_by_digest_instead() -> None:
    config = copy.deepcopy(stack_values("prod"))
    # An ECR copy pinned by digest, given explicitly: the Job runs it instead of the trainer.
    ecr_copy = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gpu-prod/tools@sha256:" + "d" * 64
    config["gpu-platform:storage"] = {
        **config["gpu-platform:storage"],
        "fsxTeamDirsImage": ecr_copy,
    }
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    assert parse(namespace_values(raw)).fsx_team_dirs_image == ecr_copy
    # Without one (and without training.defaultImage): the trainer the deploy builds.
    assert parse(namespace_values(_raw(stack_values("prod")))).fsx_team_dirs_image is None


def _raw(config: dict[str, Any]) -> dict[str, str]:
    return {k: v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}


def test_a_larger_trainer_gets_a_longer_deadline() -> None:
    small = sb.team_dirs_deadline_s(1, system_pull_rate().mibps)
    large = sb.team_dirs_deadline_s(30, system_pull_rate().mibps)
    # Every attempt may pull on another system node: the difference is 4 pulls of 29 GiB.
    attempts = sb.TEAM_DIR_JOB_BACKOFF_LIMIT + 1
    rate = system_pull_rate().mibps
    assert large - small == attempts * (math.ceil(30 * 1024 / rate) - math.ceil(1024 / rate))
    assert system_pull_rate().mibps <= 125  # the system group's gp3 baseline bounds the pull
