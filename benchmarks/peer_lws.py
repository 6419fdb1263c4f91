"""The peer in the controller benchmark: the real LeaderWorkerSet v0.7.0 on the same cluster.

``run_peer`` starts LWS (``omenative_devcluster.lws``, webhooks on loopback) with the client
limits given, creates ``replicas`` LeaderWorkerSets of ``groups`` groups each (default one;
a group is a leader and ``workers`` workers, the pod shape of ``bench_controller.py``: one
``ome-container`` of ``example.com/llm:1``, no GPU requests, grace 1 s), waits until every
pod is Ready (the kubelet stand-in runs them), stops LWS and returns:

* ``seconds``: wall time from the first create to the last pod Ready;
* ``requests``: API requests LWS's client made (``rest_client_requests_total`` from its
  metrics endpoint), None when they could not be read;
* ``cpu_seconds`` and ``peak_rss_mb`` of the LWS process (``/proc``: utime+stime, VmHWM).

LWS's pods are created by the StatefulSet controller inside kube-controller-manager: give
that the same client limits (``ClusterOptions.controller_manager_qps/burst``, or ``up
--controller-manager-qps/--controller-manager-burst``), else it, not LWS, sets the pace.

Standalone (starts its own cluster with kube-controller-manager at ``--kcm-qps``)::

    flock /tmp/omenative-heavy.lock .venv/bin/python benchmarks/peer_lws.py --groups 100 250

Timing lives here, never in pass/fail tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib.util
import os
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

if importlib.util.find_spec("omenative_controller") is None:  # not installed: use src/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))


from watching import Tracker, pod_ready, say, wait_done

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import NAMESPACES, PODS, Resource
from omenative_devcluster.lws import NAME_LABEL, LwsProcess, requests_total

LEADER_WORKER_SETS = Resource("leaderworkerset.x-k8s.io", "v1", "leaderworkersets",
                              "LeaderWorkerSet")
IMAGE = "example.com/llm:1"
CREATE_CONCURRENCY = 8  # as bench_controller creates its InferenceReplicas


@dataclass
class PeerResult:
    """What one LWS run measured."""

    seconds: float
    requests: int | None
    cpu_seconds: float
    peak_rss_mb: float


def lws_body(name: str, workers: int, groups: int = 1) -> JSON:
    """One LeaderWorkerSet of ``groups`` groups, each a leader and ``workers`` workers."""
    template = {"spec": {"terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "ome-container", "image": IMAGE}]}}
    return {"apiVersion": LEADER_WORKER_SETS.api_version, "kind": "LeaderWorkerSet",
            "metadata": {"name": name},
            "spec": {"replicas": groups,
                     "leaderWorkerTemplate": {"size": 1 + workers,
                                              "restartPolicy": "RecreateGroupOnPodRestart",
                                              "workerTemplate": template}}}


def proc_usage(pid: int) -> tuple[float, float]:
    """(CPU seconds, peak RSS in MiB) of a live process, from ``/proc``."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return float("nan"), float("nan")
    ticks = os.sysconf("SC_CLK_TCK")
    cpu = (int(stat[11]) + int(stat[12])) / ticks  # utime, stime (fields 14, 15)
    hwm = next((int(line.split()[1]) for line in status.splitlines()
                if line.startswith("VmHWM:")), 0)
    return cpu, hwm / 1024


async def _ensure_namespace(kube: KubeClient, namespace: str) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    try:
        await kube.create(NAMESPACES, body)
    except ApiError as exc:
        if not exc.already_exists:
            raise


async def _create_all(kube: KubeClient, namespace: str, replicas: int, workers: int,
                      groups: int) -> None:
    todo = iter(range(replicas))

    async def worker() -> None:
        for i in todo:
            await kube.create(LEADER_WORKER_SETS, lws_body(f"peer-{i:03d}", workers, groups),
                              namespace)

    await asyncio.gather(*(worker() for _ in range(CREATE_CONCURRENCY)))


async def run_peer(kubeconfig: Path, namespace: str, replicas: int, workers: int, *,
                   qps: float, burst: int, state_dir: Path, groups: int = 1,
                   timeout: float = 900.0) -> PeerResult:
    """Run LWS on ``replicas`` LeaderWorkerSets of ``groups`` groups of 1 + ``workers`` pods;
    see the module docstring."""
    lws = LwsProcess(kubeconfig, state_dir, qps=qps, burst=burst, metrics=True)
    await asyncio.to_thread(lws.start)
    kube = await KubeClient.connect(str(kubeconfig), qps=0, burst=1, timeout=30)
    tracker: Tracker | None = None
    try:
        assert lws.pid is not None
        await _ensure_namespace(kube, namespace)
        target = replicas * groups * (1 + workers)
        tracker = await Tracker(kube, PODS, namespace, pod_ready, target,
                                label_selector=NAME_LABEL).start()
        cpu0, _ = proc_usage(lws.pid)
        base = await asyncio.to_thread(lws.metrics_text)
        say(f"LWS pid {lws.pid} (qps={qps:g} burst={burst}): creating {replicas} "
            f"LeaderWorkerSets of {groups} group(s) of {1 + workers} pods in {namespace}")
        t0 = time.monotonic()
        await _create_all(kube, namespace, replicas, workers, groups)
        created = tracker  # not None here, for the lambda
        await wait_done(tracker, "LWS pods", t0 + timeout - time.monotonic(),
                        extra=lambda: f" ({len(created.seen)} created)")
        seconds = time.monotonic() - t0
        cpu1, peak = proc_usage(lws.pid)
        text = await asyncio.to_thread(lws.metrics_text)
        requests = (requests_total(text) - requests_total(base or "")
                    if text is not None else None)
        say(f"all {target} LWS pods Ready after {seconds:.2f}s")
        return PeerResult(seconds=seconds, requests=requests, cpu_seconds=cpu1 - cpu0,
                          peak_rss_mb=peak)
    finally:
        if tracker is not None:
            await tracker.stop()
        await kube.close()
        await asyncio.to_thread(lws.stop)


