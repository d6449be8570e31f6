"""One local Kubernetes control plane: etcd, kube-apiserver, kube-controller-manager and
kube-scheduler as processes on free loopback ports, with their own certificates and data
directory, stopped (process group and all) whatever happens.

Flags that matter, and why (Kubernetes v1.33):
- the API server runs RBAC and the admission plugins a managed cluster runs that our objects
  meet: NamespaceLifecycle, LimitRanger, ServiceAccount, PodSecurity, Priority,
  DefaultTolerationSeconds, ResourceQuota, ValidatingAdmissionPolicy, the webhook plugins;
  `--endpoint-reconciler-type=none` (no kubelet, no `kubernetes` endpoints to keep);
- the controller-manager signs service-account tokens (`--service-account-private-key-file`,
  `--root-ca-file`: the manager's kubeconfig for a fleet worker holds one), uses a
  credential per controller (`--use-service-account-credentials`, so RBAC is real), and runs
  without the node-lifecycle controller: with no kubelet heartbeats it would taint every node
  unreachable; nor the cloud, IPAM, route and load-balancer controllers;
- no kubelet: Node objects are created by the caller and pods are bound, never started.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from synth.engines import pki
from synth.engines.assets import Assets
from synth.engines.client import Client, wait_for

ADMISSION_PLUGINS = (
    "NamespaceLifecycle",
    "LimitRanger",
    "ServiceAccount",
    "PodSecurity",
    "Priority",
    "DefaultTolerationSeconds",
    "DefaultStorageClass",
    "StorageObjectInUseProtection",
    "PersistentVolumeClaimResize",
    "RuntimeClass",
    "MutatingAdmissionWebhook",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionWebhook",
    "ResourceQuota",
)
#: Controllers a cluster without kubelets and clouds must not run (see the module docstring).
DISABLED_CONTROLLERS = (
    "node-lifecycle-controller",
    "cloud-node-lifecycle-controller",
    "service-lb-controller",
    "node-ipam-controller",
    "node-route-controller",
    "persistentvolume-attach-detach-controller",
)
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc"
READY_TIMEOUT_S = 90.0


def stop_on_sigterm() -> None:
    """Turn SIGTERM into SystemExit, so every `with ControlPlane(...)` unwinds and stops its
    processes (each runs in its own process group, which a signal to ours does not reach):
    CI kills a background tier this way when a step before it fails."""

    def leave(signum: int, _frame: object) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, leave)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Process:
    name: str
    popen: subprocess.Popen[bytes]
    log: Path


@dataclass
class ControlPlane:
    """Start with `with ControlPlane(assets, name) as cp:`; `cp.admin` is a cluster-admin
    client, `cp.kubeconfig(identity)` a kubeconfig file for a certificate identity."""

    assets: Assets
    name: str = "cluster"
    #: Also start the controller-manager and the scheduler (False: an API server alone).
    controllers: bool = True
    workdir: Path | None = None
    #: Where the processes' logs are copied when the control plane stops (None: nowhere).
    log_dir: Path | None = None
    processes: list[Process] = field(default_factory=list)
    started_s: float = 0.0

    def __post_init__(self) -> None:
        self._tmp: Path | None = None

    # --- lifecycle ----------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        began = time.monotonic()
        if self.workdir is None:
            # mkdtemp, not TemporaryDirectory: its finalizer would delete a kept folder at exit.
            self._tmp = Path(tempfile.mkdtemp(prefix=f"e2e-{self.name}-"))
            self.workdir = self._tmp
        self.dir = self.workdir
        self.pki = pki.Authority(self.dir / "pki")
        serving = self.pki.issue("apiserver", "kube-apiserver", server=True)
        sa_key = pki.service_account_key(self.dir / "pki" / "sa.key")
        self._admin = self.pki.issue(
            "admin", "e2e-admin", organizations=("system:masters",), client=True
        )
        etcd_port, peer_port, self.port = free_port(), free_port(), free_port()
        self.server = f"https://127.0.0.1:{self.port}"
        etcd = f"http://127.0.0.1:{etcd_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        self._spawn(
            "etcd",
            [
                "--name=default",
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls={etcd}",
                f"--advertise-client-urls={etcd}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                # A test cluster's data is thrown away: no fsync per write (etcd 3.4 flag).
                "--unsafe-no-fsync",
            ],
        )
        self._spawn(
            "kube-apiserver",
            [
                f"--etcd-servers={etcd}",
                "--bind-address=127.0.0.1",
                f"--secure-port={self.port}",
                f"--tls-cert-file={serving.cert}",
                f"--tls-private-key-file={serving.key}",
                f"--client-ca-file={self.pki.ca}",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={sa_key}",
                f"--service-account-signing-key-file={sa_key}",
                f"--api-audiences={SERVICE_ACCOUNT_ISSUER}",
                "--service-cluster-ip-range=10.96.0.0/16",
                "--endpoint-reconciler-type=none",
                "--authorization-mode=RBAC",
                f"--enable-admission-plugins={','.join(ADMISSION_PLUGINS)}",
                "--allow-privileged=true",
            ],
        )
        self.admin = Client(self.server, self.pki.ca, cert=(self._admin.cert, self._admin.key))
        wait_for(
            f"{self.name}: kube-apiserver /readyz",
            lambda: self.admin.request("GET", "/readyz") or True,
            timeout=READY_TIMEOUT_S,
            interval=0.25,
        )
        if self.controllers:
            # Only once the API server is ready: before its RBAC bootstrap roles exist the
            # controller-manager is refused /healthz and gives up after 10 s.
            self._start_controllers(sa_key)
        self.started_s = time.monotonic() - began

    def wait_for_controllers(self) -> None:
        """The controllers are up once the token controller has given `default` its account."""
        wait_for(
            f"{self.name}: controller-manager (the default ServiceAccount)",
            lambda: self.admin.find("v1", "ServiceAccount", "default", "default"),
            timeout=READY_TIMEOUT_S,
        )

    def _start_controllers(self, sa_key: Path) -> None:
        manager = self.kubeconfig("controller-manager", "system:kube-controller-manager")
        disabled = ",".join(f"-{c}" for c in DISABLED_CONTROLLERS)
        self._spawn(
            "kube-controller-manager",
            [
                f"--kubeconfig={manager}",
                f"--authentication-kubeconfig={manager}",
                f"--authorization-kubeconfig={manager}",
                f"--service-account-private-key-file={sa_key}",
                f"--root-ca-file={self.pki.ca}",
                "--use-service-account-credentials",
                "--leader-elect=false",
                f"--controllers=*,{disabled}",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
            ],
        )
        scheduler = self.kubeconfig("scheduler", "system:kube-scheduler")
        self._spawn(
            "kube-scheduler",
            [
                f"--kubeconfig={scheduler}",
                f"--authentication-kubeconfig={scheduler}",
                f"--authorization-kubeconfig={scheduler}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                "--secure-port=0",
            ],
        )

    def _spawn(
        self, binary: str, args: Sequence[str], *, env: dict[str, str] | None = None
    ) -> None:
        self.spawn(binary, [str(self.assets[binary]), *args], env=env)

    def spawn(
        self,
        name: str,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
    ) -> Process:
        """Start a process of this control plane (stopped with it); its output goes to a log."""
        log = self.dir / f"{name}.log"
        with log.open("wb") as out:
            popen = subprocess.Popen(
                list(argv),
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # its own process group: stop() kills children too
                env={**os.environ, **(env or {})},
            )
        process = Process(name, popen, log)
        self.processes.append(process)
        time.sleep(0.05)
        if popen.poll() is not None:
            raise RuntimeError(f"{self.name}: {name} exited at once:\n{self.tail(process)}")
        return process

    def check_alive(self) -> None:
        """Raise if a process of this control plane died (with the end of its log)."""
        for process in self.processes:
            if process.popen.poll() is not None:
                raise RuntimeError(
                    f"{self.name}: {process.name} exited ({process.popen.returncode}):\n"
                    f"{self.tail(process)}"
                )

    @staticmethod
    def tail(process: Process, lines: int = 30) -> str:
        try:
            return "\n".join(process.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def stop(self) -> None:
        for process in reversed(self.processes):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(process.popen.pid, signal.SIGTERM)
        # The data is thrown away: no need to wait for graceful shutdowns (the API server drains
        # for seconds).
        deadline = time.monotonic() + 2
        for process in reversed(self.processes):
            try:
                process.popen.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.popen.pid, signal.SIGKILL)
                process.popen.wait()
        self.processes.clear()
        if self.log_dir is not None:
            # What the processes said, kept past the run (the data directory goes).
            self.log_dir.mkdir(parents=True, exist_ok=True)
            for log in sorted((self.workdir or Path(".")).glob("*.log")):
                shutil.copy(log, self.log_dir / log.name)
        if self._tmp is not None and not os.environ.get("GPU_PLATFORM_E2E_KEEP"):
            shutil.rmtree(self._tmp, ignore_errors=True)
            self._tmp = None

    # --- identities ---------------------------------------------------------------------------

    def kubeconfig(self, name: str, common_name: str, organizations: tuple[str, ...] = ()) -> Path:
        """A kubeconfig file for a client-certificate identity of this cluster."""
        pair = self.pki.issue(name, common_name, organizations=organizations, client=True)
        return self.write_kubeconfig(
            name, {"client-certificate": str(pair.cert), "client-key": str(pair.key)}
        )

    def write_kubeconfig(self, name: str, user: dict[str, str]) -> Path:
        path = self.dir / f"{name}.kubeconfig"
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": self.name,
                    "cluster": {"server": self.server, "certificate-authority": str(self.pki.ca)},
                }
            ],
            "users": [{"name": name, "user": user}],
            "contexts": [{"name": name, "context": {"cluster": self.name, "user": name}}],
            "current-context": name,
        }
        path.write_text(json.dumps(config))
        return path

    @property
    def admin_kubeconfig(self) -> Path:
        return self.write_kubeconfig(
            "admin",
            {"client-certificate": str(self._admin.cert), "client-key": str(self._admin.key)},
        )


@contextlib.contextmanager
def control_planes(assets: Assets, *names: str) -> Iterator[list[ControlPlane]]:
    """Several control planes side by side, all stopped on the way out."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(ControlPlane(assets, name)) for name in names]
