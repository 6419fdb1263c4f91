"""Controller benchmark on the local control plane (``make bench-controller``).

1. The manager: time from applying N standalone InferenceReplicas (default 100, each one
   Instance of a leader + 3 workers = 4 pods, no GPU requests) until every one reports
   ``status.readyReplicas == 1``.
2. A bare kubernetes-asyncio loop on the same API server, in the same run, doing the same
   work as honestly as a loop can: the same N x 4 pods (same container, the same
   ``ome.io/serving`` readiness gate) in a fresh namespace, and once every pod of a group
   of 4 has its containers ready, a strategic-merge patch of each pod's status setting the
   gate True (2 writes per pod, as the manager's minimum). The same client-side limits as
   the manager: one QPS/burst token bucket, at most ``--max-inflight`` calls in flight.
   Timed until every pod is Ready.

Printed side by side: both times and their ratio, requests per pod, CPU seconds and peak RSS
(the manager's ``VmHWM``: it runs as a subprocess, ``omenative-manager``; the bare loop runs
in this process, so its CPU and RSS are not separated out), then the manager's breakdown
from its own ``/metrics``: requests by verb/resource, actions by kind, passes by kind.

The cluster: ``KUBECONFIG`` if set (it must run the kubelet stand-in), else one started
here with ``python -m omenative_devcluster up`` in a temp state folder.
Namespaces, the manager and the cluster are removed at the end, also on error or Ctrl-C.
Timing lives here, never in pass/fail tests.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import importlib.util
import json
import os
import re
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

if importlib.util.find_spec("omenative_controller") is None:  # not installed: use src/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import aiohttp
import yaml
from cpu_share import CpuShare, cluster_pids
from gang_timeline import PodMilestones, print_breakdown
from kubernetes_asyncio import client as k8s
from prometheus_client.parser import text_string_to_metric_families
from watching import T_START, Tracker, pod_ready, say, wait_done

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.ratelimit import TokenBucket
from omenative_controller.kube.resources import (
    CONFIG_MAPS,
    CRDS,
    EVENTS,
    INFERENCE_REPLICAS,
    NAMESPACES,
    PODS,
)
from omenative_devcluster.kubelet import REQUEST_TIMEOUT, RequestError, raw_call

REPO = Path(__file__).resolve().parents[1]
IR_CRD_FILE = REPO / "config" / "crd" / "ome.io_inferencereplicas.yaml"
IMAGE = "example.com/llm:1"
PODS_PER_REPLICA = 4  # leader + 3 workers


def _pdeathsig() -> None:
    """In the child: get SIGTERM when the benchmark dies (so nothing outlives a kill -9)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _child_env() -> dict[str, str]:
    src = str(REPO / "src")
    return {**os.environ, "PYTHONPATH": src + os.pathsep + os.environ.get("PYTHONPATH", "")}


# ---------------------------------------------------------------------------- the cluster


class DevCluster:
    """``devcluster up`` as a child process (or nothing, when ``KUBECONFIG`` is set)."""

    def __init__(self, state_dir: Path, nodes: int, extra: tuple[str, ...] = ()) -> None:
        self.state_dir = state_dir
        self.nodes = nodes
        self.extra = extra
        self.proc: asyncio.subprocess.Process | None = None
        self.kubeconfig: Path | None = None

    async def start(self, timeout: float = 300.0) -> Path:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        err = (self.state_dir / "up.stderr.log").open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "omenative_devcluster", "up",
            "--state-dir", str(self.state_dir), "--nodes", str(self.nodes), *self.extra,
            stdout=asyncio.subprocess.PIPE, stderr=err, env=_child_env(),
            preexec_fn=_pdeathsig,
        )
        err.close()
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"devcluster up gave no KUBECONFIG within {timeout:.0f}s")
            line = await asyncio.wait_for(self.proc.stdout.readline(), left)
            if not line:
                tail = (self.state_dir / "up.stderr.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"devcluster up exited ({self.proc.returncode}):\n{tail}")
            text = line.decode().strip()
            if text.startswith("KUBECONFIG="):
                self.kubeconfig = Path(text.partition("=")[2])
                return self.kubeconfig

    async def stop(self) -> None:
        if self.proc is not None and self.proc.returncode is None:
            self.proc.send_signal(signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.proc.wait(), 30)
        # whatever `up` left behind (it checks each PID still runs its recorded binary)
        down = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "omenative_devcluster", "down",
            "--state-dir", str(self.state_dir), stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL, env=_child_env(),
        )
        await down.wait()
        if self.proc is not None and self.proc.returncode is None:
            self.proc.kill()
            await self.proc.wait()


# ---------------------------------------------------------------------------- the manager


