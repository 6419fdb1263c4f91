"""Status coalescing: a progress-only status waits (at most the window), nothing else does.

A user sees readiness within a second (a changed condition at once), a destroying step
is recorded before it acts, a new Instance's Create may wait because the core adopts its
pods from their labels, and a held status is written when its window ends.
"""

from __future__ import annotations

import asyncio
from typing import Any

from attrs import evolve
from sim_helpers import engine_manifest

from omenative_controller.coalesce import (
    PROGRESS,
    READINESS,
    StatusCoalescer,
    status_hold,
    status_may_wait,
)
from omenative_controller.executor import CreateErrorStore, Executor, PassContext
from omenative_core.model.plan import (
    Action,
    CreatePod,
    DeletePod,
    Plan,
    SetServingGate,
    UpdateStatus,
)
from omenative_core.model.status import (
    Condition,
    InferenceReplicaStatus,
    InstanceOperation,
    InstanceStatus,
)
from omenative_core.planner import plan as make_plan
from omenative_sim.world import ClusterSpec, World

OP_STATUS = InferenceReplicaStatus(
    replicas=1, instances=(InstanceStatus(index=0, phase="Creating", pod_count=0),))
COUNTED = evolve(OP_STATUS, instances=(InstanceStatus(index=0, phase="Creating",
                                                      pod_count=4),))
READY = evolve(COUNTED, ready_replicas=1, serving_replicas=1)


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


class StatusApi:
    def __init__(self) -> None:
        self.writes = 0

    async def replace(self, res: Any, name: str, body: Any, ns: Any = None, **kw: Any) -> Any:
        self.writes += 1
        return body

    async def patch(self, res: Any, name: str, body: Any, ns: Any = None, **kw: Any) -> Any:
        return {"metadata": {"name": name}}

    async def create(self, res: Any, body: Any, ns: Any = None, **kw: Any) -> Any:
        return body

    async def delete(self, res: Any, name: str, ns: Any = None, **kw: Any) -> None:
        return None


def _apply(executor: Executor, observed: InferenceReplicaStatus, new: InferenceReplicaStatus,
           *extra: Action) -> Any:
    raw = {"metadata": {"name": "r", "uid": "u", "resourceVersion": "1"}, "spec": {}}
    ctx = PassContext(key="ns/r", namespace="ns", name="r", raw=raw, observed_status=observed)
    plan = Plan(actions=(UpdateStatus(status=new), *extra), status=new)
    return asyncio.run(executor.apply(plan, ctx))


def _executor(api: StatusApi, clock: Clock, window: float = 10.0) -> Executor:
    return Executor(api, CreateErrorStore(),  # type: ignore[arg-type]
                    coalescer=StatusCoalescer(window=window, clock=clock))


def test_a_progress_only_status_waits_then_is_written_when_its_window_ends() -> None:
    api, clock = StatusApi(), Clock()
    executor = _executor(api, clock)
    held = _apply(executor, OP_STATUS, COUNTED)
    assert held.ok and api.writes == 0 and held.status_due == 10.0
    clock.t += 4
    again = _apply(executor, OP_STATUS, COUNTED)
    assert api.writes == 0 and again.status_due == 6.0, "the window runs from the first hold"
    clock.t += 6
    due = _apply(executor, OP_STATUS, COUNTED)
    assert api.writes == 1 and due.status_due is None


def _ready_cond(status: str, reason: str, message: str) -> Condition:
    return Condition(type="Ready", status=status, reason=reason, message=message)


THREE = InferenceReplicaStatus(replicas=3, instances=tuple(
    InstanceStatus(index=i, phase="Creating", pod_count=4) for i in range(3)),
    conditions=(_ready_cond("False", "ReplicaCountMismatch", "0/3 Instances Ready"),))


def _ready(status: InferenceReplicaStatus, n: int, cond: Condition) -> InferenceReplicaStatus:
    rows = tuple(evolve(r, phase="Ready") if r.index < n else r for r in status.instances)
    return evolve(status, instances=rows, ready_replicas=n, serving_replicas=n,
                  conditions=(cond,))


def test_more_instances_ready_waits_only_the_short_readiness_window() -> None:
    """While a big replica comes up, a pass that only turns a few more Instances Ready
    waits at most ``readiness_window`` (1 s), not the 10 s of a progress-only status."""
    api, clock = StatusApi(), Clock()
    executor = _executor(api, clock)
    one = _ready(THREE, 1, _ready_cond("False", "ReplicaCountMismatch", "1/3 Instances Ready"))
    held = _apply(executor, THREE, one)
    assert api.writes == 0 and held.status_due == 1.0
    clock.t += 1
    assert _apply(executor, THREE, one).status_due is None and api.writes == 1


