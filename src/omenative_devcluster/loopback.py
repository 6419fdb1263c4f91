"""Shared plumbing for the real Go components the tests run out of cluster (test support).

Kueue, scheduler-plugins and LeaderWorkerSet all run the same way here: their binary from the
shared builder's cache, their CRDs and webhook manifests read from the module source in the Go
module cache (never copied into this repository), their webhooks served on a loopback port
with a certificate made at run time, and ``kubectl`` from the local control plane to install
what they need. This module holds those steps once; each component's module keeps only what is
its own (configuration, which webhooks it keeps, how it reports ready).
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from omenative_devcluster.build import _go_env, bin_dir
from omenative_devcluster.components import COMPONENTS

__all__ = [
    "ComponentError",
    "free_port",
    "install_crds",
    "kubectl",
    "log_tail",
    "make_certificate",
    "module_source",
    "point_webhooks",
    "stop_process",
    "unregister_webhooks",
    "wait_ready",
]


class ComponentError(RuntimeError):
    """A component could not be prepared or started; the message says why."""


def module_source(name: str, error: type[RuntimeError] = ComponentError) -> Path:
    """Component ``name``'s module source in the Go module cache (downloaded if missing)."""
    component = COMPONENTS[name]
    if shutil.which("go") is None:
        raise error(f"no `go` command on PATH: it locates {name}'s module source")
    proc = subprocess.run(
        ["go", "mod", "download", "-json", f"{component.module}@{component.version}"],
        capture_output=True, text=True, env=_go_env(), cwd=Path.home(), check=False,
    )
    try:
        info = json.loads(proc.stdout)
    except ValueError:
        info = {}
    where = info.get("Dir") if isinstance(info, dict) else None
    if proc.returncode != 0 or not where:
        raise error(f"go mod download {component.module}@{component.version} failed: "
                    f"{(proc.stderr or proc.stdout).strip()[-600:]}")
    return Path(where)


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def make_certificate(cert_dir: Path, error: type[RuntimeError] = ComponentError) -> bytes:
    """A self-signed certificate for 127.0.0.1 in ``tls.crt``/``tls.key``; returns the PEM."""
    openssl = shutil.which("openssl")
    if openssl is None:
        raise error("the openssl CLI is needed to make a webhook certificate")
    cert_dir.mkdir(parents=True, exist_ok=True)
    proc = subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1",
         "-keyout", str(cert_dir / "tls.key"), "-out", str(cert_dir / "tls.crt")],
        capture_output=True, text=True, check=False,
    )
    if proc.returncode != 0:
        raise error(f"openssl could not make a certificate: {proc.stderr.strip()[-400:]}")
    return (cert_dir / "tls.crt").read_bytes()


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None, timeout: float = 120,
            error: type[RuntimeError] = ComponentError) -> str:
    """Run the local control plane's ``kubectl`` against ``kubeconfig``; its stdout."""
    binary = bin_dir() / "kubectl"
    if not os.access(binary, os.X_OK):
        raise error(f"kubectl is not built ({binary}): run `python -m omenative_devcluster build`")
    proc = subprocess.run(
        [str(binary), "--kubeconfig", str(kubeconfig), *args],
        input=stdin, capture_output=True, text=True, timeout=timeout, check=False,
    )
    if proc.returncode != 0:
        raise error(f"kubectl {' '.join(args[:3])} failed: "
                    f"{(proc.stderr or proc.stdout).strip()[-800:]}")
    return proc.stdout


