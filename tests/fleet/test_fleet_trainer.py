"""The fleet's one trainer image (docs/fleet.md "One image in every region",
components/analysis/fleet_trainer.py): built and signed once by the trainer home (prod-use1),
replicated to us-west-2, named by the same reference in every runtime and fleet job, admitted by
every worker, pulled in-region; and every way a fleet breaks that refused, naming the key."""

from __future__ import annotations

import copy
import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import celpy
import pulumi
import pytest
import yaml
from celpy import celtypes

from components.analysis.fleet import FleetFacts
from components.analysis.fleet_trainer import FleetTrainer, home_trainer, parse_trainer
from components.config import ConfigError, parse
from components.contract.fleet_worker import WorkerContract
from components.contract.job_platform import PlatformContract
from components.contract.schema import parse_contract
from components.platform.registry.admission import replica_rewrite
from synth import __main__ as synth_cli
from synth import output
from synth.harness import SynthResult, run_program
from synth.jobs import JOBS_ROOT, run_job_stack
from synth.mocks import mock_kms_key
from tests.conftest import stack_values
from tests.fleet.conftest import Exports
from tests.jobs.conftest import job_stack_values
from tests.platform import cel_eval
from tests.platform.cosign_registry import Registry, new_key, public_pem, signature_tag
from tests.platform.ivpol_eval import TrustRoot, admit

Read = Callable[..., FleetFacts]
CTR = "kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime"
IVP = "kubernetes:policies.kyverno.io/v1beta1:ImageValidatingPolicy"
MPOL = "kubernetes:policies.kyverno.io/v1beta1:MutatingPolicy"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
COMMAND = "command:local:Command"
#: A team image in the home's registry, which no other worker admits.
TEAM_IMAGE = (
    "123456789012.dkr.ecr.us-east-1.amazonaws.com/gpu-prod-use1/teams/pretrain@sha256:" + "c" * 64
)


def _runtime_images(result: SynthResult) -> set[str]:
    return {
        job["template"]["spec"]["template"]["spec"]["containers"][0]["image"]
        for ctr in result.of_type(CTR)
        for job in ctr.inputs["spec"]["template"]["spec"]["replicatedJobs"]
    }


def _trainer(prod_use1: SynthResult) -> FleetTrainer:
    trainer = parse_trainer(
        prod_use1.outputs["trainerImage"],
        prod_use1.outputs["fleetWorker"]["trainer"]["signingPublicKey"],
    )
    assert trainer is not None
    return trainer


def _spec(result: SynthResult, kind: str) -> dict[str, Any]:
    (reg,) = result.of_type(kind)
    return {"metadata": reg.inputs["metadata"], "spec": reg.inputs["spec"]}


# --- one reference everywhere --------------------------------------------------------------------


def test_every_runtime_and_fleet_job_names_the_homes_trainer(
    prod_use1: SynthResult,
    prod_usw2: SynthResult,
    fleet_prod: SynthResult,
    pretrain_fleet: SynthResult,
) -> None:
    trainer = prod_use1.outputs["trainerImage"]
    assert re.fullmatch(
        r"123456789012\.dkr\.ecr\.us-east-1\.amazonaws\.com/gpu-prod-use1/trainer@sha256:[0-9a-f]{64}",
        trainer,
    )
    # The manager's runtimes and every worker's: one string, byte for byte (Kueue compares).
    for result in (prod_use1, prod_usw2, fleet_prod):
        assert _runtime_images(result) == {trainer}, result.stack
    assert prod_usw2.outputs["trainerImage"] == trainer
    # The worker in us-west-2 builds and signs nothing: it runs the home's trainer.
    assert not prod_usw2.of_type("docker-build:index:Image")
    assert not [c for c in prod_usw2.of_type(COMMAND) if "SIGNING_KEY" in c.inputs["environment"]]
    jobs = pretrain_fleet.of_type("kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob")
    assert {j.inputs["spec"]["trainer"]["image"] for j in jobs} == {trainer}


