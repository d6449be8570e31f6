"""The reference trainer image the deploy produces: built from images/trainer with BuildKit,
pushed to the platform's ECR `trainer` repository and signed there; or, with
`images.trainer.build: false`, a published tag resolved to its digest. Either way `ref` is
`<repository URL>@<digest>` as the registry returned it, a Pulumi Output every job, runtime and
the job stacks' contract read — never a constant (docs/images.md).

Build (pulumi/pulumi-docker-build v0.0.22 `Image`): `push=True` with the registry's
credentials from `aws.ecr.get_authorization_token` (kept in memory by the provider), an explicit
platform, BuildKit's registry cache in the same repository with `image-manifest=true` and
`oci-mediatypes=true` (ECR accepts no image index as a cache manifest: docker/docs
content/manuals/build/cache/backends/_index.md; the provider's CacheToRegistry docstring says the
same), `build_on_preview=False` (a preview never pushes, provider/internal/export.go; the
digest is unknown until `up`). The provider needs a Docker daemon with BuildKit where `pulumi
up` runs (provider/internal/host.go; the legacy `docker` driver is refused).

Tags (docs/images.md "Tags: why a build pushes twice" has the whole argument). The build pushes
the *staging* tag `build`, which the repository lets move (ECR IMMUTABLE_WITH_EXCLUSION,
catalog.ECR_MUTABLE_TAG_FILTERS); then, once signed, the same digest is tagged with its *pin*
tag `ctx-<context hash>-<first 16 hex of the digest>`, immutable, and only then does `ref`
resolve. Why not push an immutable tag directly: the provider rebuilds and pushes again whenever
any input or the context differs from its state — its Diff compares cacheFrom/cacheTo,
platforms, tags, dockerfile, build args, ... and its own hash of the context, which counts file
modes (provider/internal/image.go#L926-1056 at v0.0.22) — and its Update is a Create, a fresh
build and push (#L787-798); a Create interrupted after its push but before the state was saved
runs again on the next `up`. BuildKit's digests are not reproducible, so the second push of the
same immutable tag fails with ImageTagAlreadyExistsException, even for identical content (ECR
refuses any push to an existing immutable tag: aws/containers-roadmap#2179, moby/buildkit#3776),
and every later `up` fails the same way. The staging tag never fails that way; the pin tag
names its digest, so tagging again after an interruption finds it in place and succeeds.
The pinned image keeps a tag for good: the repository's lifecycle expires untagged images only
(registry.py `lifecycle_policy`), so no digest a job was handed can expire, and the digests that
do expire — a push the staging tag moved away from before it was pinned — were never handed to
any job. The Image resource is `retain_on_delete`: its Delete removes the digest from the
registry (#L883-923), which job stacks may still run.

Pin (a `local.Command` after the signature): `cosign copy --k8s-keychain <repo>@<digest>
<repo>:<pin tag>`. At v3.0.6 (cmd/cosign/cli/copy/copy.go `remoteCopy` #L158-185, the final
tag #L143-146) it copies the manifest as it is (the digest stays), skips a destination that
already has that digest, refuses one that has another (never `--force`), and copies the
signature tags along (the same tags in the same repository: skipped); it also tags the image
`sha256-<hex>` (cosign's entity copy, #L119-124; mutable like every `sha256-*` tag). cosign is
already where `up` runs.

Sign (pulumi/pulumi-command v1.2.1 `local.Command`, run by `up`, never by a preview): cosign
v3 signs the digest with the platform's KMS key (`awskms:///<key ARN>`; cosign's KMS client
calls kms:GetPublicKey, kms:DescribeKey and kms:Sign with the deploy's AWS credentials), with no
transparency-log upload (a private image's name stays out of the public Rekor log:
`--use-signing-config=false --tlog-upload=false`, both needed since cosign v3,
sigstore/cosign@v3.1.2 cmd/cosign/cli/signcommon/common.go) and in the `.sig` tag layout
(`--new-bundle-format=false`) that Kyverno v1.19.0 verifies when no bundle is attached
(pkg/image/verifiers/ivpol/cosign/verifier.go). Registry auth: `--k8s-keychain`, whose
keychain includes the ECR credential helper (sigstore/cosign@v3.0.6
cmd/cosign/cli/options/registry.go). Then `cosign verify` checks the signature exactly as
admission will (key, no tlog). `ref` resolves only after both, so nothing runs the image
before it is signed.

The KMS region is passed to cosign explicitly (`AWS_REGION`, the key ARN's region): cosign v3.0.6
signs through sigstore's AWS KMS client (go.mod: github.com/sigstore/sigstore/pkg/signature/kms/
aws v1.10.5), which parses the `awskms:///arn:aws:kms:<region>:...` reference only to validate it
and split off endpoint, key id and alias (pkg/signature/kms/aws/client.go#L77-111 at that tag)
and builds its client with `config.LoadDefaultConfig(ctx)` and no region option (#L135-158;
the provider registered in #L43-47 passes no options), so the region comes from the environment
(AWS_REGION, then AWS_DEFAULT_REGION: aws/aws-sdk-go-v2 config/env_config.go `regionEnvKeys`).
A deploy whose credentials were configured for another region (a fleet worker in us-west-2
deployed with us-east-1's) would ask the wrong region's KMS for the key. pulumi-command v1.2.1
starts the command with the deploy's environment plus `environment` (provider/pkg/provider/
local/commandOutputs.go#L81-85; a later duplicate wins in Go's os/exec), so the key's region
overrides whatever the deploy set.
"""

