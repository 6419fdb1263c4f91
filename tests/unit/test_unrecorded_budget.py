"""A scale-up whose status was held (``omenative_controller.coalesce``) is resumed from
its pods even when the status budget looks full, never rebuilt.

Seen at 1,250 Instances: a pass ended the Creates of Instances that turned Ready and
opened new ones up to the budget; its status waited (a readiness gain and fresh scale-ups
may), so the next pass loaded the older status, still charging the ended Creates. The
budget it built from those rows refused the adoption of the new pods
(``steps.revisions.unrecorded_create``), the rows stayed Pending, ``rebuilds`` deleted the
just-created pods (reason Rebuild) and the pass after restarted them ("pod lost").
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from sim_helpers import engine_manifest

from omenative_core.model.plan import DeletePod, UpdateStatus
from omenative_core.planner import plan as make_plan
from omenative_core.status.budget import OPERATION_ROW_BYTES, Budget
from omenative_core.steps import state as state_module
from omenative_sim.world import ClusterSpec, World


def _budget_of(ops: int) -> SimpleNamespace:
    """A ``Budget`` factory whose capacity holds ``ops`` operations."""
    return SimpleNamespace(of=lambda rows: Budget.of(rows, capacity=ops * OPERATION_ROW_BYTES))


def _bring_up(world: World) -> float:
    """Pass until every pod is Ready, each pass's status written; the time reached.

    The last status written still shows the Creates open: the pass that would end them
    is the one the test runs next.
    """
    t = 0.0
    for _ in range(40):
        snap = world.snapshot(t)
        if snap.pods and all(p.ready for p in snap.pods):
            return t
        world.apply(make_plan(snap), t)
        t += 1.0
    raise AssertionError("the pods never became Ready")


def test_a_held_scale_up_is_adopted_not_rebuilt_when_the_stale_rows_fill_the_budget(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(state_module, "Budget", _budget_of(2))
    world = World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2,
                              pod_ready_seconds=2), engine_manifest(workers=0, replicas=2))
    t = _bring_up(world)
    stored = world.snapshot(t).replica.status
    assert stored is not None
    assert all(r.operation is not None for r in stored.instances), "Creates still open"

    world.patch_replica({"spec": {"replicas": 3}}, t)
    first = make_plan(world.snapshot(t))
    opened = {r.index: r.operation for r in first.status.instances}
    assert opened[0] is None and opened[1] is None, "the ready Instances' Creates ended"
    assert opened[2] is not None, "the room the ended Creates left went to Instance 2"
    # the status is held (a readiness gain and fresh scale-ups may wait): pods only
    world.apply([a for a in first.actions if not isinstance(a, UpdateStatus)], t)
    created = {p.name: p.uid for p in world.snapshot(t).pods if p.labels}

    t += 0.5
    again = make_plan(world.snapshot(t))
    deleted = [a.name for a in again.actions if isinstance(a, DeletePod)]
    assert deleted == [], f"the just-created pods were deleted: {deleted}"
    rows = {r.index: r for r in again.status.instances}
    op = rows[2].operation
    assert op is not None and (op.type, op.reason) == ("Create", "ScaleUp")
    assert rows[2].incarnation == 1
    world.apply(again, t)
    t += 0.5
    third = make_plan(world.snapshot(t))
    assert not [a for a in third.actions if isinstance(a, DeletePod)], "no restart follows"
    world.apply(third, t)
    assert {p.name: p.uid for p in world.snapshot(t).pods if p.labels} == created
