"""S3 against a local moto server on loopback: checkpoint replication (manifest last, then
LATEST; verified round trip; prefixes without a manifest ignored; LATEST never moving back),
token shards prepared to and streamed from a prefix (index last, sha256-checked), and Hugging
Face weights loaded from a prefix."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import numpy as np
import pytest
import torch

from gpt_trainer import checkpoint as ckpt
from gpt_trainer.s3_sync import (
    download_latest_valid,
    parse_s3_uri,
    remote_steps,
    upload_checkpoint,
)

pytestmark = pytest.mark.slow
BUCKET = "ckpts"
URI = f"s3://{BUCKET}/runs/r1"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.create_bucket(Bucket=BUCKET)
    yield client
    objects = client.list_objects_v2(Bucket=BUCKET).get("Contents", [])
    for obj in objects:
        client.delete_object(Bucket=BUCKET, Key=obj["Key"])
    client.delete_bucket(Bucket=BUCKET)


def _commit(root: Path, step: int) -> Path:
    tmp = root / f".tmp-{ckpt.step_dir_name(step)}"
    entries = [
        ckpt.save_object(tmp, "model.pt", {"w": torch.full((64, 64), float(step))}),
        ckpt.save_object(tmp, "nested/rank_00000.pt", {"cursor": step}),
    ]
    return ckpt.commit(root, tmp, step, entries, {"healthy": True, "world_size": 1})


def test_parse_s3_uri() -> None:
    assert parse_s3_uri("s3://b/a/b/") == ("b", "a/b")
    assert parse_s3_uri("s3://b") == ("b", "")
    with pytest.raises(ValueError):
        parse_s3_uri("/local/path")


@pytest.mark.timeout(60)
def test_upload_puts_manifest_last_then_latest(s3: Any, tmp_path: Path) -> None:
    step_dir = _commit(tmp_path, 5)
    written: list[str] = []
    s3.meta.events.register(
        "before-parameter-build.s3.PutObject", lambda params, **_: written.append(params["Key"])
    )
    keys = upload_checkpoint(s3, step_dir, URI)
    assert written == keys
    assert keys[-2:] == ["runs/r1/step_0000000005/manifest.json", "runs/r1/LATEST"]
    assert set(keys[:-2]) == {
        "runs/r1/step_0000000005/model.pt",
        "runs/r1/step_0000000005/nested/rank_00000.pt",
    }


@pytest.mark.timeout(60)
def test_round_trip_restores_a_verified_checkpoint(s3: Any, tmp_path: Path) -> None:
    for step in (5, 10):
        upload_checkpoint(s3, _commit(tmp_path / "src", step), URI)
    restored = download_latest_valid(s3, URI, tmp_path / "dst")
    assert restored == tmp_path / "dst" / "step_0000000010"
    manifest = ckpt.verify(restored)
    assert manifest["global_step"] == 10
    assert torch.equal(
        torch.load(restored / "model.pt", weights_only=True)["w"], torch.full((64, 64), 10.0)
    )
    latest = s3.get_object(Bucket=BUCKET, Key="runs/r1/LATEST")["Body"].read().decode().strip()
    assert latest == "step_0000000010"


@pytest.mark.timeout(60)
def test_prefix_without_manifest_is_ignored_and_corrupt_remote_falls_back(
    s3: Any, tmp_path: Path
) -> None:
    upload_checkpoint(s3, _commit(tmp_path / "src", 5), URI)
    upload_checkpoint(s3, _commit(tmp_path / "src", 10), URI)
    # An upload that died before its manifest: newer, but must not be trusted.
    s3.put_object(Bucket=BUCKET, Key="runs/r1/step_0000000015/model.pt", Body=b"partial")
    # A complete-looking step whose data no longer matches its manifest.
    s3.put_object(Bucket=BUCKET, Key="runs/r1/step_0000000010/model.pt", Body=b"bit rot")
    assert remote_steps(s3, URI) == ["step_0000000010", "step_0000000005"]
    restored = download_latest_valid(s3, URI, tmp_path / "dst")
    assert restored is not None and restored.name == "step_0000000005"
    assert not (tmp_path / "dst" / "step_0000000010").exists()


@pytest.mark.timeout(60)
def test_latest_never_moves_backwards(s3: Any, tmp_path: Path) -> None:
    upload_checkpoint(s3, _commit(tmp_path / "a", 10), URI)
    upload_checkpoint(s3, _commit(tmp_path / "b", 5), URI)  # a late, older writer
    latest = s3.get_object(Bucket=BUCKET, Key="runs/r1/LATEST")["Body"].read().decode().strip()
    assert latest == "step_0000000010"


@pytest.mark.timeout(60)
def test_token_shards_stream_from_s3_verified_with_index_last(
    s3: Any, s3_endpoint: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpt_trainer.prep_data import prepare
    from gpt_trainer.shards import TokenShards
    from trainer_harness import write_corpus

    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", s3_endpoint)
    real_client = boto3.client
    # The prep command's own client, with the write recorder below attached.
    monkeypatch.setattr(
        boto3, "client", lambda *a, **kw: s3 if a == ("s3",) else real_client(*a, **kw)
    )
    written: list[str] = []
    s3.meta.events.register(
        "before-parameter-build.s3.PutObject", lambda params, **_: written.append(params["Key"])
    )
    corpus = write_corpus(tmp_path / "corpus", documents=60)
    local = prepare([corpus], str(tmp_path / "local"), vocab_size=300, shard_tokens=1000)
    uri = f"s3://{BUCKET}/data/v1"
    prepare([corpus], uri, tokenizer_path=tmp_path / "local" / "tokenizer.json", shard_tokens=1000)
    keys = [k["Key"] for k in s3.list_objects_v2(Bucket=BUCKET)["Contents"]]
    assert "data/v1/index.json" in keys and len(keys) == len(local["shards"]) + 2
    assert written[-1] == "data/v1/index.json"  # readers trust only a prefix with an index
    monkeypatch.setattr(boto3, "client", real_client)

    streamed = TokenShards(uri, 16, cache_dir=tmp_path / "cache", prefetch_shards=2)
    reference = TokenShards(tmp_path / "local", 16)
    assert len(streamed) == len(reference)
    order = streamed.epoch_order(seed=1, epoch=0)
    assert np.array_equal(order, reference.epoch_order(seed=1, epoch=0))
    for i in order[:40]:
        assert torch.equal(streamed[int(i)], reference[int(i)])
    streamed.close()
    cached = list((tmp_path / "cache").rglob("shard_*.bin"))
    assert cached and not list((tmp_path / "cache").rglob(".tmp-*"))

    # A shard that no longer matches the index is refused, not trained on.
    s3.put_object(Bucket=BUCKET, Key="data/v1/shard_00000.bin", Body=b"\x00\x01" * 1000)
    fresh = TokenShards(uri, 16, cache_dir=tmp_path / "cache2", prefetch_shards=0)
    with pytest.raises(OSError, match="sha256"):
        fresh[0]


@pytest.mark.timeout(60)
def test_hf_model_prefix_downloads_once_then_loads(
    s3: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpt_trainer import models
    from gpt_trainer.hf_models import download_prefix

    torch.manual_seed(0)
    source = models.build("hf:llama-tiny")
    source.module.lm.save_pretrained(tmp_path / "weights")
    for path in sorted((tmp_path / "weights").iterdir()):
        s3.upload_file(str(path), BUCKET, f"models/tiny/{path.name}")
    local = download_prefix(s3, f"s3://{BUCKET}/models/tiny", tmp_path / "cache" / "m")
    assert (local / "config.json").is_file() and (local / ".complete").is_file()
    loaded = models.build("hf:s3://unused", local_dir=local)
    assert loaded.module.state_dict().keys() == source.module.state_dict().keys() != set()
    for key, value in loaded.module.state_dict().items():
        assert torch.equal(value, source.module.state_dict()[key]), key
    s3.delete_object(Bucket=BUCKET, Key="models/tiny/config.json")
    assert download_prefix(s3, f"s3://{BUCKET}/models/tiny", local) == local  # cached copy
    with pytest.raises(FileNotFoundError):
        download_prefix(s3, f"s3://{BUCKET}/models/none", tmp_path / "cache" / "n")
