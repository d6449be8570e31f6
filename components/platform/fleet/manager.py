"""The fleet's manager cluster (docs/fleet.md): Kueue with MultiKueue, Kubeflow Trainer (the
TrainJob API and its runtimes, which its webhook reads), the teams' queues with the fleet's
summed quota, and one MultiKueueCluster per worker.

What runs here, and why, at the pinned Kueue v0.19.2 (kubernetes-sigs/kueue) and Trainer
v2.3.0 (kubeflow/trainer):
- Kueue's `integrations.frameworks` are the dispatched kinds only (catalog.MULTIKUEUE_FRAMEWORKS):
  each gets a MultiKueue adapter whose watch every worker must allow (builders.manager_read_rules),
  and a job of any other kind would have no adapter ("No multikueue adapter found").
- Kueue's webhook sets `managedBy: kueue.x-k8s.io/multikueue` on a job whose LocalQueue's
  ClusterQueue carries the MultiKueue check (pkg/controller/jobframework/defaults.go
  ApplyDefaultForManagedBy) — only once the queue is in Kueue's cache; the job stacks set it
  themselves, so a job created early is never run here by mistake (managedBy is immutable).
- Trainer's webhook validates a TrainJob against its runtime on create
  (pkg/webhooks/trainjob_webhook.go, "must be created before the TrainJob"), and Kueue on the
  manager reads the runtime to build the workload's pod sets: the ClusterTrainingRuntimes exist
  here too ("Create a ClusterTrainingRuntime on all clusters", site/content/en/docs/tasks/run/
  multikueue/trainjob.md). Trainer's controller skips TrainJobs managed by MultiKueue
  (pkg/util/trainjob/trainjob.go IsManagedByExternalController); no GPU node exists here.
- ClusterQueues carry the MultiKueue check for all flavors, never a ProvisioningRequest check:
  the workers provision (pkg/cache/scheduler/clusterqueue.go refuses both together).
- No Volcano (it has no MultiKueue adapter), no GPU operator, no Karpenter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import addons, catalog
from components.analysis import limit_range
from components.analysis.pod_security import RESTRICTED_NAMESPACE_LABELS
from components.analysis.readiness import PodsReady
from components.config import SchedulingConfig, TeamConfig
from components.config.fleet import MultiKueueSettings
from components.config.security import SecretsConfig
from components.platform.addons import helm_release
from components.platform.cluster import iam
from components.platform.fleet import builders
from components.platform.scheduling.scheduling import (
    PRIORITY_CLASSES,
    TRAINER_NAMESPACE,
    kueue_release,
    kueue_values,
    priority_class_spec,
    trainer_release,
    workload_priority_classes,
)
from components.platform.tenancy.team_queues import queue_policies, resource_groups
from components.platform.tenancy.team_secrets import ESO_SERVICE_ACCOUNT, eso_values
from components.resource_options import child_options, manifest_resource, owned_namespace

RBAC_API: Final = "rbac.authorization.k8s.io"
READ_VERBS: Final = ("get", "list", "watch")
EDIT_VERBS: Final = (*READ_VERBS, "create", "update", "patch", "delete")


def manager_flavor_spec(gpu_class: str, capacity_type: catalog.CapacityType) -> dict[str, Any]:
    """A manager flavor selects by the labels every worker's flavor of that GPU class and
    capacity type shares, so Kueue here assigns the job's class and capacity as a worker would;
    no tolerations and no provisioner: no node runs here."""
    return {
        "nodeLabels": {
            catalog.LABEL_GPU_CLASS: gpu_class,
            catalog.LABEL_CAPACITY_TYPE: capacity_type,
        }
    }


def manager_queue_spec(team: TeamConfig, cohort: str) -> dict[str, Any]:
    """A team's ClusterQueue on the manager: the fleet's summed quota per flavor (in the
    team's flavor order), the workers' preemption and fungibility, and the MultiKueue check
    on every flavor."""
    order = catalog.CAPACITY_ORDER
    entries = sorted(team.quota, key=lambda e: (e.gpu_class, order[e.capacity_type]))
    return {
        "cohortName": cohort,
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": team.namespace}},
        "queueingStrategy": "BestEffortFIFO",
        "resourceGroups": resource_groups(entries),
        **queue_policies(),
        "admissionChecksStrategy": {"admissionChecks": [{"name": builders.ADMISSION_CHECK}]},
    }


def manager_quota() -> dict[str, str]:
    """A manager team namespace's quota: no pod, no GPU (the rule every team namespace's quota
    bounds), no volume claim."""
    return {"pods": "0", f"requests.{catalog.GPU_RESOURCE}": "0", "persistentvolumeclaims": "0"}


def member_rules() -> list[dict[str, Any]]:
    """What a team's members do on the manager: submit and watch the dispatched job kinds,
    read their workloads and queue; nothing runs here, so no pods, services or volumes."""
    return [
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": list(EDIT_VERBS)},
        {
            "apiGroups": ["trainer.kubeflow.org"],
            "resources": ["trainjobs"],
            "verbs": list(EDIT_VERBS),
        },
        {
            "apiGroups": ["trainer.kubeflow.org"],
            "resources": ["trainingruntimes", "clustertrainingruntimes"],
            "verbs": list(READ_VERBS),
        },
        {
            "apiGroups": ["kueue.x-k8s.io"],
            "resources": ["workloads", "localqueues"],
            "verbs": list(READ_VERBS),
        },
        {"apiGroups": [""], "resources": ["events"], "verbs": list(READ_VERBS)},
    ]


@dataclass(frozen=True)
class FleetManagerArgs:
    """Inputs of the FleetManager component."""

    #: The fleet's name (MultiKueueConfig, origin label).
    fleet: str
    scheduling: SchedulingConfig
    multikueue: MultiKueueSettings
    #: The fleet's teams, quotas summed over the workers (analysis/fleet.py manager_teams).
    teams: Sequence[TeamConfig]
    #: (GPU class, capacity type) of the manager's flavors, in a ClusterQueue's order.
    flavors: Sequence[tuple[str, catalog.CapacityType]]
    pods_ready: PodsReady
    #: worker name -> (its region, the ARN of its Secrets Manager secret holding the manager's
    #: kubeconfig: components/platform/fleet/worker.py), in dispatch order.
    worker_secrets: Mapping[str, tuple[str, str]]
    #: External Secrets Operator (chart, namespace), which syncs those secrets into Kueue's.
    secrets: SecretsConfig
    account_id: str
    #: The manager cluster's name: its output (the association waits for the cluster) and the
    #: literal the ESO role's trust is pinned to.
    cluster_name: pulumi.Input[str]
    physical_cluster_name: str
    tags: dict[str, str]
    #: The ClusterTrainingRuntimes (manifests, as every worker has them).
    runtimes: Sequence[Mapping[str, Any]]
    k8s_provider: k8s.Provider
    system_nodes: pulumi.Resource
    #: Worker links (peering, routes, security-group rules) the connections need first.
    links: Sequence[pulumi.Resource] = field(default_factory=tuple)


class FleetManager(pulumi.ComponentResource):
    """Kueue with MultiKueue, Trainer, the teams' queues and the workers' connections."""

    kueue: k8s.helm.v3.Release
    trainer: k8s.helm.v3.Release
    namespaces: dict[str, k8s.core.v1.Namespace]

    def __init__(
        self, name: str, args: FleetManagerArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:fleet:FleetManager", name, None, opts)
        k8s_opts = child_options(self, provider=args.k8s_provider)
        priority_classes = [
            k8s.scheduling.v1.PriorityClass(
                f"{name}-priority-{pc_name}",
                **priority_class_spec(pc_name, value, policy, description),
                opts=k8s_opts,
            )
            for pc_name, value, policy, description in PRIORITY_CLASSES
        ]
        self._releases(name, args, priority_classes)
        kueue_opts = child_options(self, provider=args.k8s_provider, depends_on=[self.kueue])
        self._multikueue(name, args, kueue_opts)
        self._kueue_objects(name, args, kueue_opts)
        self.namespaces = {team.name: self._team(name, args, team) for team in args.teams}
        for manifest in args.runtimes:
            manifest_resource(
                f"{name}-runtime-{manifest['metadata']['name']}",
                manifest,
                child_options(self, provider=args.k8s_provider, depends_on=[self.trainer]),
            )
        self.register_outputs({"kueueRelease": self.kueue.name})

    def _releases(
        self, name: str, args: FleetManagerArgs, priority_classes: Sequence[pulumi.Resource]
    ) -> None:
        """Kueue (dispatched kinds, the multiKueue block) and Trainer, in their namespaces."""
        config, mk = args.scheduling, args.multikueue
        after = [args.system_nodes, *priority_classes]
        kueue_ns, _ = owned_namespace(
            f"{name}-ns-kueue",
            builders.KUEUE_NAMESPACE,
            {f"{catalog.LABEL_DOMAIN}/part-of": "fleet"},
            child_options(self, provider=args.k8s_provider),
        )
        trainer_ns, _ = owned_namespace(
            f"{name}-ns-trainer",
            TRAINER_NAMESPACE,
            {f"{catalog.LABEL_DOMAIN}/part-of": "fleet"},
            child_options(self, provider=args.k8s_provider),
        )
        self.kueue = kueue_release(
            name,
            config,
            kueue_values(
                config,
                args.pods_ready,
                frameworks=catalog.MULTIKUEUE_FRAMEWORKS,
                multikueue=builders.multikueue_settings(
                    args.fleet,
                    worker_lost_timeout=mk.worker_lost_timeout,
                    dispatcher=mk.dispatcher,
                    step_size=mk.incremental_step_size,
                    gc_interval=mk.gc_interval,
                ),
            ),
            child_options(self, provider=args.k8s_provider, depends_on=[kueue_ns, *after]),
        )
        self.trainer = trainer_release(
            name,
            config,
            child_options(self, provider=args.k8s_provider, depends_on=[trainer_ns, *after]),
        )

    def _multikueue(
        self, name: str, args: FleetManagerArgs, kueue_opts: pulumi.ResourceOptions
    ) -> None:
        """Per worker its kubeconfig Secret (synced from the worker's Secrets Manager secret by
        ESO) and MultiKueueCluster; the MultiKueueConfig listing them in dispatch order; the
        AdmissionCheck the ClusterQueues carry."""
        synced = self._synced_kubeconfigs(name, args)
        clusters: list[pulumi.Resource] = []
        for worker in args.worker_secrets:
            spec = builders.multikueue_cluster(worker)
            clusters.append(
                manifest_resource(
                    f"{name}-cluster-{worker}",
                    spec,
                    pulumi.ResourceOptions.merge(
                        kueue_opts, pulumi.ResourceOptions(depends_on=[synced[worker], *args.links])
                    ),
                )
            )
        for spec in (
            builders.multikueue_config(args.fleet, list(args.worker_secrets)),
            builders.admission_check(args.fleet),
        ):
            manifest_resource(
                f"{name}-{spec['kind'].lower()}",
                spec,
                pulumi.ResourceOptions.merge(
                    kueue_opts, pulumi.ResourceOptions(depends_on=clusters)
                ),
            )

    def _eso(self, name: str, args: FleetManagerArgs) -> k8s.helm.v3.Release:
        """External Secrets Operator and its Pod Identity role, which may read exactly the
        workers' kubeconfig secrets (builders.kubeconfig_read_policy)."""
        eso = args.secrets
        role = iam.pod_identity_role(
            f"{name}-eso",
            account_id=args.account_id,
            cluster_name=args.physical_cluster_name,
            namespace=eso.namespace,
            service_account=ESO_SERVICE_ACCOUNT,
            tags=args.tags,
            opts=child_options(self),
            # Named from the fleet: each worker's kubeconfig secret lets only this role (and
            # its deployer) read the token (builders.kubeconfig_secret_policy).
            role_name=builders.eso_role_name(args.fleet),
        )
        aws.iam.RolePolicy(
            f"{name}-eso-read",
            role=role.id,
            policy=json.dumps(builders.kubeconfig_read_policy(args.worker_secrets)),
            opts=child_options(self),
        )
        association = aws.eks.PodIdentityAssociation(
            f"{name}-eso",
            cluster_name=args.cluster_name,
            namespace=eso.namespace,
            service_account=ESO_SERVICE_ACCOUNT,
            role_arn=role.arn,
            tags=args.tags,
            opts=child_options(self),
        )
        return helm_release(
            f"{name}-eso",
            addons.EXTERNAL_SECRETS,
            version=eso.chart_version,
            namespace=eso.namespace,
            values=eso_values(),
            opts=child_options(
                self, provider=args.k8s_provider, depends_on=[args.system_nodes, association]
            ),
        )

    def _synced_kubeconfigs(self, name: str, args: FleetManagerArgs) -> dict[str, pulumi.Resource]:
        """ESO with a Pod Identity role that may read exactly the workers' kubeconfig secrets,
        a SecretStore per worker region in Kueue's namespace, and per worker an ExternalSecret
        whose target is the Secret its MultiKueueCluster names (key `kubeconfig`)."""
        release = self._eso(name, args)
        after = child_options(self, provider=args.k8s_provider, depends_on=[release, self.kueue])
        stores = {}
        for region in sorted({region for region, _ in args.worker_secrets.values()}):
            spec = builders.kubeconfig_store(region)
            stores[region] = manifest_resource(
                f"{name}-store-{region}",
                spec,
                after,
            )
        synced: dict[str, pulumi.Resource] = {}
        for worker, (region, arn) in args.worker_secrets.items():
            spec = builders.kubeconfig_external_secret(worker, region, arn)
            synced[worker] = manifest_resource(
                f"{name}-kubeconfig-{worker}",
                spec,
                pulumi.ResourceOptions.merge(
                    after, pulumi.ResourceOptions(depends_on=[stores[region]])
                ),
            )
        return synced

    def _kueue_objects(
        self, name: str, args: FleetManagerArgs, kueue_opts: pulumi.ResourceOptions
    ) -> None:
        """Flavors, the cohort, the WorkloadPriorityClasses (a job names its class on the
        manager; the mirrored workload names the same class on the worker)."""
        for gpu_class, capacity_type in args.flavors:
            k8s.apiextensions.CustomResource(
                f"{name}-flavor-{catalog.gpu_flavor_name(gpu_class, capacity_type)}",
                api_version=builders.KUEUE_API,
                kind="ResourceFlavor",
                metadata={"name": catalog.gpu_flavor_name(gpu_class, capacity_type)},
                spec=manager_flavor_spec(gpu_class, capacity_type),
                opts=kueue_opts,
            )
        k8s.apiextensions.CustomResource(
            f"{name}-cohort",
            api_version=builders.KUEUE_API,
            kind="Cohort",
            metadata={"name": args.scheduling.cohort},
            spec={},
            opts=kueue_opts,
        )
        workload_priority_classes(name, kueue_opts)

    def _team(self, name: str, args: FleetManagerArgs, team: TeamConfig) -> k8s.core.v1.Namespace:
        """A team's namespace (restricted: nothing runs here), ClusterQueue, LocalQueue and
        members' Role."""
        prefix = f"{name}-team-{team.name}"
        namespace, inside = owned_namespace(
            f"{prefix}-ns",
            team.namespace,
            {f"{catalog.LABEL_DOMAIN}/team": team.name, **RESTRICTED_NAMESPACE_LABELS},
            child_options(self, provider=args.k8s_provider),
        )
        # Nothing of a team runs here: its jobs are MultiKueue's (managedBy), and a quota of no
        # pods makes that hold for anything else a member could create.
        k8s.core.v1.ResourceQuota(
            f"{prefix}-no-pods",
            metadata={"name": "no-pods", "namespace": team.namespace},
            spec={"hard": cast(Any, manager_quota())},
            opts=inside,
        )
        k8s.core.v1.LimitRange(
            f"{prefix}-limits",
            metadata={"name": "defaults", "namespace": team.namespace},
            # The team's own LimitRange, as on every worker: no container runs here, but Kueue
            # applies the namespace's LimitRange to the manager's copy of each Workload before
            # it dispatches it (components/analysis/limit_range.py).
            spec=cast(Any, limit_range.limit_range_spec(team.container_defaults)),
            opts=inside,
        )
        k8s.networking.v1.NetworkPolicy(
            f"{prefix}-deny",
            metadata={"name": "default-deny", "namespace": team.namespace},
            spec=cast(Any, {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}),
            opts=inside,
        )
        queue = k8s.apiextensions.CustomResource(
            f"{prefix}-cluster-queue",
            api_version=builders.KUEUE_API,
            kind="ClusterQueue",
            metadata={"name": team.name},
            spec=manager_queue_spec(team, args.scheduling.cohort),
            opts=child_options(self, provider=args.k8s_provider, depends_on=[self.kueue]),
        )
        k8s.apiextensions.CustomResource(
            f"{prefix}-local-queue",
            api_version=builders.KUEUE_API,
            kind="LocalQueue",
            metadata={"name": team.name, "namespace": team.namespace},
            spec={"clusterQueue": team.name},
            opts=pulumi.ResourceOptions.merge(
                inside, pulumi.ResourceOptions(depends_on=[self.kueue, queue])
            ),
        )
        role = k8s.rbac.v1.Role(
            f"{prefix}-members",
            metadata={"name": "team-member", "namespace": team.namespace},
            rules=cast(Any, member_rules()),
            opts=inside,
        )
        k8s.rbac.v1.RoleBinding(
            f"{prefix}-members",
            metadata={"name": "team-member", "namespace": team.namespace},
            role_ref=cast(Any, {"apiGroup": RBAC_API, "kind": "Role", "name": "team-member"}),
            subjects=cast(Any, [{"apiGroup": RBAC_API, "kind": "Group", "name": team.group}]),
            opts=pulumi.ResourceOptions.merge(inside, pulumi.ResourceOptions(depends_on=[role])),
        )
        return namespace
