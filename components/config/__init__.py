"""The stack configuration: one frozen pydantic model, split into a module per area.

Keys live in the `gpu-platform:` namespace of `Pulumi.<stack>.yaml` and are camelCase. Each
area's slice (`network`, `cluster`, `node_groups`, `karpenter`, `gpu`, `observability`,
`validation`, `scheduling`, `storage`, `teams`, `training`) is a frozen model with
`extra="forbid"` and its own validators; `stack.StackConfig` composes them; `load` reads and
validates a stack's values and `errors` formats every problem as one line. Defaults are the
production-safe choice; the dev stack relaxes explicitly. Rules that need facts from several
areas (capacity, quotas, whether a job can run) live in `components.analysis`.

This module re-exports the public names so callers write `from components.config import X`.
"""

from __future__ import annotations

from components.config.autoscaler import (
    ClusterAutoscalerConfig,
)
from components.config.base import (
    GPU_CLASS_PATTERN,
    NAMESPACE,
    ConfigError,
    DigestImage,
    Duration,
    GoDuration,
    Model,
    Name,
    Problem,
    S3Prefix,
    ScrapeInterval,
    problems_error,
)
from components.config.cluster import (
    LOG_TYPES,
    SUPPORTED_KUBERNETES_VERSIONS,
    AddonVersion,
    AddonVersions,
    ClusterConfig,
    LogType,
    RoleArn,
)
from components.config.errors import (
    format_errors,
    problem_lines,
    split_path,
)
from components.config.gpu import (
    GpuOperatorConfig,
    TimeSlicingConfig,
)
from components.config.karpenter import (
    DEFAULT_POOL_WEIGHT,
    AmiAlias,
    KarpenterConfig,
    KarpenterDisruption,
    KarpenterFeatureGates,
    KarpenterLimits,
    KarpenterNodeClass,
    KarpenterPool,
    KarpenterReservation,
    gpu_class_instance_types,
)
from components.config.load import (
    load,
    namespace_values,
    parse,
)
from components.config.network import (
    EfaPlacementGroup,
    ExistingVpc,
    NetworkConfig,
    SubnetId,
)
from components.config.node_groups import (
    GpuNodeGroup,
    NodeGroupsConfig,
    NodeTaint,
    SystemNodeGroup,
)
from components.config.observability import (
    AlertThresholds,
    ObservabilityConfig,
)
from components.config.scheduling import (
    SchedulingConfig,
    WaitForPodsReady,
)
from components.config.stack import (
    StackConfig,
)
from components.config.storage import (
    BUCKET_PREFIX_MAX,
    FSX_CAPACITY_INCREMENT_GIB,
    FSX_MIN_CAPACITY_GIB,
    FSX_THROUGHPUT_TIERS,
    BucketLifecycle,
    LustreEvent,
    RwxConfig,
    StorageConfig,
)
from components.config.teams import (
    DNS_LABEL,
    ContainerDefaults,
    FlavorQuota,
    IamStatement,
    NamespaceLimits,
    Quantity,
    TeamConfig,
    TeamDeploy,
    TeamEgress,
    VolcanoQueue,
)
from components.config.topology import (
    TOPOLOGY_LEVELS,
    TopologyConfig,
    TopologyLevel,
    TopologyMode,
    TopologyRequest,
)
from components.config.training import (
    JOB_PRIORITIES,
    MAX_SAVE_SECONDS,
    POD_GRACE_SECONDS,
    SPOT_NOTICE_SECONDS,
    DeepSpeedSettings,
    EnvName,
    FsdpSettings,
    GraceSeconds,
    HyperValue,
    ImageRef,
    JobCheckpoint,
    SecretEnv,
    TrainingConfig,
    TrainingJobConfig,
    gpus_of_class,
    job_grace_seconds,
    trainer_runtime_names,
)
from components.config.validation import (
    NcclTestConfig,
    ValidationConfig,
)

__all__ = [
    "BUCKET_PREFIX_MAX",
    "DEFAULT_POOL_WEIGHT",
    "DNS_LABEL",
    "FSX_CAPACITY_INCREMENT_GIB",
    "FSX_MIN_CAPACITY_GIB",
    "FSX_THROUGHPUT_TIERS",
    "GPU_CLASS_PATTERN",
    "JOB_PRIORITIES",
    "LOG_TYPES",
    "MAX_SAVE_SECONDS",
    "NAMESPACE",
    "POD_GRACE_SECONDS",
    "SPOT_NOTICE_SECONDS",
    "SUPPORTED_KUBERNETES_VERSIONS",
    "TOPOLOGY_LEVELS",
    "AddonVersion",
    "AddonVersions",
    "AlertThresholds",
    "AmiAlias",
    "BucketLifecycle",
    "ClusterAutoscalerConfig",
    "ClusterConfig",
    "ConfigError",
    "ContainerDefaults",
    "DeepSpeedSettings",
    "DigestImage",
    "Duration",
    "EfaPlacementGroup",
    "EnvName",
    "ExistingVpc",
    "FlavorQuota",
    "FsdpSettings",
    "GoDuration",
    "GpuNodeGroup",
    "GpuOperatorConfig",
    "GraceSeconds",
    "HyperValue",
    "IamStatement",
    "ImageRef",
    "JobCheckpoint",
    "KarpenterConfig",
    "KarpenterDisruption",
    "KarpenterFeatureGates",
    "KarpenterLimits",
    "KarpenterNodeClass",
    "KarpenterPool",
    "KarpenterReservation",
    "LogType",
    "LustreEvent",
    "Model",
    "Name",
    "NamespaceLimits",
    "NcclTestConfig",
    "NetworkConfig",
    "NodeGroupsConfig",
    "NodeTaint",
    "ObservabilityConfig",
    "Problem",
    "Quantity",
    "RoleArn",
    "RwxConfig",
    "S3Prefix",
    "SchedulingConfig",
    "ScrapeInterval",
    "SecretEnv",
    "StackConfig",
    "StorageConfig",
    "SubnetId",
    "SystemNodeGroup",
    "TeamConfig",
    "TeamDeploy",
    "TeamEgress",
    "TimeSlicingConfig",
    "TopologyConfig",
    "TopologyLevel",
    "TopologyMode",
    "TopologyRequest",
    "TrainingConfig",
    "TrainingJobConfig",
    "ValidationConfig",
    "VolcanoQueue",
    "WaitForPodsReady",
    "format_errors",
    "gpu_class_instance_types",
    "gpus_of_class",
    "job_grace_seconds",
    "load",
    "namespace_values",
    "parse",
    "problem_lines",
    "problems_error",
    "split_path",
    "trainer_runtime_names",
]
