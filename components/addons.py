"""The add-on registry: one frozen row per thing the platform installs into a namespace of its
own — a Helm chart, an EKS managed add-on, or objects the program renders itself (the GPU
validation tests, the FSx team-directory Jobs) — and every list about add-ons derived from
the rows.

A row says what the add-on is (chart and repository or OCI reference, the config key of its
version, its release name), where it lives (namespace, the config key that moves it, who
creates the namespace), what its namespace enforces (Pod Security level), what it installs
that other objects need (CRDs: their API groups and the vendored copies under schemas/crds;
extended resources its device plugin advertises), how long `pulumi up` waits for it, whether
Kueue's Job webhook skips its namespace, and whether a stack installs it (a predicate over the
stack's config; a fleet's manager has its own). What reads the rows:

- the one Helm release builder, components/platform/addons.py `helm_release`, and the
  components that install each add-on (its namespace, Pod Security level, pinned version);
- the team-namespace check (components/analysis/addons.py, before any resource is registered):
  a team may take neither a namespace an add-on the stack installs uses — where the stack's
  config put it — nor one of Kubernetes' own; a fleet's manager holds the fleet's teams to its
  own add-ons;
- the policy pack: its platform-namespace default, the exemptions of the restricted-pod and
  host-access rules (`namespaces_at`), the fleet rules' Kueue namespace, and the collision rule
  `gpu-platform-k8s-team-namespace-not-platform` (where an EKS add-on puts itself);
- the deploy plan (CRD owners, Kueue's webhook exemption, device plugins: synth/deploy_plan.py)
  and the real-engine tier (the vendored CRDs a chart installs: synth/engines/deploy.py);
- tests/test_addons.py: every namespace a stack renders outside its team namespaces belongs to
  an add-on the stack installs, every installed chart is rendered as its row says and nothing
  else is, and the rows agree with the config model and the vendored charts and CRDs.

It sits beside components/catalog.py (layer 0, the standard library only): the config model,
the analysis, the components, synth and the policy pack (which runs without pydantic) may all
read it. So the predicates take the config untyped (`Any`): a `StackConfig`
(components/config/stack.py) or, for a fleet's manager, a `FleetManagerConfig`; every predicate
runs on every committed stack in tests/test_addons.py, against what the stack renders.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Literal

#: Pod Security Standard levels (kubernetes/pod-security-admission).
PssLevel = Literal["privileged", "baseline", "restricted"]
#: Who creates the add-on's namespace: the program (a Namespace object it renders, with its
#: Pod Security label where it has one), Helm (`createNamespace`), EKS (a managed add-on), or
#: nobody (it exists: one of Kubernetes' own).
NamespaceMode = Literal["program", "helm", "eks", "exists"]

#: Kubernetes' own namespaces, which no add-on and no team may claim, with the level the policy
#: pack holds pods rendered there to (`Addon.pod_security`): kube-system runs the cluster's
#: daemons (CNI, CSI node drivers, device plugins). Names: kubernetes/api@v0.33.9
#: core/v1/types.go L27-32 (NamespaceDefault, NamespaceNodeLease) and
#: kubernetes/apimachinery@v0.33.9 pkg/apis/meta/v1/types.go L286-288 (NamespaceSystem,
#: NamespacePublic).
KUBERNETES_NAMESPACES: Final[Mapping[str, PssLevel]] = {
    "default": "restricted",
    "kube-node-lease": "restricted",
    "kube-public": "restricted",
    "kube-system": "privileged",
}

#: A predicate over a stack's config (or a fleet manager's): whether it installs the add-on.
Installed = Callable[[Any], bool]


def _always(_cfg: Any) -> bool:
    return True


@dataclass(frozen=True)
class Addon:
    """One add-on: what it is, where it lives, what it installs, and when a stack has it."""

    #: Registry key (also what messages call it).
    key: str
    #: What it is, in a few words (the team-namespace error lists it).
    title: str
    #: Its namespace by default (the one the policy pack's defaults name).
    namespace: str
    #: Who creates that namespace (NamespaceMode).
    namespace_mode: NamespaceMode
    #: The level pods in its namespace are held to: what the namespace enforces where the program
    #: renders it with a Pod Security label, and what the policy pack checks pod templates
    #: rendered there against — `restricted`: every rule; `baseline`: outside the restricted-pod
    #: rule; `privileged`: outside the host-access rules (privileged, hostPath, host
    #: namespaces, GPU toleration) too (policies/rules/security.py, kubernetes.py).
    pod_security: PssLevel
    #: Whether a stack installs it (StackConfig); `manager`: whether a fleet's manager does
    #: (FleetManagerConfig), None when a manager never does.
    installed: Installed = _always
    manager: Installed | None = None
    #: The config key (camelCase, from the stack's root) that moves its namespace, and the other
    #: values that key allows besides `namespace` where the model lists them (a Literal); a
    #: manager's key where it differs.
    namespace_key: str | None = None
    namespace_choices: tuple[str, ...] = ()
    manager_namespace_key: str | None = None
    #: Kueue's `mjob.kb.io` webhook (failurePolicy Fail) skips its namespace: the chart selects
    #: namespaces NotIn [kube-system, the release's namespace]
    #: (kubernetes-sigs/kueue@v0.19.2 charts/kueue/templates/webhook/manifests.yaml L158-170).
    kueue_webhook_exempt: bool = False
    # --- a Helm chart -----------------------------------------------------------------------
    #: The Helm release name; None: no chart (an EKS add-on or the program's own objects).
    release: str | None = None
    #: The release's `chart`: a chart name in `repository`, or a full `oci://` reference.
    chart: str | None = None
    repository: str | None = None
    #: The config key of its version (camelCase, from the stack's root); `version`: pinned in
    #: the registry instead (no key), or an EKS add-on's build.
    version_key: str | None = None
    version: str | None = None
    #: Helm `--wait` budget in seconds (pulumi-kubernetes' default is 300:
    #: pulumi/pulumi-kubernetes@v4.32.0 provider/pkg/provider/helm_release.go#L63-64); every
    #: release is atomic (a failed install is rolled back).
    timeout_s: int = 300
    #: The chart's CRDs come from another release (Karpenter's CRD chart).
    skip_crds: bool = False
    #: API groups of the CRDs it installs that the program renders objects of, and the folder of
    #: schemas/crds holding the vendored copies (schemas/SOURCES.md), if any.
    crd_groups: tuple[str, ...] = ()
    crds: str | None = None
    #: Extended resources its device plugin advertises on nodes.
    advertises: tuple[str, ...] = ()
    #: The EKS managed add-on name, for an EKS add-on.
    eks_addon: str | None = None

    @property
    def chart_name(self) -> str | None:
        """The chart's own name (an OCI reference's last segment)."""
        return self.chart.rsplit("/", 1)[-1] if self.chart is not None else None

    @property
    def namespaces(self) -> tuple[str, ...]:
        """Every namespace it may live in: its default and what its key allows besides."""
        return (self.namespace, *self.namespace_choices)


# --- the rows ------------------------------------------------------------------------------------

KUEUE: Final = Addon(
    key="kueue",
    title="Kueue",
    namespace="kueue-system",
    namespace_mode="program",
    pod_security="restricted",
    manager=_always,
    kueue_webhook_exempt=True,
    release="kueue",
    chart="oci://registry.k8s.io/kueue/charts/kueue",
    version_key="scheduling.kueueChartVersion",
    # Two controller replicas and webhook certificates on the system nodes, image pulls included.
    timeout_s=600,
    crd_groups=("kueue.x-k8s.io",),
    crds="kueue",
)
VOLCANO: Final = Addon(
    key="volcano",
    title="Volcano",
    namespace="volcano-system",
    namespace_mode="program",
    pod_security="restricted",
    release="volcano",
    chart="volcano",
    repository="https://volcano-sh.github.io/helm-charts",
    version_key="scheduling.volcanoChartVersion",
    timeout_s=600,
    crd_groups=("scheduling.volcano.sh", "batch.volcano.sh"),
    crds="volcano",
)
TRAINER: Final = Addon(
    key="kubeflow-trainer",
    title="Kubeflow Trainer",
    namespace="kubeflow-system",
    namespace_mode="program",
    pod_security="restricted",
    manager=_always,
    release="kubeflow-trainer",
    chart="oci://ghcr.io/kubeflow/charts/kubeflow-trainer",
    version_key="scheduling.trainerChartVersion",
    timeout_s=600,
    crd_groups=("trainer.kubeflow.org",),
    crds="kubeflow-trainer",
)
#: Karpenter's namespace may be `karpenter` (config's Literal); the program renders no pod
#: there, and the level keeps the pack's host-access exemption of that namespace.
KARPENTER_CRD: Final = Addon(
    key="karpenter-crd",
    title="Karpenter CRDs",
    namespace="kube-system",
    namespace_mode="exists",
    pod_security="privileged",
    namespace_key="karpenter.namespace",
    namespace_choices=("karpenter",),
    release="karpenter-crd",
    chart="oci://public.ecr.aws/karpenter/karpenter-crd",
    version_key="karpenter.chartVersion",
    # CRDs only: nothing to wait for beyond the apply.
    timeout_s=300,
    crd_groups=("karpenter.sh", "karpenter.k8s.aws"),
    crds="karpenter-provider-aws",
)
KARPENTER: Final = Addon(
    key="karpenter",
    title="Karpenter",
    namespace="kube-system",
    namespace_mode="exists",
    pod_security="privileged",
    namespace_key="karpenter.namespace",
    namespace_choices=("karpenter",),
    release="karpenter",
    chart="oci://public.ecr.aws/karpenter/karpenter",
    version_key="karpenter.chartVersion",
    # Controller pods on the system nodes: ready within minutes.
    timeout_s=600,
    skip_crds=True,
)
CLUSTER_AUTOSCALER: Final = Addon(
    key="cluster-autoscaler",
    title="cluster-autoscaler",
    namespace="kube-system",
    namespace_mode="exists",
    pod_security="privileged",
    installed=lambda cfg: cfg.autoscaler_deployed,
    release="cluster-autoscaler",
    chart="cluster-autoscaler",
    repository="https://kubernetes.github.io/autoscaler",
    version_key="clusterAutoscaler.chartVersion",
    timeout_s=300,
)
#: Operands mount host paths and run privileged (device plugin, DCGM, validator).
GPU_OPERATOR: Final = Addon(
    key="gpu-operator",
    title="NVIDIA GPU Operator",
    namespace="gpu-operator",
    namespace_mode="program",
    pod_security="privileged",
    namespace_key="gpuOperator.namespace",
    release="gpu-operator",
    chart="gpu-operator",
    repository="https://helm.ngc.nvidia.com/nvidia",
    version_key="gpuOperator.chartVersion",
    # The longest budget of all releases: its DaemonSets (device plugin, DCGM, feature
    # discovery, validator) pull multi-GB images on every GPU node that exists at install.
    timeout_s=1200,
    crd_groups=("nvidia.com",),
    advertises=("nvidia.com/gpu",),
)
#: AWS EFA device plugin, on the stack's EFA instance types only. Chart version with its leading
#: `v` as published (aws/eks-charts@5239609:stable/aws-efa-k8s-device-plugin/Chart.yaml
#: `version: v0.5.30`, appVersion v0.5.20); values vendored in
#: schemas/charts/aws-efa-k8s-device-plugin/ (schemas/SOURCES.md).
EFA_DEVICE_PLUGIN: Final = Addon(
    key="aws-efa-k8s-device-plugin",
    title="AWS EFA device plugin",
    namespace="kube-system",
    namespace_mode="exists",
    pod_security="privileged",
    installed=lambda cfg: bool(cfg.efa_instance_types),
    release="aws-efa-k8s-device-plugin",
    chart="aws-efa-k8s-device-plugin",
    repository="https://aws.github.io/eks-charts",
    version="v0.5.30",
    # A DaemonSet on EFA types only; with no EFA node yet Helm has nothing to wait for.
    timeout_s=300,
    advertises=("vpc.amazonaws.com/efa",),
)
#: node-exporter needs host namespaces and hostPath mounts.
KUBE_PROMETHEUS_STACK: Final = Addon(
    key="kube-prometheus-stack",
    title="kube-prometheus-stack",
    namespace="monitoring",
    namespace_mode="program",
    pod_security="privileged",
    namespace_key="observability.namespace",
    release="kube-prometheus-stack",
    chart="kube-prometheus-stack",
    repository="https://prometheus-community.github.io/helm-charts",
    version_key="observability.chartVersion",
    # The chart's admission-webhook jobs are Helm hooks: wait for them.
    timeout_s=900,
    crd_groups=("monitoring.coreos.com",),
    crds="prometheus-operator",
)
#: Kyverno and ESO: Helm creates their namespaces; the program renders no pod there, and the
#: level keeps them outside the restricted-pod rule as docs/security.md states.
KYVERNO: Final = Addon(
    key="kyverno",
    title="Kyverno",
    namespace="kyverno",
    namespace_mode="helm",
    pod_security="baseline",
    installed=lambda cfg: cfg.security.image_admission.signatures.enabled,
    release="kyverno",
    chart="kyverno",
    repository="https://kyverno.github.io/kyverno/",
    version_key="security.imageAdmission.signatures.kyvernoChartVersion",
    # Helm waits for the webhook pods; 10 min covers a cold image pull on a fresh system node.
    timeout_s=600,
    crd_groups=("policies.kyverno.io",),
    crds="kyverno",
)
EXTERNAL_SECRETS: Final = Addon(
    key="external-secrets",
    title="External Secrets Operator",
    namespace="external-secrets",
    namespace_mode="helm",
    pod_security="baseline",
    installed=lambda cfg: cfg.security.secrets.enabled,
    # A fleet's manager syncs its workers' kubeconfigs with it (components/platform/fleet/).
    manager=_always,
    namespace_key="security.secrets.namespace",
    manager_namespace_key="secrets.namespace",
    release="external-secrets",
    chart="external-secrets",
    repository="https://charts.external-secrets.io",
    version_key="security.secrets.chartVersion",
    timeout_s=600,
    crd_groups=("external-secrets.io",),
    crds="external-secrets",
)
#: The CSI drivers: controller on system nodes, node DaemonSet everywhere; PVCs bind only once
#: the controller runs, so `up` waits for it.
EFS_CSI_DRIVER: Final = Addon(
    key="aws-efs-csi-driver",
    title="AWS EFS CSI driver",
    namespace="kube-system",
    namespace_mode="exists",
    pod_security="privileged",
    installed=lambda cfg: cfg.storage.rwx.type == "efs",
    release="aws-efs-csi-driver",
    chart="aws-efs-csi-driver",
    repository="https://kubernetes-sigs.github.io/aws-efs-csi-driver",
    version_key="storage.efsCsiChartVersion",
    timeout_s=600,
)
FSX_CSI_DRIVER: Final = Addon(
    key="aws-fsx-csi-driver",
    title="AWS FSx for Lustre CSI driver",
    namespace="kube-system",
    namespace_mode="exists",
    pod_security="privileged",
    installed=lambda cfg: cfg.storage.rwx.type == "fsx",
    release="aws-fsx-csi-driver",
    chart="aws-fsx-csi-driver",
    repository="https://kubernetes-sigs.github.io/aws-fsx-csi-driver",
    version_key="storage.fsxCsiChartVersion",
    timeout_s=600,
)
#: The add-on's namespace (EKS user guide, amazon-cloudwatch-observability: `eksctl create
#: iamserviceaccount --name cloudwatch-agent --namespace amazon-cloudwatch`); Fluent Bit and the
#: agent read host paths. Pinned build (confirm: `aws eks describe-addon-versions --addon-name
#: amazon-cloudwatch-observability --kubernetes-version 1.33`); chart 4.10.0's values vendored.
CLOUDWATCH_OBSERVABILITY: Final = Addon(
    key="amazon-cloudwatch-observability",
    title="CloudWatch Observability (EKS add-on)",
    namespace="amazon-cloudwatch",
    namespace_mode="eks",
    pod_security="privileged",
    installed=lambda cfg: cfg.security.logging.enabled,
    manager=lambda cfg: cfg.logging.enabled,
    eks_addon="amazon-cloudwatch-observability",
    version="v4.10.0-eksbuild.1",
)
#: Restricted like team namespaces: the tests prove GPUs and NCCL work from a restricted pod.
GPU_VALIDATION: Final = Addon(
    key="gpu-validation",
    title="GPU validation (smoke Jobs, NCCL test)",
    namespace="gpu-validation",
    namespace_mode="program",
    pod_security="restricted",
    installed=lambda cfg: cfg.validation.enabled,
    namespace_key="validation.namespace",
)
#: The FSx team-directory Jobs: root and CAP_CHOWN, which baseline admits and nothing privileged
#: (components/platform/storage/fsx_team_dirs.py).
FSX_TEAM_DIRS: Final = Addon(
    key="fsx-team-dirs",
    title="FSx team-directory Jobs",
    namespace="gpu-platform-storage",
    namespace_mode="program",
    pod_security="baseline",
    installed=lambda cfg: cfg.storage.rwx.type == "fsx",
)

#: Every add-on, in the order a reader meets them (scheduling, capacity, observability,
#: security, storage, validation).
ADDONS: Final[tuple[Addon, ...]] = (
    KUEUE,
    VOLCANO,
    TRAINER,
    KARPENTER_CRD,
    KARPENTER,
    CLUSTER_AUTOSCALER,
    GPU_OPERATOR,
    EFA_DEVICE_PLUGIN,
    KUBE_PROMETHEUS_STACK,
    CLOUDWATCH_OBSERVABILITY,
    KYVERNO,
    EXTERNAL_SECRETS,
    EFS_CSI_DRIVER,
    FSX_CSI_DRIVER,
    GPU_VALIDATION,
    FSX_TEAM_DIRS,
)


# --- derived lists -------------------------------------------------------------------------------


def helm_addons(rows: Iterable[Addon] = ADDONS) -> tuple[Addon, ...]:
    """The rows that are Helm charts."""
    return tuple(a for a in rows if a.chart is not None)


def platform_namespaces() -> tuple[str, ...]:
    """Every namespace an add-on may live in, and Kubernetes' own, sorted: what the policy pack
    counts as not a team's by default."""
    return tuple(sorted({*KUBERNETES_NAMESPACES, *(n for a in ADDONS for n in a.namespaces)}))


