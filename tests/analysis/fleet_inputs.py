"""A fleet's inputs built the way the program builds them, without a synth or the Pulumi runtime
(issue #39: the fleet's rules reached by the mutation run's fast tests).

Each worker is the committed stack file's config (Pulumi.prod-use1.yaml, Pulumi.prod-usw2.yaml)
judged by `analysis.check`, its `jobPlatform` written by contract/platform_contract.py
`platform_contract` and its `fleetWorker` as components/platform/fleet/worker.py builds it — its
region from the stack file, its VPC CIDR and fleet block from the config, its runtimes' pod sets
rendered by training_jobs/manifests.py — with TEST values for what only a deployment knows (the
account, the network IDs and ARNs, the trainer's pushed digest and signing key). The manager is
fleet/Pulumi.prod.yaml. A test changes a worker's config (`worker_config` overrides) or its
contracts (`model_copy`), and hands `WorkerInput`s to `read_workers` as the manager's
components/platform/fleet/reading.py does.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Sequence
from typing import Any, Final

import pytest
import yaml

from components import analysis, catalog
from components import config as stack_config
from components.analysis.fleet import FleetFacts, WorkerInput, read_workers
from components.analysis.fleet_trainer import ecr_registry
from components.analysis.storage import EFS_STORAGE_CLASS
from components.config import ConfigError, TrainingJobConfig
from components.config.fleet import FleetManagerConfig, WorkerRef
from components.config.fleet_stack import parse_fleet
from components.contract.fleet_worker import WorkerContract, WorkerTrainer
from components.contract.job_platform import PlatformContract
from components.contract.platform_contract import platform_contract
from components.training_jobs.manifests import cluster_training_runtimes, runtime_pod_sets
from synth.fleet import FLEET_ROOT
from synth.harness import PROJECT_ROOT
from tests.conftest import stack_values

#: TEST data: the example account of the stack files' admin role ARNs (and the synth mocks').
TEST_ACCOUNT_ID: Final = "123456789012"
#: TEST data: the trainer as the home (prod-use1) would push it, by a made-up digest.
TEST_TRAINER_IMAGE: Final = (
    f"{ecr_registry(TEST_ACCOUNT_ID, 'us-east-1')}/gpu-prod-use1/trainer@sha256:" + "0123abcd" * 8
)
#: TEST data: the home's published signing key (the rules read only whether there is one).
TEST_SIGNING_KEY: Final = "TEST public key: not a PEM"
#: The manager's region (fleet/Pulumi.prod.yaml `aws:region`).
MANAGER_REGION: Final = "us-east-1"
#: What a fleet job stack is told of a Volcano job (fleet_jobs.py: MultiKueue cannot carry it).
VOLCANO_ALLOWED: Final = (
    "kubeflow (or native) with scheduler kueue: Kueue's MultiKueue has no adapter for Volcano "
    "Jobs (no vcjob integration at v0.19.2, and its JobSpec has no managedBy), so a Volcano job "
    "never leaves the cluster it is created in"
)


def worker_config(stack: str, **overrides: Any) -> stack_config.StackConfig:
    """A committed worker stack's config, `gpu-platform:` keys given bare in `overrides`."""
    values = stack_values(stack)
    values.update({f"gpu-platform:{k}": v for k, v in overrides.items()})
    raw = {k: v if isinstance(v, str) else json.dumps(v) for k, v in values.items()}
    return stack_config.parse(stack_config.namespace_values(raw))


def stack_region(stack: str) -> str:
    region = stack_values(stack)["aws:region"]
    assert isinstance(region, str)
    return region


def contracts(
    cfg: stack_config.StackConfig, region: str, trainer_image: str = TEST_TRAINER_IMAGE
) -> tuple[WorkerContract, PlatformContract]:
    """A worker's `fleetWorker` and `jobPlatform` as its stack would export them."""
    facts, _ = analysis.check(cfg)
    platform = platform_contract(
        facts,
        account_id=TEST_ACCOUNT_ID,
        storage_class=EFS_STORAGE_CLASS,
        trainer_image=trainer_image,
    )
    assert cfg.fleet is not None
    worker = WorkerContract(
        version=WorkerContract.current_version(),
        fleet=cfg.fleet.name,
        region=region,
        cluster_name=cfg.cluster.name,
        kubernetes_version=cfg.cluster.kubernetes_version,
        vpc_id=f"vpc-TEST-{cfg.cluster.name}",
        vpc_cidr=cfg.network.vpc_cidr,
        private_route_table_ids=[f"rtb-TEST-{cfg.cluster.name}"],
        cluster_security_group_id=f"sg-TEST-{cfg.cluster.name}",
        endpoint_public_access=cfg.cluster.endpoint_public_access,
        data_kms_key_arn=None,
        kueue_frameworks=list(catalog.KUEUE_FRAMEWORKS),
        service_account="kueue-system/TEST-manager",
        token_key=cfg.fleet.token_keys[-1],
        kubeconfig_secret_arn=f"arn:aws:secretsmanager:{region}:{TEST_ACCOUNT_ID}:secret:TEST",
        trainer=WorkerTrainer(
            home=cfg.fleet.trainer_home,
            replica_regions=list(cfg.fleet.trainer_replicas),
            signing_public_key=TEST_SIGNING_KEY,
            runtimes=runtime_pod_sets(cluster_training_runtimes(trainer_image)),
        ),
    )
    return worker, platform