def test_readiness_that_changes_a_condition_or_falls_is_written_at_once() -> None:
    """The replica turning Ready (or all of it Ready: a new reason) is what users and the
    InferenceService wait for, and a loss of readiness is never held."""
    two = _ready(THREE, 2, _ready_cond("True", "MinimumAvailable", "2/3 Instances Ready"))
    three = _ready(THREE, 3, _ready_cond("True", "AllInstancesReady", "3/3 Instances Ready"))
    one = _ready(THREE, 1, _ready_cond("False", "ReplicaCountMismatch", "1/3 Instances Ready"))
    for old, new in ((THREE, two), (two, three), (three, two), (two, one)):
        api, clock = StatusApi(), Clock()
        result = _apply(_executor(api, clock), old, new)
        assert api.writes == 1 and result.status_due is None, (old.ready_replicas,
                                                              new.ready_replicas)


def _advice(status: str = "True") -> Condition:
    return Condition(type="GangSchedulingUnavailable", status=status,
                     reason="PodGroupCRDNotInstalled", message="gang mechanism None")


def test_configuration_advice_rides_the_next_due_status_instead_of_its_own_write() -> None:
    """A replica's first status on a cluster without gang scheduling says so
    (``GangSchedulingUnavailable=True``): that advice waits like progress, so a gang of 4
    pods comes up with one status write (13 writes in all before, 12 now); the replica
    turning Ready is written at once and carries the advice."""
    create = InstanceOperation(id="create-1", type="Create", step="CreatePods",
                               target_revision="r-1", reason="ScaleUp")
    row = InstanceStatus(index=0, incarnation=1, phase="Creating", operation=create)
    pending = _ready_cond("False", "ReplicaCountMismatch", "0/1 Instances Ready")
    first = InferenceReplicaStatus(replicas=1, instances=(row,), conditions=(pending, _advice()))
    assert status_hold(None, first, [UpdateStatus(status=first)]) == PROGRESS
    ready = evolve(first, ready_replicas=1, serving_replicas=1, instances=(
        evolve(row, phase="Ready", operation=None),), conditions=(
        _ready_cond("True", "AllInstancesReady", "1/1 Instances Ready"), _advice()))
    assert status_hold(None, ready, [UpdateStatus(status=ready)]) is None
    cleared = evolve(first, conditions=(pending, _advice("False")))
    assert status_hold(first, cleared, [UpdateStatus(status=cleared)]) == PROGRESS
    api, clock = StatusApi(), Clock()
    held = _apply(_executor(api, clock), OP_STATUS, evolve(COUNTED, conditions=(_advice(),)))
    assert api.writes == 0 and held.status_due == 10.0


def test_an_operation_may_end_in_a_held_status_only_with_its_instance_ready() -> None:
    create = InstanceOperation(id="create-1", type="Create", step="WaitReady",
                               target_revision="r-1", reason="ScaleUp")
    start = evolve(THREE, instances=tuple(evolve(r, operation=create)
                                          for r in THREE.instances))
    cond = _ready_cond("False", "ReplicaCountMismatch", "1/3 Instances Ready")
    ended = _ready(start, 1, cond)
    ended = evolve(ended, instances=(evolve(ended.instances[0], operation=None),
                                     *ended.instances[1:]))
    assert status_hold(start, ended, ()) == READINESS
    not_ready = evolve(ended, instances=(evolve(ended.instances[0], phase="Failed"),
                                         *ended.instances[1:]))
    assert status_hold(start, not_ready, ()) is None
    restarted = evolve(ended, instances=(evolve(ended.instances[0], incarnation=2),
                                         *ended.instances[1:]))
    assert status_hold(start, restarted, ()) is None
    counted = _ready(start, 1, cond)
    reason = evolve(ended, ready_replicas=counted.ready_replicas, conditions=(
        _ready_cond("False", "InstanceFailed", "1/3 Instances Ready"),))
    assert status_hold(counted, reason, ()) is None, "a condition's new reason: at once"


