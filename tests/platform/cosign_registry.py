"""A fake OCI registry holding cosign signatures, and a signer that writes them exactly as
`cosign sign --key` (legacy `.sig` tag layout) with a Rekor entry does: what the offline
ImageValidatingPolicy evaluator (tests/platform/ivpol_eval.py) verifies.

Sources (read at the tags Kyverno v1.19.0 pins in its go.mod: cosign v3.1.2, sigstore v1.10.9):
- signature tag `<repo>:sha256-<hex>.sig` next to the image: sigstore/cosign@v3.1.2:
  pkg/oci/remote/remote.go (SignatureTag, normalize) and pkg/oci/remote/options.go
  (SignatureTagSuffix = "sig");
- each layer of that tag is one signature: the payload is the simple-signing JSON, the base64
  signature is the layer annotation `dev.cosignproject.cosign/signature`, the Rekor bundle is
  `dev.sigstore.cosign/bundle` (sigstore/cosign@v3.1.2:pkg/oci/static/signature.go);
- the payload: sigstore/sigstore@v1.10.9:pkg/signature/payload/payload.go (SimpleContainerImage,
  `critical.type` = "cosign container image signature", Go json.Marshal: compact, field order);
- the signature: ECDSA P-256, ASN.1 DER over SHA-256 of the payload (Kyverno's default hash,
  kyverno/kyverno@v1.19.0:pkg/image/verifiers/ivpol/cosign/certs.go signatureAlgorithmMap[""]);
- the bundle: sigstore/cosign@v3.1.2:pkg/cosign/bundle/rekor.go (RekorBundle{SignedEntryTimestamp,
  Payload{body, integratedTime, logIndex, logID}}); the body is a base64 `hashedrekord` v0.0.1
  entry (signature content, public key PEM, sha256 of the payload); the SET is Rekor's ECDSA
  signature over the RFC 8785 canonical JSON of the payload (sigstore/cosign@v3.1.2:
  pkg/cosign/verify.go VerifySET); the log ID is the hex SHA-256 of Rekor's DER public key.

Not modelled: cosign v3's default `--new-bundle-format` (OCI 1.1 referrers holding a Sigstore
bundle, sigstore/cosign@v3.1.2:cmd/cosign/cli/options/sign.go), keyless (Fulcio) certificates,
RFC 3161 timestamps, a signature repository other than the image's (`COSIGN_REPOSITORY`).
"""

from __future__ import annotations

import base64
import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec

SIGNATURE_ANNOTATION = "dev.cosignproject.cosign/signature"
BUNDLE_ANNOTATION = "dev.sigstore.cosign/bundle"
COSIGN_SIGNATURE_TYPE = "cosign container image signature"


def canonical_json(value: Any) -> bytes:
    """RFC 8785 for the values used here (ASCII strings, integers, objects): sorted keys, no
    whitespace — what cosign's jsoncanonicalizer.Transform produces for a Rekor payload."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


def public_pem(key: ec.EllipticCurvePrivateKey | ec.EllipticCurvePublicKey) -> str:
    public = key.public_key() if isinstance(key, ec.EllipticCurvePrivateKey) else key
    return public.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()


def new_key() -> ec.EllipticCurvePrivateKey:
    """An ECDSA P-256 key pair: what `cosign generate-key-pair` creates."""
    return ec.generate_private_key(ec.SECP256R1())


@dataclass(frozen=True)
class Signature:
    """One layer of a `.sig` image: payload bytes and the layer's annotations."""

    payload: bytes
    annotations: dict[str, str]


