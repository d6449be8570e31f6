"""The committed fleet as synthesized: what each worker grants and publishes, what the manager
creates on its own cluster and in the workers' regions, and that every manifest of it is one
the pinned CRDs accept (the stacks' schema tests cover dev and prod; here the fleet's)."""

from __future__ import annotations

import base64
import json
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from components import catalog
from components.config import trainer_runtime_names
from components.platform.fleet import builders
from synth.harness import Registration, SynthResult

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"


def _custom(result: SynthResult, kind: str) -> list[Registration]:
    return [r for r in result.resources if r.type == f"{KUEUE}:{kind}"]


def kueue_refuses(kubeconfig: dict[str, Any]) -> list[str]:
    """Kueue v0.19.2's kubeconfig validation (pkg/controller/admissionchecks/multikueue/
    multikueuecluster.go validateKubeconfig / validateRestConfig), for the fields a kubeconfig
    can carry: what it would refuse."""
    found = []
    for user in kubeconfig.get("users", []):
        auth = user.get("user", {})
        for key in ("tokenFile", "exec", "auth-provider", "username", "password"):
            if key in auth:
                found.append(f"user {key}")
    for cluster in kubeconfig.get("clusters", []):
        spec = cluster.get("cluster", {})
        if spec.get("insecure-skip-tls-verify"):
            found.append("insecure-skip-tls-verify")
        if "certificate-authority" in spec or not spec.get("certificate-authority-data"):
            found.append("CA not inline")
        host = urlparse(spec.get("server", "")).hostname or ""
        if not host:
            found.append("no server")
    return found