class ManagerProcess:
    """``omenative-manager`` as a subprocess: its ports, log events and /proc figures."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.proc: asyncio.subprocess.Process | None = None
        self.metrics_port: int | None = None
        self.events: Counter[str] = Counter()
        self.warnings: list[JSON] = []
        self.leading = asyncio.Event()
        self.listening = asyncio.Event()
        self._reader: asyncio.Task[None] | None = None
        self.hwm_kib = 0
        self.cpu_seconds = 0.0

    async def start(self, kubeconfig: Path, namespace: str, args: argparse.Namespace) -> None:
        err = (self.log_dir / "manager.stderr.log").open("wb")
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "omenative_controller.cli.manager",
            "--kubeconfig", str(kubeconfig), "--namespace", namespace,
            "--config-namespace", namespace, "--bind-address", "127.0.0.1",
            "--metrics-port", "0", "--probe-port", "0", "--identity", "bench",
            "--workers", str(args.workers), "--qps", str(args.qps), "--burst", str(args.burst),
            "--max-inflight", str(args.max_inflight),
            "--status-coalesce", f"{args.status_coalesce:g}s",
            stdout=asyncio.subprocess.PIPE, stderr=err, env=_child_env(),
            preexec_fn=_pdeathsig,
        )
        err.close()
        self._reader = asyncio.create_task(self._read_logs())
        await asyncio.wait_for(self.leading.wait(), 60)

    async def _read_logs(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        with (self.log_dir / "manager.log").open("wb") as out:
            async for line in self.proc.stdout:
                out.write(line)
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(rec, dict):
                    continue
                event = str(rec.get("event"))
                self.events[event] += 1
                if rec.get("level") in ("warning", "error", "critical") and len(
                        self.warnings) < 20:
                    self.warnings.append(rec)
                if event == "manager.listening":
                    self.metrics_port = int(rec["metrics_port"])
                    self.listening.set()
                elif event == "manager.leading":
                    self.leading.set()

    def sample_proc(self) -> tuple[int, int, float]:
        """(VmHWM KiB, VmRSS KiB, CPU seconds) of the manager process, kept as the maximum."""
        assert self.proc is not None
        hwm = rss = 0
        cpu = 0.0
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    hwm = int(line.split()[1])
                elif line.startswith("VmRSS:"):
                    rss = int(line.split()[1])
            fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
            cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
        self.hwm_kib = max(self.hwm_kib, hwm)
        self.cpu_seconds = max(self.cpu_seconds, cpu)
        return hwm, rss, cpu

    async def metrics(self) -> list[tuple[str, dict[str, str], float]]:
        """Every sample of the manager's /metrics."""
        url = f"http://127.0.0.1:{self.metrics_port}/metrics"
        async with aiohttp.ClientSession() as http, http.get(
                url, timeout=aiohttp.ClientTimeout(total=10)) as resp:
            text = await resp.text()
        return [(s.name, dict(s.labels), float(s.value))
                for fam in text_string_to_metric_families(text) for s in fam.samples]

    async def stop(self) -> None:
        """SIGTERM (graceful), SIGKILL after 30 s."""
        if self.proc is None:
            return
        if self.proc.returncode is None:
            self.sample_proc()
            self.proc.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(self.proc.wait(), 30)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self._reader is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._reader, 5)


def total(samples: list[tuple[str, dict[str, str], float]], name: str,
          where: Callable[[dict[str, str]], bool] = lambda _: True) -> float:
    return sum(v for n, labels, v in samples if n == name and where(labels))


def by_labels(samples: list[tuple[str, dict[str, str], float]], name: str,
              keys: tuple[str, ...]) -> Counter[str]:
    out: Counter[str] = Counter()
    for n, labels, v in samples:
        if n == name:
            out[" ".join(labels.get(k, "") for k in keys)] += v
    return out


# ---------------------------------------------------------------------------- watching


def replica_ready(ir: JSON) -> bool:
    return bool((ir.get("status") or {}).get("readyReplicas") == 1)


# ---------------------------------------------------------------------------- objects


def replica_body(name: str) -> JSON:
    """One Instance: leader (1) + worker (3), no GPU requests."""

    def template() -> JSON:
        return {"spec": {"terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "ome-container", "image": IMAGE}]}}

    return {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": name},
        "spec": {"component": "engine", "replicas": 1, "runners": [
            {"name": "leader", "size": 1, "template": template()},
            {"name": "worker", "size": PODS_PER_REPLICA - 1, "template": template()},
        ]},
    }


SERVING_GATE = "ome.io/serving"


def bare_pod(i: int) -> JSON:
    """The same container and ``ome.io/serving`` readiness gate as the manager's pods."""
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"bare-{i // PODS_PER_REPLICA}-{i % PODS_PER_REPLICA}",
                     "labels": {"app": "bench-bare",
                                "group": f"bare-{i // PODS_PER_REPLICA}"}},
        "spec": {"terminationGracePeriodSeconds": 1,
                 "readinessGates": [{"conditionType": SERVING_GATE}],
                 "containers": [{"name": "ome-container", "image": IMAGE}]},
    }


def containers_ready(pod: JSON) -> bool:
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "ContainersReady" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ())


