"""`report.md`: what a reviewer reads — node groups and NodePools with GPU limits and $/h, idle
cost, storage and its cost, queues and quotas against capacity, the GPU classes placed by the
network (synth/report_topology.py), alerts, validation jobs, training jobs, the policy summary
and resources by type. Every figure is one the analysis produced — the facts (`StackFacts`,
`JobFacts`; a fleet manager's `FleetFacts`), which the composition root built once — rendered
next to what the captured resources say Pulumi will create (alerts, buckets, node classes,
validation Jobs, resource counts); the report computes no price, capacity or estimate itself
(tests/synth/test_report_from_facts.py holds it to that). "Will it run" and "Deploy plan"
render in synth/report_plan.py.

Why this module is long: one small renderer per platform area, kept together so the section
order a reviewer reads is visible in one list (REPORT_SECTIONS)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

from components import catalog
from components.analysis.capacity import ReservationRow
from components.analysis.costs import EfsCost, FsxCost, GroupCost, IdleCost, PlatformCosts
from synth.harness import Registration, SynthResult
from synth.report_topology import network_topology


def _table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def _resources_by_type(result: SynthResult) -> str:
    counts = Counter(r.type for r in result.resources)
    rows = [[f"`{t}`", n] for t, n in sorted(counts.items())]
    return _table(["type", "count"], rows) + f"\n\n{len(result.resources)} resources in all."


def _costs(result: SynthResult) -> PlatformCosts:
    """The cost figures the composition root's analysis built: a platform stack's facts, or a
    fleet manager's (FleetFacts.costs). The platform sections render these, never a price."""
    if result.facts is not None:
        return result.facts.costs
    if result.fleet is not None:
        return result.fleet.costs
    raise ValueError(f"{result.stack}: no facts captured (a failed run)")


def _node_groups(result: SynthResult) -> str:
    rows = [_node_group_row(group) for group in _costs(result).node_groups]
    return _table(
        [
            "node group",
            "GPU class",
            "capacity",
            "instance types",
            "min/max",
            "GPUs/node",
            "max GPUs",
            "scaled by",
            "idle $/h",
            "max $/h",
            "auto repair",
        ],
        rows,
    ) + (
        "\n\nidle $/h: the nodes the group holds with no job (desiredSize, first type)."
        "\n\nmax $/h: every node at the group's maximum on its dearest instance type "
        "(prices: components/catalog.py). auto repair: EKS replaces or reboots nodes the node "
        "monitoring agent reports unhealthy (docs/runbooks.md#node-repair)."
    )


def _node_group_row(group: GroupCost) -> list[Any]:
    """One managed group's row: its shape, who scales it, and what it costs idle and at max
    (analysis/costs.py GroupCost)."""
    return [
        group.name,
        group.gpu_class,
        group.capacity_type,
        ", ".join(group.instance_types),
        f"{group.min_size}/{group.max_size}",
        group.gpus_per_node,
        group.max_gpus,
        # Pulumi leaves desiredSize to the cluster-autoscaler on the groups it resizes.
        "cluster-autoscaler" if group.autoscaled else "fixed",
        f"{group.idle_usd_per_hour:,.2f}",
        f"{group.max_usd_per_hour:,.2f}",
        "on" if group.auto_repair else "off",
    ]


#: Why an advisory violation on a stack is accepted: policy name → explanation for report.md.
ADVISORY_EXPLANATIONS: dict[str, str] = {
    "gpu-platform-k8s-resource-requests": "LimitRange defaults fill in requests in team "
    "namespaces; the rule stays advisory so that charts' own pods do not block a deploy.",
    "gpu-platform-training-deepspeed-batch": "DeepSpeed itself refuses an inconsistent config "
    "at start-up; the rule reports it before the GPUs are paid for.",
}


