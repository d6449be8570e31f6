"""The platform's composition root (`__main__.py`): load the stack config, build the platform,
export.

Reads top to bottom like the picture in docs/architecture.md. No resource logic and no stack-name
branches here: stack differences live in Pulumi.<stack>.yaml and the config model's defaults;
each `XxxArgs.of(...)` takes its component's slice of the config.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from pathlib import Path

import pulumi

from components import analysis
from components import config as stack_config
from components.analysis.facts import StackFacts
from components.analysis.fleet_trainer import FleetTrainer, home_trainer
from components.config import StackConfig
from components.config.images import TRAINER_CONTEXT, TRAINER_REPOSITORY
from components.contract.fleet_worker import WorkerContract
from components.contract.job_platform import PlatformContract
from components.contract.platform_contract import exported, platform_contract
from components.contract.schema import dumped, resolved
from components.ecr_tags import replicated
from components.platform.capacity.autoscaler import ClusterAutoscaler, ClusterAutoscalerArgs
from components.platform.capacity.gpu import GpuStack, GpuStackArgs, time_slicing_node_labels
from components.platform.capacity.karpenter import Karpenter, KarpenterArgs
from components.platform.cluster.cluster import Cluster, ClusterArgs
from components.platform.cluster.iam import AwsAccount, deploying_principal_arn
from components.platform.cluster.network import Network, NetworkArgs
from components.platform.fleet import worker as fleet_worker
from components.platform.fleet.reading import read_trainer_home
from components.platform.observability.cluster_logs import Logging, LoggingArgs
from components.platform.observability.observability import Observability, ObservabilityArgs
from components.platform.registry.admission import Admission, AdmissionArgs
from components.platform.registry.registry import Registry, RegistryArgs
from components.platform.registry.trainer_image import TrainerImage, TrainerImageArgs, context_tag
from components.platform.scheduling.scheduling import Scheduling, SchedulingArgs
from components.platform.storage.storage import Storage, StorageArgs
from components.platform.tenancy.team_deploy import deploy_identity
from components.platform.tenancy.team_secrets import TeamSecrets, TeamSecretsArgs
from components.platform.tenancy.teams import Team, TeamArgs
from components.platform.validation.validation import Validation, ValidationArgs
from components.roots.results import PlatformRoot
from components.training_jobs.job_images import plan_jobs
from components.training_jobs.manifests import runtime_pod_sets
from components.training_jobs.plan import JobImage, deploy_provenance
from components.training_jobs.training import TrainingJobs, TrainingJobsArgs


def platform(project_dir: Path) -> PlatformRoot:
    """Build one platform stack; `project_dir` holds the trainer's build context (the
    directory of `__main__.py`)."""
    # Validate everything, build the facts once and judge every workload before the first
    # resource is registered: a bad config, or a job that cannot run, deploys nothing.
    facts, judgement = analysis.check(stack_config.load())
    cfg = facts.cfg
    tags = {"gpu-platform:environment": cfg.environment, "managed-by": "pulumi", **cfg.tags}
    account = AwsAccount.lookup()
    # A fleet worker that runs its trainer home's trainer (docs/fleet.md "One image in every
    # region"): read and checked before anything else, like the rest of the config.
    fleet_trainer: FleetTrainer | None = None
    if cfg.fleet is not None and cfg.fleet.trainer_home is not None:
        home = read_trainer_home(cfg.fleet.trainer_home)
        fleet_trainer = home_trainer(cfg, account.region, *home)

    base = _platform_layer(facts, project_dir, account, tags, fleet_trainer)
    eks, scheduling = base.cluster.handles, base.scheduling
    team_resources = _teams(cfg, account, tags, base)
    schedulers = (scheduling.kueue, scheduling.volcano)
    monitoring_release = base.monitoring[1]
    Validation(
        "validation",
        ValidationArgs.of(facts, eks, base.gpu.release, monitoring_release, schedulers),
    )

    # Workload layer: each job's plan, once (the report reads these too), then its objects.
    provenance = deploy_provenance(os.environ)
    plans = plan_jobs(
        facts,
        trainer=base.trainer,
        account_id=account.account_id,
        region=account.region,
        provenance=provenance,
    )
    runtime_image = cfg.training.default_image or (base.trainer_ref or "")
    training_args = TrainingJobsArgs.of(
        plans, runtime_image, eks, scheduling.handles, team_resources, autoscaler=base.autoscaler
    )
    training = TrainingJobs("training", training_args)

    _export(facts, account, base)
    # A fleet worker (docs/fleet.md): the manager's grant here and what the manager reads of it.
    if cfg.fleet is not None:
        signing_key = (
            fleet_trainer.public_key if fleet_trainer else base.registry.signing_public_key
        )
        worker = fleet_worker.FleetWorker(
            "fleet-worker",
            fleet_worker.FleetWorkerArgs.of(
                cfg.fleet,
                cluster=cfg.cluster,
                account=account,
                deployer_arn=deploying_principal_arn(),
                network=base.network.handles,
                handles=eks,
                kueue_release=scheduling.kueue,
                teams={t.name: (t.namespace, team_resources[t.name][0]) for t in cfg.teams},
                buckets=base.buckets,
                trainer_image=base.trainer_ref,
                kms_key_arn=base.storage.kms_key_arn,
                tags=tags,
                trainer_signing_key=signing_key,
                runtime_pod_sets=runtime_pod_sets(training.runtime_manifests),
            ),
        )
        pulumi.export(WorkerContract.OUTPUT, worker.contract.apply(dumped))
    return PlatformRoot(facts=facts, judgement=judgement, plans=plans)


@dataclass(frozen=True)
class _Platform:
    """The platform layer as the workload layer and the exports use it."""

    network: Network
    cluster: Cluster
    karpenter: Karpenter
    registry: Registry
    trainer: JobImage | None
    storage: Storage
    monitoring: tuple[str, pulumi.Resource]
    gpu: GpuStack
    autoscaler: ClusterAutoscaler | None
    scheduling: Scheduling
    admission: Admission

    @property
    def trainer_ref(self) -> pulumi.Input[str] | None:
        return self.trainer.reference if self.trainer is not None else None

    @property
    def buckets(self) -> dict[str, pulumi.Output[str]]:
        return {role: bucket.bucket for role, bucket in self.storage.buckets.items()}


def _platform_layer(
    facts: StackFacts,
    project_dir: Path,
    account: AwsAccount,
    tags: dict[str, str],
    fleet_trainer: FleetTrainer | None,
) -> _Platform:
    """The platform layer, in the order of the picture in docs/architecture.md."""
    cfg = facts.cfg
    network = Network("network", NetworkArgs.of(cfg, account, tags))
    gpu_labels = time_slicing_node_labels(cfg.gpu_operator)
    logs = Logging("logging", LoggingArgs.of(cfg, account, tags))  # log groups before the cluster
    log_group = logs.control_plane_log_group
    cluster_args = ClusterArgs.of(
        facts, network.handles, account, tags, gpu_labels, control_plane_log_group=log_group
    )
    cluster = Cluster("cluster", cluster_args)
    eks = cluster.handles  # what every other component gets of the cluster: values only
    logs.install(cluster.name)
    karpenter = Karpenter("karpenter", KarpenterArgs.of(facts, eks, account, tags))
    registry = Registry("registry", RegistryArgs.of(cfg, eks, karpenter.node_role, account, tags))
    trainer = _trainer(cfg, project_dir, account, registry, fleet_trainer)
    trainer_ref = trainer.reference if trainer is not None else None
    storage_args = StorageArgs.of(
        cfg, network.handles, eks, account, tags, trainer_image=trainer_ref
    )
    storage = Storage("storage", storage_args)
    observability = Observability("observability", ObservabilityArgs.of(cfg, eks))
    monitoring = (observability.namespace, observability.release)
    gpu = GpuStack("gpu", GpuStackArgs.of(cfg, eks, observability.release))
    # The cluster-autoscaler resizes the GPU node groups; Kueue starts after its CRD.
    autoscaler = (
        ClusterAutoscaler(
            "autoscaler", ClusterAutoscalerArgs.of(cfg, eks, account, monitoring, tags)
        )
        if cfg.autoscaler_deployed
        else None
    )
    kueue_after = (autoscaler.crd,) if autoscaler is not None else ()
    # A fleet worker's flavors carry its region: a fleet job pinned elsewhere gets none here.
    region = account.region if cfg.fleet is not None else None
    scheduling = Scheduling("scheduling", SchedulingArgs.of(facts, eks, kueue_after, region))
    admission = Admission(
        "admission",
        AdmissionArgs.of(
            cfg, eks, account, tags, registry.signing_public_key, fleet_trainer=fleet_trainer
        ),
    )
    return _Platform(
        network=network,
        cluster=cluster,
        karpenter=karpenter,
        registry=registry,
        trainer=trainer,
        storage=storage,
        monitoring=monitoring,
        gpu=gpu,
        autoscaler=autoscaler,
        scheduling=scheduling,
        admission=admission,
    )


def _trainer(
    cfg: StackConfig,
    project_dir: Path,
    account: AwsAccount,
    registry: Registry,
    fleet_trainer: FleetTrainer | None,
) -> JobImage | None:
    """The reference trainer as the registry holds it: built, pushed and signed by this deploy
    (or a published tag resolved); every job and runtime without an image of its own runs its
    digest. A fleet worker with a trainer home runs the home's, by the home's reference, once
    this region's replica holds it and its signature. None: no job runs the reference trainer."""
    if fleet_trainer is not None:
        reference = replicated(
            "fleet.trainerHome",
            image=fleet_trainer.image,
            repository=fleet_trainer.repository_name,
            signature_tag=fleet_trainer.signature_tag,
            remedy="the home's trainer is not replicated here yet: retry once ECR replicated it "
            "(`aws ecr describe-image-replication-status` in the home's region)",
        )
        identity = f"fleet:{fleet_trainer.image}"
        return JobImage(reference=reference, digest=fleet_trainer.digest, identity=identity)
    if not cfg.uses_reference_trainer:
        return None
    build_tag = context_tag(project_dir / TRAINER_CONTEXT)
    trainer_image = TrainerImage(
        "trainer-image",
        TrainerImageArgs(
            config=cfg.images.trainer,
            context=TRAINER_CONTEXT,
            tag=build_tag,
            repository_url=registry.repository_urls[TRAINER_REPOSITORY],
            repository_name=registry.repository_names[TRAINER_REPOSITORY],
            account_id=account.account_id,
            signing_key_arn=registry.signing_key_arn,
            # A fleet's trainer home pushes after its replication exists (registry.py).
            push_after=(registry.replication,) if registry.replication is not None else (),
        ),
    )
    identity = f"built:{build_tag}" if cfg.images.trainer.build else f"tag:{cfg.images.trainer.tag}"
    return JobImage(reference=trainer_image.ref, digest=trainer_image.digest, identity=identity)


