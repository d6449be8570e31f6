"""Trusted images at admission, in every team namespace (label `gpu-platform.io/team`):

- a native ValidatingAdmissionPolicy (GA since Kubernetes 1.30, no extra component) admits Pods
  and batch Jobs only when every image comes from an allowed registry and is pinned by digest;
- Kyverno's ImageValidatingPolicy (kyverno/kyverno chart 3.9.0 = v1.19.0) admits Pods (and,
  through Kyverno's autogen, pod controllers such as batch Jobs) only when every image from the
  allowed registries carries a cosign signature from the configured identity; its evaluation is
  reimplemented from Kyverno's source and run against real cosign signatures in
  tests/platform/test_signed_images.py (docs/security.md says what that does not prove).

On a fleet worker (docs/fleet.md "One image in every region"): the signature policy checks Pods
only (not the Jobs the manager mirrors); where the worker runs its trainer home's trainer, the
trusted-images policy admits exactly the home's trainer repository besides its own registry, the
signature policy verifies the trainer's repositories with the home's key, and — outside the
home's region — a Kyverno MutatingPolicy points the trainer's Pods at this region's replica
(`replica_policy`; components/analysis/fleet_trainer.py says why).

`security.imageAdmission.action` picks Deny (prod) or Audit (dev) for both. The policy's regular
expression is also written on the policy as an annotation: the CrossGuard rule
`gpu-platform-k8s-trusted-images` applies that same pattern to every rendered pod template, so
synth flags an image the cluster would reject before anything is deployed.

Sources: the VAP/binding shape as kubernetes/website examples/validatingadmissionpolicy/
basic-example-{policy,binding}.yaml; Deny and Warn together are rejected by the API server, so
audit mode is [Audit, Warn]. Kyverno fields from kyverno/kyverno@kyverno-chart-3.9.0:
config/crds/policies.kyverno.io/policies.kyverno.io_imagevalidatingpolicies.yaml (v1beta1 is
the storage version; `credentials.providers: [amazon]` lets it read private ECR),
policies.kyverno.io_mutatingpolicies.yaml (v1beta1 likewise) and
test/conformance/chainsaw/{image-validating,mutating}-policies/ (verifyImageSignatures and
apply-configuration usage).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import pulumi
import pulumi_aws as aws
import pulumi_kubernetes as k8s

from components import addons, catalog
from components.analysis.fleet_trainer import FleetTrainer, trainer_repositories
from components.analysis.images import image_pattern
from components.config.security import ImageAdmissionConfig, SignatureConfig
from components.platform.addons import helm_release
from components.platform.cluster import iam
from components.platform.cluster.handles import ClusterHandles
from components.resource_options import child_options

if TYPE_CHECKING:
    from components.config import StackConfig
    from components.platform.cluster.iam import AwsAccount

POLICY_NAME: Final = "gpu-platform-trusted-images"
SIGNATURE_POLICY_NAME: Final = "gpu-platform-signed-images"
#: The Pod mutation of a fleet worker outside its trainer home's region (module docstring).
REPLICA_POLICY_NAME: Final = "gpu-platform-fleet-trainer-replica"
#: The annotation carrying the policy's image pattern (read by the CrossGuard rule).
PATTERN_ANNOTATION: Final = f"{catalog.LABEL_DOMAIN}/allowed-image-pattern"
#: On the signature policy: the repositories its attestor's signer publishes (JSON list), for
#: the pre-deploy check policies/rules/security.py `gpu-platform-k8s-signable-images`.
SIGNED_REPOSITORIES_ANNOTATION: Final = f"{catalog.LABEL_DOMAIN}/signed-repositories"
TEAM_LABEL: Final = f"{catalog.LABEL_DOMAIN}/team"
VAP_API: Final = "admissionregistration.k8s.io/v1"
KYVERNO_API: Final = "policies.kyverno.io/v1beta1"
KYVERNO_NAMESPACE: Final = addons.KYVERNO.namespace
KYVERNO_SERVICE_ACCOUNT: Final = "kyverno-admission-controller"


def ecr_registry(account: AwsAccount) -> str:
    return f"{account.account_id}.dkr.ecr.{account.region}.amazonaws.com"


def allowed_registries(config: ImageAdmissionConfig, account: AwsAccount) -> list[str]:
    return [ecr_registry(account), *config.allowed_registries]


def _cel_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def trusted_images_policy(pattern: str) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy: Pods and batch Jobs (early feedback at submit time);
    Pods cover every controller (JobSet, Volcano, Trainer) since each creates its pods."""
    rules = [
        {
            "apiGroups": group,
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": [resource],
        }
        for group, resource in ((([""], "pods")), ((["batch"], "jobs")))
    ]
    return {
        "apiVersion": VAP_API,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME, "annotations": {PATTERN_ANNOTATION: pattern}},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": rules},
            "variables": [
                {
                    "name": "podSpec",
                    "expression": "object.kind == 'Pod' ? object.spec : object.spec.template.spec",
                },
                {
                    "name": "containers",
                    "expression": "variables.podSpec.containers"
                    " + (has(variables.podSpec.initContainers)"
                    " ? variables.podSpec.initContainers : [])"
                    " + (has(variables.podSpec.ephemeralContainers)"
                    " ? variables.podSpec.ephemeralContainers : [])",
                },
            ],
            "validations": [
                {
                    "expression": "variables.containers.all(c, c.image.matches("
                    f"{_cel_string(pattern)}))",
                    "messageExpression": "'images must come from an allowed registry, pinned by"
                    " digest: ' + variables.containers.map(c, c.image).join(', ')",
                    "reason": "Forbidden",
                }
            ],
        },
    }