# ---------------------------------------------------------------------------- standalone


async def _start_cluster(state_dir: Path, nodes: int, kcm_qps: float, kcm_burst: int
                         ) -> tuple[asyncio.subprocess.Process, Path]:
    state_dir.mkdir(parents=True, exist_ok=True)
    with (state_dir / "up.stderr.log").open("wb") as err:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "omenative_devcluster", "up", "--state-dir", str(state_dir),
            "--nodes", str(nodes), "--controller-manager-qps", f"{kcm_qps:g}",
            "--controller-manager-burst", str(kcm_burst), "--no-build",
            stdout=asyncio.subprocess.PIPE, stderr=err)
    assert proc.stdout is not None
    while True:
        line = await asyncio.wait_for(proc.stdout.readline(), 300)
        if not line:
            tail = (state_dir / "up.stderr.log").read_text(errors="replace")[-2000:]
            raise RuntimeError(f"devcluster up exited ({proc.returncode}):\n{tail}")
        text = line.decode().strip()
        if text.startswith("KUBECONFIG="):
            return proc, Path(text.partition("=")[2])


async def _stop_cluster(proc: asyncio.subprocess.Process, state_dir: Path) -> None:
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), 30)
    down = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "omenative_devcluster", "down", "--state-dir", str(state_dir),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    await down.wait()
    if proc.returncode is None:
        proc.kill()
        await proc.wait()


async def _delete_namespace(kubeconfig: Path, namespace: str, timeout: float = 300) -> None:
    """Delete the namespace and wait until its pods are gone (the nodes hold 250 each)."""
    kube = await KubeClient.connect(str(kubeconfig), qps=0, burst=1, timeout=30)
    try:
        await kube.delete(NAMESPACES, namespace)
        deadline = time.monotonic() + timeout
        while (await kube.list(PODS, namespace)).get("items"):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the pods of {namespace} were not gone in {timeout:.0f}s")
            await asyncio.sleep(1)
        say(f"namespace {namespace} deleted, its pods gone")
    finally:
        await kube.close()


async def _main(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="peer-lws-") as tmp:
        workdir = Path(args.workdir) if args.workdir else Path(tmp)
        say(f"starting the local control plane (kube-controller-manager at "
            f"{args.kcm_qps:g} QPS / burst {args.kcm_burst})")
        proc, kubeconfig = await _start_cluster(workdir / "devcluster", args.nodes,
                                                args.kcm_qps, args.kcm_burst)
        try:
            results = []
            for groups in args.groups:
                ns = f"peer-lws-{uuid.uuid4().hex[:6]}"
                r = await run_peer(kubeconfig, ns, groups, args.workers, qps=args.qps,
                                   burst=args.burst, state_dir=workdir / f"lws-{groups}")
                results.append((groups, r))
                await _delete_namespace(kubeconfig, ns)
            print(f"\nLeaderWorkerSet v0.7.0, groups of 1 + {args.workers} pods, LWS client "
                  f"{args.qps:g} QPS / burst {args.burst}, kube-controller-manager "
                  f"{args.kcm_qps:g} / {args.kcm_burst}")
            print(f"{'groups':>7} {'pods':>6} {'seconds':>8} {'requests':>9} {'req/pod':>8} "
                  f"{'cpu s':>6} {'peak MiB':>9}")
            for groups, r in results:
                pods = groups * (1 + args.workers)
                req = "-" if r.requests is None else str(r.requests)
                per = "-" if r.requests is None else f"{r.requests / pods:.2f}"
                print(f"{groups:>7} {pods:>6} {r.seconds:>8.2f} {req:>9} {per:>8} "
                      f"{r.cpu_seconds:>6.2f} {r.peak_rss_mb:>9.1f}")
        finally:
            await _stop_cluster(proc, workdir / "devcluster")
    return 0


def main() -> int:
    """``python benchmarks/peer_lws.py``: LWS alone on a cluster of its own."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--groups", type=int, nargs="+", default=[100, 250])
    parser.add_argument("--workers", type=int, default=3, help="workers per group")
    parser.add_argument("--qps", type=float, default=100.0, help="LWS client QPS")
    parser.add_argument("--burst", type=int, default=200, help="LWS client burst")
    parser.add_argument("--kcm-qps", type=float, default=100.0,
                        help="kube-controller-manager client QPS")
    parser.add_argument("--kcm-burst", type=int, default=200,
                        help="kube-controller-manager client burst")
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--workdir", default="",
                        help="keep the cluster's and LWS's logs here (default: a temp folder)")
    return asyncio.run(_main(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
