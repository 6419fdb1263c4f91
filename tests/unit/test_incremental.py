"""plan_incremental: a pass over unchanged inputs is answered from the memo, and only then."""

from __future__ import annotations

import json
from datetime import timedelta
from types import MappingProxyType

import pytest
from attrs import evolve
from tests.property.test_incremental_plan import changed_pod, flipped_pod
from tests.unit.sim_helpers import engine_manifest, run_world

from omenative_core.incremental import plan_incremental
from omenative_core.labels import LABEL_INCARNATION, LABEL_INSTANCE_INDEX, LABEL_POD_GROUP
from omenative_core.model import DeletePodGroup, LifecycleConfig, UpdateStatus
from omenative_core.model.config import AuditConfig
from omenative_core.model.status import InstanceOperation
from omenative_core.planner import plan
from omenative_sim.world import ClusterSpec, World


def _world(**spec: object) -> World:
    world = World(
        ClusterSpec(nodes=2, gpus_per_node=8, pod_start_seconds=1, pod_ready_seconds=1),
        engine_manifest(replicas=3, **spec),
        config=LifecycleConfig(),
    )
    run_world(world, 30)
    return world


def test_an_unchanged_replica_at_rest_reuses_the_plan_later() -> None:
    world = _world()
    first, memo = plan_incremental(world.snapshot(), None)
    assert not first.actions and memo.reused == 0
    world.advance(world.now + 100)
    snap = world.snapshot()
    again, memo = plan_incremental(snap, memo)
    assert memo.reused == 1
    assert again == plan(snap)


def test_a_changed_pod_or_spec_plans_afresh() -> None:
    world = _world()
    _, memo = plan_incremental(world.snapshot(), None)
    world.fail_pod(next(iter(world.pods)))
    snap = world.snapshot()
    after_fault, memo = plan_incremental(snap, memo)
    assert memo.reused == 0
    assert after_fault.actions and after_fault == plan(snap)
    run_world(world, 30)
    _, memo = plan_incremental(world.snapshot(), None)
    world.patch_replica({"spec": {"replicas": 4}})
    snap = world.snapshot()
    scaled, memo = plan_incremental(snap, memo)
    assert memo.reused == 0 and scaled.actions and scaled == plan(snap)


def test_a_deadline_that_falls_due_plans_afresh() -> None:
    """minReadySeconds: the plan at rest changes when the Instances become available."""
    world = _world(minReadySeconds=60)
    snap = world.snapshot()
    _, memo = plan_incremental(snap, None)
    assert memo.wakes, "waiting for minReadySeconds registers a wake-up time"
    due = memo.wakes[0]
    before = evolve(snap, now=due - timedelta(seconds=1))
    held, memo = plan_incremental(before, memo)
    assert memo.reused == 1 and held == plan(before)
    assert held.requeue_after == timedelta(seconds=1)
    at = evolve(snap, now=due)
    fresh, memo = plan_incremental(at, memo)
    assert memo.reused == 0 and fresh == plan(at)
    assert memo.rederived == 0, "no pod changed: the kept verdicts served the pass"
    assert fresh.status.available_replicas == 3 > held.status.available_replicas


def test_a_clock_that_went_back_plans_afresh() -> None:
    world = _world()
    snap = world.snapshot()
    _, memo = plan_incremental(snap, None)
    earlier = evolve(snap, now=snap.now - timedelta(seconds=5))
    _, memo = plan_incremental(earlier, memo)
    assert memo.reused == 0


def test_a_node_change_behind_a_live_view_plans_afresh() -> None:
    """The manager hands over its node cache as a live read-only view: a node that goes
    NotReady there must not be hidden by the memo holding the same view."""
    world = _world()
    live = dict(world.snapshot().nodes)
    snap = evolve(world.snapshot(), nodes=MappingProxyType(live))
    first, memo = plan_incremental(snap, None)
    assert not first.actions
    node = next(iter(live))
    live[node] = evolve(live[node], ready=False)
    again, memo = plan_incremental(snap, memo)
    assert memo.reused == 0
    assert again == plan(snap) and again.actions


