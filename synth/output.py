"""Turn a synthesized stack into the files of the synth contract (ARCHITECTURE.md).

`resources.json`, `manifests.yaml`, `helm-releases.yaml`, `policy-report.json` and `report.md`,
all deterministic:
sorted, key-ordered, no timestamps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synth.harness import Registration, SynthResult
from synth.report import report
from synth.report_security import security_section
from synth.serialize import to_json, to_yaml

HELM_TYPES = frozenset({"kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart"})


def is_manifest(resource: Registration) -> bool:
    """A Kubernetes object the program declares (not a provider, not a Helm release)."""
    return (
        resource.type.startswith("kubernetes:")
        and resource.type not in HELM_TYPES
        and "apiVersion" in resource.inputs
        and "kind" in resource.inputs
    )


def manifests(result: SynthResult) -> list[dict[str, Any]]:
    objects = [r.inputs for r in result.resources if is_manifest(r)]
    return sorted(
        objects,
        key=lambda o: (
            o["apiVersion"],
            o["kind"],
            o.get("metadata", {}).get("namespace", ""),
            o.get("metadata", {}).get("name", ""),
        ),
    )


def helm_releases(result: SynthResult) -> list[dict[str, Any]]:
    releases = []
    for resource in result.resources:
        if resource.type not in HELM_TYPES:
            continue
        inputs = resource.inputs
        chart = str(inputs.get("chart", ""))
        repository = str((inputs.get("repositoryOpts") or {}).get("repo", ""))
        if chart.startswith("oci://"):
            repository, _, chart = chart.rpartition("/")
        releases.append(
            {
                "name": inputs.get("name", resource.name),
                "resource": resource.name,
                "chart": chart,
                "repository": repository,
                "version": inputs.get("version", ""),
                "namespace": inputs.get("namespace", "default"),
                "values": inputs.get("values", {}),
            }
        )
    return sorted(releases, key=lambda r: (r["namespace"], r["name"]))


# --- writing ------------------------------------------------------------------------------------


def write(result: SynthResult, out_dir: Path) -> list[Path]:
    """Write the contract's files; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "resources.json": to_json([r.to_json() for r in result.resources]) + "\n",
        "manifests.yaml": to_yaml(manifests(result), multi=True),
        "helm-releases.yaml": to_yaml(helm_releases(result)),
        # The security controls close the report (synth/report_security.py, docs/security.md).
        "report.md": f"{report(result)}\n## Security\n\n{security_section(result)}\n",
    }
    if result.policy_violations is not None:
        files["policy-report.json"] = to_json({"violations": result.policy_violations}) + "\n"
    paths = []
    for name, text in files.items():
        path = out_dir / name
        path.write_text(text)
        paths.append(path)
    return paths
