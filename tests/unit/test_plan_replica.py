"""plan_replica: the manager's plan is the full plan, wherever it was computed."""

from __future__ import annotations

import asyncio
import sys
import threading
import weakref
from typing import Any

import pytest
from tests.unit.sim_helpers import engine_manifest, run_world
from tests.unit.test_decoded import replica

from omenative_controller import planning
from omenative_controller.cache_views import replica_view
from omenative_controller.decoded import ReplicaDecoder
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


def test_a_worker_pass_shortens_the_switch_interval_until_the_last_one_ends() -> None:
    """While a pass runs in a worker thread the loop waits at most
    ``PLANNING_SWITCH_INTERVAL`` for the GIL; with no pass running the interpreter's own
    interval is back (two passes at once: restored after the second)."""
    default = sys.getswitchinterval()
    seen: list[float] = []
    release = threading.Event()

    def pass_(wait: bool) -> float:
        if wait:
            release.wait(5)
        seen.append(sys.getswitchinterval())
        return sys.getswitchinterval()

    async def both() -> None:
        slow = asyncio.ensure_future(planning.in_worker(pass_, True))
        assert await planning.in_worker(pass_, False) == planning.PLANNING_SWITCH_INTERVAL
        assert sys.getswitchinterval() == planning.PLANNING_SWITCH_INTERVAL, "one still runs"
        release.set()
        await slow

    asyncio.run(both())
    assert seen == [planning.PLANNING_SWITCH_INTERVAL] * 2
    assert sys.getswitchinterval() == default


def test_a_big_pass_frees_the_last_memo_in_its_worker_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The memo handed over (popped, as the manager does) is freed off the event loop: a
    big one takes ~10 ms of deallocation that would hold every other replica."""
    monkeypatch.setattr(planning, "OFF_LOOP_PODS", 0)
    world = World(
        ClusterSpec(nodes=2, gpus_per_node=8, pod_start_seconds=1, pod_ready_seconds=1),
        engine_manifest(replicas=3),
        config=LifecycleConfig(),
    )
    run_world(world, 30)
    memos = {"r": asyncio.run(planning.plan_replica(world.snapshot(), None))[1]}
    freed_on: list[str] = []
    assert memos["r"].verdicts is not None
    probe = weakref.ref(memos["r"].verdicts, lambda _: freed_on.append(
        threading.current_thread().name))
    world.patch_replica({"spec": {"replicas": 4}})  # a spec change: nothing kept is reused
    got, memos["r"] = asyncio.run(planning.plan_replica(world.snapshot(), memos.pop("r")))
    assert probe() is None and len(freed_on) == 1
    assert freed_on[0] != threading.main_thread().name
    assert got == plan(world.snapshot())


@pytest.mark.parametrize("big", [False, True])
def test_a_big_replica_is_decoded_in_a_worker_thread_and_kept(
    big: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new resourceVersion of a big replica is decoded off the loop (100 ms at 10,000
    rows); the result is the loop's decode, cached for the next pass."""
    monkeypatch.setattr(planning, "OFF_LOOP_INSTANCES", 3 if big else 4)
    threads: list[str] = []
    real = planning.replica_from_json

    def decode(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args, **kwargs)

    monkeypatch.setattr(planning, "replica_from_json", decode)
    raw = replica_view(replica("7", replicas=3))
    decoder = ReplicaDecoder()
    got = asyncio.run(planning.decode_replica(decoder, raw))
    assert got == ReplicaDecoder().decode(raw) and decoder.cached(raw) is got
    assert asyncio.run(planning.decode_replica(decoder, raw)) is got and decoder.decodes == 1
    off_loop = [t for t in threads if t != threading.main_thread().name]
    assert len(off_loop) == (1 if big else 0)


@pytest.mark.parametrize(("off_loop_pods", "off_loop"), [(12, True), (13, False)])
def test_a_first_pass_counts_the_pods_its_spec_asks_for(
    off_loop_pods: int, off_loop: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new replica has no pods yet, and its first passes render every pod it asks for
    (~65 ms at 500 Instances of 4 pods): they go to a worker thread by the pods asked."""
    monkeypatch.setattr(planning, "OFF_LOOP_PODS", off_loop_pods)
    world = World(
        ClusterSpec(nodes=4, gpus_per_node=8, pod_start_seconds=1, pod_ready_seconds=1),
        engine_manifest(replicas=3, workers=3),  # 3 Instances of 4 pods: 12 asked
        config=LifecycleConfig(),
    )
    snap = world.snapshot()
    assert not snap.pods and planning.pass_pods(snap) == 12
    threads: list[str] = []
    real = planning.plan_incremental

    def planned(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return real(*args)

    monkeypatch.setattr(planning, "plan_incremental", planned)
    got, _ = asyncio.run(planning.plan_replica(snap, None))
    assert got == plan(snap) and got.actions
    assert (threads != [threading.main_thread().name]) is off_loop
