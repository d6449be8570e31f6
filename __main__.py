"""gpu-platform composition root: load the stack config, build the platform, export.

Reads top to bottom like ../shared/design/ARCHITECTURE.md. No resource logic and no stack-name
branches here: stack differences live in Pulumi.<stack>.yaml and the config model's defaults.
"""

import pulumi

from components import config as stack_config
from components.cluster import Cluster, ClusterArgs
from components.gpu import GpuStack, GpuStackArgs, time_slicing_node_labels
from components.iam import AwsAccount
from components.karpenter import Karpenter, KarpenterArgs
from components.network import Network, NetworkArgs
from components.observability import Observability, ObservabilityArgs
from components.scheduling import Scheduling, SchedulingArgs
from components.storage import Storage, StorageArgs
from components.teams import Team, TeamArgs
from components.training import TrainingJobs, TrainingJobsArgs
from components.validation import (
    Validation,
    ValidationArgs,
    pools_from_karpenter,
    pools_from_node_groups,
)

# Validate everything before the first resource is registered: a bad config deploys nothing.
cfg = stack_config.load()
tags = {"gpu-platform:environment": cfg.environment, "managed-by": "pulumi", **cfg.tags}
aws_account = AwsAccount.lookup()

network = Network(
    "network",
    NetworkArgs(
        config=cfg.network, cluster_name=cfg.cluster.name, tags=tags, aws_account=aws_account
    ),
)
cluster = Cluster(
    "cluster",
    ClusterArgs(
        config=cfg.cluster,
        node_groups=cfg.node_groups,
        vpc_id=network.vpc_id,
        private_subnet_ids=network.private_subnet_ids,
        public_subnet_ids=network.public_subnet_ids,
        tags=tags,
        aws_account=aws_account,
        extra_gpu_labels=time_slicing_node_labels(cfg.gpu_operator),
    ),
)
karpenter = Karpenter(
    "karpenter",
    KarpenterArgs(
        config=cfg.karpenter,
        cluster_name=cfg.cluster.name,
        cluster=cluster,
        tags=tags,
        aws_account=aws_account,
    ),
)
storage = Storage(
    "storage",
    StorageArgs(
        config=cfg.storage,
        bucket_prefix=cfg.bucket_prefix,
        vpc_id=network.vpc_id,
        private_subnet_ids=network.private_subnet_ids,
        cluster_name=cluster.name,
        node_security_group_id=cluster.node_security_group_id,
        k8s_provider=cluster.k8s_provider,
        system_node_group=cluster.system_node_group,
        tags=tags,
        aws_account=aws_account,
    ),
)
observability = Observability(
    "observability",
    ObservabilityArgs(
        config=cfg.observability,
        k8s_provider=cluster.k8s_provider,
        system_node_group=cluster.system_node_group,
    ),
)
gpu = GpuStack(
    "gpu",
    GpuStackArgs(
        config=cfg.gpu_operator,
        k8s_provider=cluster.k8s_provider,
        system_node_group=cluster.system_node_group,
        monitoring_release=observability.release,
    ),
)
scheduling = Scheduling(
    "scheduling",
    SchedulingArgs(
        config=cfg, k8s_provider=cluster.k8s_provider, system_nodes=cluster.system_node_group
    ),
)
account_id = aws_account.account_id
teams = [
    Team(
        f"team-{team.name}",
        TeamArgs(
            config=team,
            flavors=scheduling.flavors,
            cohort=scheduling.cohort,
            buckets={role: bucket.bucket for role, bucket in storage.buckets.items()},
            kms_key_arn=storage.kms_key_arn,
            cluster_name=cluster.name,
            account_id=account_id,
            k8s_provider=cluster.k8s_provider,
            kueue_release=scheduling.kueue,
            volcano_release=scheduling.volcano,
            tags=tags,
        ),
    )
    for team in cfg.teams
]
team_resources: dict[str, list[pulumi.Resource]] = {}
for team, component in zip(cfg.teams, teams, strict=True):
    volumes = storage.team_volumes(team.name, team.namespace, depends_on=[component.namespace])
    team_resources[team.name] = [component, *volumes]

gpu_pools = pools_from_node_groups(cfg.node_groups.gpu) + pools_from_karpenter(cfg.karpenter.pools)
Validation(
    "validation",
    ValidationArgs(
        config=cfg.validation,
        pools=gpu_pools,
        nccl_pool=next(p for p in gpu_pools if p.name == cfg.nccl_pool().name),
        k8s_provider=cluster.k8s_provider,
        gpu_operator=gpu.release,
    ),
)

TrainingJobs(
    "training",
    TrainingJobsArgs(
        config=cfg,
        account_id=account_id,
        k8s_provider=cluster.k8s_provider,
        team_resources=team_resources,
        kueue_release=scheduling.kueue,
        volcano_release=scheduling.volcano,
        trainer_release=scheduling.trainer,
    ),
)

pulumi.export("clusterName", cluster.name)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("oidcProviderArn", cluster.oidc_provider_arn)
pulumi.export("vpcId", network.vpc_id)
pulumi.export("gpuNodeGroups", sorted(cluster.gpu_node_groups))
pulumi.export("teamNamespaces", {team.name: team.namespace for team in cfg.teams})
pulumi.export("buckets", {role: bucket.bucket for role, bucket in storage.buckets.items()})
pulumi.export("rwxStorageClass", storage.storage_class_name)
pulumi.export("karpenterNodePools", sorted(karpenter.node_pools))
pulumi.export("karpenterInterruptionQueueUrl", karpenter.interruption_queue.url)
