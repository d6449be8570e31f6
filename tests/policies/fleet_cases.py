"""Policy cases of the fleet rules (policies/rules/fleet.py) and of what a fleet's manager changes
in other rules (a MultiKueue ClusterQueue's quota is the workers'; a namespace that allows no
pod needs no image admission): for each, a violating and a compliant stack."""

from __future__ import annotations

import copy
from typing import Any

import yaml

from components import catalog
from components.config import FlavorQuota, TeamConfig
from components.platform.fleet import builders
from components.platform.fleet.manager import manager_queue_spec
from tests.policies.policy_cases import Case, Res, r

KUEUE = "kubernetes:kueue.x-k8s.io/v1beta2"
TEAM = TeamConfig.model_validate(
    {
        "name": "research",
        "namespace": "team-research",
        "group": "gpu-platform:team-research",
        "datasetPrefix": "research",
        "quota": [
            FlavorQuota(gpu_class="l4-x1", capacity_type="spot", gpus=8, cpu=64, memory_gib=256)
        ],
        "limits": {"gpus": 8, "cpu": 64, "memoryGib": 256},
    }
)


def _custom(kind: str, spec: dict[str, Any]) -> Res:
    return r(f"{KUEUE}:{kind}", spec["metadata"]["name"], {**spec, "spec": spec["spec"]})


