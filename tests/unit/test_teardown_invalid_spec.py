"""Teardown never depends on a valid spec (issue 30 item 5).

A replica scaled through ``/scale`` until its pod names would pass 63 characters has an
invalid spec; deleting it must still drain its pods and release ``ome.io/ir-teardown``.
A delete that cannot finish says why, with a condition and a Warning.
"""

from __future__ import annotations

from typing import Any

import pytest
from sim_helpers import engine_manifest, run_world

from omenative_core.model import Event, LifecycleConfig
from omenative_core.model.config import TeardownConfig
from omenative_core.planner import plan
from omenative_core.steps.teardown import FINALIZER
from omenative_sim.world import ClusterSpec, World

LONG = "x" * 43  # pods `{LONG}-engine-{index}-leader-0`: 61 chars up to index 9, 64 from 100


def _world(config: LifecycleConfig | None = None) -> World:
    manifest = engine_manifest(replicas=2)
    manifest["metadata"]["name"] = LONG
    return World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2,
                             pod_ready_seconds=2.0), manifest,
                 config=config or LifecycleConfig())


def _stamp(world: World) -> str:
    return world.time(world.now).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_deleting_a_replica_whose_spec_became_invalid_drains_and_releases() -> None:
    world = _world()
    run_world(world, 60)
    assert world.pod_count == 4
    world.patch_replica({"spec": {"replicas": 501}})  # /scale: pod names would be 64 chars
    p = plan(world.snapshot())
    assert any(c.type == "Ready" and c.status == "False" and "64 characters" in c.message
               for c in p.status.conditions)  # invalid: no pod is touched
    world.patch_replica({"metadata": {"deletionTimestamp": _stamp(world)}})
    events: list[Event] = []
    run_world(world, 60, events)
    assert world.pod_count == 0
    assert FINALIZER not in (world.manifest["metadata"].get("finalizers") or [])


def test_a_blocked_delete_says_why_with_a_condition_and_an_event() -> None:
    # no teardown deadline, no forceDelete: a pod stuck on a lost node holds the finalizer
    world = _world(LifecycleConfig(teardown=TeardownConfig(deadline=None)))
    run_world(world, 60)
    world.fail_node(next(iter(sorted({p.node for p in world.pods.values() if p.node}))))
    run_world(world, 400)  # the node is NotReady and its pods are being evicted
    world.patch_replica({"spec": {"replicas": 501}})
    world.patch_replica({"metadata": {"deletionTimestamp": _stamp(world)}})
    events: list[Event] = []
    run_world(world, 120, events)
    assert FINALIZER in (world.manifest["metadata"].get("finalizers") or [])
    status = world.status
    assert status is not None
    blocked = [c for c in status.conditions if c.type == "TeardownBlocked"]
    assert blocked and blocked[0].status == "True", status.conditions
    assert "stuck Terminating" in blocked[0].message
    assert any(e.reason == "TeardownBlocked" and e.type == "Warning" for e in events)


@pytest.mark.parametrize("patch", [
    {"runners": [{"name": "leader", "template": {"spec": {"containers": [
        {"name": "ome-container", "image": "img:1"}]}}}]},  # a leader without workers
    {"runners": []},
    {"lifecycle": {"updateStrategy": {"rollingUpdate": {"maxSurge": "x%"}}}},
    {"component": "bogus"},
])
def test_teardown_of_any_invalid_spec_drains_and_releases(patch: dict[str, Any]) -> None:
    world = _world()
    run_world(world, 60)
    world.patch_replica({"spec": patch})
    world.patch_replica({"metadata": {"deletionTimestamp": _stamp(world)}})
    run_world(world, 60)
    assert world.pod_count == 0
    assert FINALIZER not in (world.manifest["metadata"].get("finalizers") or [])
