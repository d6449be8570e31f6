"""The real Kueue controller manager, run as a local process against a ControlPlane, with the
configuration the stack renders (translated for the local build by kueue_v1beta1.py) and its
webhooks registered the way its Helm chart registers them.

Facts about running the local build (Kueue v0.13.1, cmd/kueue/main.go at that tag):
- with `internalCertManagement.enable: false` it reads a metrics serving certificate from the
  hard-coded `/etc/kueue/metrics/certs/tls.{crt,key}` and exits when it is missing: each instance
  runs in its own mount namespace (`unshare --mount`) with a folder of ours bound there, so the
  host's /etc is not written and several instances never share one;
- its webhooks answer on `webhook.port` with the certificate in `webhook.certDir`; they are
  registered with `clientConfig.url` on loopback and our CA as `caBundle` (no Service reaches a
  process), after the manager reports ready: Helm installs them with the chart and its `--wait`
  holds `pulumi up` until the pods are ready;
- only the hooks of Kueue's own kinds and of the enabled frameworks whose API is served are kept:
  an enabled hook with no handler behind it would refuse every object it intercepts;
- the job hooks skip `kube-system` and the release namespace, as the v0.19.2 chart's
  templates/webhook/manifests.yaml does (its `mjob.kb.io` namespaceSelector);
- MultiKueue dispatch of batch Jobs needs the feature gate `MultiKueueBatchJobWithManagedBy`
  at this version; `VisibilityOnDemand=false` avoids starting the visibility API server.
"""

from __future__ import annotations

import base64
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from synth.engines import kueue_v1beta1
from synth.engines.assets import Assets
from synth.engines.client import ApiError, wait_for
from synth.engines.controlplane import ControlPlane, Process, free_port

METRICS_CERT_DIR: Final = Path("/etc/kueue/metrics/certs")
#: framework name -> (API group, resource) its webhook intercepts.
FRAMEWORK_RESOURCES: Final = {
    "batch/job": ("batch", "jobs"),
    "jobset.x-k8s.io/jobset": ("jobset.x-k8s.io", "jobsets"),
    "pod": ("", "pods"),
    "deployment": ("apps", "deployments"),
    "statefulset": ("apps", "statefulsets"),
}
KUEUE_GROUP: Final = "kueue.x-k8s.io"
READY_TIMEOUT_S: Final = 90.0


@dataclass
class Kueue:
    """One running Kueue; `configuration` is what it was started with (v1beta1)."""

    namespace: str
    configuration: dict[str, Any]
    process: Process
    health_port: int


def local_configuration(
    rendered: Mapping[str, Any],
    *,
    namespace: str,
    cert_dir: Path,
    ports: Mapping[str, int],
    feature_gates: Mapping[str, bool],
) -> dict[str, Any]:
    """The rendered Configuration translated for the local build, with what a local process
    needs instead of a Deployment's: its namespace, free ports, no leader election, our
    webhook certificate, and the feature gates of this build's paths."""
    config = kueue_v1beta1.convert_configuration(rendered)
    config["namespace"] = namespace
    config["health"] = {"healthProbeBindAddress": f"127.0.0.1:{ports['health']}"}
    config["metrics"] = {"bindAddress": f"127.0.0.1:{ports['metrics']}"}
    config["webhook"] = {"port": ports["webhook"], "host": "127.0.0.1", "certDir": str(cert_dir)}
    config["leaderElection"] = {"leaderElect": False}
    config["internalCertManagement"] = {"enable": False}
    gates = dict(config.get("featureGates") or {})
    gates.update(feature_gates)
    config["featureGates"] = gates
    return config


def _served(cp: ControlPlane, group: str, version: str, resource: str) -> bool:
    api_version = f"{group}/{version}" if group else version
    path = f"/apis/{api_version}" if group else f"/api/{api_version}"
    try:
        listing = cp.admin.request("GET", path)
    except ApiError:
        return False
    return any(item.get("name") == resource for item in listing.get("resources", []))


