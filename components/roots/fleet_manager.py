"""A fleet manager's composition root (`fleet/__main__.py`): the manager of a fleet of
platform stacks (docs/fleet.md).

Reads `gpu-platform-fleet:` config (its cluster and network, its workers by stack name), reads
each worker's `fleetWorker` and `jobPlatform` through a StackReference, and refuses — before
anything else is registered — every way the fleet is miswired (a stack that is no worker of
this fleet, another contract version, a missing job kind, overlapping CIDRs, teams whose
namespaces or queues differ, runtimes that render other containers than the manager's, a worker
whose admission refuses the fleet's trainer). Then it builds the manager: its VPC and a small
EKS cluster, the peering and routes to every worker's private API endpoint, S3 replication
between the workers' checkpoints and datasets, and Kueue with MultiKueue holding the teams'
queues with the fleet's summed quota. Team job stacks (jobs/) name this stack as their
`platformStack`.
"""

from __future__ import annotations

import pulumi

from components.analysis.fleet import FleetFacts, read_workers
from components.analysis.fleet_trainer import manager_runtime_problems
from components.config import ConfigError, NodeGroupsConfig
from components.config.errors import problem_lines
from components.config.fleet import FleetManagerConfig
from components.config.fleet_stack import fleet_lines, load_fleet
from components.contract.fleet_contract import fleet_contract
from components.contract.fleet_platform import FleetContract
from components.contract.platform_contract import exported
from components.platform.cluster.cluster import Cluster, ClusterArgs
from components.platform.cluster.handles import NetworkHandles
from components.platform.cluster.iam import AwsAccount
from components.platform.cluster.network import Network, NetworkArgs
from components.platform.fleet.links import FleetLinks, FleetLinksArgs, WorkerLink
from components.platform.fleet.manager import FleetManager, FleetManagerArgs
from components.platform.fleet.reading import read_worker
from components.platform.observability.cluster_logs import Logging, LoggingArgs
from components.platform.tenancy.team_deploy import deploy_identity
from components.roots.results import FleetRoot
from components.training_jobs.manifests import cluster_training_runtimes, runtime_pod_sets


def fleet_manager() -> FleetRoot:
    """Read and check the workers, then build the manager."""
    cfg = load_fleet()
    # The workers as deployed (their outputs parsed where read) and the whole fleet checked
    # before anything is registered.
    read = [read_worker(ref) for ref in cfg.workers]
    account = AwsAccount.lookup()
    fleet = read_workers(cfg, account.region, read)
    # The runtimes every worker has (one function renders both: same names, grace periods and
    # pod templates), here for Trainer's webhook and Kueue's pod sets (no pod runs here):
    # rendered with the fleet's one trainer, exactly as every worker renders them — Kueue
    # compares the pod sets a worker recomputes with the Workload built here (read_workers
    # refuses a worker whose runtimes differ: components/analysis/fleet_trainer.py).
    runtimes = cluster_training_runtimes(fleet.trainer_image)
    if mismatched := manager_runtime_problems(fleet.workers, runtime_pod_sets(runtimes)):
        raise ConfigError(fleet_lines(problem_lines(mismatched)))
    tags = {"gpu-platform:fleet": cfg.name, "managed-by": "pulumi", **cfg.tags}

    network, cluster = _cluster(cfg, account, tags)
    links = _links(cfg, fleet, account, network.handles, tags)
    FleetManager(
        "fleet",
        FleetManagerArgs(
            fleet=cfg.name,
            scheduling=cfg.scheduling,
            multikueue=cfg.multi_kueue,
            teams=fleet.teams,
            flavors=fleet.flavors,
            pods_ready=fleet.pods_ready,
            worker_secrets={
                w.name: (w.region, w.fleet_worker.kubeconfig_secret_arn) for w in fleet.workers
            },
            secrets=cfg.secrets,
            account_id=account.account_id,
            cluster_name=cluster.name,
            physical_cluster_name=cfg.cluster.name,
            tags=tags,
            runtimes=runtimes,
            k8s_provider=cluster.handles.k8s_provider,
            system_nodes=cluster.handles.system_node_group,
            links=links.peerings,
        ),
    )

    # Each team's CI identity on the manager, where its job stack deploys (namespace-scoped).
    for team in fleet.teams:
        if team.name in cfg.team_deploy:
            deploy_identity(
                team.model_copy(update={"deploy": cfg.team_deploy[team.name]}),
                cfg.cluster.name,
                cluster.name,
                account.account_id,
                tags,
            )

    pulumi.export("clusterName", cluster.name)
    pulumi.export("kubeconfig", cluster.kubeconfig)
    pulumi.export("vpcId", network.vpc_id)
    pulumi.export("workers", {w.name: w.region for w in fleet.workers})
    # What a team's job stack (jobs/) reads when it names this stack as its platformStack.
    contract = fleet_contract(fleet, account_id=account.account_id)
    pulumi.export(FleetContract.OUTPUT, exported(contract))
    return FleetRoot(fleet=fleet)


def _cluster(
    cfg: FleetManagerConfig, account: AwsAccount, tags: dict[str, str]
) -> tuple[Network, Cluster]:
    """The manager's log groups, VPC and small EKS cluster (system nodes only)."""
    logs = Logging(  # log groups before the cluster, as the platform's
        "logging",
        LoggingArgs(
            config=cfg.logging,
            cluster_name=cfg.cluster.name,
            account=account,
            teams=[],
            control_plane_logs=bool(cfg.cluster.log_types),
            audit_logs="audit" in cfg.cluster.log_types,
            tags=tags,
        ),
    )
    network = Network(
        "network",
        NetworkArgs(
            aws_account=account, config=cfg.network, cluster_name=cfg.cluster.name, tags=tags
        ),
    )
    handles = network.handles
    cluster = Cluster(
        "cluster",
        ClusterArgs(
            aws_account=account,
            config=cfg.cluster,
            node_groups=NodeGroupsConfig(system=cfg.system_nodes),
            vpc_id=handles.vpc_id,
            private_subnet_ids=handles.private_subnet_ids,
            tags=tags,
            control_plane_log_group=logs.control_plane_log_group,
        ),
    )
    logs.install(cluster.name)
    return network, cluster


def _links(
    cfg: FleetManagerConfig,
    fleet: FleetFacts,
    account: AwsAccount,
    handles: NetworkHandles,
    tags: dict[str, str],
) -> FleetLinks:
    """The peering and routes to every worker's private API endpoint, and the S3 replication
    between the workers' checkpoints and datasets."""
    # The manager's own network is a platform Network: its route tables are always there.
    assert handles.private_route_table_ids is not None
    return FleetLinks(
        "links",
        FleetLinksArgs(
            fleet=cfg.name,
            region=account.region,
            account_id=account.account_id,
            vpc_id=handles.vpc_id,
            vpc_cidr=cfg.network.vpc_cidr,
            private_route_table_ids=handles.private_route_table_ids,
            workers=[
                WorkerLink(
                    name=w.name,
                    region=w.region,
                    vpc_id=w.fleet_worker.vpc_id,
                    vpc_cidr=w.fleet_worker.vpc_cidr,
                    private_route_table_ids=list(w.fleet_worker.private_route_table_ids),
                    cluster_security_group_id=w.fleet_worker.cluster_security_group_id,
                    buckets=dict(w.job_platform.buckets),
                    kms_key_arn=w.fleet_worker.data_kms_key_arn,
                )
                for w in fleet.workers
            ],
            tags=tags,
        ),
    )