def test_the_home_replicates_its_trainer_before_it_pushes(prod_use1: SynthResult) -> None:
    (replication,) = prod_use1.of_type("aws:ecr/replicationConfiguration:ReplicationConfiguration")
    (rule,) = replication.inputs["replicationConfiguration"]["rules"]
    assert rule["destinations"] == [{"region": "us-west-2", "registryId": "123456789012"}]
    assert rule["repositoryFilters"] == [
        {"filter": "gpu-prod-use1/trainer", "filterType": "PREFIX_MATCH"}
    ]
    (template,) = [
        t
        for t in prod_use1.of_type("aws:ecr/repositoryCreationTemplate:RepositoryCreationTemplate")
        if t.inputs.get("appliedFors") == ["REPLICATION"]
    ]
    assert template.inputs["region"] == "us-west-2"
    assert template.inputs["prefix"] == "gpu-prod-use1"
    assert template.inputs["imageTagMutability"] == "IMMUTABLE_WITH_EXCLUSION"
    assert template.urn in replication.dependencies
    # The first push is replicated only if replication exists before it.
    (image,) = prod_use1.of_type("docker-build:index:Image")
    assert replication.urn in image.dependencies


def test_workers_that_build_nothing_replicate_nothing(
    prod_usw2: SynthResult, prod: SynthResult
) -> None:
    for result in (prod_usw2, prod):
        assert not result.of_type("aws:ecr/replicationConfiguration:ReplicationConfiguration")


# --- admission on the worker outside the home's region -------------------------------------------


def test_usw2_admits_the_trainer_by_reference_and_verifies_it_with_the_homes_key(
    prod_use1: SynthResult, prod_usw2: SynthResult
) -> None:
    trainer = _trainer(prod_use1)
    # The home publishes its platform key's public half, and usw2 trusts exactly that key.
    (sign,) = [c for c in prod_use1.of_type(COMMAND) if c.name.endswith("-sign")]
    key_arn = sign.inputs["environment"]["SIGNING_KEY"].removeprefix("awskms:///")
    assert trainer.public_key == public_pem(mock_kms_key(key_arn))
    policy = _spec(prod_usw2, IVP)
    attestors = {a["name"]: a for a in policy["spec"]["attestors"]}
    assert attestors["fleet"]["cosign"]["key"]["data"] == trainer.public_key
    assert (
        attestors["fleet"]["cosign"]["key"]["data"]
        != attestors["platform"]["cosign"]["key"]["data"]
    )
    # Pods only: Kyverno's autogen would check the Jobs the manager mirrors here.
    assert policy["spec"]["autogen"] == {"podControllers": {"controllers": []}}

    namespace = {
        "metadata": {"name": "team-pretrain", "labels": {"gpu-platform.io/team": "pretrain"}}
    }
    # What the home's deploy signs, and ECR replicates with it (the `.sig` tag's layers are
    # copied as they are: cosign checks the payload's digest only, not its repository —
    # sigstore/cosign@v3.1.2 pkg/cosign/verifiers.go SimpleClaimVerifier L33-56).
    for key, status in ((mock_kms_key(key_arn), "pass"), (new_key(), "fail")):
        registry = _replicated(trainer, key)
        for image in (trainer.replica("us-west-2"), trainer.image):
            decision = admit(policy, _pod(image), namespace, registry, TrustRoot())
            assert decision.status == status, (image, decision)
            assert cel_eval.admit(_spec(prod_usw2, VAP), _pod(image))[0], image
    # Only the trainer's repository of the home's registry is admitted, nothing beside it.
    ok, _ = cel_eval.admit(_spec(prod_usw2, VAP), _pod(TEAM_IMAGE))
    assert not ok
    # The home itself keeps one attestor and mutates nothing.
    assert [a["name"] for a in _spec(prod_use1, IVP)["spec"]["attestors"]] == ["platform"]
    assert not prod_use1.of_type(MPOL)


