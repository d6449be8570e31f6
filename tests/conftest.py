"""Shared fixtures: synthesized stacks (once per session) and throw-away stack directories."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import settings

from components import catalog
from synth.harness import PROJECT_ROOT, SynthResult, load_stack_config, run_program
from synth.jobs import run_job_stack

#: Upstream CRDs, chart values and CSI parameter lists, vendored (schemas/SOURCES.md).
SCHEMAS = PROJECT_ROOT / "schemas"


#: The mutation run's profile (`--hypothesis-profile=mutation`, pyproject [tool.mutmut]): the same
#: examples on every run and no example database, so a mutant's verdict does not depend on the
#: luck of the draw or on what an earlier mutant's run stored.
settings.register_profile("mutation", derandomize=True, database=None)


#: Fixtures that synthesize a whole stack (seconds each): a test that uses one is marked `synth`,
#: which the mutation run leaves out (pyproject [tool.mutmut]) to keep every mutant's run short.
#: `expect_config_error` is not among them: an invalid config stops the synth before anything is
#: registered (milliseconds), and those tests are what pins the config-error rules.
SYNTH_FIXTURES = frozenset(
    {
        "dev",
        "prod",
        "prod_jobs",
        "prod_karpenter",
        "prod_static",
        "prod_use1",
        "prod_usw2",
        "fleet_prod",
        "pretrain_fleet",
        "research_dev",
        "research_prod",
        "pretrain_prod",
        "make_stack",
    }
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if "expect_config_error" in fixtures:
            fixtures.discard("make_stack")  # its project directory only (see SYNTH_FIXTURES)
        params = getattr(item, "callspec", None)
        # A test parametrized by a stack's name reaches the fixture through `request`.
        if fixtures & SYNTH_FIXTURES or (
            "request" in fixtures
            and params is not None
            and any(isinstance(v, str) and v in SYNTH_FIXTURES for v in params.params.values())
        ):
            item.add_marker(pytest.mark.synth)
    if config.getoption("hypothesis_profile", None) == "mutation":
        # mutmut stops a mutant's run at the first failing test (`-x`): the boundary tests,
        # the quickest and sharpest, go first.
        items.sort(key=lambda item: "test_boundaries.py" not in item.nodeid)


def pytest_configure(config: pytest.Config) -> None:
    # The suite synthesizes stacks dozens of times in one process: collect as synth does.
    from synth.__main__ import GC_THRESHOLD

    gc.set_threshold(GC_THRESHOLD, 30, 30)


@pytest.fixture(scope="session")
def dev() -> SynthResult:
    return run_program("dev")


@pytest.fixture(scope="session")
def prod() -> SynthResult:
    return run_program("prod")


#: GPU managed groups that hold a node from the start (minSize 1) and that the cluster-autoscaler
#: may grow, for tests of the managed-group path (`node_group_overrides` puts them into prod).
STATIC_GPU_GROUPS: list[dict[str, Any]] = [
    {
        "name": "h100-od",
        "capacityType": "on-demand",
        "instanceTypes": ["p5.48xlarge"],
        "minSize": 1,
        "desiredSize": 1,
        "maxSize": 2,
    },
    {
        "name": "l4-spot",
        "capacityType": "spot",
        "instanceTypes": ["g6.xlarge", "g6.2xlarge", "g6.4xlarge"],
        "minSize": 1,
        "desiredSize": 1,
        "maxSize": 16,
    },
    {
        "name": "l4-od",
        "capacityType": "on-demand",
        "instanceTypes": ["g6.4xlarge"],
        "minSize": 1,
        "desiredSize": 1,
        "maxSize": 4,
    },
]


#: Prod's on-demand L40S capacity as a Karpenter NodePool (ng-l40s-od's before it was a group).
KP_L40S_OD: dict[str, Any] = {
    "name": "kp-l40s-od",
    "gpuClass": "l40s-x1",
    "capacityType": "on-demand",
    "limits": {"gpus": 4},
}


def node_group_overrides(groups: list[dict[str, Any]]) -> dict[str, Any]:
    """Prod's config with `groups` as its GPU node groups: the Karpenter GPU pools serving the
    same (GPU class, capacity type) removed (one provisioner per flavor), the teams' quota
    entries no source serves any more dropped, and the NCCL test on the first group."""
    values = stack_values("prod")
    served = set()
    for group in groups:
        capacity = (
            "reserved" if group["capacityType"] == "capacity-block" else group["capacityType"]
        )
        types = group["instanceTypes"]
        row = catalog.instance(types[0])
        served.add((f"{row.gpu_model}-x{row.gpus}", capacity))
    karpenter = values["gpu-platform:karpenter"]
    pools = [
        pool
        for pool in karpenter["pools"]
        if (pool.get("gpuClass"), pool.get("capacityType", "on-demand")) not in served
    ]
    if ("l40s-x1", "on-demand") not in served:
        # Prod's on-demand L40S as the NodePool it was before ng-l40s-od: these variants keep
        # their third NodePool and an L40S source (none places a class by the network).
        pools.insert(-1, dict(KP_L40S_OD))
    served |= {(p.get("gpuClass"), p.get("capacityType", "on-demand")) for p in pools}
    teams = [
        {
            **team,
            "quota": [q for q in team["quota"] if (q["gpuClass"], q["capacityType"]) in served],
        }
        for team in values["gpu-platform:teams"]
    ]
    validation = values["gpu-platform:validation"]
    return {
        "gpu-platform:nodeGroups": {**values["gpu-platform:nodeGroups"], "gpu": groups},
        "gpu-platform:karpenter": {**karpenter, "pools": pools},
        "gpu-platform:teams": teams,
        "gpu-platform:validation": {
            **validation,
            "nccl": {**validation["nccl"], "pool": groups[0]["name"]},
        },
        **without_topology(values),
    }


def without_topology(values: dict[str, Any]) -> dict[str, Any]:
    """`values`' scheduling section with no class placed by the network: for variants that move
    a class prod places by the network (l40s-x1) to Karpenter or drop its groups, which the
    opt-in would refuse (docs/topology.md)."""
    scheduling = dict(values.get("gpu-platform:scheduling") or {})
    scheduling.pop("topology", None)
    return {"gpu-platform:scheduling": scheduling}


def karpenter_gpu_overrides() -> dict[str, Any]:
    """Prod with every GPU node from Karpenter: its node groups' capacity as the NodePools it
    was before the groups (kp-h100-od in the EFA placement group, kp-l40s-spot, kp-l40s-od),
    no class placed by the network, so tests of
    Karpenter-only behaviour (the gpu-efa node class) keep a stack that has it."""
    values = stack_values("prod")
    karpenter = values["gpu-platform:karpenter"]
    pools = list(karpenter["pools"])
    pools.insert(
        1,
        {
            "name": "kp-h100-od",
            "gpuClass": "h100-x8",
            "capacityType": "on-demand",
            "limits": {"gpus": 16},
        },
    )
    pools.insert(
        4,
        {
            "name": "kp-l40s-spot",
            "gpuClass": "l40s-x1",
            "capacityType": "spot",
            "limits": {"gpus": 16},
        },
    )
    if not any(p["name"] == KP_L40S_OD["name"] for p in pools):
        pools.insert(5, dict(KP_L40S_OD))
    validation = values["gpu-platform:validation"]
    return {
        "gpu-platform:nodeGroups": {**values["gpu-platform:nodeGroups"], "gpu": []},
        "gpu-platform:karpenter": {**karpenter, "pools": pools},
        "gpu-platform:validation": {
            **validation,
            "nccl": {**validation["nccl"], "pool": "kp-h100-od"},
        },
        **without_topology(values),
    }


# The committed team job stacks, each against the session's platform synth (shared by the job
# stack tests and the golden hashes).
@pytest.fixture(scope="session")
def research_dev(dev: SynthResult) -> SynthResult:
    return run_job_stack("research-dev", platform=dev)


@pytest.fixture(scope="session")
def pretrain_prod(prod: SynthResult) -> SynthResult:
    return run_job_stack("pretrain-prod", platform=prod)


@pytest.fixture(scope="session")
def research_prod(prod: SynthResult) -> SynthResult:
    return run_job_stack("research-prod", platform=prod)


@pytest.fixture(scope="session")
def prod_use1() -> SynthResult:
    """The prod fleet's us-east-1 worker (Pulumi.prod-use1.yaml, docs/fleet.md)."""
    return run_program("prod-use1")


