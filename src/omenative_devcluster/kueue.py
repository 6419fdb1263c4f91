"""The real Kueue, run out of cluster against the local control plane (test support).

Kueue ignores plain pods unless its webhooks see them: the pod webhook adds the
``kueue.x-k8s.io/admission`` scheduling gate, the ``kueue.x-k8s.io/managed`` label and
Kueue's finalizer. So :class:`KueueProcess` runs the ``kueue`` binary built by
:mod:`omenative_devcluster.components` the way a cluster would, minus the Deployment:

* Kueue's CRDs come from the module source, read from the Go module cache at run time
  (``config/components/crd/bases``; never copied into this repository) and applied with
  server-side apply (the Workload CRD is too big for a client-side apply annotation).
* The webhooks are served by the Kueue process on a loopback port chosen at run time, with a
  certificate made here for ``127.0.0.1`` (``internalCertManagement.enable: false``,
  ``webhook.certDir``). They are registered from the module's own webhook manifest, each
  entry pointed at ``https://127.0.0.1:<port><path>`` with the certificate as ``caBundle``,
  keeping only the pod and Kueue API entries, and limited by a namespace selector to
  namespaces labelled ``omenative.io/kueue: "true"`` so no other test meets them.
* ``integrations.frameworks: [pod]``, leader election off,
  ``--feature-gates=VisibilityOnDemand=false``; health probes on another loopback port.
* Kueue reads its metrics certificate from a fixed path, ``/etc/kueue/metrics/certs``: the
  same certificate is put there on start and removed on stop (if we made it).

``start()`` returns once Kueue answers ``/readyz`` and its webhook configurations are in
place; ``stop()`` unregisters the webhooks first (so nothing calls a dead endpoint), then
stops the process. A failure raises :class:`KueueError` with the reason and the end of
Kueue's log.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
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
    "KUEUE_NAMESPACE_LABEL",
    "METRICS_CERT_DIR",
    "KueueError",
    "KueueProcess",
    "crd_files",
    "module_dir",
    "webhook_configurations",
]

KUEUE = COMPONENTS["kueue"]
KUEUE_NAMESPACE_LABEL = "omenative.io/kueue"
"""Label (value ``"true"``) of the namespaces whose pods and Kueue objects meet the webhooks."""
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
"""Where Kueue reads its metrics certificate when it does not manage certificates itself."""
WEBHOOK_CONFIG_NAME = "omenative-devcluster-kueue"
"""Name of both webhook configurations we register."""
SYSTEM_NAMESPACE = "kueue-system"
"""Kueue's own namespace (its default ``namespace``)."""
_KUEUE_API_GROUP = "kueue.x-k8s.io"


class KueueError(RuntimeError):
    """Kueue could not be prepared or started; the message says why."""


def module_dir() -> Path:
    """The Kueue module's source in the Go module cache (downloaded if missing)."""
    return module_source("kueue", KueueError)


def crd_files(module: Path) -> list[Path]:
    """Kueue's CRDs, as the module ships them (``config/components/crd/bases``)."""
    files = sorted((module / "config" / "components" / "crd" / "bases").glob("*.yaml"))
    if not files:
        raise KueueError(f"no CRDs under {module}/config/components/crd/bases")
    return files


def _wanted(hook: Mapping[str, Any]) -> bool:
    """A webhook for pods or for Kueue's own API (the only ones a pod-only Kueue serves)."""
    for rule in hook.get("rules") or ():
        groups = set(rule.get("apiGroups") or ())
        resources = set(rule.get("resources") or ())
        if _KUEUE_API_GROUP in groups or ("" in groups and "pods" in resources):
            return True
    return False


def webhook_configurations(module: Path, base_url: str, ca_pem: bytes) -> list[dict[str, Any]]:
    """Kueue's webhook configurations from its manifest, pointed at ``base_url``.

    Each kept entry calls ``{base_url}{path}`` with ``ca_pem`` as its ``caBundle`` and only
    for objects in namespaces labelled ``omenative.io/kueue: "true"`` (cluster-scoped
    objects such as ClusterQueues are not filtered by a namespace selector).
    """
    manifest = module / "config" / "components" / "webhook" / "manifests.yaml"
    try:
        docs = [d for d in yaml.safe_load_all(manifest.read_text()) if isinstance(d, dict)]
    except (OSError, yaml.YAMLError) as exc:
        raise KueueError(f"cannot read Kueue's webhook manifest {manifest}: {exc}") from exc
    selector = {"namespaceSelector": {"matchLabels": {KUEUE_NAMESPACE_LABEL: "true"}}}
    out = point_webhooks(docs, base_url, ca_pem, WEBHOOK_CONFIG_NAME,
                         lambda hook: selector if _wanted(hook) else None)
    if not out:
        raise KueueError(f"no pod or Kueue webhooks in {manifest}")
    return out