def _policy_summary(result: SynthResult) -> str:
    violations = result.policy_violations
    if violations is None:
        return "The policy pack was not run."
    counts = Counter(v["enforcement"] for v in violations)
    lines = [
        _table(
            ["enforcement", "violations"],
            [[level, counts.get(level, 0)] for level in ("mandatory", "advisory")],
        ),
        "",
        "Full list: `policy-report.json`; rules: `policies/rules/`.",
    ]
    mandatory = [v for v in violations if v["enforcement"] == "mandatory"]
    if mandatory:
        lines += ["", "### Mandatory violations (the deploy is blocked)", ""]
        lines += [f"- `{v['policy']}` on `{v['urn']}`: {v['message']}" for v in mandatory]
    advisory = [v for v in violations if v["enforcement"] == "advisory"]
    if advisory:
        lines += ["", "### Advisory violations", ""]
        for v in advisory:
            why = ADVISORY_EXPLANATIONS.get(v["policy"], "not yet explained: fix or explain it")
            lines.append(f"- `{v['policy']}` on `{v['urn']}`: {v['message']} — {why}")
    return "\n".join(lines)


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


NODEPOOL_TYPE = "kubernetes:karpenter.sh/v1:NodePool"
NODECLASS_TYPE = "kubernetes:karpenter.k8s.aws/v1:EC2NodeClass"


def _requirement(spec: dict[str, Any], key: str) -> list[str]:
    for item in spec.get("template", {}).get("spec", {}).get("requirements", []):
        if item.get("key") == key and item.get("operator") == "In":
            return [str(v) for v in item.get("values", [])]
    return []


def _node_class_text(result: SynthResult) -> dict[str, str]:
    """EC2NodeClass name -> how it places nodes, read from what was registered: a placement
    group selector (components/analysis/efa_placement.py) and subnets by id (one AZ) or by tag."""
    out: dict[str, str] = {}
    for node_class in result.of_type(NODECLASS_TYPE):
        spec = node_class.inputs.get("spec", {})
        name = node_class.inputs.get("metadata", {}).get("name", node_class.name)
        subnets = spec.get("subnetSelectorTerms", [])
        by_id = [t for t in subnets if "id" in t]
        where = f"{len(by_id)} subnet" if by_id else "all tagged subnets"
        group = "cluster placement group, " if "placementGroupSelector" in spec else ""
        raid = ", NVMe RAID0" if spec.get("instanceStorePolicy") == "RAID0" else ""
        out[name] = f"`{name}` ({group}{where}{raid})"
    return out


def _karpenter_pools(result: SynthResult) -> str:
    """The NodePools Pulumi creates, each with the most nodes and $/h its limits allow
    (analysis/costs.py pool_max_cost, read from the facts by the pool's name)."""
    rows = []
    costs = _costs(result)
    classes = _node_class_text(result)
    for pool in result.of_type(NODEPOOL_TYPE):
        spec = pool.inputs.get("spec", {})
        labels = spec.get("template", {}).get("metadata", {}).get("labels", {})
        capacities = _requirement(spec, "karpenter.sh/capacity-type")
        types = _requirement(spec, "node.kubernetes.io/instance-type")
        limits = spec.get("limits", {})
        name = pool.inputs.get("metadata", {}).get("name", pool.name)
        at_limit = costs.pools[name]
        class_name = spec.get("template", {}).get("spec", {}).get("nodeClassRef", {}).get("name")
        rows.append(
            [
                name,
                labels.get(catalog.LABEL_GPU_CLASS, "cpu"),
                ", ".join(capacities),
                spec.get("weight", ""),
                ", ".join(types),
                limits.get(catalog.GPU_RESOURCE, "-"),
                ", ".join(f"{k}={v}" for k, v in sorted(limits.items())),
                at_limit.nodes,
                f"{at_limit.usd_per_hour:,.2f}",
                classes.get(class_name, class_name),
            ]
        )
    return _table(
        [
            "NodePool",
            "GPU class",
            "capacity",
            "weight",
            "instance types",
            "GPU limit",
            "limits",
            "max nodes",
            "max $/h at limit",
            "node class",
        ],
        rows,
    ) + (
        "\n\nmax $/h at limit: the pool filled up to its limits with its dearest instance type "
        "(spot at the typical spot price; prices: components/catalog.py). Higher weight is "
        "tried first: spot before the on-demand fallback."
    )


def idle_cost(result: SynthResult) -> IdleCost:
    """Everything that runs with no job: what the facts priced (managed groups at their desired
    size, reservations) and the control plane and NAT gateways the stack creates (counted here:
    resource counts only the rendered stack has)."""
    return _costs(result).idle_cost(
        control_planes=len(result.of_type("eks:index:Cluster")),
        nat_gateways=len(result.of_type("aws:ec2/natGateway:NatGateway")),
    )


