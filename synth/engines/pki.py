"""A throw-away certificate authority for one local control plane: the API server's serving
certificate, client certificates (admin, scheduler, controller-manager) and the service-account
signing key, as kubeadm lays them out, valid for a day. `cryptography` only."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_LIFETIME = datetime.timedelta(days=1)


def _key_pem(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@dataclass(frozen=True)
class KeyPair:
    cert: Path
    key: Path


class Authority:
    """A CA whose certificates land in `directory`."""

    def __init__(self, directory: Path, name: str = "gpu-platform-e2e-ca") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        self._key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        self._cert = (
            self._builder(subject, self._key.public_key(), issuer=subject)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_cert_sign=True,
                    crl_sign=True,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .sign(self._key, hashes.SHA256())
        )
        self.ca = directory / "ca.crt"
        self.ca.write_bytes(self.ca_pem)

    @property
    def ca_pem(self) -> bytes:
        return self._cert.public_bytes(serialization.Encoding.PEM)

    @staticmethod
    def _builder(
        subject: x509.Name, public_key: ec.EllipticCurvePublicKey, issuer: x509.Name
    ) -> x509.CertificateBuilder:
        now = datetime.datetime.now(datetime.UTC)
        return (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(issuer)
            .public_key(public_key)
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _LIFETIME)
        )

    def issue(
        self,
        name: str,
        common_name: str,
        *,
        organizations: tuple[str, ...] = (),
        server: bool = False,
        client: bool = False,
    ) -> KeyPair:
        """A leaf certificate; a server one is valid for 127.0.0.1 and localhost."""
        key = ec.generate_private_key(ec.SECP256R1())
        subject = x509.Name(
            [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
            + [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
        )
        builder = self._builder(subject, key.public_key(), self._cert.subject).add_extension(
            x509.BasicConstraints(ca=False, path_length=None), critical=True
        )
        usages = []
        if server:
            usages.append(ExtendedKeyUsageOID.SERVER_AUTH)
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
                ),
                critical=False,
            )
        if client:
            usages.append(ExtendedKeyUsageOID.CLIENT_AUTH)
        if usages:
            builder = builder.add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        cert = builder.sign(self._key, hashes.SHA256())
        pair = KeyPair(self.directory / f"{name}.crt", self.directory / f"{name}.key")
        pair.cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        pair.key.write_bytes(_key_pem(key))
        pair.key.chmod(0o600)
        return pair


def service_account_key(path: Path) -> Path:
    """The RSA key the API server signs service-account tokens with (and verifies them)."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(_key_pem(key))
    path.chmod(0o600)
    return path
