"""The fleet's one trainer (components/analysis/fleet_trainer.py), on inputs built as the program
builds them and without a synth (tests/analysis/fleet_inputs.py): what a worker's admission
makes of an image, the trainer home a worker reads, and the manager's checks that every worker
renders the same runtimes, admits the trainer and gets its replica. The whole-stack
counterparts are tests/fleet/test_fleet_trainer.py."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from components.analysis.fleet import WorkerInput
from components.analysis.fleet_trainer import (
    FleetTrainer,
    admission_refusal,
    first_difference,
    home_trainer,
    job_image_problems,
    manager_runtime_problems,
    parse_trainer,
    signed_by_own_signer,
    trainer_repositories,
)
from components.config import ConfigError, Problem
from components.contract.fleet_worker import RuntimePodSet
from components.training_jobs.manifests import cluster_training_runtimes, runtime_pod_sets
from tests.analysis.fleet_inputs import (
    TEST_ACCOUNT_ID,
    TEST_SIGNING_KEY,
    TEST_TRAINER_IMAGE,
    committed_input,
    contracts,
    fleet_values,
    manager_config,
    read,
    refused,
    worker_config,
)

USE1 = 'gpu-platform-fleet:workers[0].stack: got "gpu-platform/gpu-platform/prod-use1"; '
USW2 = 'gpu-platform-fleet:workers[1].stack: got "gpu-platform/gpu-platform/prod-usw2"; '
DIGEST = TEST_TRAINER_IMAGE.rsplit("@", 1)[1]
#: TEST data: another trainer digest.
OTHER_IMAGE = TEST_TRAINER_IMAGE.rsplit("@", 1)[0] + "@sha256:" + "9" * 64
KUEUE = (
    "(Kueue v0.19.2 compares the pod sets a worker recomputes from its runtime with the "
    "dispatched Workload, containers in full, and finishes it OutOfSync: "
    "pkg/util/equality/podset.go L41-76, jobframework/reconciler.go L1365-1385)"
)
HINT = (
    "build the trainer on one worker and run it everywhere: fleet.trainerHome: "
    "gpu-platform/gpu-platform/prod-use1 on the others, fleet.trainerReplicas: their regions "
    "on use1 (docs/fleet.md)"
)


def _trainer(index: int, **fields: Any) -> Any:
    """A change of worker `index`'s `fleetWorker.trainer` fields."""

    def change(i: int, given: WorkerInput) -> WorkerInput:
        if i != index:
            return given
        assert given.fleet_worker is not None
        update = dict(fields)
        if "runtimes" in update:
            # Rendered pod sets (JSON) as the contract holds them.
            update["runtimes"] = {
                k: RuntimePodSet.model_validate(v) for k, v in update["runtimes"].items()
            }
        trainer = given.fleet_worker.trainer.model_copy(update=update)
        worker = given.fleet_worker.model_copy(update={"trainer": trainer})
        return dataclasses.replace(given, fleet_worker=worker)

    return change


# --- comparing rendered runtimes -------------------------------------------------------------


def test_first_difference_walks_mappings_in_key_order_and_lists_by_index() -> None:
    ours = {"b": {"c": [1, {"d": 2}]}, "a": 1}
    assert first_difference("", ours, ours) is None
    assert first_difference("", ours, {"b": {"c": [1, {"d": 3}]}, "a": 1}) == (".b.c[1].d", 2, 3)
    assert first_difference("x", {"b": 1, "a": 1}, {"b": 2, "a": 2}) == ("x.a", 1, 2)
    # A key on one side only; lists of other lengths, and unlike types, compare whole.
    assert first_difference("", {"a": 1}, {"a": 1, "z": 2}) == (".z", None, 2)
    assert first_difference("p", [1], [1, 2]) == ("p", [1], [1, 2])
    assert first_difference("p", {"a": 1}, 5) == ("p", {"a": 1}, 5)
    assert first_difference("p", 5, {"a": 1}) == ("p", 5, {"a": 1})
    assert first_difference("p", [1], "ab") == ("p", [1], "ab")
    assert first_difference("p", "ab", [1]) == ("p", "ab", [1])
    assert first_difference("p", 1, 2) == ("p", 1, 2)


