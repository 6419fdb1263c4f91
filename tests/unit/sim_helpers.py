"""Driving the simulator's World with the real planner, shared by the unit tests."""

from __future__ import annotations

from typing import Any

from omenative_core.model import Event
from omenative_core.planner import plan
from omenative_sim.world import World


def run_world(world: World, seconds: float, events: list[Event] | None = None) -> None:
    """Reconcile to a fixed point at each instant, advancing time for ``seconds``.

    Every plan's Events are appended to ``events`` when a list is given.
    """
    end = world.now + seconds
    while True:
        for _ in range(50):
            p = plan(world.snapshot())
            if events is not None:
                events.extend(p.events)
            if not p.actions:
                break
            world.apply(p)
        nxt = world.next_event_time()
        wake = world.now + p.requeue_after.total_seconds() if p.requeue_after else None
        times = [t for t in (nxt, wake) if t is not None and t <= end]
        if not times:
            world.advance(end)
            p = plan(world.snapshot())
            if events is not None:
                events.extend(p.events)
            if p.actions:
                world.apply(p)
                continue
            return
        world.advance(max(min(times), world.now))


def engine_manifest(*, workers: int = 1, replicas: int = 2, image: str = "img:1",
                    **spec: Any) -> dict[str, Any]:
    """An engine InferenceReplica: a leader and ``workers`` workers (or one ``default``
    pod when ``workers`` is 0), one GPU per pod."""
    tpl = {"spec": {"containers": [{"name": "ome-container", "image": image,
                                    "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    runners: list[dict[str, Any]] = (
        [{"name": "leader", "template": tpl},
         {"name": "worker", "size": workers, "template": tpl}]
        if workers else [{"name": "default", "template": tpl}]
    )
    return {"metadata": {"name": "chat-engine", "namespace": "ns"},
            "spec": {"component": "engine", "replicas": replicas, "runners": runners, **spec}}
