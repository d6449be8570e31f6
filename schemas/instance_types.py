"""Extract `karpenter-instance-types.yaml` from Karpenter's generated instance-type reference.

    python schemas/instance_types.py --mirror DIR [--commit SHA]

DIR is a clone or mirror of aws/karpenter-provider-aws; the reference page
(website/content/en/docs/reference/instance-types.md, generated from EC2 DescribeInstanceTypes
by hack/docs/instancetypes_gen/main.go) is read at the commit recorded in the extract's header
(or `--commit`). For every instance type of components/catalog.py it writes:

- the figures the catalog is checked against (tests/test_catalog.py): the labels
  karpenter.k8s.aws/instance-cpu (vcpu), -instance-memory (memoryMiB), -instance-gpu-count
  (gpus), -instance-gpu-name (gpuName), -instance-gpu-memory (gpuMemoryMiB, per GPU),
  -instance-local-nvme (localNvmeGB; 0 = none) and the resource vpc.amazonaws.com/efa (efa);
- `labels`: every label the page lists for the type (what Karpenter puts on its nodes);
- `allocatable`: the page's Resources table: what Karpenter computes a node of the type offers
  pods (capacity minus kube-reserved, the eviction threshold and the VM memory overhead,
  pkg/providers/instancetype/types.go) — the real-engine tier's nodes carry these.

Then it rewrites the sha256 of the extract in sources.yaml (python schemas/refresh.py --check
verifies it).
"""

from __future__ import annotations

import argparse
import hashlib
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

SCHEMAS_DIR = Path(__file__).resolve().parent
EXTRACT = SCHEMAS_DIR / "karpenter-instance-types.yaml"
PAGE = "website/content/en/docs/reference/instance-types.md"
TAG = "v1.14.1"
LABEL = "karpenter.k8s.aws/instance-"
HEADER = """\
# Instance-type facts extracted from Karpenter's generated instance-type reference:
# aws/karpenter-provider-aws@{tag} (commit {commit}):
# {page}, sha256 of that upstream file
# {sha256}
# ({size:,} bytes; not vendored whole). That page is generated from EC2 DescribeInstanceTypes by
# hack/docs/instancetypes_gen/main.go; Karpenter {tag} uses the same figures for the
# instance-type capacity it schedules against (pkg/providers/instancetype/types.go).
#
# A mechanical extract, not upstream text, written by schemas/instance_types.py (its docstring
# says what each key is): per catalog type, vcpu, memoryMiB, gpus, gpuName, gpuMemoryMiB (per
# GPU), localNvmeGB (0 = none) and efa (0 = not listed), checked against components/catalog.py by
# tests/test_catalog.py; `labels` (every label Karpenter puts on a node of the type) and
# `allocatable` (what a node of the type offers pods, by Karpenter's arithmetic), read by the
# real-engine tier's nodes (synth/engines/nodes.py). To refresh: point --mirror at a clone of
# the new tag, set --commit, and record the new tag here and in sources.yaml.
"""


def _sections(page: str) -> dict[str, tuple[dict[str, str], dict[str, str]]]:
    """instance type -> (labels, resources) as the page's two tables list them."""
    out: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
    current: str | None = None
    table: dict[str, str] | None = None
    for line in page.splitlines():
        heading = re.match(r"^### `([^`]+)`", line)
        if heading:
            current = heading.group(1)
            out[current] = ({}, {})
            table = None
            continue
        if current is None:
            continue
        if line.startswith("#### Labels"):
            table = out[current][0]
        elif line.startswith("#### Resources"):
            table = out[current][1]
        elif line.startswith("#"):
            table = None
        elif table is not None:
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if len(cells) == 2 and cells[0] not in ("Label", "Resource", "--"):
                table[cells[0]] = cells[1]
    return out


def _row(labels: dict[str, str], resources: dict[str, str]) -> dict[str, Any]:
    def number(key: str) -> int:
        return int(labels.get(LABEL + key, "0"))

    gpu_name = labels.get(LABEL + "gpu-name")
    return {
        "vcpu": number("cpu"),
        "memoryMiB": number("memory"),
        "gpus": number("gpu-count"),
        "gpuName": gpu_name,
        "gpuMemoryMiB": number("gpu-memory"),
        "efa": int(resources.get("vpc.amazonaws.com/efa", "0")),
        "localNvmeGB": number("local-nvme"),
        "labels": dict(sorted(labels.items())),
        "allocatable": dict(sorted(resources.items())),
    }


def extract(page: str, names: list[str]) -> dict[str, dict[str, Any]]:
    sections = _sections(page)
    missing = [n for n in names if n not in sections]
    if missing:
        raise SystemExit(f"{PAGE} has no section for {', '.join(missing)}")
    return {name: _row(*sections[name]) for name in names}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mirror", type=Path, required=True, help="aws/karpenter-provider-aws")
    parser.add_argument("--commit", help="commit to read (default: the extract's header's)")
    args = parser.parse_args(argv)
    header = EXTRACT.read_text()
    recorded = re.search(r"\(commit ([0-9a-f]{40})\)", header)
    commit = args.commit or (recorded.group(1) if recorded else "")
    if not commit:
        raise SystemExit(f"{EXTRACT.name} records no commit: pass --commit")
    raw = subprocess.run(
        ["git", "-C", str(args.mirror), "show", f"{commit}:{PAGE}"],
        capture_output=True,
        check=True,
    ).stdout
    sys.path.insert(0, str(SCHEMAS_DIR.parent))
    from components import catalog

    rows = extract(raw.decode(), list(catalog.INSTANCE_TYPES))
    text = HEADER.format(
        tag=TAG,
        commit=commit,
        page=PAGE,
        sha256=hashlib.sha256(raw).hexdigest(),
        size=len(raw),
    ) + yaml.safe_dump({"instanceTypes": rows}, sort_keys=False, width=100)
    EXTRACT.write_text(text)
    manifest = SCHEMAS_DIR / "sources.yaml"
    sha = hashlib.sha256(text.encode()).hexdigest()
    lines = manifest.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() == f"- dest: {EXTRACT.name}":
            j = next(k for k in range(i + 1, len(lines)) if lines[k].lstrip().startswith("sha256:"))
            lines[j] = re.sub(r"sha256: \S+", f"sha256: {sha}", lines[j])
    manifest.write_text("".join(lines))
    print(f"{EXTRACT.name}: {len(rows)} instance types, sha256 {sha}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
