"""Commit protocol, manifest verification, fallback past corrupt/partial checkpoints, retention
and the async snapshot (fast, in-process)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from gpt_trainer import checkpoint as ckpt


def _commit(root: Path, step: int, healthy: bool = True, size: int = 16) -> Path:
    tmp = root / f"{ckpt.TMP_PREFIX}{ckpt.step_dir_name(step)}"
    pending = ckpt.PendingSave(
        step, tmp, {"model.pt": {"w": torch.full((size,), float(step))}}, rank=0, background=False
    )
    pending.wait()
    entries = ckpt.read_rank_indices(tmp, world_size=1)
    return ckpt.commit(root, tmp, step, entries, {"healthy": healthy, "world_size": 1})


def test_commit_seals_dir_with_manifest_and_points_latest(tmp_path: Path) -> None:
    step_dir = _commit(tmp_path, 3)
    assert step_dir.name == "step_0000000003"
    assert not list(tmp_path.glob(".tmp-*"))
    assert (tmp_path / "LATEST").read_text().strip() == step_dir.name
    manifest = ckpt.verify(step_dir)
    assert manifest["global_step"] == 3 and manifest["world_size"] == 1
    [entry] = manifest["files"]
    assert (entry["path"], entry["size"]) == ("model.pt", (step_dir / "model.pt").stat().st_size)
    assert ckpt.hash_file(step_dir / "model.pt")[1] == entry["sha256"]
    assert not (step_dir / ckpt.INDEX_DIR).exists()


def test_flipped_byte_fails_sha256(tmp_path: Path) -> None:
    step_dir = _commit(tmp_path, 1)
    data = bytearray((step_dir / "model.pt").read_bytes())
    data[-30] ^= 1
    (step_dir / "model.pt").write_bytes(bytes(data))
    with pytest.raises(ckpt.CheckpointError, match="sha256"):
        ckpt.verify(step_dir)


def test_truncated_file_fails_on_size(tmp_path: Path) -> None:
    step_dir = _commit(tmp_path, 1)
    data = (step_dir / "model.pt").read_bytes()
    (step_dir / "model.pt").write_bytes(data[:-1])
    with pytest.raises(ckpt.CheckpointError, match="wrong size"):
        ckpt.verify(step_dir)


def test_fallback_skips_corrupt_partial_and_tmp_dirs(tmp_path: Path) -> None:
    good = _commit(tmp_path, 10)
    corrupt = _commit(tmp_path, 20)
    (corrupt / "model.pt").write_bytes(b"garbage")
    partial = tmp_path / ckpt.step_dir_name(30)  # renamed by hand, never got a manifest
    partial.mkdir()
    (partial / "model.pt").write_bytes(b"x")
    torn = tmp_path / f"{ckpt.TMP_PREFIX}{ckpt.step_dir_name(40)}"
    torn.mkdir()
    bad_json = _commit(tmp_path, 25)
    (bad_json / ckpt.MANIFEST_NAME).write_text("{not json")
    skipped: list[str] = []
    found = ckpt.find_latest_valid(tmp_path, on_skip=lambda d, why: skipped.append(d.name))
    assert found is not None and found[0] == good
    assert skipped == [partial.name, bad_json.name, corrupt.name]


def test_manifest_step_must_match_dir_name(tmp_path: Path) -> None:
    step_dir = _commit(tmp_path, 7)
    moved = step_dir.rename(tmp_path / ckpt.step_dir_name(8))
    with pytest.raises(ckpt.CheckpointError, match="manifest step"):
        ckpt.verify(moved)


def test_no_checkpoint_at_all(tmp_path: Path) -> None:
    assert ckpt.find_latest_valid(tmp_path / "missing") is None
    assert ckpt.find_latest_valid(tmp_path) is None


def test_retention_keeps_last_k_plus_last_known_good(tmp_path: Path) -> None:
    _commit(tmp_path, 1, healthy=True)
    known_good = _commit(tmp_path, 2, healthy=True)
    for step in (3, 4, 5):
        _commit(tmp_path, step, healthy=False)  # e.g. the loss went NaN
    stale = tmp_path / f"{ckpt.TMP_PREFIX}{ckpt.step_dir_name(4)}"  # a failed earlier save
    stale.mkdir()
    # A save other ranks already started while rank 0 commits step 5: not stale, must stay.
    in_progress = tmp_path / f"{ckpt.TMP_PREFIX}{ckpt.step_dir_name(6)}"
    in_progress.mkdir()
    removed = ckpt.apply_retention(tmp_path, keep_last=2)
    kept = [p.name for _, p in ckpt.committed_steps(tmp_path)]
    assert kept == [ckpt.step_dir_name(s) for s in (5, 4)] + [known_good.name]
    assert {p.name for p in removed} == {ckpt.step_dir_name(1), ckpt.step_dir_name(3), stale.name}
    assert in_progress.is_dir()


def test_retention_respects_protected_dirs(tmp_path: Path) -> None:
    uploading = _commit(tmp_path, 1)
    for step in (2, 3):
        _commit(tmp_path, step)
    ckpt.apply_retention(tmp_path, keep_last=1, protected={uploading})
    assert [s for s, _ in ckpt.committed_steps(tmp_path)] == [3, 1]
    with pytest.raises(ValueError):
        ckpt.apply_retention(tmp_path, keep_last=0)


def test_recommit_of_same_step_replaces_the_old_dir(tmp_path: Path) -> None:
    _commit(tmp_path, 4, size=8)
    step_dir = _commit(tmp_path, 4, size=32)
    assert torch.load(step_dir / "model.pt", weights_only=True)["w"].numel() == 32
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".tmp")] == []


def test_missing_rank_index_is_an_error(tmp_path: Path) -> None:
    tmp = tmp_path / ".tmp-step_0000000001"
    ckpt.PendingSave(1, tmp, {"a.pt": {"x": 1}}, rank=0, background=False).wait()
    with pytest.raises(ckpt.CheckpointError, match="rank 1 did not finish"):
        ckpt.read_rank_indices(tmp, world_size=2)


def test_background_save_uses_a_snapshot_not_live_tensors(tmp_path: Path) -> None:
    live = {"w": torch.zeros(1000)}
    snapshot = ckpt.clone_to_cpu({"model.pt": live, "meta": [1, (2, torch.ones(2))]})
    live["w"].add_(1.0)  # the optimizer keeps going while the thread writes
    pending = ckpt.PendingSave(1, tmp_path / "t", {"model.pt": snapshot["model.pt"]}, 0, True)
    pending.wait()
    assert pending.done()
    assert torch.load(tmp_path / "t" / "model.pt", weights_only=True)["w"].sum() == 0


def test_failed_background_save_surfaces_on_wait(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a dir")
    pending = ckpt.PendingSave(1, blocker / "sub", {"a.pt": {"x": 1}}, 0, True)
    with pytest.raises(ckpt.CheckpointError, match="save of step 1 failed"):
        pending.wait()


def test_write_json_durable_replaces_atomically(tmp_path: Path) -> None:
    target = tmp_path / "x.json"
    ckpt.write_json_durable(target, {"a": 1})
    ckpt.write_json_durable(target, {"a": 2})
    assert json.loads(target.read_text()) == {"a": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]