def test_a_worker_whose_runtimes_render_other_containers_is_refused() -> None:
    other = runtime_pod_sets(cluster_training_runtimes(OTHER_IMAGE))
    lines = refused(_trainer(1, runtimes=other))
    first = sorted(other)[0]
    assert lines == [
        USW2 + f"a worker whose ClusterTrainingRuntime {first.split('/')[0]} renders the "
        f"containers worker use1 renders: containers[0].image is {OTHER_IMAGE!r} here, "
        f"{TEST_TRAINER_IMAGE!r} there {KUEUE}; {HINT}"
    ]


def test_a_worker_missing_a_runtime_names_the_runtime() -> None:
    ours = runtime_pod_sets(cluster_training_runtimes(TEST_TRAINER_IMAGE))
    first = sorted(ours)[0]
    fewer = {k: v for k, v in ours.items() if k != first}
    (line,) = refused(_trainer(1, runtimes=fewer))
    assert line.startswith(
        USW2 + f"a worker whose ClusterTrainingRuntime {first.split('/')[0]} renders the "
        "containers worker use1 renders: the runtime is None here, {'containers': "
    )


def test_manager_runtime_problems_name_every_worker_that_differs() -> None:
    fleet = read()
    ours = dict(fleet.workers[0].runtime_pod_sets)
    assert manager_runtime_problems(fleet.workers, ours) == []
    other = runtime_pod_sets(cluster_training_runtimes(OTHER_IMAGE))
    problems = manager_runtime_problems(fleet.workers, other)
    first = sorted(other)[0].split("/")[0]
    assert problems == [
        Problem(
            f"workers[{w.index}].stack",
            w.stack_ref,
            f"a worker whose ClusterTrainingRuntime {first} renders the containers the manager "
            f"renders: containers[0].image is {TEST_TRAINER_IMAGE!r} here, {OTHER_IMAGE!r} "
            f"there {KUEUE}; deploy every worker and the manager from one revision, with one "
            "trainer (docs/fleet.md)",
        )
        for w in fleet.workers
    ]


# --- the fleet's trainer on every worker -----------------------------------------------------


def test_a_worker_that_refuses_the_fleets_trainer_is_refused() -> None:
    """usw2 without a trainer home admits only its own registry and ghcr.io/gpu-platform."""
    lines = refused(_trainer(1, home=None))
    assert lines == [
        USW2 + f"a worker whose admission admits the fleet's trainer {TEST_TRAINER_IMAGE}: its "
        "trusted-images policy admits 123456789012.dkr.ecr.us-west-2.amazonaws.com, "
        "ghcr.io/gpu-platform only, by digest"
    ]


def test_a_worker_is_named_once_when_its_runtimes_differ_and_it_refuses_the_trainer() -> None:
    other = runtime_pod_sets(cluster_training_runtimes(OTHER_IMAGE))

    def both(i: int, given: WorkerInput) -> WorkerInput:
        return _trainer(1, home=None, runtimes=other)(i, given)

    (line,) = refused(both)
    assert "renders the containers worker use1 renders" in line


def test_a_trainer_refused_by_the_first_worker_is_named_there() -> None:
    """The fleet's trainer is the first worker's: a home whose own registry does not hold it."""
    image = "123456789012.dkr.ecr.us-west-2.amazonaws.com/gpu-prod-use1/trainer@" + DIGEST
    cfg = manager_config()
    inputs = [committed_input(ref) for ref in cfg.workers]
    platforms = [i.job_platform for i in inputs]
    assert all(p is not None for p in platforms)
    inputs = [
        dataclasses.replace(i, job_platform=p.model_copy(update={"trainer_image": image}))
        for i, p in zip(inputs, platforms, strict=True)
        if p is not None
    ]
    lines = refused(inputs=inputs)
    assert lines[0].startswith(
        USE1 + f"a worker whose admission admits the fleet's trainer {image}: its "
        "trusted-images policy admits 123456789012.dkr.ecr.us-east-1.amazonaws.com"
    )