def _replicated(trainer: FleetTrainer, key: Any) -> Registry:
    """The registries after the home pushed and signed the trainer with `key` and ECR
    replicated the repository to us-west-2: the manifest and the `.sig` layers in both."""
    registry = Registry()
    replica = trainer.replica_repository("us-west-2")
    for repository in (trainer.repository, replica):
        registry.push(repository, trainer.digest)
    registry.sign(trainer.repository, trainer.digest, key, None)
    registry.signatures[signature_tag(replica, trainer.digest)] = registry.signatures[
        signature_tag(trainer.repository, trainer.digest)
    ]
    return registry


def _pod(image: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "team-pretrain"},
        "spec": {"containers": [{"name": "node", "image": image}]},
    }


def _substring(text: Any, start: Any) -> celtypes.StringType:
    """CEL's strings extension `substring(start)` (Kubernetes and Kyverno load it)."""
    return celtypes.StringType(str(text)[int(start) :])


def _evaluate(expression: str, activation: dict[str, Any]) -> Any:
    env = celpy.Environment()
    program = env.program(env.compile(expression), functions={"substring": _substring})
    return program.evaluate(activation)


def test_usw2_pods_pull_the_replica_and_the_mirrored_job_keeps_the_homes_reference(
    prod_use1: SynthResult, prod_usw2: SynthResult
) -> None:
    trainer = _trainer(prod_use1)
    policy = _spec(prod_usw2, MPOL)["spec"]
    rules = policy["matchConstraints"]["resourceRules"]
    assert rules == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    ]
    # Autogen off: a mutated Job template would no longer match the manager's Workload.
    assert policy["autogen"] == {"podControllers": {"controllers": []}}
    (condition,) = policy["matchConditions"]
    for image, runs in ((trainer.image, True), (TEAM_IMAGE, False)):
        activation = {"object": celpy.json_to_cel(_pod(image))}
        assert bool(_evaluate(condition["expression"], activation)) is runs
    (mutation,) = policy["mutations"]
    rewrite = replica_rewrite(trainer, "us-west-2", "image")
    assert replica_rewrite(trainer, "us-west-2") in mutation["applyConfiguration"]["expression"]
    for image, expected in (
        (trainer.image, trainer.replica("us-west-2")),
        (TEAM_IMAGE, TEAM_IMAGE),
    ):
        out = _evaluate(rewrite, {"image": celtypes.StringType(image)})
        assert str(out) == expected


def test_a_missing_replica_stops_the_worker_naming_its_trainer_home(
    prod_use1: SynthResult,
) -> None:
    with pytest.raises(pulumi.RunError) as caught:
        run_program("prod-usw2", workers={"prod-use1": prod_use1}, published={})
    message = str(caught.value)
    assert "gpu-platform:fleet.trainerHome" in message
    assert "lacks the digest" in message and ".sig" in message


# --- the worker's config --------------------------------------------------------------------------


def _usw2_cfg(**fleet: Any) -> Any:
    values = {
        k.split(":", 1)[1]: v
        for k, v in stack_values("prod-usw2").items()
        if k.startswith("gpu-platform:")
    }
    values["fleet"] = {**values["fleet"], **fleet}
    return parse(values)


def _home(prod_use1: SynthResult) -> tuple[dict[str, Any], dict[str, Any]]:
    return (
        copy.deepcopy(prod_use1.outputs["fleetWorker"]),
        copy.deepcopy(prod_use1.outputs["jobPlatform"]),
    )


def _parsed(
    exports: dict[str, Any] | None, platform: dict[str, Any] | None
) -> tuple[WorkerContract | None, PlatformContract | None]:
    """The home's outputs as a worker reads them (platform/fleet/reading.py read_trainer_home)."""
    return parse_contract(WorkerContract, exports), parse_contract(PlatformContract, platform)


