"""`fleetWorker`, the output a fleet worker's platform stack exports for its fleet's manager
(docs/fleet.md): `WorkerContract`.

The worker's network (VPC, CIDR, route tables, the control plane's security group), its
cluster and endpoint, the job kinds its Kueue manages, the manager's identity and token key on
it, the Secrets Manager ARN of the manager's kubeconfig (never the kubeconfig itself), and
where the fleet's trainer comes from (`trainer`: its home, the regions the home replicates it
to, the key that signs it, the runtimes' pod sets Kueue compares).

Written by components/platform/fleet/worker.py `FleetWorker` (exported by __main__.py); read
by platform/fleet/reading.py (the manager's `read_worker`, a worker's `read_trainer_home`) and,
nested in the manager's `jobPlatform`, by a job stack on the fleet (contract/fleet_platform.py).
Its version is its schema's (contract/schema.py).
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import JsonValue

from components.contract.schema import Block, Contract


class RuntimePodSet(Block):
    """What Kueue compares of one replicated job of a ClusterTrainingRuntime as the worker
    rendered it (components/training_jobs/manifests.py runtime_pod_sets): its containers, as
    Kubernetes objects (their schema is Kubernetes', compared field by field)."""

    containers: list[dict[str, JsonValue]]
    init_containers: list[dict[str, JsonValue]]


class WorkerTrainer(Block):
    """Where the fleet's one trainer comes from on this worker
    (components/analysis/fleet_trainer.py)."""

    #: The trainer home's stack where this worker runs the home's trainer; None on the home.
    home: str | None = None
    #: On the home: the regions its trainer repository is replicated to.
    replica_regions: list[str]
    #: The public key (PEM) of the key that signs the trainer this worker runs, if published.
    signing_public_key: str | None = None
    #: `<runtime>/<replicated job>` -> its pod set.
    runtimes: dict[str, RuntimePodSet]

    def pod_sets(self) -> dict[str, JsonValue]:
        """`runtimes` as JSON, the form the manager compares with its own rendering."""
        return {
            name: pod_set.model_dump(mode="json", by_alias=True)
            for name, pod_set in self.runtimes.items()
        }


class WorkerContract(Contract):
    """The `fleetWorker` output of a platform stack with `fleet` set (module docstring)."""

    OUTPUT: ClassVar[str] = "fleetWorker"

    #: The fleet (its manager's `name`) the worker serves.
    fleet: str
    region: str
    cluster_name: str
    kubernetes_version: str
    vpc_id: str
    vpc_cidr: str
    private_route_table_ids: list[str]
    #: The security group on the EKS control plane's ENIs: the manager's CIDR is let in there.
    cluster_security_group_id: str
    endpoint_public_access: bool
    #: The data buckets' KMS key (the manager's replication re-encrypts with it).
    data_kms_key_arn: str | None = None
    #: The job kinds the worker's Kueue manages (catalog.KUEUE_FRAMEWORKS).
    kueue_frameworks: list[str]
    #: The manager's ServiceAccount on the worker (`<namespace>/<name>`).
    service_account: str
    #: The rotation key of the token the worker publishes.
    token_key: str
    #: The Secrets Manager secret holding the manager's kubeconfig for this worker.
    kubeconfig_secret_arn: str
    trainer: WorkerTrainer