def test_a_trainer_home_outside_the_fleet_is_refused() -> None:
    lines = refused(_trainer(1, home="gpu-platform/gpu-platform/prod-euw1"))
    assert (
        USW2 + "a worker whose fleet.trainerHome (gpu-platform/gpu-platform/prod-euw1) is a "
        "worker of this manager (gpu-platform/gpu-platform/prod-use1, "
        "gpu-platform/gpu-platform/prod-usw2)"
    ) in lines


def test_every_worker_whose_home_is_outside_the_fleet_is_named() -> None:
    def both(i: int, given: WorkerInput) -> WorkerInput:
        return _trainer(i, home=f"gpu-platform/gpu-platform/prod-x{i}")(i, given)

    lines = [line for line in refused(both) if "fleet.trainerHome" in line]
    assert [line[: line.index("; ") + 2] for line in lines] == [USE1, USW2]


def test_a_home_that_does_not_replicate_to_a_workers_region_is_named() -> None:
    assert refused(_trainer(0, replica_regions=[])) == [
        USE1 + "a trainer home that replicates its trainer to us-west-2, where worker usw2 runs "
        "it (fleet.trainerReplicas: [])"
    ]
    # A worker in the home's own region pulls the home's repository: no replica needed.
    fleet = read(_trainer(0, replica_regions=[]), inputs=_usw2_in("us-east-1"))
    assert [w.region for w in fleet.workers] == ["us-east-1", "us-east-1"]


def _usw2_in(region: str) -> list[WorkerInput]:
    use1, usw2 = (committed_input(ref) for ref in manager_config().workers)
    assert usw2.fleet_worker is not None
    worker = usw2.fleet_worker.model_copy(update={"region": region})
    return [use1, dataclasses.replace(usw2, fleet_worker=worker)]


def test_bare_stack_names_find_the_home() -> None:
    """A stack named without its organisation and project (config.fleet WorkerStackRef)."""
    values = fleet_values()
    values["workers"] = [{**w, "stack": w["stack"].rsplit("/", 1)[1]} for w in values["workers"]]
    cfg = manager_config(values)
    fleet = read(_trainer(1, home="prod-use1"), cfg=cfg)
    assert [w.stack_ref for w in fleet.workers] == ["prod-use1", "prod-usw2"]


# --- a worker's admission --------------------------------------------------------------------


def test_admission_on_a_worker_that_runs_its_homes_trainer() -> None:
    cfg = worker_config("prod-usw2")
    trainer = FleetTrainer(TEST_TRAINER_IMAGE, TEST_SIGNING_KEY)
    replica = trainer.replica("us-west-2")
    assert replica == (
        f"{TEST_ACCOUNT_ID}.dkr.ecr.us-west-2.amazonaws.com/gpu-prod-use1/trainer@{DIGEST}"
    )
    for image in (TEST_TRAINER_IMAGE, replica):
        assert admission_refusal(cfg, TEST_ACCOUNT_ID, "us-west-2", image, trainer) is None
    unsigned = FleetTrainer(TEST_TRAINER_IMAGE)
    expected = (
        "its signature policy verifies the fleet's trainer with the trainer home's key, and "
        "the home publishes none (its admission trusts another signer than the key its deploy "
        "signs with)"
    )
    for image in (TEST_TRAINER_IMAGE, replica):
        assert admission_refusal(cfg, TEST_ACCOUNT_ID, "us-west-2", image, unsigned) == expected
    # Its own repositories are signed by its platform key.
    own = f"{TEST_ACCOUNT_ID}.dkr.ecr.us-west-2.amazonaws.com/gpu-prod-usw2/eval@{DIGEST}"
    assert admission_refusal(cfg, TEST_ACCOUNT_ID, "us-west-2", own, trainer) is None
    other = f"{TEST_ACCOUNT_ID}.dkr.ecr.us-west-2.amazonaws.com/other/eval@{DIGEST}"
    assert admission_refusal(cfg, TEST_ACCOUNT_ID, "us-west-2", other, trainer) == (
        "its signature policy (Deny) requires a signature by its trusted signer, which signs "
        f"{TEST_ACCOUNT_ID}.dkr.ecr.us-west-2.amazonaws.com/gpu-prod-usw2 only"
    )


