"""The vendored upstream schema data (schemas/): every file matches its recorded sha256 and
provenance, and schemas/refresh.py re-copies files from upstream mirrors and catches edits."""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from tests.conftest import SCHEMAS


def _load_refresh() -> ModuleType:
    # schemas/ is a data folder, not a package: load its script by path.
    spec = importlib.util.spec_from_file_location("schemas_refresh", SCHEMAS / "refresh.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module


refresh = _load_refresh()


def test_every_vendored_file_matches_its_recorded_sha256() -> None:
    assert refresh.check(SCHEMAS) == []


def test_check_cli_exits_0_on_the_repository(capsys: pytest.CaptureFixture[str]) -> None:
    assert refresh.main(["--check"]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == "checked sources.yaml: 0 problem(s)"


def test_every_upstream_file_names_repository_tag_commit_path_and_license() -> None:
    entries = refresh.load_manifest(SCHEMAS)
    unpinned = {e.dest for e in entries if not e.commit}
    # Known and explained in SOURCES.md; anything else must be fully pinned.
    assert unpinned == {
        "charts/karpenter-crd/Chart.yaml",
        "charts/karpenter-crd/values.yaml",
        "storageclass-parameters.yaml",
        # An extract of figures (tests/test_catalog.py); its header and note pin the upstream file.
        "karpenter-instance-types.yaml",
    }
    assert len(entries) > len(unpinned)
    for entry in entries:
        if entry.dest in unpinned:
            continue
        assert re.fullmatch(r"[0-9a-f]{40}", entry.commit or ""), entry.dest
        # A repository that tags no per-chart release is pinned by commit, with a note saying so.
        assert entry.repo and entry.path and (entry.tag or entry.note), entry.dest
        assert entry.license == "Apache-2.0", entry.dest
    crds = {e.dest for e in entries if e.dest.startswith("crds/")}
    # Kyverno's MutatingPolicy (the fleet's in-region image rewrite) and Kueue's Topology
    # (topology-aware gangs) joined the 24 the program rendered before.
    assert len(crds) == 26


@pytest.fixture
def schemas_copy(tmp_path: Path) -> Path:
    root = tmp_path / "schemas"
    shutil.copytree(SCHEMAS, root, ignore=shutil.ignore_patterns("__pycache__"))
    return root


def test_a_hand_edit_an_unlisted_file_and_a_stale_table_are_caught(schemas_copy: Path) -> None:
    values = schemas_copy / "charts" / "kueue" / "values.yaml"
    values.write_bytes(values.read_bytes().replace(b"enable", b"enabIe", 1))
    (schemas_copy / "crds" / "kueue" / "extra.yaml").write_text("kind: CustomResourceDefinition\n")
    sources = schemas_copy / "SOURCES.md"
    (chart,) = [e for e in refresh.load_manifest(SCHEMAS) if e.dest == "charts/kueue/Chart.yaml"]
    sources.write_text(sources.read_text().replace(chart.sha256, "0" * 64))
    problems = refresh.check(schemas_copy)
    assert len(problems) == 3, problems
    assert problems[0].startswith("charts/kueue/values.yaml: sha256 ")
    assert problems[1] == "crds/kueue/extra.yaml: not listed in sources.yaml"
    assert problems[2].startswith("SOURCES.md: file table out of date")
    assert refresh.main(["--check", "--root", str(schemas_copy)]) == 1


def _git(repo: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.com", "-c", "tag.gpgSign=false"]
    proc = subprocess.run(
        ["git", "-C", str(repo), *identity, *args], capture_output=True, text=True, check=True
    )
    return proc.stdout.strip()


def test_refresh_copies_the_tagged_file_from_a_mirror_and_records_commit_and_sha(
    tmp_path: Path,
) -> None:
    upstream = tmp_path / "mirrors" / "acme" / "charts"
    (upstream / "charts" / "x").mkdir(parents=True)
    _git(upstream, "init", "-q")
    for version in ("1", "2"):
        (upstream / "charts" / "x" / "values.yaml").write_text(f"version: {version}\n")
        _git(upstream, "add", "-A")
        _git(upstream, "commit", "-q", "-m", version)
        _git(upstream, "tag", f"v{version}")
    root = tmp_path / "schemas"
    root.mkdir()
    entry = refresh.Entry(
        dest="charts/x/values.yaml",
        sha256="0" * 64,
        repo="acme/charts",
        tag="v1",
        path="charts/x/values.yaml",
        license="Apache-2.0",
    )
    (root / "sources.yaml").write_text(refresh.render_manifest([entry]))
    (root / "SOURCES.md").write_text(f"# t\n\n{refresh.BEGIN}\n{refresh.END}\n")

    report = refresh.refresh(tmp_path / "mirrors", root)

    v1 = _git(upstream, "rev-parse", "v1")
    assert report == [f"charts/x/values.yaml: updated from acme/charts@{v1}"]
    assert (root / "charts" / "x" / "values.yaml").read_text() == "version: 1\n"
    (recorded,) = refresh.load_manifest(root)
    assert recorded.commit == v1
    assert recorded.sha256 == refresh.sha256_of(root / "charts" / "x" / "values.yaml")
    assert v1 in (root / "SOURCES.md").read_text()
    assert refresh.check(root) == []
    assert refresh.refresh(tmp_path / "mirrors", root) == []  # idempotent

    # A tag that no longer points at the recorded commit stops the refresh, writing nothing.
    _git(upstream, "tag", "-f", "v1", "v2")
    with pytest.raises(refresh.RefreshError, match="tag v1 of acme/charts is at"):
        refresh.refresh(tmp_path / "mirrors", root)
    assert (root / "charts" / "x" / "values.yaml").read_text() == "version: 1\n"

    # Moving to a new release: set the tag, drop the commit, refresh.
    manifest = root / "sources.yaml"
    manifest.write_text(manifest.read_text().replace("tag: v1", "tag: v2"))
    manifest.write_text(re.sub(r"\n  commit: \w+", "", manifest.read_text()))
    refresh.refresh(tmp_path / "mirrors", root)
    assert (root / "charts" / "x" / "values.yaml").read_text() == "version: 2\n"
    assert refresh.load_manifest(root)[0].commit == _git(upstream, "rev-parse", "v2")


def test_refresh_without_a_mirror_fails_and_names_the_repository(tmp_path: Path) -> None:
    root = tmp_path / "schemas"
    shutil.copytree(SCHEMAS, root, ignore=shutil.ignore_patterns("__pycache__"))
    with pytest.raises(refresh.RefreshError, match="no clone at"):
        refresh.refresh(tmp_path / "nothing", root)
    assert refresh.check(root) == []
