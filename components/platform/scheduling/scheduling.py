"""Scheduling: Kueue (quota, admission, all-or-nothing start), Volcano (the alternative gang
scheduler), Kubeflow Trainer v2 (TrainJob through JobSet) and the cluster's priority classes.

Owns the controllers and the cluster-wide objects every team shares: the ResourceFlavors (one
per GPU class x capacity type, labelled and tolerating exactly like the GPU nodes, from
components/catalog.py), the Cohort team ClusterQueues join, Kueue's WorkloadPriorityClasses and
the Kubernetes PriorityClasses. Per-team objects (ClusterQueue, LocalQueue, Volcano Queue) are
built by components/platform/tenancy/teams.py on top of this. A job chooses Kueue
(`kueue.x-k8s.io/queue-name` label) or Volcano (`schedulerName: volcano`), never both: Kueue
manages only labelled jobs.

Kubeflow Trainer v2 installs no MPIJob CRD (MPI runs as a TrainJob runtime), so the
`mpijobs.kubeflow.org` name clash between training-operator v1 and mpi-operator v2beta1 cannot
happen; docs/scheduling.md says why Trainer v2 over training-operator v1.9.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import pulumi
import pulumi_kubernetes as k8s
import yaml

from components import addons, catalog
from components.analysis import nodes, topology
from components.analysis.facts import StackFacts
from components.analysis.readiness import PodsReady
from components.config import SchedulingConfig, TopologyLevel
from components.platform.addons import helm_release
from components.platform.cluster.handles import ClusterHandles
from components.platform.scheduling.volcano_builders import volcano_values
from components.resource_options import child_options

KUEUE_IMAGE: Final = "registry.k8s.io/kueue/kueue"
#: The controllers' namespaces (their rows in components/addons.py).
KUEUE_NAMESPACE: Final = addons.KUEUE.namespace
VOLCANO_NAMESPACE: Final = addons.VOLCANO.namespace
TRAINER_NAMESPACE: Final = addons.TRAINER.namespace
KUEUE_API: Final = "kueue.x-k8s.io/v1beta2"
VOLCANO_QUEUE_API: Final = "scheduling.volcano.sh/v1beta1"
#: `pulumi up` waits until Volcano's queue controller has opened a queue: Volcano's PodGroup
#: and Job webhooks refuse objects for a queue whose `status.state` is not Open
#: (volcano-sh/volcano@v1.15.1 pkg/webhooks/admission/podgroups/validate/validate_podgroup.go
#: checkQueueState, jobs/validate/admit_job.go), and a new queue has no state until the
#: controller syncs it. pulumi-kubernetes reads the annotation since v4.18.
QUEUE_OPEN_AWAIT: Final = {"pulumi.com/waitFor": "jsonpath={.status.state}=Open"}
#: The job kinds Kueue admits: plain (Indexed) Jobs, TrainJobs and the JobSets they run as.
KUEUE_FRAMEWORKS: Final = catalog.KUEUE_FRAMEWORKS

#: Kubernetes PriorityClasses: (name, value, preemptionPolicy, description). Production may
#: evict research and dev pods; research may evict dev; dev never preempts anyone, it only
#: fills idle capacity. Platform daemons outrank all training so a busy cluster still runs its
#: controllers.
PRIORITY_CLASSES: Final = (
    (
        "platform-critical",
        1_000_000,
        "PreemptLowerPriority",
        "Platform controllers (Kueue, Volcano, Trainer): must run even on a full cluster.",
    ),
    (
        "production-training",
        100_000,
        "PreemptLowerPriority",
        "Production training runs: may preempt research and dev pods.",
    ),
    (
        "research-training",
        10_000,
        "PreemptLowerPriority",
        "Research training: may preempt dev pods, yields to production.",
    ),
    (
        "dev",
        1_000,
        "Never",
        "Interactive and experimental work: never preempts, runs on idle capacity.",
    ),
)
PLATFORM_PRIORITY_CLASS: Final = "platform-critical"

#: Kueue WorkloadPriorityClasses: queue order and Kueue preemption, independent of pod priority.
WORKLOAD_PRIORITY_CLASSES: Final = (
    ("production", 1000, "Production runs: admitted first, may preempt lower workloads."),
    ("research", 100, "Research runs: ordinary priority."),
    ("dev", 10, "Dev and experiments: admitted last, preempted first."),
)


# --- pure builders ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Flavor:
    """One Kueue ResourceFlavor: a GPU class on one capacity type, and what the pools hold."""

    gpu_class: str
    capacity_type: catalog.CapacityType
    capacity_gpus: int
    #: Managed node groups or Karpenter NodePools: the flavor selects one kind only.
    provisioner: catalog.Provisioner = "karpenter"
    #: Workloads admitted on it wait for the ProvisioningRequest admission check.
    provisioning_check: bool = False
    #: The AWS region of a fleet worker's flavors (None outside a fleet): a node label every
    #: node carries, so a fleet job pinned to other regions gets no flavor here.
    region: str | None = None
    #: Its pods' tolerations: the platform taints its nodes carry (nodes.flavor_tolerations).
    tolerations: tuple[dict[str, str], ...] = ()
    #: The Topology its workloads are placed by (its GPU class's, docs/topology.md); None: not
    #: a Topology Aware Scheduling flavor.
    topology: str | None = None

    @property
    def name(self) -> str:
        return catalog.gpu_flavor_name(self.gpu_class, self.capacity_type)


def flavors(facts: StackFacts, region: str | None = None) -> list[Flavor]:
    """Every flavor the pools provide; within a GPU class reserved first (paid for whether used
    or not), then spot, then on-demand (catalog.CAPACITY_ORDER): the order a ClusterQueue tries
    them in. `region`: a fleet worker's (its flavors carry the region label)."""
    order = catalog.CAPACITY_ORDER
    return [
        Flavor(
            gpu_class,
            capacity_type,
            gpus,
            provisioner=facts.provisioners[(gpu_class, capacity_type)],
            provisioning_check=(gpu_class, capacity_type) in facts.provisioning_checked,
            region=region,
            tolerations=nodes.flavor_tolerations(
                nodes.flavor_sources(
                    facts.sources,
                    gpu_class,
                    capacity_type,
                    facts.provisioners[(gpu_class, capacity_type)],
                )
            ),
            # Every flavor of a class placed by the network (topology.py: all or none).
            topology=gpu_class if gpu_class in facts.topologies else None,
        )
        for (gpu_class, capacity_type), gpus in sorted(
            facts.capacity.items(), key=lambda item: (item[0][0], order[item[0][1]])
        )
    ]