async def apply_crd(kube: KubeClient) -> None:
    body = yaml.safe_load(IR_CRD_FILE.read_text())
    name = body["metadata"]["name"]
    try:
        current = await kube.get(CRDS, name)
    except ApiError as exc:
        if not exc.not_found:
            raise
        await kube.create(CRDS, body)
    else:
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        await kube.replace(CRDS, name, body)
    deadline = time.monotonic() + 30
    while True:
        crd = await kube.get(CRDS, name)
        if any(c.get("type") == "Established" and c.get("status") == "True"
               for c in (crd.get("status") or {}).get("conditions") or ()):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"CRD {name} not Established within 30s")
        await asyncio.sleep(0.2)


async def bounded(n: int, concurrency: int, call: Callable[[int], Awaitable[None]]) -> None:
    """``call(0..n-1)`` with at most ``concurrency`` in flight."""
    items = iter(range(n))

    async def worker() -> None:
        for i in items:  # one shared iterator: each index is taken once
            await call(i)

    await asyncio.gather(*(worker() for _ in range(concurrency)))


class BareLoop:
    """The baseline: kubernetes-asyncio's CoreV1Api, one token bucket, ``inflight`` calls.

    Creates the pods, and patches each group's serving gate True once all of the group's
    pods have their containers ready (fed by :meth:`see`, from a watch of the namespace).
    """

    def __init__(self, api: k8s.ApiClient, namespace: str, qps: float, burst: int,
                 inflight: int) -> None:
        self.core = k8s.CoreV1Api(api)
        self.namespace = namespace
        self.bucket = TokenBucket(qps, burst)
        self.slots = asyncio.Semaphore(inflight)
        self.inflight = inflight
        self.latencies: list[float] = []
        self.requests = 0
        self.groups: dict[str, dict[str, bool]] = {}
        self.gated: set[str] = set()
        self.tasks: set[asyncio.Task[None]] = set()

    async def _call(self, make: Callable[[], Awaitable[Any]], ok: tuple[int, ...]) -> None:
        for attempt in range(5):
            async with self.slots:
                await self.bucket.acquire()
                started = time.monotonic()
                self.requests += 1
                try:
                    await raw_call(make(), ok=ok)
                    self.latencies.append(time.monotonic() - started)
                    return
                except (RequestError, aiohttp.ClientError, TimeoutError):
                    if attempt == 4:
                        raise
            await asyncio.sleep(0.1 * 2 ** attempt)

    async def create_pods(self, n: int) -> None:
        """Create ``n`` pods, ``inflight`` at a time."""
        async def create(i: int) -> None:
            await self._call(lambda: self.core.create_namespaced_pod(
                self.namespace, bare_pod(i), _preload_content=False,  # type: ignore[arg-type]
                _request_timeout=REQUEST_TIMEOUT), (201, 409))

        await bounded(n, self.inflight, create)

    def see(self, kind: str, pod: JSON) -> None:
        """A watch event: when a whole group is container-ready, open its gates."""
        meta = pod["metadata"]
        group = (meta.get("labels") or {}).get("group")
        if not group or kind == "DELETED" or group in self.gated:
            return
        members = self.groups.setdefault(group, {})
        members[meta["name"]] = containers_ready(pod)
        if len(members) == PODS_PER_REPLICA and all(members.values()):
            self.gated.add(group)
            for name in members:
                task = asyncio.create_task(self._open_gate(name))
                self.tasks.add(task)
                task.add_done_callback(self.tasks.discard)

    async def _open_gate(self, name: str) -> None:
        body = {"status": {"conditions": [{
            "type": SERVING_GATE, "status": "True", "reason": "GroupReady",
            "lastTransitionTime": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}]}}
        await self._call(lambda: self.core.patch_namespaced_pod_status(
            name, self.namespace, body, _preload_content=False,
            _content_type="application/strategic-merge-patch+json",
            _request_timeout=REQUEST_TIMEOUT), (200,))


# ---------------------------------------------------------------------------- the run


async def create_namespace(kube: KubeClient, prefix: str, created: list[str]) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    await kube.create(NAMESPACES, {"metadata": {"name": name,
                                                "labels": {"omenative.io/bench": "true"}}})
    created.append(name)
    return name


