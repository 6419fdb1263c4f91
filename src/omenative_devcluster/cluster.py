"""Start and stop a local control plane: etcd, kube-apiserver, controller-manager, scheduler.

All processes run on free ports of 127.0.0.1 picked at start, so several clusters can run at
once. The state folder holds the kubeconfig, certificates, the admin token, one log file per
component and ``pids.json`` (what ``down`` stops). The kubelet stand-in (``kubelet.py``)
runs inside the process that started the cluster.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import attrs

from omenative_devcluster import build
from omenative_devcluster.aggregation import aggregation_flags, front_proxy_certs
from omenative_devcluster.k8s_versions import gang_flags
from omenative_devcluster.kubelet import KubeletStandIn, StandInConfig
from omenative_devcluster.processes import (
    PIDS_FILE,
    _http_ok,
    _is_ours,
    _log,
    _pdeathsig,
    _recorded,
    _tail,
    free_ports,
    read_pids,
)
from omenative_devcluster.realnodes_host import HOST_ADDRESS

DEFAULT_STATE_DIR = Path(".state") / "devcluster"
KUBECONFIG_FILE = "kubeconfig"
FAULTS_FILE = "faults.json"

#: Components in start order; ``stop`` goes in reverse.
COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")

KUBELET_CLIENT_CA = "kubelet-client-ca.crt"
KUBELET_CLIENT_CERT = "kubelet-client.crt"
KUBELET_CLIENT_KEY = "kubelet-client.key"


def kubelet_client_certs(certs: Path) -> None:
    """A CA for the real kubelets' client authentication and the API server's certificate
    from it (group ``system:masters``): a pod reaches the kubelets' address, so the kubelets
    accept no anonymous request (exec, logs, pod lists) and trust only this CA."""

    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ca_key, csr = certs / "kubelet-client-ca.key", certs / "kubelet-client.csr"
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "30",
            "-subj", "/CN=omenative-devcluster-kubelet-client-ca",
            "-keyout", str(ca_key), "-out", str(certs / KUBELET_CLIENT_CA))
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(certs / KUBELET_CLIENT_KEY),
            "-subj", "/O=system:masters/CN=kube-apiserver-kubelet-client", "-out", str(csr))
    openssl("x509", "-req", "-in", str(csr), "-CA", str(certs / KUBELET_CLIENT_CA),
            "-CAkey", str(ca_key), "-CAcreateserial", "-days", "30",
            "-out", str(certs / KUBELET_CLIENT_CERT))


class ClusterError(RuntimeError):
    """The control plane could not be started (the message says which part and why)."""



@attrs.define
class ClusterOptions:
    """What ``up`` starts: node count and GPUs for the stand-in, delays, where state goes."""

    state_dir: Path = DEFAULT_STATE_DIR
    nodes: int = 4
    gpus_per_node: int = 8
    start_delay: float = 0.5
    ready_delay: float = 0.5
    delete_delay: float = 0.2
    #: node-monitor-grace-period of the controller-manager (how long until NotReady)
    node_grace_seconds: int = 20
    heartbeat_seconds: float = 4.0
    version: str = build.K8S_VERSION
    #: kube-controller-manager's client limits (``--kube-api-qps``/``--kube-api-burst``); it
    #: creates the pods of StatefulSets (LeaderWorkerSet's groups), so a fair benchmark gives
    #: it the limits of the controllers compared. None keeps its defaults (20 QPS / burst 30).
    controller_manager_qps: float | None = None
    controller_manager_burst: int | None = None
    #: kube-scheduler's client limits; it binds every pod, so its rate can set the pace of a
    #: big bring-up without gangs (with Kubernetes' own gangs it did not:
    #: docs/benchmarks-history.md, runs Y4). None keeps its defaults (50 QPS / burst 100).
    scheduler_qps: float | None = None
    scheduler_burst: int | None = None
    #: build missing binaries instead of failing (takes tens of minutes when cold)
    build_if_missing: bool = True
    start_timeout: float = 180.0
    #: real nodes (kubelet + containerd each; ``realnodes.py``) beside or instead of the
    #: stand-in's; with any, the API server serves on ``realnodes_host.HOST_ADDRESS``
    real_nodes: int = 0
    #: the kube-apiserver's aggregation layer (``aggregation.py``), for extension API
    #: servers such as KEDA's metrics adapter
    aggregation: bool = False

    @property
    def host(self) -> str:
        """The address the API server binds and advertises (pods reach it with real nodes)."""
        return HOST_ADDRESS if self.real_nodes else "127.0.0.1"


@attrs.define
class _Proc:
    name: str
    popen: subprocess.Popen[bytes]
    log_path: Path
    log_file: TextIO


@attrs.define
class Cluster:
    """One local control plane, started with :meth:`start` and stopped with :meth:`stop`.

    ``start`` is synchronous (it blocks until every component is healthy); the kubelet
    stand-in is async and is started separately with :meth:`start_kubelet`.
    """

    options: ClusterOptions
    token: str = ""
    ports: dict[str, int] = attrs.Factory(dict)
    etcd_data_dir: Path | None = None
    _procs: list[_Proc] = attrs.Factory(list)
    kubelet: KubeletStandIn | None = None
    #: True when the ``up`` command owns this process (then ``down`` may SIGTERM it)
    cli_supervisor: bool = False
    _wrote_pids: bool = False

    @property
    def state_dir(self) -> Path:
        """Absolute state folder."""
        return self.options.state_dir.resolve()

    @property
    def kubeconfig_path(self) -> Path:
        """Admin kubeconfig written by :meth:`start`."""
        return self.state_dir / KUBECONFIG_FILE

    @property
    def faults_path(self) -> Path:
        """The stand-in's runtime fault file."""
        return self.state_dir / FAULTS_FILE

    @property
    def server_url(self) -> str:
        """HTTPS address of the kube-apiserver."""
        return f"https://{self.options.host}:{self.ports['apiserver']}"

    # ---------------------------------------------------------------- start

    def start(self) -> None:
        """Start etcd, kube-apiserver, controller-manager and scheduler; raise ClusterError."""
        try:
            self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> None:
        opts = self.options
        sdir = self.state_dir
        bdir = self._binaries()
        sdir.mkdir(parents=True, exist_ok=True)
        self._refuse_running()
        for old in ("certs", "logs"):
            shutil.rmtree(sdir / old, ignore_errors=True)
        certs = sdir / "certs"
        logs = sdir / "logs"
        certs.mkdir()
        logs.mkdir()
        names = ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler")
        self.ports = dict(zip(names, free_ports(len(names)), strict=True))
        self.token = secrets.token_hex(24)
        (certs / "tokens.csv").write_text(f'{self.token},admin,admin,"system:masters"\n')
        sa_key = certs / "sa.key"
        subprocess.run(
            ["openssl", "genrsa", "-out", str(sa_key), "2048"], check=True, capture_output=True
        )
        if opts.real_nodes:
            kubelet_client_certs(certs)
        if opts.aggregation:
            front_proxy_certs(certs)
        self.etcd_data_dir = Path(tempfile.mkdtemp(prefix="omenative-etcd-"))
        self._write_pids()

        p = self.ports
        try:
            gates, runtime_config = gang_flags(opts.version)
        except ValueError as exc:
            raise ClusterError(str(exc)) from None
        etcd_url = f"http://127.0.0.1:{p['etcd']}"
        peer_url = f"http://127.0.0.1:{p['etcd-peer']}"
        self.spawn(
            "etcd",
            [
                str(bdir / "etcd"),
                "--name=devcluster",
                f"--data-dir={self.etcd_data_dir}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=devcluster={peer_url}",
                "--initial-cluster-state=new",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )
        self._wait("etcd", lambda: _http_ok(f"{etcd_url}/health", None), 30)

        port = p["apiserver"]
        self.spawn(
            "kube-apiserver",
            [
                str(bdir / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                f"--cert-dir={certs}",
                f"--secure-port={port}",
                f"--bind-address={opts.host}",
                f"--advertise-address={opts.host}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--allow-privileged=true",
                *self._real_node_flags(),
                *(aggregation_flags(certs) if opts.aggregation else []),
                "--authorization-mode=Node,RBAC",
                f"--token-auth-file={certs / 'tokens.csv'}",
                f"--service-account-issuer=https://127.0.0.1:{port}/",
                f"--service-account-key-file={sa_key}",
                f"--service-account-signing-key-file={sa_key}",
                "--profiling=false",
                f"--feature-gates={gates}",
                f"--runtime-config={runtime_config}",
                "--v=1",
            ],
        )
        self._wait(
            "kube-apiserver",
            lambda: _http_ok(f"{self.server_url}/readyz", self.token),
            opts.start_timeout,
        )
        self._write_kubeconfig(certs / "apiserver.crt")
        kcfg = str(self.kubeconfig_path)
        common = [
            f"--kubeconfig={kcfg}",
            f"--authentication-kubeconfig={kcfg}",
            f"--authorization-kubeconfig={kcfg}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            "--v=1",
        ]
        self.spawn(
            "kube-controller-manager",
            [
                str(bdir / "kube-controller-manager"),
                *common,
                f"--secure-port={p['controller-manager']}",
                f"--service-account-private-key-file={sa_key}",
                f"--root-ca-file={certs / 'apiserver.crt'}",
                "--use-service-account-credentials=false",
                "--controllers=*",
                "--service-cluster-ip-range=10.0.0.0/24",
                f"--node-monitor-grace-period={opts.node_grace_seconds}s",
                "--node-monitor-period=2s",
                "--concurrent-deployment-syncs=10",
                "--concurrent-replicaset-syncs=10",
                f"--feature-gates={gates}",
                *self._client_limits(),
            ],
        )
        self.spawn(
            "kube-scheduler",
            [
                str(bdir / "kube-scheduler"),
                *common,
                f"--secure-port={p['scheduler']}",
                f"--feature-gates={gates}",
                *self._client_limits(scheduler=True),
            ],
        )
        for name, key in (("kube-controller-manager", "controller-manager"),
                          ("kube-scheduler", "scheduler")):
            url = f"https://127.0.0.1:{p[key]}/healthz"
            self._wait(name, lambda u=url: _http_ok(u, None), opts.start_timeout)  # type: ignore[misc]
        _log(f"control plane up at {self.server_url}")

    def _real_node_flags(self) -> list[str]:
        """Real kubelets are reached by InternalIP with a client certificate (they refuse
        anyone else); their pods get service account tokens.

        Without real nodes the API server advertises 127.0.0.1, which 1.37 refuses with its
        endpoint reconciler ("cannot use public IP 127.0.0.1 with endpoint reconciler ...
        may not be in the loopback range"): no pod needs the ``kubernetes`` Service's
        endpoints then, so the reconciler is off (1.36 keeps its default)."""
        if self.options.real_nodes:
            certs = self.state_dir / "certs"
            return ["--kubelet-preferred-address-types=InternalIP",
                    f"--kubelet-client-certificate={certs / KUBELET_CLIENT_CERT}",
                    f"--kubelet-client-key={certs / KUBELET_CLIENT_KEY}"]
        minor = int(self.options.version.removeprefix("v").split(".")[1])
        return ["--disable-admission-plugins=ServiceAccount",
                *(["--endpoint-reconciler-type=none"] if minor >= 37 else [])]

    @property
    def kubelet_client_ca(self) -> Path:
        """The CA real kubelets trust for client certificates (only the API server has one)."""
        return self.state_dir / "certs" / KUBELET_CLIENT_CA

    def _client_limits(self, *, scheduler: bool = False) -> list[str]:
        """kube-controller-manager's (or kube-scheduler's) client-limit flags."""
        opts = self.options
        qps, burst = ((opts.scheduler_qps, opts.scheduler_burst) if scheduler
                      else (opts.controller_manager_qps, opts.controller_manager_burst))
        out = []
        if qps is not None:
            out.append(f"--kube-api-qps={qps:g}")
        if burst is not None:
            out.append(f"--kube-api-burst={burst}")
        return out

    def _binaries(self) -> Path:
        missing = build.missing_binaries(self.options.version)
        if missing:
            if not self.options.build_if_missing:
                raise ClusterError(
                    f"binaries {missing} missing in {build.bin_dir(self.options.version)}; "
                    "run `python -m omenative_devcluster build`"
                )
            _log(f"binaries missing ({', '.join(missing)}): building (cold: tens of minutes)")
            try:
                build.build(self.options.version)
            except (RuntimeError, OSError, subprocess.CalledProcessError) as exc:
                raise ClusterError(f"building the control plane failed: {exc}") from exc
        return build.bin_dir(self.options.version)

    def _refuse_running(self) -> None:
        pids = read_pids(self.state_dir)
        if pids is None:
            return
        alive = [n for n, pid, exe in _recorded(pids) if _is_ours(pid, exe)]
        if alive:
            raise ClusterError(
                f"a cluster is already running from {self.state_dir} ({', '.join(alive)}): "
                f"run `python -m omenative_devcluster down --state-dir "
                f"{self.state_dir}` first or pick another --state-dir"
            )

    def spawn(self, name: str, args: list[str]) -> None:
        """Start a component process (own session, SIGTERM when we die), recorded in pids.json."""
        log_path = self.state_dir / "logs" / f"{name}.log"
        log_file = log_path.open("w")
        _log(f"starting {name} (log: {log_path})")
        popen = subprocess.Popen(
            args,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            cwd=self.state_dir,
            start_new_session=True,  # Ctrl-C goes to us; we stop the components in order
            preexec_fn=_pdeathsig,  # noqa: PLW1509 (we start components from one thread)
        )
        self._procs.append(_Proc(name, popen, log_path, log_file))
        self._write_pids()

    def wait_healthy(self, name: str, url: str, timeout: float) -> None:
        """Wait until ``url`` answers 200 while component ``name`` runs; raise ClusterError."""
        self._wait(name, lambda: _http_ok(url, None), timeout)

    def kubectl(self, *args: str) -> str:
        """Run the cluster's kubectl with the admin kubeconfig; its stdout (ClusterError)."""
        out = subprocess.run(
            [str(build.bin_dir(self.options.version) / "kubectl"),
             f"--kubeconfig={self.kubeconfig_path}", *args],
            capture_output=True, text=True, check=False)
        if out.returncode:
            raise ClusterError(f"kubectl {' '.join(args)}: {out.stderr.strip()}")
        return out.stdout

    def _wait(self, name: str, check: Callable[[], bool], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        proc = next(p for p in reversed(self._procs) if p.name == name)
        while time.monotonic() < deadline:
            if proc.popen.poll() is not None:
                raise ClusterError(
                    f"{name} exited with code {proc.popen.returncode} during start; "
                    f"last log lines ({proc.log_path}):\n{_tail(proc.log_path)}"
                )
            if check():
                _log(f"{name} healthy")
                return
            time.sleep(0.25)
        raise ClusterError(
            f"{name} not healthy after {timeout:.0f}s; last log lines ({proc.log_path}):\n"
            f"{_tail(proc.log_path)}"
        )

    def _write_kubeconfig(self, ca_file: Path) -> None:
        ca = base64.b64encode(ca_file.read_bytes()).decode()
        cfg = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "devcluster",
                    "cluster": {"server": self.server_url, "certificate-authority-data": ca},
                }
            ],
            "users": [{"name": "admin", "user": {"token": self.token}}],
            "contexts": [
                {"name": "devcluster", "context": {"cluster": "devcluster", "user": "admin"}}
            ],
            "current-context": "devcluster",
        }
        tmp = self.kubeconfig_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cfg, indent=2) + "\n")  # JSON is valid YAML
        tmp.chmod(0o600)
        tmp.replace(self.kubeconfig_path)

    def _write_pids(self) -> None:
        data: dict[str, Any] = {
            "supervisor": {
                "pid": os.getpid(), "exe": sys.executable, "cli": self.cli_supervisor,
            },
            "components": {
                p.name: {"pid": p.popen.pid, "exe": str(p.popen.args[0])}  # type: ignore[index]
                for p in self._procs
            },
            "ports": self.ports,
            "etcdDataDir": str(self.etcd_data_dir) if self.etcd_data_dir else None,
            "kubeconfig": str(self.kubeconfig_path),
            "version": self.options.version,
        }
        tmp = self.state_dir / (PIDS_FILE + ".tmp")
        tmp.write_text(json.dumps(data, indent=2) + "\n")
        tmp.replace(self.state_dir / PIDS_FILE)
        self._wrote_pids = True

    # ---------------------------------------------------------------- kubelet stand-in

    async def start_kubelet(self) -> KubeletStandIn:
        """Start the kubelet stand-in in the running loop and wait until its nodes are Ready."""
        o = self.options
        self.kubelet = KubeletStandIn(
            StandInConfig(
                kubeconfig=self.kubeconfig_path,
                nodes=o.nodes,
                gpus_per_node=o.gpus_per_node,
                start_delay=o.start_delay,
                ready_delay=o.ready_delay,
                delete_delay=o.delete_delay,
                heartbeat_seconds=o.heartbeat_seconds,
                fault_file=self.faults_path,
                node_prefix="stand-in-" if o.real_nodes else "node-",
                tainted=bool(o.real_nodes),
            )
        )
        await self.kubelet.start()
        await self.kubelet.wait_nodes_ready(timeout=60)
        return self.kubelet

    def dead_component(self) -> str | None:
        """Name of a component that has exited (None while all run)."""
        for p in self._procs:
            if p.popen.poll() is not None:
                return f"{p.name} (exit code {p.popen.returncode}, log {p.log_path})"
        return None

    # ---------------------------------------------------------------- stop

    def stop(self) -> None:
        """Stop the components in reverse order (SIGTERM, then SIGKILL) and clean up."""
        for p in reversed(self._procs):
            if p.popen.poll() is None:
                p.popen.terminate()
                try:
                    p.popen.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    p.popen.kill()
                    p.popen.wait(timeout=5)
            p.log_file.close()
        self._procs.clear()
        if self.etcd_data_dir is not None:
            shutil.rmtree(self.etcd_data_dir, ignore_errors=True)
            self.etcd_data_dir = None
        if self._wrote_pids:
            with contextlib.suppress(OSError):
                (self.state_dir / PIDS_FILE).unlink()
            self._wrote_pids = False
