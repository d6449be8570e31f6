"""The trainer image's build (images/trainer): the base-digest check the Dockerfile runs, against
a registry served on loopback with the OCI distribution API's token challenge; the Dockerfile
runs it in a stage the final image depends on; and the image installs exactly the trainer's
pinned requirements (the versions its tests run with)."""

from __future__ import annotations

import hashlib
import http.server
import importlib.util
import json
import re
import threading
from collections.abc import Iterator
from types import ModuleType
from typing import Any

import pytest

from synth.harness import PROJECT_ROOT

TRAINER = PROJECT_ROOT / "images" / "trainer"
INDEX = "sha256:" + hashlib.sha256(b"the tag's index").hexdigest()
AMD64 = "sha256:" + hashlib.sha256(b"its linux/amd64 manifest").hexdigest()
OTHER = "sha256:" + hashlib.sha256(b"another image").hexdigest()


def _checker() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check", TRAINER / "check_base_digest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _Registry(http.server.BaseHTTPRequestHandler):
    """`/v2/team/base/manifests/1.0` behind a Bearer challenge; `/token` issues the token."""

    def do_GET(self) -> None:
        host = f"http://127.0.0.1:{self.server.server_address[1]}"
        if self.path.startswith("/token"):
            assert "scope=repository%3Ateam%2Fbase%3Apull" in self.path
            self._send(200, {"token": "t0k"})
        elif self.headers.get("Authorization") != "Bearer t0k":
            challenge = f'Bearer realm="{host}/token",service="test"'
            self._send(401, {}, {"WWW-Authenticate": challenge})
        elif self.path == "/v2/team/base/manifests/1.0":
            assert "application/vnd.oci.image.index.v1+json" in self.headers["Accept"]
            body = {"manifests": [{"digest": AMD64, "platform": {"architecture": "amd64"}}]}
            self._send(200, body, {"Docker-Content-Digest": INDEX})
        else:
            self._send(404, {"errors": [{"code": "MANIFEST_UNKNOWN"}]})

    def _send(self, code: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def registry() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"127.0.0.1:{server.server_address[1]}/team/base"
    finally:
        server.shutdown()


@pytest.mark.parametrize("pinned", [INDEX, AMD64])
def test_a_pin_that_is_the_tags_index_or_one_of_its_platforms_passes(
    registry: str, pinned: str
) -> None:
    assert _checker().main([registry, "1.0", pinned]) == 0


def test_a_pin_the_tag_does_not_point_at_fails_the_build_naming_both(
    registry: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _checker().main([registry, "1.0", OTHER]) == 1
    err = capsys.readouterr().err
    assert INDEX in err and OTHER in err and "BASE_DIGEST" in err


def test_a_registry_that_cannot_answer_fails_the_build(
    registry: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _checker().main([registry, "9.9", INDEX]) == 1
    assert "cannot verify" in capsys.readouterr().err


def test_docker_hub_names_go_to_its_registry() -> None:
    checker = _checker()
    assert checker.registry_and_name("docker.io/pytorch/pytorch") == (
        "https://registry-1.docker.io",
        "pytorch/pytorch",
    )
    assert checker.registry_and_name("python") == ("https://registry-1.docker.io", "library/python")
    assert checker.registry_and_name("nvcr.io/nvidia/pytorch") == (
        "https://nvcr.io",
        "nvidia/pytorch",
    )


def test_the_dockerfile_verifies_its_pinned_base_in_a_stage_the_image_needs() -> None:
    text = (TRAINER / "Dockerfile").read_text()
    args = dict(re.findall(r"^ARG (BASE_\w+)=(\S+)$", text, re.MULTILINE))
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", args["BASE_DIGEST"])
    assert "FROM ${BASE_IMAGE}:${BASE_TAG}@${BASE_DIGEST} AS base" in text
    assert 'check_base_digest.py "${BASE_IMAGE}" "${BASE_TAG}" "${BASE_DIGEST}"' in text
    # BuildKit builds only the stages the target needs: the final stage copies the check's
    # result, so the check cannot be skipped.
    assert "COPY --from=base-check" in text.split("FROM base AS base-check")[1]


def _pins(path: str) -> dict[str, str]:
    pins = {}
    for raw in (TRAINER / path).read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{path}: {line} is not pinned"
            pins[name.split("[")[0].lower()] = version
    return pins


def test_the_image_installs_the_trainers_pinned_requirements() -> None:
    image, tested = _pins("requirements.txt"), _pins("requirements-test.txt")
    assert image and all(tested.get(name) == version for name, version in image.items()), (
        "the image's requirements must be the versions the trainer's tests run with"
    )
    # torch comes from the base image, pinned on the pip command line so pip keeps its build.
    assert "torch" not in image
    dockerfile = (TRAINER / "Dockerfile").read_text()
    assert f'pip install -r requirements.txt "torch=={tested["torch"]}"' in dockerfile
    assert f"ARG BASE_TAG={tested['torch']}-" in dockerfile
