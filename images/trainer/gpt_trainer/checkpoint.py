"""Checkpoint layout, the commit protocol, verification, fallback and retention.

Layout under the checkpoint root (a POSIX filesystem shared by all ranks: local disk on one
node, or EBS/EFS/FSx)::

    LATEST                      name of the newest committed step dir (a hint for humans/tools)
    step_0000000040/
        manifest.json           written last: per-file size + sha256 and run metadata
        model.pt, train_state.pt, rank_00000.pt, ...   (DDP)
        dcp/..., train_state.pt, rank_00000.pt, ...    (FSDP2: torch.distributed.checkpoint)
        ds/..., rank_00000.pt, ...                     (DeepSpeed)
        model_config.json, tokenizer.json               (what the weights mean)
    .tmp-step_0000000050/       a save in progress or torn by a crash; never read

Commit protocol: write every file into ``.tmp-step_N/`` and fsync it, write ``manifest.json``
and fsync it, ``rename`` the directory to ``step_N/``, fsync the root, then atomically replace
``LATEST``. A reader trusts a step dir only if its manifest parses and every listed file matches
its size and sha256, so a torn write, a half-copied directory or a flipped byte all fall back to
the previous checkpoint. Retention deletes only after the new checkpoint is committed.
"""

from __future__ import annotations

import hashlib
import io
import json
import logging
import os
import shutil
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

FORMAT_VERSION = 1
MANIFEST_NAME = "manifest.json"
LATEST_NAME = "LATEST"
TMP_PREFIX = ".tmp-"
STEP_PREFIX = "step_"
INDEX_DIR = "_index"
_HASH_CHUNK = 8 << 20

log = logging.getLogger(__name__)


class CheckpointError(Exception):
    """A checkpoint directory that must not be trusted; the message says why."""


@dataclass(frozen=True)
class FileEntry:
    """One file of a checkpoint, relative to its step dir (POSIX separators)."""

    path: str
    size: int
    sha256: str


def step_dir_name(step: int) -> str:
    # Zero-padded so that lexical and numeric order agree for humans listing the bucket.
    return f"{STEP_PREFIX}{step:010d}"


def parse_step(name: str) -> int | None:
    """The step of a committed dir name, or None for anything else (tmp dirs, LATEST, junk)."""
    if not name.startswith(STEP_PREFIX):
        return None
    digits = name[len(STEP_PREFIX) :]
    return int(digits) if digits.isdigit() else None


class _HashingWriter:
    """File-like that hashes and counts bytes on their way to disk (no second read to hash)."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        self._sha = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes | bytearray | memoryview) -> int:
        self._sha.update(data)
        self.size += len(data)
        return int(self._raw.write(data))

    def flush(self) -> None:
        self._raw.flush()

    def hexdigest(self) -> str:
        return self._sha.hexdigest()


def fsync_dir(path: Path) -> None:
    """Make a rename/create inside ``path`` durable (needed on ext4/xfs after rename)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def save_object(directory: Path, relpath: str, obj: Any) -> FileEntry:
    """``torch.save`` ``obj`` (raw ``bytes`` as they are) to ``directory/relpath``, fsync it,
    return its manifest entry."""
    path = directory / relpath
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        writer = _HashingWriter(handle)
        if isinstance(obj, bytes):
            writer.write(obj)
        else:
            torch.save(obj, writer)  # type: ignore[arg-type]
        handle.flush()
        os.fsync(handle.fileno())
    return FileEntry(path=relpath, size=writer.size, sha256=writer.hexdigest())


def hash_file(path: Path) -> tuple[int, str]:
    sha = hashlib.sha256()
    size = 0
    with open(path, "rb") as handle:
        while chunk := handle.read(_HASH_CHUNK):
            sha.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest()


