"""Data prep and token shards, in-process: the shards hold exactly the tokenized corpus with an
end-of-text after each document; samples are cut at the right offsets; the epoch order is a
deterministic shard-blocked permutation; and a loader rebuilt from a saved cursor continues with
exactly the next unseen samples, per rank, across epochs."""

from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from gpt_trainer.data import BatchLoader, DataCursor, advance
from gpt_trainer.prep_data import EOS, iter_documents, prepare
from gpt_trainer.shards import TokenShards, token_dtype
from trainer_harness import write_corpus

SEQ = 16


def test_shards_are_the_tokenized_corpus_with_eos_between_documents(token_data: Path) -> None:
    from tokenizers import Tokenizer

    index = json.loads((token_data / "index.json").read_text())
    assert index["format"] == "gpt-trainer-token-shards" and index["dtype"] == "uint16"
    tokenizer = Tokenizer.from_file(str(token_data / "tokenizer.json"))
    assert tokenizer.get_vocab_size() == index["vocab_size"] <= 512
    assert index["eos_id"] == tokenizer.token_to_id(EOS)
    parts = []
    for shard in index["shards"]:
        raw = (token_data / shard["file"]).read_bytes()
        assert hashlib.sha256(raw).hexdigest() == shard["sha256"]
        assert len(raw) == 2 * shard["num_tokens"]
        parts.append(np.frombuffer(raw, dtype=np.uint16))
    assert [s["num_tokens"] for s in index["shards"][:-1]] == [3000] * (len(parts) - 1)
    stream = np.concatenate(parts)
    assert stream.size == index["num_tokens"]
    # Split at EOS, decode: byte-level BPE gives back every document exactly.
    documents = list(iter_documents([Path(index["inputs"][0])]))
    cuts = np.flatnonzero(stream == index["eos_id"])
    assert len(cuts) == len(documents) and cuts[-1] == stream.size - 1
    starts = [0, *(cuts[:-1] + 1)]
    decoded = [tokenizer.decode(stream[a:b].tolist()) for a, b in zip(starts, cuts, strict=True)]
    assert decoded == documents


def test_samples_are_cut_at_training_time(token_data: Path) -> None:
    shards = TokenShards(token_data, SEQ)
    index = shards.index
    assert len(shards) == sum((s.num_tokens - 1) // SEQ for s in index.shards)
    second = np.fromfile(token_data / index.shards[1].file, dtype=np.uint16)
    first_count = (index.shards[0].num_tokens - 1) // SEQ
    assert shards.locate(first_count + 2) == (1, 2)
    sample = shards[first_count + 2]
    assert sample.dtype == torch.int64 and sample.shape == (SEQ + 1,)
    assert sample.tolist() == second[2 * SEQ : 3 * SEQ + 1].tolist()
    with pytest.raises(IndexError):
        shards[len(shards)]
    assert len(TokenShards(token_data, 64)) < len(shards)  # one tokenization, any seq_len


def test_epoch_order_is_a_deterministic_shard_blocked_permutation(token_data: Path) -> None:
    shards = TokenShards(token_data, SEQ)
    order = shards.epoch_order(seed=5, epoch=0)
    assert sorted(order.tolist()) == list(range(len(shards)))
    assert np.array_equal(order, TokenShards(token_data, SEQ).epoch_order(seed=5, epoch=0))
    assert not np.array_equal(order, shards.epoch_order(seed=5, epoch=1))
    # Blocked: one run per shard, so streaming reads one shard at a time.
    runs = [shards.locate(int(i))[0] for i in order]
    changes = sum(1 for a, b in itertools.pairwise(runs) if a != b)
    assert changes == len(shards.index.shards) - 1


@pytest.mark.parametrize("world", [1, 2])
def test_cursor_resume_continues_with_exactly_the_next_unseen_samples(
    token_data: Path, world: int
) -> None:
    micro, seed, total = 3, 11, 0

    def loaders() -> list[BatchLoader]:
        dataset = TokenShards(token_data, SEQ)  # a fresh open, as after a restart
        return [
            BatchLoader(dataset, seed=seed, rank=r, world_size=world, micro_batch=micro)
            for r in range(world)
        ]

    per_epoch = loaders()[0].per_epoch
    total = per_epoch + per_epoch // 2 + 3  # crosses an epoch boundary after the resume

    def run(start: DataCursor, steps: int, ranks: list[BatchLoader]) -> tuple[list, DataCursor]:
        seen, cursor = [], start
        for _ in range(steps):
            seen.append([ranks[r].indices(cursor) for r in range(world)])
            cursor = advance(cursor, per_epoch)
        return seen, cursor

    straight, _ = run(DataCursor(), total, loaders())
    stop = per_epoch // 2 + 1
    before, saved = run(DataCursor(), stop, loaders())
    restored = DataCursor.from_dict(json.loads(json.dumps(saved.to_dict())))  # via a checkpoint
    after, _ = run(restored, total - stop, loaders())
    assert before + after == straight
    first_epoch = [i for step in straight[:per_epoch] for rank in step for i in rank]
    assert len(first_epoch) == len(set(first_epoch)) == per_epoch * world * micro
    # The tensors match the indices (the loader reads what the cursor names).
    ranks = loaders()
    inputs, targets = ranks[0].batch(restored)
    rows = torch.stack([ranks[0].dataset[i] for i in ranks[0].indices(restored)])
    assert torch.equal(inputs, rows[:, :-1]) and torch.equal(targets, rows[:, 1:])


def test_prepared_data_is_immutable_and_an_existing_tokenizer_is_reused(
    tmp_path: Path, token_data: Path
) -> None:
    corpus = write_corpus(tmp_path / "corpus", documents=20, seed=1)
    with pytest.raises(FileExistsError):
        prepare([corpus], str(token_data))
    index = prepare([corpus], str(tmp_path / "out"), tokenizer_path=token_data / "tokenizer.json")
    assert (tmp_path / "out" / "tokenizer.json").read_bytes() == (
        token_data / "tokenizer.json"
    ).read_bytes()
    assert index["vocab_size"] == json.loads((token_data / "index.json").read_text())["vocab_size"]
    assert token_dtype(65_536) == np.uint16 and token_dtype(65_537) == np.uint32
    with pytest.raises(FileNotFoundError):
        TokenShards(tmp_path / "corpus", SEQ)  # no index: not prepared data
