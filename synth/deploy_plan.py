"""The deploy plan: the order `pulumi up` creates things in, what each step waits for and how
long, and the ordering bugs the dependency graph shows. Pure over a `SynthResult`.

Waves: a resource's wave is one more than the latest wave among what it depends on (its
dependencies, with a component expanded to the custom resources under it, its parent and its
explicit provider). The
engine starts a resource as soon as those are done, so wave N runs after wave N-1 at the
earliest, and a wave lasts as long as its slowest await.

What pulumi-kubernetes awaits (pulumi/pulumi-kubernetes@v4.32.0, runs.md items 5/6):
- batch/v1 Job: until Complete (10 min default, provider/pkg/await/job.go) unless
  `pulumi.com/skipAwait: "true"`;
- PersistentVolumeClaim: Bound (5 min, hard-coded) — Pending suffices for a WaitForFirstConsumer
  class (provider/pkg/await/awaiters.go#L288-322);
- Service: headless or selector-less ones only the object; others endpoints (10 min);
- Deployment/StatefulSet/DaemonSet: rollout ready (10 min);
- custom resources: not awaited unless `pulumi.com/waitFor` (provider/pkg/metadata/overrides.go);
- helm.sh/v3 Release: Helm `--wait` on, `timeout` (300 s default), `atomic` rolls back
  (provider/pkg/provider/helm_release.go#L63-64, #L608).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from components import addons
from synth.harness import Registration, SynthResult

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
#: API group of a custom resource -> the chart (Helm release `chart` suffix) that installs its CRD
#: (the add-on registry's `crd_groups`).
CRD_OWNERS: dict[str, str] = addons.crd_owners()
#: Built-in API groups of typed pulumi-kubernetes resources (`kubernetes:<group>/<v>:<Kind>`).
BUILTIN_GROUPS = frozenset(
    {
        "core",
        "apps",
        "batch",
        "rbac.authorization.k8s.io",
        "networking.k8s.io",
        "storage.k8s.io",
        "scheduling.k8s.io",
        "policy",
        "admissionregistration.k8s.io",
        "helm.sh",
        "yaml",
        "apiextensions.k8s.io",
    }
)
KUEUE_QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: Namespaces Kueue's `mjob.kb.io` webhook skips by default; it is failurePolicy Fail with no
#: objectSelector, so every other Job create calls it (kubernetes-sigs/kueue@v0.19.2:
#: charts/kueue/templates/webhook/manifests.yaml#L158-170; runs.md Q5): kube-system and the
#: release's namespace (the add-on registry's `kueue_webhook_exempt`).
KUEUE_WEBHOOK_EXEMPT = addons.kueue_webhook_exempt()
#: AWS resources whose create waits for a state (pulumi-aws inherits the Terraform AWS
#: provider's default create timeouts: aws_eks_cluster 30m, aws_eks_node_group 60m,
#: aws_eks_addon 20m — the "timeout: 20m0s" of pulumi/pulumi-eks#1819, runs.md Q4).
AWS_WAITS: dict[str, tuple[str, int]] = {
    "eks:index:Cluster": ("cluster ACTIVE (EKS control plane)", 1800),
    "eks:index:ManagedNodeGroup": ("node group ACTIVE (desired nodes joined)", 3600),
    "aws:eks/nodeGroup:NodeGroup": ("node group ACTIVE (desired nodes joined)", 3600),
    "aws:eks/addon:Addon": ("add-on ACTIVE (its pods running)", 1200),
}


@dataclass(frozen=True)
class Step:
    """One resource in the plan."""

    urn: str
    type: str
    name: str
    wave: int
    awaits: str
    timeout_s: int


def _group(type_token: str) -> str:
    # kubernetes:<group>/<version>:<Kind>; core resources are `kubernetes:core/v1:...`.
    return type_token.split(":")[1].rsplit("/", 1)[0]


def _kind(resource: Registration) -> str:
    return resource.type.split(":")[-1]


def _annotations(resource: Registration) -> dict[str, str]:
    return (resource.inputs.get("metadata") or {}).get("annotations") or {}


def _labels(resource: Registration) -> dict[str, str]:
    return (resource.inputs.get("metadata") or {}).get("labels") or {}


def is_custom_resource(resource: Registration) -> bool:
    return resource.type.startswith("kubernetes:") and _group(resource.type) not in BUILTIN_GROUPS


def await_rule(resource: Registration) -> tuple[str, int]:
    """What `up` waits for after creating `resource`, and the timeout in seconds (0: nothing)."""
    typ, inputs = resource.type, resource.inputs
    skip = _annotations(resource).get("pulumi.com/skipAwait") == "true"
    custom = dict(resource.custom_timeouts).get("create")
    if typ == HELM_RELEASE:
        if inputs.get("skipAwait"):
            return "release installed (skipAwait)", 0
        timeout = int(inputs.get("timeout") or 300)
        atomic = " (atomic: rolled back on failure)" if inputs.get("atomic") else ""
        return f"every chart resource ready{atomic}", timeout
    if typ in AWS_WAITS:
        return AWS_WAITS[typ]
    if not typ.startswith("kubernetes:"):
        return ("created by the provider" if resource.custom else "component"), 0
    if skip:
        return "created (skipAwait)", 0
    if custom:
        return f"ready (customTimeouts create {custom})", 0
    if typ == "kubernetes:batch/v1:Job":
        return "Job Complete", 600
    if typ == "kubernetes:core/v1:PersistentVolumeClaim":
        return "claim Bound", 300
    if typ == "kubernetes:core/v1:Service":
        spec = inputs.get("spec") or {}
        if spec.get("clusterIP") == "None" or not spec.get("selector"):
            return "object only (headless/selector-less)", 0
        return "endpoints ready", 600
    if typ.split(":")[-1] in ("Deployment", "StatefulSet", "DaemonSet"):
        return "rollout ready", 600
    if is_custom_resource(resource):
        return "created, not awaited (custom resource)", 0
    return "created", 0


def _closure(result: SynthResult) -> tuple[dict[str, set[str]], dict[str, Registration]]:
    """Direct prerequisites of every resource: dependencies (components expanded to the custom
    resources below them) and the parent."""
    by_urn = {r.urn: r for r in result.resources}
    children: dict[str, list[str]] = {}
    for r in result.resources:
        if r.parent:
            children.setdefault(r.parent, []).append(r.urn)

    def expand(urn: str) -> Iterable[str]:
        node = by_urn.get(urn)
        if node is None or node.custom:
            yield urn
            return
        yield urn
        for child in children.get(urn, []):
            yield from expand(child)

    deps: dict[str, set[str]] = {}
    for r in result.resources:
        prereqs: set[str] = set()
        for dep in r.dependencies:
            prereqs.update(u for u in expand(dep) if u != r.urn)
        if r.parent and r.parent in by_urn:
            prereqs.add(r.parent)
        # A resource waits for its explicit provider (`<provider urn>::<id>`): every Kubernetes
        # object waits for the kubeconfig of the cluster it goes to.
        provider = r.provider.rsplit("::", 1)[0] if r.provider else ""
        if provider in by_urn:
            prereqs.add(provider)
        deps[r.urn] = prereqs
    return deps, by_urn


def plan(result: SynthResult) -> list[Step]:
    """Every resource with its wave, in wave order."""
    deps, by_urn = _closure(result)
    wave: dict[str, int] = {}

    def wave_of(urn: str, stack: frozenset[str] = frozenset()) -> int:
        if urn in wave:
            return wave[urn]
        if urn in stack:  # a cycle would be an engine error; do not recurse forever
            return 0
        before = [wave_of(d, stack | {urn}) for d in deps.get(urn, ()) if d in by_urn]
        node = by_urn[urn]
        own = 1 if node.custom else 0
        wave[urn] = max(before, default=0) + own
        return wave[urn]

    steps = []
    for r in result.resources:
        awaits, timeout = await_rule(r)
        steps.append(Step(r.urn, r.type, r.name, wave_of(r.urn), awaits, timeout))
    return sorted(steps, key=lambda s: (s.wave, s.urn))


def ancestors(result: SynthResult, urn: str) -> set[str]:
    """Everything `urn` transitively waits for."""
    return _ancestors(_closure(result)[0], urn)


def _ancestors(deps: dict[str, set[str]], urn: str) -> set[str]:
    seen: set[str] = set()
    todo = [urn]
    while todo:
        for dep in deps.get(todo.pop(), ()):
            if dep not in seen:
                seen.add(dep)
                todo.append(dep)
    return seen


class _Ancestry:
    """What each resource transitively waits for, and whether a chart's release is among it."""

    def __init__(self, result: SynthResult) -> None:
        self.releases = {
            r.urn: str(r.inputs.get("chart", "")) for r in result.of_type(HELM_RELEASE)
        }
        # A job stack's objects go to its platform's cluster (a fleet job stack's: the
        # manager's), whose releases `up` of the platform finished before any job stack runs.
        platform = result.platform.of_type(HELM_RELEASE) if result.platform is not None else []
        self.deployed = [str(r.inputs.get("chart", "")) for r in platform]
        # One dependency closure for the whole check: building it per resource made the check
        # quadratic in the number of teams (tests/synth/test_scale.py counts the work per team).
        self._deps, _ = _closure(result)
        self._memo: dict[str, set[str]] = {}

    def of(self, urn: str) -> set[str]:
        """Everything `urn` transitively waits for (computed once per resource)."""
        if urn not in self._memo:
            self._memo[urn] = _ancestors(self._deps, urn)
        return self._memo[urn]

    def after_chart(self, urn: str, chart: str) -> bool:
        """Whether `urn` waits for a release of `chart` (an OCI `<registry>/<chart>` counts), or
        the platform stack a job stack deploys into has one."""
        if any(c == chart or c.endswith(f"/{chart}") for c in self.deployed):
            return True
        before = self.of(urn)
        return any(
            u in before and (c == chart or c.endswith(f"/{chart}"))
            for u, c in self.releases.items()
        )


