"""``readySince`` lives only until an Instance is Available (issue 14, status size).

OME's steady Ready row carries no entry: the stamp is needed only to time the
``minReadySeconds`` window, so the planner drops it once the window has passed, and a
Ready row without one reads as Available.
"""

from __future__ import annotations

from sim_helpers import engine_manifest, run_world

from omenative_core.model import LifecycleConfig
from omenative_core.model.status import InferenceReplicaStatus
from omenative_core.planner import plan
from omenative_core.status.wire import go_json_bytes, status_to_json
from omenative_sim.world import ClusterSpec, World


def _world(min_ready: int) -> World:
    manifest = engine_manifest(replicas=2, minReadySeconds=min_ready)
    spec = ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2, pod_ready_seconds=2)
    return World(spec, manifest, config=LifecycleConfig())


def _status(world: World) -> InferenceReplicaStatus:
    assert world.status is not None
    return world.status


def test_ready_since_is_kept_through_the_window_and_dropped_once_available() -> None:
    world = _world(min_ready=60)
    run_world(world, 20)
    status = _status(world)
    assert [r.phase for r in status.instances] == ["Ready", "Ready"]
    assert all(r.ready_since is not None for r in status.instances)
    assert status.available_replicas == 0

    run_world(world, 60)
    status = _status(world)
    assert [r.ready_since for r in status.instances] == [None, None]
    assert status.available_replicas == 2
    assert all(r.available_pod_count == 2 for r in status.instances)
    assert b"readySince" not in go_json_bytes(status_to_json(status))

    # and at rest it stays that way: Available, no stamp, nothing to do
    p = plan(world.snapshot())
    assert p.actions == () and p.status == status


def test_with_no_window_a_ready_row_never_carries_ready_since() -> None:
    world = _world(min_ready=0)
    run_world(world, 20)
    status = _status(world)
    assert status.available_replicas == 2
    assert [r.ready_since for r in status.instances] == [None, None]


def test_a_restarted_instance_gets_a_new_window() -> None:
    world = _world(min_ready=60)
    run_world(world, 120)
    assert _status(world).available_replicas == 2
    world.fail_pod("chat-engine-engine-0-worker-0")
    run_world(world, 20)
    row = _status(world).instances[0]
    assert row.phase == "Ready" and row.ready_since is not None
    assert _status(world).available_replicas == 1
    run_world(world, 60)
    assert _status(world).instances[0].ready_since is None
    assert _status(world).available_replicas == 2