@dataclass(frozen=True)
class RekorLog:
    """A Rekor transparency log: its key signs entry timestamps (SETs). Kyverno trusts the logs
    of the Sigstore trusted root it reads through TUF (kyverno/kyverno@v1.19.0:
    pkg/image/verifiers/ivpol/cosign/opts.go initTUFAndFetch); the test's trust root holds this
    log instead of the public one."""

    key: ec.EllipticCurvePrivateKey
    #: The key's validity start (unix seconds): sigstore-go's VerifySET rejects an entry
    #: integrated before it (sigstore/sigstore-go pkg/tlog/entry.go VerifySET).
    valid_from: int = 0

    @property
    def log_id(self) -> str:
        der = self.key.public_key().public_bytes(
            serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
        )
        return hashlib.sha256(der).hexdigest()

    def entry(self, b64sig: str, payload: bytes, signer_pem: str, index: int) -> dict[str, Any]:
        """The bundle Rekor returns for a hashedrekord upload (what cosign stores)."""
        body = {
            "apiVersion": "0.0.1",
            "kind": "hashedrekord",
            "spec": {
                "data": {"hash": {"algorithm": "sha256", "value": sha256_hex(payload)}},
                "signature": {
                    "content": b64sig,
                    "publicKey": {"content": base64.b64encode(signer_pem.encode()).decode()},
                },
            },
        }
        rekor_payload = {
            "body": base64.b64encode(canonical_json(body)).decode(),
            "integratedTime": 1_760_000_000 + index,
            "logIndex": index,
            "logID": self.log_id,
        }
        set_ = self.key.sign(canonical_json(rekor_payload), ec.ECDSA(hashes.SHA256()))
        return {
            "SignedEntryTimestamp": base64.b64encode(set_).decode(),
            "Payload": rekor_payload,
        }


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def simple_signing_payload(repository: str, digest: str) -> bytes:
    """The payload `cosign sign` signs: Go's json.Marshal of SimpleContainerImage (struct
    field order, compact, `optional: null` without annotations)."""
    doc = {
        "critical": {
            "identity": {"docker-reference": repository},
            "image": {"docker-manifest-digest": digest},
            "type": COSIGN_SIGNATURE_TYPE,
        },
        "optional": None,
    }
    return json.dumps(doc, separators=(",", ":")).encode()


@dataclass
class Registry:
    """Manifests by repository and digest, and the `.sig` tags cosign writes next to them."""

    #: `<repository>@<digest>` of every image pushed.
    manifests: set[str] = field(default_factory=set)
    #: `<repository>:sha256-<hex>.sig` -> its layers.
    signatures: dict[str, list[Signature]] = field(default_factory=dict)

    def push(self, repository: str, digest: str) -> None:
        self.manifests.add(f"{repository}@{digest}")

    def has(self, repository: str, digest: str) -> bool:
        return f"{repository}@{digest}" in self.manifests

    def signature_layers(self, repository: str, digest: str) -> list[Signature]:
        return self.signatures.get(signature_tag(repository, digest), [])

    def sign(
        self,
        repository: str,
        digest: str,
        key: ec.EllipticCurvePrivateKey,
        rekor: RekorLog | None,
        *,
        payload_digest: str | None = None,
        logged_key: ec.EllipticCurvePrivateKey | None = None,
        stored_payload: bytes | None = None,
    ) -> None:
        """`cosign sign --key` of `repository@digest`: appends a layer to the `.sig` tag; with a
        Rekor log (cosign's default, `--tlog-upload=true`) the layer carries the bundle.
        Tampering, for negative tests: `payload_digest` signs a payload naming another digest
        (a replayed signature), `logged_key` puts another public key in the Rekor entry,
        `stored_payload` stores another payload than the one signed and logged."""
        payload = simple_signing_payload(repository, payload_digest or digest)
        b64sig = base64.b64encode(key.sign(payload, ec.ECDSA(hashes.SHA256()))).decode()
        annotations = {SIGNATURE_ANNOTATION: b64sig}
        if rekor is not None:
            index = sum(len(v) for v in self.signatures.values())
            bundle = rekor.entry(b64sig, payload, public_pem(logged_key or key), index)
            annotations[BUNDLE_ANNOTATION] = json.dumps(bundle)
        tag = signature_tag(repository, digest)
        layer = Signature(stored_payload or payload, annotations)
        self.signatures.setdefault(tag, []).append(layer)


def signature_tag(repository: str, digest: str) -> str:
    algorithm, hex_ = digest.split(":", 1)
    return f"{repository}:{algorithm}-{hex_}.sig"