def test_home_trainer_reads_the_homes_trainer_and_key(prod_use1: SynthResult) -> None:
    trainer = home_trainer(_usw2_cfg(), "us-west-2", *_parsed(*_home(prod_use1)))
    assert trainer == _trainer(prod_use1)


@pytest.mark.parametrize(
    ("change", "allowed"),
    [
        (lambda f, p: (None, None), "a deployed worker of the fleet"),
        (lambda f, p: ({**f, "fleet": "other"}, p), "a worker of fleet 'prod'"),
        (
            lambda f, p: ({**f, "trainer": {**f["trainer"], "home": "x/gpu-platform/a"}}, p),
            "the fleet's trainer home itself",
        ),
        (
            lambda f, p: ({**f, "trainer": {**f["trainer"], "replicaRegions": []}}, p),
            "a home whose trainer repository is replicated to us-west-2",
        ),
        (
            lambda f, p: ({**f, "trainer": {**f["trainer"], "signingPublicKey": None}}, p),
            "a home whose admission trusts the platform key",
        ),
        (lambda f, p: (f, {**p, "trainerImage": None}), "publishes its trainer by digest"),
    ],
    ids=["not-deployed", "other-fleet", "not-a-home", "not-replicated", "no-key", "no-trainer"],
)
def test_a_trainer_home_this_worker_cannot_run_is_refused(
    prod_use1: SynthResult, change: Callable[..., Any], allowed: str
) -> None:
    exports, platform = change(*_home(prod_use1))
    with pytest.raises(ConfigError) as caught:
        home_trainer(_usw2_cfg(), "us-west-2", *_parsed(exports, platform))
    (line,) = caught.value.lines
    assert line.startswith(
        'gpu-platform:fleet.trainerHome: got "gpu-platform/gpu-platform/prod-use1"'
    )
    assert allowed in line


def test_a_trainer_home_of_another_version_is_refused_where_it_is_read(
    prod_use1: SynthResult,
) -> None:
    """prod-usw2 reads its home's outputs (platform/fleet/reading.py read_trainer_home): a home
    deployed from another revision is refused there, naming the key and both versions."""
    exports, platform = _home(prod_use1)
    stale = dataclasses.replace(
        prod_use1, outputs={**prod_use1.outputs, "fleetWorker": {**exports, "version": 2.0}}
    )
    with pytest.raises(ConfigError) as caught:
        run_program("prod-usw2", workers={"prod-use1": stale})
    assert caught.value.lines == [
        'gpu-platform:fleet.trainerHome: got "gpu-platform/gpu-platform/prod-use1"; '
        f"`fleetWorker` version {WorkerContract.current_version()} (it has 2): deploy the "
        "trainer home from this repository's revision first"
    ]
    assert platform["version"] == PlatformContract.current_version()


@pytest.mark.parametrize(
    ("fleet", "training", "path", "allowed"),
    [
        (
            {"trainerReplicas": ["us-east-1"]},
            None,
            "gpu-platform:fleet.trainerReplicas",
            "left out where trainerHome is set",
        ),
        (
            {},
            {"defaultImage": TEAM_IMAGE},
            "gpu-platform:fleet.trainerHome",
            "left out where training.defaultImage is set",
        ),
    ],
    ids=["replicas-on-a-non-home", "home-with-a-default-image"],
)
def test_fleet_trainer_config_errors_exit_2_naming_the_key(
    fleet: dict[str, Any],
    training: dict[str, Any] | None,
    path: str,
    allowed: str,
    expect_config_error: Callable[[dict[str, Any], str, str], None],
) -> None:
    config = stack_values("prod-usw2")
    config["gpu-platform:fleet"] = {**config["gpu-platform:fleet"], **fleet}
    if training is not None:
        config["gpu-platform:training"] = training
    expect_config_error(config, path, allowed)


# --- the manager: runtimes, admission and replication checked per worker --------------------------