def _admission(stack: str, **admission: Any) -> Any:
    security = worker_config(stack).security.model_dump(by_alias=True, exclude_unset=True)
    image_admission = {**security.get("imageAdmission", {}), **admission}
    return worker_config(stack, security={**security, "imageAdmission": image_admission})


def test_admission_without_a_digest_requirement_says_so() -> None:
    cfg = _admission("prod-use1", requireDigest=False)
    assert admission_refusal(cfg, TEST_ACCOUNT_ID, "us-east-1", "docker.io/x:1") == (
        "its trusted-images policy admits 123456789012.dkr.ecr.us-east-1.amazonaws.com, "
        "ghcr.io/gpu-platform only"
    )
    strict = worker_config("prod-use1")
    tagged = f"{TEST_ACCOUNT_ID}.dkr.ecr.us-east-1.amazonaws.com/gpu-prod-use1/eval:1"
    assert admission_refusal(strict, TEST_ACCOUNT_ID, "us-east-1", tagged) is not None
    assert admission_refusal(cfg, TEST_ACCOUNT_ID, "us-east-1", tagged) is None


def test_admission_under_audit_or_without_signatures() -> None:
    audit = _admission("prod-use1", action="Audit")
    assert admission_refusal(audit, TEST_ACCOUNT_ID, "us-east-1", "docker.io/x:1") is None
    unsigned = _admission("prod-use1", signatures={"enabled": False})
    other = f"{TEST_ACCOUNT_ID}.dkr.ecr.us-east-1.amazonaws.com/other/eval@{DIGEST}"
    assert admission_refusal(unsigned, TEST_ACCOUNT_ID, "us-east-1", other) is None
    assert admission_refusal(worker_config("prod-use1"), TEST_ACCOUNT_ID, "us-east-1", other)


def test_admission_with_another_signer_names_its_repositories() -> None:
    signed = [f"{TEST_ACCOUNT_ID}.dkr.ecr.us-east-1.amazonaws.com/signed", "ghcr.io/gpu-platform"]
    cfg = _admission(
        "prod-use1",
        signatures={
            "platformKey": False,
            "publicKey": TEST_SIGNING_KEY,
            "signedRepositories": signed,
        },
    )
    assert signed_by_own_signer(cfg, TEST_ACCOUNT_ID, "us-east-1") == tuple(signed)
    assert signed_by_own_signer(worker_config("prod-use1"), TEST_ACCOUNT_ID, "us-east-1") == (
        f"{TEST_ACCOUNT_ID}.dkr.ecr.us-east-1.amazonaws.com/gpu-prod-use1",
    )
    own = f"{TEST_ACCOUNT_ID}.dkr.ecr.us-east-1.amazonaws.com/gpu-prod-use1/eval@{DIGEST}"
    assert admission_refusal(cfg, TEST_ACCOUNT_ID, "us-east-1", own) == (
        "its signature policy (Deny) requires a signature by its trusted signer, which signs "
        f"{', '.join(signed)} only"
    )
    inside = f"{signed[0]}/eval@{DIGEST}"
    assert admission_refusal(cfg, TEST_ACCOUNT_ID, "us-east-1", inside) is None


