"""Memory benchmark (issue 14, target 5): the manager's RSS with 10,000 watched pods.

Two fleet shapes: one InferenceReplica of 5,000 Instances x 2 pods, and 2,500 replicas of
2 Instances x 2 pods (4 pods each). The objects are real: ``memory_record.py`` runs the real
manager on a local control plane (``python -m omenative_devcluster up``) until one replica
of 2 Instances x (leader + worker) is Ready, and saves the InferenceReplica, its pods,
ControllerRevisions, headless Service, EndpointSlices and nodes as the API server holds
them. Here they are replayed, renamed (names, UIDs, IPs, nodes, namespaces), as a LIST
(pages of 500, parsed from bytes as ``KubeClient`` parses them) and then a watch stream
(one MODIFIED event for every pod and replica) through the manager's own informers, built
by the manager's own ``build_watch_caches``, with a stand-in transport in place of the API
server. The one-replica shape gets a status of 5,000 rows in the representative mix of
``tests/status_states``; each replica keeps 2 ControllerRevisions; one node per pod
(multi-node inference: a pod takes all 8 GPUs of its node).

Each case runs in a fresh subprocess that imports the manager (and so kubernetes-asyncio)
first, then measures ``VmRSS`` after the import, ``VmRSS`` once every cache has synced and
the watch stream is applied (after a full ``gc.collect()``), and ``VmHWM`` (peak). Beside
it, in the same run, a baseline process imports the same and holds the same objects as
plain parsed JSON dicts. Run under the heavy lock (the recording starts a control plane):

    flock /tmp/omenative-heavy.lock .venv/bin/python benchmarks/bench_memory.py

``--recorded PATH`` reuses a recording (default: record into a temp folder first);
``--record-to PATH`` keeps it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.util
import itertools
import json
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

ROOT = Path(__file__).resolve().parents[1]
if importlib.util.find_spec("omenative_controller") is None:  # not installed: use src/
    sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from tests import status_states  # noqa: E402

import omenative_controller.manager  # noqa: E402, F401  (as the manager: kubernetes-asyncio)
from omenative_controller.cache_views import service_index  # noqa: E402
from omenative_controller.decoded import ReplicaDecoder  # noqa: E402
from omenative_controller.executor import Executor  # noqa: E402
from omenative_controller.kube.apiwatch import NATIVE_POD_GROUPS, WORKLOADS  # noqa: E402
from omenative_controller.kube.client import KubeClient  # noqa: E402
from omenative_controller.kube.errors import ApiError  # noqa: E402
from omenative_controller.kube.events import EventRecorder  # noqa: E402
from omenative_controller.kube.informer import Informer  # noqa: E402
from omenative_controller.manager import Manager  # noqa: E402
from omenative_controller.manager_config import ManagerOptions  # noqa: E402
from omenative_controller.observability import Metrics  # noqa: E402
from omenative_controller.pass_context import ApplyResult, PassContext  # noqa: E402
from omenative_controller.routed import RoutedPods  # noqa: E402
from omenative_controller.wakeups import Wakeups  # noqa: E402
from omenative_controller.watch_caches import (  # noqa: E402
    build_watch_caches,
    return_free_heap,
    settle_after_sync,
)
from omenative_core.labels import LABEL_REVISION_HASH  # noqa: E402
from omenative_core.model.plan import Plan  # noqa: E402
from omenative_core.status.wire import status_to_json  # noqa: E402

TARGET_MB = 150.0
MB = 1_000_000
SHAPES = {"one": (1, 5000), "many": (2500, 2)}
"""shape -> (replicas, Instances per replica) at 10,000 pods; every Instance is leader +
worker. ``--pods`` scales both (CI runs a tiny size: that the benchmark runs)."""
FULL_PODS = 10_000


def shape_size(shape: str, pods: int) -> tuple[int, int]:
    """(replicas, Instances per replica) of ``shape`` at about ``pods`` pods."""
    replicas, instances = SHAPES[shape]
    if shape == "one":
        return replicas, max(1, instances * pods // FULL_PODS)
    return max(1, replicas * pods // FULL_PODS), instances


def shape_label(shape: str, replicas: int, instances: int) -> str:
    """``1 x 5,000 x 2 pods`` (one replica) or ``2,500 x 4 pods`` (many)."""
    if shape == "one":
        return f"1 x {instances:,} x 2 pods"
    return f"{replicas:,} x {2 * instances} pods"


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


def _reset_peak() -> None:
    """Start ``VmHWM`` again from the current RSS (Linux: ``clear_refs`` 5), so the peak of
    the first passes is told apart from the peak of the sync."""
    with contextlib.suppress(OSError):
        Path("/proc/self/clear_refs").write_text("5")


# ---------------------------------------------------------------------------- the fleet


class Fleet:
    """The recorded objects, renamed into a fleet of the given shape (made on demand)."""

    def __init__(self, recorded: dict[str, Any], replicas: int, instances: int) -> None:
        self.rec = recorded
        self.replicas, self.instances = replicas, instances
        ir = recorded["replica"]
        self.name = ir["metadata"]["name"]
        self.ns = ir["metadata"]["namespace"]
        self.ir_uid = ir["metadata"]["uid"]
        self.pods_per_instance = len(recorded["pods"]) // max(1, ir["spec"]["replicas"])
        self.pod_templates = [p for p in recorded["pods"]
                              if p["metadata"]["labels"].get("ome.io/instance-index") == "0"]
        self.replica_text = json.dumps(self._replica_body())
        self.pod_texts = [json.dumps(p) for p in self.pod_templates]
        self.revision_text = json.dumps(recorded["revisions"][0])
        self.revision_hash = recorded["revisions"][0]["metadata"]["labels"][LABEL_REVISION_HASH]
        self.service_text = json.dumps(recorded["services"][0]) if recorded["services"] else ""
        self.slice_text = json.dumps(recorded["slices"][0]) if recorded["slices"] else ""
        self.endpoint_text = json.dumps(recorded["slices"][0]["endpoints"][0]) if (
            recorded["slices"] and recorded["slices"][0].get("endpoints")) else ""
        self.node_text = json.dumps(recorded["nodes"][0])
        self.node_name = recorded["nodes"][0]["metadata"]["name"]
        self.workload_text = json.dumps(recorded["workloads"][0])
        self.pod_group_text = json.dumps(next(
            g for g in recorded["pod_groups"]
            if g["metadata"]["labels"].get("ome.io/instance-index") == "0"))
        self.rv = 1000

    @property
    def pods(self) -> int:
        """Pods in the fleet."""
        return self.replicas * self.instances * self.pods_per_instance

    def _replica_body(self) -> dict[str, Any]:
        ir = json.loads(json.dumps(self.rec["replica"]))
        ir["spec"]["replicas"] = self.instances
        if self.instances != ir.get("status", {}).get("replicas"):
            rows = status_to_json(status_states.representative(self.instances),
                                  encoding="ColumnarV2")  # the manager's default encoding
            kept = {k: v for k, v in ir.get("status", {}).items() if not k.startswith("instance")}
            ir["status"] = {**kept, **rows}
        return ir

    def _rename(self, text: str, r: int, ns: str) -> str:
        new = f"{self.name}{r:04d}"
        text = re.sub(rf'(?<![\w./-]){self.name}(?=[-"])', new, text)
        text = text.replace(self.ir_uid, f"{r:08x}-0000-4000-8000-{r:012x}")
        return text.replace(f'"{self.ns}"', f'"{ns}"')

    def namespace(self, r: int) -> str:
        """Replica ``r``'s namespace (the many-replica shape spreads over 25)."""
        return f"bench-{r % 25:02d}"

    def _next_rv(self) -> str:
        self.rv += 1
        return str(self.rv)

    def _meta(self, obj: dict[str, Any], uid: int) -> dict[str, Any]:
        meta = obj["metadata"]
        meta["uid"] = f"{uid:08x}-1111-4000-8000-{uid:012x}"
        meta["resourceVersion"] = self._next_rv()
        return obj

    def objects(self, kind: str) -> Iterator[str]:
        """The JSON text of every object of ``kind``, renamed."""
        yield from getattr(self, "_" + kind)()

    def _replicas(self) -> Iterator[str]:
        for r in range(self.replicas):
            obj = json.loads(self._rename(self.replica_text, r, self.namespace(r)))
            yield json.dumps(self._meta(obj, r))

    def _pods(self) -> Iterator[str]:
        uid = 0
        for r in range(self.replicas):
            ns = self.namespace(r)
            for i in range(self.instances):
                for text in self.pod_texts:
                    obj = json.loads(self._rename(text, r, ns).replace(
                        f"{self.name}{r:04d}-0", f"{self.name}{r:04d}-{i}"))
                    obj["metadata"]["labels"]["ome.io/instance-index"] = str(i)
                    obj["spec"]["nodeName"] = f"node-{uid:05d}"
                    obj["status"]["podIP"] = f"10.{uid >> 16 & 255}.{uid >> 8 & 255}.{uid & 255}"
                    obj["status"]["podIPs"] = [{"ip": obj["status"]["podIP"]}]
                    uid += 1
                    yield json.dumps(self._meta(obj, uid))

    def _revisions(self) -> Iterator[str]:
        for r in range(self.replicas):
            for k in range(2):  # the current revision and an older one
                text = self._rename(self.revision_text, r, self.namespace(r))
                if k == 0:
                    text = text.replace(self.revision_hash, "0" * len(self.revision_hash))
                obj = json.loads(text)
                obj["revision"] = k + 1
                yield json.dumps(self._meta(obj, r * 2 + k))

    def _services(self) -> Iterator[str]:
        for r in range(self.replicas if self.service_text else 0):
            obj = json.loads(self._rename(self.service_text, r, self.namespace(r)))
            yield json.dumps(self._meta(obj, r))

    def _slices(self) -> Iterator[str]:
        if not self.slice_text:
            return
        per_replica = self.instances * self.pods_per_instance
        for r in range(self.replicas):
            for s in range(0, per_replica, 100):
                obj = json.loads(self._rename(self.slice_text, r, self.namespace(r)))
                obj["metadata"]["name"] += f"-{s // 100}"
                obj["endpoints"] = [self._endpoint(r, p) for p in
                                    range(s, min(s + 100, per_replica))]
                yield json.dumps(self._meta(obj, r * 1000 + s))

    def _endpoint(self, r: int, p: int) -> Any:
        ep = json.loads(self.endpoint_text)
        runner = "leader" if p % self.pods_per_instance == 0 else "worker"
        ep["targetRef"]["name"] = f"{self.name}{r:04d}-{p // self.pods_per_instance}-{runner}-0"
        ep["addresses"] = [f"10.0.{p >> 8 & 255}.{p & 255}"]
        return ep

    def _workloads(self) -> Iterator[str]:
        for r in range(self.replicas):  # one per (replica, revision): the current one
            obj = json.loads(self._rename(self.workload_text, r, self.namespace(r)))
            yield json.dumps(self._meta(obj, r))

    def _pod_groups(self) -> Iterator[str]:
        for r in range(self.replicas):  # one per Instance attempt
            text = self._rename(self.pod_group_text, r, self.namespace(r))
            for i in range(self.instances):
                obj = json.loads(text.replace(f'"{self.name}{r:04d}-0-',
                                              f'"{self.name}{r:04d}-{i}-'))
                obj["metadata"]["labels"]["ome.io/instance-index"] = str(i)
                yield json.dumps(self._meta(obj, r * self.instances + i))

    def _nodes(self) -> Iterator[str]:
        for n in range(self.pods):
            text = self.node_text.replace(f'"{self.node_name}"', f'"node-{n:05d}"')
            yield json.dumps(self._meta(json.loads(text), n))


