"""Pure builders of a fleet's Kubernetes objects (docs/fleet.md): the worker's grant to its
manager, the kubeconfig the manager connects with, and the manager's MultiKueue objects.

Upstream, at the pinned Kueue v0.19.2 (kubernetes-sigs/kueue, commit 8eab6877):
- MultiKueueCluster / MultiKueueConfig / AdmissionCheck are `kueue.x-k8s.io/v1beta2` (the
  storage version; apis/kueue/v1beta2/multikueue_types.go, admissioncheck_types.go).
  `spec.clusterSource.kubeConfig.location` names a Secret in Kueue's own namespace whose key
  `kubeconfig` holds the worker's kubeconfig (`MultiKueueConfigSecretKey`; the chart's Role on
  secrets is namespaced to the release namespace, charts/kueue/templates/rbac/
  manager_secrets_role.yaml).
- Kueue validates that kubeconfig (pkg/controller/admissionchecks/multikueue/
  multikueuecluster.go `validateKubeconfig`, `validateRestConfig`): no `exec` plugin, no
  auth-provider, no token or CA *file*, no insecure-skip-tls-verify, a DNS/IP server. An EKS
  kubeconfig (`aws eks get-token` exec, a 15-minute IAM token) is refused, so the manager
  connects with a ServiceAccount token the worker's own API server issued, inlined.
- The AdmissionCheck's controller is `kueue.x-k8s.io/multikueue` and its parameters name the
  MultiKueueConfig; a ClusterQueue may carry one MultiKueue check, for all its flavors, and no
  ProvisioningRequest check beside it (pkg/cache/scheduler/clusterqueue.go: otherwise the queue
  is inactive).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

from components import addons, catalog

KUEUE_API: Final = "kueue.x-k8s.io/v1beta2"
#: Kueue's namespace (the Helm release's): the kubeconfig Secrets live there.
KUEUE_NAMESPACE: Final = addons.KUEUE.namespace
#: The Secret key Kueue reads (apis/kueue/v1beta2/multikueue_types.go
#: `MultiKueueConfigSecretKey`).
KUBECONFIG_KEY: Final = "kubeconfig"
#: The AdmissionCheck every manager ClusterQueue carries.
ADMISSION_CHECK: Final = "multikueue"
#: What the manager's identity reads on a worker, cluster-wide: MultiKueue's remote client
#: watches Workloads and every dispatched job kind with no namespace, by its origin label
#: (kubernetes-sigs/kueue@v0.19.2 pkg/controller/admissionchecks/multikueue/
#: multikueuecluster.go establishWatch ~L401-426, one watch per adapter; the cluster is not
#: connected until every watch stands) and lists Workloads cluster-wide to collect garbage
#: (runGC ~L692); the same at v0.13.1. ClusterQueues and LocalQueues are read only under the
#: alpha gate MultiKueueManagerQuotaAutomation (~L239), off here: not granted.
READ_VERBS: Final = ("get", "list", "watch")
#: What it writes, only in the namespaces fleet teams run in (a RoleBinding per team
#: namespace): the mirrored Workload (create, finalizer update, delete; workload.go), its
#: status (deactivation and preemption gates), and the job it creates on the admitting worker
#: (create, elastic patch, delete; the job adapters). Everything MultiKueue writes is
#: namespaced, so nothing of a job kind is writable anywhere else.
WRITE_VERBS: Final = ("create", "update", "patch", "delete")
KUEUE_READ_RULES: Final = (("kueue.x-k8s.io", "workloads"),)
KUEUE_WRITE_RULES: Final = (
    ("kueue.x-k8s.io", "workloads", WRITE_VERBS),
    ("kueue.x-k8s.io", "workloads/status", ("get", "patch", "update")),
)


def manager_identity(fleet: str) -> str:
    """The ServiceAccount (in Kueue's namespace) a worker grants to fleet `fleet`'s manager."""
    return f"multikueue-{fleet}"


def kubeconfig_secret_name(fleet: str, cluster: str) -> str:
    """The Secrets Manager secret holding the manager's kubeconfig for worker `cluster`."""
    return f"gpu-platform/fleet/{fleet}/{cluster}/multikueue-kubeconfig"


def manager_role_name(identity: str, access: str) -> str:
    """The ClusterRole (and binding) of the manager identity's `read` or `write` rules."""
    return f"gpu-platform-{identity}-{access}"


def cluster_role_ref(name: str) -> dict[str, str]:
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}