@pytest.fixture(scope="session")
def prod_usw2(prod_use1: SynthResult) -> SynthResult:
    """The prod fleet's us-west-2 worker: it runs prod-use1's trainer (its trainer home)."""
    return run_program("prod-usw2", workers={"prod-use1": prod_use1})


@pytest.fixture(scope="session")
def fleet_prod(prod_use1: SynthResult, prod_usw2: SynthResult) -> SynthResult:
    """The prod fleet's manager (fleet/Pulumi.prod.yaml) over the session's worker synths."""
    from synth.fleet import run_fleet

    return run_fleet("prod", workers={"prod-use1": prod_use1, "prod-usw2": prod_usw2})


@pytest.fixture(scope="session")
def pretrain_fleet(fleet_prod: SynthResult) -> SynthResult:
    """Team pretrain's job stack on the prod fleet's manager."""
    return run_job_stack("pretrain-fleet", platform=fleet_prod)


@pytest.fixture(scope="session")
def prod_karpenter() -> SynthResult:
    """Prod with all GPU capacity in Karpenter NodePools (karpenter_gpu_overrides)."""
    return run_program("prod", overrides=karpenter_gpu_overrides())


@pytest.fixture(scope="session")
def prod_static() -> SynthResult:
    """Prod with the GPU managed groups of STATIC_GPU_GROUPS instead of its own (each holding a
    node from the start; the cluster-autoscaler may grow them)."""
    return run_program("prod", overrides=node_group_overrides(STATIC_GPU_GROUPS))