def validation_actions(config: ImageAdmissionConfig) -> list[str]:
    return ["Deny"] if config.action == "Deny" else ["Audit", "Warn"]


def team_namespace_selector() -> dict[str, Any]:
    return {"matchExpressions": [{"key": TEAM_LABEL, "operator": "Exists"}]}


def trusted_images_binding(config: ImageAdmissionConfig) -> dict[str, Any]:
    return {
        "apiVersion": VAP_API,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "policyName": POLICY_NAME,
            "validationActions": validation_actions(config),
            "matchResources": {"namespaceSelector": team_namespace_selector()},
        },
    }


def attestor(signatures: SignatureConfig, platform_key: Any = None) -> dict[str, Any]:
    """The one trusted signer as a Kyverno cosign attestor. The platform key: its public key
    (PEM, read from KMS at deploy time, `platform_key`) with `ctlog.insecureIgnoreTlog`, since
    the deploy signs without a transparency-log entry — without it Kyverno verifies "offline"
    and fails a signature that carries no Rekor bundle (kyverno/kyverno@v1.19.0:
    pkg/image/verifiers/ivpol/cosign/opts.go checkOptions; sigstore/cosign@v3.1.2
    pkg/cosign/verify.go verifyInternal), and key + ignored tlog skips TUF and Rekor entirely,
    so the cluster needs no egress to Sigstore."""
    if signatures.signer == "platform":
        if platform_key is None:
            raise ValueError("the platform signer needs the platform key's public key")
        return {
            "name": "platform",
            "cosign": {"key": {"data": platform_key}, "ctlog": {"insecureIgnoreTlog": True}},
        }
    if signatures.public_key is not None:
        return {"name": "platform", "cosign": {"key": {"data": signatures.public_key}}}
    identity = {
        "issuer": signatures.keyless_issuer,
        "subjectRegExp": signatures.keyless_subject_regexp,
    }
    return {
        "name": "platform",
        "cosign": {
            "keyless": {"identities": [identity]},
            "ctlog": {"url": "https://rekor.sigstore.dev"},
        },
    }


def signed_repositories(
    config: ImageAdmissionConfig, account: AwsAccount, cluster: str
) -> list[str]:
    """The repositories the trusted signer signs (an entry covers those below it): the
    platform's own ECR repositories for the platform key, else `signedRepositories`."""
    if config.signatures.signer == "platform":
        return [f"{ecr_registry(account)}/{cluster}"]
    return list(config.signatures.signed_repositories)


def fleet_attestor(trainer: FleetTrainer) -> dict[str, Any]:
    """The trainer home's signing key as a cosign attestor: it signs the fleet's trainer with
    its platform key, without a transparency-log entry, exactly as this stack's own key signs
    (`attestor`)."""
    if trainer.public_key is None:
        raise ValueError("the fleet's trainer needs its home's public key")
    return {
        "name": "fleet",
        "cosign": {"key": {"data": trainer.public_key}, "ctlog": {"insecureIgnoreTlog": True}},
    }


