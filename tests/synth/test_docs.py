"""The README's config reference is generated from the model and must not drift from it."""

from __future__ import annotations

from synth import configref
from synth.harness import PROJECT_ROOT


def test_readme_config_reference_matches_the_model() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert configref.embedded(readme) == configref.reference(), (
        "README config reference is stale: run python -m synth.configref --write"
    )


def test_reference_lists_nested_keys_with_allowed_values_and_defaults() -> None:
    table = configref.reference()
    capacity = "`on-demand` \\| `spot` \\| `capacity-block`"
    assert f"| `nodeGroups.gpu[].capacityType` | {capacity} | required |" in table
    assert "| `network.azCount` | int (≥ 2, ≤ 6) | `3` |" in table
    assert "| `cluster.endpointPublicAccess` | bool | `false` |" in table
    # Every top-level section of the model appears.
    for section in ("network", "cluster", "nodeGroups", "karpenter", "storage", "teams"):
        assert f"| `{section}" in table


def test_readme_documents_the_two_fresh_machine_commands() -> None:
    readme = (PROJECT_ROOT / "README.md").read_text()
    assert "python3 -m venv .venv && .venv/bin/pip install torch==2.13.0" in readme
    assert ".venv/bin/python -m synth --stack dev" in readme
    assert "\n.venv/bin/python -m pytest\n" in readme


def test_real_engines_doc_lists_every_kueue_translation() -> None:
    from synth.engines.kueue_v1beta1 import TRANSLATIONS

    text = (PROJECT_ROOT / "docs" / "real-engines.md").read_text()
    table = text.split("<!-- BEGIN translations")[1].split("<!-- END translations -->")[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and "---" not in line][1:]
    assert rows == [f"| {t.kind} | {t.field} | {t.becomes} | {t.source} |" for t in TRANSLATIONS]
