"""A real Prometheus for tests: Debian's binary, fetched without installing the package.

``fetch_prometheus()`` downloads the ``prometheus`` .deb with ``apt-get download`` (running
``apt-get update`` once when the lists are missing), unpacks it with ``dpkg-deb -x`` in a
temporary folder and copies ``usr/bin/prometheus`` to
``~/.cache/omenative/prometheus/<version>/prometheus`` (and ``usr/bin/promtool`` beside it,
for ``fetch_promtool()``: rule files are unit-tested with ``promtool test rules``); nothing
is installed, no service is started. A cached binary is returned at once.

``PrometheusServer`` runs it on 127.0.0.1 on a free port, scraping one target every second
(its TSDB in a temporary folder), waits for ``/-/ready`` and stops it; ``rule_files``
are loaded and evaluated every ``interval`` (alerts on ``/api/v1/alerts``), and
``target_labels`` are added to every scraped series (a ``pod`` label, as Kubernetes service
discovery would give). With
``basic_auth=BasicAuth(user, password, bcrypt_hash)`` every endpoint (``/-/ready``
included) asks for those credentials, through Prometheus's ``--web.config.file``
(``basic_auth_users``); the readiness check sends them.

    python -m omenative_devcluster.prometheus fetch   # prints the binary's path
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Final, NamedTuple
from urllib.parse import urlsplit

__all__ = [
    "DEFAULT_VERSION",
    "BasicAuth",
    "PrometheusError",
    "PrometheusServer",
    "cache_dir",
    "fetch_prometheus",
    "fetch_promtool",
    "main",
]

DEFAULT_VERSION: Final = "2.42.0+ds-5+deb12u1"
"""The Debian package version fetched by default (bookworm's)."""


class PrometheusError(RuntimeError):
    """Prometheus could not be fetched or started; the message says what to do."""


class BasicAuth(NamedTuple):
    """The one user Prometheus accepts: ``bcrypt_hash`` is the bcrypt hash of
    ``password`` (what ``basic_auth_users`` holds); ``password`` is sent by the readiness
    check."""

    username: str
    password: str
    bcrypt_hash: str

    def header(self) -> str:
        """The ``Authorization`` header value of these credentials."""
        raw = f"{self.username}:{self.password}".encode()
        return "Basic " + base64.b64encode(raw).decode("ascii")


def cache_dir() -> Path:
    """``~/.cache/omenative/prometheus`` (``$XDG_CACHE_HOME`` respected)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "omenative" / "prometheus"


def _run(cmd: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600,
                              check=False)
    except FileNotFoundError:
        raise PrometheusError(
            f"{cmd[0]} not found: fetching Prometheus needs a Debian-like system with apt "
            "and dpkg") from None
    except subprocess.TimeoutExpired:
        raise PrometheusError(f"{' '.join(cmd)} took more than 10 minutes") from None


def fetch_prometheus(version: str = DEFAULT_VERSION) -> Path:
    """The path of the Prometheus binary of ``version``, downloading it when not cached."""
    return _fetch_binary(version, "prometheus")


def fetch_promtool(version: str = DEFAULT_VERSION) -> Path:
    """The path of ``promtool`` of ``version`` (same package), downloading it when not cached."""
    return _fetch_binary(version, "promtool")


def _fetch_binary(version: str, name: str) -> Path:
    target = cache_dir() / version / name
    if target.is_file() and os.access(target, os.X_OK):
        return target
    with tempfile.TemporaryDirectory(prefix="omenative-prometheus-") as tmp:
        work = Path(tmp)
        spec = f"prometheus={version}"
        res = _run(["apt-get", "download", spec], cwd=work)
        if res.returncode != 0:
            update = _run(["apt-get", "update"])
            if update.returncode != 0:
                raise PrometheusError(
                    f"apt-get download {spec} failed ({res.stderr.strip()[-300:]}) and "
                    f"apt-get update failed too ({update.stderr.strip()[-300:]})")
            res = _run(["apt-get", "download", spec], cwd=work)
        if res.returncode != 0:
            policy = _run(["apt-cache", "policy", "prometheus"]).stdout.strip()
            raise PrometheusError(
                f"apt-get download {spec} failed: {res.stderr.strip()[-400:]}\n"
                f"apt-cache policy prometheus says:\n{policy or '(nothing)'}\n"
                "pass the candidate version with --version")
        debs = sorted(work.glob("prometheus_*.deb"))
        if not debs:
            raise PrometheusError(f"apt-get download {spec} left no .deb in {work}")
        root = work / "root"
        unpack = _run(["dpkg-deb", "-x", str(debs[0]), str(root)])
        if unpack.returncode != 0:
            raise PrometheusError(f"dpkg-deb -x {debs[0].name} failed: "
                                  f"{unpack.stderr.strip()[-400:]}")
        for each in ("prometheus", "promtool"):
            binary = root / "usr" / "bin" / each
            if not binary.is_file():
                raise PrometheusError(f"{debs[0].name} has no usr/bin/{each}")
            dest = target.parent / each
            dest.parent.mkdir(parents=True, exist_ok=True)
            partial = dest.with_suffix(".partial")
            shutil.copy2(binary, partial)
            partial.chmod(0o755)
            partial.replace(dest)  # atomic: a concurrent fetch sees all or nothing
    return target


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class PrometheusServer:
    """One Prometheus on 127.0.0.1 scraping ``target_url`` (``http://host:port/path``)
    every ``interval``; ``url`` is its address once started. ``basic_auth`` makes it
    refuse requests without those credentials (HTTP 401)."""

    def __init__(self, target_url: str, *, binary: Path | None = None,
                 interval: str = "1s", basic_auth: BasicAuth | None = None,
                 rule_files: tuple[Path, ...] = (),
                 target_labels: dict[str, str] | None = None) -> None:
        self.target_url = target_url
        self.rule_files = rule_files
        self.target_labels = dict(target_labels or {})
        self.binary = binary
        self.interval = interval
        self.basic_auth = basic_auth
        self.port = 0
        self.url = ""
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    def _config(self) -> str:
        parts = urlsplit(self.target_url)
        return (
            "global:\n"
            f"  scrape_interval: {self.interval}\n"
            f"  evaluation_interval: {self.interval}\n"
            + ("rule_files:\n" if self.rule_files else "")
            + "".join(f"- {json.dumps(str(p))}\n" for p in self.rule_files)
            + "scrape_configs:\n"
            "- job_name: target\n"
            f"  scrape_interval: {self.interval}\n"
            f"  scrape_timeout: {self.interval}\n"
            f"  scheme: {parts.scheme or 'http'}\n"
            f"  metrics_path: {parts.path or '/metrics'}\n"
            "  static_configs:\n"
            f"  - targets: ['{parts.netloc}']\n"
            + (f"    labels: {json.dumps(self.target_labels)}\n" if self.target_labels else "")
        )

    def _web_config(self) -> str:
        """``--web.config.file``: the one basic-auth user (JSON is YAML)."""
        assert self.basic_auth is not None
        user, _, bcrypt_hash = self.basic_auth
        return json.dumps({"basic_auth_users": {user: bcrypt_hash}}) + "\n"

    def spawn(self) -> None:
        """Start the process (``wait_ready`` / ``await ready()`` waits for it)."""
        binary = self.binary or fetch_prometheus()
        self._tmp = tempfile.TemporaryDirectory(prefix="omenative-prom-")
        root = Path(self._tmp.name)
        (root / "prometheus.yml").write_text(self._config())
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._log = root / "prometheus.log"
        args = [str(binary), f"--config.file={root / 'prometheus.yml'}",
                f"--storage.tsdb.path={root / 'data'}",
                f"--web.listen-address=127.0.0.1:{self.port}"]
        if self.basic_auth is not None:
            (root / "web.yml").write_text(self._web_config())
            args.append(f"--web.config.file={root / 'web.yml'}")
        with self._log.open("wb") as log:
            self._proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT,
                                          start_new_session=True)

    def _is_ready(self) -> bool:
        if self._proc is None:
            raise PrometheusError("not started")
        if self._proc.poll() is not None:
            raise PrometheusError(f"prometheus exited with {self._proc.returncode}: "
                                  f"{self.log_tail()}")
        request = urllib.request.Request(f"{self.url}/-/ready")
        if self.basic_auth is not None:
            request.add_header("Authorization", self.basic_auth.header())
        try:
            with urllib.request.urlopen(request, timeout=1) as resp:
                return bool(resp.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Block until ``/-/ready`` answers 200."""
        deadline = time.monotonic() + timeout
        while not self._is_ready():
            if time.monotonic() > deadline:
                raise PrometheusError(f"not ready after {timeout:g}s: {self.log_tail()}")
            time.sleep(0.1)

    async def ready(self, timeout: float = 30.0) -> None:
        """Like ``wait_ready`` without blocking the event loop."""
        deadline = time.monotonic() + timeout
        while not await asyncio.to_thread(self._is_ready):
            if time.monotonic() > deadline:
                raise PrometheusError(f"not ready after {timeout:g}s: {self.log_tail()}")
            await asyncio.sleep(0.1)

    def start(self, timeout: float = 30.0) -> PrometheusServer:
        """Spawn and wait until ready."""
        self.spawn()
        try:
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def log_tail(self, n: int = 2000) -> str:
        """The end of Prometheus's log."""
        try:
            return self._log.read_text(errors="replace")[-n:] if self._log else ""
        except OSError:
            return ""

    def stop(self) -> None:
        """Stop the process (SIGTERM, then SIGKILL) and remove its folder."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait(5)
        self._proc = None
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None


def main(argv: list[str] | None = None) -> int:
    """``fetch [--version V]``: print the cached binary's path (exit 1 with the reason)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] != "fetch":
        print("usage: python -m omenative_devcluster.prometheus fetch "
              "[--version VERSION]", file=sys.stderr)
        return 2
    version = DEFAULT_VERSION
    if "--version" in args:
        i = args.index("--version")
        if i + 1 >= len(args):
            print("--version needs a value", file=sys.stderr)
            return 2
        version = args[i + 1]
    try:
        print(fetch_prometheus(version))
    except PrometheusError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
