"""The contracts between the projects (components/contract/schema.py): each version is derived
from its model's JSON schema — a changed field, type or nested model (the config model
included) is a new version, a docstring is not — and a reader parses what it read once,
refusing another version naming both, and another shape naming the field."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import Field

from components.config import StackConfig
from components.contract.fleet_platform import FleetBlock, FleetContract, FleetMember
from components.contract.fleet_worker import WorkerContract, WorkerTrainer
from components.contract.job_platform import PlatformContract, PlatformTeam
from components.contract.schema import Contract, ContractError, dumped, parse_contract

#: A `fleetWorker` as a worker exports it (plain values, the version this revision writes).
WORKER: dict[str, Any] = {
    "version": WorkerContract.current_version(),
    "fleet": "prod",
    "region": "us-east-1",
    "clusterName": "gpu-prod-use1",
    "kubernetesVersion": "1.33",
    "vpcId": "vpc-0a1b2c3d",
    "vpcCidr": "10.1.0.0/16",
    "privateRouteTableIds": ["rtb-1", "rtb-2"],
    "clusterSecurityGroupId": "sg-1",
    "endpointPublicAccess": False,
    "dataKmsKeyArn": "arn:aws:kms:us-east-1:123456789012:key/k",
    "kueueFrameworks": ["batch/job", "trainer.kubeflow.org/trainjob"],
    "serviceAccount": "kueue-system/multikueue-prod",
    "tokenKey": "v1",
    "kubeconfigSecretArn": "arn:aws:secretsmanager:us-east-1:123456789012:secret:k",
    "trainer": {
        "home": None,
        "replicaRegions": ["us-west-2"],
        "signingPublicKey": None,
        "runtimes": {
            "gpu-platform-torch-dev-g120/node": {
                "containers": [{"name": "node", "image": "repo@sha256:" + "a" * 64}],
                "initContainers": [],
            }
        },
    },
}


def _worker(**changes: Any) -> dict[str, Any]:
    value = copy.deepcopy(WORKER)
    value.update(changes)
    return value


def test_a_contract_round_trips_through_its_output() -> None:
    parsed = parse_contract(WorkerContract, WORKER)
    assert parsed is not None
    assert dumped(parsed) == WORKER
    assert list(dumped(parsed)) == list(WORKER)  # the keys in the writer's order
    assert parse_contract(WorkerContract, dumped(parsed)) == parsed


def test_a_null_field_may_be_left_out() -> None:
    """Pulumi drops null-valued keys on the wire: a reader takes them as None."""
    value = _worker(dataKmsKeyArn=None)
    del value["dataKmsKeyArn"]
    parsed = parse_contract(WorkerContract, value)
    assert parsed is not None and parsed.data_kms_key_arn is None


def test_no_output_reads_as_none() -> None:
    assert parse_contract(WorkerContract, None) is None


@pytest.mark.parametrize(
    ("found", "shown"),
    [(2.0, "2"), (2, "2"), ("0123456789abcdef", "0123456789abcdef"), (None, "None")],
)
def test_another_version_is_refused_naming_both(found: object, shown: str) -> None:
    value = _worker(version=found)
    if found is None:
        del value["version"]
    with pytest.raises(ContractError) as caught:
        parse_contract(WorkerContract, value)
    assert caught.value.output == "fleetWorker"
    assert caught.value.problem == (
        f"`fleetWorker` version {WorkerContract.current_version()} (it has {shown})"
    )


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (
            _worker(trainer={**WORKER["trainer"], "hme": None}),
            "fleetWorker.trainer.hme: unknown key (did you mean 'home'?); allowed keys: home, "
            "replicaRegions, runtimes, signingPublicKey",
        ),
        (
            {k: v for k, v in WORKER.items() if k != "vpcId"},
            "fleetWorker.vpcId: required key is missing",
        ),
        (
            _worker(privateRouteTableIds="rtb-1"),
            'fleetWorker.privateRouteTableIds: got "rtb-1"; Input should be a valid list',
        ),
    ],
    ids=["unknown-field", "missing-field", "wrong-type"],
)
def test_another_shape_is_refused_naming_the_field(value: dict[str, Any], expected: str) -> None:
    with pytest.raises(ContractError) as caught:
        parse_contract(WorkerContract, value)
    assert caught.value.problem == f"`fleetWorker` as this revision reads it ({expected})"


def test_the_version_follows_the_schema() -> None:
    """Any field added, retyped or redefaulted, in the contract or a model it nests, is a new
    version, with no revision to remember; prose is not."""

    class Widened(WorkerContract):
        extra_key: int = 1

    class Redefaulted(WorkerContract):
        extra_key: int = 2

    # The same model under its own name (a class's name is its schema's title) with other prose.
    documented = type(WorkerContract)(
        "WorkerContract", (WorkerContract,), {"__doc__": "Another docstring: no other shape."}
    )

    class OtherTrainer(WorkerTrainer):
        replica_regions: list[str] = Field(default_factory=list)

    class NestedChange(WorkerContract):
        trainer: OtherTrainer

    versions = {
        model.current_version() for model in (Widened, Redefaulted, NestedChange, WorkerContract)
    }
    assert len(versions) == 4
    assert documented.current_version() == WorkerContract.current_version()


def test_the_config_model_is_part_of_the_platform_contract_and_the_fleets() -> None:
    """A job stack rebuilds the platform's StackConfig from `platformConfig`: any change to the
    config model changes `jobPlatform`'s version, and the manager's, which nests it."""

    class Widened(StackConfig):
        extra_key: int = Field(default=1, alias="extraKey")

    class WidenedPlatform(PlatformContract):
        platform_config: Widened

    class WidenedMember(FleetMember):
        job_platform: WidenedPlatform

    class WidenedBlock(FleetBlock):
        workers: list[WidenedMember]

    class WidenedFleet(FleetContract):
        fleet: WidenedBlock

    class OtherTeam(PlatformTeam):
        namespace: int  # type: ignore[assignment]

    class OtherTeams(PlatformContract):
        teams: dict[str, OtherTeam]

    platform = PlatformContract.current_version()
    assert WidenedPlatform.current_version() != platform
    assert OtherTeams.current_version() != platform
    assert WidenedFleet.current_version() != FleetContract.current_version() != platform


def test_every_contract_is_closed_frozen_and_named() -> None:
    for model in (PlatformContract, FleetContract, WorkerContract):
        assert issubclass(model, Contract)
        assert model.model_config.get("extra") == "forbid"
        assert model.model_config.get("frozen") is True
        assert next(iter(model.model_fields)) == "version"
    assert {PlatformContract.OUTPUT, FleetContract.OUTPUT, WorkerContract.OUTPUT} == {
        "jobPlatform",
        "fleetWorker",
    }