from __future__ import annotations

import fnmatch
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import pulumi
import pulumi_aws as aws
import pulumi_command as command
import pulumi_docker_build as docker_build

from components import catalog
from components.config.images import TrainerImageConfig
from components.ecr_tags import resolve_tag
from components.resource_options import child_options

#: BuildKit's registry cache tag in the trainer repository (excluded from tag immutability,
#: components/platform/registry/registry.py).
CACHE_TAG: Final = catalog.ECR_MUTABLE_TAG_FILTERS[1]
#: The tag a build pushes, which every build moves (excluded from tag immutability): never the
#: one jobs run by (module docstring).
STAGING_TAG: Final = catalog.ECR_MUTABLE_TAG_FILTERS[2]
#: Prefix of the build context's hash (`ctx-<context hash>`), the first part of a pin tag.
CONTEXT_TAG_PREFIX: Final = "ctx-"
#: Hex digits of the digest a pin tag ends with (64 bits: two builds of one context never meet).
PIN_DIGEST_HEX: Final = 16
#: What `up` runs to sign the pushed digest and verify the signature as admission will.
SIGN_SCRIPT: Final = (
    "set -eu\n"
    'cosign sign --yes --k8s-keychain --key "$SIGNING_KEY" --use-signing-config=false '
    '--tlog-upload=false --new-bundle-format=false "$IMAGE"\n'
    'cosign verify --k8s-keychain --key "$SIGNING_KEY" --insecure-ignore-tlog=true '
    '--new-bundle-format=false "$IMAGE" > /dev/null\n'
)
#: What `up` runs to give the signed digest its immutable pin tag (module docstring).
PIN_SCRIPT: Final = 'set -eu\ncosign copy --k8s-keychain "$IMAGE" "$PIN"\n'
_PLATFORMS: Final = {
    "linux/amd64": docker_build.Platform.LINUX_AMD64,
    "linux/arm64": docker_build.Platform.LINUX_ARM64,
}


def kms_key_region(key_arn: str) -> str:
    """The region of a KMS key ARN (`arn:<partition>:kms:<region>:<account>:key/<id>`)."""
    parts = key_arn.split(":")
    if len(parts) < 6 or parts[2] != "kms" or not parts[3]:
        raise ValueError(f"not a KMS key ARN: {key_arn!r}")
    return parts[3]


def _ignored(path: str, patterns: list[str]) -> bool:
    parts = path.split("/")
    prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    return any(fnmatch.fnmatch(p, pattern) for pattern in patterns for p in prefixes)