def _teams(
    cfg: StackConfig, account: AwsAccount, tags: dict[str, str], base: _Platform
) -> dict[str, list[pulumi.Resource]]:
    """Each team's namespace, quota, identities, volumes and secret store: team name -> the
    resources its jobs wait for (the Team component first)."""
    team_resources: dict[str, list[pulumi.Resource]] = {}
    eks, storage, registry = base.cluster.handles, base.storage, base.registry
    for team in cfg.teams:
        args = TeamArgs.of(
            team,
            scheduling=base.scheduling.handles,
            buckets=base.buckets,
            cluster=eks,
            tags=tags,
            kms_key_arn=storage.kms_key_arn,
            aws_account=account,
            monitoring=base.monitoring,
        )
        component = Team(f"team-{team.name}", args)
        volumes = storage.team_volumes(team.name, team.namespace, depends_on=[component])
        team_resources[team.name] = [component, *volumes, *base.admission.guards]
        repository = registry.team_repositories.get(team.name)
        deploy_identity(
            team,
            cfg.cluster.name,
            base.cluster.name,
            account.account_id,
            tags,
            image_repository_arn=repository.arn if repository is not None else None,
            signing_key_arn=registry.signing_key_arn,
        )
    teams = {name: resources[0] for name, resources in team_resources.items()}
    secrets = TeamSecrets("secrets", TeamSecretsArgs.of(cfg, eks, account, tags, teams))
    for name, store in secrets.stores.items():
        team_resources[name].append(store)
    return team_resources


