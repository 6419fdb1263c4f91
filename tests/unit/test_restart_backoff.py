"""Bounded restarts (issue 30 item 1): a crash-looping Instance restarts ever more slowly,
each restart is counted in its Event, and past ``maxRestarts`` within the window it is
Failed (``RestartLimitExceeded``) instead of churning pods for hours.
"""

from __future__ import annotations

from datetime import timedelta

from sim_helpers import engine_manifest, run_world

from omenative_core.model import Event, LifecycleConfig
from omenative_core.model.config import RestartBackoff, parse_lifecycle_config
from omenative_core.planner import plan
from omenative_core.restarts import CONDITION, LIMIT_REASON, read
from omenative_sim.world import ClusterSpec, World


def _world(config: LifecycleConfig | None = None, workers: int = 1,
           ready_seconds: float = 2.0) -> World:
    return World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2,
                             pod_ready_seconds=ready_seconds),
                 engine_manifest(replicas=1, workers=workers),
                 config=config or LifecycleConfig())


def _crash_after_ready(world: World, seconds: float, every: float,
                       events: list[Event]) -> int:
    """Run ``seconds``; the worker fails ``every`` s after each time the Instance is Ready.

    Returns how many pods were created (counted from the world's pod UIDs)."""
    uids: set[str] = set()
    ready_at: float | None = None
    end = world.now + seconds
    while world.now < end:
        run_world(world, 5, events)
        uids |= {p.uid for p in world.snapshot().pods}
        status = world.status
        row = status.instances[0] if status and status.instances else None
        if row is None or row.phase != "Ready":
            ready_at = None
            continue
        ready_at = world.now if ready_at is None else ready_at
        if world.now - ready_at >= every:
            world.fail_pod("chat-engine-engine-0-worker-0")
            ready_at = None
    return len(uids)


def test_a_worker_failing_after_every_start_is_spaced_out_then_failed() -> None:
    # the storm: a worker fails 2 minutes after each Ready; 3 hours
    world = _world()
    run_world(world, 30)
    events: list[Event] = []
    pods = _crash_after_ready(world, 3 * 3600, 120, events)
    restarts = [e for e in events if e.reason == "RestartTriggered"]
    assert 1 <= len(restarts) <= 6  # maxRestarts 6 within 1h, then Failed
    assert "restart 1 (1 of 6 within 1h0m0s); the next waits 20s" in restarts[0].message
    assert f"restart {len(restarts)} (" in restarts[-1].message  # each counted in its Event
    limit = [e for e in events if e.reason == LIMIT_REASON]
    assert len(limit) == 1 and limit[0].type == "Warning"
    status = world.status
    assert status is not None
    row = status.instances[0]
    assert row.phase == "Failed"
    assert row.last_failure is not None and row.last_failure.reason == LIMIT_REASON
    assert pods <= 2 * (1 + 6)  # the first gang and one per restart: no storm


def test_restarts_back_off_exponentially_before_the_new_pods() -> None:
    config = LifecycleConfig(restart_backoff=RestartBackoff(max_restarts=None))
    world = _world(config)
    run_world(world, 30)
    events: list[Event] = []
    _crash_after_ready(world, 3600, 30, events)
    restarts = [e.message for e in events if e.reason == "RestartTriggered"]
    waits = [m.rsplit("waits ", 1)[1] for m in restarts]
    assert waits[:6] == ["20s", "40s", "1m20s", "2m40s", "5m0s", "5m0s"]
    assert not [e for e in events if e.reason == LIMIT_REASON]  # maxRestarts null: never


def test_a_series_ends_after_ten_minutes_ready() -> None:
    world = _world()
    run_world(world, 30)
    events: list[Event] = []
    _crash_after_ready(world, 400, 60, events)
    assert len([e for e in events if e.reason == "RestartTriggered"]) >= 2
    run_world(world, 11 * 60)  # Ready for 10 minutes: the series ends
    status = world.status
    assert status is not None
    assert not [c for c in status.instances[0].conditions if c.type == CONDITION]
    events.clear()
    world.fail_pod("chat-engine-engine-0-worker-0")
    run_world(world, 60, events)
    again = [e.message for e in events if e.reason == "RestartTriggered"]
    assert len(again) == 1 and "restart 1 (1 of 6" in again[0]


def test_pods_failing_before_ready_are_recycled_with_backoff() -> None:
    # every pod of the attempt fails as soon as its containers run: before, it was
    # recreated as fast as it failed until the 30-minute deadline
    world = _world(workers=0, ready_seconds=60)  # fails long before it could be Ready
    events: list[Event] = []
    uids: set[str] = set()
    end = world.now + 1800
    while world.now < end:
        run_world(world, 3, events)
        for pod in world.snapshot().pods:
            uids.add(pod.uid)
            if pod.phase == "Running" and not pod.terminating:
                world.fail_pod(pod.name)
    recycled = [e for e in events if e.reason == "TerminalPodRecycled"]
    # 10+20+40+80+160 s, then one per 5 min: at most 10 in the 30-minute deadline
    assert 5 <= len(recycled) <= 10
    assert "recycle 3 of this attempt" in recycled[2].message
    assert len(uids) <= 1 + 10


def test_restart_backoff_is_configured_cluster_wide_and_per_component() -> None:
    config = parse_lifecycle_config({"restartBackoff": {
        "initialDelay": "5s", "maxRestarts": 2, "window": "30m",
        "components": {"engine": {"maxDelay": "1m"}}}})
    cfg = config.restart_backoff
    assert cfg is not None
    engine, router = cfg.for_component("engine"), cfg.for_component("router")
    assert engine.max_delay == timedelta(minutes=1) and engine.max_restarts == 2
    assert router.max_delay == timedelta(minutes=5) and router.initial_delay == timedelta(
        seconds=5)
    assert parse_lifecycle_config({"restartBackoff": None}).restart_backoff is None
    p = plan(_world(config).snapshot())
    assert p.status is not None  # a plan with the component's settings


def test_a_reset_or_a_new_revision_starts_a_failed_instance_afresh() -> None:
    for fix in ("reset", "new revision"):
        world = _world()
        run_world(world, 30)
        _crash_after_ready(world, 3600, 30, [])
        status = world.status
        assert status is not None and status.instances[0].phase == "Failed"
        if fix == "reset":
            world.set_annotation("ome.io/reset-instances", "0")
        else:
            world.patch_replica({"spec": {"runners": engine_manifest(image="img:2")["spec"][
                "runners"]}})
        events: list[Event] = []
        run_world(world, 120, events)
        status = world.status
        assert status is not None
        row = status.instances[0]
        assert row.phase == "Ready", fix
        series = read(row)  # a new series (the reset's drain may count as its first)
        assert series is None or series.count == 1, (fix, series)
