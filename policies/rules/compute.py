"""Platform rules: GPU capacity (managed node groups, Karpenter NodePools/EC2NodeClasses),
spot interruption handling, Kueue quotas against pool capacity, training jobs (gang scheduling,
spot resilience, DeepSpeed batch arithmetic) and Helm chart pinning.

GPU counts per instance type come from components/catalog.py, the single home of those facts.
"""

from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from pulumi_policy import PolicyResource

from components import catalog
from policies.rules.common import (
    ADVISORY,
    CRITICAL,
    HIGH,
    MANDATORY,
    MEDIUM,
    Config,
    Resource,
    as_list,
    dig,
    fmt,
    is_map,
    quantity,
    resource_rule,
    stack_rule,
    truthy,
)
from policies.rules.fleet import is_multikueue_queue, multikueue_checks, pool_selector
from policies.rules.kubernetes import (
    GPU_RESOURCE,
    TEMPLATE_PATHS,
    TRAIN_JOB,
    PodTemplate,
    gpu_limit,
    pod_templates,
    requests_gpus,
)

MANAGED_NODE_GROUP = "eks:index:ManagedNodeGroup"
EKS_NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"
NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"
EC2_NODE_CLASS = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"
SQS_QUEUE = "aws:sqs/queue:Queue"
EVENT_RULE = "aws:cloudwatch/eventRule:EventRule"
HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
HELM_CHART = "kubernetes:helm.sh/v4:Chart"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
CLUSTER_QUEUES = (
    "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue",
    "kubernetes:kueue.x-k8s.io/v1beta1:ClusterQueue",
)
RESOURCE_FLAVORS = (
    "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor",
    "kubernetes:kueue.x-k8s.io/v1beta1:ResourceFlavor",
)
BATCH_JOB = "kubernetes:batch/v1:Job"
VOLCANO_JOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"
PYTORCH_JOB = "kubernetes:kubeflow.org/v1:PyTorchJob"
MPI_JOBS = ("kubernetes:kubeflow.org/v1:MPIJob", "kubernetes:kubeflow.org/v2beta1:MPIJob")
JOBSET = "kubernetes:jobset.x-k8s.io/v1alpha2:JobSet"
TRAINING_TYPES = (BATCH_JOB, VOLCANO_JOB, PYTORCH_JOB, *MPI_JOBS, JOBSET, TRAIN_JOB)

KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
CAPACITY_TYPE_KEYS = (
    "karpenter.sh/capacity-type",
    catalog.LABEL_CAPACITY_TYPE,
    "eks.amazonaws.com/capacityType",
)
INTERRUPTION_EVENTS = (
    "EC2 Spot Instance Interruption Warning",
    "EC2 Instance Rebalance Recommendation",
    "EC2 Instance State-change Notification",
    "AWS Health Event",
)
GPU_FAMILIES = frozenset(catalog.instance(n).family for n in catalog.GPU_INSTANCE_TYPES)
#: A GPU class label value, `<model>-x<GPUs per node>` (catalog.gpu_node_labels).
GPU_CLASS_LABEL = re.compile(r"[a-z0-9]+-x([0-9]+)")
PINNED_VERSION = re.compile(r"^v?\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$")


# --- GPU capacity ---------------------------------------------------------------------------------


def _gpus_per_node(instance_types: Sequence[Any]) -> int:
    counts = [
        catalog.instance(str(t)).gpus for t in instance_types if str(t) in catalog.INSTANCE_TYPES
    ]
    return max(counts, default=0)


def group_gpus_per_node(props: Mapping[str, Any]) -> int:
    """GPUs per node of a managed node group: from its instance types or, for a Capacity Block
    group (its one type is in the launch template, never on the node group: EKS refuses both,
    components/platform/cluster/node_group_builders.py), from its `gpu-class` label
    (`<model>-x<n>`)."""
    gpus = _gpus_per_node(as_list(props.get("instanceTypes")))
    if gpus:
        return gpus
    labels = props.get("labels")
    label = str(labels.get(catalog.LABEL_GPU_CLASS, "")) if is_map(labels) else ""
    match = GPU_CLASS_LABEL.fullmatch(label)
    return int(match.group(1)) if match else 0


def is_gpu_node_group(props: Mapping[str, Any]) -> bool:
    return "NVIDIA" in str(props.get("amiType", "")) or group_gpus_per_node(props) > 0