def test_readiness_window_zero_writes_readiness_at_once() -> None:
    api, clock = StatusApi(), Clock()
    executor = Executor(api, CreateErrorStore(),  # type: ignore[arg-type]
                        coalescer=StatusCoalescer(window=10.0, readiness_window=0.0,
                                                  clock=clock))
    one = _ready(THREE, 1, _ready_cond("False", "ReplicaCountMismatch", "1/3 Instances Ready"))
    assert _apply(executor, THREE, one).status_due is None and api.writes == 1
    assert _apply(executor, THREE, evolve(THREE, observed_generation=1)).status_due == 10.0


def test_a_status_before_a_destroying_step_or_a_drain_is_never_held() -> None:
    api, clock = StatusApi(), Clock()
    executor = _executor(api, clock)
    _apply(executor, OP_STATUS, COUNTED, DeletePod(name="p", uid="u"))
    _apply(executor, OP_STATUS, COUNTED, SetServingGate(name="p", uid="u", value=False))
    assert api.writes == 2


def test_only_a_fresh_scale_up_may_be_a_new_row_of_a_held_status() -> None:
    """A new row the core re-derives from its pods may wait; a row that is not a fresh
    scale-up (a restart, a failure, a surge) or a row that disappears never does."""
    scale_up = InstanceOperation(id="create-1", type="Create", step="CreatePods",
                                 target_revision="r-1", reason="ScaleUp")
    fresh = InstanceStatus(index=1, incarnation=1, phase="Creating", operation=scale_up)
    grown = evolve(OP_STATUS, instances=(*OP_STATUS.instances, fresh))
    assert status_may_wait(OP_STATUS, grown, ())
    assert status_may_wait(None, evolve(OP_STATUS, instances=(fresh,)), ())
    for other in (evolve(fresh, incarnation=2),
                  evolve(fresh, operation=evolve(scale_up, reason="Rebuild")),
                  evolve(fresh, operation=evolve(scale_up, replaces=0)),
                  evolve(fresh, operation=None)):
        assert not status_may_wait(OP_STATUS, evolve(OP_STATUS, instances=(
            *OP_STATUS.instances, other)), ())
    assert not status_may_wait(grown, OP_STATUS, ()), "a row removed is never held"


def test_pods_of_an_unwritten_scale_up_are_adopted_not_restarted() -> None:
    """The first status of a gang is skipped, its pods created; the next pass resumes the
    Create from the pods' labels: nothing deleted, nothing created twice, same incarnation."""
    world = World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2,
                              pod_ready_seconds=2),
                  engine_manifest(workers=3, replicas=1))
    first = make_plan(world.snapshot())
    assert any(isinstance(a, UpdateStatus) for a in first.actions)
    world.apply([a for a in first.actions if not isinstance(a, UpdateStatus)])
    snap = world.snapshot()
    assert snap.replica.status is None and len(snap.pods) == 4
    again = make_plan(snap)
    kinds = [a.kind for a in again.actions]
    assert "DeletePod" not in kinds and "CreatePod" not in kinds
    (row,) = again.status.instances
    assert row.operation is not None and (row.operation.type, row.operation.reason) == (
        "Create", "ScaleUp")
    assert row.incarnation == 1 and row.phase == "Creating"


def test_a_paused_replica_resumes_no_unwritten_scale_up() -> None:
    """Pause: no Create starts or advances, an adopted one included (invariant 8)."""
    world = World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2,
                              pod_ready_seconds=2),
                  engine_manifest(workers=1, replicas=1))
    first = make_plan(world.snapshot())
    world.apply([a for a in first.actions if not isinstance(a, UpdateStatus)])
    world.patch_replica({"spec": {"paused": True}})
    row = make_plan(world.snapshot()).status.instances[0]
    assert row.operation is None


def test_pods_of_another_revision_with_no_row_are_not_taken_for_a_scale_up() -> None:
    """Pods left from a spec the replica no longer has stay a Pending row and are
    replaced (the lost-status rule), not resumed as if this pass had created them."""
    world = World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2,
                              pod_ready_seconds=2),
                  engine_manifest(workers=1, replicas=1))
    first = make_plan(world.snapshot())
    world.apply([a for a in first.actions if not isinstance(a, UpdateStatus)])
    world.patch_replica({"spec": {"runners": engine_manifest(
        workers=1, image="img:2")["spec"]["runners"]}})
    row = make_plan(world.snapshot()).status.instances[0]
    assert row.operation is None or row.operation.reason != "ScaleUp"


def test_window_zero_writes_every_status() -> None:
    api, clock = StatusApi(), Clock()
    _apply(_executor(api, clock, window=0), OP_STATUS, COUNTED)
    assert api.writes == 1


