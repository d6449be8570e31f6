"""Turn a synthesized stack into the files of the synth contract (ARCHITECTURE.md).

`resources.json`, `manifests.yaml`, `helm-releases.yaml` and `report.md`, all deterministic:
sorted, key-ordered, no timestamps.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from components import catalog
from synth.harness import Registration, SynthResult

try:  # libyaml makes dumping several times faster; the pure-Python dumper gives the same text.
    _Dumper: Any = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - depends on how PyYAML was built
    _Dumper = yaml.SafeDumper

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


# --- report.md ----------------------------------------------------------------------------------


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _resources_by_type(result: SynthResult) -> str:
    counts = Counter(r.type for r in result.resources)
    rows = [[f"`{t}`", n] for t, n in sorted(counts.items())]
    return _table(["type", "count"], rows) + f"\n\n{len(result.resources)} resources in all."


def _node_groups(result: SynthResult) -> str:
    rows = []
    for group in result.of_type("eks:index:ManagedNodeGroup"):
        inputs = group.inputs
        types = list(inputs.get("instanceTypes", []))
        scaling = inputs.get("scalingConfig", {})
        capacity: catalog.CapacityType = (
            "spot" if inputs.get("capacityType") == "SPOT" else "on-demand"
        )
        gpus = catalog.instance(types[0]).gpus if types else 0
        max_size = int(scaling.get("maxSize", 0))
        worst = max((catalog.price_per_hour(t, capacity) for t in types), default=0.0)
        rows.append(
            [
                inputs.get("labels", {}).get(catalog.LABEL_NODE_POOL, group.name),
                inputs.get("labels", {}).get(catalog.LABEL_GPU_CLASS, "cpu"),
                capacity,
                ", ".join(types),
                f"{scaling.get('minSize', 0)}/{max_size}",
                gpus,
                gpus * max_size,
                f"{worst * max_size:,.2f}",
            ]
        )
    return _table(
        [
            "node group",
            "GPU class",
            "capacity",
            "instance types",
            "min/max",
            "GPUs/node",
            "max GPUs",
            "max $/h",
        ],
        rows,
    ) + (
        "\n\nmax $/h: every node at the group's maximum on its dearest instance type "
        "(prices: components/catalog.py)."
    )


def _alerts(result: SynthResult) -> str:
    rows = []
    for rule_object in result.of_type("kubernetes:monitoring.coreos.com/v1:PrometheusRule"):
        for group in rule_object.inputs.get("spec", {}).get("groups", []):
            for rule in group.get("rules", []):
                if "alert" not in rule:
                    continue
                expr = str(rule["expr"]).replace("|", "\\|")
                rows.append(
                    [rule["alert"], rule["labels"]["severity"], rule.get("for", "0m"), f"`{expr}`"]
                )
    if not rows:
        return "No alert rules."
    return _table(["alert", "severity", "for", "expression (thresholds from config)"], rows)


def _validation_jobs(result: SynthResult) -> str:
    rows = []
    for job in result.of_type("kubernetes:batch/v1:Job"):
        meta = job.inputs.get("metadata", {})
        if meta.get("labels", {}).get("app.kubernetes.io/part-of") != "gpu-platform":
            continue
        spec = job.inputs["spec"]
        pod = spec["template"]["spec"]
        container = pod["containers"][0]
        env = {e["name"]: e.get("value", "") for e in container.get("env", [])}
        threshold = env.get("MIN_BUS_BANDWIDTH_GBPS")
        rows.append(
            [
                f"{meta.get('namespace', '')}/{meta['name']}",
                pod.get("nodeSelector", {}).get(catalog.LABEL_NODE_POOL, "?"),
                spec.get("completions", 1),
                container["resources"]["limits"].get(catalog.GPU_RESOURCE, 0),
                f">= {threshold} GB/s bus bandwidth" if threshold else "nvidia-smi + matmul",
                container["image"].split("@")[0],
            ]
        )
    if not rows:
        return "Validation jobs are off in this stack (`validation.enabled`)."
    return _table(
        ["job", "pool", "nodes", "GPUs/node", "pass criterion", "image (by digest)"], rows
    )


#: (heading, renderer). Areas add their sections here.
REPORT_SECTIONS: list[tuple[str, Callable[[SynthResult], str]]] = [
    ("Managed node groups", _node_groups),
    ("Resources by type", _resources_by_type),
    ("Alerts", _alerts),
    ("Validation jobs", _validation_jobs),
]


def report(result: SynthResult) -> str:
    parts = [f"# gpu-platform — synthesized stack `{result.stack}`\n"]
    parts.append(
        "Generated offline by `python -m synth` from the same `__main__.py` and stack files "
        "`pulumi up` uses.\n"
    )
    for heading, render in REPORT_SECTIONS:
        parts.append(f"## {heading}\n\n{render(result)}\n")
    return "\n".join(parts)


# --- writing ------------------------------------------------------------------------------------


def _yaml(data: Any, *, multi: bool = False) -> str:
    if multi:
        text = yaml.dump_all(data, Dumper=_Dumper, sort_keys=True, default_flow_style=False)
    else:
        text = yaml.dump(data, Dumper=_Dumper, sort_keys=True, default_flow_style=False)
    return str(text)


def write(result: SynthResult, out_dir: Path) -> list[Path]:
    """Write the contract's files; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    files = {
        "resources.json": json.dumps(
            [r.to_json() for r in result.resources], indent=2, sort_keys=True
        )
        + "\n",
        "manifests.yaml": _yaml(manifests(result), multi=True),
        "helm-releases.yaml": _yaml(helm_releases(result)),
        "report.md": report(result),
    }
    paths = []
    for name, text in files.items():
        path = out_dir / name
        path.write_text(text)
        paths.append(path)
    return paths