def signed_images_policy(
    config: ImageAdmissionConfig,
    registries: list[str],
    signed: list[str],
    platform_key: Any = None,
    *,
    trainer: FleetTrainer | None = None,
    region: str = "",
    fleet_worker: bool = False,
) -> dict[str, Any]:
    """Kyverno ImageValidatingPolicy: every image of a team pod from the allowed registries is
    signed by the one trusted signer; `verifyDigest` also rejects tag-only references. `signed`:
    the repositories that signer signs (an annotation the pre-deploy policy reads).

    On a fleet worker that runs its trainer home's trainer (`trainer`), the trainer's
    repositories — the home's and the replica in `region`, which lies in this stack's own
    registry — are verified with the home's key (a second attestor) and every other image with
    this stack's signer. On every fleet worker (`fleet_worker`) the policy checks Pods only:
    Kyverno's autogen would otherwise also check the batch Jobs the manager mirrors here
    (kyverno/kyverno@v1.19.0 pkg/cel/policies/ivpol/autogen/autogen.go: every pod controller
    unless `autogen.podControllers.controllers` is set), and a refused or failed check of a
    mirrored Job leaves it stuck with no retry elsewhere (docs/fleet.md); a refused Pod fails
    the gang, which the worker's waitForPodsReady evicts and the manager dispatches again."""
    fleet = trainer_repositories(trainer, region)
    references = [{"glob": f"{r}/*"} for r in registries]
    references += [{"glob": f"{r}@*"} for r in fleet if not _under(r, registries)]
    attestors = [attestor(config.signatures, platform_key)]
    if trainer is not None:
        attestors.append(fleet_attestor(trainer))
    spec: dict[str, Any] = {
        "failurePolicy": "Fail",
        "validationActions": ["Deny"] if config.action == "Deny" else ["Audit"],
        "matchConstraints": _team_pod_constraints(),
        "matchImageReferences": references,
        "credentials": {"providers": ["amazon"]},
        "validationConfigurations": {
            "mutateDigest": False,
            "verifyDigest": config.require_digest,
            "required": True,
        },
        "attestors": attestors,
        "validations": [_every_image_signed(fleet)],
    }
    if fleet_worker:
        spec["autogen"] = {"podControllers": {"controllers": []}}
    return {
        "apiVersion": KYVERNO_API,
        "kind": "ImageValidatingPolicy",
        "metadata": {
            "name": SIGNATURE_POLICY_NAME,
            "annotations": {SIGNED_REPOSITORIES_ANNOTATION: json.dumps([*signed, *fleet])},
        },
        "spec": spec,
    }


def _under(repository: str, registries: list[str]) -> bool:
    return any(repository.startswith(f"{r}/") for r in registries)


def replica_rewrite(trainer: FleetTrainer, region: str, image: str = "c.image") -> str:
    """The CEL expression of a container's image under `replica_policy`: the replica in
    `region` for the home's trainer (`<home repository>@<digest>`), the image unchanged
    otherwise."""
    source = trainer.repository + "@"
    target = trainer.replica_repository(region) + "@"
    return (
        f"{image}.startsWith({_cel_string(source)}) ? {_cel_string(target)} + "
        f"{image}.substring({len(source)}) : {image}"
    )


def replica_policy(trainer: FleetTrainer, region: str) -> dict[str, Any]:
    """Kyverno MutatingPolicy of a fleet worker outside its trainer home's region: a team
    Pod's containers that run the home's trainer (`<home repository>@<digest>`) run the
    replica in this region's registry instead — same digest, same signature (replicated) —
    so nodes pull in-region. Pods only, at CREATE: the Job or TrainJob the manager mirrored
    keeps the home's reference, which is what Kueue compares with the manager's Workload
    (kubernetes-sigs/kueue@v0.19.2 pkg/util/equality/podset.go L41-76); Kueue never compares
    Pods. Autogen is off: Kyverno would otherwise also mutate the pod templates of Jobs and
    other controllers (kyverno/kyverno@v1.19.0 pkg/cel/policies/mpol/autogen/autogen.go: every
    pod controller unless `autogen.podControllers.controllers` is set), and a mutated mirrored
    Job goes OutOfSync. Mutating admission runs before validating admission ("In the first
    phase, mutating admission controllers are run. In the second phase, validating admission
    controllers are run", Kubernetes documentation, Admission Control in Kubernetes), so the
    trusted-images ValidatingAdmissionPolicy and the signature policy (its validating webhook:
    `mutateDigest: false` registers no mutating one, kyverno@v1.19.0 pkg/controllers/webhook/
    controller.go ivpolsNeedingMutation) see the replica. The apply configuration maps every
    container by name, as Kyverno's own conformance test does (test/conformance/chainsaw/
    mutating-policies/autogen/standard/policy.yaml); `substring` is CEL's strings extension,
    in Kyverno's environment (pkg/cel/compiler/env.go `ext.Strings`)."""
    literal = _cel_string(trainer.repository + "@")
    return {
        "apiVersion": KYVERNO_API,
        "kind": "MutatingPolicy",
        "metadata": {"name": REPLICA_POLICY_NAME},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": team_namespace_selector(),
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ],
            },
            # Only a Pod that runs the trainer (no platform image runs it as an init
            # container): every other Pod never reaches Kyverno's webhook.
            "matchConditions": [
                {
                    "name": "runs-the-fleet-trainer",
                    "expression": "object.spec.containers.exists(c, "
                    f"c.image.startsWith({literal}))",
                }
            ],
            "autogen": {"podControllers": {"controllers": []}},
            "mutations": [
                {
                    "patchType": "ApplyConfiguration",
                    "applyConfiguration": {
                        "expression": "Object{spec: Object.spec{containers: "
                        "object.spec.containers.map(c, Object.spec.containers{name: c.name, "
                        f"image: {replica_rewrite(trainer, region)}}})}}}}"
                    },
                }
            ],
        },
    }


