"""The world invariants (``invariants.py`` 11', 13, 14) reject the worlds they exist for.

Each is given a converged world from the simulator with one thing wrong, of the kind a
planner bug leaves behind; each must fail on it, where the older row-based checks pass
(issue 31: a second serving leader for one Instance passed every step invariant).
"""

from __future__ import annotations

import pytest
from attrs import evolve

from omenative_core.model import PodView, Snapshot
from omenative_core.planner import plan
from omenative_sim.world import ClusterSpec, World
from tests.property.invariants import (
    ALL_STEP_INVARIANTS,
    availability_floor,
    converged,
    converged_pods,
    pod_slots,
)
from tests.property.test_lifecycle_machine import FAST, replica_json


def _settled(multi: bool, replicas: int = 2) -> Snapshot:
    world = World(ClusterSpec(nodes=8, gpus_per_node=4, pod_start_seconds=3, pod_ready_seconds=2),
                  replica_json(multi=multi, size=1, replicas=replicas, image="img:1",
                               strategy="SurgeThenDrain"), config=FAST)
    for _ in range(60):
        p = plan(world.snapshot())
        if p.actions:
            world.apply(p)
        else:
            world.advance(world.now + 2)
    return world.snapshot()


def _with(snap: Snapshot, *pods: PodView) -> Snapshot:
    return evolve(snap, pods=(*snap.pods, *pods))


def _copy(snap: Snapshot, name: str, new_name: str, **labels: str) -> PodView:
    pod = next(p for p in snap.pods if p.name == name)
    return evolve(pod, name=new_name, uid=pod.uid + "-2", labels={**pod.labels, **labels})


def test_the_settled_worlds_pass() -> None:
    for multi in (False, True):
        snap = _settled(multi)
        pod_slots(snap, multi, 1)
        availability_floor(snap, multi, 1, 2)
        converged(snap, plan(snap))
        converged_pods(snap, multi, 1)


def test_a_second_serving_leader_passes_the_row_checks_but_not_pod_slots() -> None:
    snap = _settled(multi=True)
    bad = _with(snap, _copy(snap, "m-engine-0-leader-0", "m-engine-0-leader-0-b"))
    for check in ALL_STEP_INVARIANTS:  # the older checks do not see it
        check(bad, plan(bad))
    with pytest.raises(AssertionError, match="2 live pods in slot"):
        pod_slots(bad, True, 1)


def test_a_worker_beyond_the_gang_size_fails_pod_slots() -> None:
    snap = _settled(multi=True)
    bad = _with(snap, _copy(snap, "m-engine-1-worker-0", "m-engine-1-worker-1",
                            **{"ome.io/pod-ordinal": "1"}))
    with pytest.raises(AssertionError, match="not one of"):
        pod_slots(bad, True, 1)


def test_two_serving_single_pods_outside_an_update_fail_pod_slots() -> None:
    snap = _settled(multi=False)
    bad = _with(snap, _copy(snap, "m-engine-0-default-0", "m-engine-0-default-1",
                            **{"ome.io/pod-ordinal": "1"}))
    with pytest.raises(AssertionError, match="serves from two pods"):
        pod_slots(bad, False, 1)


def test_an_instance_out_of_rotation_fails_the_floor() -> None:
    snap = _settled(multi=True)
    pods = tuple(
        evolve(p, conditions={**p.conditions, "ome.io/serving": "False"})
        if p.name == "m-engine-1-worker-0" else p
        for p in snap.pods
    )
    with pytest.raises(AssertionError, match="1 Instances serve < the floor 2"):
        availability_floor(evolve(snap, pods=pods), True, 1, 2)


def test_a_stray_pod_at_convergence_fails_converged_pods() -> None:
    snap = _settled(multi=False)
    stray = _copy(snap, "m-engine-1-default-0", "m-engine-1-default-1",
                  **{"ome.io/pod-ordinal": "1"})
    stray = evolve(stray, conditions={**stray.conditions, "ome.io/serving": "False"})
    bad = _with(snap, stray)
    pod_slots(bad, False, 1)  # a leaving pod beside a serving one is allowed mid-step
    with pytest.raises(AssertionError, match="converged_pods"):
        converged_pods(bad, False, 1)
