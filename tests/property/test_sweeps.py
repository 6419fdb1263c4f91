"""Exhaustive sweeps over small sizes: every start and target count, gang size and strategy.

Beside the random state machine, these walk every small case (as LWS's planner safety test
does) from a converged replica through a change of image and replica count, checking the
step invariants at every plan, the surge-then-drain floor and ceiling, and convergence
within a bound.
"""

from __future__ import annotations

import itertools
from datetime import timedelta
from typing import Any

import pytest

from omenative_core.model import LifecycleConfig, Plan, Snapshot, UpdateStatus
from omenative_core.planner import plan as make_plan
from omenative_core.policy import desired_instances, resolve_budget
from omenative_sim.world import ClusterSpec, World
from tests.property.invariants import (
    ALL_STEP_INVARIANTS,
    converged,
    serving_floor,
    surge_ceiling,
)

START, READY = 3.0, 2.0
BOUND_SECONDS = 3600.0


def _manifest(workers: int, replicas: int, image: str, strategy: str) -> dict[str, Any]:
    tpl = {
        "spec": {
            "containers": [
                {
                    "name": "ome-container",
                    "image": image,
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            ]
        }
    }
    runners: list[dict[str, Any]] = (
        [{"name": "leader", "template": tpl}, {"name": "worker", "size": workers, "template": tpl}]
        if workers
        else [{"name": "default", "template": tpl}]
    )
    return {
        "metadata": {"name": "sweep", "namespace": "default"},
        "spec": {
            "component": "engine",
            "replicas": replicas,
            "runners": runners,
            "lifecycle": {"updateStrategy": {"type": strategy}},
        },
    }


def _drive(world: World, on_plan: Any, until: float) -> None:
    while world.now <= until:
        for _ in range(50):
            snap = world.snapshot()
            p = make_plan(snap)
            on_plan(snap, p)
            if not p.actions:
                break
            world.apply(p)
        nxt = world.next_event_time()
        wake = world.now + p.requeue_after.total_seconds() if p.requeue_after else None
        times = [t for t in (nxt, wake) if t is not None]
        if not times:
            return
        world.advance(max(min(times), world.now + 0.5))


CASES = [
    (workers, start, target, strategy)
    for workers, start, target, strategy in itertools.product(
        (0, 1, 3), range(4), range(4), ("SurgeThenDrain", "RecreatePod")
    )
]


@pytest.mark.parametrize(("workers", "start", "target", "strategy"), CASES)
def test_change_image_and_count(workers: int, start: int, target: int, strategy: str) -> None:
    """From ``start`` Ready Instances, a new image and ``replicas: target`` converge safely."""
    pods_per = 1 + workers
    most = max(desired_instances(start), desired_instances(target))  # 0 runs one (OME)
    surge = resolve_budget("25%", most)
    nodes = (most + max(surge, 1)) * pods_per  # 1 GPU per pod, 1 GPU per node
    world = World(
        ClusterSpec(nodes=nodes, gpus_per_node=1, pod_start_seconds=START, pod_ready_seconds=READY),
        _manifest(workers, start, "img:1", strategy),
        config=LifecycleConfig(instance_ready_timeout=timedelta(minutes=5)),
    )

    def check(snap: Snapshot, p: Plan) -> None:
        for inv in ALL_STEP_INVARIANTS:
            inv(snap, p)
        spec = snap.replica.spec
        desired = desired_instances(spec.replicas)
        surge_ceiling(snap, p, resolve_budget("25%", desired))
        assert (
            not p.actions
            or isinstance(p.actions[0], UpdateStatus)
            or all(
                a.kind
                in (
                    "CreatePod",
                    "CreatePodGroup",
                    "CreateRevision",
                    "SetServingGate",
                    "SetFinalizer",
                    "CreateObject",
                )
                and (a.kind != "SetServingGate" or getattr(a, "value", True))
                for a in p.actions
            )
        ), "a destructive plan must open with its status write"

    _drive(world, check, until=BOUND_SECONDS)
    snap = world.snapshot()
    converged(snap, make_plan(snap))

    samples: list[tuple[float, int]] = []

    def watch(snap: Snapshot, p: Plan) -> None:
        check(snap, p)
        samples.append((world.now, p.status.serving_replicas))

    t0 = world.now
    tpl_patch = _manifest(workers, target, "img:2", strategy)["spec"]
    world.patch_replica({"spec": {"runners": tpl_patch["runners"], "replicas": target}})
    _drive(world, watch, until=t0 + BOUND_SECONDS)
    snap = world.snapshot()
    converged(snap, make_plan(snap))
    if strategy == "SurgeThenDrain":
        # invariant 3: with room to surge, serving never drops below what stays desired
        serving_floor(samples, min(start, target), since=t0)
    assert world.now - t0 < BOUND_SECONDS, "the change did not finish within the bound"
