"""Fleet rules (docs/fleet.md): a manager wired the way Kueue v0.19.2's MultiKueue needs, and a
worker that grants its manager what the dispatched job kinds need.

What each check stands for, upstream (kubernetes-sigs/kueue@v0.19.2):
- a MultiKueueConfig without clusters, or naming a MultiKueueCluster that does not exist, leaves
  the AdmissionCheck inactive ("NoUsableClusters"): every job waits forever (a manager without
  a worker); a MultiKueueCluster whose kubeconfig Secret is not created in Kueue's namespace is
  `Active=False, BadKubeConfig` (pkg/controller/admissionchecks/multikueue/multikueuecluster.go);
- an AdmissionCheck whose parameters name no MultiKueueConfig is `BadConfig` (admissioncheck.go);
- a ClusterQueue with the MultiKueue check per flavor, with two of them, or with a
  ProvisioningRequest check beside it is inactive (pkg/cache/scheduler/clusterqueue.go);
- a LocalQueue of the manager whose ClusterQueue has no MultiKueue check admits jobs on the
  manager, which has no GPU and runs nothing;
- the manager's Kueue frameworks are what it dispatches: each gets an adapter whose watch every
  worker must allow before the worker counts as connected (multikueuecluster.go), and a kind with
  no worker grant (catalog.MULTIKUEUE_JOB_RULES) never connects;
- a worker's manager identity must read Workloads and every dispatched kind cluster-wide (the
  remote client's watches and garbage collection have no namespace: multikueuecluster.go
  establishWatch, runGC) and write them (the mirrored Workload, its status, the job) in every
  fleet team's namespace — and nowhere else: a cluster-wide create on Jobs lets the manager run
  any pod in any namespace of the worker.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import yaml
from pulumi_policy import PolicyResource

from components import addons, catalog
from policies.rules.common import (
    HIGH,
    MANDATORY,
    Config,
    as_list,
    dig,
    stack_rule,
)

ADMISSION_CHECKS = (
    "kubernetes:kueue.x-k8s.io/v1beta2:AdmissionCheck",
    "kubernetes:kueue.x-k8s.io/v1beta1:AdmissionCheck",
)
MULTIKUEUE_CONFIG = "kubernetes:kueue.x-k8s.io/v1beta2:MultiKueueConfig"
MULTIKUEUE_CLUSTER = "kubernetes:kueue.x-k8s.io/v1beta2:MultiKueueCluster"
CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
LOCAL_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:LocalQueue"
SECRET = "kubernetes:core/v1:Secret"
EXTERNAL_SECRET = "kubernetes:external-secrets.io/v1:ExternalSecret"
RESOURCE_QUOTA = "kubernetes:core/v1:ResourceQuota"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
CLUSTER_ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
SERVICE_ACCOUNT = "kubernetes:core/v1:ServiceAccount"
KUEUE_NAMESPACE = addons.KUEUE.namespace
PROVISIONING_CONTROLLER = "kueue.x-k8s.io/provisioning-request"
ROLE_BINDING = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
ROLE = "kubernetes:rbac.authorization.k8s.io/v1:Role"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
#: What the manager identity must read cluster-wide and write in each fleet team's namespace,
#: besides the dispatched job kinds (catalog.MULTIKUEUE_JOB_RULES): MultiKueue's own needs at
#: v0.19.2 (module docstring), stated here independently of the worker's builder.
READ_VERBS = ("get", "list", "watch")
WRITE_VERBS = ("create", "update", "patch", "delete")
KUEUE_READS = (("kueue.x-k8s.io", "workloads"),)
KUEUE_WRITES = (
    ("kueue.x-k8s.io", "workloads", WRITE_VERBS),
    ("kueue.x-k8s.io", "workloads/status", ("get", "patch", "update")),
)


def _name(resource: PolicyResource) -> str:
    return str(dig(resource.props, "metadata", "name") or "")


def multikueue_checks(resources: Sequence[PolicyResource]) -> dict[str, PolicyResource]:
    """AdmissionCheck name -> the check, for MultiKueue's."""
    return {
        _name(r): r
        for r in resources
        if r.resource_type in ADMISSION_CHECKS
        and dig(r.props, "spec", "controllerName") == catalog.MULTIKUEUE_CONTROLLER
    }