def test_memos_share_the_snapshots_own_node_map_and_copy_a_live_view() -> None:
    """The manager hands every replica the same node map until a node changes: the memos
    of thousands of replicas keep that one map, not a copy each (a copy of 10,000 nodes
    is ~0.3 MB), while a live view of a cache is still copied."""
    world = _world()
    snap = world.snapshot()
    nodes = dict(snap.nodes)
    memos = [plan_incremental(evolve(snap, nodes=nodes), None)[1] for _ in range(2)]
    for memo in memos:
        assert memo.verdicts is not None
        assert any(x is nodes for x in memo.inputs)
        assert any(x is nodes for x in memo.verdicts.basis)
    live = MappingProxyType(nodes)
    _, memo = plan_incremental(evolve(snap, nodes=live), None)
    assert not any(x is live or x is nodes for x in memo.inputs)


def test_a_new_node_map_with_a_changed_node_plans_afresh() -> None:
    """A node change reaches the memo as a new map (the shell copies its cache again)."""
    world = _world()
    snap = world.snapshot()
    nodes = dict(snap.nodes)
    first, memo = plan_incremental(evolve(snap, nodes=nodes), None)
    assert not first.actions
    name = next(iter(nodes))
    changed = {**nodes, name: evolve(nodes[name], ready=False)}
    moved = evolve(snap, nodes=changed)
    again, memo = plan_incremental(moved, memo)
    assert memo.reused == 0
    assert again == plan(moved)


@pytest.mark.parametrize("change", ["gone", "restarted", "unready", "unschedulable"])
def test_one_changed_pod_rederives_only_its_instance(change: str) -> None:
    """The other Instances' verdicts are reused; the changed one's is not (a stale one
    would hide a lost pod or a restarted container from the plan)."""
    world = _world()
    snap = world.snapshot()
    _, memo = plan_incremental(snap, None)
    assert memo.verdicts is not None and len(memo.verdicts.steady) == 3
    pods = list(snap.pods)
    pod = changed_pod(pods[0], change)
    if pod is None:
        del pods[0]
    else:
        pods[0] = pod
    after = evolve(snap, pods=tuple(pods))
    got, memo = plan_incremental(after, memo)
    assert memo.rederived == 1
    assert got == plan(after)
    if change in ("gone", "restarted"):
        assert any(not isinstance(a, UpdateStatus) for a in got.actions), "the Instance acts"


def test_a_spec_change_rederives_every_instance() -> None:
    world = _world()
    _, memo = plan_incremental(world.snapshot(), None)
    world.patch_replica({"spec": {"replicas": 4}})
    snap = world.snapshot()
    got, memo = plan_incremental(snap, memo)
    assert memo.rederived is None and got == plan(snap)


def test_reordered_pods_regroup_every_instance() -> None:
    """The kept pod lists hold the snapshot's order; a shell that reorders its pods gets a
    full regrouping, never a list in the wrong order."""
    world = _world()
    snap = world.snapshot()
    _, memo = plan_incremental(snap, None)
    pods = list(reversed(snap.pods))
    pods[0] = changed_pod(pods[0], "unready") or pods[0]
    after = evolve(snap, pods=tuple(pods))
    got, memo = plan_incremental(after, memo)
    assert memo.rederived is None and got == plan(after)


@pytest.mark.parametrize(
    ("change", "drop"), [("serving_off", 1), ("containers_unready", 1), ("unready", 0)]
)
def test_the_kept_totals_follow_a_flip_and_its_undoing(change: str, drop: int) -> None:
    """A pod change that takes an Instance out of rotation (its gate, its readiness)
    moves the status counters in the pass that reuses the kept row totals
    (``steps.totals``), the next passes (the same changed pod, the status as written)
    keep them moved, and undoing it moves them back: a total kept stale from the pass
    before fails here. (A pod that only lost Ready keeps its gate and ready containers: it
    still serves.)"""
    world = _world()
    snap = world.snapshot()
    rest, memo = plan_incremental(snap, None)
    assert memo.totals is not None and not memo.totals.odd, "at rest every row is plain"
    pods = list(snap.pods)
    pods[0] = flipped_pod(pods[0], change) or pods[0]
    after = evolve(snap, pods=tuple(pods))
    flipped, memo = plan_incremental(after, memo)
    assert memo.rederived == 1 and flipped == plan(after)
    assert flipped.status.serving_replicas == rest.status.serving_replicas - drop
    assert flipped.status != rest.status
    # the status written, read back: the flipped row is now a fixed point, still odd
    written = evolve(after.replica, status=flipped.status)
    for seconds in (1, 2):
        later = evolve(after, replica=written, now=after.now + timedelta(seconds=seconds))
        again, memo = plan_incremental(later, memo)
        assert again == plan(later)
        assert again.status.serving_replicas == flipped.status.serving_replicas
    undone = evolve(snap, now=later.now + timedelta(seconds=1))
    back, memo = plan_incremental(undone, memo)
    assert memo.rederived == 1 and back == plan(undone)
    assert back.status.serving_replicas == rest.status.serving_replicas


