"""Instances by phase and rollout progress (``omenative_instances``,
``omenative_rollout_instances``): the values a dashboard reads after each pass the executor
applies, from a bring-up through an image rollout, and the series' bounds."""

from __future__ import annotations

import asyncio
import tracemalloc
from typing import Any

from prometheus_client import CollectorRegistry, Gauge, generate_latest
from sim_helpers import engine_manifest

from omenative_controller.executor import CreateErrorStore, Executor, PassContext
from omenative_controller.observability import Metrics
from omenative_controller.replica_gauges import PROGRESS_STATES
from omenative_core.model import LifecycleConfig
from omenative_core.model.plan import Plan, UpdateStatus
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus
from omenative_core.phases import Phase
from omenative_core.planner import plan
from omenative_core.policy import desired_instances
from omenative_sim.world import ClusterSpec, World

IDENT = {"namespace": "ns", "replica": "chat-engine", "isvc": "chat", "component": "engine"}


class FakeClient:
    """Answers every write with its body (the executor's status PUT included)."""

    async def replace(self, res: Any, name: str, body: Any, ns: Any = None, **kw: Any) -> Any:
        return body

    async def create(self, res: Any, body: Any, ns: Any = None, **kw: Any) -> Any:
        return body

    async def patch(self, res: Any, name: str, body: Any, ns: Any = None, **kw: Any) -> Any:
        return body

    async def delete(self, res: Any, name: str, ns: Any = None, **kw: Any) -> Any:
        return {}


def _raw(manifest: dict[str, Any]) -> dict[str, Any]:
    meta = {**manifest["metadata"], "labels": {"ome.io/inferenceservice": "chat"}}
    return {**manifest, "metadata": meta}


def _pass(world: World, executor: Executor) -> bool:
    """One pass: plan from the world, apply it through the executor and to the world."""
    snap = world.snapshot()
    p = plan(snap)
    ctx = PassContext(key="ns/chat-engine", namespace="ns", name="chat-engine",
                      raw=_raw(world.manifest), observed_status=snap.replica.status)
    asyncio.run(executor.apply(evolve_actions(p), ctx))
    if p.actions:
        world.apply(p)
        return True
    return False


def evolve_actions(p: Plan) -> Plan:
    """The plan with only its status write: the world performs the rest."""
    return Plan(actions=tuple(a for a in p.actions if type(a) is UpdateStatus), status=p.status)


def _until(world: World, executor: Executor, seconds: float,
           seen: list[dict[str, float]], m: Metrics) -> None:
    end = world.now + seconds
    while world.now <= end:
        acted = _pass(world, executor)
        seen.append(_read(m))
        if not acted:
            nxt = world.next_event_time()
            if nxt is None or nxt > end:
                return
            world.advance(nxt)


def _read(m: Metrics) -> dict[str, float]:
    out = {}
    for family in m.registry.collect():
        for s in family.samples:
            if s.name in ("omenative_instances", "omenative_rollout_instances"):
                assert {k: s.labels[k] for k in IDENT} == IDENT
                out[s.labels.get("phase") or s.labels["state"]] = s.value
    return out


def test_a_bring_up_and_an_image_rollout_as_the_gauges_show_them() -> None:
    world = World(ClusterSpec(nodes=6, gpus_per_node=2, pod_start_seconds=3,
                              pod_ready_seconds=4.0),
                  engine_manifest(replicas=2, workers=1), config=LifecycleConfig())
    m = Metrics()
    executor = Executor(FakeClient(), CreateErrorStore(), metrics=m)  # type: ignore[arg-type]
    seen: list[dict[str, float]] = []
    _until(world, executor, 60, seen, m)
    # the first pass: two Instances being created, none ready, two desired
    assert seen[0]["Creating"] == 2 and seen[0]["Ready"] == 0 and seen[0]["desired"] == 2
    # every phase is a series (0 where none), so a stacked panel has no gaps
    assert set(seen[0]) == {"Pending", "Creating", "Ready", "Updating", "Restarting",
                            "Migrating", "Failed", "Deleting", "desired", "updated",
                            "updated_ready", "ready", "serving"}
    done = seen[-1]
    assert done["Ready"] == 2 and done["Creating"] == 0
    assert done["ready"] == done["serving"] == done["updated_ready"] == 2
    # a new image: the rollout shows Instances updating, fewer updated than desired, until all
    world.patch_replica({"spec": {"runners": [
        {**r, "template": {"spec": {"containers": [
            {**r["template"]["spec"]["containers"][0], "image": "img:2"}]}}}
        for r in world.manifest["spec"]["runners"]]}})
    seen = []
    _until(world, executor, 120, seen, m)
    assert any(s["Updating"] > 0 for s in seen)
    assert any(s["updated_ready"] < s["desired"] == 2 for s in seen)
    assert seen[-1]["updated_ready"] == seen[-1]["desired"] == 2
    assert seen[-1]["Ready"] == 2 and seen[-1]["Updating"] == 0


def _status(*phases: str, **counts: int) -> InferenceReplicaStatus:
    return InferenceReplicaStatus(
        instances=tuple(InstanceStatus(index=i, phase=p) for i, p in enumerate(phases)),
        **counts)


