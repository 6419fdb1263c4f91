"""Stuck deletions as OME's "recover stuck deletions" runbook expects them.

A pod stuck Terminating is force-deleted on the first evidence that its node is dead
(``node-gone``, ``node-unreachable-taint``, ``node-not-ready``), never on a Ready node and
never with finalizers (``PodDeleteBlockedByFinalizer`` instead); a delete draining past its
deadline says so (``DrainOverdue`` condition, one Warning); a teardown without a deadline
reports ``TeardownBlocked`` while pods remain, with OME's manual escape.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from attrs import evolve
from sim_helpers import engine_manifest, run_world

from omenative_core.model import Event, LifecycleConfig
from omenative_core.model.config import ForceDeleteConfig, TeardownConfig
from omenative_core.model.observed import NodeView, PodView, Snapshot
from omenative_core.model.plan import DeletePod, Plan
from omenative_core.planner import plan
from omenative_core.views import node_view_from_json, pod_view_from_json
from omenative_sim.world import ClusterSpec, World

FORCE = ForceDeleteConfig(overdue_slack=timedelta(minutes=2),
                          node_unreachable_threshold=timedelta(minutes=5))


def _world(config: LifecycleConfig) -> World:
    world = World(ClusterSpec(nodes=4, gpus_per_node=1, pod_start_seconds=2,
                              pod_ready_seconds=2.0),
                  engine_manifest(workers=0, replicas=2), config=config)
    run_world(world, 60)
    return world


def _stuck_teardown() -> tuple[Snapshot, PodView]:
    """A deleted replica whose pod is stuck Terminating on a node that stopped (the sim
    has no forceDelete, so nothing removes it)."""
    world = _world(LifecycleConfig(teardown=TeardownConfig(deadline=None)))
    node = sorted({p.node for p in world.pods.values() if p.node})[0]
    world.fail_node(node)
    run_world(world, 60)
    world.patch_replica({"metadata": {"deletionTimestamp": "2026-01-01T00:03:00Z"}})
    run_world(world, 30)
    snap = world.snapshot()
    (stuck,) = [p for p in snap.pods if p.node_name == node and p.terminating]
    return snap, stuck


def _with(snap: Snapshot, stuck: PodView, *, node: NodeView | None,
          minutes_after_delete: float = 10, **pod: object) -> Plan:
    """Plan the snapshot with forceDelete on, the stuck pod's node replaced (None: gone)."""
    assert stuck.node_name is not None and stuck.deletion_timestamp is not None
    nodes = {k: v for k, v in snap.nodes.items() if k != stuck.node_name}
    if node is not None:
        nodes[stuck.node_name] = node
    pods = tuple(evolve(p, **pod) if p.uid == stuck.uid else p for p in snap.pods)
    config = evolve(snap.config, force_delete=FORCE)
    now = stuck.deletion_timestamp + timedelta(minutes=minutes_after_delete)
    return plan(evolve(snap, nodes=nodes, pods=pods, config=config, now=now))


def _forced(p: Plan) -> list[str]:
    return [a.name for a in p.actions if isinstance(a, DeletePod) and a.force]


def _events(p: Plan, reason: str) -> list[Event]:
    return [e for e in p.events if e.reason == reason]


def test_a_pod_whose_node_object_is_gone_is_force_deleted_with_that_evidence() -> None:
    snap, stuck = _stuck_teardown()
    p = _with(snap, stuck, node=None)
    assert _forced(p) == [stuck.name]
    (event,) = _events(p, "PodForceDeleted")
    assert event.type == "Warning"
    assert f"pod {stuck.name} on node {stuck.node_name} (evidence=node-gone, 10m" in \
        event.message
    assert event.message.startswith("OMENative component=engine instance=")


def test_the_unreachable_taint_counts_from_when_it_was_added() -> None:
    snap, stuck = _stuck_teardown()
    assert stuck.deletion_timestamp is not None
    now = stuck.deletion_timestamp + timedelta(minutes=10)
    tainted = NodeView(name=str(stuck.node_name), ready=None,
                       not_ready_since=now - timedelta(minutes=1),  # too recent alone
                       unreachable_since=now - timedelta(minutes=6))
    p = _with(snap, stuck, node=tainted)
    assert _forced(p) == [stuck.name]
    assert "evidence=node-unreachable-taint" in _events(p, "PodForceDeleted")[0].message
    # a taint younger than nodeUnreachableThreshold is no evidence yet
    young = evolve(tainted, unreachable_since=now - timedelta(minutes=1))
    assert _forced(_with(snap, stuck, node=young)) == []


def test_a_ready_node_is_never_dead_whatever_its_taints() -> None:
    snap, stuck = _stuck_teardown()
    assert stuck.deletion_timestamp is not None
    ready = NodeView(name=str(stuck.node_name), ready=True,
                     unreachable_since=stuck.deletion_timestamp - timedelta(hours=1))
    p = _with(snap, stuck, node=ready, minutes_after_delete=60)
    assert _forced(p) == [] and not _events(p, "PodForceDeleted")


