"""The mocked engine synth runs the program against: deterministic resource state (ids, ARNs,
endpoints, the digest a push would return) and invoke answers (zones, caller identity, ECR
credentials and image lists, the KMS public key), derived from each resource's type and name so
the same input always gives byte-identical output. synth/harness.py runs the program on them."""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Protocol

from pulumi.runtime import mocks as pulumi_mocks

ACCOUNT_ID = "123456789012"
#: The role the mocked deploy runs as (an assumed-role session of it: getCallerIdentity).
DEPLOYER_ROLE = "synth-deployer"


class StackOutputs(Protocol):
    """What a StackReference reads of another stack's synth (synth.harness.SynthResult)."""

    outputs: dict[str, Any]
    secret_outputs: list[str]


def _digest(*parts: str) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()


#: Provider modules whose ARN service prefix differs from the module name.
ARN_SERVICE = {"efs": "elasticfilesystem"}

#: Zones per region as new accounts see them (us-west-1 offers two); others get three.
_ZONES = {"us-east-1": 6, "us-west-2": 4, "us-west-1": 2}


class PlatformMocks(pulumi_mocks.Mocks):
    """Deterministic outputs: ids and ARNs derived from the resource's type and name."""

    def __init__(
        self,
        region: str,
        stack_refs: Mapping[str, StackOutputs] | None = None,
        published: Mapping[str, list[str]] | None = None,
    ) -> None:
        self.region = region
        #: Referenced stack name -> its synth, for `pulumi.StackReference` reads (jobs/).
        self.stack_refs = dict(stack_refs or {})
        #: ECR repository name -> the tags it holds, for ListImages (`aws.ecr.get_images`).
        self.published = dict(published or {})

    def new_resource(self, args: pulumi_mocks.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        name, typ = args.name, args.typ
        if typ == "pulumi:pulumi:StackReference":
            # A read of another stack's outputs: those of its synth (jobs/ reads the platform).
            target = str(args.inputs.get("name") or args.resource_id or name)
            ref = self.stack_refs.get(target)
            return target, {
                "name": target,
                "outputs": dict(ref.outputs) if ref is not None else {},
                "secretOutputNames": list(ref.secret_outputs) if ref is not None else [],
            }
        short = _digest(typ, name)[:17]
        service = typ.split(":")[1].split("/")[0] if typ.count(":") >= 2 else "mock"
        state: dict[str, Any] = dict(args.inputs)
        state.setdefault(
            "arn", f"arn:aws:{ARN_SERVICE.get(service, service)}:{self.region}:{ACCOUNT_ID}:{name}"
        )
        physical_id = f"{name}-{short[:8]}"
        for shape in (self._identity_state, self._storage_state, self._build_state):
            found = shape(typ, name, state, short)
            if found is not None:
                return found, state
        return physical_id, state

    def _identity_state(self, typ: str, name: str, state: dict[str, Any], short: str) -> str | None:
        """IAM, KMS, SQS, EventBridge, ECR: named ARNs (and a queue's URL as its id)."""
        named = state.get("name") or name
        if typ == "aws:iam/role:Role":
            state.update(arn=f"arn:aws:iam::{ACCOUNT_ID}:role/{name}", name=named)
        elif typ == "aws:kms/key:Key":
            state["keyId"] = f"{short[:8]}-mock-key"
            state["arn"] = f"arn:aws:kms:{self.region}:{ACCOUNT_ID}:key/{state['keyId']}"
        elif typ == "aws:sqs/queue:Queue":
            state["arn"] = f"arn:aws:sqs:{self.region}:{ACCOUNT_ID}:{named}"
            state["url"] = f"https://sqs.{self.region}.amazonaws.com/{ACCOUNT_ID}/{named}"
            return str(state["url"])
        elif typ == "aws:iam/instanceProfile:InstanceProfile":
            state.update(name=named, arn=f"arn:aws:iam::{ACCOUNT_ID}:instance-profile/{named}")
        elif typ == "aws:cloudwatch/eventRule:EventRule":
            state.update(name=named, arn=f"arn:aws:events:{self.region}:{ACCOUNT_ID}:rule/{named}")
        elif typ == "aws:ecr/repository:Repository":
            host = f"{ACCOUNT_ID}.dkr.ecr.{self.region}.amazonaws.com"
            state.update(
                repositoryUrl=f"{host}/{named}",
                registryId=ACCOUNT_ID,
                arn=f"arn:aws:ecr:{self.region}:{ACCOUNT_ID}:repository/{named}",
            )
        return None

    def _storage_state(self, typ: str, name: str, state: dict[str, Any], short: str) -> str | None:
        """Buckets, file systems and network objects: ids in their services' formats."""
        service = typ.split(":")[1].split("/", maxsplit=1)[0]
        if typ == "aws:s3/bucket:Bucket":
            bucket = state.get("bucket") or f"{name}-{short[:8]}"
            state.update(bucket=bucket, arn=f"arn:aws:s3:::{bucket}")
            return str(bucket)
        if typ in ("aws:efs/fileSystem:FileSystem", "aws:fsx/lustreFileSystem:LustreFileSystem"):
            physical_id = f"fs-{short}"
            # ARNs name the IAM service prefix, not the provider module: EFS is
            # `elasticfilesystem` (arn:aws:elasticfilesystem:region:account:file-system/fs-...,
            # EFS user guide "Resources defined by Amazon EFS"); FSx is `fsx`.
            arn_service = ARN_SERVICE.get(service, service)
            state["arn"] = (
                f"arn:aws:{arn_service}:{self.region}:{ACCOUNT_ID}:file-system/{physical_id}"
            )
            state["dnsName"] = f"{physical_id}.{service}.{self.region}.amazonaws.com"
            if service == "fsx":
                state["mountName"] = _digest(name, "mount")[:8]
            return physical_id
        if typ == "aws:ec2/securityGroup:SecurityGroup":
            return f"sg-{short}"
        if typ == "aws:ec2/subnet:Subnet":
            # EC2NodeClass subnetSelectorTerms[].id must match ^subnet-[0-9a-z]+$ (CRD).
            return f"subnet-{short}"
        if typ == "aws:ec2/placementGroup:PlacementGroup":
            # placementGroupSelector.id must match ^pg-[0-9a-z]+$ (CRD); the ARN names the group
            # (arn:aws:ec2:region:account:placement-group/<name>, EC2 service authorization).
            group = state.get("name") or name
            state["arn"] = f"arn:aws:ec2:{self.region}:{ACCOUNT_ID}:placement-group/{group}"
            return f"pg-{short}"
        return None

    def _build_state(self, typ: str, name: str, state: dict[str, Any], short: str) -> str | None:
        """The cluster's endpoints, a launch template's version, what a build pushes."""
        if typ == "aws:ec2/launchTemplate:LaunchTemplate":
            state["latestVersion"] = 1
        elif typ == "docker-build:index:Image":
            # The digest a push would return: derived from what is built and where it goes.
            digest = "sha256:" + _digest(typ, name, json.dumps(state.get("tags"), default=str))
            tags = state.get("tags") or [""]
            state.update(digest=digest, ref=f"{str(tags[0]).rsplit(':', 1)[0]}@{digest}")
            state["contextHash"] = _digest(name, "context")
        elif typ == "command:local:Command":
            state.update(stdout="", stderr="")
        elif typ == "kubernetes:core/v1:Secret" and state.get("type") == SA_TOKEN_TYPE:
            # The token controller fills a ServiceAccount token Secret; pulumi-kubernetes waits
            # for it (awaiters.go untilCoreV1SecretInitialized) and reports the filled data.
            token = f"synth-sa-token-{_digest(typ, name)[:32]}"
            state["data"] = {
                "token": base64.b64encode(token.encode()).decode(),
                "ca.crt": base64.b64encode(b"synth CA").decode(),
            }
        elif typ == "eks:index:Cluster":
            issuer = f"https://oidc.eks.{self.region}.amazonaws.com/id/{short.upper()}"
            state.update(
                kubeconfigJson=json.dumps(
                    _eks_kubeconfig(str(state.get("name") or name), self.region, short)
                ),
                oidcProviderArn=(
                    f"arn:aws:iam::{ACCOUNT_ID}:oidc-provider/{issuer.removeprefix('https://')}"
                ),
                oidcProviderUrl=issuer.removeprefix("https://"),
                oidcIssuer=issuer,
                clusterSecurityGroupId=f"sg-{short}",
                nodeSecurityGroupId=f"sg-{_digest(name, 'nodes')[:17]}",
            )
        return None

    def call(self, args: pulumi_mocks.MockCallArgs) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        token = args.token
        if token == "aws:index/getAvailabilityZones:getAvailabilityZones":
            names = [f"{self.region}{s}" for s in "abcdef"[: _ZONES.get(self.region, 3)]]
            return {"names": names, "zoneIds": [f"az{i}" for i in range(len(names))]}, []
        if token == "aws:index/getCallerIdentity:getCallerIdentity":
            # A deploy runs as an assumed role (the CI's OIDC session), as DEPLOYER's.
            return {
                "accountId": ACCOUNT_ID,
                "arn": f"arn:aws:sts::{ACCOUNT_ID}:assumed-role/{DEPLOYER_ROLE}/synth",
                "userId": "SYNTH",
                "id": ACCOUNT_ID,
            }, []
        if token == "aws:iam/getSessionContext:getSessionContext":
            # The role behind an assumed-role session; any other ARN passes through
            # (pulumi-aws 7.51.1 aws.iam.get_session_context `issuer_arn`).
            arn = str(args.args.get("arn") or "")
            session = re.fullmatch(r"arn:(aws[a-z-]*):sts::(\d{12}):assumed-role/([^/]+)/.+", arn)
            issuer = f"arn:{session[1]}:iam::{session[2]}:role/{session[3]}" if session else arn
            return {"arn": arn, "issuerArn": issuer, "id": arn}, []
        if token == "aws:index/getRegion:getRegion":
            return {"region": self.region, "name": self.region, "id": self.region}, []
        if token == "aws:index/getPartition:getPartition":
            return {"partition": "aws", "dnsSuffix": "amazonaws.com", "id": "aws"}, []
        if token == "aws:ecr/getAuthorizationToken:getAuthorizationToken":
            registry = f"{args.args.get('registryId') or ACCOUNT_ID}.dkr.ecr.{self.region}"
            return {
                "userName": "AWS",
                "password": "synth-registry-token",
                "authorizationToken": "QVdTOnN5bnRoLXJlZ2lzdHJ5LXRva2Vu",
                "proxyEndpoint": f"https://{registry}.amazonaws.com",
                "expiresAt": "2000-01-01T00:00:00Z",
                "id": self.region,
            }, []
        if token == "aws:ecr/getImages:getImages":
            repository = str(args.args.get("repositoryName") or "")
            ids = [_image_id(repository, entry) for entry in self.published.get(repository, [])]
            return {"imageIds": ids, "repositoryName": repository, "id": repository}, []
        if token == "aws:kms/getPublicKey:getPublicKey":
            return {"publicKeyPem": mock_public_key(str(args.args.get("keyId"))), "id": ""}, []
        return {}, []


def _image_id(repository: str, entry: str) -> dict[str, str]:
    """A ListImages entry of the mocked registry: `tag` (its digest derived from the repository
    and tag) or `tag@sha256:...` (that digest)."""
    tag, _, digest = entry.partition("@")
    return {"imageTag": tag, "imageDigest": digest or "sha256:" + _digest("ecr", repository, tag)}


#: The Secret type the API server's token controller fills with a ServiceAccount's token.
SA_TOKEN_TYPE = "kubernetes.io/service-account-token"


def _eks_kubeconfig(name: str, region: str, short: str) -> dict[str, Any]:
    """pulumi-eks's `kubeconfigJson` shape (nodejs/eks/cluster/cluster.ts generateKubeconfig):
    the endpoint and CA inline, an `aws eks get-token` exec user."""
    return {
        "apiVersion": "v1",
        "clusters": [
            {
                "cluster": {
                    "server": f"https://{short.upper()}.gr7.{region}.eks.amazonaws.com",
                    "certificate-authority-data": base64.b64encode(
                        f"synth CA of {name}".encode()
                    ).decode(),
                },
                "name": "kubernetes",
            }
        ],
        "contexts": [{"context": {"cluster": "kubernetes", "user": "aws"}, "name": "aws"}],
        "current-context": "aws",
        "kind": "Config",
        "users": [
            {
                "name": "aws",
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": "aws",
                        "args": ["eks", "get-token", "--cluster-name", name],
                    }
                },
            }
        ],
    }


