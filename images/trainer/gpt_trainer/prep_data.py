"""Data prep: tokenize a local text corpus into memory-mapped token shards (see shards.py).

    python -m gpt_trainer.prep_data --input corpus/ --out /fsx/data/corpus-v1 [--vocab-size 8192]
    python -m gpt_trainer.prep_data --input corpus/ --out s3://bucket/data/corpus-v1

Input: ``.txt`` files (one document each) and ``.jsonl`` files (one document per line, text in
``--text-field``), found recursively in sorted order. The tokenizer is trained offline on the
same corpus (byte-level BPE with HF ``tokenizers``: every byte is in the alphabet, so no input
is ever out of vocabulary), or an existing ``tokenizer.json`` is used with ``--tokenizer``.
Documents are joined with an end-of-text token and cut into shards of ``--shard-tokens`` ids.
Output: shards, ``tokenizer.json``, then ``index.json`` last; to S3 in the same order (index
last), staged in a local temp dir first.
"""

from __future__ import annotations

import argparse
import json
import logging
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from .shards import INDEX_NAME, TOKENIZER_NAME, ShardInfo, token_dtype, write_index, write_shard

log = logging.getLogger("gpt_trainer.prep_data")

EOS = "<|endoftext|>"
_BATCH_DOCS = 256


def iter_documents(inputs: list[Path], text_field: str = "text") -> Iterator[str]:
    """Every document of the corpus, in a deterministic order (sorted paths)."""
    files: list[Path] = []
    for item in inputs:
        if item.is_dir():
            files.extend(p for p in sorted(item.rglob("*")) if p.suffix in (".txt", ".jsonl"))
        else:
            files.append(item)
    if not files:
        raise FileNotFoundError(f"no .txt or .jsonl files in {[str(i) for i in inputs]}")
    for path in files:
        if path.suffix == ".jsonl":
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    if line.strip():
                        text = json.loads(line)[text_field]
                        if text:
                            yield str(text)
        else:
            text = path.read_text(encoding="utf-8")
            if text:
                yield text


def train_tokenizer(documents: Iterator[str], vocab_size: int) -> Any:
    """A byte-level BPE tokenizer trained on ``documents`` (GPT-2 style pre-tokenization)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(documents, trainer=trainer)
    return tokenizer


def _batches(documents: Iterator[str], size: int) -> Iterator[list[str]]:
    batch: list[str] = []
    for doc in documents:
        batch.append(doc)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def tokenize_to_shards(
    documents: Iterator[str], tokenizer: Any, out_dir: Path, shard_tokens: int
) -> tuple[list[ShardInfo], int]:
    """Encode, append EOS after each document, cut into shards; returns (shards, eos id)."""
    eos_id = tokenizer.token_to_id(EOS)
    if eos_id is None:
        raise ValueError(f"tokenizer has no {EOS} token")
    dtype = token_dtype(tokenizer.get_vocab_size())
    shards: list[ShardInfo] = []
    buffer = np.empty(shard_tokens, dtype=dtype)
    filled = 0

    def flush(count: int) -> None:
        shards.append(write_shard(out_dir, f"shard_{len(shards):05d}.bin", buffer[:count]))

    for batch in _batches(documents, _BATCH_DOCS):
        for encoding in tokenizer.encode_batch(batch):
            ids = np.asarray([*encoding.ids, eos_id], dtype=dtype)
            while ids.size:
                take = min(ids.size, shard_tokens - filled)
                buffer[filled : filled + take] = ids[:take]
                filled += take
                ids = ids[take:]
                if filled == shard_tokens:
                    flush(filled)
                    filled = 0
    if filled:
        flush(filled)
    return shards, int(eos_id)


def prepare(
    inputs: list[Path],
    out: str,
    *,
    vocab_size: int = 8192,
    shard_tokens: int = 50_000_000,
    tokenizer_path: Path | None = None,
    text_field: str = "text",
) -> dict[str, Any]:
    """Run the whole prep; returns the index written."""
    from tokenizers import Tokenizer

    started = time.perf_counter()
    remote = out.startswith("s3://")
    out_dir = Path(tempfile.mkdtemp(prefix="gpt-trainer-prep-")) if remote else Path(out)
    out_dir.mkdir(parents=True, exist_ok=True)
    if (out_dir / INDEX_NAME).exists():
        raise FileExistsError(f"{out_dir / INDEX_NAME} exists: prepared data is immutable")
    try:
        if tokenizer_path is not None:
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
        else:
            tokenizer = train_tokenizer(iter_documents(inputs, text_field), vocab_size)
        tokenizer.save(str(out_dir / TOKENIZER_NAME))
        shards, eos_id = tokenize_to_shards(
            iter_documents(inputs, text_field), tokenizer, out_dir, shard_tokens
        )
        index = write_index(
            out_dir,
            shards,
            vocab_size=tokenizer.get_vocab_size(),
            eos_id=eos_id,
            tokenizer=TOKENIZER_NAME,
            extra={"created_unix": time.time(), "inputs": [str(p) for p in inputs]},
        )
        if remote:
            upload_dataset(out_dir, out, index)
    finally:
        if remote:
            shutil.rmtree(out_dir, ignore_errors=True)
    log.info(
        "%d tokens in %d shards, vocabulary %d, %.1f s",
        index["num_tokens"],
        len(index["shards"]),
        index["vocab_size"],
        time.perf_counter() - started,
    )
    return index


def upload_dataset(local_dir: Path, uri: str, index: dict[str, Any]) -> list[str]:
    """Shards and tokenizer first, ``index.json`` last (readers trust only a prefix with one)."""
    import os

    import boto3

    from .s3_sync import parse_s3_uri

    client = boto3.client("s3", endpoint_url=os.environ.get("AWS_ENDPOINT_URL_S3"))
    bucket, prefix = parse_s3_uri(uri)
    names = [s["file"] for s in index["shards"]] + [TOKENIZER_NAME, INDEX_NAME]
    keys = []
    for name in names:
        key = f"{prefix}/{name}" if prefix else name
        client.upload_file(str(local_dir / name), bucket, key)
        keys.append(key)
    return keys


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    p = argparse.ArgumentParser(prog="gpt_trainer.prep_data", description=__doc__.splitlines()[0])
    p.add_argument("--input", type=Path, nargs="+", required=True, help="files or directories")
    p.add_argument("--out", required=True, help="output directory or s3://bucket/prefix")
    p.add_argument("--vocab-size", type=int, default=8192, help="BPE vocabulary to train")
    p.add_argument("--tokenizer", type=Path, help="use this tokenizer.json instead of training")
    p.add_argument("--shard-tokens", type=int, default=50_000_000, help="ids per shard")
    p.add_argument("--text-field", default="text", help="field of a .jsonl document")
    args = p.parse_args(argv)
    index = prepare(
        args.input,
        args.out,
        vocab_size=args.vocab_size,
        shard_tokens=args.shard_tokens,
        tokenizer_path=args.tokenizer,
        text_field=args.text_field,
    )
    print(json.dumps({k: index[k] for k in ("num_tokens", "vocab_size", "dtype")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
