"""Real nodes in the local control plane: per node a containerd and a real kubelet.

``python -m omenative_devcluster up --real-nodes N`` (1..4) starts, beside the control
plane, per node a containerd v2 (runc with seccomp; own root, state, socket, CNI bridge and
/24) and a kubelet of the control plane's release, built from its own module; then one
kube-proxy (iptables mode) and CoreDNS as the kubelets' ``clusterDNS``. The API server and CoreDNS
serve pods on ``HOST_ADDRESS``, an address on a dummy interface of ours: nothing listens on,
or is routed to, the machine's own address. Nodes advertise ``nvidia.com/gpu`` (patched into
their status) and the stand-in's topology labels.

Order: ``prepare`` (machine lock, leftovers of a killed run removed, host set-up) before the
control plane starts, ``start`` after; ``teardown`` after the processes stopped. The
processes are the cluster's (``Cluster.spawn``): ``down`` and ``Cluster.stop`` stop them.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any

import attrs

from omenative_devcluster import build, components
from omenative_devcluster import realnodes_host as host
from omenative_devcluster.cluster import Cluster, ClusterError
from omenative_devcluster.images import PAUSE_IMAGE, build_image_archives
from omenative_devcluster.kubelet_api import GPU
from omenative_devcluster.processes import free_ports
from omenative_devcluster.realnodes_config import (
    NodeLayout,
    cni_config,
    containerd_config,
    corefile,
    kube_proxy_config,
    kubelet_config,
    kubelet_labels,
)

MAX_NODES = 4
DEVICE_PLUGIN_SOCKET = Path("/var/lib/kubelet/device-plugins/kubelet.sock")
"""Where every kubelet serves device-plugin registration: a fixed path, whatever its
``--root-dir``. A kubelet removes the file, then binds it; two kubelets starting at once
can interleave the two steps, and the second then dies (``bind: address already in use``,
seen once in CI on 72fb876). So each kubelet starts once the one before has bound it."""
SOCKET_WAIT = 15.0
"""Seconds a kubelet is given to bind the socket before the next one starts anyway (the
wait for Ready then says what went wrong)."""
#: Extra images to import into every node, ``ref=archive`` comma-separated (try your own).
EXTRA_IMAGES_ENV = "OMENATIVE_REALNODES_IMAGES"


class RealNodesError(ClusterError):
    """Real nodes could not start (the message says which part and why)."""


def image_archives() -> tuple[str, dict[str, Path]]:
    """The sandbox image ref and every image archive to import (ref -> OCI archive).

    The images come from ``omenative_devcluster.images`` (pause and model server, built here
    without a registry), plus any named in ``$OMENATIVE_REALNODES_IMAGES``.
    """
    try:
        archives = build_image_archives()
    except (RuntimeError, OSError) as exc:
        raise RealNodesError(f"building the node images failed: {exc}") from exc
    for item in filter(None, os.environ.get(EXTRA_IMAGES_ENV, "").split(",")):
        ref, sep, path = item.partition("=")
        if not sep or not Path(path).is_file():
            raise RealNodesError(f"{EXTRA_IMAGES_ENV}: {item!r} is not ref=<existing archive>")
        archives[ref] = Path(path)
    return PAUSE_IMAGE, archives


@attrs.define
class RealNodes:
    """N real nodes of one cluster: set up with ``prepare`` + ``start``, removed by ``teardown``."""

    nodes: int
    gpus_per_node: int = 8
    build_if_missing: bool = True
    #: seconds: each node's Ready time after its kubelet started, and the bring-up phases
    timings: dict[str, float] = attrs.Factory(dict)
    layouts: list[NodeLayout] = attrs.Factory(list)
    _lock: contextlib.ExitStack = attrs.Factory(contextlib.ExitStack)
    _kube_proxy: Path | None = None

    def __attrs_post_init__(self) -> None:
        if not 1 <= self.nodes <= MAX_NODES:
            raise RealNodesError(f"--real-nodes must be 1..{MAX_NODES}, not {self.nodes}")

    # ------------------------------------------------------------------ prepare

    def prepare(self, state_dir: Path) -> None:
        """Take the machine lock, remove a killed run's leftovers, set the host up."""
        self._lock.enter_context(host.machine_lock(str(state_dir)))
        try:
            left = host.teardown(build.bin_dir() / "kube-proxy")
            if left:
                raise RealNodesError(f"leftovers of an earlier run could not be removed: {left}")
            host.save_host_state()
            host.set_up_host(self.nodes)
        except (RuntimeError, OSError) as exc:
            self.teardown()
            raise RealNodesError(f"setting the host up for real nodes failed: {exc}") from exc

    # ------------------------------------------------------------------ start

    def _component(self, name: str) -> Path:
        try:
            if self.build_if_missing:
                return components.build_component(name)
            return components.wait_for(name)
        except (RuntimeError, OSError) as exc:
            raise RealNodesError(f"{name}: {exc}") from exc

    def start(self, cluster: Cluster) -> None:
        """Start containerd and a kubelet per node, kube-proxy and CoreDNS; wait until Ready."""
        t0 = time.monotonic()
        cbin = self._component("containerd")
        runc = self._component("runc") / "runc"
        dns = self._component("coredns") / "coredns"
        kbin = build.bin_dir(cluster.options.version)
        self._kube_proxy = kbin / "kube-proxy"
        pause, archives = image_archives()
        self.timings["binaries"] = time.monotonic() - t0
        ports = free_ports(2 * self.nodes + 4)
        self.layouts = [NodeLayout(i, host.BASE_DIR, ports[2 * i], ports[2 * i + 1])
                        for i in range(self.nodes)]
        t1 = time.monotonic()
        for node in self.layouts:
            self._start_containerd(cluster, node, cbin, runc, pause)
        for node in self.layouts:
            self._import_images(cluster, node, cbin / "ctr", archives)
        self.timings["containerd+images"] = time.monotonic() - t1
        kcfg = cluster.kubeconfig_path
        started = {}
        for node in self.layouts:
            before = _inode(DEVICE_PLUGIN_SOCKET)
            started[node.name] = time.monotonic()
            self._start_kubelet(cluster, node, kbin / "kubelet", kcfg)
            _wait_rebound(DEVICE_PLUGIN_SOCKET, before, SOCKET_WAIT)
        base = host.BASE_DIR
        hz, metrics, dns_health, dns_ready = ports[-4:]
        (base / "kube-proxy.json").write_text(kube_proxy_config(kcfg, hz, metrics))
        cluster.spawn("kube-proxy", [str(self._kube_proxy), f"--config={base / 'kube-proxy.json'}",
                                     "--v=1"])
        (base / "Corefile").write_text(corefile(kcfg, dns_health, dns_ready))
        cluster.spawn("coredns", [str(dns), "-conf", str(base / "Corefile")])
        self._wait_nodes_ready(cluster, started)
        self._advertise_gpus(cluster)
        cluster.wait_healthy("kube-proxy", f"http://127.0.0.1:{hz}/healthz", 60)
        cluster.wait_healthy("coredns", f"http://127.0.0.1:{dns_ready}/ready", 60)
        self.timings["all ready"] = time.monotonic() - t0
        host.log("real nodes ready: "
                 + ", ".join(f"{k} {v:.2f} s" for k, v in self.timings.items()))

    def _start_containerd(self, cluster: Cluster, node: NodeLayout, cbin: Path, runc: Path,
                          pause: str) -> None:
        for sub in ("containerd", "cni", "cni-ipam", "pod-logs", "kubelet"):
            (node.dir / sub).mkdir(parents=True, exist_ok=True)
        conf = node.dir / "containerd" / "config.toml"
        conf.write_text(containerd_config(node, cbin, runc, pause))
        (node.dir / "cni" / "10-omenative.conflist").write_text(cni_config(node))
        cluster.spawn(f"containerd-{node.index}",
                      [str(cbin / "containerd"), f"--config={conf}", "--log-level=warn"])

    def _import_images(self, cluster: Cluster, node: NodeLayout, ctr: Path,
                       archives: dict[str, Path]) -> None:
        cmd = [str(ctr), f"--address={node.socket}", "--namespace=k8s.io"]
        deadline = time.monotonic() + 30
        while subprocess.run([*cmd, "version"], capture_output=True, check=False).returncode:
            dead = cluster.dead_component()
            if dead or time.monotonic() > deadline:
                raise RealNodesError(f"containerd of {node.name} did not answer on {node.socket}"
                                     f" ({dead or 'timeout 30 s'}); its log: "
                                     f"{cluster.state_dir / 'logs'}")
            time.sleep(0.1)
        for ref, archive in archives.items():
            out = subprocess.run([*cmd, "images", "import", str(archive)],
                                 capture_output=True, text=True, check=False)
            if out.returncode:
                raise RealNodesError(f"importing {ref} ({archive}) into {node.name}'s containerd "
                                     f"failed: {out.stderr.strip()}")

    def import_images(self, cluster: Cluster, archives: dict[str, Path]) -> None:
        """Import more OCI archives (ref -> archive) into every running node's containerd:
        an image built after the nodes started (the manager's, ``manager_image.py``)."""
        ctr = self._component("containerd") / "ctr"
        for node in self.layouts:
            self._import_images(cluster, node, ctr, archives)

    def _start_kubelet(self, cluster: Cluster, node: NodeLayout, kubelet: Path,
                       kubeconfig: Path) -> None:
        conf = node.dir / "kubelet.json"
        conf.write_text(kubelet_config(node, cluster.kubelet_client_ca))
        cluster.spawn(f"kubelet-{node.index}", [
            str(kubelet), f"--config={conf}", f"--kubeconfig={kubeconfig}",
            f"--root-dir={node.dir / 'kubelet'}", f"--hostname-override={node.name}",
            f"--node-ip={host.HOST_ADDRESS}", f"--node-labels={kubelet_labels(node)}", "--v=1",
        ])

    def _nodes(self, cluster: Cluster) -> dict[str, Any]:
        out = cluster.kubectl("get", "nodes", "-o", "json")
        return {n["metadata"]["name"]: n for n in json.loads(out)["items"]}

    def _wait_nodes_ready(self, cluster: Cluster, started: dict[str, float],
                          timeout: float = 90) -> None:
        deadline = time.monotonic() + timeout
        waiting = dict(started)
        while waiting:
            dead = cluster.dead_component()
            if dead:
                raise RealNodesError(f"{dead} died while the nodes registered")
            for name, node in self._nodes(cluster).items():
                conds = {c["type"]: c["status"] for c in node["status"].get("conditions", [])}
                # Ready alone is not enough: the node lifecycle controller lifts its
                # not-ready taints a moment later, and until then no pod is scheduled there
                lifecycle_taints = [t for t in node["spec"].get("taints", [])
                                    if t["key"].startswith("node.kubernetes.io/")]
                if name in waiting and conds.get("Ready") == "True" and not lifecycle_taints:
                    self.timings[f"{name} ready"] = time.monotonic() - waiting.pop(name)
            if waiting and time.monotonic() > deadline:
                raise RealNodesError(f"nodes {sorted(waiting)} not Ready after {timeout:.0f} s; "
                                     f"kubelet logs in {cluster.state_dir / 'logs'}")
            time.sleep(0.2)

    def _advertise_gpus(self, cluster: Cluster) -> None:
        gpus = str(self.gpus_per_node)
        patch = json.dumps({"status": {"capacity": {GPU: gpus}, "allocatable": {GPU: gpus}}})
        for node in self.layouts:
            cluster.kubectl("patch", "node", node.name, "--subresource=status", "--type=merge",
                            "-p", patch)

    # ------------------------------------------------------------------ teardown

    def teardown(self) -> list[str]:
        """Remove what the nodes left on the host (after their processes stopped); unlock."""
        try:
            left = host.teardown(self._kube_proxy or build.bin_dir() / "kube-proxy")
        finally:
            self._lock.close()
        if left:
            host.log("NOT removed: " + "; ".join(left))
        return left