def _has_gpu_taint(taints: Any, effect: str) -> bool:
    return any(
        dig(t, "key") == catalog.GPU_TAINT_KEY and dig(t, "effect") == effect
        for t in as_list(taints)
    )


def _check_node_group_taint(resource: Resource, _config: Config) -> Iterator[str]:
    if is_gpu_node_group(resource.props) and not _has_gpu_taint(
        resource.props.get("taints"), "NO_SCHEDULE"
    ):
        yield f"GPU node group without the {catalog.GPU_TAINT_KEY}:NO_SCHEDULE taint"


def _check_node_group_bounded(resource: Resource, config: Config) -> Iterator[str]:
    if not is_gpu_node_group(resource.props):
        return
    max_size = dig(resource.props, "scalingConfig", "maxSize")
    if max_size is None:
        yield "GPU node group without scalingConfig.maxSize"
        return
    gpus = int(max_size) * group_gpus_per_node(resource.props)
    if gpus > config["maxGpusPerGroup"]:
        yield f"GPU node group can grow to {gpus} GPUs; at most {fmt(config['maxGpusPerGroup'])}"


def _requirements(pool: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    found = as_list(dig(pool, "spec", "template", "spec", "requirements"))
    return [r for r in found if is_map(r)]


def pool_labels(pool: Mapping[str, Any]) -> dict[str, str]:
    """Labels a NodePool's nodes carry: template labels plus single-valued `In` requirements."""
    labels = {
        str(k): str(v)
        for k, v in (dig(pool, "spec", "template", "metadata", "labels") or {}).items()
    }
    for requirement in _requirements(pool):
        values = as_list(requirement.get("values"))
        if requirement.get("operator") == "In" and len(values) == 1:
            labels.setdefault(str(requirement.get("key")), str(values[0]))
    return labels


def is_gpu_pool(pool: Mapping[str, Any]) -> bool:
    if GPU_RESOURCE in (dig(pool, "spec", "limits") or {}):
        return True
    labels = dig(pool, "spec", "template", "metadata", "labels") or {}
    if catalog.LABEL_GPU_VENDOR in labels or catalog.LABEL_GPU_CLASS in labels:
        return True
    for requirement in _requirements(pool):
        key = str(requirement.get("key"))
        values = {str(v) for v in as_list(requirement.get("values"))}
        if key.startswith("karpenter.k8s.aws/instance-gpu"):
            return True
        if key == "node.kubernetes.io/instance-type" and values & catalog.GPU_INSTANCE_TYPES:
            return True
        if key == "karpenter.k8s.aws/instance-family" and values & GPU_FAMILIES:
            return True
    return False


def allows_spot(pool: Mapping[str, Any]) -> bool:
    for requirement in _requirements(pool):
        if requirement.get("key") == "karpenter.sh/capacity-type":
            values = {str(v) for v in as_list(requirement.get("values"))}
            return requirement.get("operator") == "In" and "spot" in values
    return False  # Karpenter's default is on-demand


def _check_pool_taint(resource: Resource, _config: Config) -> Iterator[str]:
    if is_gpu_pool(resource.props) and not _has_gpu_taint(
        dig(resource.props, "spec", "template", "spec", "taints"), catalog.GPU_TAINT_EFFECT
    ):
        yield f"GPU NodePool without the {catalog.GPU_TAINT_KEY}:NoSchedule taint"


def _check_pool_limit(resource: Resource, config: Config) -> Iterator[str]:
    if not is_gpu_pool(resource.props):
        return
    limit = quantity(dig(resource.props, "spec", "limits", GPU_RESOURCE))
    if limit is None:
        yield f"GPU NodePool without spec.limits[{GPU_RESOURCE!r}]: spend is unbounded"
    elif limit > config["maxGpusPerPool"]:
        yield f"GPU NodePool limit {limit:g} GPUs; at most {fmt(config['maxGpusPerPool'])}"


def _check_node_class(resource: Resource, config: Config) -> Iterator[str]:
    spec = resource.props.get("spec") or {}
    for term in as_list(spec.get("amiSelectorTerms")):
        alias = str(dig(term, "alias") or "")
        if alias.endswith("@latest") and config["forbidLatestAmiAlias"]:
            yield f"amiSelectorTerms alias {alias!r} rolls every node when AWS publishes an AMI"
    tokens = dig(spec, "metadataOptions", "httpTokens")
    if tokens not in (None, "required"):  # Karpenter's default is required
        yield f"metadataOptions.httpTokens {tokens!r}: IMDSv2 must be required"
    for mapping in as_list(spec.get("blockDeviceMappings")):
        ebs = dig(mapping, "ebs")
        if is_map(ebs) and not truthy(ebs.get("encrypted")):
            yield f"block device {dig(mapping, 'deviceName')!r} is not encrypted"


def _check_interruption_queue(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    spot_pools = [r for r in resources if r.resource_type == NODE_POOL and allows_spot(r.props)]
    if not spot_pools:
        return
    queues = [r for r in resources if r.resource_type == SQS_QUEUE]
    patterns = " ".join(
        str(r.props.get("eventPattern", "")) for r in resources if r.resource_type == EVENT_RULE
    )
    missing_events = [e for e in INTERRUPTION_EVENTS if e not in patterns]
    configured = [
        r
        for r in resources
        if r.resource_type in (HELM_RELEASE, HELM_CHART)
        and "karpenter" in str(r.props.get("chart", ""))
        and dig(r.props, "values", "settings", "interruptionQueue")
    ]
    for pool in spot_pools:
        name = dig(pool.props, "metadata", "name")
        if not queues:
            yield f"spot NodePool {name!r} but no SQS interruption queue", pool.urn
        if missing_events:
            yield (
                f"spot NodePool {name!r} but no EventBridge rule for: {', '.join(missing_events)}",
                pool.urn,
            )
        if not configured:
            yield (
                f"spot NodePool {name!r} but the Karpenter release sets no "
                "settings.interruptionQueue",
                pool.urn,
            )


# --- Kueue ----------------------------------------------------------------------------------------


def _pool_capacities(resources: Sequence[PolicyResource]) -> list[tuple[dict[str, str], float]]:
    """(node labels, max GPUs) of every GPU pool: Karpenter NodePools and managed node groups."""
    pools: list[tuple[dict[str, str], float]] = []
    for r in resources:
        if r.resource_type == NODE_POOL and is_gpu_pool(r.props):
            limit = quantity(dig(r.props, "spec", "limits", GPU_RESOURCE)) or 0.0
            pools.append((pool_labels(r.props), limit))
        elif r.resource_type in (MANAGED_NODE_GROUP, EKS_NODE_GROUP) and is_gpu_node_group(r.props):
            max_size = quantity(dig(r.props, "scalingConfig", "maxSize")) or 0.0
            per_node = group_gpus_per_node(r.props)
            labels = {str(k): str(v) for k, v in (r.props.get("labels") or {}).items()}
            pools.append((labels, max_size * per_node))
    return pools


def _check_kueue_quota(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    flavors = {
        str(dig(r.props, "metadata", "name")): pool_selector(r)
        for r in resources
        if r.resource_type in RESOURCE_FLAVORS
    }
    quota: dict[str, float] = defaultdict(float)
    owners: dict[str, list[str]] = defaultdict(list)
    dispatching = multikueue_checks(resources)
    for queue in resources:
        if queue.resource_type not in CLUSTER_QUEUES:
            continue
        if is_multikueue_queue(queue, dispatching):
            continue  # a fleet manager's: the workers' quota, checked by each worker's stack
        for group in as_list(dig(queue.props, "spec", "resourceGroups")):
            for flavor in as_list(dig(group, "flavors")):
                for res in as_list(dig(flavor, "resources")):
                    if dig(res, "name") == GPU_RESOURCE:
                        name = str(dig(flavor, "name"))
                        quota[name] += quantity(dig(res, "nominalQuota")) or 0.0
                        owners[name].append(queue.urn)
    pools = _pool_capacities(resources)
    for flavor, total in sorted(quota.items()):
        labels = flavors.get(flavor)
        if labels is None:
            yield (
                f"ClusterQueue quota names ResourceFlavor {flavor!r}, which is not declared",
                (owners[flavor][0]),
            )
            continue
        capacity = sum(gpus for node, gpus in pools if labels.items() <= node.items())
        if total > capacity:
            yield (
                f"flavor {flavor!r}: nominal GPU quota {total:g} exceeds the {capacity:g} GPUs "
                "its pools can provide",
                owners[flavor][0],
            )


# --- training jobs --------------------------------------------------------------------------------


def _replicas(resource: Resource) -> int:
    """Pods of a training job (for gang and world-size checks)."""
    spec = resource.props.get("spec") or {}
    if resource.type == BATCH_JOB:
        return int(quantity(spec.get("parallelism")) or 1)
    if resource.type == VOLCANO_JOB:
        return sum(int(quantity(dig(t, "replicas")) or 1) for t in as_list(spec.get("tasks")))
    if resource.type == TRAIN_JOB:
        return int(quantity(dig(spec, "trainer", "numNodes")) or 1)
    replica_specs = spec.get("pytorchReplicaSpecs") or spec.get("mpiReplicaSpecs") or {}
    if replica_specs:
        return sum(int(quantity(dig(s, "replicas")) or 1) for s in replica_specs.values())
    if resource.type == JOBSET:
        return sum(
            int(quantity(dig(j, "replicas")) or 1)
            * int(quantity(dig(j, "template", "spec", "parallelism")) or 1)
            for j in as_list(spec.get("replicatedJobs"))
        )
    return 1


def world_size(resource: Resource) -> int:
    """GPUs across all pods: pods x GPUs per pod (worker template)."""
    per_pod = 0
    for template in pod_templates(resource):
        per_pod = max(per_pod, sum(int(quantity(gpu_limit(c)) or 0) for c in template.containers()))
    return _replicas(resource) * per_pod


def _check_gang(resource: Resource, _config: Config) -> Iterator[str]:
    if _replicas(resource) <= 1:
        return
    labels = dig(resource.props, "metadata", "labels") or {}
    kueue = KUEUE_QUEUE_LABEL in labels
    templates = pod_templates(resource)
    spec = resource.props.get("spec") or {}
    if resource.type == VOLCANO_JOB:
        volcano = True
        replicas = _replicas(resource)
        if int(quantity(spec.get("minAvailable")) or 0) != replicas:
            yield f"Volcano Job minAvailable {fmt(spec.get('minAvailable'))} != all {replicas} pods"
    else:
        volcano = (
            any(
                t.spec.get("schedulerName") == "volcano"
                and VOLCANO_GROUP_ANNOTATION in (t.metadata.get("annotations") or {})
                for t in templates
            )
            or dig(spec, "runPolicy", "schedulingPolicy", "minAvailable") is not None
        )
    if not kueue and not volcano:
        yield (
            f"multi-node job ({_replicas(resource)} pods) is not gang-scheduled: add the "
            f"{KUEUE_QUEUE_LABEL} label (Kueue) or use Volcano"
        )
    if kueue and volcano:
        yield "job is gang-scheduled by both Kueue and Volcano; keep one mechanism"


def targets_spot(template: PodTemplate) -> bool:
    selector = template.spec.get("nodeSelector") or {}
    if any(str(selector.get(k, "")).lower() == "spot" for k in CAPACITY_TYPE_KEYS):
        return True
    terms = dig(
        template.spec,
        "affinity",
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    )
    for term in as_list(terms):
        for expression in as_list(dig(term, "matchExpressions")):
            values = {str(v).lower() for v in as_list(dig(expression, "values"))}
            if (
                dig(expression, "key") in CAPACITY_TYPE_KEYS
                and "spot" in values
                and (dig(expression, "operator") == "In")
            ):
                return True
    return False


def _has_checkpoint_storage(template: PodTemplate) -> bool:
    claims = {
        dig(v, "name")
        for v in as_list(template.spec.get("volumes"))
        if dig(v, "persistentVolumeClaim") is not None
    }
    for container in template.containers():
        if any(dig(m, "name") in claims for m in as_list(container.get("volumeMounts"))):
            return True
        for env in as_list(container.get("env")):
            if "CHECKPOINT" in str(dig(env, "name")) and str(dig(env, "value") or "").startswith(
                "s3://"
            ):
                return True
    return False


def _check_spot_jobs(resource: Resource, config: Config) -> Iterator[str]:
    for template in pod_templates(resource):
        if not targets_spot(template) or not requests_gpus(template):
            continue
        annotations = template.metadata.get("annotations") or {}
        if str(annotations.get(DO_NOT_DISRUPT)) != "true":
            yield f"{template.where}: spot pod without annotation {DO_NOT_DISRUPT}: 'true'"
        grace = quantity(template.spec.get("terminationGracePeriodSeconds"))
        if grace is None or grace < config["minGracePeriodSeconds"]:
            yield (
                f"{template.where}: terminationGracePeriodSeconds {fmt(grace)} < "
                f"{fmt(config['minGracePeriodSeconds'])} (time to write a checkpoint)"
            )
        if not _has_checkpoint_storage(template):
            yield f"{template.where}: spot pod without checkpoint storage (PVC mount or s3://)"


def _ds_configs(props: Mapping[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    for key, value in (props.get("data") or {}).items():
        if not str(key).endswith(".json"):
            continue
        try:
            parsed = json.loads(str(value))
        except ValueError:
            continue
        if isinstance(parsed, dict) and (
            "train_micro_batch_size_per_gpu" in parsed or "zero_optimization" in parsed
        ):
            yield str(key), parsed


def ds_config_problems(ds: Mapping[str, Any], world: int | None) -> list[str]:
    """Inconsistencies of a DeepSpeed config; `world` = GPUs of the job using it, if known."""
    problems = []
    if truthy(dig(ds, "fp16", "enabled")) and truthy(dig(ds, "bf16", "enabled")):
        problems.append("fp16 and bf16 are both enabled")
    stage = dig(ds, "zero_optimization", "stage")
    if stage is not None and stage not in (0, 1, 2, 3):
        problems.append(f"zero_optimization.stage {fmt(stage)} not in 0..3")
    total = ds.get("train_batch_size")
    micro = ds.get("train_micro_batch_size_per_gpu")
    accumulation = ds.get("gradient_accumulation_steps", 1)
    if all(isinstance(v, int) for v in (total, micro, accumulation)):
        if world:
            if total != micro * accumulation * world:
                problems.append(
                    f"train_batch_size {total} != micro {micro} x accumulation {accumulation} "
                    f"x world size {world}"
                )
        elif total % (micro * accumulation):
            problems.append(f"train_batch_size {total} is not a multiple of micro x accumulation")
    return problems


def _check_deepspeed(
    resources: Sequence[PolicyResource], _config: Config
) -> Iterator[tuple[str, str | None]]:
    users: dict[tuple[str, str], list[int]] = defaultdict(list)
    for r in resources:
        if r.resource_type not in TEMPLATE_PATHS and r.resource_type != TRAIN_JOB:
            continue
        resource = Resource(r.resource_type, r.name, r.urn, r.props)
        for template in pod_templates(resource):
            for volume in as_list(template.spec.get("volumes")):
                name = dig(volume, "configMap", "name")
                if name:
                    users[(template.namespace, str(name))].append(world_size(resource))
    for r in resources:
        if r.resource_type != CONFIG_MAP:
            continue
        key = (
            str(dig(r.props, "metadata", "namespace") or "default"),
            str(dig(r.props, "metadata", "name")),
        )
        worlds = users.get(key) or [0]
        for data_key, ds in _ds_configs(r.props):
            for world in sorted(set(worlds)):
                for problem in ds_config_problems(ds, world or None):
                    yield f"ConfigMap {key[1]!r} {data_key}: {problem}", r.urn


def _check_helm_version(resource: Resource, _config: Config) -> Iterator[str]:
    version = str(resource.props.get("version") or "")
    if not PINNED_VERSION.match(version):
        yield f"chart {resource.props.get('chart')!r} version {version!r} is not an exact version"


POLICIES = [
    resource_rule(
        name="gpu-platform-eks-gpu-node-group-taint",
        description="Managed GPU node groups carry the GPU taint (component and aws:eks child).",
        types=(MANAGED_NODE_GROUP, EKS_NODE_GROUP),
        check=_check_node_group_taint,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Pass taints=[eks_gpu_taint()] (components/platform/cluster/cluster.py).",
    ),
    resource_rule(
        name="gpu-platform-eks-gpu-node-group-bounded",
        description="A managed GPU node group cannot grow beyond the GPU budget per group.",
        types=(MANAGED_NODE_GROUP, EKS_NODE_GROUP),
        check=_check_node_group_bounded,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Lower gpu-platform:nodeGroups.gpu[].maxSize, or raise maxGpusPerGroup in "
        "policies/config.<stack>.json after a budget review.",
        config={"maxGpusPerGroup": {"type": "integer", "minimum": 1, "default": 128}},
    ),
    resource_rule(
        name="gpu-platform-karpenter-gpu-pool-taint",
        description="Every GPU NodePool taints its nodes nvidia.com/gpu:NoSchedule.",
        types=(NODE_POOL,),
        check=_check_pool_taint,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Add components.catalog.gpu_taint() to spec.template.spec.taints.",
    ),
    resource_rule(
        name="gpu-platform-karpenter-gpu-pool-limit",
        description="Every GPU NodePool bounds its GPUs with spec.limits['nvidia.com/gpu'].",
        types=(NODE_POOL,),
        check=_check_pool_limit,
        severity=CRITICAL,
        enforcement=MANDATORY,
        remediation="Set spec.limits['nvidia.com/gpu'] from the pool's config (maxGpus).",
        config={"maxGpusPerPool": {"type": "integer", "minimum": 1, "default": 256}},
    ),
    resource_rule(
        name="gpu-platform-karpenter-node-class-hardened",
        description="EC2NodeClasses pin the AMI (no '@latest' alias where forbidden), require "
        "IMDSv2 and encrypt block devices.",
        types=(EC2_NODE_CLASS,),
        check=_check_node_class,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Use alias al2023@vYYYYMMDD (promote dev → prod deliberately), "
        "httpTokens: required, ebs.encrypted: true.",
        config={"forbidLatestAmiAlias": {"type": "boolean", "default": True}},
    ),
    stack_rule(
        name="gpu-platform-karpenter-spot-interruption-queue",
        description="Spot NodePools require the interruption queue: SQS queue, the four "
        "EventBridge rules and settings.interruptionQueue on the Karpenter release.",
        check=_check_interruption_queue,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Enable Karpenter's interruption handling (the Karpenter component creates "
        "the queue, the rules and the chart setting).",
    ),
    stack_rule(
        name="gpu-platform-kueue-quota-within-pools",
        description="Kueue nominal GPU quotas per flavor do not exceed what the flavor's pools "
        "can provide (Kueue is capacity-blind).",
        check=_check_kueue_quota,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Derive nominalQuota from the pools' GPU limits, or raise the pool limit.",
    ),
    resource_rule(
        name="gpu-platform-training-gang-scheduled",
        description="Multi-node training jobs are gang-scheduled by exactly one mechanism "
        "(Kueue or Volcano, minAvailable = all pods).",
        types=TRAINING_TYPES,
        check=_check_gang,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation=f"Label the job {KUEUE_QUEUE_LABEL}=<team queue> (Kueue waitForPodsReady), "
        "or submit it as a Volcano Job with minAvailable = replicas.",
    ),
    resource_rule(
        name="gpu-platform-training-spot-resilience",
        description="GPU pods on spot have checkpoint storage, a termination grace period and "
        "karpenter.sh/do-not-disrupt.",
        types=TRAINING_TYPES,
        check=_check_spot_jobs,
        severity=MEDIUM,
        enforcement=MANDATORY,
        remediation="Mount the team's checkpoint PVC (or set CHECKPOINT_URI=s3://...), set "
        "terminationGracePeriodSeconds and the do-not-disrupt annotation.",
        config={
            "minGracePeriodSeconds": {"type": "integer", "minimum": 0, "default": 120},
        },
    ),
    stack_rule(
        name="gpu-platform-training-deepspeed-batch",
        description="DeepSpeed configs hold: train_batch_size = micro x accumulation x world "
        "size, fp16 xor bf16, ZeRO stage in 0..3.",
        check=_check_deepspeed,
        severity=MEDIUM,
        enforcement=ADVISORY,
        remediation="Derive train_batch_size from the job's world size (components/training).",
    ),
    resource_rule(
        name="gpu-platform-helm-chart-pinned",
        description="Helm releases and charts pin an exact chart version.",
        types=(HELM_RELEASE, HELM_CHART),
        check=_check_helm_version,
        severity=HIGH,
        enforcement=MANDATORY,
        remediation="Set version to the exact version from schemas/SOURCES.md via the "
        "config model's default.",
    ),
]
