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


_CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
_RESOURCE_FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
_NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


def _flavor_capacity(result: SynthResult, node_labels: dict[str, str]) -> int:
    """GPUs the pools whose labels include `node_labels` can provide at most."""
    total = 0
    for group in result.of_type("eks:index:ManagedNodeGroup"):
        labels = group.inputs.get("labels", {})
        types = list(group.inputs.get("instanceTypes", []))
        if types and node_labels.items() <= labels.items():
            max_size = int(group.inputs.get("scalingConfig", {}).get("maxSize", 0))
            total += catalog.instance(types[0]).gpus * max_size
    for pool in result.of_type(_NODE_POOL):
        spec = pool.inputs.get("spec", {})
        labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
        if node_labels.items() <= labels.items():
            total += int(spec.get("limits", {}).get(catalog.GPU_RESOURCE, 0))
    return total


def _queues(result: SynthResult) -> str:
    flavors = {
        r.inputs["metadata"]["name"]: r.inputs.get("spec", {}).get("nodeLabels", {})
        for r in result.of_type(_RESOURCE_FLAVOR)
    }
    rows: list[list[Any]] = []
    nominal: Counter[str] = Counter()
    for queue in sorted(result.of_type(_CLUSTER_QUEUE), key=lambda r: r.inputs["metadata"]["name"]):
        spec = queue.inputs.get("spec", {})
        for group in spec.get("resourceGroups", []):
            for rank, flavor in enumerate(group.get("flavors", []), start=1):
                by_name = {res["name"]: res for res in flavor.get("resources", [])}
                gpu = by_name.get(catalog.GPU_RESOURCE, {})
                nominal[flavor["name"]] += int(gpu.get("nominalQuota", 0))
                rows.append(
                    [
                        queue.inputs["metadata"]["name"],
                        spec.get("cohortName", ""),
                        rank,
                        flavor["name"],
                        gpu.get("nominalQuota", 0),
                        gpu.get("borrowingLimit", "unbounded"),
                        gpu.get("lendingLimit", "all"),
                        by_name.get("cpu", {}).get("nominalQuota", ""),
                        by_name.get("memory", {}).get("nominalQuota", ""),
                    ]
                )
    teams = _table(
        [
            "ClusterQueue",
            "cohort",
            "order",
            "flavor",
            "GPUs",
            "borrow ≤",
            "lend ≤",
            "CPU",
            "memory",
        ],
        rows,
    )
    capacity_rows = []
    for name, labels in sorted(flavors.items()):
        capacity = _flavor_capacity(result, labels)
        used = nominal.get(name, 0)
        share = f"{100 * used / capacity:.0f} %" if capacity else "n/a"
        capacity_rows.append([name, used, capacity, share])
    capacity_table = _table(
        ["flavor", "nominal GPUs (all teams)", "pool GPUs at max", "committed"], capacity_rows
    )
    return (
        f"{teams}\n\nPer flavor, against what the pools can provide:\n\n{capacity_table}\n\n"
        "order: the flavor order Kueue tries (spot first). Pool GPUs: managed node groups at "
        "maxSize and Karpenter NodePool GPU limits whose labels match the flavor."
    )


#: (heading, renderer). Areas add their sections here.
REPORT_SECTIONS: list[tuple[str, Callable[[SynthResult], str]]] = [
    ("Managed node groups", _node_groups),
    ("Queues and quotas", _queues),
    ("Resources by type", _resources_by_type),
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
