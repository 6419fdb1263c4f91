"""KEDA beside the devcluster: its CRDs, and its operator and metrics adapter as processes.

The CRDs come from the Go module ``github.com/kedacore/keda/v2`` at ``KEDA_VERSION``
(``config/crd/bases/*.yaml``), fetched once through the Go module proxy with ``go mod
download -json`` and kept under ``$OMENATIVE_CACHE/components/keda/<version>/crds/``; the
ScaledObject CRD alone checks the ScaledObjects omenative renders (server-side validation).

The operator (``keda-operator``) and the external-metrics server (``keda-adapter``) are
built by the shared builder (``components.py``, component ``keda``) and run here as
processes against the cluster's API server, as KEDA's own manifests run them in pods
(``config/manager``, ``config/metrics-server``), with these differences:

* every port is a free port of 127.0.0.1; the operator watches only the given namespaces;
* one CA and one certificate of ours (``keda_certs``) serve the operator's gRPC metrics
  service, the adapter's client of it and the adapter's HTTPS, where KEDA's operator would
  make and rotate them (``--enable-cert-rotation``, off here);
* the adapter is reached through the kube-apiserver's aggregation layer (the devcluster's
  ``aggregation`` option): the ``APIService`` ``v1beta1.external.metrics.k8s.io`` names a
  Service ``keda/keda-metrics-apiserver`` of type ExternalName pointing at ``localhost``,
  since no Service IP routes to a process here.

The kube-controller-manager's HPA controller reads the external metrics through that
APIService, as in a cluster: KEDA's operator makes the HPA and activates from and to the
idle count itself; the HPA scales between ``minReplicaCount`` and ``maxReplicaCount``.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import zipfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs
import yaml

from omenative_devcluster import components
from omenative_devcluster.build import cache_root
from omenative_devcluster.loopback import kubectl, log_tail, stop_process, wait_ready
from omenative_devcluster.processes import _pdeathsig, free_ports

__all__ = [
    "KEDA_MODULE",
    "KEDA_NAMESPACE",
    "KEDA_VERSION",
    "METRICS_API",
    "METRICS_SERVICE",
    "KedaProcesses",
    "apply_metrics_api",
    "keda_certs",
    "keda_crds",
    "metrics_api_objects",
    "scaledobject_crd",
    "start_keda",
]

KEDA_MODULE = "github.com/kedacore/keda/v2"
KEDA_VERSION = "v2.21.1"
_CRD_DIR = "config/crd/bases/"
_SCALED_OBJECTS = "keda.sh_scaledobjects.yaml"
KEDA_NAMESPACE = "keda"
"""KEDA's own namespace (``POD_NAMESPACE``, ``KEDA_CLUSTER_OBJECT_NAMESPACE``)."""
METRICS_SERVICE = "keda-metrics-apiserver"
"""The Service the APIService names (KEDA's name for it)."""
METRICS_API = "v1beta1.external.metrics.k8s.io"
"""The APIService of the external metrics API KEDA's adapter serves."""


def _download_zip() -> Path:
    """The module zip (``go mod download`` leaves it even when the module asks for a newer
    Go toolchain than the local one: only the zip is read)."""
    go = shutil.which("go") or "/usr/local/go/bin/go"
    env = {**os.environ, "GOTOOLCHAIN": "local", "GOFLAGS": "-mod=mod"}
    done = subprocess.run([go, "mod", "download", "-json", f"{KEDA_MODULE}@{KEDA_VERSION}"],
                          capture_output=True, text=True, env=env, timeout=600,
                          cwd=cache_root(), check=False)
    try:
        info = json.loads(done.stdout)
    except ValueError:
        raise RuntimeError(f"go mod download {KEDA_MODULE}@{KEDA_VERSION}: "
                           f"{done.stderr.strip() or done.stdout.strip()}") from None
    zip_path = Path(str(info.get("Zip") or ""))
    if not zip_path.is_file():
        raise RuntimeError(f"go mod download {KEDA_MODULE}@{KEDA_VERSION}: no zip "
                           f"({info.get('Error') or done.stderr.strip()})")
    return zip_path