async def cleanup_namespaces(kube: KubeClient, namespaces: list[str]) -> None:
    for ns in namespaces:
        with contextlib.suppress(Exception):  # our finalizer: the manager is gone by now
            page = await kube.list(INFERENCE_REPLICAS, ns)
            for ir in page.get("items") or ():
                if ir["metadata"].get("finalizers"):
                    with contextlib.suppress(ApiError):
                        await kube.patch(INFERENCE_REPLICAS, ir["metadata"]["name"],
                                         {"metadata": {"finalizers": None}}, ns)
        with contextlib.suppress(Exception):
            await kube.delete(NAMESPACES, ns)


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    n_ir = args.replicas
    n_pods = n_ir * PODS_PER_REPLICA
    cluster: DevCluster | None = None
    manager = ManagerProcess(workdir)
    kube: KubeClient | None = None
    api: k8s.ApiClient | None = None
    namespaces: list[str] = []
    trackers: list[Tracker] = []
    task = asyncio.current_task()
    if task is not None:  # SIGTERM: unwind like Ctrl-C (the finally below cleans up)
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, task.cancel)
    try:
        env = os.environ.get("KUBECONFIG")
        if env:
            kubeconfig = Path(env.split(os.pathsep)[0]).resolve()
            say(f"using the cluster of KUBECONFIG={kubeconfig}")
        else:
            # every phase's pods stay until the end: room for all of them (250 per node)
            phases = 3 if args.peer == "lws" else 2
            args.nodes = max(args.nodes, -(-phases * n_pods // 240))
            say(f"starting the local control plane ({args.nodes} nodes) in {workdir}")
            extra: tuple[str, ...] = ()
            if args.peer == "lws":  # kube-controller-manager creates LWS's pods: same limits
                extra = ("--controller-manager-qps", f"{args.qps:g}",
                         "--controller-manager-burst", str(args.burst))
            cluster = DevCluster(workdir / "devcluster", args.nodes, extra)
            kubeconfig = await cluster.start()
            say("control plane up")
        kube = await KubeClient.connect(str(kubeconfig), qps=0, burst=1, timeout=30)
        await apply_crd(kube)
        say("InferenceReplica CRD applied and Established")

        # ------------------------------------------------------------ 1. the manager
        ns_mgr = await create_namespace(kube, "bench-mgr", namespaces)
        if args.gang_scheduling != "Auto":  # the manager's lifecycle config (else defaults)
            await kube.create(CONFIG_MAPS, {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "inferenceservice-config"},
                "data": {"lifecycle": json.dumps({"gangScheduling": args.gang_scheduling})},
            }, ns_mgr)
        await manager.start(kubeconfig, ns_mgr, args)
        say(f"manager pid {manager.proc.pid if manager.proc else '?'} leads in namespace "
            f"{ns_mgr} (workers={args.workers} qps={args.qps:g} burst={args.burst} "
            f"max-inflight={args.max_inflight} gangScheduling={args.gang_scheduling})")
        profiler = await start_py_spy(args.py_spy, manager)
        base = await manager.metrics()
        ir_tracker = await Tracker(kube, INFERENCE_REPLICAS, ns_mgr, replica_ready,
                                   n_ir).start()
        mgr_steps = PodMilestones(lambda p: _label(p, "ome.io/inferencereplica"))
        pod_tracker = await Tracker(kube, PODS, ns_mgr, pod_ready, n_pods,
                                    on_event=mgr_steps.see).start()
        trackers += [ir_tracker, pod_tracker]

        rss_peak_seen = 0

        async def rss_sampler() -> None:
            nonlocal rss_peak_seen
            while True:
                _, rss, _ = manager.sample_proc()
                rss_peak_seen = max(rss_peak_seen, rss)
                await asyncio.sleep(0.5)

        sampler = asyncio.create_task(rss_sampler())
        say(f"applying {n_ir} InferenceReplicas (1 Instance x {PODS_PER_REPLICA} pods each)")
        pids = {**(cluster_pids(cluster.state_dir) if cluster is not None else {}),
                "benchmark": os.getpid()}
        mgr_cpu = CpuShare({**pids, "manager": manager.proc.pid if manager.proc else 0})
        mgr_cpu.start()
        t0 = time.monotonic()

        async def create_ir(i: int) -> None:
            await kube.create(INFERENCE_REPLICAS, replica_body(f"bench-{i:03d}"), ns_mgr)

        await bounded(n_ir, 8, create_ir)
        t_applied = time.monotonic() - t0
        say(f"  applied in {t_applied:.2f}s")
        await wait_done(ir_tracker, "InferenceReplicas", args.timeout,
                        lambda: f" ({len(pod_tracker.seen)} pods created, "
                                f"{len(pod_tracker.ready)} Ready)")
        t_mgr = max(ir_tracker.ready.values()) - t0
        mgr_cpu.stop()
        at_ready = await manager.metrics()
        manager.sample_proc()
        created_at = max(pod_tracker.seen.values()) - t0 if pod_tracker.seen else float("nan")
        pods_ready_at = (max(pod_tracker.ready.values()) - t0 if pod_tracker.ready
                         else float("nan"))
        say(f"all {n_ir} InferenceReplicas Ready after {t_mgr:.2f}s "
            f"(last pod created at {created_at:.2f}s, last pod Ready at {pods_ready_at:.2f}s)")

        # trailing writes: until no non-Lease write for 5 s (at most args.settle s)
        def writes(samples: list[tuple[str, dict[str, str], float]]) -> float:
            return total(samples, "omenative_api_writes_total",
                         lambda lb: lb.get("resource") != "leases")

        last_w, last_t = writes(at_ready), time.monotonic()
        settle_end = time.monotonic() + args.settle
        settled = at_ready
        while time.monotonic() < settle_end and time.monotonic() - last_t < 5.0:
            await asyncio.sleep(1.0)
            settled = await manager.metrics()
            if writes(settled) != last_w:
                last_w, last_t = writes(settled), time.monotonic()
        quiet = time.monotonic() - last_t >= 5.0
        say(f"  after Ready: {writes(settled) - writes(at_ready):.0f} more writes, "
            f"{'quiet for 5 s' if quiet else f'still writing after {args.settle:.0f}s'}")
        sampler.cancel()
        await stop_py_spy(profiler, args.py_spy)
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        hwm, _, cpu = manager.sample_proc()
        scheduling = await scheduling_events(kube, ns_mgr)
        pods_now = await kube.list(PODS, ns_mgr)
        items = pods_now.get("items") or []
        ready_now = sum(1 for p in items if pod_ready(p))
        say(f"  {len(items)} pods in {ns_mgr}, {ready_now} Ready; manager VmHWM "
            f"{hwm / 1024:.1f} MiB, CPU {cpu:.1f}s")
        await manager.stop()
        say(f"manager stopped (exit {manager.proc.returncode if manager.proc else '?'})")
        for tr in trackers:
            await tr.stop()
        trackers.clear()

        # ------------------------------------------------------------ 2. the bare loop
        ns_bare = await create_namespace(kube, "bench-bare", namespaces)
        cfg = k8s.Configuration()
        from kubernetes_asyncio import config as k8s_config  # noqa: PLC0415

        await k8s_config.load_kube_config(config_file=str(kubeconfig),
                                          client_configuration=cfg)
        api = k8s.ApiClient(cfg)
        bare = BareLoop(api, ns_bare, args.qps, args.burst, args.max_inflight)
        bare_steps = PodMilestones(lambda p: _label(p, "group"))

        def bare_seen(kind: str, pod: JSON) -> None:
            bare.see(kind, pod)
            bare_steps.see(kind, pod)

        bare_tracker = await Tracker(kube, PODS, ns_bare, pod_ready, n_pods,
                                     on_event=bare_seen).start()
        trackers.append(bare_tracker)
        say(f"bare loop: creating {n_pods} pods in {ns_bare} ({args.max_inflight} in flight, "
            f"qps={args.qps:g} burst={args.burst}), each group's gates patched once ready")
        cpu0 = time.process_time()
        bare_cpu_share = CpuShare(pids)
        bare_cpu_share.start()
        t1 = time.monotonic()
        await bare.create_pods(n_pods)
        t_bare_created = time.monotonic() - t1
        say(f"  {n_pods} pods created in {t_bare_created:.2f}s")
        await wait_done(bare_tracker, "pods", args.timeout)
        t_bare = max(bare_tracker.ready.values()) - t1
        bare_cpu_share.stop()
        bare_cpu = time.process_time() - cpu0
        say(f"all {n_pods} bare pods Ready after {t_bare:.2f}s ({bare.requests} requests)")
        bare_lat = bare.latencies

        for tr in trackers:
            await tr.stop()
        trackers.clear()
        peer = None
        if args.peer == "lws":
            try:
                peer = await run_lws_peer(kubeconfig, n_ir, args, workdir, namespaces,
                                          external=cluster is None)
            except Exception as exc:  # the manager's figures still count
                say(f"LWS peer failed: {type(exc).__name__}: {exc}")

        ir_times = sorted(v - t0 for v in ir_tracker.ready.values())
        lags = []  # last pod of the IR Ready -> the IR reports readyReplicas 1
        for name, at in ir_tracker.ready.items():
            own = [v for p, v in pod_tracker.ready.items() if p.startswith(f"{name}-")]
            if own:
                lags.append(at - max(own))
        lags.sort()
        return {
            "ir_first": ir_times[0], "ir_p50": ir_times[len(ir_times) // 2],
            "ir_p90": ir_times[int(len(ir_times) * 0.9)],
            "lag_p50": lags[len(lags) // 2] if lags else float("nan"),
            "lag_max": lags[-1] if lags else float("nan"),
            "replicas": n_ir, "pods": n_pods, "workers": args.workers,
            "t_apply": t_applied, "t_manager": t_mgr,
            "t_manager_pods_created": created_at, "t_manager_pods_ready": pods_ready_at,
            "t_bare": t_bare, "t_bare_created": t_bare_created,
            "bare_create_ms": 1000 * sum(bare_lat) / max(len(bare_lat), 1),
            "bare_requests": bare.requests, "bare_cpu_s": bare_cpu,
            "bench_hwm_mib": _self_hwm_mib(), "peer": peer,
            "hwm_mib": manager.hwm_kib / 1024, "rss_sampled_mib": rss_peak_seen / 1024,
            "cpu_s": manager.cpu_seconds, "base": base, "at_ready": at_ready,
            "settled": settled, "quiet": quiet,
            "trailing_writes": writes(settled) - writes(at_ready),
            "milestones": {"omenative": mgr_steps, "bare loop": bare_steps},
            "t0s": {"omenative": t0, "bare loop": t1},
            "cpu_share": {"omenative": mgr_cpu, "bare loop": bare_cpu_share},
            "scheduling_events": scheduling,
        }
    finally:
        for tr in trackers:
            await tr.stop()
        await manager.stop()
        if api is not None:
            await api.close()
        if kube is not None:
            await cleanup_namespaces(kube, namespaces)
            if namespaces:
                say(f"deleted namespaces {', '.join(namespaces)}")
            await kube.close()
        if cluster is not None:
            await cluster.stop()
            say("control plane stopped")
        if manager.events:
            odd = Counter({k: v for k, v in manager.events.items()
                           if k not in ("manager.listening", "manager.leading")})
            say(f"manager log events: {dict(odd.most_common(12))}")
        for rec in manager.warnings[:5]:
            say(f"  manager {rec.get('level')}: {json.dumps(rec)[:300]}")


async def run_lws_peer(kubeconfig: Path, n_ir: int, args: argparse.Namespace, workdir: Path,
                       namespaces: list[str], *, external: bool) -> dict[str, Any]:
    """LeaderWorkerSet v0.7.0 (``peer_lws.run_peer``) on the same shapes and client limits."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peer_lws import run_peer  # noqa: PLC0415 - only with --peer lws (waits for its build)

    if external:
        say("  KUBECONFIG given: kube-controller-manager keeps its own client limits")
    ns = f"bench-lws-{uuid.uuid4().hex[:8]}"
    namespaces.append(ns)
    res = await run_peer(kubeconfig, ns, n_ir, PODS_PER_REPLICA - 1, qps=args.qps,
                         burst=args.burst, state_dir=workdir / "lws")
    return {"name": "LWS v0.7.0", "seconds": res.seconds,
            "requests": float(res.requests) if res.requests is not None else float("nan"),
            "cpu_seconds": res.cpu_seconds, "peak_rss_mb": res.peak_rss_mb}


async def start_py_spy(path: Path | None, manager: ManagerProcess
                       ) -> asyncio.subprocess.Process | None:
    """``py-spy record`` of the manager (collapsed stacks, 100 Hz), or None."""
    exe = shutil.which("py-spy", path=str(Path(sys.executable).parent) + os.pathsep
                       + os.environ.get("PATH", ""))
    if path is None or manager.proc is None:
        return None
    if exe is None:
        say("--py-spy: py-spy is not installed (pip install py-spy); not profiling")
        return None
    return await asyncio.create_subprocess_exec(
        exe, "record", "--pid", str(manager.proc.pid), "--rate", "100", "--format", "raw",
        "--nonblocking", "--output", str(path), stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.DEVNULL, preexec_fn=_pdeathsig)


async def stop_py_spy(proc: asyncio.subprocess.Process | None, path: Path | None) -> None:
    """Stop the profiler (it writes its file on SIGINT)."""
    if proc is None or proc.returncode is not None:
        return
    proc.send_signal(signal.SIGINT)
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(proc.wait(), 30)
    say(f"py-spy samples of the manager in {path}")


async def scheduling_events(kube: KubeClient, namespace: str) -> Counter[str]:
    """The scheduler's Events on the namespace's pods, by reason and message (what a gang
    waited for: ``FailedScheduling`` with the plugin's message), counted."""
    out: Counter[str] = Counter()
    with contextlib.suppress(ApiError):
        for ev in (await kube.list(EVENTS, namespace)).get("items") or ():
            if (ev.get("involvedObject") or {}).get("kind") == "Pod":  # names left out
                message = re.sub(r"[\w.-]+/[\w.-]+|node-\d+|bench-[\w-]+", "*",
                                 str(ev.get("message") or ""))[:110]
                out[f"{ev.get('reason')}: {message}"] += int(ev.get("count") or 1)
    return out


def _label(pod: JSON, key: str) -> str | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(key)
    return str(value) if value else None


def _self_hwm_mib() -> float:
    """This process's VmHWM (the bare loop shares it with the watchers of the benchmark)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def side_by_side(r: dict[str, Any]) -> None:
    """Manager, bare loop (and the peer, when run) in columns; ratios to the bare loop."""
    n, ready = r["pods"], r["at_ready"]
    m_req = total(ready, "omenative_api_requests_total")
    m_wr = total(ready, "omenative_api_writes_total", lambda lb: lb.get("resource") != "leases")
    cols: list[tuple[str, float, float, float, float, float]] = [
        ("omenative", r["t_manager"], m_req / n, m_wr / n, r["cpu_s"], r["hwm_mib"]),
        ("bare loop", r["t_bare"], r["bare_requests"] / n, r["bare_requests"] / n,
         r["bare_cpu_s"], r["bench_hwm_mib"]),
    ]
    peer = r.get("peer")
    if peer is not None:
        cols.append((peer["name"], peer["seconds"], peer["requests"] / n, float("nan"),
                     peer["cpu_seconds"], peer["peak_rss_mb"]))
    bare_t = r["t_bare"]
    print(f"{'':28}" + "".join(f"{c[0]:>14}" for c in cols))
    rows = (("apply -> all Ready (s)", 1, "{:14.2f}"), ("ratio to the bare loop", -1, "{:14.2f}"),
            ("API requests per pod", 2, "{:14.2f}"), ("API writes per pod", 3, "{:14.2f}"),
            ("CPU seconds", 4, "{:14.1f}"), ("peak RSS (MiB)", 5, "{:14.1f}"))
    for label, idx, fmt in rows:
        vals = [c[1] / bare_t if idx < 0 else c[idx] for c in cols]
        print(f"{label:28}" + "".join(fmt.format(v) for v in vals))
    print(f"  (bare loop CPU/RSS: the benchmark process, watchers included; writes per "
          f"InferenceReplica by omenative: {m_wr / r['replicas']:.1f}"
          + ("; LWS requests: its own client only, kube-controller-manager creates its pods"
             if peer is not None else "") + ")")
    kinds = by_labels(ready, "omenative_pass_duration_seconds_count", ("kind",))
    sums = by_labels(ready, "omenative_pass_duration_seconds_sum", ("kind",))
    print("  passes by kind (count, mean ms): " + ", ".join(
        f"{k}={v:.0f}/{1000 * sums[k] / v:.0f}" for k, v in kinds.most_common() if v))
    held = total(ready, "omenative_status_writes_held_total")
    print(f"  status writes held back (coalesced): {held:.0f}")


def report(r: dict[str, Any]) -> None:
    n = r["pods"]
    base, ready, settled = r["base"], r["at_ready"], r["settled"]

    def req(s: list[tuple[str, dict[str, str], float]], **lb: str) -> float:
        return total(s, "omenative_api_requests_total",
                     lambda labels: all(labels.get(k) == v for k, v in lb.items()))

    def wr(s: list[tuple[str, dict[str, str], float]], leases: bool = False) -> float:
        return total(s, "omenative_api_writes_total",
                     lambda labels: leases or labels.get("resource") != "leases")

    print()
    print(f"== controller benchmark: {r['replicas']} InferenceReplicas x "
          f"{PODS_PER_REPLICA} pods = {n} pods ==")
    side_by_side(r)
    print(f"manager, apply -> all InferenceReplicas Ready : {r['t_manager']:8.2f} s "
          f"(apply {r['t_apply']:.2f} s, last pod created {r['t_manager_pods_created']:.2f} s,"
          f" last pod Ready {r['t_manager_pods_ready']:.2f} s)")
    print(f"  per InferenceReplica, apply -> Ready: first {r['ir_first']:.2f} s, "
          f"median {r['ir_p50']:.2f} s, p90 {r['ir_p90']:.2f} s; its last pod Ready -> "
          f"readyReplicas 1: median {r['lag_p50']:.2f} s, max {r['lag_max']:.2f} s")
    print(f"bare kubernetes-asyncio loop, {n} pods Ready  : {r['t_bare']:8.2f} s "
          f"(creates done {r['t_bare_created']:.2f} s)")
    print(f"ratio manager / bare                          : {r['t_manager'] / r['t_bare']:8.2f}")
    print(f"manager peak RSS (VmHWM)                      : {r['hwm_mib']:8.1f} MiB")
    print(f"manager CPU time (start -> Ready + settle)    : {r['cpu_s']:8.1f} s")
    total_req, total_wr = req(ready), wr(ready)
    print(f"API requests per created pod (start -> Ready) : {total_req / n:8.2f} "
          f"({total_req:.0f} requests)")
    print(f"API writes per created pod (Leases excluded)  : {total_wr / n:8.2f} "
          f"({total_wr:.0f} writes; Lease writes {wr(ready, True) - total_wr:.0f})")
    print(f"  manager write rate apply -> Ready: {total_wr / r['t_manager']:.1f}/s; bare "
          f"loop create rate: {n / r['t_bare_created']:.1f}/s")
    lat_sum = by_labels(ready, "omenative_api_request_duration_seconds_sum", ("verb",))
    lat_cnt = by_labels(ready, "omenative_api_request_duration_seconds_count", ("verb",))
    print("  mean API latency seen by the manager (to the response headers): " + ", ".join(
        f"{v}={1000 * lat_sum[v] / lat_cnt[v]:.0f}ms" for v in sorted(lat_cnt)
        if lat_cnt[v] and v != "watch") + f"; bare loop create: {r['bare_create_ms']:.0f}ms")
    p_sum = total(ready, "omenative_reconcile_duration_seconds_sum")
    p_cnt = total(ready, "omenative_reconcile_duration_seconds_count")
    print(f"  reconcile pass time: mean {1000 * p_sum / max(p_cnt, 1):.0f}ms, "
          f"{p_sum:.1f}s in all over {r['t_manager']:.1f}s x {r['workers']} workers")
    print(f"  requests at startup (before the first apply): {req(base):.0f}; "
          f"after Ready until quiet: {req(settled) - req(ready):.0f} requests, "
          f"{r['trailing_writes']:.0f} writes")
    passes = total(ready, "omenative_reconcile_duration_seconds_count")
    print(f"  reconcile passes: {passes:.0f} ({passes / r['replicas']:.1f} per "
          f"InferenceReplica)")
    rq = by_labels(ready, "omenative_api_requests_total", ("verb", "resource"))
    print("  requests by verb/resource: " + ", ".join(
        f"{k}={v:.0f}" for k, v in rq.most_common() if v))
    codes = by_labels(ready, "omenative_api_requests_total", ("code",))
    print("  requests by code: " + ", ".join(f"{k}={v:.0f}" for k, v in codes.most_common()))
    acts = by_labels(ready, "omenative_actions_total", ("kind",))
    print("  actions by kind: " + ", ".join(f"{k}={v:.0f}" for k, v in acts.most_common()))
    fails = by_labels(ready, "omenative_action_failures_total", ("kind", "reason"))
    if any(fails.values()):
        print("  action failures: " + ", ".join(
            f"{k}={v:.0f}" for k, v in fails.most_common() if v))
    restarts = by_labels(settled, "omenative_watch_restarts_total", ("resource", "reason"))
    if any(restarts.values()):  # e.g. the API server closing a watcher it found too slow
        print("  watch restarts: " + ", ".join(
            f"{k}={v:.0f}" for k, v in restarts.most_common() if v))
    results = by_labels(ready, "omenative_reconcile_duration_seconds_count", ("result",))
    print("  passes by result: " + ", ".join(f"{k}={v:.0f}" for k, v in results.most_common()))
    for metric, key, what in (("omenative_queue_wait_seconds", "lane", "queue wait"),
                              ("omenative_slot_wait_seconds", "urgent", "slot wait (urgent)")):
        w_sum = by_labels(ready, metric + "_sum", (key,))
        w_cnt = by_labels(ready, metric + "_count", (key,))
        print(f"  {what}: " + ", ".join(
            f"{k}: {w_cnt[k]:.0f} x {1000 * w_sum[k] / w_cnt[k]:.0f}ms mean"
            for k in sorted(w_cnt) if w_cnt[k]))
    for name, share in r["cpu_share"].items():
        print(f"  CPU seconds while {name} ran (apply -> all Ready): {share.line()}")
    print("  the manager's pods' Events (reason: message, count): " + "; ".join(
        f"{k} x{v}" for k, v in r["scheduling_events"].most_common(6)))
    print_breakdown(r["milestones"].items(), r["t0s"])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=100, help="InferenceReplicas to apply")
    parser.add_argument("--nodes", type=int, default=4,
                        help="nodes of the cluster started here (at least room for every "
                             "phase's pods, 250 a node)")
    parser.add_argument("--workers", type=int, default=64, help="manager workers")
    parser.add_argument("--max-inflight", type=int, default=32,
                        help="manager actions in flight; bare loop calls in flight")
    parser.add_argument("--status-coalesce", type=float, default=10.0,
                        help="manager --status-coalesce (s; 0: every status written)")
    parser.add_argument("--qps", type=float, default=100.0, help="manager and bare loop QPS")
    parser.add_argument("--burst", type=int, default=200, help="manager and bare loop burst")
    parser.add_argument("--timeout", type=float, default=150.0, help="wait for Ready (s)")
    parser.add_argument("--settle", type=float, default=20.0,
                        help="at most this long after Ready to watch trailing writes (s)")
    parser.add_argument("--gang-scheduling", choices=("Auto", "Native", "PodGroup", "None"),
                        default="Auto",
                        help="the manager's lifecycle.gangScheduling (Auto: the chart default; "
                             "None: no Workload or PodGroup, as the bare loop and LWS)")
    parser.add_argument("--peer", choices=("none", "lws"), default="none",
                        help="also run LeaderWorkerSet v0.7.0 on the same shapes and limits "
                             "(kube-controller-manager too, when the cluster is started here)")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="PATH",
                        help="sample the manager with py-spy (if installed) from its start "
                             "until every InferenceReplica is Ready; collapsed stacks to PATH")
    parser.add_argument("--keep-logs", action="store_true",
                        help="keep the temp folder with the manager and cluster logs")
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="omenative-bench-"))

    code = 1
    try:
        result = asyncio.run(run(args, workdir))
        report(result)
        if args.keep_logs:  # per pod, each milestone in seconds since its phase's apply
            (workdir / "milestones.json").write_text(json.dumps({
                name: {pod: {k: v - result["t0s"][name] for k, v in seen.items()}
                       for pod, seen in m.at.items()}
                for name, m in result["milestones"].items()}))
        code = 0
    except (KeyboardInterrupt, asyncio.CancelledError):
        print("interrupted", file=sys.stderr)
        code = 130
    except Exception as exc:  # report, clean up (done in run), exit 1
        print(f"bench-controller failed: {type(exc).__name__}: {exc}", file=sys.stderr)
    finally:
        say(f"done in {time.monotonic() - T_START:.1f}s")
        if args.keep_logs or code != 0:
            print(f"logs kept in {workdir}", file=sys.stderr)
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