def ordering_problems(result: SynthResult) -> list[str]:
    """Ordering bugs: a custom resource created before its CRD's Helm release, a Kueue-labelled
    Job not after the Kueue release (its webhook must suspend the Job on create) or any other
    Job its webhook intercepts created before it answers, an awaited
    Job that Kueue suspends (it never completes: `up` fails after 10 min), and a claim created
    before its StorageClass."""
    ancestry = _Ancestry(result)
    classes = {
        (r.inputs.get("metadata") or {}).get("name"): r.urn
        for r in result.of_type("kubernetes:storage.k8s.io/v1:StorageClass")
    }
    kueue_installed = any(c.endswith("kueue") for c in ancestry.releases.values())
    found: list[str] = []
    for r in result.resources:
        if not r.type.startswith("kubernetes:") or r.type == HELM_RELEASE:
            continue
        found += _claim_problems(r, classes, ancestry)
        found += _crd_problems(r, ancestry)
        found += _kueue_problems(r, ancestry, kueue_installed=kueue_installed)
    return found


def _claim_problems(
    r: Registration, classes: dict[str | None, str], ancestry: _Ancestry
) -> list[str]:
    """A dynamically provisioned claim must wait for its StorageClass (its await is 5 min)."""
    if r.type != "kubernetes:core/v1:PersistentVolumeClaim":
        return []
    spec = r.inputs.get("spec") or {}
    wanted = spec.get("storageClassName")
    # A claim naming its PV (static binding) binds without the class or a provisioner.
    dynamic = not spec.get("volumeName")
    if dynamic and wanted in classes and classes[wanted] not in ancestry.of(r.urn):
        return [
            f"{r.name}: claim does not depend on StorageClass {wanted}: it is "
            "provisioned only once the class and its CSI driver exist, and the PVC "
            "await gives it 5 min to be Bound"
        ]
    return []