def hash_tree(directory: Path, exclude: Iterable[str] = (MANIFEST_NAME,)) -> list[FileEntry]:
    """Entries for every regular file under ``directory`` (fsyncing each; used after DeepSpeed
    wrote its own files, which it does not fsync)."""
    skipped = set(exclude)
    entries = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        rel = path.relative_to(directory).as_posix()
        if rel in skipped or rel.startswith(f"{INDEX_DIR}/"):
            continue
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
        size, digest = hash_file(path)
        entries.append(FileEntry(path=rel, size=size, sha256=digest))
    return entries


def dcp_rank_entries(step_dir: Path, subdir: str, rank: int) -> list[FileEntry]:
    """Entries for the files this rank wrote in a ``torch.distributed.checkpoint`` directory.

    DCP's ``FileSystemWriter`` names a rank's data files ``__<rank>_<n>.distcp`` (the plan
    prefix ``__{i}_``, torch/distributed/checkpoint/filesystem.py) and the coordinator (rank 0)
    writes ``.metadata``; it fsyncs both (``sync_files=True``). Hashing them on their own rank
    spreads the work; ``complete_entries`` catches any file this naming would miss.
    """
    directory = step_dir / subdir
    paths = sorted(directory.glob(f"__{rank}_*"))
    if rank == 0 and (directory / ".metadata").is_file():
        paths.append(directory / ".metadata")
    entries = []
    for path in paths:
        size, digest = hash_file(path)
        entries.append(
            FileEntry(path=path.relative_to(step_dir).as_posix(), size=size, sha256=digest)
        )
    return entries


def complete_entries(step_dir: Path, entries: list[FileEntry]) -> list[FileEntry]:
    """``entries`` plus an entry for every file under ``step_dir`` that none lists (fsynced and
    hashed here), so a manifest always covers the whole directory."""
    listed = {e.path for e in entries}
    missing = [
        p
        for p in sorted(step_dir.rglob("*"))
        if p.is_file()
        and p.relative_to(step_dir).as_posix() not in listed
        and not p.relative_to(step_dir).as_posix().startswith(f"{INDEX_DIR}/")
        and p.name != MANIFEST_NAME
    ]
    extra = []
    for path in missing:
        with open(path, "rb") as handle:
            os.fsync(handle.fileno())
        size, digest = hash_file(path)
        extra.append(
            FileEntry(path=path.relative_to(step_dir).as_posix(), size=size, sha256=digest)
        )
    return entries + extra