# ---------------------------------------------------------------------------- the transport


def _selected(obj: dict[str, Any], selector: str) -> bool:
    """Whether ``obj``'s labels match ``selector`` (``key=value`` or ``key`` terms)."""
    labels = obj["metadata"].get("labels") or {}
    for term in selector.split(","):
        key, eq, value = term.partition("=")
        if key not in labels or (eq and labels[key] != value):
            return False
    return True


class ReplayClient:
    """A stand-in for ``KubeClient``'s list and watch: pages and events parsed from bytes."""

    def __init__(self, fleet: Fleet, kinds: dict[str, str]) -> None:
        self.fleet = fleet
        self.kinds = kinds  # resource plural -> Fleet kind
        self.cursors: dict[str, Iterator[str]] = {}
        self.watched: dict[str, asyncio.Event] = {}
        self.writes = 0

    async def list(self, res: Any, namespace: str | None = None, *,
                   label_selector: str | None = None, limit: int | None = None,
                   continue_token: str | None = None) -> dict[str, Any]:
        kind = self.kinds.get(res.plural)
        if kind is None:
            return {"items": [], "metadata": {"resourceVersion": "1"}}
        if continue_token is None:  # the API server selects before it pages
            self.cursors[kind] = (t for t in self.fleet.objects(kind) if not label_selector
                                  or _selected(json.loads(t), label_selector))
        batch = [t for _, t in zip(range(limit or 500), self.cursors[kind], strict=False)]
        more = len(batch) == (limit or 500)
        raw = ('{"items":[' + ",".join(batch) + '],"metadata":{"resourceVersion":"'
               + str(self.fleet.rv) + '"' + (',"continue":"c"' if more else "") + "}}")
        await asyncio.sleep(0)
        return cast(dict[str, Any], json.loads(raw.encode()))

    @contextlib.asynccontextmanager
    async def watch(self, res: Any, namespace: str | None = None, *,
                    label_selector: str | None = None, **_: Any,
                    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        yield self._events(res.plural, label_selector)

    async def _events(self, plural: str, selector: str | None) -> AsyncIterator[dict[str, Any]]:
        kind = self.kinds.get(plural)
        if kind in ("pods", "replicas"):  # one update of each: the watch path
            for text in self.fleet.objects(kind):
                line = ('{"type":"MODIFIED","object":' + text + "}").encode()
                event = cast(dict[str, Any], json.loads(line))
                if not selector or _selected(event["object"], selector):
                    yield event
        self.watched.setdefault(plural, asyncio.Event()).set()
        await asyncio.Event().wait()  # an open stream with nothing more to say

    async def request(self, method: str, path: str, **_: Any) -> dict[str, Any]:
        """Discovery: the control plane serves the native gang API (as ``v1beta1``; the
        recorded objects of either version are listed by their plural)."""
        if path == f"/apis/{WORKLOADS.api_version}":
            return {"resources": [{"name": NATIVE_POD_GROUPS.plural},
                                  {"name": WORKLOADS.plural}]}
        raise ApiError(404, "NotFound", path)

    async def get(self, res: Any, name: str, namespace: str | None = None,
                  **_: Any) -> dict[str, Any]:
        """No CRD but the InferenceReplica's (the scheduler-plugins PodGroup is absent)."""
        raise ApiError(404, "NotFound", f"{res.plural}/{name}")

    async def create(self, res: Any, body: dict[str, Any], namespace: str | None = None,
                     **_: Any) -> dict[str, Any]:
        """Accepted as sent (the manager's Events)."""
        self.writes += 1
        return body

    async def patch(self, res: Any, name: str, body: Any, namespace: str | None = None,
                    **_: Any) -> dict[str, Any]:
        """Accepted (an Event's count)."""
        self.writes += 1
        return cast(dict[str, Any], body)


# ---------------------------------------------------------------------------- one case

POINTS: dict[str, int] = {}
"""RSS (KiB) at named points of a case: ``synced`` (caches synced and settled)."""
COUNTS: dict[str, int] = {}
"""What a manager case did: passes, actions planned, Events, memos kept, queue."""


async def _settled(inf: Any, client: ReplayClient) -> None:
    """Until ``inf`` has listed and applied its watch stream."""
    await inf.wait_synced()
    while inf.resource.plural not in client.watched:
        await asyncio.sleep(0.01)


KINDS = {"inferencereplicas": "replicas", "pods": "pods", "nodes": "nodes",
         "controllerrevisions": "revisions", "services": "services",
         "endpointslices": "slices"}
"""Resource plural -> the Fleet's kind, for the caches the manager always runs."""


async def _caches(fleet: Fleet, one_at_a_time: bool) -> tuple[int, dict[str, int]]:
    client = ReplayClient(fleet, KINDS)
    routed = RoutedPods(service_index)
    wakeups = Wakeups(lambda: None, lambda: caches.replicas, lambda: caches.pods)

    def on_slice(ns: str | None, old: Any, new: Any) -> None:
        routed.on_slice(ns, old, new)
        wakeups.slice(ns, old, new)

    caches = build_watch_caches(cast(KubeClient, client), None, wakeups, on_slice, Metrics(),
                                5.0)
    tasks, steps = [], {}
    if one_at_a_time:  # to see what each cache keeps (the manager starts them together)
        for inf in caches.always:
            before = _status_kib("VmRSS")
            tasks.append(asyncio.create_task(inf.run()))
            await _settled(inf, client)
            gc.collect()
            steps[inf.name] = _status_kib("VmRSS") - before
    else:  # as the manager does: every informer lists and watches at once
        before = _status_kib("VmRSS")
        tasks = [asyncio.create_task(inf.run()) for inf in caches.always]
        for inf in caches.always:
            await _settled(inf, client)
        gc.collect()
        steps["all caches"] = _status_kib("VmRSS") - before
    held = sum(len(i) for i in caches.always)
    before = _status_kib("VmRSS")
    settle_after_sync()  # as the manager does once its caches synced
    return_free_heap()
    steps["settled"] = _status_kib("VmRSS") - before
    POINTS["synced"] = _status_kib("VmRSS")
    before = _status_kib("VmRSS")
    decoder = ReplicaDecoder()  # the first passes decode every replica, and keep it
    for _key, raw in caches.replicas.items():
        decoder.decode(raw)
    gc.collect()
    steps["decoded"] = _status_kib("VmRSS") - before
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    globals()["_held"] = (caches, routed, decoder)  # measured while held
    return held, steps


class UnsentExecutor:
    """The manager's executor with nothing sent: each plan counts as applied (what is
    measured is what the manager keeps from its passes, not the writes), and the status
    gauge is set per replica as ``Executor`` sets it on each status write."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self.plans = 0
        self.actions = 0

    async def apply(self, plan: Plan, ctx: PassContext) -> ApplyResult:
        """Count the plan; set the replica's status gauge."""
        self.plans += 1
        self.actions += len(plan.actions)
        self.metrics.status_bytes.labels(ctx.namespace, ctx.name).set(len(plan.actions))
        return ApplyResult(applied=len(plan.actions))

    def forget(self, key: str) -> None:
        """Nothing held per replica."""


async def _manager(fleet: Fleet) -> tuple[int, dict[str, int]]:
    """The manager as it runs: its own ``_build`` (every informer, the PodGroup CRD and
    native gang watches), ``settle_after_sync``, then ``_on_started_leading`` (the work
    queue with every replica in it, the workers' first passes through ``_reconcile``:
    decode, snapshot, ``plan_replica`` and the PlanMemo kept; the InferenceService
    controller and its caches), with a stand-in transport and nothing sent."""
    client = ReplayClient(fleet, {**KINDS, "workloads": "workloads",
                                  "podgroups": "pod_groups"})
    kube = cast(KubeClient, client)
    manager = Manager(ManagerOptions(metrics_port=None, probe_port=None))
    manager.client = kube
    manager.events = EventRecorder(kube, identity="bench", guard=lambda: True)
    steps: dict[str, int] = {}
    before = _status_kib("VmRSS")
    manager._build()  # as Manager.run does, without its servers and Lease
    while not manager.caches_synced():
        await asyncio.sleep(0.05)
    native = manager.native_gang
    assert native is not None and native.present, "native gang caches not running"
    for inf in (*_always(manager), *native.informers.values()):
        await _settled(inf, client)
    gc.collect()
    steps["caches"] = _status_kib("VmRSS") - before
    before = _status_kib("VmRSS")
    settle_after_sync()  # as Manager._sync_gauge does once the caches synced
    return_free_heap()
    steps["settled"] = _status_kib("VmRSS") - before
    POINTS["synced"] = before = _status_kib("VmRSS")
    POINTS["hwm_synced"] = _status_kib("VmHWM")
    _reset_peak()
    executor = UnsentExecutor(manager.metrics)
    manager.executor = cast(Executor, executor)
    await manager._on_started_leading()  # the queue, workers, ISVC controller
    assert manager.queue is not None
    while executor.plans < len(manager.replicas or ()):
        await asyncio.sleep(0.05)
    await manager.queue.wait_idle()
    gc.collect()
    steps["first passes"] = _status_kib("VmRSS") - before
    POINTS["passes"] = _status_kib("VmRSS")  # while the manager runs
    POINTS["hwm_passes"] = _status_kib("VmHWM")
    COUNTS.update(plans=executor.plans, actions=executor.actions, events=client.writes,
                  memos=len(manager._memos or ()), queued=len(manager.queue),
                  delayed=manager.queue.delayed)
    held = sum(len(i) for i in (*_always(manager), *native.informers.values()))
    globals()["_held"] = manager  # measured while held
    return held, steps


def _always(manager: Manager) -> tuple[Informer[Any], ...]:
    informers = (manager.replicas, manager.pods, manager.nodes, manager.revisions,
                 manager.services, manager.slices)
    return tuple(i for i in informers if i is not None)


def _baseline(fleet: Fleet) -> tuple[int, dict[str, int]]:
    store: dict[str, dict[str, Any]] = {}
    listed = ("replicas", "pods", "nodes", "revisions", "services", "slices", "workloads",
              "pod_groups")
    for kind in (*listed, "pods", "replicas"):  # the LIST, then the watch's updates
        texts = fleet.objects(kind)
        while page_texts := list(itertools.islice(texts, 500)):
            page = json.loads(('{"items":[' + ",".join(page_texts) + "]}").encode())
            for obj in page["items"]:
                meta = obj["metadata"]
                store[f"{kind}/{meta.get('namespace')}/{meta['name']}"] = obj
    globals()["_held"] = store
    return len(store), {}


def child(mode: str, shape: str, recorded: Path, one_at_a_time: bool, pods: int) -> None:
    """One measurement, printed as one JSON line."""
    gc.collect()
    rss_import = _status_kib("VmRSS")
    rec = json.loads(recorded.read_text())
    replicas, instances = shape_size(shape, pods)
    fleet = Fleet(rec, replicas, instances)
    del rec
    started = time.process_time()
    if mode == "caches":
        held, steps = asyncio.run(_caches(fleet, one_at_a_time))
    elif mode == "manager":
        held, steps = asyncio.run(_manager(fleet))
    else:
        held, steps = _baseline(fleet)
    cpu = time.process_time() - started
    gc.collect()
    print(json.dumps({"mode": mode, "shape": shape, "pods": fleet.pods, "objects": held,
                      "replicas": replicas, "instances": instances,
                      "rss_import_kib": rss_import,
                      "rss_kib": POINTS.get("passes", _status_kib("VmRSS")),
                      "hwm_kib": max(POINTS.get("hwm_synced", 0), _status_kib("VmHWM")),
                      "cpu_s": round(cpu, 2),
                      "points_kib": POINTS, "synced_kib": POINTS.get("synced"),
                      "by_cache_kib": steps,
                      "counts": COUNTS}))


# ---------------------------------------------------------------------------- the run


def run_case(mode: str, shape: str, recorded: Path, one_at_a_time: bool, pods: int
             ) -> dict[str, Any]:
    """``child`` in a fresh interpreter."""
    extra = ["--one-at-a-time"] if one_at_a_time else []
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--shape", shape, "--recorded",
         str(recorded), "--pods", str(pods), *extra], check=True, capture_output=True,
        text=True)
    return cast(dict[str, Any], json.loads(out.stdout.strip().splitlines()[-1]))


