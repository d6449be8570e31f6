"""gpu-platform composition root: load the stack config, build the platform, export.

Reads top to bottom like ../shared/design/ARCHITECTURE.md. No resource logic and no stack-name
branches here: stack differences live in Pulumi.<stack>.yaml and the config model's defaults.
"""

import pulumi
import pulumi_aws as aws

from components import config as stack_config
from components.cluster import Cluster, ClusterArgs
from components.network import Network, NetworkArgs
from components.scheduling import Scheduling, SchedulingArgs
from components.teams import Team, TeamArgs, data_buckets

# Validate everything before the first resource is registered: a bad config deploys nothing.
cfg = stack_config.load()
tags = {"gpu-platform:environment": cfg.environment, "managed-by": "pulumi", **cfg.tags}

network = Network(
    "network", NetworkArgs(config=cfg.network, cluster_name=cfg.cluster.name, tags=tags)
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
    ),
)

scheduling = Scheduling(
    "scheduling",
    SchedulingArgs(
        config=cfg, k8s_provider=cluster.k8s_provider, system_nodes=cluster.system_node_group
    ),
)
account_id = aws.get_caller_identity().account_id
teams = [
    Team(
        f"team-{team.name}",
        TeamArgs(
            config=team,
            flavors=scheduling.flavors,
            cohort=scheduling.cohort,
            buckets=data_buckets(cfg.cluster.name, account_id),
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

pulumi.export("clusterName", cluster.name)
pulumi.export("kubeconfig", cluster.kubeconfig)
pulumi.export("oidcProviderArn", cluster.oidc_provider_arn)
pulumi.export("vpcId", network.vpc_id)
pulumi.export("gpuNodeGroups", sorted(cluster.gpu_node_groups))
pulumi.export("teamNamespaces", {team.name: team.namespace for team in cfg.teams})