def context_files(context: Path) -> list[Path]:
    """The files of a build context that `docker build` sends: all of them but what the
    context's .dockerignore excludes (plain patterns, matched against each path and its
    parent directories; `**/` prefixes match at any depth)."""
    ignore = context / ".dockerignore"
    patterns: list[str] = []
    if ignore.exists():
        for raw in ignore.read_text().splitlines():
            line = raw.strip()
            if line and not line.startswith("#"):
                patterns.append(line.removeprefix("/"))
                if line.startswith("**/"):
                    patterns.append(line.removeprefix("**/"))
    return sorted(
        path
        for path in context.rglob("*")
        if path.is_file() and not _ignored(path.relative_to(context).as_posix(), patterns)
    )


def context_tag(context: Path) -> str:
    """`ctx-` + the first 16 hex digits of sha256 over the context's files (paths and
    contents): the tag a build of this context pushes."""
    digest = hashlib.sha256()
    for path in context_files(context):
        digest.update(path.relative_to(context).as_posix().encode() + b"\0")
        digest.update(path.read_bytes() + b"\0")
    return CONTEXT_TAG_PREFIX + digest.hexdigest()[:16]


def pin_tag(context: str, digest: str) -> str:
    """The immutable tag of one pushed digest: the context tag (`ctx-<hash>`) and the first
    PIN_DIGEST_HEX hex digits of the digest (`sha256:<hex>`)."""
    algorithm, _, hexdigest = digest.partition(":")
    if algorithm != "sha256" or len(hexdigest) < PIN_DIGEST_HEX:
        raise ValueError(f"not a sha256 digest: {digest!r}")
    return f"{context}-{hexdigest[:PIN_DIGEST_HEX]}"


def _cache_from(cache_ref: pulumi.Output[str]) -> list[docker_build.CacheFromArgs]:
    """Layers are read back from the registry cache: a fresh builder need not rebuild them."""
    return [docker_build.CacheFromArgs(registry=docker_build.CacheFromRegistryArgs(ref=cache_ref))]


def _cache_to(cache_ref: pulumi.Output[str]) -> list[docker_build.CacheToArgs]:
    """Every layer is written to the registry cache as an image manifest (what ECR accepts)."""
    return [
        docker_build.CacheToArgs(
            registry=docker_build.CacheToRegistryArgs(
                ref=cache_ref,
                image_manifest=True,
                oci_media_types=True,
                mode=docker_build.CacheMode.MAX,
            )
        )
    ]


@dataclass(frozen=True)
class TrainerImageArgs:
    """Inputs of the TrainerImage component."""

    config: TrainerImageConfig
    #: The build context relative to the project directory (`pulumi up`'s working directory).
    context: str
    #: `context_tag` of that context (computed once at the composition root): the first part of
    #: the pin tag.
    tag: str
    #: The ECR repository (`<cluster>/trainer`): its URL and name.
    repository_url: pulumi.Input[str]
    repository_name: pulumi.Input[str]
    #: The account that owns the registry (ECR's registry id).
    account_id: str
    #: The platform's signing key (KMS) when admission trusts it: the build is signed with it.
    signing_key_arn: pulumi.Input[str] | None = None
    #: What the push must come after: the trainer repository's replication on a fleet's
    #: trainer home (registry.py `_replication`: "Only repository content pushed to a repository
    #: after replication is configured is replicated").
    push_after: tuple[pulumi.Resource, ...] = ()


