"""``up``'s foreground process: start the cluster, watch it, stop it on a signal.

It owns every component (they get SIGTERM if it dies) and, with real nodes, removes their
host state when it stops (``realnodes.stop_with_real_nodes``).
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess

from omenative_devcluster.cluster import Cluster, ClusterError, ClusterOptions
from omenative_devcluster.kwok import KwokOptions, start_kwok
from omenative_devcluster.processes import _log
from omenative_devcluster.realnodes import RealNodes, start_with_real_nodes, stop_with_real_nodes


def _raise_interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


async def _watch(cluster: Cluster, stop: asyncio.Event) -> int:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(1.0):
                await stop.wait()
        dead = cluster.dead_component()
        if dead:
            _log(f"component died: {dead}; stopping")
            return 1
        if cluster.kubelet is not None and cluster.kubelet.failed is not None:
            _log(f"kubelet stand-in failed: {cluster.kubelet.failed!r}; stopping")
            return 1
    return 0


async def run_up(options: ClusterOptions, kwok: KwokOptions | None = None) -> int:
    """Start everything, print ``KUBECONFIG=<path>`` last on stdout, run until a signal;
    ``kwok``: also KWOK's nodes (``kwok.py``)."""
    cluster = Cluster(options, cli_supervisor=True)
    real: RealNodes | None = None
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    # the start is blocking: a SIGTERM there must unwind like Ctrl-C so we clean up
    previous = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        try:
            if options.real_nodes:
                real = start_with_real_nodes(cluster)
            else:
                cluster.start()
            if kwok is not None and kwok.nodes:
                start_kwok(cluster, kwok, build_if_missing=options.build_if_missing)
        except (ClusterError, TimeoutError, OSError, subprocess.CalledProcessError) as exc:
            _log(f"FAILED: {exc}")
            return 1
        finally:
            signal.signal(signal.SIGTERM, previous)
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        if options.nodes:
            try:
                await cluster.start_kubelet()
            except (ClusterError, TimeoutError) as exc:
                _log(f"FAILED: kubelet stand-in did not start: {exc!r}")
                return 1
        _log(f"logs and PIDs in {cluster.state_dir}; faults file: {cluster.faults_path}")
        print(f"KUBECONFIG={cluster.kubeconfig_path}", flush=True)
        rc = await _watch(cluster, stop)
        _log("stopping")
        return rc
    finally:
        if cluster.kubelet is not None:
            await cluster.kubelet.stop()
        stop_with_real_nodes(cluster, real)
        _log("stopped")