def test_a_rewritten_row_leaves_its_old_pod_group_an_orphan() -> None:
    """A row read back with a new incarnation, its pods moved on with it, leaves its old
    attempt's PodGroup to no row or pod: the pass that reuses the kept row totals finds it
    from the written row (``native_gang.cleanup``) and deletes it, as a full pass does."""
    world = _world()
    snap = world.snapshot()
    _, memo = plan_incremental(snap, None)
    old = "chat-engine-0-1"
    assert old in snap.pod_groups
    status = snap.replica.status
    assert status is not None
    rows = list(status.instances)
    rows[0] = evolve(rows[0], incarnation=2)
    moved = {LABEL_INCARNATION: "2", LABEL_POD_GROUP: "chat-engine-0-2"}
    pods = tuple(
        evolve(p, labels={**p.labels, **moved}) if p.labels[LABEL_INSTANCE_INDEX] == "0" else p
        for p in snap.pods
    )
    replica = evolve(snap.replica, status=evolve(status, instances=tuple(rows)))
    after = evolve(snap, pods=pods, replica=replica)
    got, memo = plan_incremental(after, memo)
    assert memo.rederived == 1 and got == plan(after)
    assert [a.name for a in got.actions if isinstance(a, DeletePodGroup)] == [old]


def test_a_retry_block_opened_in_a_pass_is_cleared_by_a_later_steady_row() -> None:
    """Instance 0's attempt misses its deadline (a RetryBlock opens) while Instance 1 runs
    steady on the same revision: a full pass clears the block when it reaches Instance 1
    (``repair.settled``). A pass on the kept verdicts skips Instance 1, so it is planned
    again in full; before, its status kept the block the full plan does not."""
    world = _world()
    settled = world.snapshot()
    prev = settled.replica.status
    assert prev is not None
    row = prev.instances[0]
    deadline = settled.now + timedelta(seconds=60)
    creating = evolve(
        row,
        phase="Creating",
        running_revision="",
        serving_pod_count=0,
        available_pod_count=0,
        operation=InstanceOperation(
            id="create-0", type="Create", step="CreatePods", started_at=settled.now,
            last_progress_at=settled.now, deadline=deadline,
            target_revision=row.target_revision, reason="ScaleUp",
        ),
    )
    status = evolve(prev, instances=(creating, *prev.instances[1:]))
    pods = tuple(
        evolve(p, conditions={**p.conditions, "Ready": "False", "ome.io/serving": "False"})
        if p.labels[LABEL_INSTANCE_INDEX] == "0" else p
        for p in settled.pods
    )
    snap = evolve(settled, replica=evolve(settled.replica, status=status), pods=pods)
    _, memo = plan_incremental(snap, None)
    late = evolve(snap, now=deadline + timedelta(seconds=1))
    got, memo = plan_incremental(late, memo)
    assert got == plan(late)
    assert got.status.instances[0].phase == "Failed" and not got.status.retry_blocks


def _request_migration(world: World, n: int, index: int) -> None:
    request = {"schemaVersion": "v1", "instance": index, "reason": "test",
               "requested_by": "unit"}
    world.set_annotation(
        f"ome.io/migration-request-v1-{n:08d}-0000-0000-0000-000000000000", json.dumps(request)
    )


def test_a_migration_over_the_window_cap_fails_at_once_in_both_plans() -> None:
    """``maxMigrationsPerWindow`` 1: a second request within the window fails at once with
    OME's ``RateLimited`` (it never waits for the window), and the incremental plan says so
    as the full plan does."""
    audit = AuditConfig(max_migrations_per_window=1, window=timedelta(seconds=120))
    world = World(
        ClusterSpec(nodes=4, gpus_per_node=8, pod_start_seconds=1, pod_ready_seconds=1),
        engine_manifest(replicas=2),
        config=LifecycleConfig(audit=audit),
    )
    run_world(world, 30)
    _request_migration(world, 1, 0)
    run_world(world, 30)  # the first migration opens and completes
    _request_migration(world, 2, 1)
    snap = world.snapshot()
    full = plan(snap)
    incremental, _ = plan_incremental(snap, None)
    assert incremental == full
    assert any(e.reason == "RateLimited" for e in full.events), full.events
    assert not any(e.reason == "MigrationRequestAccepted" for e in full.events)