def _crd_dir() -> Path:
    """The cached CRD files, taken out of the module zip the first time."""
    cached = cache_root() / "components" / "keda" / KEDA_VERSION / "crds"
    if (cached / _SCALED_OBJECTS).is_file():
        return cached
    cache_root().mkdir(parents=True, exist_ok=True)
    prefix = f"{KEDA_MODULE}@{KEDA_VERSION}/{_CRD_DIR}"
    tmp = cached.with_name("crds.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with zipfile.ZipFile(_download_zip()) as archive:
        for name in archive.namelist():
            if name.startswith(prefix) and name.endswith(".yaml") and "/" not in name[
                    len(prefix):]:
                (tmp / name[len(prefix):]).write_bytes(archive.read(name))
    shutil.rmtree(cached, ignore_errors=True)
    tmp.replace(cached)
    return cached


def _load_crd(path: Path) -> dict[str, Any]:
    body = yaml.safe_load(path.read_text())
    if not isinstance(body, dict) or body.get("kind") != "CustomResourceDefinition":
        raise RuntimeError(f"{path} is not a CustomResourceDefinition")
    return body


def scaledobject_crd() -> dict[str, Any]:
    """KEDA's ``scaledobjects.keda.sh`` CRD, as the module ships it."""
    return _load_crd(_crd_dir() / _SCALED_OBJECTS)


def keda_crds() -> list[dict[str, Any]]:
    """Every CRD of KEDA's (ScaledObject, ScaledJob, the trigger authentications, the cloud
    event sources): the operator watches them all and does not start without them."""
    return [_load_crd(p) for p in sorted(_crd_dir().glob("*.yaml"))]


# ------------------------------------------------------------------ certificates


def _openssl(*args: str | Path) -> None:
    subprocess.run(["openssl", *map(str, args)], check=True, capture_output=True)


def keda_certs(cert_dir: Path) -> Path:
    """KEDA's ``ca.crt``, ``tls.crt`` and ``tls.key`` in ``cert_dir`` (the names KEDA reads):
    one certificate for 127.0.0.1, localhost and KEDA's service names, usable by a server
    and a client (the operator's gRPC server and the adapter are both ends of one mTLS
    connection). Returns ``cert_dir``."""
    cert_dir.mkdir(parents=True, exist_ok=True)
    ca_key, csr, ext = cert_dir / "ca.key", cert_dir / "tls.csr", cert_dir / "tls.ext"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
             "-subj", "/O=KEDAORG/CN=omenative-keda-ca", "-keyout", ca_key,
             "-out", cert_dir / "ca.crt")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", cert_dir / "tls.key",
             "-subj", "/O=KEDAORG/CN=keda-operator", "-out", csr)
    names = ["localhost", "keda-operator", f"keda-operator.{KEDA_NAMESPACE}.svc",
             METRICS_SERVICE, f"{METRICS_SERVICE}.{KEDA_NAMESPACE}.svc"]
    ext.write_text("subjectAltName=" + ",".join(
        [f"DNS:{n}" for n in names] + ["IP:127.0.0.1"])
        + "\nextendedKeyUsage=serverAuth,clientAuth\n")
    _openssl("x509", "-req", "-in", csr, "-CA", cert_dir / "ca.crt", "-CAkey", ca_key,
             "-CAcreateserial", "-days", "30", "-extfile", ext, "-out", cert_dir / "tls.crt")
    return cert_dir


def metrics_api_objects(port: int, ca_file: Path) -> list[dict[str, Any]]:
    """KEDA's namespace, the ExternalName Service to the adapter on ``localhost:port`` and
    the APIService ``v1beta1.external.metrics.k8s.io`` (trusting ``ca_file``)."""
    service = {"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": METRICS_SERVICE, "namespace": KEDA_NAMESPACE},
               "spec": {"type": "ExternalName", "externalName": "localhost",
                        "ports": [{"name": "https", "port": port, "targetPort": port}]}}
    api = {"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
           "metadata": {"name": METRICS_API},
           "spec": {"group": "external.metrics.k8s.io", "version": "v1beta1",
                    "service": {"name": METRICS_SERVICE, "namespace": KEDA_NAMESPACE,
                                "port": port},
                    "caBundle": base64.b64encode(ca_file.read_bytes()).decode(),
                    "groupPriorityMinimum": 100, "versionPriority": 100}}
    namespace = {"apiVersion": "v1", "kind": "Namespace",
                 "metadata": {"name": KEDA_NAMESPACE}}
    return [namespace, service, api]


# ------------------------------------------------------------------ processes