def test_the_trainers_repositories_and_replicas() -> None:
    trainer = FleetTrainer(TEST_TRAINER_IMAGE, TEST_SIGNING_KEY)
    home = f"{TEST_ACCOUNT_ID}.dkr.ecr.us-east-1.amazonaws.com/gpu-prod-use1/trainer"
    west = f"{TEST_ACCOUNT_ID}.dkr.ecr.us-west-2.amazonaws.com/gpu-prod-use1/trainer"
    assert trainer.replica_repository("us-west-2") == west
    assert trainer.replica_repository("us-east-1") == home
    assert trainer_repositories(trainer, "us-west-2") == (home, west)
    assert trainer_repositories(trainer, "us-east-1") == (home,)
    assert trainer_repositories(None, "us-east-1") == ()
    outside = FleetTrainer("ghcr.io/gpu-platform/trainer@" + DIGEST)
    assert outside.replica_repository("us-west-2") == "ghcr.io/gpu-platform/trainer"
    assert outside.replica("us-west-2") == "ghcr.io/gpu-platform/trainer@" + DIGEST


def test_parse_trainer_takes_only_a_reference_by_digest() -> None:
    assert parse_trainer(None) is None
    assert parse_trainer(TEST_TRAINER_IMAGE.split("@", 1)[0] + ":v1") is None
    assert parse_trainer(TEST_TRAINER_IMAGE, "key") == FleetTrainer(TEST_TRAINER_IMAGE, "key")


# --- a fleet job's image ---------------------------------------------------------------------


def test_an_image_no_worker_admits_says_where_to_push_it() -> None:
    fleet = read()
    image = "docker.io/library/busybox@sha256:" + "0" * 64
    assert job_image_problems(fleet.workers, image, 3, None) == [
        Problem(
            "trainingJobs[3].image",
            image,
            "an image every worker the job may be dispatched to admits (worker use1 (us-east-1) "
            "refuses it: its trusted-images policy admits "
            "123456789012.dkr.ecr.us-east-1.amazonaws.com, ghcr.io/gpu-platform only, by "
            "digest; worker usw2 (us-west-2) refuses it: its trusted-images policy admits "
            "123456789012.dkr.ecr.us-west-2.amazonaws.com, ghcr.io/gpu-platform and the trainer "
            "repository 123456789012.dkr.ecr.us-east-1.amazonaws.com/gpu-prod-use1/trainer only, "
            "by digest; a worker that wins the dispatch and refuses the mirrored job leaves it "
            "stuck, never tried elsewhere); push it where every worker admits it "
            "(docs/images.md)",
        )
    ]
    assert job_image_problems(fleet.workers, "", 3, None) == []
    assert job_image_problems(fleet.workers, image, 3, ["eu-west-1"]) == []


def test_an_image_some_workers_admit_names_them_to_pin_to() -> None:
    fleet = read()
    image = f"{TEST_ACCOUNT_ID}.dkr.ecr.us-east-1.amazonaws.com/gpu-prod-use1/eval@{DIGEST}"
    (problem,) = job_image_problems(fleet.workers, image, 0, None)
    assert problem.allowed.endswith(
        "never tried elsewhere); pin it with regions: [us-east-1] (the workers that admit it), "
        "or push it where every worker admits it"
    )


# --- the trainer home a worker reads ---------------------------------------------------------


def _home(**worker: Any) -> tuple[Any, Any]:
    fleet_worker, platform = contracts(worker_config("prod-use1"), "us-east-1")
    return fleet_worker.model_copy(update=worker), platform


def _refusal(cfg: Any, region: str, fleet_worker: Any, platform: Any) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        home_trainer(cfg, region, fleet_worker, platform)
    return caught.value.lines


HOME = 'gpu-platform:fleet.trainerHome: got "gpu-platform/gpu-platform/prod-use1"; '


def test_home_trainer_is_the_homes_by_digest_with_its_key() -> None:
    cfg = worker_config("prod-usw2")
    fleet_worker, platform = _home()
    assert home_trainer(cfg, "us-west-2", fleet_worker, platform) == FleetTrainer(
        TEST_TRAINER_IMAGE, TEST_SIGNING_KEY
    )
    # In the home's own region no replica is needed.
    bare = fleet_worker.model_copy(
        update={"trainer": fleet_worker.trainer.model_copy(update={"replica_regions": []})}
    )
    assert home_trainer(cfg, "us-east-1", bare, platform).image == TEST_TRAINER_IMAGE