def namespaces_at(levels: Iterable[PssLevel]) -> tuple[str, ...]:
    """The namespaces (add-ons' and Kubernetes' own) whose pods are held to one of `levels`."""
    wanted = set(levels)
    found = {name for name, level in KUBERNETES_NAMESPACES.items() if level in wanted}
    found |= {n for a in ADDONS if a.pod_security in wanted for n in a.namespaces}
    return tuple(sorted(found))


def crd_owners() -> dict[str, str]:
    """API group -> the chart (its own name) whose release installs the group's CRDs."""
    return {group: str(a.chart_name) for a in helm_addons() for group in a.crd_groups}


def chart_crds() -> dict[str, str]:
    """Chart name -> the schemas/crds folder holding the CRDs it installs (vendored)."""
    return {str(a.chart_name): a.crds for a in helm_addons() if a.crds is not None}


def device_plugins() -> dict[str, str]:
    """Extended resource -> the chart whose device plugin advertises it on nodes."""
    return {res: str(a.chart_name) for a in helm_addons() for res in a.advertises}


def kueue_webhook_exempt() -> frozenset[str]:
    """The namespaces Kueue's Job webhook skips: kube-system and Kueue's own
    (`Addon.kueue_webhook_exempt` cites the chart)."""
    return frozenset({"kube-system", *(a.namespace for a in ADDONS if a.kueue_webhook_exempt)})