def _idle_cost(result: SynthResult) -> str:
    idle = idle_cost(result)
    rows: list[list[Any]] = [
        [i.item, i.count, f"{i.usd_each:.3f}", f"{i.usd_per_hour:,.2f}"] for i in idle.items
    ]
    rows.append(["**idle total**", "", "", f"**{idle.usd_per_hour:,.2f}**"])
    return _table(["item", "count", "$/h each", "$/h"], rows) + (
        "\n\nKarpenter NodePools start empty and add nothing while idle; data transfer, "
        "storage and NAT processing are usage-based and not included."
    )


_CLUSTER_QUEUE = "kubernetes:kueue.x-k8s.io/v1beta2:ClusterQueue"
_RESOURCE_FLAVOR = "kubernetes:kueue.x-k8s.io/v1beta2:ResourceFlavor"
_NODE_POOL = "kubernetes:karpenter.sh/v1:NodePool"


def _queues(result: SynthResult) -> str:
    rows = _queue_rows(result)
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
    capacity_table = _flavor_commitments(result)
    return (
        f"{teams}\n\nPer flavor, against what the pools can provide:\n\n{capacity_table}\n\n"
        "order: the flavor order Kueue tries (spot first). Pool GPUs: what the flavor's pools "
        "can provide at most (managed node groups at their largest size, Karpenter NodePools in "
        "whole nodes within their GPU limit, reserved pools within their reservations); on a "
        "fleet's manager, every worker's added up." + _unqueued(result)
    )


def _queue_rows(result: SynthResult) -> list[list[Any]]:
    """One row per ClusterQueue flavor, as rendered."""
    rows: list[list[Any]] = []
    for queue in sorted(result.of_type(_CLUSTER_QUEUE), key=lambda r: r.inputs["metadata"]["name"]):
        spec = queue.inputs.get("spec", {})
        for group in spec.get("resourceGroups", []):
            for rank, flavor in enumerate(group.get("flavors", []), start=1):
                by_name = {res["name"]: res for res in flavor.get("resources", [])}
                gpu = by_name.get(catalog.GPU_RESOURCE, {})
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
    return rows


def _flavor_commitments(result: SynthResult) -> str:
    """Per flavor, the GPUs the teams were promised against what its pools can provide, as the
    analysis computed them (capacity.flavor_commitments): a platform's own pools, a fleet
    manager's workers' added up."""
    if result.facts is not None:
        found = result.facts.commitments
    elif result.fleet is not None:
        found = result.fleet.commitments
    else:
        return "No config captured."
    rows = [
        [
            c.flavor,
            c.nominal_gpus,
            c.capacity_gpus,
            f"{100 * c.committed:.0f} %" if c.committed is not None else "n/a",
        ]
        for c in found
    ]
    return _table(["flavor", "nominal GPUs (all teams)", "pool GPUs at max", "committed"], rows)


def _unqueued(result: SynthResult) -> str:
    """The GPU node sources no team's quota reaches, each with what it is there for
    (`unqueuedReason`; without one the config check refuses it)."""
    if result.facts is None:
        return ""
    found = result.facts.unqueued
    if not found:
        return "\n\nEvery GPU node source is a flavor of some team's ClusterQueue."
    lines = [f"- `{s.name}` ({s.key}): {s.unqueued_reason}" for s in found]
    return "\n\nGPU node sources no team's queue reaches, and why they exist:\n\n" + "\n".join(
        lines
    )


def _reservations(result: SynthResult) -> tuple[ReservationRow, ...]:
    """The stack's capacity reservations as its facts hold them (a fleet's manager has none)."""
    return result.facts.reservations if result.facts is not None else ()


def _reserved_capacity(result: SynthResult) -> str:
    rows = _reservations(result)
    if not rows:
        return "No capacity reservations (`karpenter.reservations`)."
    table = _table(
        ["reservation", "selector", "type", "instance type", "count", "GPUs", "window", "$/h"],
        [
            [
                r.name,
                f"`{r.selector}`",
                r.type,
                r.instance_type,
                r.count,
                r.gpus,
                r.window or "-",
                f"{r.usd_per_hour:,.2f}",
            ]
            for r in rows
        ],
    )
    return (
        f"{table}\n\nReserved pools launch only into these (EC2NodeClass "
        "`capacityReservationSelectorTerms`); Kueue tries reserved flavors first. A reservation "
        "bills whether or not a job runs: it is part of the idle cost below."
    )


