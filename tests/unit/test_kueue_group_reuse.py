"""A Kueue pod group name is never reused while a retired group of that name has pods.

Kueue keeps its finalizer on a retired group's pods until that group's Workload is deleted,
so they can stay Terminating for a while. A new Instance whose pods joined a group of the
same name would join (or collide with) the Workload being retired. Here the simulator
holds every deleted pod Terminating for an hour (``termination_seconds``), as Kueue's
finalizer would, and the replica is scaled down and straight back up: the planner's plans
are checked before they are applied.
"""

from __future__ import annotations

from typing import Any

from omenative_core.model import CreatePod, LifecycleConfig, Plan, Snapshot
from omenative_core.planner import plan
from omenative_core.render import LABEL_INSTANCE_INDEX, LABEL_KUEUE_POD_GROUP
from omenative_sim.world import ClusterSpec, World

HELD = 3600.0  # seconds a deleted pod stays Terminating (Kueue's finalizer)


def manifest(replicas: int) -> dict[str, Any]:
    tpl = {"metadata": {"labels": {"kueue.x-k8s.io/queue-name": "llm"}},
           "spec": {"containers": [{"name": "ome-container", "image": "img:1",
                                    "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}
    return {"metadata": {"name": "chat-engine", "namespace": "ns"},
            "spec": {"component": "engine", "replicas": replicas,
                     "runners": [{"name": "leader", "template": tpl},
                                 {"name": "worker", "size": 1, "template": tpl}]}}


def groups_of_pods(snap: Snapshot, *, terminating: bool) -> dict[str, set[str]]:
    """Kueue group -> names of its pods that are (or are not) terminating."""
    out: dict[str, set[str]] = {}
    for p in snap.pods:
        if (p.deletion_timestamp is not None) == terminating and LABEL_KUEUE_POD_GROUP in p.labels:
            out.setdefault(p.labels[LABEL_KUEUE_POD_GROUP], set()).add(p.name)
    return out


def run(world: World, seconds: float, check: Any) -> list[CreatePod]:
    """Reconcile for ``seconds``, calling ``check(snapshot, plan)`` before each apply."""
    created: list[CreatePod] = []
    end = world.now + seconds
    while True:
        for _ in range(50):
            snap = world.snapshot()
            p: Plan = plan(snap)
            if not p.actions:
                break
            check(snap, p)
            created.extend(a for a in p.actions if isinstance(a, CreatePod))
            world.apply(p)
        wake = world.now + p.requeue_after.total_seconds() if p.requeue_after else None
        times = [t for t in (world.next_event_time(), wake) if t is not None and t <= end]
        if not times:
            world.advance(end)
            return created
        world.advance(max(min(times), world.now))


def no_retired_group_joined(snap: Snapshot, p: Plan) -> None:
    """No pod created into a group whose pods are all terminating (a retired group)."""
    retired = groups_of_pods(snap, terminating=True).keys() - groups_of_pods(
        snap, terminating=False).keys()
    for action in p.actions:
        if isinstance(action, CreatePod):
            group = action.body["metadata"]["labels"].get(LABEL_KUEUE_POD_GROUP)
            assert group not in retired, (action.name, group, sorted(retired))


def ready(world: World) -> int:
    status = world.replica.status
    return 0 if status is None else int(status.ready_replicas or 0)


def test_scale_down_then_up_never_joins_the_group_being_retired() -> None:
    world = World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2,
                              pod_ready_seconds=2, termination_seconds=HELD),
                  manifest(replicas=2), config=LifecycleConfig())
    run(world, 120, no_retired_group_joined)
    assert ready(world) == 2
    before = groups_of_pods(world.snapshot(), terminating=False)
    assert len(before) == 2  # one group per Instance

    world.patch_replica({"spec": {"replicas": 1}})
    run(world, 60, no_retired_group_joined)
    held = groups_of_pods(world.snapshot(), terminating=True)
    assert len(held) == 1, held  # the scaled-away Instance's group, held Terminating
    (retired,) = held

    world.patch_replica({"spec": {"replicas": 2}})
    created = run(world, 600, no_retired_group_joined)
    snap = world.snapshot()
    # while the old group's pods are held, the new Instance forms no pod of that group
    assert groups_of_pods(snap, terminating=True) == held
    assert not any(c.body["metadata"]["labels"].get(LABEL_KUEUE_POD_GROUP) == retired
                   for c in created)
    new_groups = {c.body["metadata"]["labels"][LABEL_KUEUE_POD_GROUP] for c in created}
    live = groups_of_pods(snap, terminating=False)
    # it stands up under another group (a fresh index), so the scale-up is not held back
    assert new_groups and retired not in live and len(live) == 2, (new_groups, live)
    assert ready(world) == 2

    # once the held pods are finally gone, nothing is left of the retired group
    run(world, HELD, no_retired_group_joined)
    assert retired not in groups_of_pods(world.snapshot(), terminating=True)
    assert ready(world) == 2


def test_the_index_of_a_held_instance_is_not_created_again_while_its_pods_exist() -> None:
    world = World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2,
                              pod_ready_seconds=2, termination_seconds=HELD),
                  manifest(replicas=2), config=LifecycleConfig())
    run(world, 120, no_retired_group_joined)
    world.patch_replica({"spec": {"replicas": 1}})
    run(world, 60, no_retired_group_joined)
    held_indexes = {p.labels[LABEL_INSTANCE_INDEX] for p in world.snapshot().pods
                    if p.deletion_timestamp is not None}
    assert len(held_indexes) == 1

    world.patch_replica({"spec": {"replicas": 2}})
    created = run(world, 600, no_retired_group_joined)
    assert not any(c.body["metadata"]["labels"][LABEL_INSTANCE_INDEX] in held_indexes
                   for c in created), [c.name for c in created]
