"""The fleet's rules (components/analysis/fleet.py), on inputs built as the program builds them
and without a synth (tests/analysis/fleet_inputs.py): what the manager makes of its workers,
every way the fleet is miswired refused with one line naming the worker's key, and the
manager's teams, flavors and timeouts. The whole-stack counterparts are tests/fleet/."""

from __future__ import annotations

import dataclasses
from dataclasses import astuple
from typing import Any

from components import catalog
from components.analysis.capacity import FlavorCommitment
from components.analysis.fleet import (
    MANAGER_READY_MARGIN_S,
    ManagerQuota,
    WorkerInput,
    _sum_limit,
    fleet_capacity,
    manager_flavors,
    manager_pods_ready,
    manager_teams,
)
from components.analysis.readiness import PodsReady
from components.config import FlavorQuota, TeamDeploy, trainer_runtime_names
from tests.analysis.fleet_inputs import (
    TEST_SIGNING_KEY,
    TEST_TRAINER_IMAGE,
    committed_input,
    fleet_values,
    manager_config,
    read,
    refused,
    worker_config,
)
from tests.conftest import stack_values

USE1 = 'gpu-platform-fleet:workers[0].stack: got "gpu-platform/gpu-platform/prod-use1"; '
USW2 = 'gpu-platform-fleet:workers[1].stack: got "gpu-platform/gpu-platform/prod-usw2"; '


def _on(index: int, **fields: Any) -> Any:
    """A change of worker `index`'s input (its WorkerInput fields replaced)."""

    def change(i: int, given: WorkerInput) -> WorkerInput:
        return dataclasses.replace(given, **fields) if i == index else given

    return change


def _worker(index: int, **fields: Any) -> Any:
    """A change of worker `index`'s `fleetWorker` fields."""

    def change(i: int, given: WorkerInput) -> WorkerInput:
        if i != index:
            return given
        assert given.fleet_worker is not None
        return dataclasses.replace(given, fleet_worker=given.fleet_worker.model_copy(update=fields))

    return change


def _platform(index: int, **fields: Any) -> Any:
    """A change of worker `index`'s `jobPlatform` fields."""

    def change(i: int, given: WorkerInput) -> WorkerInput:
        if i != index:
            return given
        assert given.job_platform is not None
        return dataclasses.replace(given, job_platform=given.job_platform.model_copy(update=fields))

    return change


