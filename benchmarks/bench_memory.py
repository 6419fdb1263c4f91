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
from omenative_controller.kube.client import KubeClient  # noqa: E402
from omenative_controller.observability import Metrics  # noqa: E402
from omenative_controller.routed import RoutedPods  # noqa: E402
from omenative_controller.wakeups import Wakeups  # noqa: E402
from omenative_controller.watch_caches import (  # noqa: E402
    build_watch_caches,
    settle_after_sync,
)
from omenative_core.status.wire import status_to_json  # noqa: E402

TARGET_MB = 150.0
MB = 1_000_000
SHAPES = {"one": (1, 5000), "many": (2500, 2)}
"""shape -> (replicas, Instances per replica); every Instance is leader + worker."""


def _status_kib(field: str) -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return 0


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
        self.service_text = json.dumps(recorded["services"][0]) if recorded["services"] else ""
        self.slice_text = json.dumps(recorded["slices"][0]) if recorded["slices"] else ""
        self.endpoint_text = json.dumps(recorded["slices"][0]["endpoints"][0]) if (
            recorded["slices"] and recorded["slices"][0].get("endpoints")) else ""
        self.node_text = json.dumps(recorded["nodes"][0])
        self.node_name = recorded["nodes"][0]["metadata"]["name"]
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
        text = re.sub(rf'"{self.name}([-"])', rf'"{new}\1', text)
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
            for k in range(2):
                obj = json.loads(self._rename(self.revision_text, r, self.namespace(r)))
                obj["metadata"]["name"] += f"{k}"
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

    def _nodes(self) -> Iterator[str]:
        for n in range(self.pods):
            text = self.node_text.replace(f'"{self.node_name}"', f'"node-{n:05d}"')
            yield json.dumps(self._meta(json.loads(text), n))


# ---------------------------------------------------------------------------- the transport


class ReplayClient:
    """A stand-in for ``KubeClient``'s list and watch: pages and events parsed from bytes."""

    def __init__(self, fleet: Fleet, kinds: dict[str, str]) -> None:
        self.fleet = fleet
        self.kinds = kinds  # resource plural -> Fleet kind
        self.cursors: dict[str, Iterator[str]] = {}
        self.watched: dict[str, asyncio.Event] = {}

    async def list(self, res: Any, namespace: str | None = None, *,
                   label_selector: str | None = None, limit: int | None = None,
                   continue_token: str | None = None) -> dict[str, Any]:
        kind = self.kinds.get(res.plural)
        if kind is None:
            return {"items": [], "metadata": {"resourceVersion": "1"}}
        if continue_token is None:
            self.cursors[kind] = self.fleet.objects(kind)
        batch = [t for _, t in zip(range(limit or 500), self.cursors[kind], strict=False)]
        more = len(batch) == (limit or 500)
        raw = ('{"items":[' + ",".join(batch) + '],"metadata":{"resourceVersion":"'
               + str(self.fleet.rv) + '"' + (',"continue":"c"' if more else "") + "}}")
        await asyncio.sleep(0)
        return cast(dict[str, Any], json.loads(raw.encode()))

    @contextlib.asynccontextmanager
    async def watch(self, res: Any, namespace: str | None = None, **_: Any,
                    ) -> AsyncIterator[AsyncIterator[dict[str, Any]]]:
        yield self._events(res.plural)

    async def _events(self, plural: str) -> AsyncIterator[dict[str, Any]]:
        kind = self.kinds.get(plural)
        if kind in ("pods", "replicas"):  # one update of each: the watch path
            for text in self.fleet.objects(kind):
                line = ('{"type":"MODIFIED","object":' + text + "}").encode()
                yield cast(dict[str, Any], json.loads(line))
        self.watched.setdefault(plural, asyncio.Event()).set()
        await asyncio.Event().wait()  # an open stream with nothing more to say


# ---------------------------------------------------------------------------- one case


async def _settled(inf: Any, client: ReplayClient) -> None:
    """Until ``inf`` has listed and applied its watch stream."""
    await inf.wait_synced()
    while inf.resource.plural not in client.watched:
        await asyncio.sleep(0.01)


async def _caches(fleet: Fleet, one_at_a_time: bool) -> tuple[int, dict[str, int]]:
    kinds = {"inferencereplicas": "replicas", "pods": "pods", "nodes": "nodes",
             "controllerrevisions": "revisions", "services": "services",
             "endpointslices": "slices"}
    client = ReplayClient(fleet, kinds)
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
    steps["settled"] = _status_kib("VmRSS") - before
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


