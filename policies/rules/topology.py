"""Topology rules: what can never place a gang by the network (docs/topology.md).

- `gpu-platform-training-topology-level-exists`: a training job's topology request names a level
  the nodes of its GPU class carry, no finer than the gang: EKS labels a node with
  `topology.k8s.aws/network-node-layer-1..N` only for instance types EC2 gives a topology, N = 3
  or 4 (components/catalog.py NETWORK_NODE_LAYERS cites the EC2 page and the
  cloud-controller-manager lines), and Kueue admits no podset whose level its flavor's Topology
  lacks ("Flavor %q does not contain the requested level", kubernetes-sigs/kueue@v0.19.2
  pkg/scheduler/flavorassigner/tas_flavorassigner.go L191-194); one node holds one pod of a
  training gang, so a required `kubernetes.io/hostname` never holds two; a pod template with
  more than one of Kueue's three annotations is refused by Kueue's webhook
  (pkg/controller/jobframework/tas_validation.go L42-58). A Volcano Job's hard `networkTopology`
  on a class without the labels has no HyperNode to fit in (the label discoverer makes none for
  a node lacking the labels: volcano-sh/volcano@v1.15.1 pkg/controllers/hypernode/discovery/
  label/label.go L377-382).
- `gpu-platform-kueue-topology-consistent`: a Topology names only levels every node of the
  classes whose flavors use it carries (Kueue drops a node lacking one: pkg/util/tas/node.go
  L19-33); a flavor's `topologyName` names a Topology the stack renders (else its ClusterQueues
  are inactive: pkg/cache/scheduler/clusterqueue.go L350-357), selects no Karpenter nodes (Kueue
  admits a Topology flavor's workload only onto nodes that exist; Karpenter launches none for a
  suspended job), and a GPU class's flavors are all Topology flavors or none (a podset that asks
  for a topology is refused by the others and one that asks for none by these:
  tas_flavorassigner.go L166-204).

The rules read the catalog only (the pack imports nothing else of the program).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence

from pulumi_policy import PolicyResource

from components import catalog
from policies.rules.common import (
    HIGH,
    MANDATORY,
    Config,
    Resource,
    as_list,
    dig,
    quantity,
    resource_rule,
    stack_rule,
)
from policies.rules.kubernetes import TRAIN_JOB, PodTemplate, pod_templates

BATCH_JOB = "kubernetes:batch/v1:Job"
VOLCANO_JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"
TOPOLOGIES = (
    "kubernetes:kueue.x-k8s.io/v1beta2:Topology",
    "kubernetes:kueue.x-k8s.io/v1beta1:Topology",
)
RESOURCE_FLAVORS = (
    "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor",
    "kubernetes:kueue.x-k8s.io/v1beta1:ResourceFlavor",
)
#: Kueue's podset annotations (kubernetes-sigs/kueue@v0.19.2 apis/kueue/v1beta2/
#: topology_types.go L28, L39, L47).
REQUIRED = "kueue.x-k8s.io/podset-required-topology"
PREFERRED = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"
_LAYER = re.compile(rf"^{re.escape(catalog.NETWORK_NODE_LABEL_PREFIX)}(?P<n>[0-9]+)$")


def class_layers(gpu_class: str) -> int | None:
    """Network-node layers every catalog type of `gpu_class` carries (None: unknown class)."""
    match = re.fullmatch(r"(?P<model>[a-z0-9]+)-x(?P<gpus>[0-9]+)", gpu_class)
    if match is None:
        return None
    types = [
        name
        for name, row in catalog.INSTANCE_TYPES.items()
        if row.gpu_model == match["model"] and row.gpus == int(match["gpus"])
    ]
    return min((catalog.network_layers(t) for t in types), default=None)


def label_missing(label: str, layers: int) -> bool:
    """Whether nodes with `layers` network-node layers lack `label` (a network-node layer
    deeper than theirs); the zone, the hostname and other labels are not judged here."""
    match = _LAYER.match(label)
    return match is not None and int(match["n"]) > layers


def _template_class(template: PodTemplate) -> str | None:
    """The GPU class a pod template's required node affinity (or selector) names."""
    selector = template.spec.get("nodeSelector") or {}
    if catalog.LABEL_GPU_CLASS in selector:
        return str(selector[catalog.LABEL_GPU_CLASS])
    terms = dig(
        template.spec,
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    )
    for term in as_list(terms):
        for expr in as_list(dig(term, "matchExpressions")):
            values = as_list(dig(expr, "values"))
            if dig(expr, "key") == catalog.LABEL_GPU_CLASS and len(values) == 1:
                return str(values[0])
    return None


def _pods(resource: Resource) -> int:
    spec = resource.props.get("spec") or {}
    if resource.type == BATCH_JOB:
        return int(quantity(spec.get("parallelism")) or 1)
    if resource.type == TRAIN_JOB:
        return int(quantity(dig(spec, "trainer", "numNodes")) or 1)
    return sum(int(quantity(dig(t, "replicas")) or 1) for t in as_list(spec.get("tasks")))


