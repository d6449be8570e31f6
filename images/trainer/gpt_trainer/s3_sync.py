"""Replicate committed checkpoints to S3 and restore the newest verifiable one.

Object layout mirrors the local one: ``s3://bucket/prefix/step_N/<file>``, with
``step_N/manifest.json`` uploaded *last* (so a prefix without a manifest is an upload in
progress or abandoned, and readers ignore it) and ``prefix/LATEST`` moved forward only, with a
conditional write so a zombie writer from an older pod cannot move it back.
Downloads are verified against the manifest before they are renamed into place.
"""

from __future__ import annotations

import logging
import queue
import shutil
import threading
from pathlib import Path
from typing import Any

from .checkpoint import (
    LATEST_NAME,
    MANIFEST_NAME,
    TMP_PREFIX,
    CheckpointError,
    parse_step,
    read_manifest,
    verify,
)

log = logging.getLogger(__name__)


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` -> (``bucket``, ``some/prefix``) without trailing slash."""
    if not uri.startswith("s3://"):
        raise ValueError(f"not an s3:// URI: {uri!r}")
    bucket, _, prefix = uri[len("s3://") :].partition("/")
    if not bucket:
        raise ValueError(f"no bucket in {uri!r}")
    return bucket, prefix.strip("/")


def _key(prefix: str, *parts: str) -> str:
    return "/".join(p for p in (prefix, *parts) if p)


def upload_checkpoint(client: Any, step_dir: Path, s3_uri: str) -> list[str]:
    """Upload a committed step dir, manifest last, then advance LATEST. Returns keys in order."""
    bucket, prefix = parse_s3_uri(s3_uri)
    manifest = read_manifest(step_dir)
    keys = []
    for entry in manifest["files"]:
        key = _key(prefix, step_dir.name, entry["path"])
        client.upload_file(str(step_dir / entry["path"]), bucket, key)
        keys.append(key)
    key = _key(prefix, step_dir.name, MANIFEST_NAME)
    client.upload_file(str(step_dir / MANIFEST_NAME), bucket, key)
    keys.append(key)
    _advance_latest(client, bucket, prefix, step_dir.name)
    keys.append(_key(prefix, LATEST_NAME))
    return keys


def _advance_latest(client: Any, bucket: str, prefix: str, name: str) -> None:
    """Point LATEST at ``name`` unless it already names a newer step (compare-and-swap)."""
    key = _key(prefix, LATEST_NAME)
    body = (name + "\n").encode()
    for _ in range(3):
        try:
            current = client.get_object(Bucket=bucket, Key=key)
        except client.exceptions.NoSuchKey:
            condition = {"IfNoneMatch": "*"}
        else:
            existing = parse_step(current["Body"].read().decode().strip())
            if existing is not None and existing >= (parse_step(name) or 0):
                return
            condition = {"IfMatch": current["ETag"]}
        try:
            client.put_object(Bucket=bucket, Key=key, Body=body, **condition)
            return
        except client.exceptions.ClientError as exc:
            if exc.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "412"):
                raise
    log.warning("LATEST in s3://%s/%s kept changing; left it", bucket, key)


def remote_steps(client: Any, s3_uri: str) -> list[str]:
    """Step prefixes that have a manifest (i.e. finished uploading), newest first."""
    bucket, prefix = parse_s3_uri(s3_uri)
    names = set()
    paginator = client.get_paginator("list_objects_v2")
    for page in paginator.paginate(Bucket=bucket, Prefix=f"{prefix}/" if prefix else ""):
        for obj in page.get("Contents", []):
            rel = obj["Key"][len(prefix) + 1 :] if prefix else obj["Key"]
            step_name, _, rest = rel.partition("/")
            if rest == MANIFEST_NAME and parse_step(step_name) is not None:
                names.add(step_name)
    return sorted(names, key=lambda n: parse_step(n) or -1, reverse=True)


def download_latest_valid(client: Any, s3_uri: str, dest_root: Path) -> Path | None:
    """Fetch the newest remote checkpoint that verifies into ``dest_root``; None if none does."""
    bucket, prefix = parse_s3_uri(s3_uri)
    dest_root.mkdir(parents=True, exist_ok=True)
    for name in remote_steps(client, s3_uri):
        staging = dest_root / f"{TMP_PREFIX}download-{name}"
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        client.download_file(
            bucket, _key(prefix, name, MANIFEST_NAME), str(staging / MANIFEST_NAME)
        )
        try:
            manifest = read_manifest(staging)
            for entry in manifest["files"]:
                target = staging / entry["path"]
                target.parent.mkdir(parents=True, exist_ok=True)
                client.download_file(bucket, _key(prefix, name, entry["path"]), str(target))
            # verify() checks the step against the dir name, so verify once renamed.
            final = dest_root / name
            if final.exists():
                shutil.rmtree(final)
            staging.rename(final)
            verify(final)
            return final
        except (CheckpointError, client.exceptions.ClientError) as exc:
            log.warning("remote checkpoint %s unusable: %s", name, exc)
            shutil.rmtree(staging, ignore_errors=True)
            shutil.rmtree(dest_root / name, ignore_errors=True)
    return None


class S3Uploader:
    """Uploads committed checkpoints in a background thread, in commit order."""

    def __init__(self, client: Any, s3_uri: str) -> None:
        self._client = client
        self._uri = s3_uri
        self._queue: queue.Queue[Path | None] = queue.Queue()
        self._in_flight: set[Path] = set()
        self._lock = threading.Lock()
        self.uploaded: list[Path] = []
        self.errors: list[str] = []
        self._thread = threading.Thread(target=self._run, name="s3-upload", daemon=True)
        self._thread.start()

    def submit(self, step_dir: Path) -> None:
        with self._lock:
            self._in_flight.add(step_dir)
        self._queue.put(step_dir)

    def protected(self) -> set[Path]:
        """Dirs retention must not delete yet."""
        with self._lock:
            return set(self._in_flight)

    def _run(self) -> None:
        while (step_dir := self._queue.get()) is not None:
            try:
                upload_checkpoint(self._client, step_dir, self._uri)
                self.uploaded.append(step_dir)
            except Exception as exc:  # noqa: BLE001 - a failed replica must not stop training
                log.error("upload of %s failed: %s", step_dir.name, exc)
                self.errors.append(f"{step_dir.name}: {exc}")
            finally:
                with self._lock:
                    self._in_flight.discard(step_dir)

    def close(self, timeout_s: float | None = None) -> bool:
        """Finish queued uploads; False if they did not finish within ``timeout_s``."""
        self._queue.put(None)
        self._thread.join(timeout_s)
        return not self._thread.is_alive()