def test_a_gang_comes_up_in_the_simulator_with_one_status_write_and_no_restart() -> None:
    """The planner driven by a coalescing shell: the same pods, no deletes, fewer writes."""
    world = World(ClusterSpec(nodes=4, gpus_per_node=2, pod_start_seconds=2,
                              pod_ready_seconds=2),
                  engine_manifest(workers=3, replicas=1))
    kinds: list[str] = []
    for _ in range(20):
        snap = world.snapshot()
        p = make_plan(snap)
        hold = status_may_wait(snap.replica.status, p.status, p.actions)
        actions = [a for a in p.actions if not (hold and isinstance(a, UpdateStatus))]
        kinds += [a.kind for a in actions]
        if actions:
            world.apply(actions)
        elif (t := world.next_event_time()) is not None:
            world.advance(t)
        else:
            break
    assert world.snapshot().replica.status.ready_replicas == 1
    assert "DeletePod" not in kinds
    assert kinds.count("CreatePod") == 4 and kinds.count("SetServingGate") == 4
    assert kinds.count("UpdateStatus") == 1, "the Create and the pods counted wait for Ready"


def _drive(coalesce: bool) -> tuple[dict[str, int], Any]:
    """A rollout, a crashed worker and a scale-down; held statuses are never flushed here
    (the worst case: the window never ends)."""
    world = World(ClusterSpec(nodes=8, gpus_per_node=2, pod_start_seconds=2,
                              pod_ready_seconds=2), engine_manifest(workers=1, replicas=3))
    steps = [
        lambda: world.patch_replica({"spec": {"runners": engine_manifest(
            workers=1, image="img:2")["spec"]["runners"]}}),
        lambda: world.fail_pod("chat-engine-engine-1-worker-0"),
        lambda: world.patch_replica({"spec": {"replicas": 1}}),
    ]
    kinds: dict[str, int] = {}
    for _ in range(2000):
        snap = world.snapshot()
        p = make_plan(snap)
        hold = coalesce and status_may_wait(snap.replica.status, p.status, p.actions)
        actions = [a for a in p.actions if not (hold and isinstance(a, UpdateStatus))]
        for a in actions:
            kinds[a.kind] = kinds.get(a.kind, 0) + 1
        if actions:
            world.apply(actions)
        elif (t := world.next_event_time()) is not None:
            world.advance(t)
        elif steps:
            steps.pop(0)()
        else:
            break
    return kinds, world.snapshot().replica.status


def test_a_rollout_a_crash_and_a_scale_down_take_the_same_pod_actions_with_fewer_writes(
) -> None:
    plain, plain_status = _drive(coalesce=False)
    held, held_status = _drive(coalesce=True)
    assert {k: v for k, v in held.items() if k != "UpdateStatus"} == {
        k: v for k, v in plain.items() if k != "UpdateStatus"}
    assert held["UpdateStatus"] < plain["UpdateStatus"]
    assert (held_status.ready_replicas, held_status.current_revision) == (
        plain_status.ready_replicas, plain_status.current_revision)
    assert held_status.ready_replicas == 1


def test_a_scale_up_whose_pods_do_not_all_go_out_this_pass_is_written_first() -> None:
    """The pods of a fresh scale-up re-derive its rows, so its status may wait; but when
    the pass leaves some of those pods for the next (``creates_per_pass``), the rows must
    be stored, or the next pass would not know those Instances (found with 40 Instances of
    4 pods and native gangs: 32 PodGroups deleted as orphans and made again)."""
    scale_up = InstanceOperation(id="create-1", type="Create", step="CreatePods",
                                 target_revision="r-1", reason="ScaleUp")
    rows = tuple(InstanceStatus(index=i, incarnation=1, phase="Creating", operation=scale_up)
                 for i in range(3))
    grown = InferenceReplicaStatus(replicas=3, instances=rows)
    pods = [CreatePod(body={"metadata": {"name": f"r-{i}-{k}", "labels": {
        "ome.io/instance-index": str(i)}}}) for i in range(3) for k in range(2)]
    api, clock = StatusApi(), Clock()
    everything = Executor(api, CreateErrorStore(), creates_per_pass=0,  # type: ignore[arg-type]
                          coalescer=StatusCoalescer(window=10.0, clock=clock))
    assert _apply(everything, InferenceReplicaStatus(), grown, *pods).status_due == 10.0
    assert api.writes == 0, "every pod went out: the next pass adopts them, the status waits"
    chunked = Executor(api, CreateErrorStore(), creates_per_pass=2,  # type: ignore[arg-type]
                       coalescer=StatusCoalescer(window=10.0, clock=clock))
    result = _apply(chunked, InferenceReplicaStatus(), grown, *pods)
    assert result.deferred_creates == 4 and result.status_due is None and api.writes == 1


