"""plan_replica: the manager's plan is the full plan, wherever it was computed."""

from __future__ import annotations

import asyncio

import pytest
from tests.unit.sim_helpers import engine_manifest, run_world

from omenative_controller import planning
from omenative_core.model import LifecycleConfig
from omenative_core.planner import plan
from omenative_sim.world import ClusterSpec, World


@pytest.mark.parametrize("off_loop_pods", [0, 10_000])
def test_plan_replica_is_the_full_plan_on_or_off_the_loop(
    off_loop_pods: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(planning, "OFF_LOOP_PODS", off_loop_pods)
    world = World(
        ClusterSpec(nodes=2, gpus_per_node=8, pod_start_seconds=1, pod_ready_seconds=1),
        engine_manifest(replicas=3),
        config=LifecycleConfig(),
    )
    run_world(world, 30)
    world.patch_replica({"spec": {"replicas": 4}})
    snap = world.snapshot()
    got, memo = asyncio.run(planning.plan_replica(snap, None))
    assert got == plan(snap) and got.actions
    again, memo = asyncio.run(planning.plan_replica(snap, memo))
    assert again == got and memo.reused == 1