def stack_values(stack: str) -> dict[str, Any]:
    """A stack's `gpu-platform:` values, decoded, for tests to modify."""
    _, config, _ = load_stack_config(stack)
    out: dict[str, Any] = {}
    for key, value in config.items():
        try:
            out[key] = json.loads(value) if value[:1] in "{[" else value
        except json.JSONDecodeError:
            out[key] = value
    return out


@pytest.fixture
def make_stack(tmp_path: Path) -> Callable[[dict[str, Any]], Path]:
    """Write a project directory (links to the real program) with a stack file `Pulumi.t.yaml`."""

    def make(config: dict[str, Any]) -> Path:
        for name in ("__main__.py", "Pulumi.yaml", "components"):
            (tmp_path / name).symlink_to(PROJECT_ROOT / name)
        (tmp_path / "Pulumi.t.yaml").write_text(yaml.safe_dump({"config": config}))
        # The policy pack runs with the config of the stack the test's config came from.
        base = "dev" if config.get("gpu-platform:environment") == "dev" else "prod"
        (tmp_path / "policies").mkdir()
        (tmp_path / "policies" / "config.t.json").symlink_to(
            PROJECT_ROOT / "policies" / f"config.{base}.json"
        )
        return tmp_path

    return make


@pytest.fixture
def expect_config_error(
    make_stack: Callable[[dict[str, Any]], Path], capsys: pytest.CaptureFixture[str]
) -> Callable[[dict[str, Any], str, str], None]:
    """Synthesize `config` as stack `t` and assert the user-facing contract of a config error:
    exit 2, no traceback, a line naming `path` that says what is allowed, nothing written."""
    from synth import __main__ as synth_cli

    def check(config: dict[str, Any], path: str, allowed: str) -> None:
        project = make_stack(config)
        rc = synth_cli.main(["--stack", "t", "--project-dir", str(project)])
        err = capsys.readouterr().err
        assert rc == synth_cli.EXIT_CONFIG, err
        assert "Traceback" not in err
        lines = [line for line in err.splitlines() if line.startswith(f"{path}:")]
        assert lines, f"no line names {path}:\n{err}"
        assert any(allowed in line for line in lines), err
        assert not (project / "build").exists(), "an invalid config must write nothing"

    return check


def job_stack_jobs(env: str) -> list[dict[str, Any]]:
    """The training jobs of every team job stack on `env` (jobs/Pulumi.<team>-<env>.yaml), each
    with its team: what the platform stack would hold if those jobs were declared in it. Tests
    of job rendering and analysis use them on the platform config (the same components and
    rules run in the job project, tests/jobs)."""
    jobs: list[dict[str, Any]] = []
    for path in sorted((PROJECT_ROOT / "jobs").glob(f"Pulumi.*-{env}.yaml")):
        config = yaml.safe_load(path.read_text())["config"]
        team = config["gpu-platform-jobs:team"]
        jobs += [{"team": team, **job} for job in config["gpu-platform-jobs:trainingJobs"]]
    return jobs


def values_with_jobs(stack: str) -> dict[str, Any]:
    """`stack_values(stack)` with the job stacks' jobs on that environment in `trainingJobs`."""
    values = stack_values(stack)
    values["gpu-platform:trainingJobs"] = [
        *values.get("gpu-platform:trainingJobs", []),
        *job_stack_jobs(stack),
    ]
    return values


@pytest.fixture(scope="session")
def prod_jobs() -> SynthResult:
    """Prod with its teams' job-stack jobs declared in the platform (see `job_stack_jobs`)."""
    return run_program(
        "prod",
        overrides={
            "gpu-platform:trainingJobs": values_with_jobs("prod")["gpu-platform:trainingJobs"]
        },
    )


#: (case id, mutation of a stack's values, key path the error must name, fragment of what is
#: allowed) — one invalid config.
ConfigCase = tuple[str, Callable[[dict[str, Any]], Any], str, str]