def _export(facts: StackFacts, account: AwsAccount, base: _Platform) -> None:
    """The stack's outputs: what an operator reads, and the `jobPlatform` contract a team's job
    stack (jobs/) reads through its StackReference (docs/training-jobs.md)."""
    cfg, cluster, storage, registry = facts.cfg, base.cluster, base.storage, base.registry
    trainer_ref = base.trainer_ref
    pulumi.export("clusterName", cluster.name)
    pulumi.export("kubeconfig", cluster.kubeconfig)
    pulumi.export("oidcProviderArn", cluster.oidc_provider_arn)
    pulumi.export("vpcId", base.network.vpc_id)
    pulumi.export("efaPlacementGroupArn", cluster.efa_placement_group_arn)
    pulumi.export("gpuNodeGroups", sorted(cluster.gpu_node_groups))
    pulumi.export("karpenterNodePools", sorted(base.karpenter.node_pools))
    pulumi.export("karpenterInterruptionQueueUrl", base.karpenter.interruption_queue.url)
    pulumi.export("buckets", base.buckets)
    pulumi.export("rwxStorageClass", storage.storage_class_name)
    pulumi.export("ecrRepositories", registry.repository_urls)
    trainer_image = trainer_ref if trainer_ref is not None else cfg.training.default_image
    pulumi.export("trainerImage", trainer_image)
    pulumi.export("teamNamespaces", {team.name: team.namespace for team in cfg.teams})
    # Built once the trainer's digest and the teams' repository URLs resolved.
    contract = resolved(
        functools.partial(
            platform_contract,
            facts,
            account_id=account.account_id,
            storage_class=storage.storage_class_name,
        ),
        trainer_image=trainer_ref,
        image_repositories={t: r.repository_url for t, r in registry.team_repositories.items()},
    )
    pulumi.export(PlatformContract.OUTPUT, exported(contract))