def _mb(kib: int | None) -> str:
    return "" if kib is None else f"{kib * 1024 / MB:.1f}"


def report(rows: list[dict[str, Any]]) -> None:
    """The side-by-side table: each case's RSS at each point, and the caches-only figure
    (the old scope) beside the manager's."""
    old = {r["shape"]: r["rss_kib"] for r in rows if r["mode"] == "caches"}
    print(f"{'shape':<20} {'kept as':<9} {'objects':>7} {'import':>7} {'synced':>7}"
          f" {'passes':>7} {'VmHWM':>7} {'old':>7} {'per pod':>8}  target 150 MB (MB: 10^6 B)")
    for r in rows:
        label = shape_label(r["shape"], r["replicas"], r["instances"])
        per_pod = (r["rss_kib"] - r["rss_import_kib"]) * 1024 / r["pods"]
        worst = max(r["rss_kib"], r["hwm_kib"]) * 1024 / MB
        verdict = "" if r["mode"] == "baseline" else "met" if worst <= TARGET_MB else "NOT met"
        passes = _mb(r["rss_kib"]) if r["mode"] == "manager" else ""
        synced = _mb(r.get("synced_kib")) if r["mode"] != "baseline" else _mb(r["rss_kib"])
        beside = _mb(old.get(r["shape"])) if r["mode"] == "manager" else ""
        print(f"{label:<20} {r['mode']:<9} {r['objects']:>7,} {_mb(r['rss_import_kib']):>7}"
              f" {synced:>7} {passes:>7} {_mb(r['hwm_kib']):>7} {beside:>7}"
              f" {per_pod:>7,.0f}B  {verdict}")
        if r.get("by_cache_kib"):
            print(" " * 21 + "parts: " + ", ".join(
                f"{k} {v * 1024 / MB:+.1f}" for k, v in r["by_cache_kib"].items()))
        points = r.get("points_kib") or {}
        if "hwm_passes" in points:
            print(" " * 21 + f"peak: while syncing {_mb(points['hwm_synced'])}, during the "
                  f"first passes {_mb(points['hwm_passes'])}")
        if r.get("counts"):
            print(" " * 21 + "did: " + ", ".join(f"{k} {v:,}" for k, v in r["counts"].items()))