def write_json_durable(path: Path, payload: Any) -> None:
    """Atomically replace ``path`` with ``payload`` as JSON: temp file, fsync, rename, fsync dir."""
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(payload, handle, indent=2, sort_keys=True)
        handle.write("\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def write_rank_index(tmp_dir: Path, rank: int, entries: list[FileEntry]) -> None:
    """Each rank lists the files it wrote; rank 0 merges these into the manifest at commit."""
    index_dir = tmp_dir / INDEX_DIR
    index_dir.mkdir(parents=True, exist_ok=True)
    write_json_durable(index_dir / f"rank_{rank:05d}.json", [asdict(e) for e in entries])


def read_rank_indices(tmp_dir: Path, world_size: int) -> list[FileEntry]:
    entries: list[FileEntry] = []
    for rank in range(world_size):
        path = tmp_dir / INDEX_DIR / f"rank_{rank:05d}.json"
        if not path.is_file():
            raise CheckpointError(f"{tmp_dir.name}: rank {rank} did not finish writing")
        entries.extend(FileEntry(**raw) for raw in json.loads(path.read_text(encoding="utf-8")))
    return entries


def commit(
    root: Path, tmp_dir: Path, step: int, entries: list[FileEntry], meta: dict[str, Any]
) -> Path:
    """Seal ``tmp_dir`` as the checkpoint of ``step`` and point ``LATEST`` at it (rank 0 only)."""
    manifest = {
        **meta,
        "format_version": FORMAT_VERSION,
        "global_step": step,
        "committed_unix": time.time(),
        "files": [asdict(e) for e in entries],
    }
    shutil.rmtree(tmp_dir / INDEX_DIR, ignore_errors=True)
    write_json_durable(tmp_dir / MANIFEST_NAME, manifest)
    fsync_dir(tmp_dir)
    final = root / step_dir_name(step)
    if final.exists():
        # Same step saved again (e.g. a final save right at a resumed step): the old copy goes
        # aside first so that a crash leaves either the old or the new dir, never neither.
        trash = root / f"{TMP_PREFIX}replaced-{final.name}-{os.getpid()}"
        os.rename(final, trash)
        os.rename(tmp_dir, final)
        shutil.rmtree(trash, ignore_errors=True)
    else:
        os.rename(tmp_dir, final)
    fsync_dir(root)
    (root / LATEST_NAME).parent.mkdir(parents=True, exist_ok=True)
    write_text_durable(root / LATEST_NAME, final.name)
    return final


def write_text_durable(path: Path, text: str) -> None:
    tmp = path.with_name(f"{TMP_PREFIX}{path.name}.{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def read_manifest(step_dir: Path) -> dict[str, Any]:
    """Parse a manifest without hashing the files (cheap; for retention and listing)."""
    path = step_dir / MANIFEST_NAME
    if not path.is_file():
        raise CheckpointError(f"{step_dir.name}: no {MANIFEST_NAME} (partial or foreign dir)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{step_dir.name}: unreadable manifest: {exc}") from exc
    if not isinstance(manifest, dict) or manifest.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(f"{step_dir.name}: unknown manifest format")
    return manifest


def verify(step_dir: Path) -> dict[str, Any]:
    """Return the manifest if every listed file matches its size and sha256; else raise."""
    manifest = read_manifest(step_dir)
    if manifest.get("global_step") != parse_step(step_dir.name):
        raise CheckpointError(f"{step_dir.name}: manifest step {manifest.get('global_step')}")
    files = manifest.get("files")
    if not isinstance(files, list) or not files:
        raise CheckpointError(f"{step_dir.name}: manifest lists no files")
    for raw in files:
        entry = FileEntry(**raw)
        path = step_dir / entry.path
        if not path.is_file():
            raise CheckpointError(f"{step_dir.name}: missing {entry.path}")
        # Size first: a torn file is caught without reading it.
        if path.stat().st_size != entry.size:
            raise CheckpointError(f"{step_dir.name}: {entry.path} has the wrong size")
        if hash_file(path)[1] != entry.sha256:
            raise CheckpointError(f"{step_dir.name}: {entry.path} fails its sha256")
    return manifest


def committed_steps(root: Path) -> list[tuple[int, Path]]:
    """Committed-looking step dirs, newest first (not yet verified)."""
    if not root.is_dir():
        return []
    found = [(parse_step(p.name), p) for p in root.iterdir() if p.is_dir()]
    return sorted(((s, p) for s, p in found if s is not None), reverse=True)


def find_latest_valid(
    root: Path, on_skip: Callable[[Path, str], None] | None = None
) -> tuple[Path, dict[str, Any]] | None:
    """The newest checkpoint that verifies, falling back past corrupt or partial ones.

    ``LATEST`` is not trusted for this: it may name a dir that was later corrupted, and a scan
    finds the same answer whenever it is right.
    """
    for _, step_dir in committed_steps(root):
        try:
            return step_dir, verify(step_dir)
        except CheckpointError as exc:
            log.warning("skipping checkpoint: %s", exc)
            if on_skip is not None:
                on_skip(step_dir, str(exc))
    return None


def apply_retention(root: Path, keep_last: int, protected: Iterable[Path] = ()) -> list[Path]:
    """Delete committed checkpoints beyond the newest ``keep_last``, keeping the newest *healthy*
    one (finite loss at save: the last known good) and anything in ``protected`` (e.g. a dir an
    upload is still reading). Also removes stale ``.tmp-`` dirs of steps up to the newest
    commit; a newer one may be a save other ranks have already started (they leave the barrier
    before rank 0 commits the previous save), so it stays. Returns what was deleted.
    Call only from rank 0."""
    if keep_last < 1:
        raise ValueError("keep_last must be >= 1")
    steps = committed_steps(root)
    keep = {p for _, p in steps[:keep_last]} | {Path(p) for p in protected}
    for _, step_dir in steps:
        try:
            if read_manifest(step_dir).get("healthy", False):
                keep.add(step_dir)
                break
        except CheckpointError:
            continue
    removed = []
    for _, step_dir in steps:
        if step_dir not in keep:
            shutil.rmtree(step_dir, ignore_errors=True)
            removed.append(step_dir)
    newest = steps[0][0] if steps else -1
    for stale in root.glob(f"{TMP_PREFIX}{STEP_PREFIX}*"):
        step = parse_step(stale.name[len(TMP_PREFIX) :])
        if step is not None and step > newest:
            continue
        shutil.rmtree(stale, ignore_errors=True)
        removed.append(stale)
    if removed:
        fsync_dir(root)
    return removed


def clone_to_cpu(tree: Any) -> Any:
    """Deep copy of a state tree with every tensor copied to CPU memory.

    This is the only part of an asynchronous save that blocks the training loop: after it, the
    optimizer may overwrite parameters while a thread serialises the snapshot.
    """
    if isinstance(tree, torch.Tensor):
        return tree.detach().to("cpu", copy=True)
    if isinstance(tree, dict):
        return {key: clone_to_cpu(value) for key, value in tree.items()}
    if isinstance(tree, list):
        return [clone_to_cpu(value) for value in tree]
    if isinstance(tree, tuple):
        return tuple(clone_to_cpu(value) for value in tree)
    return tree


class PendingSave:
    """One rank's share of a checkpoint being written, in a thread or inline.

    ``prelude`` runs first in the same thread and returns entries for files written by someone
    else (FSDP: waits for this rank's ``dcp.async_save`` future, then hashes its DCP files).
    """

    def __init__(
        self,
        step: int,
        tmp_dir: Path,
        files: dict[str, Any],
        rank: int,
        background: bool,
        *,
        prelude: Callable[[], list[FileEntry]] | None = None,
    ) -> None:
        self.step = step
        self.tmp_dir = tmp_dir
        self.error: BaseException | None = None
        self._files = files
        self._rank = rank
        self._prelude = prelude
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._run, name=f"ckpt-{step}", daemon=True)
            self._thread.start()
        else:
            self._run()

    def _run(self) -> None:
        try:
            entries = self._prelude() if self._prelude is not None else []
            for name, obj in self._files.items():
                _maybe_inject_kill(self.step, self._rank, self.tmp_dir / name, obj)
                entries.append(save_object(self.tmp_dir, name, obj))
            write_rank_index(self.tmp_dir, self._rank, entries)
        except BaseException as exc:  # noqa: BLE001 - re-raised by wait(): a thread cannot raise
            self.error = exc
        finally:
            self._files = {}  # drop the snapshot as soon as it is on disk
            self._prelude = None

    def done(self) -> bool:
        return self._thread is None or not self._thread.is_alive()

    def wait(self) -> None:
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            raise CheckpointError(
                f"save of step {self.step} failed: {self.error!r}"
            ) from self.error


FAULT_KILL_IN_SAVE_ENV = "GPT_TRAINER_FAULT_KILL_IN_SAVE_STEP"


def _maybe_inject_kill(step: int, rank: int, path: Path, obj: Any) -> None:
    """Test hook: on rank 0 at the given step, write half of a file and SIGKILL this process,
    leaving a torn ``.tmp-`` dir exactly as a node loss in the middle of a save would."""
    if rank != 0 or os.environ.get(FAULT_KILL_IN_SAVE_ENV) != str(step):
        return
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(buffer.getvalue()[: buffer.tell() // 2])
        handle.flush()
        os.fsync(handle.fileno())
    os.kill(os.getpid(), signal.SIGKILL)
