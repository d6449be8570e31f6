"""Fail the image build when the pinned base digest is not what the base tag points at.

`FROM repo:tag@sha256:...` builds from the digest alone: BuildKit ignores the tag, so a digest
copied wrong (or a tag moved upstream) goes unnoticed. This step, run inside the build with
nothing but the standard library, asks the base image's registry what the tag points at (the
OCI distribution API: token from the registry's `WWW-Authenticate` challenge, then
`HEAD /v2/<name>/manifests/<tag>` with the index and manifest media types in `Accept`,
opencontainers/distribution-spec v1.1.1 spec.md) and exits 1 naming both digests when the
pinned one is neither the tag's index nor one of its platform manifests. No answer from the
registry fails the build too: an unverified base is not built from.

    python check_base_digest.py docker.io/pytorch/pytorch 2.13.0-cuda12.6-cudnn9-runtime sha256:...
"""

from __future__ import annotations

import json
import re
import sys
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

ACCEPT = ", ".join(
    (
        "application/vnd.oci.image.index.v1+json",
        "application/vnd.docker.distribution.manifest.list.v2+json",
        "application/vnd.oci.image.manifest.v1+json",
        "application/vnd.docker.distribution.manifest.v2+json",
    )
)
TIMEOUT_S = 30


def registry_and_name(image: str) -> tuple[str, str]:
    """(`https://<registry>`, repository name) of an image name; Docker Hub's short forms
    (`pytorch/pytorch`, `docker.io/...`, `python`) go to registry-1.docker.io."""
    first, _, rest = image.partition("/")
    if not rest or ("." not in first and ":" not in first and first != "localhost"):
        first, rest = "docker.io", image
    if first == "docker.io":
        first = "registry-1.docker.io"
        if "/" not in rest:
            rest = f"library/{rest}"
    scheme = "http" if first.startswith(("localhost", "127.0.0.1")) else "https"
    return f"{scheme}://{first}", rest


def _challenge(header: str) -> dict[str, str]:
    """The parameters of a `Bearer realm=...,service=...,scope=...` challenge."""
    return dict(re.findall(r'(\w+)="([^"]*)"', header))


def _request(url: str, token: str | None, method: str = "HEAD") -> Any:
    headers = {"Accept": ACCEPT}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return urllib.request.urlopen(
        urllib.request.Request(url, headers=headers, method=method), timeout=TIMEOUT_S
    )


def _token(challenge: str, name: str) -> str:
    params = _challenge(challenge)
    query = {"service": params.get("service", ""), "scope": f"repository:{name}:pull"}
    url = f"{params['realm']}?{urllib.parse.urlencode(query)}"
    with urllib.request.urlopen(url, timeout=TIMEOUT_S) as answer:
        body = json.load(answer)
    return str(body.get("token") or body.get("access_token") or "")


def manifest(registry: str, name: str, reference: str) -> tuple[str, Any]:
    """(Docker-Content-Digest, parsed body) of `name:reference`, through the token challenge
    when the registry asks for one."""
    url = f"{registry}/v2/{name}/manifests/{reference}"
    token = None
    for _ in range(2):
        try:
            with _request(url, token, method="GET") as answer:
                return answer.headers.get("Docker-Content-Digest", ""), json.load(answer)
        except urllib.error.HTTPError as err:
            challenge = err.headers.get("WWW-Authenticate", "")
            if err.code != 401 or token is not None or not challenge.startswith("Bearer "):
                raise
            token = _token(challenge, name)
    raise RuntimeError("unreachable")


def check(image: str, tag: str, pinned: str) -> str | None:
    """None when `pinned` is what `image:tag` points at (its index or a platform manifest of
    it); else why not."""
    registry, name = registry_and_name(image)
    digest, body = manifest(registry, name, tag)
    platforms = [str(m.get("digest")) for m in body.get("manifests") or []]
    if pinned == digest or pinned in platforms:
        return None
    return (
        f"{image}:{tag} points at {digest or 'an unnamed manifest'}"
        f"{' (platforms: ' + ', '.join(platforms) + ')' if platforms else ''}, "
        f"not at the pinned {pinned}: update the Dockerfile's BASE_DIGEST and its provenance"
    )


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    image, tag, pinned = argv
    try:
        problem = check(image, tag, pinned)
    except (OSError, ValueError, KeyError) as err:
        print(f"cannot verify {image}:{tag} against {pinned}: {err}", file=sys.stderr)
        return 1
    if problem:
        print(problem, file=sys.stderr)
        return 1
    print(f"{image}:{tag} -> {pinned}: verified")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
