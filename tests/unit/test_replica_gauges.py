"""Instances by phase and rollout progress (``omenative_instances``,
``omenative_rollout_instances``): the values a dashboard reads after each pass the executor
applies, from a bring-up through an image rollout, and the series' bounds."""

from __future__ import annotations

import asyncio
from typing import Any

from sim_helpers import engine_manifest

from omenative_controller.executor import CreateErrorStore, Executor, PassContext
from omenative_controller.observability import Metrics
from omenative_core.model import LifecycleConfig
from omenative_core.model.plan import Plan, UpdateStatus
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus
from omenative_core.planner import plan
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