def _set(index: int, path: tuple[str, ...], value: Any) -> Callable[[int, Exports], Exports]:
    def change(i: int, given: Exports) -> Exports:
        if i != index:
            return given
        node = given.fleet_worker if path[0] == "fleetWorker" else given.job_platform
        assert node is not None
        for key in path[1:-1]:
            node = node[key]
        node[path[-1]] = value
        return given

    return change


def _refused(read: Read, change: Callable[[int, Exports], Exports]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        read(change)
    return caught.value.lines


def test_the_committed_fleet_runs_one_trainer(read: Read, prod_use1: SynthResult) -> None:
    fleet = read()
    assert fleet.trainer_image == prod_use1.outputs["trainerImage"]
    assert [w.refuses(fleet.trainer_image) for w in fleet.workers] == [None, None]


def _with_image(runtimes: dict[str, Any], image: str) -> dict[str, Any]:
    """Exported runtime pod sets with every container running `image`."""
    out = copy.deepcopy(runtimes)
    for pod in out.values():
        for container in pod["containers"]:
            container["image"] = image
    return out


OTHER = "123456789012.dkr.ecr.us-west-2.amazonaws.com/gpu-prod-usw2/trainer@sha256:" + "d" * 64


def test_a_worker_whose_runtimes_render_another_image_is_refused(
    read: Read, prod_usw2: SynthResult
) -> None:
    runtimes = _with_image(prod_usw2.outputs["fleetWorker"]["trainer"]["runtimes"], OTHER)
    lines = _refused(read, _set(1, ("fleetWorker", "trainer", "runtimes"), runtimes))
    (line,) = lines
    assert line.startswith(
        'gpu-platform-fleet:workers[1].stack: got "gpu-platform/gpu-platform/prod-usw2"; a worker '
        "whose ClusterTrainingRuntime gpu-platform-torch-"
    )
    assert "renders the containers worker use1 renders" in line
    assert f"containers[0].image is '{OTHER}' here" in line
    assert "OutOfSync" in line and "fleet.trainerHome: gpu-platform/gpu-platform/prod-use1" in line


def test_the_manager_refuses_workers_whose_runtimes_differ_from_its_own(
    read: Read, prod_use1: SynthResult
) -> None:
    from components.analysis.fleet_trainer import manager_runtime_problems

    fleet = read()
    mine = prod_use1.outputs["fleetWorker"]["trainer"]["runtimes"]
    assert manager_runtime_problems(fleet.workers, mine) == []
    problems = manager_runtime_problems(fleet.workers, _with_image(mine, OTHER))
    assert [p.key for p in problems] == ["workers[0].stack", "workers[1].stack"]
    assert all("renders the containers the manager renders" in p.allowed for p in problems)


def test_a_worker_whose_admission_refuses_the_trainer_is_refused(read: Read) -> None:
    # usw2 without its trainer home: its admission trusts its own registry only.
    lines = _refused(read, _set(1, ("fleetWorker", "trainer", "home"), None))
    (line,) = lines
    assert line.startswith("gpu-platform-fleet:workers[1].stack: ")
    assert "a worker whose admission admits the fleet's trainer" in line
    assert "trusted-images policy admits 123456789012.dkr.ecr.us-west-2.amazonaws.com" in line


def test_a_home_that_does_not_replicate_to_a_workers_region_is_refused(read: Read) -> None:
    lines = _refused(read, _set(0, ("fleetWorker", "trainer", "replicaRegions"), []))
    assert lines == [
        'gpu-platform-fleet:workers[0].stack: got "gpu-platform/gpu-platform/prod-use1"; a '
        "trainer home that replicates its trainer to us-west-2, where worker usw2 runs it "
        "(fleet.trainerReplicas: [])"
    ]


def test_a_trainer_home_outside_the_fleet_is_refused(read: Read) -> None:
    lines = _refused(read, _set(1, ("fleetWorker", "trainer", "home"), "org/gpu-platform/other"))
    assert any(
        line.startswith("gpu-platform-fleet:workers[1].stack: ")
        and "fleet.trainerHome (org/gpu-platform/other) is a worker of this manager" in line
        for line in lines
    ), lines


# --- fleet jobs: an image some worker refuses -----------------------------------------------------


def _submit(fleet: SynthResult, job: dict[str, Any]) -> SynthResult:
    base = job_stack_values("pretrain-fleet")["trainingJobs"][1]
    return run_job_stack(
        "pretrain-fleet", overrides={"trainingJobs": [{**base, **job}]}, platform=fleet
    )


def test_a_job_image_a_worker_refuses_is_refused_unless_pinned_away(
    fleet_prod: SynthResult,
) -> None:
    with pytest.raises(ConfigError) as caught:
        _submit(fleet_prod, {"image": TEAM_IMAGE})
    (line,) = caught.value.lines
    assert line.startswith('gpu-platform-jobs:trainingJobs[0].image: got "123456789012.dkr.ecr.')
    assert "; an image every worker the job may be dispatched to admits" in line
    assert "worker usw2 (us-west-2) refuses it: its trusted-images policy admits" in line
    assert "pin it with regions: [us-east-1]" in line
    # Pinned to the region whose worker admits it: it runs there.
    result = _submit(fleet_prod, {"image": TEAM_IMAGE, "regions": ["us-east-1"]})
    (judged,) = result.fleet_jobs.judgement.jobs
    assert [r.label for r in judged.runnable_on] == ["use1 (us-east-1)"]


def test_a_single_node_native_fleet_job_runs_the_fleets_trainer(
    fleet_prod: SynthResult, prod_use1: SynthResult
) -> None:
    result = _submit(fleet_prod, {"launcher": "native", "nodes": 1})
    (job,) = [m for m in output.manifests(result) if m["kind"] == "Job"]
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["image"] == prod_use1.outputs["trainerImage"]
    assert job["spec"]["managedBy"] == "kueue.x-k8s.io/multikueue"


def test_cli_refuses_a_fleet_job_a_worker_would_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = job_stack_values("pretrain-fleet")
    config["trainingJobs"] = [{**config["trainingJobs"][1], "image": TEAM_IMAGE}]
    project = _job_project(tmp_path, config)
    capsys.readouterr()
    rc = synth_cli.main(["--project", "jobs", "--stack", "t", "--project-dir", str(project)])
    err = capsys.readouterr().err
    assert rc == synth_cli.EXIT_CONFIG, err
    assert "Traceback" not in err
    (line,) = [
        x for x in err.splitlines() if x.startswith("gpu-platform-jobs:trainingJobs[0].image:")
    ]
    assert "worker usw2 (us-west-2) refuses it" in line
    assert not (project / "build").exists()


def _job_project(root: Path, config: dict[str, Any]) -> Path:
    """A job project (jobs/__main__.py, jobs/Pulumi.yaml) with stack `t` holding `config`."""
    for name in ("__main__.py", "Pulumi.yaml"):
        (root / name).symlink_to(JOBS_ROOT / name)
    full = {f"gpu-platform-jobs:{k}": v for k, v in config.items()}
    (root / "Pulumi.t.yaml").write_text(yaml.safe_dump({"config": full}))
    (root / "policies").mkdir()
    (root / "policies" / "config.t.json").symlink_to(
        JOBS_ROOT / "policies" / "config.pretrain-fleet.json"
    )
    return root


def test_the_reports_name_the_one_trainer(
    fleet_prod: SynthResult, pretrain_fleet: SynthResult, prod_use1: SynthResult
) -> None:
    from synth.report import report

    trainer = prod_use1.outputs["trainerImage"]
    assert f"Trainer: `{trainer}`, built by `use1` (us-east-1, replicated to us-west-2)" in report(
        fleet_prod
    )
    section = report(pretrain_fleet).split("## Will it run", 1)[1].split("\n## ", 1)[0]
    assert section.count(f"- image: `{trainer}` (the fleet's trainer") == 3