def resource_flavor_spec(flavor: Flavor) -> dict[str, Any]:
    """Node labels and tolerations of the flavor. Kueue puts both on the pods it admits on the
    flavor, but not the same way for every kind: a batch Job's pods get the flavor's
    tolerations *added* to their own, a TrainJob's get them *instead of* their own (Kueue's
    admission patch comes last and Trainer strategic-merges a list without a patch strategy:
    nodes.flavor_tolerations cites the lines). So the tolerations are exactly the platform
    taints the flavor's nodes carry — the GPU taint, and the spot taint where spot managed
    groups are its nodes — derived from those nodes (`Flavor.tolerations`), and will-it-run
    refuses a TrainJob that would lose a node it tolerates (components/analysis/trainer.py)."""
    labels = catalog.gpu_flavor_labels(
        gpu_class=flavor.gpu_class,
        capacity_type=flavor.capacity_type,
        provisioner=flavor.provisioner,
    )
    if flavor.region is not None:
        labels[catalog.REGION_LABEL] = flavor.region
    spec: dict[str, Any] = {
        "nodeLabels": labels,
        "tolerations": [dict(t) for t in flavor.tolerations],
    }
    if flavor.topology is not None:
        # From then on the flavor's nodeLabels, tolerations and topologyName are immutable
        # (kubernetes-sigs/kueue@v0.19.2 apis/kueue/v1beta2/resourceflavor_types.go L47-51):
        # docs/topology.md "Day 2".
        spec["topologyName"] = flavor.topology
    return spec


