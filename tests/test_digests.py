"""Every image digest written in the repository is listed once in images/digests.yaml with its
provenance (issue 30): a made-up digest cannot slip in unlisted, and a listed one names the
files that hold it."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

from synth.harness import PROJECT_ROOT

INVENTORY = PROJECT_ROOT / "images" / "digests.yaml"
DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
#: Generated or third-party trees that are not the repository's own files.
SKIPPED = (".git/", ".venv/", "build/", ".ci-checkov-venv/", ".mypy_cache/", ".ruff_cache/")


def _files() -> list[Path]:
    """The repository's files: tracked and untracked-not-ignored (what a commit would hold)."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=PROJECT_ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    return [
        PROJECT_ROOT / name
        for name in listed
        if not name.startswith(SKIPPED) and (PROJECT_ROOT / name).is_file()
    ]


def _inventory() -> list[dict[str, object]]:
    entries = yaml.safe_load(INVENTORY.read_text())["digests"]
    assert isinstance(entries, list) and entries
    return entries


def test_every_digest_literal_is_in_the_inventory() -> None:
    listed = {str(entry["digest"]) for entry in _inventory()}
    found: dict[str, set[str]] = {}
    for path in _files():
        if path == INVENTORY:
            continue
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for digest in DIGEST.findall(text):
            found.setdefault(digest, set()).add(path.relative_to(PROJECT_ROOT).as_posix())
    unlisted = {d: sorted(f) for d, f in found.items() if d not in listed}
    assert not unlisted, f"digests without provenance in images/digests.yaml: {unlisted}"
    stale = sorted(listed - set(found))
    assert not stale, f"listed digests no file holds: {stale}"


def test_each_entry_has_provenance_and_its_files_hold_it() -> None:
    seen: set[str] = set()
    assert _inventory()
    for entry in _inventory():
        digest = str(entry["digest"])
        assert DIGEST.fullmatch(digest), digest
        assert digest not in seen, f"{digest} listed twice"
        seen.add(digest)
        for key in ("image", "source", "read", "verified_by"):
            assert str(entry.get(key) or "").strip(), f"{digest}: no {key}"
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(entry["read"])), entry["read"]
        files = entry["used_in"]
        assert isinstance(files, list) and files
        for name in files:
            assert digest in (PROJECT_ROOT / str(name)).read_text(), f"{digest} not in {name}"


def test_the_checker_sees_a_digest_it_does_not_know() -> None:
    # The regular expression the test relies on, on what a stray pin looks like.
    stray = "FROM python:3.11@sha256:" + "0123456789abcdef" * 4
    assert DIGEST.findall(stray) == ["sha256:" + "0123456789abcdef" * 4]
    assert not DIGEST.findall("sha256: " + "0" * 64)  # a file hash in schemas/sources.yaml
