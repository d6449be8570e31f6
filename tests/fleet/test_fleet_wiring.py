"""Every way a fleet can be miswired fails before anything is registered, one line per problem
naming the key (components/config/fleet.py, components/analysis/fleet.py read_workers); the
committed fleet reads clean and its manager holds the workers' summed quota."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import pytest

from components.analysis.addons import manager_installed
from components.analysis.fleet import FleetFacts, manager_pods_ready
from components.config import ConfigError
from components.config.fleet_stack import parse_fleet
from components.contract.fleet_worker import WorkerContract
from components.contract.job_platform import PlatformContract
from tests.conftest import stack_values
from tests.fleet.conftest import Exports, fleet_config, fleet_values

Read = Callable[..., FleetFacts]


def _lines(call: Callable[[], object]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        call()
    return caught.value.lines


def test_the_committed_fleet_reads_clean_and_sums_each_teams_quota(read: Read) -> None:
    fleet = read()
    assert [(w.name, w.region) for w in fleet.workers] == [
        ("use1", "us-east-1"),
        ("usw2", "us-west-2"),
    ]
    research = next(t for t in fleet.teams if t.name == "research")
    per_worker = [next(t for t in w.cfg.teams if t.name == "research") for w in fleet.workers]
    assert research.quota
    for entry in research.quota:
        assert entry.gpus == sum(
            e.gpus for team in per_worker for e in team.quota if e.flavor == entry.flavor
        )
    # Borrowing is bounded only where every worker bounds it.
    spot = next(e for e in research.quota if e.flavor == "l4-x1-spot")
    assert spot.borrowing_limit_gpus == 8
    on_demand = next(e for e in research.quota if e.flavor == "l4-x1-on-demand")
    assert on_demand.borrowing_limit_gpus is None
    # The manager's flavors: every team's, reserved / spot / on-demand within a class.
    assert fleet.flavors == (
        ("h100-x8", "reserved"),
        ("h100-x8", "on-demand"),
        ("l4-x1", "spot"),
        ("l4-x1", "on-demand"),
    )
    assert fleet.pods_ready == manager_pods_ready(list(fleet.workers))
    assert fleet.pods_ready.timeout_s > max(w.stack.pods_ready.timeout_s for w in fleet.workers)


def _set(index: int, path: tuple[str, ...], value: Any) -> Callable[[int, Exports], Exports]:
    def change(i: int, given: Exports) -> Exports:
        if i != index:
            return given
        where = given.fleet_worker if path[0] == "fleetWorker" else given.job_platform
        assert where is not None
        target: Any = where
        for key in path[1:-1]:
            target = target[key]
        target[path[-1]] = value
        return given

    return change


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda i, w: dataclasses.replace(w, fleet_worker=None) if i == 1 else w,
            'gpu-platform-fleet:workers[1].stack: got "gpu-platform/gpu-platform/prod-usw2"; '
            "a deployed platform stack with `fleet` set",
        ),
        (
            _set(0, ("fleetWorker", "fleet"), "staging"),
            "a worker of fleet 'prod' (it serves 'staging')",
        ),
        (
            _set(1, ("jobPlatform", "version"), "1-0000"),
            f"`jobPlatform` version {PlatformContract.current_version()} (it has 1-0000): deploy "
            "the worker from this repository's revision",
        ),
        # A worker deployed before the contracts were typed exported revision 2.
        (
            _set(0, ("fleetWorker", "version"), 2.0),
            f"`fleetWorker` version {WorkerContract.current_version()} (it has 2)",
        ),
        (
            _set(0, ("fleetWorker", "trainer", "signingKey"), "pem"),
            "`fleetWorker` as this revision reads it (fleetWorker.trainer.signingKey: unknown key "
            "(did you mean 'signingPublicKey'?)",
        ),
        (
            _set(1, ("jobPlatform", "teams", "research", "localQueue"), None),
            "`jobPlatform` as this revision reads it (jobPlatform.teams.research.localQueue: got "
            "null; Input should be a valid string)",
        ),
        (
            _set(0, ("fleetWorker", "kueueFrameworks"), ["batch/job"]),
            "a worker whose Kueue manages trainer.kubeflow.org/trainjob",
        ),
        (
            _set(1, ("fleetWorker", "vpcCidr"), "10.100.0.0/16"),
            "overlaps the manager (network.vpcCidr)",
        ),
        (
            _set(1, ("fleetWorker", "vpcCidr"), "10.1.128.0/17"),
            "overlaps worker use1",
        ),
        (
            _set(
                1,
                ("jobPlatform", "buckets", "checkpoints"),
                "gpu-prod-use1-checkpoints-123456789012",
            ),
            "no other worker uses (worker use1 has it",
        ),
        # #36 finding 5: a TrainJob's pods take their grace period from the worker's runtime.
        (
            _set(1, ("jobPlatform", "trainingRuntimes"), ["gpu-platform-torch-research"]),
            "a worker with the manager's ClusterTrainingRuntimes",
        ),
    ],
    ids=[
        "no-worker-outputs",
        "other-fleet",
        "other-contract",
        "other-worker-contract",
        "unknown-field",
        "bad-field",
        "missing-kind",
        "cidr-manager",
        "cidr-worker",
        "bucket",
        "other-runtimes",
    ],
)
def test_each_miswiring_is_refused_naming_the_worker(
    read: Read, change: Callable[[int, Exports], Exports], expected: str
) -> None:
    lines = _lines(lambda: read(change))
    assert any(expected in line for line in lines), lines
    assert all(line.startswith("gpu-platform-fleet:workers[") for line in lines), lines


def test_teams_whose_queues_differ_between_workers_are_refused(read: Read) -> None:
    """The manager mirrors a workload into the same namespace and LocalQueue name."""

    def rename(i: int, given: Exports) -> Exports:
        if i == 1:
            assert given.job_platform is not None
            teams = given.job_platform["platformConfig"]["teams"]
            teams[1] = {**teams[1], "namespace": "team-research-west"}
        return given

    lines = _lines(lambda: read(rename))
    assert lines == [
        'gpu-platform-fleet:workers[1].stack: got "gpu-platform/gpu-platform/prod-usw2"; a worker '
        "whose team 'research' matches worker use1's (namespace, LocalQueue and group: "
        "('team-research', 'gpu-platform:team-research') there, ('team-research-west', "
        "'gpu-platform:team-research') here)"
    ]


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"workers": []},
            "gpu-platform-fleet:workers: got []; List should have at least 1 item",
        ),
        (
            {
                "workers": [
                    {"name": "use1", "stack": "a/gpu-platform/x"},
                    {"name": "use1", "stack": "a/gpu-platform/y"},
                ]
            },
            'gpu-platform-fleet:workers[1].name: got "use1"; a name no other worker has',
        ),
        (
            {"workers": [{"name": "w", "stack": "org/other-project/prod"}]},
            'gpu-platform-fleet:workers[0].stack: got "org/other-project/prod"',
        ),
        (
            {"multiKueue": {"dispatcher": "Random"}},
            'gpu-platform-fleet:multiKueue.dispatcher: got "Random"',
        ),
        (
            {
                "network": {
                    "vpcCidr": "10.100.0.0/16",
                    "existingVpc": {
                        "vpcId": "vpc-0123456789abcdef0",
                        "privateSubnetIds": [
                            "subnet-0123456789abcdef0",
                            "subnet-0123456789abcdef1",
                        ],
                    },
                }
            },
            'gpu-platform-fleet:network.existingVpc: got "vpc-0123456789abcdef0"; left out',
        ),
        ({"volcano": True}, "gpu-platform-fleet:volcano: unknown key"),
    ],
)
def test_manager_config_errors_name_the_key(change: dict[str, Any], expected: str) -> None:
    values = {**fleet_values(), **change}
    lines = _lines(lambda: parse_fleet(values))
    assert any(line.startswith(expected) for line in lines), lines


def test_a_worker_rotates_its_token_with_two_distinct_keys() -> None:
    from components.config import parse
    from components.config.load import namespace_values

    def cfg(keys: list[str]) -> Any:
        raw = {**stack_values("prod-use1")}
        raw["gpu-platform:fleet"] = {"name": "prod", "tokenKeys": keys}
        return parse(
            namespace_values(
                {
                    k: v if isinstance(v, str) else __import__("json").dumps(v)
                    for k, v in raw.items()
                }
            )
        )

    assert cfg(["v1", "v2"]).fleet.token_key == "v2"
    lines = _lines(lambda: cfg(["v1", "v1"]))
    assert lines == ['gpu-platform:fleet.tokenKeys: got ["v1", "v1"]; distinct keys (oldest first)']
    lines = _lines(lambda: cfg(["v1", "v2", "v3"]))
    assert lines[0].startswith('gpu-platform:fleet.tokenKeys: got ["v1", "v2", "v3"]')


def test_the_committed_config_parses() -> None:
    cfg = fleet_config()
    assert [w.stack_name for w in cfg.workers] == ["prod-use1", "prod-usw2"]
    assert cfg.multi_kueue.worker_lost_timeout == "15m"


def test_team_deploy_names_a_team_of_the_fleet(read: Read) -> None:
    values = {**fleet_values(), "teamDeploy": {"nobody": {"githubRepo": "o/r"}}}
    lines = _lines(lambda: read(cfg=parse_fleet(values)))
    assert lines == [
        'gpu-platform-fleet:teamDeploy.nobody: got "nobody"; a team of the fleet '
        "(pretrain, research)"
    ]


def test_a_team_job_stack_deploys_to_the_manager_with_its_own_namespaced_roles(
    fleet_prod: Any,
) -> None:
    """The team's CI roles on the manager: its job stack's identity there (jobPlatform names
    them, as a platform's does)."""
    teams = fleet_prod.outputs["jobPlatform"]["teams"]
    assert teams["pretrain"]["deployRoleArn"].endswith(":role/gpu-fleet-prod-pretrain-jobs-deploy")
    assert teams["research"]["deployRoleArn"] is None
    associations = fleet_prod.of_type("aws:eks/accessPolicyAssociation:AccessPolicyAssociation")
    assert {a.inputs["clusterName"] for a in associations} == {"gpu-fleet-prod"}
    assert {
        (a.inputs["policyArn"].rsplit("/", 1)[1], tuple(a.inputs["accessScope"]["namespaces"]))
        for a in associations
    } == {("AmazonEKSEditPolicy", ("team-pretrain",)), ("AmazonEKSViewPolicy", ("team-pretrain",))}


# --- #36 finding 10: the manager's add-ons and the fleet's team namespaces -----------------


def test_the_managers_secrets_namespace_may_not_be_a_fleet_teams(read: Read) -> None:
    values = fleet_values()
    values["secrets"] = {**values.get("secrets", {}), "namespace": "team-research"}
    lines = _lines(lambda: read(cfg=fleet_config(values)))
    assert lines == [
        'gpu-platform-fleet:secrets.namespace: got "team-research"; a namespace no fleet team '
        "uses (team research)"
    ]


def test_a_fleet_team_may_not_take_a_namespace_of_the_managers_add_ons(read: Read) -> None:
    """Workers without CloudWatch logs would let a team take `amazon-cloudwatch`; the manager
    installs the add-on there, so the fleet refuses it."""

    def take(i: int, given: Exports) -> Exports:
        assert given.job_platform is not None
        given.job_platform["platformConfig"]["teams"][1]["namespace"] = "amazon-cloudwatch"
        return given

    lines = _lines(lambda: read(take))
    assert len(lines) == 1, lines
    assert lines[0].startswith(
        'gpu-platform-fleet:workers[0].stack: got "gpu-platform/gpu-platform/prod-use1"; a '
        "worker whose team 'research' has, on the manager too, a namespace of the team's own "
        "(this one belongs to CloudWatch Observability (EKS add-on); the manager's add-ons"
    ), lines
    assert [i.addon.key for i in manager_installed(fleet_config())] == [
        "kueue",
        "kubeflow-trainer",
        "amazon-cloudwatch-observability",
        "external-secrets",
    ]
