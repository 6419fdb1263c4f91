"""The real LeaderWorkerSet controller, run out of cluster against the local control plane.

OME's MultiNode mode renders a LeaderWorkerSet per component; a real LWS controller makes its
groups. LWS v0.7.0's webhooks are required, not optional: the pod webhook adds the
``worker-index`` / ``group-index`` labels and the ``LWS_*`` variables its controllers (and
the runtime) need. So :class:`LwsProcess` runs the ``lws-manager`` binary built by
:mod:`omenative_devcluster.components` the way a cluster would, minus the Deployment:

* The CRD comes from the module source in the Go module cache (``config/crd/bases``; never
  copied into this repository), applied server-side.
* The webhooks are served by the LWS process on a loopback port chosen at run time, with a
  certificate made here for ``127.0.0.1`` (``internalCertManagement.enable: false``,
  ``webhook.certDir``). They are registered from the module's own webhook manifest
  (``config/webhook/manifests.yaml``), each entry pointed at ``https://127.0.0.1:<port><path>``
  with the certificate as ``caBundle``; the pod entries get the ``objectSelector`` of the
  module's kustomize patches (only pods labelled ``leaderworkerset.sigs.k8s.io/name``), so no
  other pod meets them.
* Leader election off; client QPS/burst as asked (``clientConnection``); health probes on
  another loopback port; metrics (``rest_client_requests_total``) on a third one when asked,
  served over HTTPS and read with the kubeconfig's bearer token.

``start()`` returns once LWS answers ``/readyz``, its webhook server answers on the pod
webhook's path and its webhook configurations are in place; ``stop()`` unregisters the
webhooks first (so nothing calls a dead endpoint), then stops the process. A failure raises
:class:`LwsError` with the reason and the end of LWS's log.
"""

from __future__ import annotations

import contextlib
import os
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import yaml

from omenative_devcluster.build import log
from omenative_devcluster.components import (
    COMPONENTS,
    ComponentUnavailable,
    binary_path,
    wait_for,
)
from omenative_devcluster.loopback import (
    free_port,
    install_crds,
    kubectl,
    log_tail,
    make_certificate,
    module_source,
    point_webhooks,
    stop_process,
    unregister_webhooks,
    wait_ready,
)

__all__ = [
    "API_GROUP",
    "NAME_LABEL",
    "LwsError",
    "LwsProcess",
    "crd_files",
    "module_dir",
    "requests_total",
    "webhook_configurations",
]

LWS = COMPONENTS["lws"]
API_GROUP = "leaderworkerset.x-k8s.io"
"""The LeaderWorkerSet API group."""
NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
"""Label LWS puts on (and selects) every pod of a LeaderWorkerSet."""
WEBHOOK_CONFIG_NAME = "omenative-devcluster-lws"
"""Name of both webhook configurations we register."""
_POD_WEBHOOK_PATH = "/mutate--v1-pod"


class LwsError(RuntimeError):
    """LWS could not be prepared or started; the message says why."""


def module_dir() -> Path:
    """The LWS module's source in the Go module cache (downloaded if missing)."""
    return module_source("lws", LwsError)


def crd_files(module: Path) -> list[Path]:
    """LWS's CRDs, as the module ships them (``config/crd/bases``)."""
    files = sorted((module / "config" / "crd" / "bases").glob("*.yaml"))
    if not files:
        raise LwsError(f"no CRDs under {module}/config/crd/bases")
    return files