def queue_checks(queue: PolicyResource) -> list[Any]:
    """A ClusterQueue's admission checks (`admissionChecksStrategy` entries, or names)."""
    strategy = as_list(dig(queue.props, "spec", "admissionChecksStrategy", "admissionChecks"))
    return strategy + [{"name": n} for n in as_list(dig(queue.props, "spec", "admissionChecks"))]


def is_multikueue_queue(queue: PolicyResource, checks: dict[str, PolicyResource]) -> bool:
    """The queue dispatches through MultiKueue: its quota is the workers', not this cluster's."""
    return any(str(dig(c, "name")) in checks for c in queue_checks(queue))


def pool_selector(flavor: PolicyResource) -> dict[str, str]:
    """The node labels a ResourceFlavor selects pools by. A fleet worker's flavors also name its
    region, a label every node of the cluster carries (kubelet / cloud provider) and no NodePool
    template or node group lists: it selects nothing among the cluster's own pools."""
    return {
        str(k): str(v)
        for k, v in (dig(flavor.props, "spec", "nodeLabels") or {}).items()
        if k != catalog.REGION_LABEL
    }


def podless_namespaces(resources: Sequence[PolicyResource]) -> set[str]:
    """Namespaces whose ResourceQuota allows no pod: nothing of a team can run there."""
    return {
        str(dig(r.props, "metadata", "namespace"))
        for r in resources
        if r.resource_type == RESOURCE_QUOTA and str(dig(r.props, "spec", "hard", "pods")) == "0"
    }


def _kueue_frameworks(resources: Sequence[PolicyResource]) -> list[str] | None:
    """The Kueue release's `integrations.frameworks`, when the stack installs Kueue."""
    for release in resources:
        if release.resource_type != HELM_RELEASE or dig(release.props, "name") != "kueue":
            continue
        text = dig(release.props, "values", "managerConfig", "controllerManagerConfigYaml")
        if isinstance(text, str):
            config = yaml.safe_load(text) or {}
            return [str(f) for f in dig(config, "integrations", "frameworks") or []]
    return None