class KueueProcess:
    """One Kueue process for the cluster of ``kubeconfig``; see the module docstring."""

    def __init__(self, kubeconfig: Path, state_dir: Path) -> None:
        self.kubeconfig = kubeconfig
        self.state_dir = state_dir
        self.log_path = state_dir / "kueue.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.webhook_port = 0
        self.probe_port = 0
        self._made_metrics_certs = False

    # ------------------------------------------------------------------ helpers

    def _kubectl(self, *args: str, stdin: str | None = None, timeout: float = 120) -> str:
        return kubectl(self.kubeconfig, *args, stdin=stdin, timeout=timeout, error=KueueError)

    def log_tail(self, lines: int = 40) -> str:
        """The end of Kueue's log (for error messages)."""
        return log_tail(self.log_path, lines)

    def _config(self, cert_dir: Path) -> dict[str, Any]:
        return {
            "apiVersion": "config.kueue.x-k8s.io/v1beta2",
            "kind": "Configuration",
            "namespace": SYSTEM_NAMESPACE,
            "health": {"healthProbeBindAddress": f"127.0.0.1:{self.probe_port}"},
            "metrics": {"bindAddress": "0"},
            "webhook": {"port": self.webhook_port, "host": "127.0.0.1",
                        "certDir": str(cert_dir)},
            "leaderElection": {"leaderElect": False},
            "internalCertManagement": {"enable": False},
            "integrations": {"frameworks": ["pod"]},
            "clientConnection": {"qps": 50, "burst": 100},
        }

    # ------------------------------------------------------------------ start / stop

    def start(self, timeout: float = 120.0) -> None:
        """Install the CRDs, start Kueue, wait until ready, register the webhooks."""
        try:
            wait_for("kueue")
        except ComponentUnavailable as exc:
            raise KueueError(str(exc)) from exc
        module = module_dir()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        cert_dir = self.state_dir / "kueue-certs"
        ca_pem = make_certificate(cert_dir, KueueError)
        self._metrics_certs(cert_dir)
        install_crds(self.kubeconfig, crd_files(module),
                     (f"{p.stem.split('_', 1)[1]}.{_KUEUE_API_GROUP}" for p in crd_files(module)),
                     KueueError)
        self._ensure_namespace()
        self.webhook_port, self.probe_port = free_port(), free_port()
        cfg_path = self.state_dir / "kueue-config.yaml"
        cfg_path.write_text(yaml.safe_dump(self._config(cert_dir)))
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig)}
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(binary_path("kueue")), f"--config={cfg_path}",
                 "--feature-gates=VisibilityOnDemand=false", "--zap-log-level=info"],
                stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
            )
        log(f"kueue {KUEUE.version} started (pid {self.proc.pid}, webhooks on "
            f"127.0.0.1:{self.webhook_port}, log {self.log_path})")
        try:
            self._wait_ready(timeout)
            hooks = webhook_configurations(module, f"https://127.0.0.1:{self.webhook_port}",
                                           ca_pem)
            self._kubectl("apply", "-f", "-", stdin=yaml.safe_dump_all(hooks))
        except BaseException:
            self.stop()
            raise

    def _ensure_namespace(self) -> None:
        body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": SYSTEM_NAMESPACE}}
        self._kubectl("apply", "-f", "-", stdin=json.dumps(body))

    def _metrics_certs(self, cert_dir: Path) -> None:
        if (METRICS_CERT_DIR / "tls.crt").exists():
            return
        try:
            METRICS_CERT_DIR.mkdir(parents=True, exist_ok=True)
            for name in ("tls.crt", "tls.key"):
                shutil.copyfile(cert_dir / name, METRICS_CERT_DIR / name)
        except OSError as exc:
            raise KueueError(f"Kueue reads its metrics certificate from {METRICS_CERT_DIR}, "
                             f"which cannot be written here: {exc}") from exc
        self._made_metrics_certs = True

    def _wait_ready(self, timeout: float) -> None:
        wait_ready("kueue", self.proc, f"http://127.0.0.1:{self.probe_port}/readyz",
                   self.log_path, timeout, KueueError)
        log("kueue is ready")

    def stop(self) -> None:
        """Unregister the webhooks, stop Kueue, remove the metrics certificate we made."""
        unregister_webhooks(self.kubeconfig, WEBHOOK_CONFIG_NAME)
        proc, self.proc = self.proc, None
        stop_process(proc)
        if self._made_metrics_certs:
            shutil.rmtree(METRICS_CERT_DIR, ignore_errors=True)
            self._made_metrics_certs = False

    @contextlib.contextmanager
    def running(self) -> Iterator[KueueProcess]:
        """``start()`` on entry, ``stop()`` on exit."""
        self.start()
        try:
            yield self
        finally:
            self.stop()