def _teams(stack: str, change: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """A worker stack's `teams`, each named team's entries updated."""
    teams = stack_values(stack)["gpu-platform:teams"]
    return [{**t, **change.get(t["name"], {})} for t in teams]


# --- the committed fleet ---------------------------------------------------------------------


def test_the_committed_fleet_reads_clean_with_each_workers_facts() -> None:
    fleet = read()
    assert fleet.region == "us-east-1"
    assert fleet.cfg == manager_config()
    assert [(w.index, w.name, w.region, w.label) for w in fleet.workers] == [
        (0, "use1", "us-east-1", "use1 (us-east-1)"),
        (1, "usw2", "us-west-2", "usw2 (us-west-2)"),
    ]
    use1, usw2 = fleet.workers
    assert (use1.stack_ref, usw2.stack_ref) == (
        "gpu-platform/gpu-platform/prod-use1",
        "gpu-platform/gpu-platform/prod-usw2",
    )
    # Each worker's facts are rebuilt from its own config, in its own region.
    assert use1.cfg.cluster.name == "gpu-prod-use1" and usw2.cfg.cluster.name == "gpu-prod-usw2"
    assert {s.labels[catalog.REGION_LABEL] for s in use1.stack.sources} == {"us-east-1"}
    assert {s.labels[catalog.REGION_LABEL] for s in usw2.stack.sources} == {"us-west-2"}
    assert fleet.regions == ("us-east-1", "us-west-2")
    assert fleet.replication_pairs == 2
    assert fleet.trainer_image == TEST_TRAINER_IMAGE
    assert use1.trainer_image == usw2.trainer_image == TEST_TRAINER_IMAGE


def test_the_managers_teams_add_up_every_workers_quota_per_flavor() -> None:
    fleet = read()
    quota = {
        t.name: [
            (
                q.flavor,
                q.gpus,
                q.cpu,
                q.memory_gib,
                q.borrowing_limit_gpus,
                q.lending_limit_gpus,
            )
            for q in t.quota
        ]
        for t in fleet.teams
    }
    # use1 + usw2 (Pulumi.prod-use1.yaml, Pulumi.prod-usw2.yaml); borrowing is bounded only
    # where every worker bounds it (research's l4 spot: 4 + 4).
    assert quota == {
        "pretrain": [
            ("h100-x8-reserved", 16, 384, 4000, None, None),
            ("h100-x8-on-demand", 24, 576, 6000, None, None),
            ("l4-x1-spot", 8, 64, 256, None, None),
        ],
        "research": [
            ("l4-x1-spot", 20, 160, 640, 8, None),
            ("l4-x1-on-demand", 8, 64, 256, None, None),
        ],
    }
    assert [t.deploy for t in fleet.teams] == [None, None]
    assert [(t.name, t.namespace) for t in fleet.teams] == [
        ("pretrain", "team-pretrain"),
        ("research", "team-research"),
    ]
    assert dict(fleet.worker_quota) == {
        ("pretrain", "h100-x8-reserved"): (("use1", 16), ("usw2", 0)),
        ("pretrain", "h100-x8-on-demand"): (("use1", 8), ("usw2", 16)),
        ("pretrain", "l4-x1-spot"): (("use1", 4), ("usw2", 4)),
        ("research", "l4-x1-spot"): (("use1", 8), ("usw2", 12)),
        ("research", "l4-x1-on-demand"): (("use1", 4), ("usw2", 4)),
    }


def test_the_managers_flavors_capacity_and_commitments() -> None:
    fleet = read()
    assert fleet.flavors == (
        ("h100-x8", "reserved"),
        ("h100-x8", "on-demand"),
        ("l4-x1", "spot"),
        ("l4-x1", "on-demand"),
    )
    assert fleet_capacity(fleet.workers) == {
        ("h100-x8", "reserved"): 16,
        ("h100-x8", "on-demand"): 24,
        ("l4-x1", "spot"): 32,
        ("l4-x1", "on-demand"): 8,
    }
    assert fleet.commitments == (
        FlavorCommitment("h100-x8-on-demand", 24, 24),
        FlavorCommitment("h100-x8-reserved", 16, 16),
        FlavorCommitment("l4-x1-on-demand", 8, 8),
        FlavorCommitment("l4-x1-spot", 28, 32),
    )
    assert [g.name for g in fleet.costs.node_groups] == ["system"]


def test_the_managers_pods_ready_is_its_slowest_workers_plus_the_margin() -> None:
    fleet = read()
    assert [w.stack.pods_ready.timeout_s for w in fleet.workers] == [1080, 1080]
    assert MANAGER_READY_MARGIN_S == 300
    assert fleet.pods_ready == PodsReady(1380, None, "23m", "23m")
    # The slowest, not the first: a worker whose own timeout is longer sets it.
    slow = committed_input(
        manager_config().workers[1], scheduling={"waitForPodsReady": {"timeout": "40m"}}
    )
    fleet = read(_on(1, job_platform=slow.job_platform))
    assert [w.stack.pods_ready.timeout_s for w in fleet.workers] == [1080, 2400]
    assert manager_pods_ready(fleet.workers) == PodsReady(2700, None, "45m", "45m")
    assert manager_pods_ready(fleet.workers[:1]) == PodsReady(1380, None, "23m", "23m")


def test_a_worker_knows_its_trainer_as_its_homes() -> None:
    use1, usw2 = read().workers
    # use1 is the home: it builds the trainer; usw2 runs the home's, signed by the home's key.
    assert use1.fleet_trainer is None
    assert usw2.fleet_trainer is not None
    assert (usw2.fleet_trainer.image, usw2.fleet_trainer.public_key) == (
        TEST_TRAINER_IMAGE,
        TEST_SIGNING_KEY,
    )
    assert usw2.trainer_block.home == "gpu-platform/gpu-platform/prod-use1"
    assert usw2.account_id == "123456789012"
    assert use1.refuses(TEST_TRAINER_IMAGE) is None
    assert usw2.refuses(TEST_TRAINER_IMAGE) is None
    refusal = usw2.refuses("docker.io/library/busybox:1")
    assert refusal is not None and refusal.startswith(
        "its trusted-images policy admits 123456789012.dkr.ecr.us-west-2.amazonaws.com, "
        "ghcr.io/gpu-platform and the trainer repository "
        "123456789012.dkr.ecr.us-east-1.amazonaws.com/gpu-prod-use1/trainer only, by digest"
    )


def test_a_trainer_image_without_a_digest_is_none() -> None:
    tagged = TEST_TRAINER_IMAGE.split("@", 1)[0] + ":v1"
    use1, usw2 = read(_platform(0, trainer_image=tagged)).workers
    assert use1.trainer_image is None
    assert usw2.trainer_image == TEST_TRAINER_IMAGE


# --- a worker the manager cannot take (_worker) ----------------------------------------------


def test_an_unreadable_output_names_the_worker_once_per_reason() -> None:
    lines = refused(_on(1, fleet_worker=None, unreadable=("`fleetWorker` version 9", "shape")))
    assert lines == [
        USW2 + "`fleetWorker` version 9: deploy the worker from this repository's revision",
        USW2 + "shape: deploy the worker from this repository's revision",
    ]


def test_a_stack_without_fleet_outputs_is_refused() -> None:
    expected = [
        USW2 + "a deployed platform stack with `fleet` set (it exports no fleetWorker / "
        "jobPlatform: set gpu-platform:fleet and `pulumi up` it first)"
    ]
    assert refused(_on(1, fleet_worker=None)) == expected
    assert refused(_on(1, job_platform=None)) == expected


def test_a_worker_of_another_fleet_is_refused() -> None:
    assert refused(_worker(0, fleet="staging")) == [
        USE1 + "a worker of fleet 'prod' (it serves 'staging')"
    ]


def test_a_worker_whose_kueue_lacks_a_dispatched_kind_is_refused() -> None:
    kinds = [f for f in catalog.KUEUE_FRAMEWORKS if f not in catalog.MULTIKUEUE_FRAMEWORKS]
    missing = ", ".join(catalog.MULTIKUEUE_FRAMEWORKS)
    assert len(catalog.MULTIKUEUE_FRAMEWORKS) > 1
    assert refused(_worker(1, kueue_frameworks=kinds)) == [
        USW2 + f"a worker whose Kueue manages {missing} (the job kinds the manager dispatches: "
        "their CRDs, controllers and Kueue integrations)"
    ]
    # Every kind present, in another order, is no problem.
    read(_worker(1, kueue_frameworks=list(reversed(catalog.KUEUE_FRAMEWORKS))))


def test_a_worker_with_other_runtimes_names_each_difference() -> None:
    names = list(trainer_runtime_names())
    runtimes = [*names[1:], "gpu-platform-torch-extra"]
    assert refused(_platform(1, training_runtimes=runtimes)) == [
        USW2 + "a worker with the manager's ClusterTrainingRuntimes (MultiKueue copies no "
        "runtime, and a TrainJob's pods come from the worker's: kubernetes-sigs/kueue@v0.19.2 "
        "site/content/en/docs/tasks/run/multikueue/trainjob.md L39-50); these differ: "
        f"gpu-platform-torch-extra, {names[0]}"
    ]
    # The same runtimes in another order are the same set.
    read(_platform(1, training_runtimes=list(reversed(names))))


def test_every_problem_of_every_worker_is_named_and_nothing_else_is_judged() -> None:
    """One worker's three problems at once and another worker's; the fleet-wide rules (CIDRs,
    names, teams) wait until every worker could be taken."""

    def change(i: int, given: WorkerInput) -> WorkerInput:
        assert given.fleet_worker is not None and given.job_platform is not None
        if i == 0:
            return dataclasses.replace(given, fleet_worker=None)
        return dataclasses.replace(
            given,
            fleet_worker=given.fleet_worker.model_copy(
                update={
                    "fleet": "staging",
                    "kueue_frameworks": [],
                    # Would overlap the manager: not judged while a worker is refused.
                    "vpc_cidr": "10.100.0.0/16",
                }
            ),
            job_platform=given.job_platform.model_copy(update={"training_runtimes": []}),
        )

    lines = refused(change)
    assert [line[: line.index("; ") + 2] for line in lines] == [USE1] + [USW2] * 3
    assert "a worker of fleet 'prod' (it serves 'staging')" in lines[1]
    assert "a worker whose Kueue manages" in lines[2]
    assert "a worker with the manager's ClusterTrainingRuntimes" in lines[3]


# --- the fleet's network and names -----------------------------------------------------------


def test_a_worker_cidr_overlapping_the_managers_is_refused() -> None:
    assert refused(_worker(1, vpc_cidr="10.100.64.0/18")) == [
        USW2 + "a VPC whose CIDR overlaps no other of the fleet (10.100.64.0/18 overlaps the "
        "manager (network.vpcCidr))"
    ]


def test_a_worker_cidr_overlapping_another_workers_is_refused() -> None:
    assert refused(_worker(1, vpc_cidr="10.0.0.0/8")) == [
        USW2 + "a VPC whose CIDR overlaps no other of the fleet (10.0.0.0/8 overlaps the "
        "manager (network.vpcCidr))"
    ]
    assert refused(_worker(1, vpc_cidr="10.1.128.0/17")) == [
        USW2 + "a VPC whose CIDR overlaps no other of the fleet (10.1.128.0/17 overlaps worker "
        "use1)"
    ]
    # Adjacent is not overlapping: 10.0.0.0/16 ends where use1's 10.1.0.0/16 starts.
    read(_worker(1, vpc_cidr="10.0.0.0/16"))


def test_every_overlap_is_named_against_the_first_it_meets() -> None:
    cfg = manager_config()
    first, second = (committed_input(ref) for ref in cfg.workers)
    assert second.fleet_worker is not None
    third = dataclasses.replace(
        committed_input(
            cfg.workers[1], cluster={**_cluster("prod-usw2"), "name": "gpu-prod-usw2-b"}
        ),
        ref=cfg.workers[1].model_copy(update={"name": "usw2b"}),
    )
    assert third.fleet_worker is not None
    inputs = [
        first,
        dataclasses.replace(
            second, fleet_worker=second.fleet_worker.model_copy(update={"vpc_cidr": "10.1.0.0/17"})
        ),
        dataclasses.replace(
            third, fleet_worker=third.fleet_worker.model_copy(update={"vpc_cidr": "10.1.0.0/24"})
        ),
    ]
    lines = [line for line in refused(inputs=inputs) if "VPC" in line]
    assert [line.split("(", 1)[1] for line in lines] == [
        "10.1.0.0/17 overlaps worker use1)",
        "10.1.0.0/24 overlaps worker use1)",
    ]


def _value(stack: str, key: str) -> dict[str, Any]:
    """A worker stack's `gpu-platform:<key>`, decoded (a copy)."""
    value = stack_values(stack)[f"gpu-platform:{key}"]
    assert isinstance(value, dict)
    return value


def _cluster(stack: str) -> dict[str, Any]:
    return _value(stack, "cluster")


def test_a_cluster_name_two_workers_use_is_refused() -> None:
    cfg = manager_config()
    clash = committed_input(
        cfg.workers[1],
        cluster={**_cluster("prod-usw2"), "name": "gpu-prod-use1"},
        storage={**_value("prod-usw2", "storage"), "bucketPrefix": "gpu-prod-usw2"},
    )
    lines = refused(_on(1, job_platform=clash.job_platform))
    assert lines == [
        USW2 + "a worker whose cluster gpu-prod-use1 no other worker uses (worker use1 has it: "
        "set its cluster.name or storage.bucketPrefix apart)"
    ]


def test_each_bucket_two_workers_use_is_refused_in_name_order() -> None:
    use1 = committed_input(manager_config().workers[0])
    assert use1.job_platform is not None
    buckets = use1.job_platform.buckets
    assert len(buckets) > 1
    lines = refused(_platform(1, buckets=dict(buckets)))
    assert lines == [
        USW2 + f"a worker whose bucket {name} no other worker uses (worker use1 has it: "
        "set its cluster.name or storage.bucketPrefix apart)"
        for name in sorted(buckets.values())
    ]


def test_a_name_three_workers_use_names_the_first_that_had_it() -> None:
    cfg = manager_config()
    first, second = (committed_input(ref) for ref in cfg.workers)
    same = {**_cluster("prod-usw2"), "name": "gpu-prod-use1"}
    third = dataclasses.replace(
        committed_input(cfg.workers[1], cluster=same),
        ref=cfg.workers[1].model_copy(update={"name": "usw2b"}),
    )
    assert third.fleet_worker is not None and third.job_platform is not None
    assert second.job_platform is not None
    third = dataclasses.replace(
        third,
        fleet_worker=third.fleet_worker.model_copy(update={"vpc_cidr": "10.3.0.0/16"}),
        job_platform=third.job_platform.model_copy(update={"buckets": {}}),
    )
    second = dataclasses.replace(
        committed_input(cfg.workers[1], cluster=same),
    )
    lines = refused(inputs=[first, second, third])
    assert [line for line in lines if "cluster gpu-prod-use1" in line] == [
        USW2 + "a worker whose cluster gpu-prod-use1 no other worker uses (worker use1 has it: "
        "set its cluster.name or storage.bucketPrefix apart)",
        'gpu-platform-fleet:workers[2].stack: got "gpu-platform/gpu-platform/prod-usw2"; a '
        "worker whose cluster gpu-prod-use1 no other worker uses (worker use1 has it: set its "
        "cluster.name or storage.bucketPrefix apart)",
    ]


# --- the fleet's teams -----------------------------------------------------------------------


def test_a_team_whose_namespace_differs_on_a_worker_is_refused() -> None:
    teams = _teams("prod-usw2", {"research": {"namespace": "team-research-west"}})
    clash = committed_input(manager_config().workers[1], teams=teams)
    assert refused(_on(1, job_platform=clash.job_platform)) == [
        USW2 + "a worker whose team 'research' matches worker use1's (namespace, LocalQueue and "
        "group: ('team-research', 'gpu-platform:team-research') there, ('team-research-west', "
        "'gpu-platform:team-research') here)"
    ]


def test_a_team_missing_or_extra_on_a_worker_is_refused_in_name_order() -> None:
    teams = _teams("prod-usw2", {"research": {"name": "alpha", "group": "gpu-platform:alpha"}})
    clash = committed_input(manager_config().workers[1], teams=teams)
    # teamDeploy is checked against the first worker's teams (research: there).
    values = fleet_values()
    values["teamDeploy"] = {**values["teamDeploy"], "research": values["teamDeploy"]["pretrain"]}
    assert refused(_on(1, job_platform=clash.job_platform), cfg=manager_config(values)) == [
        USW2 + "a worker whose team 'alpha' matches worker use1's (namespace, LocalQueue and "
        "group: None there, ('team-research', 'gpu-platform:alpha') here)",
        USW2 + "a worker whose team 'research' matches worker use1's (namespace, LocalQueue and "
        "group: ('team-research', 'gpu-platform:team-research') there, None here)",
    ]


def test_the_managers_secrets_namespace_may_not_be_a_fleet_teams() -> None:
    values = fleet_values()
    values["secrets"] = {**values.get("secrets", {}), "namespace": "team-research"}
    assert refused(cfg=manager_config(values)) == [
        'gpu-platform-fleet:secrets.namespace: got "team-research"; a namespace no fleet team '
        "uses (team research)"
    ]


def test_a_fleet_team_may_not_take_a_namespace_of_the_managers_add_ons() -> None:
    """The workers have no CloudWatch logs, so a team there may take `amazon-cloudwatch`; the
    manager installs the add-on there."""

    def take(i: int, given: WorkerInput) -> WorkerInput:
        # As a worker would export it: its own check passes where it installs no CloudWatch.
        assert given.job_platform is not None
        cfg = given.job_platform.platform_config
        teams = [
            t.model_copy(update={"namespace": "amazon-cloudwatch"}) if t.name == "research" else t
            for t in cfg.teams
        ]
        platform_config = cfg.model_copy(update={"teams": teams})
        return dataclasses.replace(
            given,
            job_platform=given.job_platform.model_copy(update={"platform_config": platform_config}),
        )

    (line,) = refused(take)
    assert line.startswith(
        USE1 + "a worker whose team 'research' has, on the manager too, a namespace of the "
        "team's own (this one belongs to "
    )
    assert "the manager's add-ons and Kubernetes use" in line


def test_team_deploy_names_a_team_of_the_fleet() -> None:
    values = fleet_values()
    values["teamDeploy"] = {**values["teamDeploy"], "vision": values["teamDeploy"]["pretrain"]}
    assert refused(cfg=manager_config(values)) == [
        'gpu-platform-fleet:teamDeploy.vision: got "vision"; a team of the fleet (pretrain, '
        "research)"
    ]


# --- the manager's queues from its workers' --------------------------------------------------


def _quota(gpus: int, borrowing: int | None = None, lending: int | None = None) -> FlavorQuota:
    return FlavorQuota(
        gpu_class="l4-x1",
        capacity_type="spot",
        gpus=gpus,
        cpu=gpus * 8,
        memory_gib=gpus * 32,
        borrowing_limit_gpus=borrowing,
        lending_limit_gpus=lending,
    )


def test_sum_limit_is_bounded_only_where_every_worker_bounds_it() -> None:
    assert _sum_limit([4, 6]) == 10
    assert _sum_limit([0, 0]) == 0
    assert _sum_limit([4, None]) is None
    assert _sum_limit([None, 4]) is None
    assert _sum_limit([]) == 0


def test_manager_teams_sum_each_limit_and_drop_the_deploy_identity() -> None:
    fleet = read()
    use1, usw2 = fleet.workers

    # A worker's team may have a CI identity of its own; the manager's has its own
    # (teamDeploy), never the worker's.
    deploy = TeamDeploy(github_repo="gpu-platform/gpu-platform", environments=["TEST"])

    def with_quota(worker: Any, quota: list[FlavorQuota]) -> Any:
        teams = [
            t.model_copy(update={"quota": quota, "deploy": deploy}) if t.name == "research" else t
            for t in worker.cfg.teams
        ]
        stack = dataclasses.replace(
            worker.stack, cfg=worker.cfg.model_copy(update={"teams": teams})
        )
        return dataclasses.replace(worker, stack=stack)

    workers = [with_quota(use1, [_quota(4, 2, 1)]), with_quota(usw2, [_quota(8, 3, 5)])]
    assert [next(t for t in w.cfg.teams if t.name == "research").deploy for w in workers] == [
        deploy,
        deploy,
    ]
    research = next(t for t in manager_teams(workers) if t.name == "research")
    assert research.quota == [
        ManagerQuota(
            gpu_class="l4-x1",
            capacity_type="spot",
            gpus=12,
            cpu=96,
            memory_gib=384,
            borrowing_limit_gpus=5,
            lending_limit_gpus=6,
            workers=(_quota(4, 2, 1), _quota(8, 3, 5)),
        )
    ]
    # What its ClusterQueue carries: each worker's rendered quantities added up.
    assert [astuple(q) for q in research.quota[0].quantities()] == [
        ("cpu", 96, 16 + 24, 8 + 40),
        ("memory", 384, 64 + 96, 32 + 160),
        ("gpus", 12, 5, 6),
    ]
    assert research.deploy is None


def test_manager_flavors_order_reserved_spot_on_demand_within_a_class() -> None:
    cfg = worker_config("prod-use1")
    teams = [
        t.model_copy(
            update={
                "quota": [
                    q.model_copy(update={"gpu_class": gpu_class, "capacity_type": capacity})
                    for gpu_class, capacity in flavors
                    for q in t.quota[:1]
                ]
            }
        )
        for t, flavors in zip(
            cfg.teams,
            [
                [("l4-x1", "on-demand"), ("h100-x8", "spot")],
                [("l4-x1", "reserved"), ("h100-x8", "on-demand"), ("l4-x1", "on-demand")],
            ],
            strict=True,
        )
    ]
    assert manager_flavors(teams) == (
        ("h100-x8", "spot"),
        ("h100-x8", "on-demand"),
        ("l4-x1", "reserved"),
        ("l4-x1", "on-demand"),
    )
    assert manager_flavors([]) == ()