def test_not_overdue_yet_waits_for_the_slack() -> None:
    snap, stuck = _stuck_teardown()
    p = _with(snap, stuck, node=None, minutes_after_delete=1)  # slack is 2m
    assert _forced(p) == []
    assert p.requeue_after is not None and p.requeue_after <= timedelta(minutes=1)


def test_a_pod_with_finalizers_is_reported_never_force_deleted() -> None:
    snap, stuck = _stuck_teardown()
    p = _with(snap, stuck, node=None, finalizers=("example.com/cleanup",))
    assert _forced(p) == []
    (event,) = _events(p, "PodDeleteBlockedByFinalizer")
    assert event.type == "Warning"
    assert stuck.name in event.message and "[example.com/cleanup]" in event.message
    assert "finalizer owner must resolve it" in event.message
    # before the slack has passed nothing is reported
    early = _with(snap, stuck, node=None, minutes_after_delete=1,
                  finalizers=("example.com/cleanup",))
    assert not _events(early, "PodDeleteBlockedByFinalizer")


def test_a_teardown_without_a_deadline_reports_blocked_with_omes_escape() -> None:
    world = _world(LifecycleConfig(teardown=TeardownConfig(deadline=None)))
    world.patch_replica({"metadata": {"deletionTimestamp": "2026-01-01T00:01:00Z"}})
    p = plan(world.snapshot())  # an ordinary teardown: the pods are still there
    (event,) = _events(p, "TeardownBlocked")
    assert event.type == "Warning"
    assert event.message.startswith("teardown blocked: 2 owned pod(s) and 0 owned PodGroup(s)")
    assert "(no lifecycle.teardown.deadline configured)" in event.message
    assert ("manual escape: kubectl patch inferencereplica chat-engine -n ns --type=merge -p "
            """'{"metadata":{"finalizers":null}}'""") in event.message
    blocked = [c for c in p.status.conditions if c.type == "TeardownBlocked"]
    assert blocked and blocked[0].status == "True"
    # once the pods are gone the finalizer goes and nothing more is reported
    events: list[Event] = []
    run_world(world, 120, events)
    assert "ome.io/ir-teardown" not in (world.manifest["metadata"].get("finalizers") or [])


def test_a_passed_teardown_deadline_names_the_pods_left_and_the_escape() -> None:
    world = _world(LifecycleConfig(teardown=TeardownConfig(deadline=timedelta(minutes=1))))
    node = sorted({p.node for p in world.pods.values() if p.node})[0]
    world.fail_node(node)
    run_world(world, 60)
    world.patch_replica({"metadata": {"deletionTimestamp": "2026-01-01T00:02:00Z"}})
    events: list[Event] = []
    run_world(world, 300, events)
    (event,) = [e for e in events if e.reason == "TeardownDeadlineExceeded"]
    assert event.message.startswith("teardown deadline 1m0s exceeded (1 owned pod(s) observed)")
    assert "manual escape: kubectl patch inferencereplica chat-engine -n ns" in event.message


def test_a_drain_past_its_deadline_is_overdue_once_and_the_condition_says_so() -> None:
    config = LifecycleConfig(instance_ready_timeout=timedelta(minutes=2),
                             teardown=TeardownConfig(deadline=None))
    world = _world(config)
    assert world.status is not None
    assert {c.type: c.reason for c in world.status.conditions}["DrainOverdue"] == \
        "DrainsWithinDeadline"
    node = sorted({p.node for p in world.pods.values() if p.node})[0]
    world.fail_node(node)
    run_world(world, 60)
    world.patch_replica({"spec": {"replicas": 0}})  # the pod on the dead node never goes
    events: list[Event] = []
    run_world(world, 600, events)
    overdue = [e for e in events if e.reason == "DrainOverdue"]
    assert len(overdue) == 1 and overdue[0].type == "Warning", overdue
    assert "drain overdue by" in overdue[0].message
    assert "1 pod(s) still Terminating or draining" in overdue[0].message
    assert world.status is not None
    cond = {c.type: c for c in world.status.conditions}["DrainOverdue"]
    assert (cond.status, cond.reason) == ("True", "DrainsOverdue")


def test_the_views_read_the_unreachable_taint_and_pod_finalizers() -> None:
    node = node_view_from_json({
        "metadata": {"name": "gpu-node-3"},
        "spec": {"taints": [
            {"key": "node.kubernetes.io/not-ready", "effect": "NoExecute",
             "timeAdded": "2026-09-28T10:00:00Z"},
            {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute",
             "timeAdded": "2026-09-28T10:02:47Z"}]},
        "status": {"conditions": [{"type": "Ready", "status": "Unknown",
                                   "lastTransitionTime": "2026-09-28T10:02:40Z"}]}})
    assert node.unreachable_since == datetime(2026, 9, 28, 10, 2, 47, tzinfo=UTC)
    assert node_view_from_json({"metadata": {"name": "n"}}).unreachable_since is None
    pod = pod_view_from_json({"metadata": {"name": "p", "uid": "u",
                                           "finalizers": ["example.com/cleanup"]}})
    assert pod.finalizers == ("example.com/cleanup",)
