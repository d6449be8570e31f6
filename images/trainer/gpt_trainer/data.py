"""Deterministic sharded data: a synthetic token dataset and the resumable data cursor.

Exact resume needs the input order to be a pure function of (seed, epoch, position), never of
ambient RNG or of how many batches an iterator has produced. So the cursor is plain index
arithmetic: epoch ``e`` has an order of all sample indices drawn from ``(seed, e)`` (a plain
permutation from ``seed + e``, or the dataset's own ``epoch_order(seed, e)``, e.g. shard-blocked
for streaming, see shards.py); global batch ``b`` is ``order[b*G:(b+1)*G]`` with
``G = world_size * micro_batch``; rank ``r`` takes ``global_batch[r::world_size]``. A checkpoint
stores only ``(epoch, batch)``, and the batch after a resume is exactly the first one not trained.

Real datasets plug in through ``--data DIR|s3://...`` (token shards) or ``--dataset-factory
module:callable`` returning any object with ``__len__`` and ``__getitem__(index) ->
LongTensor[seq_len + 1]`` that is deterministic per index (``epoch_order`` optional).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch


class TokenDataset(Protocol):
    """What the trainer needs from a dataset: a length and a deterministic item per index."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> torch.Tensor: ...


class SyntheticTokens:
    """Learnable synthetic sequences: an arithmetic progression mod vocab with sparse noise.

    Each sample's randomness comes from ``(seed, index)`` alone, so any rank can materialise any
    sample at any time; there is no file to shard or download.
    """

    def __init__(self, num_samples: int, seq_len: int, vocab_size: int, seed: int) -> None:
        self.num_samples = num_samples
        self.seq_len = seq_len
        self.vocab_size = vocab_size
        self.seed = seed

    def __len__(self) -> int:
        return self.num_samples

    def __getitem__(self, index: int) -> torch.Tensor:
        if not 0 <= index < self.num_samples:
            raise IndexError(index)
        rng = np.random.default_rng([self.seed, index])
        start, stride = rng.integers(0, self.vocab_size, size=2)
        positions = np.arange(self.seq_len + 1)
        tokens = (start + (stride | 1) * positions) % self.vocab_size
        noise = rng.random(self.seq_len + 1) < 0.05
        tokens[noise] = rng.integers(0, self.vocab_size, size=int(noise.sum()))
        return torch.from_numpy(tokens.astype(np.int64))


@dataclass(frozen=True)
class DataCursor:
    """Position of the *next* global batch: ``batch`` counts within ``epoch``."""

    epoch: int = 0
    batch: int = 0

    def to_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "batch": self.batch}

    @classmethod
    def from_dict(cls, raw: dict[str, int]) -> DataCursor:
        return cls(epoch=int(raw["epoch"]), batch=int(raw["batch"]))


def batches_per_epoch(num_samples: int, world_size: int, micro_batch: int) -> int:
    """Full global batches per epoch; the ragged tail is dropped so every rank stays in step."""
    global_batch = world_size * micro_batch
    count = num_samples // global_batch
    if count == 0:
        raise ValueError(
            f"dataset of {num_samples} samples is smaller than one global batch ({global_batch})"
        )
    return count


def advance(cursor: DataCursor, per_epoch: int, batches: int = 1) -> DataCursor:
    """The cursor ``batches`` global batches later, rolling over epochs."""
    flat = cursor.epoch * per_epoch + cursor.batch + batches
    return DataCursor(epoch=flat // per_epoch, batch=flat % per_epoch)


def cursor_at_step(global_step: int, per_epoch: int) -> DataCursor:
    """The cursor after ``global_step`` optimizer steps from the start (one batch per step)."""
    return advance(DataCursor(), per_epoch, global_step)


def epoch_permutation(num_samples: int, seed: int, epoch: int) -> np.ndarray:
    return np.random.default_rng(seed + epoch).permutation(num_samples)


def rank_indices(
    cursor: DataCursor,
    *,
    num_samples: int,
    seed: int,
    rank: int,
    world_size: int,
    micro_batch: int,
    order: np.ndarray | None = None,
) -> list[int]:
    """Sample indices rank ``rank`` trains on at ``cursor`` (``order``: the epoch's order, if
    the caller has it already; else the plain permutation)."""
    per_epoch = batches_per_epoch(num_samples, world_size, micro_batch)
    if not 0 <= cursor.batch < per_epoch:
        raise ValueError(f"cursor batch {cursor.batch} outside epoch of {per_epoch} batches")
    global_batch = world_size * micro_batch
    perm = epoch_permutation(num_samples, seed, cursor.epoch) if order is None else order
    window = perm[cursor.batch * global_batch : (cursor.batch + 1) * global_batch]
    return [int(i) for i in window[rank::world_size]]


def collate(dataset: TokenDataset, indices: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack samples into (inputs, next-token targets)."""
    rows = torch.stack([dataset[i] for i in indices])
    return rows[:, :-1].contiguous(), rows[:, 1:].contiguous()


class BatchLoader:
    """One rank's batches by cursor: the epoch order is computed once per epoch, not per step
    (a permutation of the whole dataset costs milliseconds per million samples)."""

    def __init__(
        self, dataset: TokenDataset, *, seed: int, rank: int, world_size: int, micro_batch: int
    ) -> None:
        self.dataset = dataset
        self.seed = seed
        self.rank = rank
        self.world_size = world_size
        self.micro_batch = micro_batch
        self.num_samples = len(dataset)
        self.per_epoch = batches_per_epoch(self.num_samples, world_size, micro_batch)
        self._order_epoch = -1
        self._order: np.ndarray | None = None

    def order(self, epoch: int) -> np.ndarray:
        if epoch != self._order_epoch or self._order is None:
            custom = getattr(self.dataset, "epoch_order", None)
            order = (
                np.asarray(custom(self.seed, epoch))
                if custom is not None
                else epoch_permutation(self.num_samples, self.seed, epoch)
            )
            if order.shape != (self.num_samples,):
                raise ValueError(f"epoch_order returned {order.shape}, not ({self.num_samples},)")
            self._order, self._order_epoch = order, epoch
        return self._order

    def indices(self, cursor: DataCursor) -> list[int]:
        return rank_indices(
            cursor,
            num_samples=self.num_samples,
            seed=self.seed,
            rank=self.rank,
            world_size=self.world_size,
            micro_batch=self.micro_batch,
            order=self.order(cursor.epoch),
        )

    def batch(self, cursor: DataCursor) -> tuple[torch.Tensor, torch.Tensor]:
        return collate(self.dataset, self.indices(cursor))