def _check_level(resource: Resource, _config: Config) -> Iterator[str]:
    pods = _pods(resource)
    for template in pod_templates(resource):
        annotations = template.metadata.get("annotations") or {}
        asked = [a for a in (REQUIRED, PREFERRED, UNCONSTRAINED) if a in annotations]
        if len(asked) > 1:
            yield f"{template.where}: {' and '.join(asked)}: Kueue takes exactly one"
        gpu_class = _template_class(template)
        layers = class_layers(gpu_class) if gpu_class else None
        for annotation in (REQUIRED, PREFERRED):
            label = str(annotations.get(annotation, ""))
            if label and layers is not None and label_missing(label, layers):
                yield (
                    f"{template.where}: {annotation}: {label}, a label no {gpu_class} node "
                    f"carries (its types have {layers} network-node layers)"
                )
        if annotations.get(REQUIRED) == catalog.HOSTNAME_LABEL and pods > 1:
            yield (
                f"{template.where}: {REQUIRED}: {catalog.HOSTNAME_LABEL} for {pods} pods, one "
                "per node: no node ever holds the gang"
            )
        network = dig(resource.props, "spec", "networkTopology")
        if resource.type == VOLCANO_JOB and network and layers == 0:
            yield (
                f"networkTopology mode {dig(network, 'mode')} on {gpu_class}, whose nodes "
                "carry no network-node labels: Volcano discovers no HyperNode for them"
            )


def _flavor_class(flavor: PolicyResource) -> str:
    labels = dig(flavor.props, "spec", "nodeLabels") or {}
    return str(labels.get(catalog.LABEL_GPU_CLASS, ""))


def _check_consistent(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    topologies = {
        str(dig(r.props, "metadata", "name")): r for r in resources if r.resource_type in TOPOLOGIES
    }
    flavors = [r for r in resources if r.resource_type in RESOURCE_FLAVORS]
    by_class: dict[str, list[PolicyResource]] = defaultdict(list)
    users: dict[str, set[str]] = defaultdict(set)
    for flavor in flavors:
        by_class[_flavor_class(flavor)].append(flavor)
        name = dig(flavor.props, "spec", "topologyName")
        if name is None:
            continue
        users[str(name)].add(_flavor_class(flavor))
        yield from _flavor_problems(flavor, str(name), topologies)
    for name, topology in topologies.items():
        yield from _level_problems(topology, name, users.get(name, set()))
    for gpu_class, members in sorted(by_class.items()):
        with_topology = [m for m in members if dig(m.props, "spec", "topologyName") is not None]
        if gpu_class and with_topology and len(with_topology) != len(members):
            without = [
                str(dig(m.props, "metadata", "name")) for m in members if m not in with_topology
            ]
            yield (
                f"GPU class {gpu_class}: flavors {', '.join(without)} have no topologyName "
                "while its others do: Kueue refuses a podset that asks for a topology on "
                "them, and one that asks for none on the others",
                members[0].urn,
            )


def _flavor_problems(
    flavor: PolicyResource, name: str, topologies: Mapping[str, PolicyResource]
) -> Iterator[tuple[str, str | None]]:
    flavor_name = dig(flavor.props, "metadata", "name")
    if name not in topologies:
        yield (
            f"ResourceFlavor {flavor_name} names Topology {name!r}, which the stack does not "
            "render: its ClusterQueues stay inactive",
            flavor.urn,
        )
    labels = dig(flavor.props, "spec", "nodeLabels") or {}
    if labels.get(catalog.LABEL_PROVISIONER) == "karpenter":
        yield (
            f"ResourceFlavor {flavor_name} is a Topology flavor of Karpenter nodes: Kueue "
            "admits its workloads only onto nodes that exist, and Karpenter launches none for "
            "a suspended job",
            flavor.urn,
        )


def _level_problems(
    topology: PolicyResource, name: str, classes: set[str]
) -> Iterator[tuple[str, str | None]]:
    levels = [
        str(dig(level, "nodeLabel")) for level in as_list(dig(topology.props, "spec", "levels"))
    ]
    for gpu_class in sorted(classes):
        layers = class_layers(gpu_class)
        if layers is None:
            continue
        missing = [label for label in levels if label_missing(label, layers)]
        if missing:
            yield (
                f"Topology {name}: levels {', '.join(missing)}, which no {gpu_class} node "
                f"carries ({layers} network-node layers): Kueue leaves every such node out",
                topology.urn,
            )


POLICIES = [
    resource_rule(
        name="gpu-platform-training-topology-level-exists",
        description="A training job's network topology request names a level its GPU class's "
        "nodes carry, no finer than its gang, at most one Kueue topology annotation per pod "
        "template.",
        types=(BATCH_JOB, TRAIN_JOB, VOLCANO_JOB),
        check=_check_level,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Set trainingJobs[].topology to a level of the class's Topology "
        "(components/analysis/topology.py levels_of) and one a domain of which can hold the "
        "gang, or leave it out for the default (docs/topology.md).",
    ),
    stack_rule(
        name="gpu-platform-kueue-topology-consistent",
        description="Every Kueue Topology names only levels its classes' nodes carry; every "
        "Topology flavor names a rendered Topology and selects no Karpenter nodes; a GPU "
        "class's flavors are all Topology flavors or none.",
        check=_check_consistent,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Opt a class in with scheduling.topology.gpuClasses (the Scheduling "
        "component renders its Topology and every flavor's topologyName from one list) and "
        "serve it from managed node groups (docs/topology.md).",
    ),
]