def test_home_trainer_refuses_a_home_that_exports_nothing() -> None:
    cfg = worker_config("prod-usw2")
    fleet_worker, platform = _home()
    expected = [
        HOME + "a deployed worker of the fleet (it exports no fleetWorker / jobPlatform: deploy "
        "the trainer home first, then the other workers)"
    ]
    assert _refusal(cfg, "us-west-2", None, platform) == expected
    assert _refusal(cfg, "us-west-2", fleet_worker, None) == expected


def test_home_trainer_names_every_reason_at_once() -> None:
    cfg = worker_config("prod-usw2")
    fleet_worker, platform = _home(fleet="staging")
    trainer = fleet_worker.trainer.model_copy(
        update={"home": "gpu-platform/gpu-platform/prod-x", "replica_regions": []}
    )
    fleet_worker = fleet_worker.model_copy(update={"trainer": trainer})
    assert _refusal(cfg, "us-west-2", fleet_worker, platform) == [
        HOME + "a worker of fleet 'prod' (it serves 'staging'); the fleet's trainer home itself "
        "(it runs the trainer of gpu-platform/gpu-platform/prod-x: name that stack); a home "
        "whose trainer repository is replicated to us-west-2 (add us-west-2 to its "
        "fleet.trainerReplicas and `pulumi up` it, then this stack)"
    ]


def test_home_trainer_refuses_a_home_without_a_digest_or_a_key() -> None:
    cfg = worker_config("prod-usw2")
    fleet_worker, platform = _home()
    tagged = platform.model_copy(update={"trainer_image": TEST_TRAINER_IMAGE.split("@")[0] + ":1"})
    assert _refusal(cfg, "us-west-2", fleet_worker, tagged) == [
        HOME + "a worker that publishes its trainer by digest (jobPlatform.trainerImage)"
    ]
    keyless = fleet_worker.model_copy(
        update={"trainer": fleet_worker.trainer.model_copy(update={"signing_public_key": None})}
    )
    assert _refusal(cfg, "us-west-2", keyless, platform) == [
        HOME + "a home whose admission trusts the platform key its deploy signs the trainer "
        "with (it publishes no signing key; this stack verifies the trainer's signature)"
    ]
    # Without signature verification here the key is not needed.
    unsigned = _admission("prod-usw2", signatures={"enabled": False})
    assert home_trainer(unsigned, "us-west-2", keyless, platform).public_key is None


def test_every_region_whose_workers_admit_an_image_is_named_once() -> None:
    """use1 admits its own registry's image; usw2 refuses it; two workers whose admission only
    audits (one in us-east-1, one in a TEST region) admit it."""
    fleet = read()
    use1, usw2 = fleet.workers

    def auditing(worker: Any, region: str) -> Any:
        security = worker.cfg.security
        admission = security.image_admission.model_copy(update={"action": "Audit"})
        cfg = worker.cfg.model_copy(
            update={"security": security.model_copy(update={"image_admission": admission})}
        )
        return dataclasses.replace(
            worker,
            fleet_worker=worker.fleet_worker.model_copy(update={"region": region}),
            stack=dataclasses.replace(worker.stack, cfg=cfg),
        )

    workers = [use1, auditing(usw2, "us-east-1"), usw2, auditing(usw2, "eu-west-1")]
    image = f"{TEST_ACCOUNT_ID}.dkr.ecr.us-east-1.amazonaws.com/gpu-prod-use1/eval@{DIGEST}"
    (problem,) = job_image_problems(workers, image, 0, None)
    assert problem.allowed.endswith(
        "pin it with regions: [us-east-1, eu-west-1] (the workers that admit it), or push it "
        "where every worker admits it"
    )