@attrs.define
class KedaProcesses:
    """The running operator and adapter (``start_keda``); ``stop`` ends both."""

    procs: dict[str, subprocess.Popen[bytes]]
    logs: dict[str, Path]
    cert_dir: Path
    adapter_port: int

    def dead(self) -> str | None:
        """The name of a process that has exited, with the end of its log, else None."""
        for name, proc in self.procs.items():
            if proc.poll() is not None:
                return f"{name} exited with code {proc.returncode}:\n{log_tail(self.logs[name])}"
        return None

    def stop(self) -> None:
        """SIGTERM each process group (ours), SIGKILL what is left after 15 s."""
        for proc in self.procs.values():
            stop_process(proc)


def _spawn(args: Sequence[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with log.open("wb") as out:
        return subprocess.Popen(list(args), stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, env=env, start_new_session=True,
                                preexec_fn=_pdeathsig)  # noqa: PLW1509 (one thread starts)


def _operator_args(binary: Path, certs: Path, ports: dict[str, int]) -> list[str]:
    return [str(binary), "--leader-elect=false", "--zap-log-level=info",
            f"--metrics-bind-address=127.0.0.1:{ports['metrics']}",
            f"--health-probe-bind-address=127.0.0.1:{ports['health']}",
            f"--metrics-service-bind-address=127.0.0.1:{ports['grpc']}",
            f"--cert-dir={certs}", "--enable-cert-rotation=false",
            "--enable-webhook-patching=false", "--enable-apiservice-patching=false"]


def _adapter_args(binary: Path, certs: Path, kubeconfig: Path,
                  ports: dict[str, int]) -> list[str]:
    return [str(binary), f"--secure-port={ports['adapter']}", "--bind-address=127.0.0.1",
            f"--cert-dir={certs}", f"--tls-cert-file={certs / 'tls.crt'}",
            f"--tls-private-key-file={certs / 'tls.key'}",
            f"--lister-kubeconfig={kubeconfig}", f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            f"--metrics-service-address=127.0.0.1:{ports['grpc']}",
            f"--port={ports['adapter-metrics']}", "--zap-log-level=info"]


def start_keda(kubeconfig: Path, state_dir: Path, namespaces: Sequence[str],
               timeout: float = 120.0) -> KedaProcesses:
    """Start KEDA's operator (watching ``namespaces``) and its metrics adapter, built by the
    shared builder (``components.wait_for``: a running build is waited for), logs and
    certificates in ``state_dir``; return once both answer ``/healthz``. The caller
    applies ``metrics_api_objects(keda.adapter_port, keda.cert_dir / "ca.crt")``."""
    bdir = components.wait_for("keda")
    state_dir.mkdir(parents=True, exist_ok=True)
    certs = keda_certs(state_dir / "keda-certs")
    names = ("metrics", "health", "grpc", "adapter", "adapter-metrics")
    ports = dict(zip(names, free_ports(len(names)), strict=True))
    env = {**os.environ, "KUBECONFIG": str(kubeconfig),
           "WATCH_NAMESPACE": ",".join(namespaces), "POD_NAMESPACE": KEDA_NAMESPACE,
           "KEDA_CLUSTER_OBJECT_NAMESPACE": KEDA_NAMESPACE}
    logs = {n: state_dir / f"{n}.log" for n in ("keda-operator", "keda-adapter")}
    keda = KedaProcesses({}, logs, certs, ports["adapter"])
    try:
        for name, args, url, cafile in (
                ("keda-operator", _operator_args(bdir / "keda-operator", certs, ports),
                 f"http://127.0.0.1:{ports['health']}/healthz", None),
                ("keda-adapter", _adapter_args(bdir / "keda-adapter", certs, kubeconfig, ports),
                 f"https://127.0.0.1:{ports['adapter']}/healthz", certs / "ca.crt")):
            keda.procs[name] = _spawn(args, env, logs[name])
            wait_ready(name, keda.procs[name], url, logs[name], timeout, error=RuntimeError,
                       cafile=cafile)
    except BaseException:
        keda.stop()
        raise
    return keda


def apply_metrics_api(kubeconfig: Path, keda: KedaProcesses) -> None:
    """Apply ``metrics_api_objects`` for ``keda`` (``kubectl apply``)."""
    items = metrics_api_objects(keda.adapter_port, keda.cert_dir / "ca.crt")
    kubectl(kubeconfig, "apply", "-f", "-", error=RuntimeError,
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