def topology_spec(levels: Sequence[TopologyLevel]) -> dict[str, Any]:
    """A Kueue Topology (kubernetes-sigs/kueue@v0.19.2 apis/kueue/v1beta2/topology_types.go
    L107-153: 1-16 unique levels, immutable, the hostname only last): the class's levels as
    node labels, top-down (components/analysis/topology.py levels_of)."""
    return {"levels": [{"nodeLabel": topology.level_label(level)} for level in levels]}


#: The AdmissionCheck of node-group flavors and its ProvisioningRequestConfig.
PROVISIONING_CHECK: Final = "node-group-provisioning"
#: Scale-up "atomically" where the cloud provider can; on AWS the autoscaler falls back to a
#: plain increase (kubernetes/autoscaler@cluster-autoscaler-1.33.6 cloudprovider/aws/
#: aws_cloud_provider.go#L287-290 `AtomicIncreaseSize ... return cloudprovider.ErrNotImplemented`;
#: core/scaleup/orchestrator/executor.go#L144-153), so the request is Provisioned once the Auto
#: Scaling group's desired size was raised, not once every node joined (FAQ.md "Supported
#: ProvisioningClasses"). What a partial scale-up does: docs/node-groups.md.
PROVISIONING_CLASS: Final = "best-effort-atomic-scale-up.autoscaling.x-k8s.io"


def provisioning_request_config_spec() -> dict[str, Any]:
    """Kueue's ProvisioningRequestConfig (kubernetes-sigs/kueue@v0.19.2 site/content/en/docs/
    concepts/admission_check/provisioning_request.md): GPUs are what the autoscaler must
    provide; one PodTemplate per identical pod set; a failed request is retried with backoff
    (each failure releases the quota and requeues the workload)."""
    return {
        "provisioningClassName": PROVISIONING_CLASS,
        "managedResources": [catalog.GPU_RESOURCE],
        "podSetMergePolicy": "IdenticalWorkloadSchedulingRequirements",
        "retryStrategy": {
            "backoffLimitCount": 3,
            "backoffBaseSeconds": 60,
            "backoffMaxSeconds": 1800,
        },
    }


def kueue_release(
    name: str, config: SchedulingConfig, values: dict[str, Any], opts: pulumi.ResourceOptions
) -> k8s.helm.v3.Release:
    """The Kueue chart (a platform's, or a fleet manager's with its MultiKueue values). Later
    objects (flavors, queues) are rejected until the webhooks answer: the release waits."""
    return helm_release(
        f"{name}-kueue", addons.KUEUE, version=config.kueue_chart_version, values=values, opts=opts
    )


def trainer_release(
    name: str, config: SchedulingConfig, opts: pulumi.ResourceOptions
) -> k8s.helm.v3.Release:
    """The Kubeflow Trainer chart (a platform's and a fleet manager's)."""
    return helm_release(
        f"{name}-trainer",
        addons.TRAINER,
        version=config.trainer_chart_version,
        values=trainer_values(),
        opts=opts,
    )


def workload_priority_classes(name: str, opts: pulumi.ResourceOptions) -> None:
    """Kueue's WorkloadPriorityClasses (a platform's and a fleet manager's: a mirrored workload
    names the same class on the worker). Top-level `value`/`description`: not expressible as
    apiextensions.CustomResource."""
    for wpc_name, value, description in WORKLOAD_PRIORITY_CLASSES:
        pulumi.CustomResource(
            f"kubernetes:{KUEUE_API}:WorkloadPriorityClass",
            f"{name}-workload-priority-{wpc_name}",
            {
                "apiVersion": KUEUE_API,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": wpc_name},
                "value": value,
                "description": description,
            },
            opts=opts,
        )