def _release(frameworks: list[str]) -> Res:
    config = {"integrations": {"frameworks": frameworks}}
    return r(
        "kubernetes:helm.sh/v3:Release",
        "kueue",
        {
            "name": "kueue",
            "chart": "oci://registry.k8s.io/kueue/charts/kueue",
            "values": {"managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(config)}},
        },
    )


def manager(
    *,
    clusters: list[str] | None = None,
    frameworks: list[str] | None = None,
    queue: dict[str, Any] | None = None,
    secret: bool = True,
    local_to: str = "research",
) -> list[Res]:
    """A wired manager; each keyword breaks one thing."""
    names = ["use1"] if clusters is None else clusters
    out = [
        _custom("AdmissionCheck", builders.admission_check("prod")),
        _custom("MultiKueueConfig", builders.multikueue_config("prod", names)),
        _custom("MultiKueueCluster", builders.multikueue_cluster("use1")),
        _release(list(catalog.MULTIKUEUE_FRAMEWORKS) if frameworks is None else frameworks),
        r(
            f"{KUEUE}:ClusterQueue",
            "cq",
            {
                "metadata": {"name": "research"},
                "spec": queue or manager_queue_spec(TEAM, "gpu-platform"),
            },
        ),
        r(
            f"{KUEUE}:LocalQueue",
            "lq",
            {
                "metadata": {"name": "research", "namespace": "team-research"},
                "spec": {"clusterQueue": local_to},
            },
        ),
    ]
    if secret:
        spec = builders.kubeconfig_external_secret("use1", "us-east-1", "arn:aws:secretsmanager:x")
        out.append(r("kubernetes:external-secrets.io/v1:ExternalSecret", "es-use1", {**spec}))
    return out


def _with_provisioning() -> dict[str, Any]:
    spec = copy.deepcopy(manager_queue_spec(TEAM, "gpu-platform"))
    spec["admissionChecksStrategy"]["admissionChecks"].append({"name": "node-group-provisioning"})
    return spec


PROVISIONING = r(
    f"{KUEUE}:AdmissionCheck",
    "prov",
    {
        "metadata": {"name": "node-group-provisioning"},
        "spec": {"controllerName": "kueue.x-k8s.io/provisioning-request"},
    },
)


def worker(
    read: list[dict[str, Any]] | None = None,
    write: list[dict[str, Any]] | None = None,
    *,
    write_in: tuple[str, ...] = ("team-research",),
    teams: tuple[str, ...] = ("team-research",),
) -> list[Res]:
    """A worker's grant to its manager (components/platform/fleet/worker.py's shape): reads
    bound cluster-wide, writes bound in `write_in`; `teams` get the fleet data ConfigMap."""
    name = builders.manager_identity("prod")
    frameworks = catalog.MULTIKUEUE_FRAMEWORKS
    subject = [{"kind": "ServiceAccount", "name": name, "namespace": builders.KUEUE_NAMESPACE}]
    read_name, write_name = (builders.manager_role_name(name, a) for a in ("read", "write"))
    return [
        r(
            "kubernetes:core/v1:ServiceAccount",
            "sa",
            {"metadata": {"name": name, "namespace": builders.KUEUE_NAMESPACE}},
        ),
        r(
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
            "read",
            {
                "metadata": {"name": read_name},
                "rules": builders.manager_read_rules(frameworks) if read is None else read,
            },
        ),
        r(
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
            "read-binding",
            {
                "metadata": {"name": read_name},
                "roleRef": builders.cluster_role_ref(read_name),
                "subjects": subject,
            },
        ),
        r(
            "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
            "write",
            {
                "metadata": {"name": write_name},
                "rules": builders.manager_write_rules(frameworks) if write is None else write,
            },
        ),
        *(
            r(
                "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding",
                f"write-{namespace}",
                {
                    "metadata": {"name": write_name, "namespace": namespace},
                    "roleRef": builders.cluster_role_ref(write_name),
                    "subjects": subject,
                },
            )
            for namespace in write_in
        ),
        *(
            r(
                "kubernetes:core/v1:ConfigMap",
                f"data-{namespace}",
                {"metadata": {"name": catalog.FLEET_DATA_CONFIGMAP, "namespace": namespace}},
            )
            for namespace in teams
        ),
    ]


NO_TRAINJOBS = [
    rule
    for rule in builders.manager_read_rules(catalog.MULTIKUEUE_FRAMEWORKS)
    if "trainer.kubeflow.org" not in rule["apiGroups"]
]
#: The grant before issue #36: every verb cluster-wide (the reads and the writes in one role).
EVERYTHING_CLUSTER_WIDE = [
    *builders.manager_read_rules(catalog.MULTIKUEUE_FRAMEWORKS),
    *builders.manager_write_rules(catalog.MULTIKUEUE_FRAMEWORKS),
]

TEAM_NS = r(
    "kubernetes:core/v1:Namespace",
    "team-ns",
    {"metadata": {"name": "team-research", "labels": {"gpu-platform.io/team": "research"}}},
)
NO_PODS = r(
    "kubernetes:core/v1:ResourceQuota",
    "no-pods",
    {
        "metadata": {"name": "no-pods", "namespace": "team-research"},
        "spec": {"hard": {"pods": "0"}},
    },
)
REGIONAL_FLAVOR = r(
    f"{KUEUE}:ResourceFlavor",
    "regional-flavor",
    {
        "metadata": {"name": "l4-x1-spot"},
        "spec": {
            "nodeLabels": {
                catalog.LABEL_GPU_CLASS: "l4-x1",
                catalog.LABEL_CAPACITY_TYPE: "spot",
                catalog.REGION_LABEL: "us-east-1",
            }
        },
    },
)
FLAVOR = r(
    f"{KUEUE}:ResourceFlavor",
    "flavor",
    {
        "metadata": {"name": "l4-x1-spot"},
        "spec": {
            "nodeLabels": {
                catalog.LABEL_GPU_CLASS: "l4-x1",
                catalog.LABEL_CAPACITY_TYPE: "spot",
            }
        },
    },
)

FLEET_CASES: list[Case] = [
    ("gpu-platform-fleet-manager-wired", "a wired manager", manager(), {}, False),
    ("gpu-platform-fleet-manager-wired", "a stack without MultiKueue", [TEAM_NS], {}, False),
    (
        "gpu-platform-fleet-manager-wired",
        "a manager without a worker",
        manager(clusters=[]),
        {},
        True,
    ),
    (
        "gpu-platform-fleet-manager-wired",
        "a worker's kubeconfig Secret never created",
        manager(secret=False),
        {},
        True,
    ),
    (
        "gpu-platform-fleet-manager-wired",
        "a job kind no worker grants (JobSet)",
        manager(frameworks=[*catalog.MULTIKUEUE_FRAMEWORKS, "jobset.x-k8s.io/jobset"]),
        {},
        True,
    ),
    (
        "gpu-platform-fleet-manager-wired",
        "MultiKueue beside a ProvisioningRequest check",
        [*manager(queue=_with_provisioning()), PROVISIONING],
        {},
        True,
    ),
    (
        "gpu-platform-fleet-manager-wired",
        "a LocalQueue whose ClusterQueue does not dispatch",
        manager(local_to="elsewhere"),
        {},
        True,
    ),
    ("gpu-platform-fleet-worker-grant", "the worker's grant", worker(), {}, False),
    (
        "gpu-platform-fleet-worker-flavors-regional",
        "a worker flavor that selects its region",
        [*worker(), REGIONAL_FLAVOR],
        {},
        False,
    ),
    (
        "gpu-platform-fleet-worker-flavors-regional",
        "a worker flavor without the region",
        [*worker(), FLAVOR],
        {},
        True,
    ),
    (
        "gpu-platform-fleet-worker-flavors-regional",
        "a platform that is no worker needs no region on its flavors",
        [FLAVOR],
        {},
        False,
    ),
    (
        "gpu-platform-fleet-worker-grant",
        "a grant that cannot watch TrainJobs",
        worker(NO_TRAINJOBS),
        {},
        True,
    ),
    (
        "gpu-platform-fleet-worker-grant",
        "job and workload writes granted cluster-wide",
        worker(EVERYTHING_CLUSTER_WIDE),
        {},
        True,
    ),
    (
        "gpu-platform-fleet-worker-grant",
        "a fleet team namespace the manager may not write in",
        worker(teams=("team-research", "team-pretrain")),
        {},
        True,
    ),
    (
        "gpu-platform-kueue-quota-within-pools",
        "a fleet manager's queue: the workers' quota, no pool here",
        [*manager(), FLAVOR],
        {},
        False,
    ),
    (
        "gpu-platform-k8s-trusted-images",
        "a team namespace that allows no pod needs no image admission",
        [TEAM_NS, NO_PODS],
        {},
        False,
    ),
    (
        "gpu-platform-k8s-image-admission-enforced",
        "a team namespace that allows no pod needs no image admission",
        [TEAM_NS, NO_PODS],
        {},
        False,
    ),
]