def mock_kms_key(key_id: str) -> Any:
    """The mocked KMS's ECDSA P-256 private key for `key_id` (a key ARN), derived from it: the
    mocked GetPublicKey answers with its public half, deterministically (byte-identical synth
    output), and a test can sign as KMS Sign would (tests/platform/test_signed_images.py)."""
    from cryptography.hazmat.primitives.asymmetric import ec

    order = 0xFFFFFFFF00000000FFFFFFFFFFFFFFFFBCE6FAADA7179E84F3B9CAC2FC632551  # P-256's n
    secret = int(_digest("kms", key_id), 16) % (order - 1) + 1
    return ec.derive_private_key(secret, ec.SECP256R1())


def mock_public_key(key_id: str) -> str:
    """What KMS GetPublicKey returns for an ECC_NIST_P256 key, as PEM (`public_key_pem`)."""
    from cryptography.hazmat.primitives import serialization

    return str(
        mock_kms_key(key_id)
        .public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def trainer_home(config: Mapping[str, str]) -> str | None:
    """The stack a fleet worker runs the trainer of (`gpu-platform:fleet.trainerHome`)."""
    raw = config.get("gpu-platform:fleet")
    value = json.loads(raw) if isinstance(raw, str) and raw[:1] == "{" else raw
    home = value.get("trainerHome") if isinstance(value, dict) else None
    return str(home) if home else None


def replica_tags(home_outputs: Mapping[str, Any]) -> dict[str, list[str]]:
    """What this region's replica of a trainer home's repository holds once ECR replicated the
    home's deploy: the trainer's digest under its pin tag, and its cosign signature tag
    (components/analysis/fleet_trainer.py)."""
    from pathlib import Path

    from components.analysis.fleet_trainer import parse_trainer
    from components.config.images import TRAINER_CONTEXT
    from components.contract.job_platform import PlatformContract
    from components.contract.schema import ContractError, parse_contract
    from components.platform.registry.trainer_image import context_tag, pin_tag

    try:
        platform = parse_contract(PlatformContract, home_outputs.get(PlatformContract.OUTPUT))
    except ContractError:
        # A home of another version: the worker's program refuses it (read_trainer_home), and
        # the registry holds nothing of it.
        return {}
    trainer = parse_trainer(platform.trainer_image) if platform is not None else None
    if trainer is None:
        return {}
    signature = "sha256:" + _digest("cosign signature", trainer.digest)
    pin = pin_tag(context_tag(Path(__file__).parent.parent / TRAINER_CONTEXT), trainer.digest)
    return {
        trainer.repository_name: [
            f"{pin}@{trainer.digest}",
            f"{trainer.signature_tag}@{signature}",
        ]
    }


def published_tags(config: Mapping[str, str]) -> dict[str, list[str]]:
    """The registry the mocks answer ECR ListImages from: every tag the stack config names is
    published (the trainer's `images.trainer.tag`, jobs' ECR tags); a test passes its own."""
    from components.analysis.images import ECR_TAG
    from components.config.images import TRAINER_REPOSITORY

    def value(key: str) -> Any:
        raw = config.get(key)
        return json.loads(raw) if isinstance(raw, str) and raw[:1] in "[{" else raw

    out: dict[str, list[str]] = {}
    cluster = (value("gpu-platform:cluster") or {}).get("name", "")
    tag = ((value("gpu-platform:images") or {}).get("trainer") or {}).get("tag")
    if tag:
        out.setdefault(f"{cluster}/{TRAINER_REPOSITORY}", []).append(str(tag))
    for job in value("gpu-platform:trainingJobs") or []:
        match = ECR_TAG.match(str(job.get("image") or "")) if isinstance(job, dict) else None
        if match:
            out.setdefault(match["repository"], []).append(match["tag"])
    return out