def _crd_problems(r: Registration, ancestry: _Ancestry) -> list[str]:
    """A custom resource must wait for the release that installs its CRD."""
    owner = CRD_OWNERS.get(_group(r.type))
    if is_custom_resource(r) and owner and not ancestry.after_chart(r.urn, owner):
        return [
            f"{r.name}: {_kind(r)} is not created after the {owner} release that installs its CRD"
        ]
    return []


def _kueue_problems(r: Registration, ancestry: _Ancestry, *, kueue_installed: bool) -> list[str]:
    """Jobs Kueue's webhook sees must wait for it, and a Job Kueue suspends is never awaited."""
    found: list[str] = []
    queued = KUEUE_QUEUE_LABEL in _labels(r)
    namespace = (r.inputs.get("metadata") or {}).get("namespace", "")
    if queued and not ancestry.after_chart(r.urn, "kueue"):
        found.append(
            f"{r.name}: Kueue-labelled {_kind(r)} does not depend on the Kueue release "
            "(its webhook must be up)"
        )
    elif (
        r.type == "kubernetes:batch/v1:Job"
        and kueue_installed
        and namespace not in KUEUE_WEBHOOK_EXEMPT
        and not ancestry.after_chart(r.urn, "kueue")
    ):
        found.append(
            f"{r.name}: Job in {namespace} is not created after the Kueue release, whose "
            "job webhook (failurePolicy Fail) intercepts every Job outside "
            f"{' and '.join(sorted(KUEUE_WEBHOOK_EXEMPT))}"
        )
    if (
        r.type == "kubernetes:batch/v1:Job"
        and (queued or (r.inputs.get("spec") or {}).get("suspend"))
        and await_rule(r)[1] > 0
    ):
        found.append(
            f"{r.name}: Job is awaited until Complete but starts suspended (Kueue): "
            "set pulumi.com/skipAwait"
        )
    return found