def _team_pod_constraints() -> dict[str, Any]:
    """Pods created or updated in team namespaces: where the signature policy applies."""
    return {
        "namespaceSelector": team_namespace_selector(),
        "resourceRules": [
            {
                "apiGroups": [""],
                "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"],
                "resources": ["pods"],
            }
        ],
    }


def _every_image_signed(fleet: tuple[str, ...] = ()) -> dict[str, Any]:
    """The CEL validation that names the failure: every image of the pod is signed — by the
    trainer home's key for the fleet's trainer repositories (`fleet`), else by the stack's
    own trusted signer."""
    verify = "verifyImageSignatures(image, [attestors.platform])"
    if fleet:
        trainer = " || ".join(f"image.startsWith({_cel_string(r + '@')})" for r in fleet)
        verify = f"({trainer}) ? verifyImageSignatures(image, [attestors.fleet]) : {verify}"
    return {
        # Every category Kyverno extracts (containers, initContainers,
        # ephemeralContainers: kyverno/kyverno@v1.19.0:pkg/cel/compiler/images.go,
        # each key always present, evaluator/policy.go): `required` alone would
        # also reject an unverified init container, but with a generic message.
        "expression": "(images.containers + images.initContainers"
        f" + images.ephemeralContainers).map(image, {verify}).all(e, e > 0)",
        "message": "every image must be signed by the platform's trusted signer"
        + (" (the fleet's trainer by its home's key)" if fleet else ""),
    }


def kyverno_values() -> dict[str, Any]:
    """Three admission replicas: the webhook fails closed, so one replica is an outage. The
    service account is named explicitly: the Pod Identity association refers to it."""
    return {
        "admissionController": {
            "replicas": 3,
            "rbac": {"serviceAccount": {"name": KYVERNO_SERVICE_ACCOUNT}},
        }
    }


@dataclass(frozen=True)
class AdmissionArgs:
    """Inputs of the Admission component."""

    config: ImageAdmissionConfig
    account: AwsAccount
    cluster_name: pulumi.Input[str]
    #: The literal cluster name Kyverno's role trust is pinned to.
    physical_cluster_name: str
    k8s_provider: k8s.Provider
    #: Kyverno's webhook pods need nodes before the release can become ready.
    system_nodes: pulumi.Resource
    tags: dict[str, str]
    #: The platform signing key's public key (PEM) when admission trusts it.
    signing_public_key: pulumi.Input[str] | None = None
    #: A fleet worker (docs/fleet.md): its signature policy checks Pods only, never the jobs
    #: the manager mirrors here (`signed_images_policy`).
    fleet_worker: bool = False
    #: The fleet's trainer where this worker runs its trainer home's: admitted by reference,
    #: verified with the home's key, and rewritten to this region's replica on Pods when the
    #: home is in another region (components/analysis/fleet_trainer.py).
    fleet_trainer: FleetTrainer | None = None

    @classmethod
    def of(
        cls,
        cfg: StackConfig,
        cluster: ClusterHandles,
        account: AwsAccount,
        tags: dict[str, str],
        signing_public_key: pulumi.Input[str] | None = None,
        *,
        fleet_trainer: FleetTrainer | None = None,
    ) -> AdmissionArgs:
        return cls(
            signing_public_key=signing_public_key,
            config=cfg.security.image_admission,
            account=account,
            cluster_name=cluster.name,
            physical_cluster_name=cluster.physical_name,
            k8s_provider=cluster.k8s_provider,
            system_nodes=cluster.system_node_group,
            tags=tags,
            fleet_worker=cfg.fleet is not None,
            fleet_trainer=fleet_trainer,
        )

    @property
    def rewrites_trainer(self) -> bool:
        """Pods here pull the fleet's trainer from this region's replica (`replica_policy`)."""
        trainer = self.fleet_trainer
        return trainer is not None and trainer.replica_repository(self.account.region) != (
            trainer.repository
        )