def _check_manager(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    checks = multikueue_checks(resources)
    configs = {_name(r): r for r in resources if r.resource_type == MULTIKUEUE_CONFIG}
    clusters = {_name(r): r for r in resources if r.resource_type == MULTIKUEUE_CLUSTER}
    if not (checks or configs or clusters):
        return
    yield from _wiring(resources, checks, configs, clusters)
    yield from _queues(resources, checks)
    frameworks = _kueue_frameworks(resources)
    if frameworks is not None:
        for framework in frameworks:
            if framework not in catalog.MULTIKUEUE_JOB_RULES:
                yield (
                    f"the manager's Kueue manages {framework!r}, which no worker grants its "
                    "manager (catalog.MULTIKUEUE_JOB_RULES): no worker would ever connect",
                    None,
                )


def _wiring(
    resources: Sequence[PolicyResource],
    checks: dict[str, PolicyResource],
    configs: dict[str, PolicyResource],
    clusters: dict[str, PolicyResource],
) -> Iterator[tuple[str, str | None]]:
    """Checks → configs → clusters → their kubeconfig Secrets, each reference resolving."""
    secrets = {
        str(dig(r.props, "spec", "target", "name") or _name(r))
        for r in resources
        if r.resource_type in (SECRET, EXTERNAL_SECRET)
        and dig(r.props, "metadata", "namespace") == KUEUE_NAMESPACE
    }
    for name, check in checks.items():
        target = dig(check.props, "spec", "parameters", "name")
        if dig(check.props, "spec", "parameters", "kind") != "MultiKueueConfig" or (
            target not in configs
        ):
            yield (
                f"AdmissionCheck {name!r} names no declared MultiKueueConfig ({target!r})",
                check.urn,
            )
    for name, config in configs.items():
        listed = [str(c) for c in as_list(dig(config.props, "spec", "clusters"))]
        if not listed:
            yield f"MultiKueueConfig {name!r} lists no worker: every job would wait", config.urn
        for cluster in listed:
            if cluster not in clusters:
                yield (
                    f"MultiKueueConfig {name!r} lists {cluster!r}, no declared cluster",
                    config.urn,
                )
    for name, mkc in clusters.items():
        source = dig(mkc.props, "spec", "clusterSource", "kubeConfig") or {}
        if dig(source, "locationType") not in (None, "Secret"):
            yield f"MultiKueueCluster {name!r} reads its kubeconfig from a file", mkc.urn
        elif dig(source, "location") not in secrets:
            yield (
                f"MultiKueueCluster {name!r}: its kubeconfig Secret "
                f"{dig(source, 'location')!r} is not created in {KUEUE_NAMESPACE}",
                mkc.urn,
            )


def _queues(
    resources: Sequence[PolicyResource], checks: dict[str, PolicyResource]
) -> Iterator[tuple[str, str | None]]:
    """ClusterQueues the way MultiKueue accepts them; LocalQueues only on those."""
    provisioning = {
        _name(r)
        for r in resources
        if r.resource_type in ADMISSION_CHECKS
        and dig(r.props, "spec", "controllerName") == PROVISIONING_CONTROLLER
    }
    dispatching = set()
    for queue in resources:
        if queue.resource_type != CLUSTER_QUEUE:
            continue
        names = [str(dig(c, "name")) for c in queue_checks(queue)]
        mine = [n for n in names if n in checks]
        if not mine:
            continue
        dispatching.add(_name(queue))
        if len(mine) > 1:
            yield f"ClusterQueue {_name(queue)!r} has {len(mine)} MultiKueue checks", queue.urn
        if any(n in provisioning for n in names):
            yield (
                f"ClusterQueue {_name(queue)!r} has a ProvisioningRequest check beside "
                "MultiKueue (Kueue makes it inactive: workers provision)",
                queue.urn,
            )
        if any(dig(c, "onFlavors") for c in queue_checks(queue) if str(dig(c, "name")) in mine):
            yield f"ClusterQueue {_name(queue)!r} applies MultiKueue per flavor", queue.urn
    for local in resources:
        if local.resource_type == LOCAL_QUEUE:
            target = str(dig(local.props, "spec", "clusterQueue"))
            if target not in dispatching:
                yield (
                    f"LocalQueue {_name(local)!r} feeds ClusterQueue {target!r}, which does not "
                    "dispatch: jobs there would run on the manager",
                    local.urn,
                )


Grant = set[tuple[str, str, str]]


def _rules_of(resources: Sequence[PolicyResource], kind: str, name: str, namespace: str) -> Grant:
    granted: Grant = set()
    for role in resources:
        same = (
            role.resource_type == CLUSTER_ROLE
            if kind == "ClusterRole"
            else role.resource_type == ROLE
            and dig(role.props, "metadata", "namespace") == namespace
        )
        if same and _name(role) == name:
            for rule in as_list(dig(role.props, "rules")):
                for group in as_list(dig(rule, "apiGroups")):
                    for resource in as_list(dig(rule, "resources")):
                        for verb in as_list(dig(rule, "verbs")):
                            granted.add((str(group), str(resource), str(verb)))
    return granted


def _bound(binding: PolicyResource, account: str) -> bool:
    return any(
        dig(s, "kind") == "ServiceAccount"
        and dig(s, "name") == account
        and dig(s, "namespace") == KUEUE_NAMESPACE
        for s in as_list(dig(binding.props, "subjects"))
    )


def _grants(resources: Sequence[PolicyResource], account: str) -> tuple[Grant, dict[str, Grant]]:
    """What `account` holds cluster-wide, and per namespace (RoleBindings)."""
    cluster: Grant = set()
    namespaced: dict[str, Grant] = {}
    for binding in resources:
        if binding.resource_type not in (CLUSTER_ROLE_BINDING, ROLE_BINDING):
            continue
        if not _bound(binding, account):
            continue
        ref = dig(binding.props, "roleRef") or {}
        namespace = str(dig(binding.props, "metadata", "namespace") or "")
        rules = _rules_of(resources, str(ref.get("kind")), str(ref.get("name")), namespace)
        if binding.resource_type == CLUSTER_ROLE_BINDING:
            cluster |= rules
        else:
            namespaced.setdefault(namespace, set()).update(rules)
    return cluster, namespaced


def _worker_needs() -> tuple[
    list[tuple[str, str, tuple[str, ...]]], list[tuple[str, str, tuple[str, ...]]]
]:
    reads: list[tuple[str, str, tuple[str, ...]]] = [(g, r, READ_VERBS) for g, r in KUEUE_READS]
    writes = list(KUEUE_WRITES)
    for framework in catalog.MULTIKUEUE_FRAMEWORKS:
        for group, resource in catalog.MULTIKUEUE_JOB_RULES[framework]:
            reads += [(group, resource, READ_VERBS), (group, f"{resource}/status", ("get",))]
            writes.append((group, resource, WRITE_VERBS))
    return reads, writes


def _missing(needs: Sequence[tuple[str, str, tuple[str, ...]]], held: Grant) -> Iterator[str]:
    """`verb, verb group/resource` for each need `held` lacks a verb of."""
    for group, resource, verbs in needs:
        lacking = [v for v in verbs if (group, resource, v) not in held]
        if lacking:
            yield f"{', '.join(lacking)} {group}/{resource}"


def _check_worker(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    accounts = [
        r
        for r in resources
        if r.resource_type == SERVICE_ACCOUNT
        and dig(r.props, "metadata", "namespace") == KUEUE_NAMESPACE
        and _name(r).startswith("multikueue-")
    ]
    # The fleet teams' namespaces: each gets the worker's data ConfigMap (worker.py).
    teams = sorted(
        str(dig(r.props, "metadata", "namespace"))
        for r in resources
        if r.resource_type == CONFIG_MAP and _name(r) == catalog.FLEET_DATA_CONFIGMAP
    )
    reads, writes = _worker_needs()
    for account in accounts:
        cluster, namespaced = _grants(resources, _name(account))
        for lacking in _missing(reads, cluster):
            yield (
                f"the manager identity {_name(account)!r} may not {lacking} cluster-wide: "
                "MultiKueue's watches have no namespace, so the worker never connects",
                account.urn,
            )
        wide = sorted(
            f"{v} {g}/{r}"
            for g, r, v in cluster
            if v in WRITE_VERBS and r in {w[1] for w in writes}
        )
        if wide:
            yield (
                f"the manager identity {_name(account)!r} may {', '.join(wide)} cluster-wide: it "
                "could run any pod in any namespace of the worker; bind writes per fleet team "
                "namespace",
                account.urn,
            )
        for namespace in teams:
            for lacking in _missing(writes, namespaced.get(namespace, set())):
                yield (
                    f"the manager identity {_name(account)!r} may not {lacking} in fleet team "
                    f"namespace {namespace!r}: a job dispatched there is never created (only "
                    "a log line on the manager)",
                    account.urn,
                )


RESOURCE_FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"


def _check_worker_flavors(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    """A fleet worker's flavors each select its region: a job pinned to another region then finds
    no flavor on this worker and is never admitted here (kubernetes-sigs/kueue@v0.19.2
    pkg/scheduler/flavorassigner/flavorassigner.go checkFlavorForPodSets)."""
    worker = any(
        r.resource_type == SERVICE_ACCOUNT
        and dig(r.props, "metadata", "namespace") == KUEUE_NAMESPACE
        and _name(r).startswith("multikueue-")
        for r in resources
    )
    if not worker:
        return
    for flavor in resources:
        if flavor.resource_type != RESOURCE_FLAVOR:
            continue
        labels = dig(flavor.props, "spec", "nodeLabels") or {}
        if not labels.get(catalog.REGION_LABEL):
            yield (
                f"fleet worker flavor {_name(flavor)!r} does not select "
                f"{catalog.REGION_LABEL}: a fleet job pinned to another region could be "
                "admitted here",
                flavor.urn,
            )


POLICIES = [
    stack_rule(
        name="gpu-platform-fleet-manager-wired",
        description="A fleet manager's MultiKueue objects resolve (checks, configs, clusters, "
        "their kubeconfig Secrets), lists at least one worker, dispatches only kinds workers "
        "grant, and every LocalQueue dispatches.",
        check=_check_manager,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Build the manager with components/platform/fleet/manager.py (docs/fleet.md).",
    ),
    stack_rule(
        name="gpu-platform-fleet-worker-grant",
        description="A fleet worker grants its manager's identity what MultiKueue needs for every "
        "dispatched job kind: reads cluster-wide, writes only in the fleet teams' namespaces.",
        check=_check_worker,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Build the worker's grant with components/platform/fleet/worker.py.",
    ),
    stack_rule(
        name="gpu-platform-fleet-worker-flavors-regional",
        description="Every ResourceFlavor of a fleet worker selects the worker's region, so a "
        "job pinned to another region is never admitted there.",
        check=_check_worker_flavors,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Build the worker's flavors with components/platform/scheduling/"
        "scheduling.py (SchedulingArgs.of with the worker's region).",
    ),
]
