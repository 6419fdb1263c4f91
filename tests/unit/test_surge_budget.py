"""SurgeThenDrain with no surge room at all (``maxSurge: 0``) says so instead of waiting.

A replacement is built before its source drains, so ``maxSurge: 0`` can never update an
Instance; a user who set it expects to be told, not to watch a rollout that never moves.
"""

from __future__ import annotations

from sim_helpers import engine_manifest, run_world

from omenative_core.model import Event, LifecycleConfig
from omenative_sim.world import ClusterSpec, World


def _world(max_surge: object) -> World:
    manifest = engine_manifest(replicas=2, lifecycle={"updateStrategy": {
        "type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": max_surge}}})
    return World(ClusterSpec(nodes=8, gpus_per_node=2, pod_start_seconds=2,
                             pod_ready_seconds=2.0), manifest, config=LifecycleConfig())


def _image(world: World, image: str) -> None:
    world.patch_replica({"spec": {"runners": engine_manifest(image=image)["spec"]["runners"]}})


def _failed_update(world: World) -> tuple[str, str, str]:
    status = world.status
    assert status is not None
    cond = next(c for c in status.conditions if c.type == "FailedUpdate")
    return cond.status, cond.reason, cond.message


def test_max_surge_zero_is_reported_once_and_touches_no_instance() -> None:
    world = _world(0)
    run_world(world, 60)
    before = {p.name: p.uid for p in world.snapshot().pods}
    _image(world, "img:2")
    events: list[Event] = []
    run_world(world, 300, events)
    status, reason, message = _failed_update(world)
    assert (status, reason) == ("True", "NoSurgeBudget")
    assert "maxSurge" in message and "RecreatePod" in message
    warnings = [e for e in events if e.reason == "NoSurgeBudget"]
    assert len(warnings) == 1 and warnings[0].type == "Warning"
    assert {p.name: p.uid for p in world.snapshot().pods} == before  # nothing churned
    hold = world.status.rollout_hold if world.status else None
    assert hold is not None and "maxSurge 0" in hold.reason


def test_raising_max_surge_clears_the_condition_and_rolls_out() -> None:
    world = _world(0)
    run_world(world, 60)
    _image(world, "img:2")
    run_world(world, 30)
    world.patch_replica({"spec": {"lifecycle": {"updateStrategy": {
        "rollingUpdate": {"maxSurge": 1}}}}})
    run_world(world, 300)
    assert _failed_update(world)[:2] == ("False", "UpdateAccepted")
    status = world.status
    assert status is not None and status.current_revision == status.update_revision
    assert status.updated_replicas == 2