#: (heading, renderer). Areas add their sections here.
REPORT_SECTIONS: list[tuple[str, Callable[[SynthResult], str]]] = [
    ("Managed node groups", _node_groups),
    ("Queues and quotas", _queues),
    ("Network topology", network_topology),
    ("Karpenter NodePools", _karpenter_pools),
    ("Reserved capacity", _reserved_capacity),
    ("Idle cost", _idle_cost),
    ("Resources by type", _resources_by_type),
    ("Policy", _policy_summary),
    ("Alerts", _alerts),
    ("Validation jobs", _validation_jobs),
]


#: Sections that describe the platform stack's own resources: a team job stack has none of
#: them, and its report points at the platform's instead of printing them empty.
PLATFORM_SECTIONS: frozenset[str] = frozenset(
    {
        "Managed node groups",
        "Queues and quotas",
        "Network topology",
        "Karpenter NodePools",
        "Reserved capacity",
        "Idle cost",
        "Alerts",
        "Storage",
        "Validation jobs",
    }
)


def report(result: SynthResult) -> str:
    parts = [f"# gpu-platform — synthesized stack `{result.stack}`\n"]
    parts.append(
        "Generated offline by `python -m synth` from the same `__main__.py` and stack files "
        "`pulumi up` uses.\n"
    )
    job_stack = result.platform is not None
    if job_stack:
        parts.append(
            "A team job stack: its jobs are judged against the platform stack's config (\"Will "
            "it run\"); capacity, quotas, costs, alerts and storage are in the platform stack's "
            f"report ({', '.join(h for h, _ in REPORT_SECTIONS if h in PLATFORM_SECTIONS)}).\n"
        )
    for heading, render in REPORT_SECTIONS:
        if job_stack and heading in PLATFORM_SECTIONS:
            continue
        parts.append(f"## {heading}\n\n{render(result)}\n")
        if heading == "Will it run" and result.fleet is not None:
            parts.append(f"## Fleet\n\n{_fleet(result)}\n")
    return "\n".join(parts)


def _deletion_guard(bucket: Registration) -> str:
    options = [
        label
        for label, on in (("protect", bucket.protect), ("retainOnDelete", bucket.retain_on_delete))
        if on
    ]
    if options:
        return " + ".join(options)
    return "none (forceDestroy)" if bucket.inputs.get("forceDestroy") else "none"


def _bucket_table(result: SynthResult) -> str:
    """One row per bucket: encryption, versioning, public blocks, policy, lifecycle, logs."""
    rows = [_bucket_row(result, bucket) for bucket in result.of_type("aws:s3/bucket:Bucket")]
    return _table(
        [
            "bucket",
            "encryption",
            "versioning",
            "public blocks",
            "policy",
            "lifecycle",
            "access log",
            "deletion guard",
        ],
        rows,
    )


def _for_bucket(result: SynthResult, token: str, bucket: str) -> list[Registration]:
    """The resources of type `token` that configure bucket `bucket`."""
    return [r for r in result.of_type(token) if r.inputs.get("bucket") == bucket]


def _bucket_row(result: SynthResult, bucket: Registration) -> list[str]:
    """One bucket's row: what each of its configuration resources sets, or that it is absent."""
    name = str(bucket.inputs.get("bucket", bucket.name))
    sse = _for_bucket(
        result,
        "aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
        name,
    )
    algorithm = (
        sse[0].inputs["rules"][0]["applyServerSideEncryptionByDefault"]["sseAlgorithm"]
        if sse
        else "none"
    )
    versioning = _for_bucket(result, "aws:s3/bucketVersioning:BucketVersioning", name)
    public = _for_bucket(result, "aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", name)
    flags = (
        "blockPublicAcls",
        "blockPublicPolicy",
        "ignorePublicAcls",
        "restrictPublicBuckets",
    )
    lifecycle = _for_bucket(
        result, "aws:s3/bucketLifecycleConfiguration:BucketLifecycleConfiguration", name
    )
    logging = _for_bucket(result, "aws:s3/bucketLogging:BucketLogging", name)
    return [
        f"`{name}`",
        algorithm,
        versioning[0].inputs["versioningConfiguration"]["status"] if versioning else "off",
        "all 4" if public and all(public[0].inputs.get(f) for f in flags) else "incomplete",
        "TLS-only" if _for_bucket(result, "aws:s3/bucketPolicy:BucketPolicy", name) else "none",
        ", ".join(rule["id"] for rule in lifecycle[0].inputs["rules"]) if lifecycle else "none",
        "yes" if logging else "no",
        _deletion_guard(bucket),
    ]