#: Extended resources and the chart whose device plugin advertises them on nodes: without it
#: the kubelet never reports the resource and a pod requesting it stays Pending (the add-on
#: registry's `advertises`).
DEVICE_PLUGINS: dict[str, str] = addons.device_plugins()


def _requests(value: object, found: set[str]) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("requests", "limits") and isinstance(item, dict):
                found.update(item)
            _requests(item, found)
    elif isinstance(value, list):
        for item in value:
            _requests(item, found)


def prerequisite_problems(result: SynthResult) -> list[str]:
    """Pods requesting an extended resource that no deployed device plugin advertises. A team
    job stack's device plugins are the platform stack's (the synth its StackReference read)."""
    # Where the pods run: this cluster; a job stack's platform; a fleet job stack's every worker
    # (MultiKueue may run the job on any of them).
    clusters: dict[str, list[Registration]] = {"": result.of_type(HELM_RELEASE)}
    platform = result.platform
    if platform is not None and platform.workers:
        clusters = {
            f" on worker {name}": w.of_type(HELM_RELEASE) for name, w in platform.workers.items()
        }
    elif platform is not None:
        clusters[""] += platform.of_type(HELM_RELEASE)
    found: list[str] = []
    for r in result.resources:
        if not r.type.startswith("kubernetes:") or r.type == HELM_RELEASE:
            continue
        wanted: set[str] = set()
        _requests(r.inputs.get("spec"), wanted)
        for where, releases in clusters.items():
            charts = [str(x.inputs.get("chart", "")) for x in releases]
            for resource, chart in sorted(DEVICE_PLUGINS.items()):
                if resource in wanted and not any(c.endswith(chart) for c in charts):
                    found.append(
                        f"{r.name}: requests {resource}, but no {chart} release advertises "
                        f"it{where}: its pods stay Pending"
                    )
    return found
