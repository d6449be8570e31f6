"""What connects a fleet's manager to its workers (docs/fleet.md), owned by the manager stack:
one VPC peering per worker and the routes and rule that let the manager's Kueue reach the
worker's private API endpoint, and S3 replication that keeps the workers' checkpoints and
datasets in every region a job may land in.

The path to a worker's API server, and why this one:
- a worker's endpoint is private (prod: `endpointPublicAccess: false`); "All traffic to your
  cluster API server must come from within your cluster's VPC or a connected network", and the
  endpoint's public DNS name resolves to the private addresses for a connected network too
  (EKS user guide, cluster-endpoint.adoc, "Private endpoint"). A peering per worker is that
  connected network with no new public surface: no CIDR allow-list on a public endpoint that
  a NAT address change would break, no Transit Gateway to pay for at two or three regions.
  EKS needs "ingress traffic on port 443 from your connected network" on the control plane's
  security group (same page): one rule per worker, from the manager's VPC CIDR only.
- Inter-region peering refuses overlapping CIDRs and cannot reference a peer region's security
  groups (VPC peering guide, "vpc-peering-security-groups"): the rule names the CIDR, and the
  fleet analysis refuses overlaps before anything is created.
- The peering's accepter, the worker's routes and its rule live in the worker's region and VPC,
  created here through a provider for that region: the manager reads its workers, never the
  other way round, so a first deploy is workers first, then the manager — no cycle.

Replication: a job may be dispatched to any worker, and again elsewhere after a worker is lost
or evicts it. Every worker's checkpoints and datasets buckets replicate to every other worker's
(S3 Cross-Region Replication, one rule per destination, KMS-encrypted objects re-encrypted with
the destination's key), so the checkpoint a job resumes from is in the region it resumes in.
Replicas are not replicated again (S3 replicates only objects a bucket's owner wrote, unless
replica modification sync is on, which it is not here).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, cast

import pulumi
import pulumi_aws as aws

from components.resource_options import child_options

#: The buckets that replicate between workers (what a job reads and resumes from).
REPLICATED: Final = ("checkpoints", "datasets")


@dataclass(frozen=True)
class WorkerLink:
    """What the manager needs of one worker to connect to it (its `fleetWorker` values)."""

    name: str
    region: str
    vpc_id: str
    vpc_cidr: str
    private_route_table_ids: Sequence[str]
    cluster_security_group_id: str
    #: purpose -> bucket name.
    buckets: Mapping[str, str] = field(default_factory=dict)
    #: The worker's data key (its buckets' SSE-KMS key).
    kms_key_arn: str | None = None


@dataclass(frozen=True)
class FleetLinksArgs:
    """Inputs of the FleetLinks component."""

    fleet: str
    region: str
    account_id: str
    vpc_id: pulumi.Input[str]
    vpc_cidr: str
    private_route_table_ids: Sequence[pulumi.Input[str]]
    workers: Sequence[WorkerLink]
    tags: dict[str, str]


def replication_policy(workers: Sequence[WorkerLink]) -> dict[str, Any]:
    """The replication role's rights: read versions of every replicated bucket, write replicas
    to them, decrypt with the source's key and encrypt with the destination's (S3 user guide
    "Setting up permissions for live replication", "Replicating encrypted objects")."""
    buckets = [w.buckets[p] for w in workers for p in REPLICATED if p in w.buckets]
    keys = sorted({w.kms_key_arn for w in workers if w.kms_key_arn})
    statements: list[dict[str, Any]] = [
        {
            "Sid": "ReadSources",
            "Effect": "Allow",
            "Action": ["s3:GetReplicationConfiguration", "s3:ListBucket"],
            "Resource": [f"arn:aws:s3:::{b}" for b in buckets],
        },
        {
            "Sid": "ReadVersions",
            "Effect": "Allow",
            "Action": [
                "s3:GetObjectVersionForReplication",
                "s3:GetObjectVersionAcl",
                "s3:GetObjectVersionTagging",
            ],
            "Resource": [f"arn:aws:s3:::{b}/*" for b in buckets],
        },
        {
            "Sid": "WriteReplicas",
            "Effect": "Allow",
            "Action": ["s3:ReplicateObject", "s3:ReplicateDelete", "s3:ReplicateTags"],
            "Resource": [f"arn:aws:s3:::{b}/*" for b in buckets],
        },
    ]
    if keys:
        statements.append(
            {
                "Sid": "DataKeys",
                "Effect": "Allow",
                "Action": ["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey"],
                "Resource": keys,
            }
        )
    return {"Version": "2012-10-17", "Statement": statements}


def replication_rules(
    source: WorkerLink, others: Sequence[WorkerLink], purpose: str
) -> list[dict[str, Any]]:
    """One rule per destination worker: every object (and delete marker), KMS-encrypted ones
    included, re-encrypted with the destination's key."""
    rules = []
    for priority, other in enumerate(others, start=1):
        if purpose not in other.buckets:
            continue
        destination: dict[str, Any] = {"bucket": f"arn:aws:s3:::{other.buckets[purpose]}"}
        if other.kms_key_arn:
            destination["encryption_configuration"] = {"replica_kms_key_id": other.kms_key_arn}
        rules.append(
            {
                "id": f"to-{other.name}",
                "status": "Enabled",
                "priority": priority,
                "filter": {},
                "delete_marker_replication": {"status": "Enabled"},
                "source_selection_criteria": {"sse_kms_encrypted_objects": {"status": "Enabled"}},
                "destination": destination,
            }
        )
    return rules


