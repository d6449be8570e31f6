"""Tokenized data as memory-mapped token shards with an index, in a directory or an S3 prefix.

Layout (written by ``python -m gpt_trainer.prep_data``)::

    index.json              written last: dtype, vocab_size, eos_id, shards (file, tokens, sha256)
    tokenizer.json          the HF ``tokenizers`` tokenizer that produced the ids
    shard_00000.bin ...     raw little-endian token ids (uint16 below 65 536 tokens, else uint32)

Like a checkpoint, a prefix without ``index.json`` is an unfinished write and is not read.

Samples are cut at training time, so one tokenization serves every ``seq_len``: shard ``k`` of
``n`` tokens holds ``(n - 1) // seq_len`` samples, sample ``j`` being tokens
``[j * seq_len, (j + 1) * seq_len]`` (``seq_len + 1`` ids: inputs plus the shifted targets).

Order: ``epoch_order`` permutes the shards, then the samples inside each shard, both from
``(seed, epoch)``: a pure function, so the trainer's cursor arithmetic resumes exactly, and
consecutive global batches read one shard at a time, which is what lets an S3-backed dataset
stream: a shard is downloaded (and checked against its sha256) when first touched, and the next
shards of the epoch's order are prefetched in the background.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import logging
import os
import threading
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

log = logging.getLogger(__name__)

INDEX_NAME = "index.json"
TOKENIZER_NAME = "tokenizer.json"
FORMAT = "gpt-trainer-token-shards"
FORMAT_VERSION = 1


def token_dtype(vocab_size: int) -> np.dtype[Any]:
    """The narrowest unsigned dtype that holds every id (halves the bytes for < 65 536 tokens)."""
    return np.dtype(np.uint16 if vocab_size <= 1 << 16 else np.uint32)


@dataclass(frozen=True)
class ShardInfo:
    file: str
    num_tokens: int
    sha256: str


@dataclass(frozen=True)
class ShardIndex:
    """The parsed ``index.json``."""

    dtype: np.dtype[Any]
    vocab_size: int
    eos_id: int
    shards: tuple[ShardInfo, ...]
    tokenizer: str | None
    raw: dict[str, Any]

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> ShardIndex:
        if raw.get("format") != FORMAT or raw.get("version") != FORMAT_VERSION:
            raise ValueError(f"not a {FORMAT} v{FORMAT_VERSION} index")
        shards = tuple(ShardInfo(**s) for s in raw["shards"])
        if not shards:
            raise ValueError("index lists no shards")
        return cls(
            dtype=np.dtype(raw["dtype"]),
            vocab_size=int(raw["vocab_size"]),
            eos_id=int(raw["eos_id"]),
            shards=shards,
            tokenizer=raw.get("tokenizer"),
            raw=raw,
        )

    def digest(self) -> str:
        """Identity of the dataset (recorded in checkpoints)."""
        return hashlib.sha256(json.dumps(self.raw, sort_keys=True).encode()).hexdigest()


def write_shard(directory: Path, name: str, tokens: np.ndarray) -> ShardInfo:
    """Write one shard durably and return its index entry."""
    path = directory / name
    tmp = path.with_name(f".tmp-{name}")
    data = np.ascontiguousarray(tokens).tobytes()
    with open(tmp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)
    return ShardInfo(
        file=name, num_tokens=int(tokens.size), sha256=hashlib.sha256(data).hexdigest()
    )


def sha256_file(path: Path) -> str:
    sha = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(8 << 20):
            sha.update(chunk)
    return sha.hexdigest()


class _S3Source:
    """Fetches files of an S3 prefix into a local cache dir, verified, atomically renamed."""

    def __init__(self, uri: str, cache_dir: Path) -> None:
        import boto3

        from .s3_sync import parse_s3_uri

        self.bucket, self.prefix = parse_s3_uri(uri)
        self.client = boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3"))
        self.cache_dir = cache_dir
        cache_dir.mkdir(parents=True, exist_ok=True)

    def fetch(self, name: str, sha256: str | None = None) -> Path:
        target = self.cache_dir / name
        if target.is_file():
            return target
        key = f"{self.prefix}/{name}" if self.prefix else name
        # Unique temp name: ranks of one node share the cache and may fetch the same file.
        tmp = target.with_name(f".tmp-{name}.{os.getpid()}.{threading.get_ident()}")
        self.client.download_file(self.bucket, key, str(tmp))
        if sha256 is not None and sha256_file(tmp) != sha256:
            tmp.unlink(missing_ok=True)
            raise OSError(f"s3://{self.bucket}/{key} does not match its index sha256")
        os.replace(tmp, target)
        return target


DEFAULT_CACHE_DIR = Path("/tmp/gpt-trainer-cache")


def open_source(
    source: str, cache_dir: Path | None = None
) -> tuple[ShardIndex, Path, _S3Source | None]:
    """Parse the index of a directory or S3 prefix: (index, local root, S3 source or None)."""
    remote: _S3Source | None = None
    if source.startswith("s3://"):
        digest = hashlib.sha256(source.encode()).hexdigest()[:16]
        root = (cache_dir or DEFAULT_CACHE_DIR) / "data" / digest
        remote = _S3Source(source, root)
        index_path = remote.fetch(INDEX_NAME)
    else:
        root = Path(source)
        index_path = root / INDEX_NAME
        if not index_path.is_file():
            raise FileNotFoundError(f"{index_path}: no index (data-prep unfinished?)")
    return ShardIndex.parse(json.loads(index_path.read_text(encoding="utf-8"))), root, remote


class TokenShards:
    """The trainer's dataset over token shards: ``len``, ``__getitem__`` and ``epoch_order``.

    ``source`` is a directory or ``s3://bucket/prefix``; S3 shards land in ``cache_dir``.
    ``verify`` checks every local shard's sha256 at open (S3 shards are always checked as they
    arrive); off by default because it reads the whole dataset once per rank.
    """

    def __init__(
        self,
        source: str | Path,
        seq_len: int,
        cache_dir: Path | None = None,
        prefetch_shards: int = 2,
        verify: bool = False,
    ) -> None:
        self.seq_len = seq_len
        self.source = str(source)
        self.index, self.root, self._remote = open_source(self.source, cache_dir)
        self.vocab_size = self.index.vocab_size
        self.samples_per_shard = [max(0, (s.num_tokens - 1) // seq_len) for s in self.index.shards]
        self._starts = np.concatenate(([0], np.cumsum(self.samples_per_shard))).tolist()
        if self._starts[-1] == 0:
            raise ValueError(f"{self.source}: no shard holds a sample of {seq_len + 1} tokens")
        self._maps: dict[int, np.ndarray] = {}
        self._lock = threading.Lock()
        self._prefetch_shards = prefetch_shards
        self._pending: dict[int, Future[Path]] = {}
        self._pool = ThreadPoolExecutor(1, "shard-prefetch") if self._remote else None
        self._shard_order: list[int] = []
        if verify and self._remote is None:
            for info in self.index.shards:
                if sha256_file(self.root / info.file) != info.sha256:
                    raise ValueError(f"{info.file} does not match its index sha256")

    def __len__(self) -> int:
        return int(self._starts[-1])

    def tokenizer_path(self) -> Path | None:
        if self.index.tokenizer is None:
            return None
        if self._remote is not None:
            return self._remote.fetch(self.index.tokenizer)
        path = self.root / self.index.tokenizer
        return path if path.is_file() else None

    def locate(self, index: int) -> tuple[int, int]:
        """(shard, sample within the shard) of a global sample index."""
        if not 0 <= index < len(self):
            raise IndexError(index)
        shard = bisect.bisect_right(self._starts, index) - 1
        return shard, index - int(self._starts[shard])

    def __getitem__(self, index: int) -> torch.Tensor:
        shard, local = self.locate(index)
        tokens = self._shard(shard)
        start = local * self.seq_len
        window = tokens[start : start + self.seq_len + 1]
        return torch.from_numpy(window.astype(np.int64))

    def epoch_order(self, seed: int, epoch: int) -> np.ndarray:
        """Shard order, then sample order within each shard, from ``(seed, epoch)`` alone."""
        rng = np.random.default_rng([seed, epoch])
        shard_order = rng.permutation(len(self.samples_per_shard))
        parts = []
        for shard in shard_order:
            count = self.samples_per_shard[shard]
            if count:
                inner = np.random.default_rng([seed, epoch, int(shard)]).permutation(count)
                parts.append(inner + self._starts[shard])
        self._shard_order = [int(s) for s in shard_order if self.samples_per_shard[s]]
        return np.concatenate(parts)

    # ------------------------------------------------------------------ shard access

    def _shard(self, shard: int) -> np.ndarray:
        tokens = self._maps.get(shard)
        if tokens is not None:
            return tokens
        with self._lock:
            tokens = self._maps.get(shard)
            if tokens is None:
                path = self._local_path(shard)
                tokens = np.memmap(path, dtype=self.index.dtype, mode="r")
                if tokens.size != self.index.shards[shard].num_tokens:
                    raise ValueError(f"{path}: {tokens.size} tokens, index says otherwise")
                self._maps[shard] = tokens
        self._prefetch_after(shard)
        return tokens

    def _local_path(self, shard: int) -> Path:
        info = self.index.shards[shard]
        if self._remote is None:
            return self.root / info.file
        pending = self._pending.pop(shard, None)
        if pending is not None:
            return pending.result()
        return self._remote.fetch(info.file, info.sha256)

    def _prefetch_after(self, shard: int) -> None:
        """Start downloading the shards that follow ``shard`` in the current epoch's order."""
        if self._pool is None or not self._shard_order or shard not in self._shard_order:
            return
        position = self._shard_order.index(shard)
        for upcoming in self._shard_order[position + 1 : position + 1 + self._prefetch_shards]:
            if upcoming in self._maps or upcoming in self._pending:
                continue
            info = self.index.shards[upcoming]
            assert self._remote is not None
            self._pending[upcoming] = self._pool.submit(self._remote.fetch, info.file, info.sha256)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)


def write_index(
    directory: Path,
    shards: Iterable[ShardInfo],
    *,
    vocab_size: int,
    eos_id: int,
    tokenizer: str | None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Write ``index.json`` durably (last: it is the commit marker) and return it."""
    from .checkpoint import write_json_durable

    shard_list = list(shards)
    raw = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "dtype": token_dtype(vocab_size).name,
        "vocab_size": vocab_size,
        "eos_id": eos_id,
        "tokenizer": tokenizer,
        "num_tokens": sum(s.num_tokens for s in shard_list),
        "shards": [vars(s) for s in shard_list],
        **(extra or {}),
    }
    write_json_durable(directory / INDEX_NAME, raw)
    return raw
