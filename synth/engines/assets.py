"""Where the real engines' binaries come from.

The tier needs, as local executables: etcd, kube-apiserver, kube-controller-manager,
kube-scheduler (Kubernetes v1.33) and the Kueue controller manager, with Kueue's own CRDs and
webhook manifests of the same version. They are test assets, like envtest's
`KUBEBUILDER_ASSETS`: the repository never ships or needs them. They are found, in order, in

- `$GPU_PLATFORM_KUBE_ASSETS` (a folder laid out as below), else
- `../shared/kube` beside the repository (the workplace's copy),

laid out as `bin/<name>` or `bin/<name>.xz` and `kueue-<version>/{crds,webhook}/`. Compressed
binaries are unpacked once into `$XDG_CACHE_HOME/gpu-platform/kube-assets/<sha256 prefix>/`.
When the folder is missing, `find()` says why and the tier skips with that reason.
"""

from __future__ import annotations

import hashlib
import lzma
import os
import shutil
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from synth.harness import PROJECT_ROOT

ENV: Final = "GPU_PLATFORM_KUBE_ASSETS"
BINARIES: Final = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kueue",
)


@dataclass(frozen=True)
class Assets:
    """Paths of the engines' executables and of the Kueue build's own manifests."""

    root: Path
    bin: dict[str, Path]
    #: The Kueue build's version (from the `kueue-<version>` folder), e.g. "v0.13.1".
    kueue_version: str
    kueue_crds: Path
    kueue_webhooks: Path

    def __getitem__(self, name: str) -> Path:
        return self.bin[name]


class MissingAssetsError(Exception):
    """The assets are not there; the message says what is missing and where it was looked for."""


def default_root() -> Path:
    configured = os.environ.get(ENV)
    if configured:
        return Path(configured).expanduser().resolve()
    return (PROJECT_ROOT.parent / "shared" / "kube").resolve()


def _cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gpu-platform" / "kube-assets"


def _unpacked(packed: Path) -> Path:
    """`packed` (an .xz file) decompressed once into the cache, keyed by its content."""
    digest = hashlib.sha256()
    with packed.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    target = _cache_dir() / digest.hexdigest()[:16] / packed.name.removesuffix(".xz")
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        partial = target.with_suffix(".partial")
        with lzma.open(packed) as source, partial.open("wb") as out:
            shutil.copyfileobj(source, out, 1 << 20)
        partial.chmod(partial.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        partial.replace(target)  # atomic: a concurrent run sees the whole file or none
    return target


def find(root: Path | None = None) -> Assets:
    """The assets under `root` (default: `default_root()`); MissingAssetsError says why not."""
    root = root or default_root()
    if not root.is_dir():
        raise MissingAssetsError(
            f"no engine assets at {root} (set {ENV} to a folder with bin/ and kueue-<version>/)"
        )
    found: dict[str, Path] = {}
    for name in BINARIES:
        plain, packed = root / "bin" / name, root / "bin" / f"{name}.xz"
        if plain.is_file() and os.access(plain, os.X_OK):
            found[name] = plain
        elif packed.is_file():
            found[name] = _unpacked(packed)
        else:
            raise MissingAssetsError(f"{root}/bin has no {name} (nor {name}.xz)")
    kueue_dirs = sorted(p for p in root.glob("kueue-v*") if (p / "crds").is_dir())
    if not kueue_dirs:
        raise MissingAssetsError(f"{root} has no kueue-<version>/crds folder")
    kueue = kueue_dirs[-1]
    webhooks = kueue / "webhook" / "manifests.yaml"
    if not webhooks.is_file():
        raise MissingAssetsError(f"{kueue} has no webhook/manifests.yaml")
    return Assets(
        root=root,
        bin=found,
        kueue_version=kueue.name.removeprefix("kueue-"),
        kueue_crds=kueue / "crds",
        kueue_webhooks=webhooks,
    )