def token_secret_name(fleet: str, key: str) -> str:
    """The worker's token Secret of rotation key `key`."""
    return f"{manager_identity(fleet)}-token-{key}"


def _rule(group: str, resource: str, verbs: Sequence[str]) -> dict[str, Any]:
    return {"apiGroups": [group], "resources": [resource], "verbs": list(verbs)}


def manager_read_rules(frameworks: Sequence[str]) -> list[dict[str, Any]]:
    """The manager identity's cluster-wide rules on a worker: read (get, list, watch) the
    Workloads and each dispatched framework's job kind (catalog.MULTIKUEUE_JOB_RULES), which
    MultiKueue watches cluster-wide; nothing on pods, secrets or nodes."""
    rules = [_rule(group, resource, READ_VERBS) for group, resource in KUEUE_READ_RULES]
    for framework in frameworks:
        for group, resource in catalog.MULTIKUEUE_JOB_RULES[framework]:
            rules.append(_rule(group, resource, READ_VERBS))
            rules.append(_rule(group, f"{resource}/status", ("get",)))
    return rules


def manager_write_rules(frameworks: Sequence[str]) -> list[dict[str, Any]]:
    """The manager identity's rules bound in each fleet team's namespace only: write the
    mirrored Workloads, their status and each dispatched job kind."""
    rules = [_rule(group, resource, verbs) for group, resource, verbs in KUEUE_WRITE_RULES]
    for framework in frameworks:
        for group, resource in catalog.MULTIKUEUE_JOB_RULES[framework]:
            rules.append(_rule(group, resource, WRITE_VERBS))
    return rules


def endpoint_of(kubeconfig: str | Mapping[str, Any]) -> tuple[str, str]:
    """(server URL, base64 CA data) of an EKS kubeconfig (pulumi-eks `kubeconfigJson`)."""
    config = json.loads(kubeconfig) if isinstance(kubeconfig, str) else kubeconfig
    cluster = config["clusters"][0]["cluster"]
    return str(cluster["server"]), str(cluster["certificate-authority-data"])


def worker_kubeconfig(name: str, server: str, ca_data: str, token: str) -> str:
    """The kubeconfig the manager's Kueue connects to worker `name` with: the API server and
    its CA inline, the ServiceAccount token inline — nothing Kueue's validation refuses."""
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {"name": name, "cluster": {"server": server, "certificate-authority-data": ca_data}}
            ],
            "users": [{"name": "multikueue", "user": {"token": token}}],
            "contexts": [{"name": name, "context": {"cluster": name, "user": "multikueue"}}],
            "current-context": name,
        },
        sort_keys=True,
    )


def multikueue_cluster(name: str) -> dict[str, Any]:
    """A worker as the manager's Kueue knows it: its kubeconfig in Secret `name`."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "MultiKueueCluster",
        "metadata": {"name": name},
        "spec": {"clusterSource": {"kubeConfig": {"location": name, "locationType": "Secret"}}},
    }


def multikueue_config(fleet: str, clusters: Sequence[str]) -> dict[str, Any]:
    """The fleet's worker list, in dispatch order (Incremental tries them in this order)."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "MultiKueueConfig",
        "metadata": {"name": fleet},
        "spec": {"clusters": list(clusters)},
    }


def admission_check(fleet: str) -> dict[str, Any]:
    """The MultiKueue AdmissionCheck every manager ClusterQueue carries."""
    return {
        "apiVersion": KUEUE_API,
        "kind": "AdmissionCheck",
        "metadata": {"name": ADMISSION_CHECK},
        "spec": {
            "controllerName": catalog.MULTIKUEUE_CONTROLLER,
            "parameters": {
                "apiGroup": "kueue.x-k8s.io",
                "kind": "MultiKueueConfig",
                "name": fleet,
            },
        },
    }


def multikueue_settings(
    fleet: str,
    *,
    worker_lost_timeout: str,
    dispatcher: str,
    step_size: int,
    gc_interval: str,
) -> dict[str, Any]:
    """The manager Kueue Configuration's `multiKueue` block (apis/config/v1beta2/
    configuration_types.go): the fleet's name as the origin label of what it creates on workers
    (distinct per manager, so two managers' garbage collectors never delete each other's)."""
    block: dict[str, Any] = {
        "gcInterval": gc_interval,
        "origin": f"gpu-platform-{fleet}",
        "workerLostTimeout": worker_lost_timeout,
        "dispatcherName": (
            "kueue.x-k8s.io/multikueue-dispatcher-incremental"
            if dispatcher == "Incremental"
            else "kueue.x-k8s.io/multikueue-dispatcher-all-at-once"
        ),
    }
    if dispatcher == "Incremental":
        block["incrementalDispatcherConfig"] = {"stepSize": step_size}
    return block


