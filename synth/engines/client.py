"""A small Kubernetes REST client (the standard library only): discovery, server-side apply,
create, get, list, patch, delete. Enough to drive a local control plane; every refusal comes
back as an `ApiError` carrying the API server's own status message."""

from __future__ import annotations

import json
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")
FIELD_MANAGER = "gpu-platform-e2e"


class ApiError(Exception):
    """The API server refused a request: HTTP status, reason and its message."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status = status
        self.reason = reason
        self.message = message


@dataclass(frozen=True)
class Resource:
    """Where a kind lives in the API: its plural and whether it is namespaced."""

    group_version: str
    plural: str
    namespaced: bool


def _base(api_version: str) -> str:
    return f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"


class Client:
    """Talks to one API server as one identity (a client certificate or a bearer token)."""

    def __init__(
        self,
        server: str,
        ca: Path,
        *,
        cert: tuple[Path, Path] | None = None,
        token: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        self.server = server.rstrip("/")
        self._context = ssl.create_default_context(cafile=str(ca))
        if cert is not None:
            self._context.load_cert_chain(str(cert[0]), str(cert[1]))
        self._token = token
        self._timeout = timeout
        self._resources: dict[tuple[str, str], Resource] = {}

    # --- transport ----------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: Mapping[str, str] | None = None,
    ) -> Any:
        url = self.server + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(url, data=data, method=method)
        request.add_header("Accept", "application/json")
        if data is not None:
            request.add_header("Content-Type", content_type)
        if self._token:
            request.add_header("Authorization", f"Bearer {self._token}")
        try:
            with urllib.request.urlopen(
                request, context=self._context, timeout=self._timeout
            ) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            raw = error.read()
            try:
                status = json.loads(raw)
            except ValueError:
                status = {"message": raw.decode(errors="replace")}
            raise ApiError(
                error.code, str(status.get("reason", "")), str(status.get("message", ""))
            ) from None
        if not raw:
            return None
        try:
            return json.loads(raw)
        except ValueError:  # /readyz and friends answer plain text
            return raw.decode(errors="replace")

    # --- discovery ----------------------------------------------------------------------------

    def resource(self, api_version: str, kind: str) -> Resource:
        """The REST resource of a kind; discovery is read again when a kind is new (a CRD
        installed since the last look)."""
        key = (api_version, kind)
        if key not in self._resources:
            listing = self.request("GET", _base(api_version))
            for item in listing.get("resources", []):
                if "/" in item["name"]:
                    continue  # subresources
                self._resources[(api_version, item["kind"])] = Resource(
                    api_version, item["name"], bool(item["namespaced"])
                )
            if key not in self._resources:
                raise ApiError(404, "NotFound", f"no kind {kind} in {api_version}")
        return self._resources[key]

    def forget(self, api_version: str) -> None:
        """Drop what discovery said of a group version (its CRDs were replaced)."""
        for key in [k for k in self._resources if k[0] == api_version]:
            del self._resources[key]

    def path(self, api_version: str, kind: str, name: str = "", namespace: str = "") -> str:
        resource = self.resource(api_version, kind)
        base = _base(api_version)
        if resource.namespaced and namespace:
            base += f"/namespaces/{namespace}"
        base += f"/{resource.plural}"
        return f"{base}/{name}" if name else base

    # --- verbs --------------------------------------------------------------------------------

    def apply(self, obj: Mapping[str, Any], *, dry_run: bool = False) -> Any:
        """Server-side apply, as `kubectl apply --server-side --force-conflicts` does."""
        meta = obj.get("metadata", {})
        path = self.path(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace", ""))
        params = {"fieldManager": FIELD_MANAGER, "force": "true"}
        if dry_run:
            params["dryRun"] = "All"
        return self.request(
            "PATCH", path, dict(obj), content_type="application/apply-patch+yaml", params=params
        )

    def create(self, obj: Mapping[str, Any]) -> Any:
        meta = obj.get("metadata", {})
        path = self.path(obj["apiVersion"], obj["kind"], namespace=meta.get("namespace", ""))
        return self.request("POST", path, dict(obj))

    def get(self, api_version: str, kind: str, name: str, namespace: str = "") -> Any:
        return self.request("GET", self.path(api_version, kind, name, namespace))

    def find(self, api_version: str, kind: str, name: str, namespace: str = "") -> Any | None:
        try:
            return self.get(api_version, kind, name, namespace)
        except ApiError as error:
            if error.status == 404:
                return None
            raise

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str = "",
        *,
        labels: str = "",
    ) -> list[dict[str, Any]]:
        params = {"labelSelector": labels} if labels else None
        found = self.request(
            "GET", self.path(api_version, kind, namespace=namespace), params=params
        )
        return list(found.get("items", []))

    def merge_patch(
        self,
        api_version: str,
        kind: str,
        name: str,
        patch: Mapping[str, Any],
        *,
        namespace: str = "",
        subresource: str = "",
    ) -> Any:
        path = self.path(api_version, kind, name, namespace)
        if subresource:
            path += f"/{subresource}"
        return self.request("PATCH", path, dict(patch), content_type="application/merge-patch+json")

    def delete(self, api_version: str, kind: str, name: str, namespace: str = "") -> None:
        try:
            self.request(
                "DELETE",
                self.path(api_version, kind, name, namespace),
                {"propagationPolicy": "Background"},
            )
        except ApiError as error:
            if error.status != 404:
                raise


def wait_for(
    what: str, probe: Callable[[], T | None], *, timeout: float, interval: float = 0.2
) -> T:
    """Poll `probe` until it returns something other than None (or False); TimeoutError
    names `what`. A refusal (ApiError) or a connection error counts as not yet."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except (ApiError, OSError):
            value = None
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(interval)


def established(client: Client, name: str) -> bool:
    """Whether the CustomResourceDefinition `name` is Established (its kind is served)."""
    crd = client.find("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    conditions = ((crd or {}).get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def install_crds(client: Client, crds: list[dict[str, Any]], *, timeout: float = 60.0) -> None:
    """Create CustomResourceDefinitions (apply those that exist) and wait until every one is
    Established. A plain create costs the API server half what a server-side apply of a large
    schema does (its managed fields)."""
    for crd in crds:
        try:
            client.create(crd)
        except ApiError as error:
            if error.status != 409:
                raise
            client.apply(crd)
    for crd in crds:
        name: str = crd["metadata"]["name"]

        def ready(crd_name: str = name) -> bool:
            return established(client, crd_name)

        wait_for(f"CRD {name} Established", ready, timeout=timeout, interval=0.05)
    for crd in crds:
        for version in crd["spec"]["versions"]:
            client.forget(f"{crd['spec']['group']}/{version['name']}")