def fleet_values() -> dict[str, Any]:
    """The committed manager's config (bare keys), for a test to change."""
    data = yaml.safe_load((FLEET_ROOT / "Pulumi.prod.yaml").read_text())["config"]
    return {k.split(":", 1)[1]: v for k, v in data.items() if k.startswith("gpu-platform-fleet:")}


def manager_config(values: dict[str, Any] | None = None) -> FleetManagerConfig:
    return parse_fleet(values if values is not None else fleet_values())


def committed_input(ref: WorkerRef, **overrides: Any) -> WorkerInput:
    """What the manager reads of the committed worker `ref` (its config changed by
    `overrides`)."""
    stack = ref.stack_name
    fleet_worker, job_platform = contracts(worker_config(stack, **overrides), stack_region(stack))
    return WorkerInput(ref, fleet_worker, job_platform)


def committed_inputs(cfg: FleetManagerConfig | None = None) -> list[WorkerInput]:
    return [committed_input(ref) for ref in (cfg or manager_config()).workers]


Change = Callable[[int, WorkerInput], WorkerInput]


def read(
    change: Change | None = None,
    cfg: FleetManagerConfig | None = None,
    inputs: Sequence[WorkerInput] | None = None,
) -> FleetFacts:
    """read_workers over the committed fleet, each worker's input changed by `change`."""
    config = cfg or manager_config()
    given = list(inputs) if inputs is not None else committed_inputs(config)
    if change is not None:
        given = [change(i, w) for i, w in enumerate(given)]
    return read_workers(config, MANAGER_REGION, given)


def refused(
    change: Change | None = None,
    cfg: FleetManagerConfig | None = None,
    inputs: Sequence[WorkerInput] | None = None,
) -> list[str]:
    """The lines of the ConfigError read_workers raises."""
    with pytest.raises(ConfigError) as caught:
        read(change, cfg, inputs)
    return caught.value.lines


def fleet_jobs() -> list[TrainingJobConfig]:
    """jobs/Pulumi.pretrain-fleet.yaml's jobs (team pretrain), as the job stack parses them."""
    data = yaml.safe_load((PROJECT_ROOT / "jobs" / "Pulumi.pretrain-fleet.yaml").read_text())
    config = data["config"]
    team = config["gpu-platform-jobs:team"]
    return [
        TrainingJobConfig.model_validate({**job, "team": team})
        for job in config["gpu-platform-jobs:trainingJobs"]
    ]


def fleet_job(index: int = 1, **changes: Any) -> TrainingJobConfig:
    """A committed fleet job (jobs/Pulumi.pretrain-fleet.yaml; 1: eval-l4) with `changes`."""
    job = fleet_jobs()[index]
    data = job.model_dump(by_alias=True, exclude_unset=True)
    return TrainingJobConfig.model_validate({**data, **changes})


def worker_values(stack: str, key: str) -> Any:
    return stack_values(stack)[f"gpu-platform:{key}"]


def three_workers(**use1: Any) -> FleetFacts:
    """The committed fleet plus a second worker in us-west-2 (usw2b) whose team pretrain and
    pools have 8 on-demand H100s (as use1's; usw2 has 16); `use1`: overrides of use1's config."""
    values = fleet_values()
    values["workers"] = [
        *values["workers"],
        {"name": "usw2b", "stack": "gpu-platform/gpu-platform/prod-usw2b"},
    ]
    cfg = manager_config(values)
    teams = worker_values("prod-usw2", "teams")
    for team in teams:
        for entry in team["quota"]:
            if (entry["gpuClass"], entry["capacityType"]) == ("h100-x8", "on-demand"):
                entry.update(gpus=8, cpu=192, memoryGib=2000)
    karpenter = worker_values("prod-usw2", "karpenter")
    for pool in karpenter["pools"]:
        if pool["name"] == "kp-h100-od":
            pool["limits"] = {"gpus": 8}
    inputs: list[WorkerInput] = [
        committed_input(cfg.workers[0], **use1),
        committed_input(cfg.workers[1]),
    ]
    third = dataclasses.replace(
        committed_input(
            cfg.workers[1],
            cluster={**worker_values("prod-usw2", "cluster"), "name": "gpu-prod-usw2b"},
            teams=teams,
            karpenter=karpenter,
        ),
        ref=cfg.workers[2],
    )
    assert third.fleet_worker is not None
    third = dataclasses.replace(
        third, fleet_worker=third.fleet_worker.model_copy(update={"vpc_cidr": "10.3.0.0/16"})
    )
    return read(cfg=cfg, inputs=[*inputs, third])