class Admission(pulumi.ComponentResource):
    """The trusted-images admission policies (and Kyverno when signatures are verified)."""

    #: What team workloads must wait for: the policies that check them.
    guards: list[pulumi.Resource]

    def __init__(
        self, name: str, args: AdmissionArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:security:Admission", name, None, opts)
        config = args.config
        k8s_opts = child_options(self, provider=args.k8s_provider)
        registries = allowed_registries(config, args.account)
        trainer = args.fleet_trainer
        pattern = image_pattern(
            registries,
            require_digest=config.require_digest,
            repositories=(trainer.repository,) if trainer is not None else (),
        )
        policy = trusted_images_policy(pattern)
        vap = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            f"{name}-trusted-images",
            metadata=policy["metadata"],
            spec=policy["spec"],
            opts=k8s_opts,
        )
        binding = trusted_images_binding(config)
        vap_binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            f"{name}-trusted-images-binding",
            metadata=binding["metadata"],
            spec=binding["spec"],
            opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=[vap])),
        )
        self.guards = [vap, vap_binding]
        if config.signatures.enabled or args.rewrites_trainer:
            self.guards += self._kyverno(name, args, registries, k8s_opts)
        self.register_outputs({"pattern": pattern})

    def _kyverno(
        self,
        name: str,
        args: AdmissionArgs,
        registries: list[str],
        k8s_opts: pulumi.ResourceOptions,
    ) -> list[pulumi.Resource]:
        """Kyverno, its signature policy (when image signatures are verified) and the fleet
        trainer's Pod rewrite (`replica_policy`): the guards of team workloads."""
        config = args.config
        association = self._kyverno_identity(name, args)
        release = self._kyverno_release(name, args, k8s_opts, [args.system_nodes, association])
        after_release = pulumi.ResourceOptions.merge(
            k8s_opts, pulumi.ResourceOptions(depends_on=[release])
        )
        policies = []
        if config.signatures.enabled:
            scope = signed_repositories(config, args.account, args.physical_cluster_name)
            policies.append(
                (
                    "signed-images",
                    signed_images_policy(
                        config,
                        registries,
                        scope,
                        args.signing_public_key,
                        trainer=args.fleet_trainer,
                        region=args.account.region,
                        fleet_worker=args.fleet_worker,
                    ),
                )
            )
        if args.rewrites_trainer:
            assert args.fleet_trainer is not None
            policies.append(
                ("fleet-trainer-replica", replica_policy(args.fleet_trainer, args.account.region))
            )
        guards: list[pulumi.Resource] = [release]
        for suffix, policy in policies:
            guards.append(
                k8s.apiextensions.CustomResource(
                    f"{name}-{suffix}",
                    api_version=policy["apiVersion"],
                    kind=policy["kind"],
                    metadata=policy["metadata"],
                    spec=policy["spec"],
                    opts=after_release,
                )
            )
        return guards

    def _kyverno_identity(self, name: str, args: AdmissionArgs) -> aws.eks.PodIdentityAssociation:
        """Kyverno's role and Pod Identity association: it reads signatures from private ECR
        with its own identity."""
        role = iam.pod_identity_role(
            f"{name}-kyverno",
            account_id=args.account.account_id,
            cluster_name=args.physical_cluster_name,
            namespace=KYVERNO_NAMESPACE,
            service_account=KYVERNO_SERVICE_ACCOUNT,
            managed_policy_arns=[
                f"arn:{args.account.partition}:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly"
            ],
            tags=args.tags,
            opts=child_options(self),
        )
        return aws.eks.PodIdentityAssociation(
            f"{name}-kyverno",
            cluster_name=args.cluster_name,
            namespace=KYVERNO_NAMESPACE,
            service_account=KYVERNO_SERVICE_ACCOUNT,
            role_arn=role.arn,
            tags=args.tags,
            opts=child_options(self),
        )

    def _kyverno_release(
        self,
        name: str,
        args: AdmissionArgs,
        k8s_opts: pulumi.ResourceOptions,
        after: list[pulumi.Resource],
    ) -> k8s.helm.v3.Release:
        """The Kyverno chart, installed once its nodes and identity exist (`after`)."""
        return helm_release(
            f"{name}-kyverno",
            addons.KYVERNO,
            version=args.config.signatures.kyverno_chart_version,
            values=kyverno_values(),
            opts=pulumi.ResourceOptions.merge(k8s_opts, pulumi.ResourceOptions(depends_on=after)),
        )