def main() -> int:
    """Record (or reuse a recording), then measure every case in its own process."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recorded", type=Path, help="reuse this recording")
    ap.add_argument("--record-to", type=Path, help="keep the recording here")
    ap.add_argument("--shapes", default="one,many")
    ap.add_argument("--pods", type=int, default=FULL_PODS,
                    help="fleet size in pods (CI runs a tiny one: that the benchmark runs)")
    ap.add_argument("--kubeconfig", type=Path,
                    help="record on this cluster (it runs the kubelet stand-in with room for "
                         "4 pods of 8 GPUs) instead of starting one")
    ap.add_argument("--modes", default="caches,manager",
                    help="of baseline (plain parsed JSON, ~1 GB), caches (the watch caches "
                         "only: the old figure), manager (everything the manager keeps)")
    ap.add_argument("--one-at-a-time", action="store_true",
                    help="sync the caches one after another and print what each keeps")
    ap.add_argument("--child", choices=("caches", "manager", "baseline"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--shape", choices=tuple(SHAPES), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.shape, args.recorded, args.one_at_a_time, args.pods)
        return 0
    recorded = args.recorded
    if recorded is None:
        from memory_record import record  # noqa: PLC0415  (only when recording)
        workdir = Path(tempfile.mkdtemp(prefix="bench-memory-"))
        recorded = args.record_to or workdir / "recorded.json"
        asyncio.run(record(recorded, workdir, args.kubeconfig))
    rows = [run_case(mode, shape, recorded, args.one_at_a_time, args.pods)
            for shape in args.shapes.split(",") for mode in args.modes.split(",")]
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