class FleetLinks(pulumi.ComponentResource):
    """Peering, routes and the API rule per worker; replication between the workers."""

    providers: dict[str, aws.Provider]
    peerings: list[pulumi.Resource]

    def __init__(
        self, name: str, args: FleetLinksArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:fleet:FleetLinks", name, None, opts)
        self.providers = {
            region: aws.Provider(f"{name}-{region}", region=region, opts=child_options(self))
            for region in sorted({w.region for w in args.workers})
        }
        self.peerings = []
        for worker in args.workers:
            self.peerings += self._peer(name, args, worker)
        if len(args.workers) > 1:
            self._replication(name, args)
        self.register_outputs({"peerings": [w.name for w in args.workers]})

    def _peer(self, name: str, args: FleetLinksArgs, worker: WorkerLink) -> list[pulumi.Resource]:
        """The peering (accepted in the worker's region), routes both ways, and 443 from the
        manager's CIDR on the worker's control plane."""
        prefix = f"{name}-{worker.name}"
        remote = child_options(self, provider=self.providers[worker.region])
        same_region = worker.region == args.region
        peering = aws.ec2.VpcPeeringConnection(
            prefix,
            vpc_id=args.vpc_id,
            peer_vpc_id=worker.vpc_id,
            peer_owner_id=args.account_id,
            # Within a region the requester may accept for its own account; across regions only
            # the accepter's region can.
            peer_region=None if same_region else worker.region,
            auto_accept=True if same_region else None,
            tags={**args.tags, "Name": f"fleet-{args.fleet}-{worker.name}"},
            opts=child_options(self),
        )
        accepted: pulumi.Resource = peering
        if not same_region:
            accepted = aws.ec2.VpcPeeringConnectionAccepter(
                f"{prefix}-accept",
                vpc_peering_connection_id=peering.id,
                auto_accept=True,
                tags={**args.tags, "Name": f"fleet-{args.fleet}-manager"},
                opts=remote,
            )
        after = pulumi.ResourceOptions(depends_on=[accepted])
        made: list[pulumi.Resource] = [peering, accepted]
        for index, table in enumerate(args.private_route_table_ids):
            made.append(
                aws.ec2.Route(
                    f"{prefix}-to-worker-{index}",
                    route_table_id=table,
                    destination_cidr_block=worker.vpc_cidr,
                    vpc_peering_connection_id=peering.id,
                    opts=pulumi.ResourceOptions.merge(child_options(self), after),
                )
            )
        for index, table in enumerate(worker.private_route_table_ids):
            made.append(
                aws.ec2.Route(
                    f"{prefix}-to-manager-{index}",
                    route_table_id=table,
                    destination_cidr_block=args.vpc_cidr,
                    vpc_peering_connection_id=peering.id,
                    opts=pulumi.ResourceOptions.merge(remote, after),
                )
            )
        made.append(
            aws.ec2.SecurityGroupRule(
                f"{prefix}-api",
                type="ingress",
                description=f"Kueue MultiKueue: fleet {args.fleet}'s manager to the API server",
                security_group_id=worker.cluster_security_group_id,
                protocol="tcp",
                from_port=443,
                to_port=443,
                cidr_blocks=[args.vpc_cidr],
                opts=remote,
            )
        )
        return made

    def _replication(self, name: str, args: FleetLinksArgs) -> None:
        """One role for the fleet's replication; per worker bucket, its rules to the others."""
        role = aws.iam.Role(
            f"{name}-replication",
            name=f"fleet-{args.fleet}-s3-replication"[:64],
            assume_role_policy=json.dumps(
                {
                    "Version": "2012-10-17",
                    "Statement": [
                        {
                            "Effect": "Allow",
                            "Principal": {"Service": "s3.amazonaws.com"},
                            "Action": "sts:AssumeRole",
                            "Condition": {"StringEquals": {"aws:SourceAccount": args.account_id}},
                        }
                    ],
                }
            ),
            tags=args.tags,
            opts=child_options(self),
        )
        policy = aws.iam.RolePolicy(
            f"{name}-replication",
            role=role.id,
            policy=json.dumps(replication_policy(args.workers)),
            opts=child_options(self),
        )
        for worker in args.workers:
            others = [w for w in args.workers if w.name != worker.name]
            for purpose in REPLICATED:
                rules = replication_rules(worker, others, purpose)
                if purpose not in worker.buckets or not rules:
                    continue
                aws.s3.BucketReplicationConfig(
                    f"{name}-{worker.name}-{purpose}",
                    bucket=worker.buckets[purpose],
                    role=role.arn,
                    rules=cast(Any, rules),
                    opts=child_options(
                        self, provider=self.providers[worker.region], depends_on=[policy]
                    ),
                )
