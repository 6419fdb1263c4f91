"""Pods no scheduler decides on are reported after ``schedulingDecisionTimeout`` (issue 30).

Seen when kube-scheduler lost its cache after an API server restart: the gang stayed
Pending with no scheduling decision while the replica said ``Progressing True``,
``RolloutStalled False`` for 30 minutes. A user expects to hear about it in minutes,
without the Instance being failed for what the scheduler did not do.
"""

from __future__ import annotations

from datetime import timedelta

from sim_helpers import engine_manifest, run_world

from omenative_core.model import Event, LifecycleConfig
from omenative_core.model.config import parse_lifecycle_config
from omenative_sim.world import ClusterSpec, World


def _world(config: LifecycleConfig) -> World:
    return World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2,
                             pod_ready_seconds=2.0), engine_manifest(replicas=1), config=config)


def _stalled(world: World) -> tuple[str, str, str]:
    status = world.status
    assert status is not None
    c = next(c for c in status.conditions if c.type == "RolloutStalled")
    return c.status, c.reason, c.message


def _scheduler_lost(world: World) -> None:
    world._schedule = lambda: None  # type: ignore[method-assign]  # kube-scheduler is gone


def test_no_scheduling_decision_for_5_minutes_stalls_with_one_warning_and_no_failure() -> None:
    world = _world(LifecycleConfig())
    _scheduler_lost(world)
    events: list[Event] = []
    run_world(world, 290, events)
    assert _stalled(world)[:2] == ("False", "Progressing")  # not yet: under 5 minutes
    run_world(world, 30, events)
    status, reason, message = _stalled(world)
    assert (status, reason) == ("True", "NoSchedulingDecision")
    assert "Instance(s) 0" in message and "5m" in message
    assert [e.type for e in events if e.reason == "NoSchedulingDecision"] == ["Warning"]
    run_world(world, 600, events)  # still waiting: no second Warning, nothing failed
    assert [e.reason for e in events].count("NoSchedulingDecision") == 1
    assert world.status is not None
    assert [r.phase for r in world.status.instances] == ["Creating"]


def test_the_condition_clears_once_the_scheduler_places_the_pods() -> None:
    world = _world(LifecycleConfig())
    _scheduler_lost(world)
    run_world(world, 400)
    del world._schedule  # type: ignore[attr-defined]  # the scheduler is back
    world.reschedule()
    run_world(world, 60)
    assert _stalled(world)[:2] == ("False", "Progressing")
    assert world.status is not None and world.status.ready_replicas == 1


def test_the_timeout_is_configurable_and_null_turns_it_off() -> None:
    config = parse_lifecycle_config('{"schedulingDecisionTimeout": "1m"}')
    assert config.scheduling_decision_timeout == timedelta(minutes=1)
    world = _world(config)
    _scheduler_lost(world)
    run_world(world, 70)
    assert _stalled(world)[1] == "NoSchedulingDecision"
    off = parse_lifecycle_config('{"schedulingDecisionTimeout": null}')
    world = _world(off)
    _scheduler_lost(world)
    run_world(world, 900)
    assert _stalled(world)[1] == "Progressing"