def _ctx(name: str, replicas: int | None) -> PassContext:
    raw = {"metadata": {"name": name, "namespace": "ns"},
           "spec": {"component": "engine", "replicas": replicas}}
    return PassContext(key=f"ns/{name}", namespace="ns", name=name, raw=raw)


def test_series_are_per_replica_and_go_with_it_or_with_the_lead() -> None:
    m = Metrics()
    m.replicas.observe(_ctx("a", 3), _status("Ready", "Ready", "Failed", ready_replicas=2),
                       changed=True)
    m.replicas.observe(_ctx("b", 0), _status("Deleting"), changed=True)
    assert m.sample("omenative_instances", {"replica": "a", "phase": "Ready"}) == 2
    assert m.sample("omenative_instances", {"replica": "a", "phase": "Failed"}) == 1
    assert m.sample("omenative_rollout_instances", {"replica": "a", "state": "desired"}) == 3
    assert m.sample("omenative_rollout_instances", {"replica": "a", "state": "ready"}) == 2
    # OME: replicas 0 (or unset) runs one Instance; a standalone replica has isvc=""
    assert m.sample("omenative_rollout_instances",
                    {"replica": "b", "isvc": "", "state": "desired"}) == 1
    # 8 phases + 5 progress states per replica, whatever its Instance count
    per = {(s.labels["replica"]) for f in m.registry.collect() for s in f.samples
           if s.name.startswith(("omenative_instances", "omenative_rollout_instances"))}
    assert per == {"a", "b"}
    assert sum(1 for f in m.registry.collect() for s in f.samples
               if s.name in ("omenative_instances", "omenative_rollout_instances")) == 26
    # an unchanged status is not counted again (the series already say it)
    m.replicas.observe(_ctx("a", 3), _status("Ready", "Ready", "Ready"), changed=False)
    assert m.sample("omenative_instances", {"replica": "a", "phase": "Failed"}) == 1
    m.forget_status_bytes("ns", "a")
    assert m.sample("omenative_instances", {"replica": "a"}) == 0
    assert {s.labels["replica"] for f in m.registry.collect() for s in f.samples
            if s.name == "omenative_instances"} == {"b"}
    m.stopped_leading()
    assert not [s for f in m.registry.collect() for s in f.samples
                if s.name in ("omenative_instances", "omenative_rollout_instances")]


def _as_gauge_children(rows: list[tuple[PassContext, InferenceReplicaStatus]]) -> bytes:
    """The exposition the series had as ``prometheus_client`` Gauge children (until issue
    36): the collector must print exactly this."""
    r = CollectorRegistry()
    labels = ["namespace", "replica", "isvc", "component"]
    inst = Gauge("omenative_instances", "", [*labels, "phase"], registry=r)
    roll = Gauge("omenative_rollout_instances", "", [*labels, "state"], registry=r)
    for ctx, status in rows:
        ident = (ctx.namespace, ctx.name, "", ctx.raw["spec"].get("component") or "")
        for phase in Phase:
            inst.labels(*ident, phase.value).set(
                sum(1 for i in status.instances if i.phase == phase.value))
        counts = (desired_instances(ctx.raw["spec"].get("replicas")), status.updated_replicas,
                  status.updated_ready_replicas, status.ready_replicas,
                  status.serving_replicas)
        for state, value in zip(PROGRESS_STATES, counts, strict=True):
            roll.labels(*ident, state).set(value)
    return generate_latest(r)


def _samples_only(text: bytes) -> list[bytes]:
    return [line for line in text.splitlines() if not line.startswith(b"#")]


def test_the_scrape_prints_what_the_gauge_children_printed() -> None:
    rows = [(_ctx("a", 3), _status("Ready", "Creating", "Failed", ready_replicas=1,
                                   updated_replicas=2)),
            (_ctx("b", None), _status("Deleting", serving_replicas=1)),
            (_ctx("c", 2), _status("Updating", "Updating", updated_ready_replicas=0))]
    m = Metrics()
    for ctx, status in rows:
        m.replicas.observe(ctx, status, changed=True)
    ours = [line for line in _samples_only(generate_latest(m.registry))
            if line.startswith((b"omenative_instances{", b"omenative_rollout_instances{"))]
    assert ours == _samples_only(_as_gauge_children(rows))
    assert len(ours) == 3 * 13


def test_a_replicas_series_cost_one_row_not_thirteen_gauge_children() -> None:
    # issue 36: 13 Gauge children were 9.3 KB a replica, 23 MB for 2,500 small replicas
    m = Metrics()
    ctxs = [_ctx(f"r-{i}", 1) for i in range(500)]
    status = _status("Ready", ready_replicas=1)
    m.replicas.observe(_ctx("warm", 1), status, changed=True)
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        for ctx in ctxs:
            m.replicas.observe(ctx, status, changed=True)
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(d.size_diff for d in after.compare_to(before, "filename"))
    assert 0 < grown / 500 < 1_000  # bytes a replica (the row: ~250)
    assert len(m.replicas) == 501
