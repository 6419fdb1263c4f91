"""The operations budget (issue 14): the planner keeps few enough operations open at once
that the status stays under etcd's request limit, and says so when it makes work wait.

Driven through the simulator with 800 Instances: more than the budget's bound
(``OPERATION_BOUND``), so a scale-up, a mass failure and a rollout each meet the gate.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from attrs import evolve
from sim_helpers import engine_manifest, run_world

from omenative_core.model import Event, LifecycleConfig, Plan
from omenative_core.model.status import InstanceStatus
from omenative_core.planner import plan
from omenative_core.status.budget import (
    FAILURE_MESSAGE_MAX,
    OPERATION_BOUND,
    STATUS_TARGET,
    Budget,
    bounded_text,
    row_cost,
    too_large_conditions,
)
from omenative_core.status.wire import go_json_bytes, status_to_json
from omenative_sim.world import ClusterSpec, World

N = 800
T = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)


def _world(**spec: Any) -> World:
    manifest = engine_manifest(workers=0, replicas=N, **spec)
    cluster = ClusterSpec(nodes=N, gpus_per_node=2, pod_start_seconds=2, pod_ready_seconds=2)
    return World(cluster, manifest, config=LifecycleConfig())


def _open(p: Plan) -> int:
    return sum(1 for r in p.status.instances if r.operation is not None)


def _bounded(events: tuple[Event, ...]) -> list[Event]:
    return [e for e in events if e.reason == "OperationsBounded"]


def test_the_bound_lets_a_big_fleet_move_but_not_all_at_once() -> None:
    assert 100 < OPERATION_BOUND < N


def test_a_scale_up_opens_at_most_the_bound_says_so_and_still_creates_every_instance() -> None:
    world = _world()
    first = plan(world.snapshot())
    assert _open(first) == OPERATION_BOUND
    [event] = _bounded(first.events)
    assert event.type == "Normal" and "status budget" in event.message
    assert len(go_json_bytes(status_to_json(first.status))) < STATUS_TARGET

    run_world(world, 600)
    assert world.status is not None and world.status.ready_replicas == N


def test_a_mass_failure_restarts_within_the_bound_and_recovers() -> None:
    world = _world()
    run_world(world, 600)
    for name in list(world.pods):
        world.fail_pod(name)
    p = plan(world.snapshot())
    assert 0 < _open(p) <= OPERATION_BOUND
    assert _bounded(p.events)

    run_world(world, 900)
    assert world.status is not None and world.status.ready_replicas == N


def test_a_rollout_with_a_wide_surge_waits_on_the_budget_and_completes() -> None:
    strategy = {"type": "SurgeThenDrain", "rollingUpdate": {"maxSurge": "50%"}}
    world = _world(lifecycle={"updateStrategy": strategy})
    run_world(world, 600)
    world.patch_replica(
        {"spec": {"runners": engine_manifest(workers=0, image="img:2")["spec"]["runners"]}}
    )
    p = plan(world.snapshot())
    assert 0 < _open(p) <= OPERATION_BOUND < N // 2
    assert p.status.rollout_hold is not None and p.status.rollout_hold.gate == "Budget"

    run_world(world, 1800)
    status = world.status
    assert status is not None
    assert status.updated_replicas == N and status.ready_replicas == N


def test_the_gate_charges_what_is_open_and_refuses_beyond_its_capacity() -> None:
    budget = Budget.of([], capacity=0)
    assert not budget.admit() and budget.deferred == 1
    budget = Budget.of([])
    assert budget.room == OPERATION_BOUND
    assert budget.admit(OPERATION_BOUND) and not budget.admit()
    assert budget.deferred == 1


def test_bounded_text_never_writes_more_than_the_limit_and_keeps_whole_characters() -> None:
    assert bounded_text("OOMKilled") == "OOMKilled"
    for char in ("a", "<", "\n", "é", "😀", "\u2028"):
        text = bounded_text(char * 5000)
        assert len(go_json_bytes(text)) - 2 <= FAILURE_MESSAGE_MAX
        assert len(go_json_bytes(text + char)) - 2 > FAILURE_MESSAGE_MAX
        assert set(text) == {char}


def test_a_steady_row_costs_nothing() -> None:
    assert row_cost(InstanceStatus(index=3, phase="Ready", running_revision="r-1")) == 0


def test_status_size_exceeded_is_kept_beside_the_others_and_cleared_by_the_next_write() -> None:
    world = _world()
    run_world(world, 600)
    snap = world.snapshot()
    status = snap.replica.status
    assert status is not None
    marked = too_large_conditions(status.conditions, 2_000_000, 1_572_864, T, 1)
    assert {c.type for c in marked} == {c.type for c in status.conditions} | {
        "StatusSizeExceeded"
    }
    [cond] = [c for c in marked if c.type == "StatusSizeExceeded"]
    assert cond.reason == "StatusTooLarge" and "2000000 bytes" in cond.message

    replica = evolve(snap.replica, status=evolve(status, conditions=marked))
    p = plan(evolve(snap, replica=replica))
    assert "StatusSizeExceeded" not in {c.type for c in p.status.conditions}


def test_a_scale_to_zero_drains_within_the_bound_down_to_omes_one_instance() -> None:
    world = _world()
    run_world(world, 600)
    world.patch_replica({"spec": {"replicas": 0}})  # OME: 0 runs one Instance
    p = plan(world.snapshot())
    assert 0 < _open(p) <= OPERATION_BOUND
    # bounded: by OME's scale-down wave (scaleDownPodBatchSize 100) before the status bound
    assert p.scale_down_wave is not None and p.scale_down_wave.deferred_instances > 0
    assert p.scale_down_wave.admitted_instances <= 100
    run_world(world, 1200)
    assert world.status is not None and [r.index for r in world.status.instances] == [0]
    assert world.pod_count == 1


def test_a_teardown_drains_within_the_bound_and_releases_the_finalizer() -> None:
    world = _world()
    run_world(world, 600)
    world.patch_replica({"metadata": {"deletionTimestamp": "2026-01-01T00:01:00Z"}})
    p = plan(world.snapshot())
    assert 0 < _open(p) <= OPERATION_BOUND
    run_world(world, 1200)
    assert world.pod_count == 0
    assert "ome.io/ir-teardown" not in (world.manifest["metadata"].get("finalizers") or [])