def _load_yaml(path: Path) -> list[Any]:
    try:
        return [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
    except (OSError, yaml.YAMLError) as exc:
        raise LwsError(f"cannot read LWS's webhook manifest {path}: {exc}") from exc


def _object_selectors(webhook_dir: Path) -> dict[str, Any]:
    """Webhook name -> ``objectSelector`` from the module's kustomize patches."""
    out: dict[str, Any] = {}
    for name in ("mutating-patch.yaml", "validating-patch.yaml"):
        path = webhook_dir / name
        if not path.exists():
            continue
        for doc in _load_yaml(path):
            for op in doc if isinstance(doc, list) else [doc]:
                value = op.get("value") if isinstance(op, Mapping) else None
                if isinstance(value, Mapping) and "objectSelector" in value:
                    out[str(value.get("name"))] = value["objectSelector"]
    return out


def webhook_configurations(module: Path, base_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """LWS's webhook configurations from its manifest, pointed at ``base_url``.

    Each entry calls ``{base_url}{path}`` with ``ca_pem`` as its ``caBundle``; the pod
    entries keep only pods labelled ``leaderworkerset.sigs.k8s.io/name`` (the module's own
    kustomize patch; the same selector is used if the patch is missing).
    """
    webhook_dir = module / "config" / "webhook"
    docs = [d for d in _load_yaml(webhook_dir / "manifests.yaml") if isinstance(d, dict)]
    selectors = _object_selectors(webhook_dir)
    default_selector = {"matchExpressions": [{"key": NAME_LABEL, "operator": "Exists"}]}

    def adjust(hook: Mapping[str, Any]) -> dict[str, Any]:
        if any("pods" in (rule.get("resources") or ()) for rule in hook.get("rules") or ()):
            return {"objectSelector": selectors.get(str(hook.get("name")), default_selector)}
        return {}

    out = point_webhooks(docs, base_url, ca_pem, WEBHOOK_CONFIG_NAME, adjust)
    if not out:
        raise LwsError(f"no webhooks in {webhook_dir / 'manifests.yaml'}")
    return out


def requests_total(metrics_text: str) -> int:
    """API requests LWS's client made: the sum of ``rest_client_requests_total``."""
    total = 0.0
    for line in metrics_text.splitlines():
        if line.startswith("rest_client_requests_total"):
            with contextlib.suppress(ValueError, IndexError):
                total += float(line.rsplit(" ", 1)[1])
    return int(total)


def _bearer_token(kubeconfig: Path) -> str | None:
    try:
        cfg = yaml.safe_load(kubeconfig.read_text())
    except (OSError, yaml.YAMLError):
        return None
    for user in (cfg or {}).get("users") or ():
        token = (user.get("user") or {}).get("token")
        if isinstance(token, str):
            return token
    return None


class LwsProcess:
    """One LWS controller for the cluster of ``kubeconfig``; see the module docstring."""

    def __init__(self, kubeconfig: Path, state_dir: Path, *, qps: float = 50,
                 burst: int = 100, metrics: bool = False) -> None:
        self.kubeconfig = kubeconfig
        self.state_dir = state_dir
        self.qps = qps
        self.burst = burst
        self.metrics = metrics
        self.log_path = state_dir / "lws.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.webhook_port = 0
        self.probe_port = 0
        self.metrics_port = 0
        self._ca_file: Path | None = None

    @property
    def pid(self) -> int | None:
        """The running LWS process's id."""
        return None if self.proc is None else self.proc.pid

    def _kubectl(self, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        return kubectl(self.kubeconfig, *args, stdin=stdin, timeout=timeout, error=LwsError)

    def log_tail(self, lines: int = 40) -> str:
        """The end of LWS's log (for error messages)."""
        return log_tail(self.log_path, lines)

    def _config(self, cert_dir: Path) -> dict[str, Any]:
        metrics = f"127.0.0.1:{self.metrics_port}" if self.metrics else "0"
        return {
            "apiVersion": "config.lws.x-k8s.io/v1alpha1",
            "kind": "Configuration",
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.probe_port}"},
            "metrics": {"bindAddress": metrics},
            "webhook": {"port": self.webhook_port, "host": "127.0.0.1",
                        "certDir": str(cert_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "clientConnection": {"qps": self.qps, "burst": self.burst},
        }

    # ------------------------------------------------------------------ start / stop

    def start(self, timeout: float = 120.0) -> None:
        """Install the CRD, start LWS, wait until ready, register the webhooks."""
        try:
            wait_for("lws")
        except ComponentUnavailable as exc:
            raise LwsError(str(exc)) from exc
        module = module_dir()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        cert_dir = self.state_dir / "lws-certs"
        ca_pem = make_certificate(cert_dir, LwsError)
        self._ca_file = cert_dir / "tls.crt"
        install_crds(self.kubeconfig, crd_files(module),
                     [f"{p.stem.split('_', 1)[1]}.{API_GROUP}" for p in crd_files(module)],
                     LwsError)
        self.webhook_port, self.probe_port, self.metrics_port = (
            free_port(), free_port(), free_port())
        cfg_path = self.state_dir / "lws-config.yaml"
        cfg_path.write_text(yaml.safe_dump(self._config(cert_dir)))
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(binary_path("lws")), f"--config={cfg_path}", "--zap-log-level=info"],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )
        log(f"lws {LWS.version} started (pid {self.proc.pid}, webhooks on "
            f"127.0.0.1:{self.webhook_port}, log {self.log_path})")
        try:
            wait_ready("lws", self.proc, f"http://127.0.0.1:{self.probe_port}/readyz",
                       self.log_path, timeout, LwsError, ready=self._webhook_serving)
            hooks = webhook_configurations(module, f"https://127.0.0.1:{self.webhook_port}",
                                           ca_pem)
            self._kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(hooks))
        except BaseException:
            self.stop()
            raise
        log("lws is ready")

    def _webhook_serving(self) -> bool:
        """The pod webhook's handler answers (a 404 means it is not registered yet)."""
        ctx = ssl.create_default_context(cafile=str(self._ca_file))
        req = urllib.request.Request(
            f"https://127.0.0.1:{self.webhook_port}{_POD_WEBHOOK_PATH}", data=b"{}",
            headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=2, context=ctx) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def metrics_text(self) -> str | None:
        """LWS's Prometheus metrics (None when metrics are off or unreadable)."""
        if not self.metrics or self.proc is None:
            return None
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # controller-runtime's self-signed metrics cert
        headers = {}
        token = _bearer_token(self.kubeconfig)
        if token:
            headers["Authorization"] = f"Bearer {token}"
        req = urllib.request.Request(f"https://127.0.0.1:{self.metrics_port}/metrics",
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=10, context=ctx) as resp:
                return str(resp.read().decode(errors="replace"))
        except (urllib.error.URLError, OSError):
            return None

    def stop(self) -> None:
        """Unregister the webhooks, then stop LWS."""
        unregister_webhooks(self.kubeconfig, WEBHOOK_CONFIG_NAME)
        proc, self.proc = self.proc, None
        stop_process(proc)

    @contextlib.contextmanager
    def running(self) -> Iterator[LwsProcess]:
        """``start()`` on entry, ``stop()`` on exit."""
        self.start()
        try:
            yield self
        finally:
            self.stop()