def webhook_configurations(
    manifests: Sequence[Mapping[str, Any]],
    *,
    served: Callable[[str, str, str], bool],
    ca_pem: bytes,
    port: int,
    namespace: str,
    frameworks: Sequence[str],
) -> list[dict[str, Any]]:
    """Kueue's webhook configurations, pointed at the local process (module docstring);
    `served(group, version, resource)` says whether the API server serves a kind."""
    enabled = {FRAMEWORK_RESOURCES[f] for f in frameworks if f in FRAMEWORK_RESOURCES}
    ca = base64.b64encode(ca_pem).decode()
    out = []
    for manifest in manifests:
        kept = []
        for listed in manifest.get("webhooks", []):
            rule = listed["rules"][0]
            group, version = rule["apiGroups"][0], rule["apiVersions"][0]
            resource = rule["resources"][0]
            own = group == KUEUE_GROUP
            if not own and (group, resource) not in enabled:
                continue
            if not served(group, version, resource):
                continue
            hook = dict(listed)
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://127.0.0.1:{port}{path}", "caBundle": ca}
            if not own:
                hook["namespaceSelector"] = {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": ["kube-system", namespace],
                        }
                    ]
                }
            kept.append(hook)
        if kept:
            meta = {"name": f"kueue-{manifest['metadata']['name']}"}
            out.append({**manifest, "metadata": meta, "webhooks": kept})
    return out


def start(
    cp: ControlPlane,
    assets: Assets,
    rendered: Mapping[str, Any],
    *,
    namespace: str,
    feature_gates: Mapping[str, bool] | None = None,
) -> Kueue:
    """Start Kueue on `cp` with the `rendered` Configuration; returns once it is ready and its
    webhooks are registered."""
    if shutil.which("unshare") is None:
        raise RuntimeError("`unshare` (util-linux) is needed to give Kueue its metrics certs")
    home = cp.dir / f"kueue-{namespace}"
    certs, metrics = home / "webhook-certs", home / "metrics-certs"
    certs.mkdir(parents=True, exist_ok=True)
    metrics.mkdir(parents=True, exist_ok=True)
    pair = cp.pki.issue("kueue-webhook", "kueue-webhook", server=True)
    shutil.copy(pair.cert, certs / "tls.crt")
    shutil.copy(pair.key, certs / "tls.key")
    shutil.copy(pair.cert, metrics / "tls.crt")
    shutil.copy(pair.key, metrics / "tls.key")
    ports = {"health": free_port(), "metrics": free_port(), "webhook": free_port()}
    gates = {"VisibilityOnDemand": False, **(feature_gates or {})}
    config = local_configuration(
        rendered, namespace=namespace, cert_dir=certs, ports=ports, feature_gates=gates
    )
    config_file = home / "config.yaml"
    config_file.write_text(yaml.safe_dump(config, sort_keys=False))
    kubeconfig = cp.kubeconfig("kueue", "kueue-controller-manager", ("system:masters",))
    if cp.admin.find("v1", "Namespace", namespace) is None:
        cp.admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    command = (
        f"mkdir -p {METRICS_CERT_DIR} && mount --bind {metrics} {METRICS_CERT_DIR} && "
        f'exec "$0" --config {config_file} --kubeconfig {kubeconfig} --zap-log-level=3'
    )
    process = cp.spawn(
        f"kueue-{namespace}",
        [
            "unshare",
            "--mount",
            "--propagation",
            "private",
            "sh",
            "-c",
            command,
            str(assets["kueue"]),
        ],
    )
    health = f"http://127.0.0.1:{ports['health']}/readyz"

    def ready() -> bool | None:
        import urllib.request

        cp.check_alive()
        with urllib.request.urlopen(health, timeout=2) as response:
            return response.status == 200 or None

    wait_for(f"{cp.name}: Kueue ready ({health})", ready, timeout=READY_TIMEOUT_S)
    manifests = [d for d in yaml.safe_load_all(assets.kueue_webhooks.read_text()) if d]
    frameworks = (config.get("integrations") or {}).get("frameworks") or []
    for webhook in webhook_configurations(
        manifests,
        served=lambda group, version, resource: _served(cp, group, version, resource),
        ca_pem=cp.pki.ca_pem,
        port=ports["webhook"],
        namespace=namespace,
        frameworks=frameworks,
    ):
        cp.admin.apply(webhook)
    return Kueue(namespace, config, process, ports["health"])