#: A cost row: item, basis, USD/month unit, USD/month.
CostRow = list[str]


def _fsx(result: SynthResult, cost: FsxCost | None) -> tuple[list[str], list[CostRow]]:
    """The FSx for Lustre file system Pulumi creates (compression, key, subnet) with the
    figures the facts priced it at (analysis/costs.py FsxCost): a line and a cost row."""
    if cost is None:
        return [], []
    (fs,) = result.of_type("aws:fsx/lustreFileSystem:LustreFileSystem")
    inputs = fs.inputs
    line = (
        f"RWX file system: FSx for Lustre `{cost.deployment}`, {cost.capacity_gib:,} GiB SSD, "
        f"{cost.tier} MB/s/TiB → {cost.throughput_mbps:,.0f} MB/s aggregate, compression "
        f"{inputs.get('dataCompressionType', 'NONE')}, KMS-encrypted: "
        f"{'yes' if inputs.get('kmsKeyId') else 'no'}, subnet `{inputs.get('subnetIds')}`."
    )
    row = [
        f"FSx for Lustre {cost.deployment}/{cost.tier}",
        f"{cost.capacity_gib:,} GiB provisioned",
        f"{cost.rate.usd_per_gb_month:.3f}/GB",
        f"{cost.usd_per_month:,.2f}",
    ]
    return [line], [row]


def _efs(result: SynthResult, cost: EfsCost | None) -> tuple[list[str], list[CostRow]]:
    """The EFS file system Pulumi creates (modes, encryption, mount targets) with the figures
    the facts priced it at (analysis/costs.py EfsCost): a line and its cost rows."""
    if cost is None:
        return [], []
    (fs,) = result.of_type("aws:efs/fileSystem:FileSystem")
    inputs = fs.inputs
    targets = [
        m for m in result.of_type("aws:efs/mountTarget:MountTarget") if m.parent == fs.parent
    ]
    mode = inputs.get("throughputMode", "bursting")
    line = (
        f"RWX file system: EFS `{inputs.get('performanceMode')}`, throughput mode `{mode}`"
        + (
            f" ({inputs.get('provisionedThroughputInMibps')} MiB/s)"
            if mode == "provisioned"
            else ""
        )
        + f", encrypted: {'yes' if inputs.get('encrypted') else 'no'}, "
        f"{len(targets)} mount targets (one per private subnet)."
    )
    rows = [
        [
            "EFS Standard",
            "per GB stored",
            f"{cost.rate.usd_per_gb_month:.2f}/GB",
            f"{cost.rate.usd_per_tib_month:,.2f} per TiB",
        ]
    ]
    if cost.provisioned_mibps is not None:
        rows.append(
            [
                "EFS provisioned throughput",
                f"{cost.provisioned_mibps:g} MiB/s",
                f"{catalog.EFS_PROVISIONED_USD_PER_MIBPS_MONTH:.2f}/MiB/s",
                f"{cost.throughput_usd_per_month:,.2f}",
            ]
        )
    return [line], rows


