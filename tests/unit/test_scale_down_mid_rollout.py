"""Scale-down during a rollout: what goes first, what stays, and the surge ceiling.

A user scaling a replica down mid-rollout expects to lose the Instances that serve least
(not Ready ones, then those still on the old revision) and to keep the updated ones, and
never to see more live Instances than the new ``replicas`` + ``maxSurge``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sim_helpers import engine_manifest, run_world

from omenative_core.labels import LABEL_INSTANCE_INDEX
from omenative_core.model import LifecycleConfig, Plan, SetServingGate
from omenative_core.model.status import InstanceStatus
from omenative_core.planner import plan
from omenative_sim.world import ClusterSpec, World


def _world(replicas: int, workers: int = 1) -> World:
    return World(ClusterSpec(nodes=16, gpus_per_node=2, pod_start_seconds=2,
                             pod_ready_seconds=2.0),
                 engine_manifest(replicas=replicas, workers=workers), config=LifecycleConfig())


def _new_image(world: World, image: str, workers: int = 1) -> None:
    runners = engine_manifest(image=image, workers=workers)["spec"]["runners"]
    world.patch_replica({"spec": {"runners": runners}})


def _condemned(p: Plan) -> set[int]:
    return {r.index for r in p.status.instances
            if r.operation is not None and r.operation.type == "Delete"}


def _live(rows: tuple[InstanceStatus, ...]) -> list[InstanceStatus]:
    """Rows that are not being deleted: members plus replacements in flight."""
    return [r for r in rows if r.operation is None or r.operation.type != "Delete"]


def _step_until(world: World, done: Any, limit: float = 600) -> Plan:
    """Plan and apply one pass at a time until ``done(plan)``; return that plan."""
    end = world.now + limit
    while world.now < end:
        p = plan(world.snapshot())
        if done(p):
            return p
        if p.actions:
            world.apply(p)
        else:
            world.advance(world.now + 1)
    raise AssertionError("the rollout never reached the wanted state")


def _run_checking_ceiling(world: World, seconds: float, ceiling: int) -> list[int]:
    """Run ``seconds`` one pass at a time; assert the live count each pass; serving seen."""
    serving: list[int] = []
    end = world.now + seconds
    while world.now < end:
        p = plan(world.snapshot())
        live = _live(p.status.instances)
        assert len(live) <= ceiling, f"{len(live)} live Instances > {ceiling} at t={world.now}"
        serving.append(p.status.serving_replicas)
        if p.actions:
            world.apply(p)
        else:
            world.advance(world.now + 1)
    return serving


def _settled_updated(p: Plan) -> set[int]:
    """Instances on the update revision, Ready, with no operation open."""
    rev = p.status.update_revision
    return {r.index for r in p.status.instances
            if r.running_revision == rev and r.phase == "Ready" and r.operation is None}


def _mid_rollout(replicas: int, updated: int, workers: int = 1) -> tuple[World, Plan]:
    """A gang replica at rest, then rolling out img:2 until ``updated`` Instances are done.

    Returns the world (that pass applied) and the pass's plan; the rest are still on the
    old revision, one of them usually with its replacement being built.
    """
    world = _world(replicas, workers)
    run_world(world, 60)
    _new_image(world, "img:2", workers)
    first = _step_until(world, lambda p: len(_settled_updated(p)) == updated)
    world.apply(first)
    return world, first


def test_scale_down_mid_rollout_condemns_old_revision_and_keeps_updated() -> None:
    world, first = _mid_rollout(4, updated=2)
    updated = _settled_updated(first)
    old = {r.index for r in first.status.instances} - updated
    world.patch_replica({"spec": {"replicas": 2}})
    p = plan(world.snapshot())
    assert _condemned(p) == old  # the old ones and any replacement being built for them
    assert {r.index for r in _live(p.status.instances)} == updated
    old_members = {r.index for r in first.status.instances
                   if r.index in old and (r.operation is None or r.operation.replaces is None)}
    gates_off = {int(a.name.split("-")[3]) for a in p.actions
                 if isinstance(a, SetServingGate) and not a.value}
    assert gates_off == old_members  # drained, not cut: serving gate off first
    serving = _run_checking_ceiling(world, 120, ceiling=2 + 1)
    assert min(serving) >= 2  # the updated pair served throughout
    status = world.status
    assert status is not None
    assert {r.index for r in status.instances} == updated
    assert status.current_revision == status.update_revision


def test_single_pod_scale_down_mid_rollout_keeps_the_updated_pods() -> None:
    world, first = _mid_rollout(4, updated=2, workers=0)
    updated = _settled_updated(first)
    old = {r.index for r in first.status.instances} - updated  # one may be surging in place
    world.patch_replica({"spec": {"replicas": 2}})
    p = plan(world.snapshot())
    assert _condemned(p) == old
    serving = _run_checking_ceiling(world, 120, ceiling=2 + 1)
    assert min(serving) >= 2
    status = world.status
    assert status is not None and {r.index for r in status.instances} == updated
    assert all(r.running_revision == status.update_revision for r in status.instances)


def test_scale_down_condemns_a_not_ready_instance_before_an_old_ready_one() -> None:
    world, first = _mid_rollout(3, updated=1)
    updated = _settled_updated(first)
    idle_old = sorted(r.index for r in first.status.instances
                      if r.index not in updated and r.operation is None)
    # an old Instance with no update open loses a pod: it stops serving, restarts whole
    broken = idle_old[0]
    world.fail_pod(f"chat-engine-engine-{broken}-worker-0")
    world.patch_replica({"spec": {"replicas": 2}})
    p = plan(world.snapshot())
    assert _condemned(p) == {broken}
    live = {r.index for r in _live(p.status.instances)}
    assert updated <= live and broken not in live


def test_in_flight_surges_above_the_new_ceiling_are_cancelled() -> None:
    # maxSurge 25% of 8 is 2; of 4 it is 1
    world = _world(8)
    run_world(world, 60)
    _new_image(world, "img:2")

    def building(p: Plan) -> list[InstanceStatus]:
        return [r for r in p.status.instances
                if r.operation is not None and r.operation.replaces is not None
                and r.phase != "Ready"]
    first = _step_until(world, lambda p: len(building(p)) == 2)
    world.apply(first)
    sources = {r.operation.replaces for r in building(first) if r.operation is not None}
    idle = sorted(r.index for r in first.status.instances
                  if r.operation is None and r.index not in sources)
    # four idle Instances stop serving, so the scale-down takes them and keeps both sources
    for index in idle[:4]:
        world.fail_pod(f"chat-engine-engine-{index}-worker-0")
    world.patch_replica({"spec": {"replicas": 4}})
    p = plan(world.snapshot())
    assert _condemned(p) >= set(idle[:4])
    kept_sources = sources & {r.index for r in _live(p.status.instances)}
    assert kept_sources == sources
    surges = [r for r in p.status.instances
              if r.operation is not None and r.operation.replaces is not None]
    assert len(surges) == 1  # one replacement cancelled, its source still serving
    assert [e.reason for e in p.events].count("SurgeCancelled") == 1
    serving = _run_checking_ceiling(world, 600, ceiling=4 + 1)
    assert min(serving) >= 4  # the kept Instances served throughout
    status = world.status
    assert status is not None and len(status.instances) == 4
    assert status.current_revision == status.update_revision


def test_below_the_partition_the_prior_revision_is_kept_as_asked() -> None:
    # a staged rollout: partition 2 keeps Instances 0 and 1 on img:1, 2 is the canary
    world = _world(3)
    world.patch_replica({"spec": {"pacing": {"partition": 2}}})
    run_world(world, 60)
    _new_image(world, "img:2")
    run_world(world, 120)
    before = world.status
    assert before is not None
    canary = {r.index for r in before.instances if r.running_revision == before.update_revision}
    assert len(canary) == 1 and max(canary) > 1  # the replacement took a new index
    world.patch_replica({"spec": {"replicas": 2}})
    p = plan(world.snapshot())
    assert _condemned(p) == canary  # as a StatefulSet with a partition: highest index first
    run_world(world, 60)
    status = world.status
    assert status is not None
    assert {r.index for r in status.instances} == {0, 1}
    assert {r.running_revision for r in status.instances} == {status.current_revision}


def _holding(world: World) -> int:
    """Instances holding pods in the world (any pod, terminating or not): GPUs in use."""
    return len({p.labels.get(LABEL_INSTANCE_INDEX) for p in world.snapshot().pods})


def _peak_holding(world: World, seconds: float, count: Callable[[World], int] = _holding,
                  react: Callable[[Plan], Plan] | None = None) -> int:
    """Run ``seconds`` one pass at a time; the most Instances that held pods at once
    (``count`` of the world after each pass; ``react`` may act on a plan first and return
    the one to apply)."""
    peak = 0
    end = world.now + seconds
    while world.now < end:
        p = plan(world.snapshot())
        if react is not None:
            p = react(p)
        if p.actions:
            world.apply(p)
        else:
            world.advance(world.now + 1)
        peak = max(peak, count(world))
    return peak


@pytest.mark.parametrize("settle", [0, 6])
def test_scale_down_mid_surge_opens_no_surge_while_the_condemned_drain(settle: int) -> None:
    # issue 30: replicas 4 -> 2 with maxSurge 1 mid SurgeThenDrain reached 6 Instances
    # holding pods (12 pods); the ceiling is max(4, 2) + maxSurge 1 = 5
    world = _world(4)
    run_world(world, 60)
    _new_image(world, "img:2")
    first = _step_until(world, lambda p: any(
        r.operation is not None and r.operation.replaces is not None
        for r in p.status.instances))
    world.apply(first)
    for _ in range(settle):
        world.advance(world.now + 5)
        p = plan(world.snapshot())
        if p.actions:
            world.apply(p)
    world.patch_replica({"spec": {"replicas": 2}})
    assert _peak_holding(world, 300) <= 4 + 1
    status = world.status
    assert status is not None and len(status.instances) == 2
    assert status.current_revision == status.update_revision


def test_scale_up_right_after_a_scale_down_waits_for_the_condemned_to_drain() -> None:
    world = _world(4)
    run_world(world, 60)
    world.patch_replica({"spec": {"replicas": 2}})
    world.apply(plan(world.snapshot()))  # Instances 2 and 3 condemned: gates off
    world.patch_replica({"spec": {"replicas": 4}})
    # max(4, 2, 4) + maxSurge 1, never 2 kept + 2 draining + 2 new
    assert _peak_holding(world, 120) <= 4 + 1
    status = world.status
    assert status is not None and status.ready_replicas == 4


def _pods_held(world: World) -> int:
    """Single-pod Instances' worth of pods the world holds (each pod, terminating too)."""
    return len(world.snapshot().pods)


