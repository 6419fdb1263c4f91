"""PlanMemos: a big replica's memo is kept while it exists; small ones only the most recent."""

from __future__ import annotations

from tests.unit.sim_helpers import engine_manifest, run_world

from omenative_controller.memos import PlanMemos
from omenative_core.incremental import PlanMemo, plan_incremental
from omenative_core.model import LifecycleConfig
from omenative_core.planner import plan
from omenative_sim.world import ClusterSpec, World


def _memo() -> tuple[World, PlanMemo]:
    world = World(
        ClusterSpec(nodes=2, gpus_per_node=8, pod_start_seconds=1, pod_ready_seconds=1),
        engine_manifest(replicas=2), config=LifecycleConfig(),
    )
    run_world(world, 30)
    return world, plan_incremental(world.snapshot(), None)[1]


def test_small_replicas_keep_only_the_most_recent_memos_and_big_ones_keep_theirs() -> None:
    _, memo = _memo()
    memos = PlanMemos(large=32, small_kept=3)
    memos.put("ns/big", memo, 5000)
    for i in range(5):
        memos.put(f"ns/small-{i}", memo, 2)
    memos.put("ns/small-2", memo, 2)  # planned again: the most recent
    assert memos.get("ns/big") is memo
    assert [k for k in ("ns/small-0", "ns/small-1", "ns/small-3", "ns/small-4", "ns/small-2")
            if memos.get(k) is not None] == ["ns/small-3", "ns/small-4", "ns/small-2"]
    assert len(memos) == 4
    memos.pop("ns/big")
    memos.pop("ns/small-4")
    assert memos.get("ns/big") is None and memos.get("ns/small-4") is None
    assert len(memos) == 2


def test_a_replica_whose_memo_was_dropped_plans_the_same() -> None:
    """Dropping a small replica's memo costs a full pass, never a different plan."""
    world, memo = _memo()
    memos = PlanMemos(small_kept=0)
    memos.put("ns/r", memo, 2)
    assert memos.get("ns/r") is None
    snap = world.snapshot()
    assert plan_incremental(snap, memos.get("ns/r"))[0] == plan(snap)
