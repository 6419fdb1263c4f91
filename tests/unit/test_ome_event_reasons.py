"""OME's Event reasons for restarts, orphans, recycled pods and gangs (issue 32 item 5).

A whole-Instance restart is a Warning ``RestartTriggered`` (OME's message shape: component,
instance, cause, new incarnation) and a Normal ``RestartCompleted`` once the new
incarnation serves; a pod of the Instance without an incarnation label is a ``FoundOrphan``
Warning; a PodGroup made for pods on the default scheduler is ``MaybeNoGangScheduler``; one
the scheduler ruled ``Failed`` is deleted and rebuilt with a ``PodGroupReset`` Warning.
"""

from __future__ import annotations

from attrs import evolve
from sim_helpers import engine_manifest, run_world

from omenative_controller.cache_views import pod_group_view
from omenative_core.model import Event, LifecycleConfig
from omenative_core.model.plan import DeletePodGroup
from omenative_core.planner import plan
from omenative_core.views import pod_group_view_from_json
from omenative_sim.world import ClusterSpec, World


def _world(**spec: object) -> World:
    return World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2,
                              pod_ready_seconds=2.0),
                  engine_manifest(replicas=1, workers=1, **spec), config=LifecycleConfig())


def _of(events: list[Event], reason: str) -> list[Event]:
    return [e for e in events if e.reason == reason]


def test_a_restart_is_triggered_as_a_warning_and_completed_as_normal() -> None:
    world = _world()
    run_world(world, 30)
    events: list[Event] = []
    world.fail_pod("chat-engine-engine-0-worker-0")
    run_world(world, 60, events)
    (triggered,) = _of(events, "RestartTriggered")
    assert triggered.type == "Warning" and triggered.instance == 0
    assert triggered.message.startswith(
        "OMENative component=engine instance=0: restart triggered: ")
    assert "(incarnation=2)" in triggered.message
    (completed,) = _of(events, "RestartCompleted")
    assert completed.type == "Normal"
    assert completed.message == ("OMENative component=engine instance=0: restart completed "
                                 "(incarnation=2)")
    assert not _of(events, "InstanceRestart")  # omenative's old name is gone


def test_a_pod_without_an_incarnation_label_is_found_orphan_while_a_restart_drains() -> None:
    world = _world()
    run_world(world, 30)
    world.fail_pod("chat-engine-engine-0-worker-0")
    p = plan(world.snapshot())
    world.apply(p)
    assert world.status is not None and world.status.instances[0].phase == "Restarting"
    snap = world.snapshot()
    stripped = tuple(
        evolve(pod, labels={k: v for k, v in pod.labels.items()
                            if k != "ome.io/instance-incarnation"})
        if pod.name == "chat-engine-engine-0-leader-0" else pod for pod in snap.pods)
    found = _of(list(plan(evolve(snap, pods=stripped)).events), "FoundOrphan")
    assert found and found[0].type == "Warning"
    assert "orphan pod chat-engine-engine-0-leader-0 without ome.io/instance-incarnation" in \
        found[0].message


def test_terminal_pod_recycling_warns_as_ome_does() -> None:
    world = World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2,
                              pod_ready_seconds=60.0),
                  engine_manifest(replicas=1, workers=0), config=LifecycleConfig())
    events: list[Event] = []
    for _ in range(20):
        run_world(world, 3, events)
        for pod in world.snapshot().pods:
            if pod.phase == "Running" and not pod.terminating:
                world.fail_pod(pod.name)
    recycled = _of(events, "TerminalPodRecycled")
    assert recycled and all(e.type == "Warning" for e in recycled)


def test_a_pod_group_for_the_default_scheduler_may_have_no_gang_scheduler() -> None:
    world = _world()
    events: list[Event] = []
    run_world(world, 30, events)
    warned = _of(events, "MaybeNoGangScheduler")
    assert warned and warned[0].type == "Warning" and warned[0].instance == 0
    assert "PodGroup chat-engine-0-1" in warned[0].message


def test_in_place_only_refusing_a_revision_warns_in_place_update_not_possible() -> None:
    manifest = engine_manifest(replicas=1, workers=1)
    manifest["spec"]["lifecycle"] = {"updateStrategy": {"type": "InPlaceOnly"}}
    world = World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2,
                              pod_ready_seconds=2.0), manifest, config=LifecycleConfig())
    run_world(world, 30)
    world.patch_replica({"spec": {"topologyKey": "kubernetes.io/hostname"}})  # not an image
    events: list[Event] = []
    run_world(world, 30, events)
    warned = _of(events, "InPlaceUpdateNotPossible")
    assert warned and warned[0].type == "Warning"
    assert "1 Instance(s) keep their revision" in warned[0].message
    assert world.status is not None
    failed = {c.type: c for c in world.status.conditions}["FailedUpdate"]
    assert (failed.status, failed.reason) == ("True", "InPlaceNotPossible")


def test_a_pod_group_the_scheduler_failed_is_reset_with_a_warning_as_ome_does() -> None:
    world = _world()
    run_world(world, 30)
    snap = world.snapshot()
    name = "chat-engine-0-1"
    assert name in snap.pod_groups
    failed = pod_group_view_from_json({
        "metadata": {"name": name, "uid": snap.pod_groups[name].uid},
        "spec": {"minMember": 2}, "status": {"phase": "Failed", "failed": 1}})
    p = plan(evolve(snap, pod_groups={**snap.pod_groups, name: failed}))
    (reset,) = _of(list(p.events), "PodGroupReset")
    assert reset.type == "Warning" and reset.instance == 0
    assert reset.message == (
        "OMENative component=engine: deleting PodGroup chat-engine-0-1 so the gang can be "
        "admitted again (PodGroup chat-engine-0-1 reported phase Failed: 1 of 2 members "
        "failed)")
    deletes = [a for a in p.actions if isinstance(a, DeletePodGroup)]
    assert [(a.name, a.uid) for a in deletes] == [(name, failed.uid)]
    assert p.status.instances[0].phase != "Failed"  # the Instance is not failed for it
    # a group the scheduler has not failed is left alone
    assert not _of(list(plan(snap).events), "PodGroupReset")


def test_only_a_failed_phase_is_read_as_the_schedulers_verdict() -> None:
    running = pod_group_view_from_json({"metadata": {"name": "g"}, "spec": {"minMember": 2},
                                        "status": {"phase": "Running", "failed": 1}})
    assert running.failed == ""
    # the manager's PodGroup cache keeps the verdict, so the shell's pass sees it
    cached = pod_group_view({"metadata": {"name": "g"}, "spec": {"minMember": 2},
                             "status": {"phase": "Failed", "failed": 2}})
    assert cached.failed == "PodGroup g reported phase Failed: 2 of 2 members failed"