def _baseline(fleet: Fleet) -> tuple[int, dict[str, int]]:
    store: dict[str, dict[str, Any]] = {}
    listed = ("replicas", "pods", "nodes", "revisions", "services", "slices")
    for kind in (*listed, "pods", "replicas"):  # the LIST, then the watch's updates
        texts = fleet.objects(kind)
        while page_texts := list(itertools.islice(texts, 500)):
            page = json.loads(('{"items":[' + ",".join(page_texts) + "]}").encode())
            for obj in page["items"]:
                meta = obj["metadata"]
                store[f"{kind}/{meta.get('namespace')}/{meta['name']}"] = obj
    globals()["_held"] = store
    return len(store), {}


def child(mode: str, shape: str, recorded: Path, one_at_a_time: bool) -> None:
    """One measurement, printed as one JSON line."""
    gc.collect()
    rss_import = _status_kib("VmRSS")
    rec = json.loads(recorded.read_text())
    replicas, instances = SHAPES[shape]
    fleet = Fleet(rec, replicas, instances)
    del rec
    started = time.process_time()
    if mode == "caches":
        held, steps = asyncio.run(_caches(fleet, one_at_a_time))
    else:
        held, steps = _baseline(fleet)
    cpu = time.process_time() - started
    gc.collect()
    print(json.dumps({"mode": mode, "shape": shape, "pods": fleet.pods, "objects": held,
                      "rss_import_kib": rss_import, "rss_kib": _status_kib("VmRSS"),
                      "hwm_kib": _status_kib("VmHWM"), "cpu_s": round(cpu, 2),
                      "by_cache_kib": steps}))


# ---------------------------------------------------------------------------- the run


def run_case(mode: str, shape: str, recorded: Path, one_at_a_time: bool) -> dict[str, Any]:
    """``child`` in a fresh interpreter."""
    extra = ["--one-at-a-time"] if one_at_a_time else []
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--shape", shape, "--recorded",
         str(recorded), *extra], check=True, capture_output=True, text=True)
    return cast(dict[str, Any], json.loads(out.stdout.strip().splitlines()[-1]))


def report(rows: list[dict[str, Any]]) -> None:
    """The side-by-side table."""
    print(f"{'shape':<22} {'kept as':<9} {'objects':>7} {'RSS import':>10} {'RSS synced':>10}"
          f" {'VmHWM':>8} {'per pod':>8} {'target':>7}")
    for r in rows:
        label = {"one": "1 x 5,000 x 2 pods", "many": "2,500 x 4 pods"}[r["shape"]]
        per_pod = (r["rss_kib"] - r["rss_import_kib"]) * 1024 / r["pods"]
        rss_mb = r["rss_kib"] * 1024 / MB
        verdict = "met" if rss_mb <= TARGET_MB and r["mode"] == "caches" else (
            "NOT met" if r["mode"] == "caches" else "")
        print(f"{label:<22} {r['mode']:<9} {r['objects']:>7,} "
              f"{r['rss_import_kib'] * 1024 / MB:>8.1f}MB {rss_mb:>8.1f}MB "
              f"{r['hwm_kib'] * 1024 / MB:>6.1f}MB {per_pod:>7,.0f}B {verdict:>7}")
        if r.get("by_cache_kib"):
            print(" " * 23 + "by cache: " + ", ".join(
                f"{k} {v * 1024 / MB:.1f}MB" for k, v in r["by_cache_kib"].items()))


def main() -> int:
    """Record (or reuse a recording), then measure every case in its own process."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--recorded", type=Path, help="reuse this recording")
    ap.add_argument("--record-to", type=Path, help="keep the recording here")
    ap.add_argument("--shapes", default="one,many")
    ap.add_argument("--modes", default="baseline,caches")
    ap.add_argument("--one-at-a-time", action="store_true",
                    help="sync the caches one after another and print what each keeps")
    ap.add_argument("--child", choices=("caches", "baseline"), help=argparse.SUPPRESS)
    ap.add_argument("--shape", choices=tuple(SHAPES), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.shape, args.recorded, args.one_at_a_time)
        return 0
    recorded = args.recorded
    if recorded is None:
        from memory_record import record  # noqa: PLC0415  (only when recording)
        workdir = Path(tempfile.mkdtemp(prefix="bench-memory-"))
        recorded = args.record_to or workdir / "recorded.json"
        asyncio.run(record(recorded, workdir))
    rows = [run_case(mode, shape, recorded, args.one_at_a_time) for shape in args.shapes.split(",")
            for mode in args.modes.split(",")]
    report(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