def down_host(state_dir: Path) -> list[str]:
    """``down``: remove real-node leftovers unless another cluster's run holds the machine."""
    if not host.BASE_DIR.exists() and not host.our_links():
        return []
    if not host.lock_free():
        with contextlib.suppress(OSError, ValueError):
            owner = json.loads(host.LOCK_FILE.read_text()).get("owner")
            if owner != str(state_dir):
                host.log(f"real nodes on this machine belong to {owner}: left running")
                return []
    return host.teardown(build.bin_dir() / "kube-proxy")


def start_with_real_nodes(cluster: Cluster) -> RealNodes:
    """Start ``cluster``'s control plane and its real nodes; on failure leave nothing behind."""
    opts = cluster.options
    real = RealNodes(opts.real_nodes, opts.gpus_per_node, opts.build_if_missing)
    real.prepare(cluster.state_dir)
    try:
        cluster.start()
        real.start(cluster)
    except BaseException:
        cluster.stop()
        real.teardown()
        raise
    return real


def stop_with_real_nodes(cluster: Cluster, real: RealNodes | None) -> list[str]:
    """Stop the cluster's processes, then remove the nodes' host state; return leftovers."""
    cluster.stop()
    return real.teardown() if real is not None else []


def _inode(path: Path) -> tuple[int, int] | None:
    """Which file ``path`` is (its inode and change time: a freed inode may be reused at
    once), None when absent."""
    try:
        st = path.stat()
    except OSError:
        return None
    return st.st_ino, st.st_ctime_ns


def _wait_rebound(path: Path, before: tuple[int, int] | None, timeout: float) -> None:
    """Until ``path`` is another file than ``before``, at most ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        now = _inode(path)
        if now is not None and now != before:
            return
        time.sleep(0.05)