def _storage(result: SynthResult) -> str:
    """Buckets with their protections, the RWX file system, throughput and monthly cost (the
    prices and figures: analysis/costs.py StorageCost; the KMS keys: a count of the stack)."""
    cost = _costs(result).storage
    parts = [_bucket_table(result)]
    keys = len(result.of_type("aws:kms/key:Key"))
    cost_rows = [
        [
            "S3 STANDARD",
            "per GB stored",
            f"{cost.s3_standard.usd_per_gb_month:.4f}/GB",
            f"{cost.s3_standard.usd_per_tib_month:,.2f} per TiB",
        ],
        [
            "S3 STANDARD_IA (old checkpoints)",
            "per GB stored",
            f"{cost.s3_standard_ia.usd_per_gb_month:.4f}/GB",
            f"{cost.s3_standard_ia.usd_per_tib_month:,.2f} per TiB",
        ],
        [
            "KMS customer keys (all areas)",
            f"{keys} keys",
            f"{catalog.KMS_KEY_USD_PER_MONTH:.2f}/key",
            f"{cost.kms_usd_per_month(keys):,.2f}",
        ],
    ]
    for lines, rows in (_fsx(result, cost.fsx), _efs(result, cost.efs)):
        parts += lines
        cost_rows += rows
    classes = [
        r.inputs["metadata"]["name"]
        for r in result.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    ]
    parts.append(f"StorageClasses: {', '.join(f'`{c}`' for c in sorted(classes))}.")
    parts.append(_table(["item", "basis", "USD/month unit", "USD/month"], cost_rows))
    parts.append(
        f"Fixed monthly storage cost (provisioned capacity and keys, before any data): "
        f"**${cost.fixed_usd_per_month(keys):,.2f}**; S3 and EFS add the per-GB figures above "
        "for what is stored. Prices: components/catalog.py (us-east-1 list prices, date and "
        "source there)."
    )
    return "\n\n".join(parts)


REPORT_SECTIONS.insert(len(REPORT_SECTIONS) - 1, ("Storage", _storage))


# --- training jobs ------------------------------------------------------------------------------


#: Launcher objects of training jobs (components/training_jobs/training.py).
def training_job_rows(result: SynthResult) -> list[dict[str, Any]]:
    """One row per training job, from the plan the program built its objects from (the
    composition root's `plans`, components/training_jobs/plan.py) and the job's facts (its
    nodes' $/h, planned waste at the plan's checkpoint interval). The plan annotations on the
    launcher objects are deployed metadata for operators, never read back here: they are
    rounded (the checkpoint interval to a second)."""
    rows = []
    for plan in result.plans or ():
        job = plan.job
        nodes, instance = job.nodes, plan.resources.instance_type
        rows.append(
            {
                "job": f"{plan.namespace}/{plan.name}",
                "mode": job.mode,
                "launcher": job.launcher,
                "scheduler": job.scheduler,
                "placement": f"{nodes} x {instance} ({job.gpu_class}, {job.capacity})",
                "world_size": plan.world_size,
                "effective_batch": plan.effective_batch or "-",
                "spot_usd_h": plan.facts.hourly.spot,
                "on_demand_usd_h": plan.facts.hourly.on_demand,
                "interval_s": plan.interval_s,
                "waste": plan.facts.planned_waste,
            }
        )
    return sorted(rows, key=lambda row: str(row["job"]))


def _training_jobs(result: SynthResult) -> str:
    rows = training_job_rows(result)
    if not rows:
        return "No training jobs declared (`gpu-platform:trainingJobs`)."
    table = _table(
        [
            "job",
            "mode",
            "launcher / scheduler",
            "placement",
            "world size",
            "effective batch",
            "$/h spot",
            "$/h on-demand",
            "checkpoint every",
            "time lost",
        ],
        [
            [
                f"`{row['job']}`",
                row["mode"],
                f"{row['launcher']} / {row['scheduler']}",
                row["placement"],
                row["world_size"],
                row["effective_batch"],
                f"{row['spot_usd_h']:.2f}",
                f"{row['on_demand_usd_h']:.2f}",
                f"{row['interval_s'] / 60:.1f} min",
                f"{row['waste']:.1%}",
            ]
            for row in rows
        ],
    )
    return (
        table + "\n\nWorld size = nodes x GPUs per node; effective batch (DeepSpeed) = micro x "
        "accumulation x world size. $/h = nodes x the catalog's planning price of the smallest "
        "instance type the pools launch for the class. Checkpoint interval: Young/Daly from the "
        "job's save-blocking time and MTBF unless overridden; time lost = saving plus expected "
        "rework and restarts after ungraceful failures (docs/training-jobs.md)."
    )


REPORT_SECTIONS.insert(len(REPORT_SECTIONS) - 1, ("Training jobs", _training_jobs))

from synth import report_plan  # noqa: E402 - its sections need this module's list first

REPORT_SECTIONS[:0] = [("Will it run", report_plan.will_it_run)]


def _fleet(result: SynthResult) -> str:
    from synth.report_fleet import fleet_section

    return fleet_section(result)


REPORT_SECTIONS.append(("Deploy plan", report_plan.deploy_plan))
