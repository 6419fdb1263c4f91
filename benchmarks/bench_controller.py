"""Controller benchmark on the local control plane (``make bench-controller``).

1. The manager: time from applying N standalone InferenceReplicas (default 100, each one
   Instance of a leader + 3 workers = 4 pods, no GPU requests) until every one reports
   ``status.readyReplicas == 1``.
2. A bare kubernetes-asyncio loop on the same API server, in the same run, doing the same
   work as honestly as a loop can: the same N x 4 pods (copies of the manager's pods and
   its headless Service; ``--bare-pods minimal``: the same container and ``ome.io/serving``
   readiness gate only) in a fresh namespace, and once every pod of a group
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
import importlib.util
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

if importlib.util.find_spec("omenative_controller") is None:  # not installed: use src/
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

import yaml
from bare_loop import (
    IMAGE,
    PODS_PER_REPLICA,
    BareLoop,
    bare_pod,
    bounded,
    containers_ready,
    copied_object,
    copied_pod,
    copied_service,
)
from bench_objects import apply_crd, finalizer_policy
from cluster_signals import NodeHealth, scheduling_events
from controller_report import report, total
from cores import children, others, pin, realtime
from cpu_share import CpuShare, LoadAverage, cluster_pids, self_hwm_mib
from gang_timeline import PodMilestones
from kubernetes_asyncio import client as k8s
from loop_callbacks import probe_file, worst
from processes import DevCluster, ManagerProcess, start_py_spy, stop_py_spy
from slow_watchers import SlowWatchers
from watching import T_START, Tracker, pod_ready, say, wait_done

from omenative_controller.kube.apiwatch import NATIVE_GANG_VERSIONS, NATIVE_POD_GROUPS, WORKLOADS
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import (
    CONFIG_MAPS,
    INFERENCE_REPLICAS,
    NAMESPACES,
    PODS,
    SERVICES,
)

REPO = Path(__file__).resolve().parents[1]


# ---------------------------------------------------------------------------- watching


def chart_lifecycle() -> dict[str, Any]:
    """The ``lifecycle`` entry of config/manager/config.yaml (the chart's values): a key left
    out of a ConfigMap is off, as in OME, so a partial entry would change what is measured."""
    docs = yaml.safe_load((REPO / "config" / "manager" / "config.yaml").read_text())
    return dict(json.loads(docs["data"]["lifecycle"]))


def replica_ready(ir: JSON) -> bool:
    """Every Instance the InferenceReplica asks for is Ready."""
    want = (ir.get("spec") or {}).get("replicas", 1)
    return bool((ir.get("status") or {}).get("readyReplicas") == want)


# ---------------------------------------------------------------------------- objects


def replica_body(name: str, instances: int = 1) -> JSON:
    """``instances`` Instances of leader (1) + worker (3), no GPU requests."""

    def template() -> JSON:
        return {"spec": {"terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "ome-container", "image": IMAGE}]}}

    return {
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica",
        "metadata": {"name": name},
        "spec": {"component": "engine", "replicas": instances, "runners": [
            {"name": "leader", "size": 1, "template": template()},
            {"name": "worker", "size": PODS_PER_REPLICA - 1, "template": template()},
        ]},
    }


# ---------------------------------------------------------------------------- the run


def manager_flags(args: argparse.Namespace) -> dict[str, object]:
    """The manager's options this benchmark sets (the same limits as the bare loop), by the
    manager's own option names; the rest stay at the manager's defaults."""
    return {"workers": args.workers, "qps": args.qps, "burst": args.burst,
            "max_inflight": args.max_inflight, "creates_per_pass": args.creates_per_pass,
            "pipeline_creates": args.pipeline_creates,
            "status_coalesce": args.status_coalesce,
            "status_readiness_coalesce": args.status_readiness_coalesce}


async def warm_up(kube: KubeClient, namespaces: list[str], n_pods: int, timeout: float
                  ) -> None:
    """Untimed: ``n_pods`` minimal pods created and run to ready containers in a namespace
    of their own, which stays (``--warmup``). The timed phases then both meet a cluster
    whose API server, scheduler and kubelet stand-in have placed pods before: on a fresh
    cluster the first phase (the manager's) also pays for warming it."""
    ns = await create_namespace(kube, "bench-warm", namespaces)
    tracker = await Tracker(kube, PODS, ns, containers_ready, n_pods).start()
    t = time.monotonic()

    async def create(i: int) -> None:
        await kube.create(PODS, bare_pod(i), ns)

    await bounded(n_pods, 32, create)
    await wait_done(tracker, "warm-up pods", timeout)
    await tracker.stop()
    say(f"warm-up: {n_pods} pods running in {ns} after {time.monotonic() - t:.2f}s (untimed)")


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


async def caches_synced(manager: ManagerProcess, timeout: float = 300.0) -> float:
    """Wait until the manager's caches synced (``omenative_caches_synced`` 1) and its
    settling after the first LISTs is a tick window behind; the clock time of the sync.
    The stall column measures the manager at work: start-up is reported apart."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(name == "omenative_caches_synced" and value == 1.0
               for name, _, value in await manager.metrics()):
            at = time.monotonic()
            await asyncio.sleep(2.0)  # the settle runs within 0.5 s; its second ends
            return at
        await asyncio.sleep(0.2)
    raise TimeoutError(f"the manager's caches did not sync within {timeout:.0f} s")


def pin_cores(core: int | None, manager: ManagerProcess, cluster: DevCluster | None
              ) -> set[int]:
    """``--manager-core``: the manager alone on ``core``, the cluster's processes and this
    one on the others (``cores.py``); the others, or an empty set when not asked."""
    if core is None:
        return set()
    rest = others(core)
    if manager.proc is None:
        raise RuntimeError("--manager-core: the manager is not running")
    pids = [os.getpid(), *(cluster_pids(cluster.state_dir).values() if cluster else ())]
    for pid in pids:
        for each in (pid, *children(pid)):
            if each != manager.proc.pid:  # this benchmark's child too
                pin(each, rest)
    if not pin(manager.proc.pid, {core}) or os.sched_getaffinity(manager.proc.pid) != {core}:
        raise RuntimeError(f"--manager-core: the manager could not be pinned to core {core}")
    say(f"pinned: the manager on core {core}; the cluster and this benchmark on "
        f"{sorted(rest)} (the bare loop's phase: this benchmark on core {core})")
    return rest


async def run(args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    per_ir = args.instances
    n_ir = args.replicas // per_ir  # main() checks it divides
    n_pods = args.replicas * PODS_PER_REPLICA
    cluster: DevCluster | None = None
    manager = ManagerProcess(workdir, ticks=True)  # its event-loop stalls (loop_hold)
    kube: KubeClient | None = None
    api: k8s.ApiClient | None = None
    namespaces: list[str] = []
    trackers: list[Tracker] = []
    policies = contextlib.AsyncExitStack()
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
            warm = (args.warmup_pods or n_pods) if args.warmup else 0
            args.nodes = max(args.nodes, -(-(phases * n_pods + warm) // 240))
            say(f"starting the local control plane ({args.nodes} {args.nodes_backend} nodes) "
                f"in {workdir}")
            extra: tuple[str, ...] = ()
            if args.peer == "lws":  # kube-controller-manager creates LWS's pods: same limits
                extra = ("--controller-manager-qps", f"{args.qps:g}",
                         "--controller-manager-burst", str(args.burst))
            if args.scheduler_qps is not None:  # kube-scheduler binds every pod
                extra += ("--scheduler-qps", f"{args.scheduler_qps:g}",
                          "--scheduler-burst", str(int(2 * args.scheduler_qps)))
            if args.nodes_backend == "kwok":  # KWOK's simulated nodes, no stand-in; kwok
                # renews 40 s leases every 10 s: 20 s of grace lost nodes (and pods) under load
                extra += ("--kwok-nodes", str(args.nodes), "--node-grace-seconds", "60")
            cluster = DevCluster(workdir / "devcluster",
                                 0 if args.nodes_backend == "kwok" else args.nodes, extra)
            kubeconfig = await cluster.start(300.0 + 0.2 * args.nodes)  # KWOK: node bring-up
            say("control plane up")
        kube = await KubeClient.connect(str(kubeconfig), qps=0, burst=1, timeout=30)
        nodes = await NodeHealth(kube).start()
        policies.push_async_callback(nodes.stop)
        await apply_crd(kube)
        say("InferenceReplica CRD applied and Established")

        if args.warmup:
            await warm_up(kube, namespaces, args.warmup_pods or n_pods, args.timeout)

        # ------------------------------------------------------------ 1. the manager
        ns_mgr = await create_namespace(kube, "bench-mgr", namespaces)
        await policies.enter_async_context(
            finalizer_policy(kube, ns_mgr, enabled=args.finalizer_policy))
        if args.gang_scheduling != "Auto":  # the chart's lifecycle config, this mechanism
            await kube.create(CONFIG_MAPS, {
                "apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "inferenceservice-config"},
                "data": {"lifecycle": json.dumps({**chart_lifecycle(),
                                                  "gangScheduling": args.gang_scheduling})},
            }, ns_mgr)
        await manager.start(kubeconfig, ns_mgr, manager_flags(args))
        say(f"manager pid {manager.proc.pid if manager.proc else '?'} leads in namespace "
            f"{ns_mgr} (workers={args.workers} qps={args.qps:g} burst={args.burst} "
            f"max-inflight={args.max_inflight} gangScheduling={args.gang_scheduling} "
            f"pipeline-creates={args.pipeline_creates})")
        profiler = await start_py_spy(args.py_spy, manager, args.py_spy_rate)
        synced = await caches_synced(manager)  # a manager at work, not one starting up
        cluster_cores = pin_cores(args.manager_core, manager, cluster)
        if args.manager_realtime and manager.proc is not None:
            threads = realtime(manager.proc.pid)  # PermissionError without CAP_SYS_NICE
            say(f"the manager's {threads} threads run under SCHED_RR (the bare loop's "
                "phase: this benchmark's)")
        startup = manager.longest_stall(0.0, synced)
        base = await manager.metrics()
        ir_tracker = await Tracker(kube, INFERENCE_REPLICAS, ns_mgr, replica_ready,
                                   n_ir).start()
        mgr_steps = PodMilestones(_gang_of)
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
        say(f"applying {n_ir} InferenceReplicas ({per_ir} Instance(s) x {PODS_PER_REPLICA} "
            "pods each)")
        pids = {**(cluster_pids(cluster.state_dir) if cluster is not None else {}),
                "benchmark": os.getpid()}
        mgr_cpu = CpuShare({**pids, "manager": manager.proc.pid if manager.proc else 0})
        mgr_cpu.start()
        apiserver_log = (cluster.state_dir / "logs" / "kube-apiserver.log"
                         if cluster is not None else None)
        mgr_slow = SlowWatchers(apiserver_log)
        mgr_slow.start()
        loads = {"omenative": LoadAverage(), "bare loop": LoadAverage()}
        loads["omenative"].start()
        nodes.phase("omenative")
        t0 = time.monotonic()

        async def create_ir(i: int) -> None:
            await kube.create(INFERENCE_REPLICAS, replica_body(f"bench-{i:03d}", per_ir),
                              ns_mgr)

        await bounded(n_ir, 8, create_ir)
        t_applied = time.monotonic() - t0
        say(f"  applied in {t_applied:.2f}s")
        await wait_done(ir_tracker, "InferenceReplicas", args.timeout,
                        lambda: f" ({len(pod_tracker.seen)} pods created, "
                                f"{len(pod_tracker.ready)} Ready)")
        t_mgr = max(ir_tracker.ready.values()) - t0
        mgr_cpu.stop()
        mgr_slow.stop()
        await loads["omenative"].stop()
        nodes.phase(None)
        stall = manager.longest_stall(t0, t0 + t_mgr)
        held = worst(probe_file(), t0, t0 + t_mgr)  # what held the loop, if probed
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
        await asyncio.sleep(3.0)  # the manager's full collection waits for 5 quiet s
        after_ready = manager.longest_stall(t0 + t_mgr, time.monotonic() - 1.0)
        sampler.cancel()
        await stop_py_spy(profiler, args.py_spy)
        with contextlib.suppress(asyncio.CancelledError):
            await sampler
        hwm, _, cpu = manager.sample_proc()
        scheduling = await scheduling_events(kube, ns_mgr)
        pods_now = await kube.list(PODS, ns_mgr)
        mgr_services = [copied_service(s) for s in
                        (await kube.list(SERVICES, ns_mgr)).get("items") or ()]
        mgr_gangs: list[JSON] = []
        for res in (r for pair in NATIVE_GANG_VERSIONS for r in reversed(pair)):  # native gangs
            # (Auto, Native), in the version served (1.37: v1beta1; 1.36: v1alpha2)
            with contextlib.suppress(ApiError):  # not served: no gangs to copy
                mgr_gangs += [copied_object(o, res.api_version, res.kind) for o in
                              (await kube.list(res, ns_mgr)).get("items") or ()]
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
        same = args.bare_pods == "same"
        bare = BareLoop(api, ns_bare, args.qps, args.burst, args.max_inflight,
                        pods=[copied_pod(p) for p in sorted(
                            items, key=lambda p: p["metadata"]["name"])] if same else None)
        bare_steps = PodMilestones(lambda p: _label(p, "group"))

        def bare_seen(kind: str, pod: JSON) -> None:
            bare.see(kind, pod)
            bare_steps.see(kind, pod)

        bare_tracker = await Tracker(kube, PODS, ns_bare, pod_ready, n_pods,
                                     on_event=bare_seen).start()
        trackers.append(bare_tracker)
        say(f"bare loop: creating {n_pods} pods in {ns_bare} ({args.max_inflight} in flight, "
            f"qps={args.qps:g} burst={args.burst}, {args.bare_pods} pods), each group's "
            f"gates patched once ready")
        cpu0 = time.process_time()
        bare_cpu_share = CpuShare(pids)
        bare_cpu_share.start()
        bare_slow = SlowWatchers(apiserver_log)
        bare_slow.start()
        loads["bare loop"].start()
        nodes.phase("bare loop")
        if cluster_cores:  # the bare loop gets the manager's core, as the manager had it
            pin(os.getpid(), {args.manager_core})
        if args.manager_realtime:
            realtime(os.getpid())
        t1 = time.monotonic()
        if same:
            await bare.create_services(mgr_services)
            await bare.create_objects(mgr_gangs, {"Workload": WORKLOADS.plural,
                                                  "PodGroup": NATIVE_POD_GROUPS.plural})
        elif args.bare_service:
            await bare.create_service()
        await bare.create_pods(n_pods)
        t_bare_created = time.monotonic() - t1
        say(f"  {n_pods} pods created in {t_bare_created:.2f}s")
        await wait_done(bare_tracker, "pods", args.timeout)
        t_bare = max(bare_tracker.ready.values()) - t1
        if cluster_cores:
            pin(os.getpid(), cluster_cores)
        if args.manager_realtime:
            realtime(os.getpid(), on=False)
        bare_cpu_share.stop()
        bare_slow.stop()
        await loads["bare loop"].stop()
        nodes.phase(None)
        bare_cpu = time.process_time() - cpu0
        say(f"all {n_pods} bare pods Ready after {t_bare:.2f}s ({bare.requests} requests)")
        bare_lat = bare.latencies

        for tr in trackers:
            await tr.stop()
        trackers.clear()
        peer = None
        if args.peer == "lws":
            loads["LWS"] = LoadAverage()
            loads["LWS"].start()
            nodes.phase("LWS")
            try:
                peer = await run_lws_peer(kubeconfig, n_ir, per_ir, args, workdir, namespaces,
                                          external=cluster is None)
            except Exception as exc:  # the manager's figures still count
                say(f"LWS peer failed: {type(exc).__name__}: {exc}")
            await loads["LWS"].stop()
            nodes.phase(None)

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
            "replicas": n_ir, "instances": per_ir, "pods": n_pods, "workers": args.workers,
            "t_apply": t_applied, "t_manager": t_mgr,
            "t_manager_pods_created": created_at, "t_manager_pods_ready": pods_ready_at,
            "t_bare": t_bare, "t_bare_created": t_bare_created,
            "bare_create_ms": 1000 * sum(bare_lat) / max(len(bare_lat), 1),
            "bare_requests": bare.requests, "bare_cpu_s": bare_cpu,
            "bench_hwm_mib": self_hwm_mib(), "peer": peer,
            "hwm_mib": manager.hwm_kib / 1024, "rss_sampled_mib": rss_peak_seen / 1024,
            "cpu_s": manager.cpu_seconds, "base": base, "at_ready": at_ready,
            "settled": settled, "quiet": quiet,
            "trailing_writes": writes(settled) - writes(at_ready),
            "milestones": {"omenative": mgr_steps, "bare loop": bare_steps},
            "t0s": {"omenative": t0, "bare loop": t1},
            "cpu_share": {"omenative": mgr_cpu, "bare loop": bare_cpu_share},
            "slow_watchers": {"omenative": mgr_slow, "bare loop": bare_slow},
            "scheduling_events": scheduling, "loads": loads, "stall": stall,
            "startup_stall": startup, "after_ready_stall": after_ready, "nodes": nodes,
            "stall_callbacks": held,
        }
    finally:
        for tr in trackers:
            await tr.stop()
        await manager.stop()
        if api is not None:
            await api.close()
        await policies.aclose()
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


async def run_lws_peer(kubeconfig: Path, n_ir: int, per_ir: int, args: argparse.Namespace,
                       workdir: Path, namespaces: list[str], *,
                       external: bool) -> dict[str, Any]:
    """LeaderWorkerSet v0.7.0 (``peer_lws.run_peer``) on the same shapes and client limits:
    ``n_ir`` LeaderWorkerSets of ``per_ir`` groups each."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from peer_lws import run_peer  # noqa: PLC0415 - only with --peer lws (waits for its build)

    if external:
        say("  KUBECONFIG given: kube-controller-manager keeps its own client limits")
    ns = f"bench-lws-{uuid.uuid4().hex[:8]}"
    namespaces.append(ns)
    res = await run_peer(kubeconfig, ns, n_ir, PODS_PER_REPLICA - 1, qps=args.qps,
                         burst=args.burst, state_dir=workdir / "lws", groups=per_ir)
    return {"name": "LWS v0.7.0", "seconds": res.seconds,
            "requests": float(res.requests) if res.requests is not None else float("nan"),
            "cpu_seconds": res.cpu_seconds, "peak_rss_mb": res.peak_rss_mb}


def _gang_of(pod: JSON) -> str | None:
    """The gang of one of the manager's pods: its InferenceReplica and Instance index."""
    ir = _label(pod, "ome.io/inferencereplica")
    return None if ir is None else f"{ir}/{_label(pod, 'ome.io/instance-index')}"


def _label(pod: JSON, key: str) -> str | None:
    value = ((pod.get("metadata") or {}).get("labels") or {}).get(key)
    return str(value) if value else None


def build_parser() -> argparse.ArgumentParser:
    """The benchmark's command line."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=100,
                        help="Instances (gangs of 4 pods) in all; with --instances 1, the "
                             "InferenceReplicas to apply")
    parser.add_argument("--instances", type=int, default=1,
                        help="Instances per InferenceReplica (its spec.replicas; LWS: groups "
                             "per LeaderWorkerSet); must divide --replicas")
    parser.add_argument("--nodes", type=int, default=4,
                        help="nodes of the cluster started here (at least room for every "
                             "phase's pods, 250 a node)")
    parser.add_argument("--nodes-backend", choices=("standin", "kwok"), default="standin",
                        help="the nodes of the cluster started here: the kubelet stand-in's "
                             "(default) or KWOK's (kwok v0.8.0, `devcluster up --kwok-nodes`; "
                             "built first if missing), for thousands of pods")
    parser.add_argument("--workers", type=int, default=64, help="manager workers")
    parser.add_argument("--max-inflight", type=int, default=32,
                        help="manager actions in flight; bare loop calls in flight")
    parser.add_argument("--creates-per-pass", type=int, default=None,
                        help="manager --creates-per-pass (pod creates a pass sends at most; "
                             "default: its own, --max-inflight)")
    parser.add_argument("--bare-pods", choices=("same", "minimal"), default="same",
                        help="the bare loop's pods: same (default; copies of the manager's "
                             "pods and headless Service: the same scheduling, DNS and "
                             "EndpointSlice work, so the ratio is the controllers' alone) "
                             "or minimal (one container and the serving gate, as runs "
                             "before 2026-12-05)")
    parser.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True,
                        help="before the timed phases, run as many minimal pods untimed "
                             "(they stay), so the manager's phase is not also the cluster's "
                             "first (default; --no-warmup: as runs before 2026-12-05)")
    parser.add_argument("--warmup-pods", type=int, default=None,
                        help="warm-up pods (default: as many as a timed phase makes)")
    parser.add_argument("--bare-service", action="store_true",
                        help="the bare loop also makes a headless Service over its pods "
                             "(as the manager does per replica: EndpointSlice work)")
    parser.add_argument("--pipeline-creates", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="manager --pipeline-creates (default) or --no-pipeline-creates "
                             "(every create answered within its pass)")
    parser.add_argument("--status-coalesce", type=float, default=10.0,
                        help="manager --status-coalesce (s; 0: every status written)")
    parser.add_argument("--scheduler-qps", type=float, default=None,
                        help="kube-scheduler client QPS (burst twice that; default: its own "
                             "50 / 100)")
    parser.add_argument("--status-readiness-coalesce", type=float, default=1.0,
                        help="manager --status-readiness-coalesce (s; 0: readiness never held)")
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
    parser.add_argument("--finalizer-policy", action=argparse.BooleanOptionalAction,
                        default=True,
                        help="install config/admission/finalizer.yaml for the manager's "
                             "namespace, as an install does (default): the API server adds "
                             "the finalizer in each create; --no-finalizer-policy: the "
                             "manager patches it in (one write more per InferenceReplica)")
    parser.add_argument("--manager-core", type=int, default=None, metavar="N",
                        help="give the manager core N alone and the cluster (and this "
                             "benchmark) the others, so its event-loop stall is its own "
                             "hold, not the OS running other processes (cores.py); the "
                             "bare loop gets core N in its phase; wall times are not "
                             "comparable with an unpinned run")
    parser.add_argument("--manager-realtime", action="store_true",
                        help="run the manager's threads under SCHED_RR (needs root or "
                             "CAP_SYS_NICE): the OS runs them as soon as they are ready, "
                             "so the stall is the manager's own hold, while the cluster "
                             "keeps every core (cores.py); the bare loop's phase gives "
                             "this benchmark the same")
    parser.add_argument("--py-spy", type=Path, default=None, metavar="PATH",
                        help="sample the manager with py-spy (if installed) from its start "
                             "until every InferenceReplica is Ready; collapsed stacks to PATH, "
                             "or a timeline for a PATH ending in .json (spy_stalls.py)")
    parser.add_argument("--py-spy-rate", type=int, default=100, metavar="HZ",
                        help="py-spy's samples a second (1000 for spy_stalls.py's timeline)")
    parser.add_argument("--keep-logs", action="store_true",
                        help="keep the temp folder with the manager and cluster logs")
    return parser


def main() -> int:
    parser = build_parser()
    args = parser.parse_args()
    if args.instances < 1 or args.replicas % args.instances:
        parser.error(f"--instances {args.instances} must be at least 1 and divide "
                     f"--replicas {args.replicas}")
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