#: ExternalSecret API of the pinned chart (external-secrets 2.9.0: v1 only).
ESO_API: Final = "external-secrets.io/v1"
#: How soon a rotated token reaches the manager's Secret (Kueue then reconnects on its own).
KUBECONFIG_REFRESH: Final = "5m"


def kubeconfig_read_policy(worker_secrets: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """The manager ESO's rights: read exactly the workers' kubeconfig secrets (default
    `aws/secretsmanager` key: decrypted by Secrets Manager for the caller, no KMS grant)."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "ReadWorkerKubeconfigs",
                "Effect": "Allow",
                "Action": ["secretsmanager:GetSecretValue", "secretsmanager:DescribeSecret"],
                "Resource": sorted(arn for _, arn in worker_secrets.values()),
            }
        ],
    }


def eso_role_name(fleet: str) -> str:
    """The IAM role fleet `fleet`'s manager runs its External Secrets Operator as (EKS Pod
    Identity): named from the fleet alone, because a worker, which never reads its manager
    (docs/fleet.md), names it in its kubeconfig secret's resource policy. 63 characters at most
    (a fleet name has 40; IAM allows 64)."""
    return f"gpu-platform-fleet-{fleet}-eso"


def eso_role_arn(partition: str, account_id: str, fleet: str) -> str:
    """That role's ARN (path `/`): the manager and its workers share the account."""
    return f"arn:{partition}:iam::{account_id}:role/{eso_role_name(fleet)}"


def kubeconfig_secret_policy(readers: Sequence[str]) -> dict[str, Any]:
    """The resource policy of a worker's kubeconfig secret: nobody reads the secret's value but
    `readers` (the manager's ESO role, the deploying principal, `fleet.kubeconfigReaders`).

    A Deny with `ArnNotEquals` on `aws:PrincipalArn`: an explicit deny overrides any allow, so
    an identity policy that grants secretsmanager:GetSecretValue broadly (ReadOnly-style
    policies, an admin role) does not reach this token (Secrets Manager user guide,
    "resource-based policies": adding an explicit deny to a secret); "For IAM roles, the
    request context returns the ARN of the role, not the ARN of the user that assumed the
    role", and ARN operators are the ones to compare it with (IAM user guide, global condition
    keys, aws:PrincipalArn). Only GetSecretValue is denied: the deploying principal still
    writes versions and the policy itself, and DescribeSecret shows no value."""
    return {
        "Version": "2012-10-17",
        "Statement": [
            {
                "Sid": "OnlyTheManagersSyncAndTheDeployerReadTheToken",
                "Effect": "Deny",
                "Principal": "*",
                "Action": "secretsmanager:GetSecretValue",
                "Resource": "*",
                "Condition": {"ArnNotEquals": {"aws:PrincipalArn": sorted(set(readers))}},
            }
        ],
    }


def store_name(region: str) -> str:
    return f"fleet-workers-{region}"


def kubeconfig_store(region: str) -> dict[str, Any]:
    """A SecretStore in Kueue's namespace reading Secrets Manager in one worker region with
    the ESO controller's own (Pod Identity) credentials."""
    return {
        "apiVersion": ESO_API,
        "kind": "SecretStore",
        "metadata": {"name": store_name(region), "namespace": KUEUE_NAMESPACE},
        "spec": {"provider": {"aws": {"service": "SecretsManager", "region": region}}},
    }


def kubeconfig_external_secret(worker: str, region: str, secret_arn: str) -> dict[str, Any]:
    """Worker `worker`'s kubeconfig as the Secret its MultiKueueCluster names (`worker`, key
    `kubeconfig`), refreshed every KUBECONFIG_REFRESH."""
    return {
        "apiVersion": ESO_API,
        "kind": "ExternalSecret",
        "metadata": {"name": worker, "namespace": KUEUE_NAMESPACE},
        "spec": {
            "refreshInterval": KUBECONFIG_REFRESH,
            "secretStoreRef": {"kind": "SecretStore", "name": store_name(region)},
            "target": {"name": worker, "creationPolicy": "Owner"},
            "data": [{"secretKey": KUBECONFIG_KEY, "remoteRef": {"key": secret_arn}}],
        },
    }