class TrainerImage(pulumi.ComponentResource):
    """The reference trainer as the registry holds it: `ref` = `<repository>@<digest>`."""

    #: `<repository URL>@sha256:<digest>`, resolved once the image is pushed (and signed).
    ref: pulumi.Output[str]
    #: `sha256:<digest>` of that image.
    digest: pulumi.Output[str]

    def __init__(
        self, name: str, args: TrainerImageArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("gpu-platform:images:TrainerImage", name, None, opts)
        if args.config.build:
            self.digest, self.ref = self._build(name, args)
        else:
            self.digest = self._resolve(args)
            self.ref = pulumi.Output.concat(args.repository_url, "@", self.digest)
        self.register_outputs({"ref": self.ref})

    def _build(
        self, name: str, args: TrainerImageArgs
    ) -> tuple[pulumi.Output[str], pulumi.Output[str]]:
        """The pushed image's digest and its reference, which resolves once it is signed and
        pinned (module docstring)."""
        url = pulumi.Output.from_input(args.repository_url)
        image = self._image(name, args, url)
        pinned = pulumi.Output.concat(url, "@", image.digest)
        sign = None
        if args.signing_key_arn is not None:
            sign = self._sign(name, image, pinned, args.signing_key_arn)
        pin = command.local.Command(
            f"{name}-pin",
            create=PIN_SCRIPT,
            environment={
                "IMAGE": pinned,
                "PIN": pulumi.Output.all(url, image.digest).apply(
                    lambda parts: f"{parts[0]}:{pin_tag(args.tag, str(parts[1]))}"
                ),
            },
            # One pin per digest, after its signature (the signature tags are copied with it).
            triggers=[image.digest],
            opts=child_options(self, depends_on=[sign if sign is not None else image]),
        )
        # Resolves after the signature and the pin: nothing is handed a digest before both.
        ids = [pin.id] if sign is None else [sign.id, pin.id]
        return image.digest, pulumi.Output.all(pinned, *ids).apply(lambda v: str(v[0]))

    def _image(
        self, name: str, args: TrainerImageArgs, url: pulumi.Output[str]
    ) -> docker_build.Image:
        """BuildKit builds the context and pushes it with the registry's credentials."""
        config = args.config
        auth = aws.ecr.get_authorization_token_output(
            registry_id=args.account_id, opts=pulumi.InvokeOutputOptions(parent=self)
        )
        cache_ref = url.apply(lambda u: f"{u}:{CACHE_TAG}")
        return docker_build.Image(
            name,
            push=True,
            # The staging tag: free to move when the provider pushes again (module docstring).
            tags=[url.apply(lambda u: f"{u}:{STAGING_TAG}")],
            context=docker_build.BuildContextArgs(location=args.context),
            dockerfile=docker_build.DockerfileArgs(location=f"{args.context}/Dockerfile"),
            platforms=[_PLATFORMS[config.platform]],
            registries=[
                docker_build.RegistryArgs(
                    address=url,
                    username=auth.user_name,
                    # A 12-hour registry credential: kept out of the state in plain text.
                    password=pulumi.Output.secret(auth.password),
                )
            ],
            cache_from=_cache_from(cache_ref) if config.cache else None,
            cache_to=_cache_to(cache_ref) if config.cache else None,
            build_on_preview=False,
            # Its Delete would remove the digest from the registry, which job stacks may still
            # run; what the registry keeps is the pin tags' and the lifecycle's business.
            opts=child_options(self, retain_on_delete=True, depends_on=list(args.push_after)),
        )

    def _sign(
        self,
        name: str,
        image: docker_build.Image,
        pinned: pulumi.Output[str],
        signing_key_arn: pulumi.Input[str],
    ) -> command.local.Command:
        """cosign signs the pushed digest (and verifies it as admission will)."""
        key_arn = pulumi.Output.from_input(signing_key_arn)
        sign = command.local.Command(
            f"{name}-sign",
            create=SIGN_SCRIPT,
            environment={
                "IMAGE": pinned,
                "SIGNING_KEY": pulumi.Output.concat("awskms:///", key_arn),
                # cosign's KMS client reads its region from the environment only (module
                # docstring): the key's own region, whatever region the deploy runs in.
                "AWS_REGION": key_arn.apply(kms_key_region),
            },
            # A new digest is a new image to sign; the same digest is never signed twice.
            triggers=[image.digest],
            opts=child_options(self, depends_on=[image]),
        )
        return sign

    def _resolve(self, args: TrainerImageArgs) -> pulumi.Output[str]:
        return resolve_tag(
            "images.trainer.tag",
            registry_id=args.account_id,
            repository=args.repository_name,
            tag=args.config.tag or "",
            remedy="push it, or set images.trainer.build: true",
            parent=self,
        )