def test_a_terminating_abandoned_surge_pod_still_counts_against_max_surge() -> None:
    # seed 2 of the incremental machine: a bad image's surge pod was terminating after its
    # surge was abandoned (row Ready, no operation), so another Instance opened a surge and
    # 4 pods were held by a 2-replica single-pod replica with maxSurge 1
    world = World(ClusterSpec(nodes=8, gpus_per_node=2, pod_start_seconds=2,
                              pod_ready_seconds=2.0, termination_seconds=90),
                  engine_manifest(replicas=2, workers=0),
                  config=LifecycleConfig(stuck_pod_grace_period=timedelta(seconds=10)))
    run_world(world, 60)
    world.add_bad_image("img:bad")
    _new_image(world, "img:bad", workers=0)
    abandoned: list[int] = []

    def react(p: Plan) -> Plan:
        for e in p.events:
            if e.reason == "SurgeAbandoned" and e.instance is not None and not abandoned:
                abandoned.append(e.instance)
                # its serving pod fails too: that Instance is no candidate for the next
                # surge, so another one is
                row = next(r for r in p.status.instances if r.index == e.instance)
                world.apply(p)
                world.fail_pod(f"chat-engine-engine-{e.instance}-default-{row.active_ordinal}")
                return plan(world.snapshot())
        return p

    peak = _peak_holding(world, 400, count=_pods_held, react=react)
    assert abandoned  # the scenario happened: a surge pod was left terminating
    assert peak <= 2 + 1