def config_error_test(
    cases: list[ConfigCase], base: Callable[[], dict[str, Any]]
) -> Callable[..., None]:
    """A parametrized test for a table of invalid configs: each case mutates `base()` and must
    exit 2 naming its key path, with no traceback and nothing written (`expect_config_error`).
    Assign it to a `test_...` name in the module that owns the table."""

    @pytest.mark.parametrize(
        ("case", "mutate", "path", "allowed"), cases, ids=[c[0] for c in cases]
    )
    def test(
        case: str,
        mutate: Callable[[dict[str, Any]], Any],
        path: str,
        allowed: str,
        expect_config_error: Callable[[dict[str, Any], str, str], None],
    ) -> None:
        cfg = base()
        mutate(cfg)
        expect_config_error(cfg, path, allowed)

    return test


def l40s_topology_values() -> dict[str, Any]:
    """Prod's values with its L40S capacity in managed node groups only (the on-demand pool
    kp-l40s-od as the autoscaled group ng-l40s-od) and l40s-x1 placed by the network
    (`scheduling.topology.gpuClasses`): what docs/topology.md's example stack is. Idempotent on
    a prod stack file that already does so."""
    values = stack_values("prod")
    karpenter = values["gpu-platform:karpenter"]
    karpenter["pools"] = [p for p in karpenter["pools"] if p.get("gpuClass") != "l40s-x1"]
    groups = values["gpu-platform:nodeGroups"]["gpu"]
    if not any(g["name"] == "ng-l40s-od" for g in groups):
        groups.append(
            {
                "name": "ng-l40s-od",
                "capacityType": "on-demand",
                "instanceTypes": ["g6e.xlarge", "g6e.2xlarge", "g6e.4xlarge"],
                "minSize": 0,
                "desiredSize": 0,
                "maxSize": 4,
            }
        )
    scheduling = values.get("gpu-platform:scheduling") or {}
    classes = scheduling.get("topology", {}).get("gpuClasses", [])
    values["gpu-platform:scheduling"] = {
        **scheduling,
        "topology": {"gpuClasses": sorted({*classes, "l40s-x1"})},
    }
    return values


#: A fixed group of H100s (an ODCR's nodes held all the time: min = desired = max), the one
#: source of h100-x8 in `h100_static_values`.
STATIC_H100_GROUP: dict[str, Any] = {
    "name": "ng-h100-static",
    "capacityType": "on-demand",
    "instanceTypes": ["p5.48xlarge"],
    "minSize": 6,
    "desiredSize": 6,
    "maxSize": 6,
}


def h100_static_values(nodes: int = 6) -> dict[str, Any]:
    """`l40s_topology_values` with h100-x8 served by one fixed managed group of `nodes` p5s
    (no Karpenter reservation, no autoscaled group) and placed by the network too: a class
    where nodes exist before a gang, so `required` at a network layer can be met."""
    values = l40s_topology_values()
    karpenter = values["gpu-platform:karpenter"]
    karpenter["pools"] = [p for p in karpenter["pools"] if p.get("gpuClass") != "h100-x8"]
    karpenter.pop("reservations", None)
    group = {**STATIC_H100_GROUP, "minSize": nodes, "desiredSize": nodes, "maxSize": nodes}
    node_groups = values["gpu-platform:nodeGroups"]
    node_groups["gpu"] = [group] + [
        g for g in node_groups["gpu"] if not g["instanceTypes"][0].startswith("p5")
    ]
    # Research may run a gang of 4 there, pretrain one of 2 (6 nodes: 48 GPUs in all).
    shares = {"research": 4, "pretrain": 2}
    for team in values["gpu-platform:teams"]:
        team["quota"] = [q for q in team["quota"] if q["gpuClass"] != "h100-x8"]
        share = shares.get(team["name"], 0) * nodes // 6
        if share:
            team["quota"].append(
                {
                    "gpuClass": "h100-x8",
                    "capacityType": "on-demand",
                    "gpus": 8 * share,
                    "cpu": 192 * share,
                    "memoryGib": 2000 * share,
                }
            )
            limits = team["limits"]
            others = [q for q in team["quota"] if q["gpuClass"] != "h100-x8"]
            limits["gpus"] = max(limits["gpus"], 8 * share + sum(q["gpus"] for q in others))
            limits["cpu"] = max(limits["cpu"], 192 * share + sum(q["cpu"] for q in others))
            limits["memoryGib"] = max(
                limits["memoryGib"], 2000 * share + sum(q["memoryGib"] for q in others)
            )
    values["gpu-platform:validation"]["nccl"]["pool"] = group["name"]
    topology = values["gpu-platform:scheduling"]["topology"]
    topology["gpuClasses"] = sorted({*topology["gpuClasses"], "h100-x8"})
    return values