def install_crds(kubeconfig: Path, files: Iterable[Path], names: Iterable[str],
                 error: type[RuntimeError] = ComponentError, timeout: float = 60) -> None:
    """Apply a module's CRD ``files`` (server-side: some are too big for a client-side
    apply annotation) and wait until the CRDs ``names`` are Established.

    A CRD created a moment ago has no conditions yet and ``kubectl wait`` fails on it with
    an "accessor error"; that is waited out too.
    """
    for crd in files:
        kubectl(kubeconfig, "apply", "--server-side", "--force-conflicts", "-f", str(crd),
                error=error)
    crds = [f"crd/{name}" for name in names]
    deadline = time.monotonic() + timeout
    while True:
        try:
            kubectl(kubeconfig, "wait", "--for=condition=Established", "--timeout=30s", *crds,
                    error=error)
            return
        except RuntimeError as exc:
            if "accessor error" not in str(exc) or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def point_webhooks(docs: Iterable[Mapping[str, Any]], base_url: str, ca_pem: bytes,
                   config_name: str,
                   adjust: Callable[[Mapping[str, Any]], Mapping[str, Any] | None],
                   ) -> list[dict[str, Any]]:
    """A module's webhook configurations, each entry pointed at the component on loopback.

    Every entry of ``docs`` calls ``{base_url}{its service path}`` with ``ca_pem`` as its
    ``caBundle`` and a 10 s timeout; ``adjust(entry)`` returns the fields to add to it (a
    selector), or None to drop it. Configurations left with no entry are dropped; the others
    are named ``config_name``.
    """
    bundle = base64.b64encode(ca_pem).decode()
    out: list[dict[str, Any]] = []
    for doc in docs:
        hooks = []
        for hook in doc.get("webhooks") or ():
            extra = adjust(hook)
            if extra is None:
                continue
            path = str(((hook.get("clientConfig") or {}).get("service") or {}).get("path", ""))
            hooks.append({**hook, "clientConfig": {"url": f"{base_url}{path}", "caBundle": bundle},
                          "timeoutSeconds": 10, **extra})
        if hooks:
            out.append({"apiVersion": doc["apiVersion"], "kind": doc["kind"],
                        "metadata": {"name": config_name}, "webhooks": hooks})
    return out


def unregister_webhooks(kubeconfig: Path, config_name: str) -> None:
    """Delete both webhook configurations named ``config_name`` (best effort: on stop)."""
    with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
        kubectl(kubeconfig, "delete", "--ignore-not-found", "--wait=false",
                f"mutatingwebhookconfiguration/{config_name}",
                f"validatingwebhookconfiguration/{config_name}")


def log_tail(path: Path, lines: int = 40) -> str:
    """The end of a component's log file (for error messages)."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:])


def wait_ready(name: str, proc: subprocess.Popen[bytes] | None, url: str, log_path: Path,
               timeout: float, error: type[RuntimeError] = ComponentError,
               ready: Callable[[], bool] | None = None, cafile: Path | None = None) -> None:
    """Wait until ``url`` answers 200 (and ``ready()``, if given) while ``proc`` runs.

    An ``https`` URL is verified against ``cafile`` (the certificate made for the component).

    Raises ``error`` naming the component, the reason and the end of its log when the process
    exits first or ``timeout`` seconds pass.
    """
    deadline = time.monotonic() + timeout
    last = ""
    context = ssl.create_default_context(cafile=str(cafile)) if cafile is not None else None
    while True:
        if proc is None or proc.poll() is not None:
            code = None if proc is None else proc.returncode
            raise error(f"{name} exited (code {code}) before it was ready; its log "
                        f"ends:\n{log_tail(log_path)}")
        try:
            with urllib.request.urlopen(url, timeout=2, context=context) as resp:
                if resp.status == 200 and (ready is None or ready()):
                    return
        except (urllib.error.URLError, OSError, ValueError) as exc:
            last = str(exc)
        if time.monotonic() > deadline:
            raise error(f"{name} was not ready within {timeout:.0f}s ({url}: {last}); "
                        f"its log ends:\n{log_tail(log_path)}")
        time.sleep(0.5)


def stop_process(proc: subprocess.Popen[bytes] | None, grace: float = 15) -> None:
    """SIGTERM a component's process group, SIGKILL it after ``grace`` seconds."""
    if proc is None or proc.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=5)