@pytest.mark.parametrize("stack", ["prod_use1", "prod_usw2"])
def test_a_worker_grants_its_manager_reads_cluster_wide_and_writes_only_in_team_namespaces(
    stack: str, request: pytest.FixtureRequest
) -> None:
    result: SynthResult = request.getfixturevalue(stack)
    (account,) = [
        a
        for a in result.of_type("kubernetes:core/v1:ServiceAccount")
        if a.inputs["metadata"]["namespace"] == "kueue-system"
    ]
    assert account.inputs["metadata"] == {"name": "multikueue-prod", "namespace": "kueue-system"}
    roles = {
        r.inputs["metadata"]["name"]: r.inputs["rules"]
        for r in result.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole")
    }
    frameworks = catalog.MULTIKUEUE_FRAMEWORKS
    assert roles["gpu-platform-multikueue-prod-read"] == builders.manager_read_rules(frameworks)
    assert roles["gpu-platform-multikueue-prod-write"] == builders.manager_write_rules(frameworks)
    wide = [
        b.inputs["roleRef"]["name"]
        for b in result.of_type("kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding")
        if b.inputs["subjects"][0]["name"] == "multikueue-prod"
    ]
    assert wide == ["gpu-platform-multikueue-prod-read"]
    namespaced = {
        b.inputs["metadata"]["namespace"]: b.inputs["roleRef"]["name"]
        for b in result.of_type("kubernetes:rbac.authorization.k8s.io/v1:RoleBinding")
        if b.inputs["subjects"][0]["name"] == "multikueue-prod"
    }
    assert namespaced == {
        "team-pretrain": "gpu-platform-multikueue-prod-write",
        "team-research": "gpu-platform-multikueue-prod-write",
    }
    reads = {
        (g, r, v)
        for rule in roles["gpu-platform-multikueue-prod-read"]
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    # Read only, and nothing beyond Kueue's Workloads and the dispatched kinds.
    assert {v for _, _, v in reads} == {"get", "list", "watch"}
    assert {r for _, r, _ in reads} == {
        "workloads",
        "jobs",
        "jobs/status",
        "trainjobs",
        "trainjobs/status",
    }
    (token,) = [
        s
        for s in result.of_type("kubernetes:core/v1:Secret")
        if s.inputs.get("type") == "kubernetes.io/service-account-token"
    ]
    assert token.inputs["metadata"]["annotations"] == {
        "kubernetes.io/service-account.name": "multikueue-prod"
    }


def test_the_worker_kubeconfig_is_one_kueue_accepts_and_never_a_stack_output(
    prod_use1: SynthResult,
) -> None:
    # The kubeconfig the worker stores: its own endpoint and CA, the token inline.
    eks = json.loads(prod_use1.outputs["kubeconfig"])
    server, ca = builders.endpoint_of(eks)
    kubeconfig = json.loads(builders.worker_kubeconfig("gpu-prod-use1", server, ca, "token"))
    assert kueue_refuses(kubeconfig) == []
    assert urlparse(server).hostname.endswith(".us-east-1.eks.amazonaws.com")
    assert base64.b64decode(ca)
    # In Secrets Manager, as a secret value (the capture masks Pulumi secrets).
    (version,) = prod_use1.of_type("aws:secretsmanager/secretVersion:SecretVersion")
    assert version.inputs["secretString"] == "[secret]"
    (secret,) = prod_use1.of_type("aws:secretsmanager/secret:Secret")
    assert secret.inputs["name"] == builders.kubeconfig_secret_name("prod", "gpu-prod-use1")
    # The EKS kubeconfig itself (an exec plugin) is what Kueue would refuse.
    assert kueue_refuses(eks) == ["user exec"]
    # The mocked token controller's token appears in no output.
    assert "synth-sa-token-" not in json.dumps(prod_use1.outputs)
    exports = prod_use1.outputs["fleetWorker"]
    assert exports["kubeconfigSecretArn"].startswith("arn:aws:secretsmanager:us-east-1:")
    assert (exports["region"], exports["vpcCidr"], exports["fleet"]) == (
        "us-east-1",
        "10.1.0.0/16",
        "prod",
    )


@pytest.mark.parametrize("worker", ["prod_use1", "prod_usw2"])
def test_only_the_managers_sync_role_and_the_deployer_read_a_workers_kubeconfig(
    worker: str, fleet_prod: SynthResult, request: pytest.FixtureRequest
) -> None:
    from synth.mocks import ACCOUNT_ID, DEPLOYER_ROLE

    result: SynthResult = request.getfixturevalue(worker)
    (secret,) = result.of_type("aws:secretsmanager/secret:Secret")
    (policy,) = result.of_type("aws:secretsmanager/secretPolicy:SecretPolicy")
    (version,) = result.of_type("aws:secretsmanager/secretVersion:SecretVersion")
    assert policy.inputs["secretArn"].endswith(f":{secret.name}")
    assert policy.inputs["blockPublicPolicy"] is True
    (statement,) = json.loads(policy.inputs["policy"])["Statement"]
    assert statement["Effect"] == "Deny" and statement["Principal"] == "*"
    assert statement["Action"] == "secretsmanager:GetSecretValue"
    readers = statement["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]
    # The manager's ESO role, by the name the manager gives it (the worker never reads the
    # manager: the name comes from the fleet), and the role running this `up`, not its session.
    (eso,) = [
        r
        for r in fleet_prod.of_type("aws:iam/role:Role")
        if r.inputs.get("name") == builders.eso_role_name("prod")
    ]
    assert sorted(readers) == sorted(
        [
            f"arn:aws:iam::{ACCOUNT_ID}:role/{eso.inputs['name']}",
            f"arn:aws:iam::{ACCOUNT_ID}:role/{DEPLOYER_ROLE}",
        ]
    )
    # The ESO role is the one its Pod Identity association binds to ESO's service account.
    (association,) = fleet_prod.of_type("aws:eks/podIdentityAssociation:PodIdentityAssociation")
    assert association.inputs["serviceAccount"] == "external-secrets"
    # A version is written (and read back) only once the policy lets the deployer read it.
    assert policy.urn in version.dependencies


def test_more_kubeconfig_readers_are_named_in_the_workers_config() -> None:
    from synth.harness import run_program
    from tests.conftest import stack_values

    reader = "arn:aws:iam::123456789012:role/platform-breakglass"
    fleet = {**stack_values("prod-use1")["gpu-platform:fleet"], "kubeconfigReaders": [reader]}
    result = run_program("prod-use1", overrides={"gpu-platform:fleet": fleet})
    (policy,) = result.of_type("aws:secretsmanager/secretPolicy:SecretPolicy")
    (statement,) = json.loads(policy.inputs["policy"])["Statement"]
    assert reader in statement["Condition"]["ArnNotEquals"]["aws:PrincipalArn"]


def test_a_workers_flavors_carry_its_region_and_each_team_gets_its_regions_data(
    prod_usw2: SynthResult,
) -> None:
    flavors = _custom(prod_usw2, "ResourceFlavor")
    assert flavors
    for flavor in flavors:
        assert flavor.inputs["spec"]["nodeLabels"][catalog.REGION_LABEL] == "us-west-2"
    maps = {
        m.inputs["metadata"]["namespace"]: m.inputs["data"]
        for m in prod_usw2.of_type("kubernetes:core/v1:ConfigMap")
        if m.inputs["metadata"]["name"] == catalog.FLEET_DATA_CONFIGMAP
    }
    assert set(maps) == {"team-pretrain", "team-research"}
    data = maps["team-research"]
    assert data["region"] == "us-west-2"
    assert data["checkpointsBucket"] == prod_usw2.outputs["buckets"]["checkpoints"]
    assert data["trainerImage"] == prod_usw2.outputs["trainerImage"]
    assert data["trainerImageDigest"] == data["trainerImage"].rsplit("@", 1)[1]


def test_the_manager_dispatches_to_every_worker_through_synced_kubeconfigs(
    fleet_prod: SynthResult,
) -> None:
    (config,) = _custom(fleet_prod, "MultiKueueConfig")
    assert config.inputs["spec"]["clusters"] == ["use1", "usw2"]
    clusters = {
        c.inputs["metadata"]["name"]: c.inputs["spec"]
        for c in _custom(fleet_prod, "MultiKueueCluster")
    }
    assert clusters == {
        name: {"clusterSource": {"kubeConfig": {"location": name, "locationType": "Secret"}}}
        for name in ("use1", "usw2")
    }
    (check,) = _custom(fleet_prod, "AdmissionCheck")
    assert check.inputs["spec"]["controllerName"] == catalog.MULTIKUEUE_CONTROLLER
    synced = {
        e.inputs["metadata"]["name"]: e.inputs["spec"]
        for e in fleet_prod.of_type("kubernetes:external-secrets.io/v1:ExternalSecret")
    }
    arns = {
        "use1": fleet_prod.workers["gpu-platform/gpu-platform/prod-use1"].outputs["fleetWorker"][
            "kubeconfigSecretArn"
        ],
        "usw2": fleet_prod.workers["gpu-platform/gpu-platform/prod-usw2"].outputs["fleetWorker"][
            "kubeconfigSecretArn"
        ],
    }
    assert set(synced) == set(arns)
    for name, spec in synced.items():
        assert spec["target"]["name"] == name
        assert spec["data"] == [{"secretKey": "kubeconfig", "remoteRef": {"key": arns[name]}}]
    # No Secret carries a value on the manager: the kubeconfigs arrive through ESO only.
    assert not [s for s in fleet_prod.of_type("kubernetes:core/v1:Secret")]
    (policy,) = [
        p for p in fleet_prod.of_type("aws:iam/rolePolicy:RolePolicy") if p.name == "fleet-eso-read"
    ]
    assert json.loads(policy.inputs["policy"])["Statement"][0]["Resource"] == sorted(arns.values())


def test_the_managers_kueue_dispatches_only_granted_kinds_and_runs_nothing(
    fleet_prod: SynthResult,
) -> None:
    releases = {
        r.inputs["name"]: r.inputs for r in fleet_prod.of_type("kubernetes:helm.sh/v3:Release")
    }
    assert set(releases) == {"kueue", "kubeflow-trainer", "external-secrets"}
    config = yaml.safe_load(
        releases["kueue"]["values"]["managerConfig"]["controllerManagerConfigYaml"]
    )
    assert config["integrations"]["frameworks"] == list(catalog.MULTIKUEUE_FRAMEWORKS)
    assert config["multiKueue"] == {
        "gcInterval": "1m",
        "origin": "gpu-platform-prod",
        "workerLostTimeout": "15m",
        "dispatcherName": "kueue.x-k8s.io/multikueue-dispatcher-all-at-once",
    }
    queues = _custom(fleet_prod, "ClusterQueue")
    assert queues
    for queue in queues:
        spec = queue.inputs["spec"]
        assert spec["admissionChecksStrategy"] == {"admissionChecks": [{"name": "multikueue"}]}
    quotas = fleet_prod.of_type("kubernetes:core/v1:ResourceQuota")
    assert quotas
    for quota in quotas:
        assert quota.inputs["spec"]["hard"]["pods"] == "0"
    runtimes = [r for r in fleet_prod.resources if r.type.endswith(":ClusterTrainingRuntime")]
    assert [r.inputs["metadata"]["name"] for r in runtimes] == sorted(trainer_runtime_names())


def test_the_managers_team_namespaces_carry_the_workers_limit_range(
    fleet_prod: SynthResult, prod_use1: SynthResult, prod_usw2: SynthResult
) -> None:
    # Kueue applies the namespace LimitRange to the manager's copy of every Workload before it
    # dispatches it; a default CPU limit of 100m there refused every fleet job (issue #36,
    # reproduced by the real-engine tier: docs/real-engines.md).
    def ranges(result: SynthResult) -> dict[str, Any]:
        found = {
            r.inputs["metadata"]["namespace"]: r.inputs["spec"]
            for r in result.of_type("kubernetes:core/v1:LimitRange")
        }
        assert found, f"{result.stack} renders no LimitRange"
        return found

    manager = ranges(fleet_prod)
    assert manager == ranges(prod_use1) == ranges(prod_usw2)
    for spec in manager.values():
        assert "cpu" not in spec["limits"][0]["default"]


def test_the_manager_peers_with_each_worker_in_its_region(fleet_prod: SynthResult) -> None:
    providers = {r.urn: r.inputs["region"] for r in fleet_prod.of_type("pulumi:providers:aws")}
    peerings = fleet_prod.of_type("aws:ec2/vpcPeeringConnection:VpcPeeringConnection")
    assert sorted(p.inputs["peerVpcId"] for p in peerings) == sorted(
        w.outputs["fleetWorker"]["vpcId"] for w in fleet_prod.workers.values()
    )
    same = next(p for p in peerings if p.name.endswith("use1"))
    assert same.inputs["autoAccept"] is True and "peerRegion" not in same.inputs
    cross = next(p for p in peerings if p.name.endswith("usw2"))
    assert cross.inputs["peerRegion"] == "us-west-2"
    (accept,) = fleet_prod.of_type(
        "aws:ec2/vpcPeeringConnectionAccepter:VpcPeeringConnectionAccepter"
    )
    # The accepter lives in the worker's region (the peer region's provider).
    assert providers[accept.provider.rsplit("::", 1)[0]] == "us-west-2"
    rules = fleet_prod.of_type("aws:ec2/securityGroupRule:SecurityGroupRule")
    api = [r for r in rules if r.name.endswith("-api")]
    assert {r.inputs["cidrBlocks"][0] for r in api} == {"10.100.0.0/16"}
    assert {(r.inputs["fromPort"], r.inputs["toPort"]) for r in api} == {(443, 443)}
    routes = fleet_prod.of_type("aws:ec2/route:Route")
    to_workers = {r.inputs["destinationCidrBlock"] for r in routes if "-to-worker-" in r.name}
    assert to_workers == {"10.1.0.0/16", "10.2.0.0/16"}
    back = [r for r in routes if "-to-manager-" in r.name]
    assert {r.inputs["destinationCidrBlock"] for r in back} == {"10.100.0.0/16"}
    assert len(back) == sum(
        len(w.outputs["fleetWorker"]["privateRouteTableIds"]) for w in fleet_prod.workers.values()
    )
    # The peering routes are standalone routes in tables that own none inline, here and in the
    # workers: a refresh never folds them into a table's state (network.py docstring).
    for result in (fleet_prod, *fleet_prod.workers.values()):
        tables = result.of_type("aws:ec2/routeTable:RouteTable")
        assert tables and all("routes" not in t.inputs for t in tables), result.stack


def test_checkpoints_and_datasets_replicate_between_every_pair_of_workers(
    fleet_prod: SynthResult,
) -> None:
    configs = fleet_prod.of_type("aws:s3/bucketReplicationConfig:BucketReplicationConfig")
    buckets = {name: w.outputs["buckets"] for name, w in fleet_prod.workers.items()}
    sources = {c.inputs["bucket"] for c in configs}
    assert sources == {
        b[purpose] for b in buckets.values() for purpose in ("checkpoints", "datasets")
    }
    assert configs
    for config in configs:
        (rule,) = config.inputs["rules"]
        destination = rule["destination"]["bucket"].removeprefix("arn:aws:s3:::")
        assert destination != config.inputs["bucket"]
        assert destination in {b for w in buckets.values() for b in w.values()}
        assert rule["sourceSelectionCriteria"]["sseKmsEncryptedObjects"]["status"] == "Enabled"
        assert rule["destination"]["encryptionConfiguration"]["replicaKmsKeyId"].startswith(
            "arn:aws:kms:"
        )
    # The count the report prints is the analysis's (FleetFacts.replication_pairs), per kind.
    rules = sum(len(c.inputs["rules"]) for c in configs)
    assert rules == 2 * fleet_prod.fleet.replication_pairs


def test_the_managers_quota_is_the_sum_of_each_workers(fleet_prod: SynthResult) -> None:
    """FleetFacts.worker_quota holds the terms the manager's quota adds up (the report's
    per-worker column): one per worker, in the workers' order."""
    fleet = fleet_prod.fleet
    workers = [w.name for w in fleet.workers]
    for team in fleet.teams:
        for entry in team.quota:
            terms = fleet.worker_quota[team.name, entry.flavor]
            assert [name for name, _ in terms] == workers
            assert sum(gpus for _, gpus in terms) == entry.gpus


def test_the_eso_role_name_fits_iam_for_the_longest_fleet_name() -> None:
    assert len(builders.eso_role_name("a" * 40)) <= 64  # IAM role names: 64 characters


def test_a_kubeconfig_reader_must_be_a_role_arn(expect_config_error: Any) -> None:
    from tests.conftest import stack_values

    config = stack_values("prod-use1")
    config["gpu-platform:fleet"] = {**config["gpu-platform:fleet"], "kubeconfigReaders": ["*"]}
    expect_config_error(config, "gpu-platform:fleet.kubeconfigReaders[0]", "arn:aws")