def _drive_flushed(kinds_held: frozenset[str | None]) -> tuple[dict[str, int], Any, int]:
    """6 Instances of 2 pods, ``lifecycle.updateStrategy`` RecreatePod with maxUnavailable 2
    (a rollout without surge: SurgeThenDrain does not read maxUnavailable, and with maxSurge
    0 it never moves): two workers crash a second apart (their Instances come back one by
    one, the replica Ready throughout), then a rollout (two Instances at a time) and a
    scale-up. Statuses of ``kinds_held`` wait while the
    world is busy; when it is idle the window ends and the status is written. Returns the
    actions by kind, the last status and the most pods alive before the scale-up."""
    manifest = engine_manifest(workers=1, replicas=6)
    manifest["spec"]["lifecycle"] = {"updateStrategy": {
        "type": "RecreatePod", "rollingUpdate": {"maxUnavailable": 2}}}
    world = World(ClusterSpec(nodes=16, gpus_per_node=2, pod_start_seconds=2,
                              pod_ready_seconds=2), manifest)
    later: list[float] = []
    steps = [
        lambda: (world.fail_pod("chat-engine-engine-1-worker-0"), later.append(world.now + 1.0)),
        lambda: world.patch_replica({"spec": {"runners": engine_manifest(
            workers=1, image="img:2")["spec"]["runners"]}}),
        lambda: world.patch_replica({"spec": {"replicas": 8}}),
    ]
    kinds: dict[str, int] = {}
    peak_pods = 0
    for _ in range(3000):
        if later and world.now >= later[0]:
            later.pop()
            world.fail_pod("chat-engine-engine-4-worker-0")
        snap = world.snapshot()
        if steps:  # the scale-up is the last step
            peak_pods = max(peak_pods, len(snap.pods))
        p = make_plan(snap)
        hold = status_hold(snap.replica.status, p.status, p.actions) in kinds_held
        actions = [a for a in p.actions if not (hold and isinstance(a, UpdateStatus))]
        wake = None if p.requeue_after is None else world.now + p.requeue_after.total_seconds()
        due = [t for t in (world.next_event_time(), *later) if t is not None]
        if not actions and not due and wake is not None and steps == []:
            due = [wake]  # a restart's backoff: the planner asked to look again then
        if not actions and not due:
            actions = [a for a in p.actions if isinstance(a, UpdateStatus)]  # window ends
        for a in actions:
            kinds[a.kind] = kinds.get(a.kind, 0) + 1
        if actions:
            world.apply(actions)
        elif due:
            world.advance(min(due))
        elif steps:
            steps.pop(0)()
        else:
            break
    return kinds, world.snapshot().replica.status, peak_pods


def test_held_readiness_takes_the_same_pod_actions_and_ends_in_the_same_status() -> None:
    """Crashed workers, a rollout and a scale-up, with readiness gains held as long as
    the world is busy: no pod is created, deleted or gated differently, fewer statuses
    are written than when only progress waits, and the last one is the same."""
    plain, plain_status, plain_peak = _drive_flushed(frozenset())
    progress, _, _ = _drive_flushed(frozenset({PROGRESS}))
    held, held_status, held_peak = _drive_flushed(frozenset({PROGRESS, READINESS}))
    # the strategy took effect: every Instance was replaced, never more than 6 x 2 pods
    assert held_peak == plain_peak == 12
    assert held_status.current_revision == held_status.update_revision
    assert held_status.updated_replicas == 8
    assert {k: v for k, v in held.items() if k != "UpdateStatus"} == {
        k: v for k, v in plain.items() if k != "UpdateStatus"}
    assert held["UpdateStatus"] < progress["UpdateStatus"] < plain["UpdateStatus"]
    fields = ("ready_replicas", "available_replicas", "serving_replicas",
              "updated_ready_replicas", "current_revision")
    assert [getattr(held_status, f) for f in fields] == [
        getattr(plain_status, f) for f in fields]
    assert held_status.ready_replicas == 8
    assert [(c.type, c.status, c.reason) for c in held_status.conditions] == [
        (c.type, c.status, c.reason) for c in plain_status.conditions]