def kueue_manager_config(
    config: SchedulingConfig,
    timeouts: PodsReady,
    *,
    frameworks: Sequence[str] = KUEUE_FRAMEWORKS,
    multikueue: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Kueue's Configuration (config.kueue.x-k8s.io/v1beta2): the chart's defaults plus the
    integrations the platform uses and waitForPodsReady (present = enabled in v1beta2), whose
    timeouts come from the facts (`timeouts`: analysis/readiness.py derives them from the
    slowest path from admission to Ready pods). A fleet's manager (docs/fleet.md) passes the
    job kinds it dispatches as `frameworks` (each gets a MultiKueue adapter whose watch every
    worker must allow) and its `multiKueue` block."""
    ready = config.wait_for_pods_ready
    extra = {"multiKueue": dict(multikueue)} if multikueue is not None else {}
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        "controller": {
            "groupKindConcurrency": {
                "Job.batch": 5,
                "Pod": 5,
                "Workload.kueue.x-k8s.io": 10,
                "LocalQueue.kueue.x-k8s.io": 5,
                "ClusterQueue.kueue.x-k8s.io": 5,
                "ResourceFlavor.kueue.x-k8s.io": 1,
            }
        },
        "clientConnection": {"qps": 300, "burst": 500},
        # Jobs without a queue label are not Kueue's: that is how Volcano jobs stay Volcano's.
        "manageJobsWithoutQueueName": False,
        "waitForPodsReady": {
            "timeout": timeouts.timeout,
            "recoveryTimeout": timeouts.recovery_timeout,
            # Quota <= capacity is enforced at config time, so admissions need not serialise.
            "blockAdmission": False,
            "requeuingStrategy": {
                "timestamp": "Eviction",
                "backoffLimitCount": ready.backoff_limit_count,
                "backoffBaseSeconds": ready.backoff_base_seconds,
                "backoffMaxSeconds": ready.backoff_max_seconds,
            },
        },
        "integrations": {"frameworks": list(frameworks)},
        # EFA pods request vpc.amazonaws.com/efa, which no ClusterQueue covers; under the default
        # BlockUndeclared strategy Kueue would keep them pending forever ("resource ...
        # unavailable in ClusterQueue"). Excluded deliberately, from the catalog constant the
        # "will it run" analysis checks against (runs.md item 10).
        "resources": {
            "excludeResourcePrefixes": list(catalog.KUEUE_EXCLUDED_RESOURCE_PREFIXES),
        },
        **extra,
    }


def kueue_values(
    config: SchedulingConfig,
    timeouts: PodsReady,
    *,
    frameworks: Sequence[str] = KUEUE_FRAMEWORKS,
    multikueue: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Helm values of the Kueue chart (every key exists in its values.yaml: tests check);
    `frameworks`, `multikueue`: a fleet manager's (kueue_manager_config)."""
    return {
        "controllerManager": {
            "manager": {
                # The chart at the tag points at a staging image; pin the released one.
                "image": {
                    "repository": KUEUE_IMAGE,
                    "tag": f"v{config.kueue_chart_version}",
                    "pullPolicy": "IfNotPresent",
                },
                "priorityClassName": PLATFORM_PRIORITY_CLASS,
            },
            # Webhooks answer from every replica; two keep job creation working during a drain.
            "replicas": 2,
            "podDisruptionBudget": {"enabled": True, "minAvailable": 1},
            "nodeSelector": catalog.system_node_labels(),
        },
        "managerConfig": {
            "controllerManagerConfigYaml": yaml.safe_dump(
                kueue_manager_config(
                    config, timeouts, frameworks=frameworks, multikueue=multikueue
                ),
                sort_keys=False,
            )
        },
    }


def trainer_values() -> dict[str, Any]:
    """Helm values of the Kubeflow Trainer chart: JobSet with it, controller on system nodes."""
    return {
        # TrainJobs run as JobSets; Kueue's jobset integration needs the CRD as well.
        "jobset": {"install": True},
        "manager": {"replicas": 2, "nodeSelector": catalog.system_node_labels()},
        # The chart's runtime installer Job downloads kubectl at run time; runtimes are applied
        # by the workload layer instead.
        "runtimes": {"defaultEnabled": False},
    }


def priority_class_spec(name: str, value: int, policy: str, description: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "value": value,
        "preemption_policy": policy,
        "global_default": False,
        "description": description,
    }


# --- component ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SchedulingArgs:
    """Inputs of the Scheduling component."""

    #: The `scheduling` slice of the config.
    config: SchedulingConfig
    #: The flavors the GPU pools provide, in the ClusterQueues' order (`flavors`).
    flavors: list[Flavor]
    #: The explicit provider of the cluster (default providers are disabled).
    k8s_provider: k8s.Provider
    #: Controllers wait for the system nodes they are pinned to.
    system_nodes: pulumi.Resource
    #: Kueue's waitForPodsReady timeouts (the facts' `pods_ready`, analysis/readiness.py).
    pods_ready: PodsReady
    #: GPU class -> the levels of its Topology (the facts' `topologies`).
    topologies: Mapping[str, tuple[TopologyLevel, ...]] = field(default_factory=dict)
    #: What Kueue must start after: the ProvisioningRequest CRD. Kueue sets up its
    #: provisioning admission-check controller only if the API is served when it starts
    #: (kubernetes-sigs/kueue@v0.19.2 cmd/kueue/main.go#L513-518, "Skipping provisioning
    #: controller setup: Provisioning Requests not supported").
    kueue_after: tuple[pulumi.Resource, ...] = ()

    @classmethod
    def of(
        cls,
        facts: StackFacts,
        cluster: ClusterHandles,
        kueue_after: tuple[pulumi.Resource, ...] = (),
        region: str | None = None,
    ) -> SchedulingArgs:
        """The scheduling config, the flavors and readiness timeouts of the facts, the
        cluster; `region`: a fleet worker's (its flavors carry it)."""
        return cls(
            config=facts.cfg.scheduling,
            flavors=flavors(facts, region),
            k8s_provider=cluster.k8s_provider,
            system_nodes=cluster.system_node_group,
            kueue_after=kueue_after,
            pods_ready=facts.pods_ready,
            topologies=facts.topologies,
        )


@dataclass(frozen=True)
class SchedulingHandles:
    """What teams and training jobs use of the schedulers: values, not the component."""

    #: Flavors in the cluster's order (reserved, spot, on-demand per GPU class).
    flavors: list[Flavor]
    cohort: str
    #: The releases whose CRDs and webhooks queues and jobs need first.
    kueue: pulumi.Resource
    volcano: pulumi.Resource
    trainer: pulumi.Resource


class Scheduling(pulumi.ComponentResource):
    """Kueue, Volcano, Kubeflow Trainer, flavors, cohort and priority classes."""

    kueue: k8s.helm.v3.Release
    volcano: k8s.helm.v3.Release
    trainer: k8s.helm.v3.Release
    flavors: list[Flavor]
    cohort: str

    def __init__(
        self, name: str, args: SchedulingArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:scheduling:Scheduling", name, None, opts)
        config = args.config
        k8s_opts = child_options(self, provider=args.k8s_provider)
        self.flavors = args.flavors
        self.cohort = config.cohort

        priority_classes = [
            k8s.scheduling.v1.PriorityClass(
                f"{name}-priority-{pc_name}",
                **priority_class_spec(pc_name, value, policy, description),
                opts=k8s_opts,
            )
            for pc_name, value, policy, description in PRIORITY_CLASSES
        ]
        namespaces = {
            namespace: k8s.core.v1.Namespace(
                f"{name}-ns-{namespace}",
                metadata={
                    "name": namespace,
                    "labels": {f"{catalog.LABEL_DOMAIN}/part-of": "scheduling"},
                },
                opts=k8s_opts,
            )
            for namespace in (KUEUE_NAMESPACE, VOLCANO_NAMESPACE, TRAINER_NAMESPACE)
        }

        def release_opts(namespace: str) -> pulumi.ResourceOptions:
            return child_options(
                self,
                provider=args.k8s_provider,
                depends_on=[namespaces[namespace], args.system_nodes, *priority_classes],
            )

        self._releases(name, args, release_opts)
        self._kueue_objects(name, args)
        self._publish()

    def _releases(
        self,
        name: str,
        args: SchedulingArgs,
        release_opts: Callable[[str], pulumi.ResourceOptions],
    ) -> None:
        """The Kueue, Volcano and Kubeflow Trainer Helm releases, each in its own namespace
        (`release_opts`: after the namespace, the system nodes and the priority classes)."""
        config = args.config
        self.kueue = kueue_release(
            name,
            config,
            kueue_values(config, args.pods_ready),
            pulumi.ResourceOptions.merge(
                release_opts(KUEUE_NAMESPACE),
                pulumi.ResourceOptions(depends_on=list(args.kueue_after)),
            ),
        )
        self.volcano = helm_release(
            f"{name}-volcano",
            addons.VOLCANO,
            version=config.volcano_chart_version,
            values=volcano_values(config),
            opts=release_opts(VOLCANO_NAMESPACE),
        )
        self.trainer = trainer_release(name, config, release_opts(TRAINER_NAMESPACE))

    def _publish(self) -> None:
        """The values teams and training jobs get (SchedulingHandles) and the outputs."""
        self.handles = SchedulingHandles(
            flavors=self.flavors,
            cohort=self.cohort,
            kueue=self.kueue,
            volcano=self.volcano,
            trainer=self.trainer,
        )
        self.register_outputs(
            {
                "flavors": [flavor.name for flavor in self.flavors],
                "cohort": self.cohort,
                "kueueRelease": self.kueue.name,
            }
        )

    def _kueue_objects(self, name: str, args: SchedulingArgs) -> None:
        """The cluster-wide Kueue objects, once its webhooks answer: a ResourceFlavor per GPU
        class and capacity type, the cohort, the WorkloadPriorityClasses."""
        config = args.config
        kueue_objects = child_options(self, provider=args.k8s_provider, depends_on=[self.kueue])
        topologies = {
            gpu_class: k8s.apiextensions.CustomResource(
                f"{name}-topology-{gpu_class}",
                api_version=KUEUE_API,
                kind="Topology",
                metadata={"name": gpu_class},
                spec=topology_spec(levels),
                opts=kueue_objects,
            )
            for gpu_class, levels in args.topologies.items()
        }
        for flavor in self.flavors:
            # A flavor after its Topology: until it exists the ClusterQueues that offer the
            # flavor are inactive ("there is no Topology", pkg/cache/scheduler/clusterqueue.go
            # L350-357 at v0.19.2).
            after = [topologies[flavor.topology]] if flavor.topology in topologies else []
            k8s.apiextensions.CustomResource(
                f"{name}-flavor-{flavor.name}",
                api_version=KUEUE_API,
                kind="ResourceFlavor",
                metadata={"name": flavor.name},
                spec=resource_flavor_spec(flavor),
                opts=pulumi.ResourceOptions.merge(
                    kueue_objects, pulumi.ResourceOptions(depends_on=after)
                ),
            )
        if any(flavor.provisioning_check for flavor in self.flavors):
            k8s.apiextensions.CustomResource(
                f"{name}-provreq-config",
                api_version=KUEUE_API,
                kind="ProvisioningRequestConfig",
                metadata={"name": PROVISIONING_CHECK},
                spec=provisioning_request_config_spec(),
                opts=kueue_objects,
            )
            k8s.apiextensions.CustomResource(
                f"{name}-admission-check",
                api_version=KUEUE_API,
                kind="AdmissionCheck",
                metadata={"name": PROVISIONING_CHECK},
                spec={
                    "controllerName": "kueue.x-k8s.io/provisioning-request",
                    "parameters": {
                        "apiGroup": "kueue.x-k8s.io",
                        "kind": "ProvisioningRequestConfig",
                        "name": PROVISIONING_CHECK,
                    },
                },
                opts=kueue_objects,
            )
        # An explicit Cohort object: the shared pool is visible (and quota-less: teams own it).
        k8s.apiextensions.CustomResource(
            f"{name}-cohort",
            api_version=KUEUE_API,
            kind="Cohort",
            metadata={"name": config.cohort},
            spec={},
            opts=kueue_objects,
        )
        workload_priority_classes(name, kueue_objects)
