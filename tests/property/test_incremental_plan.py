"""Incremental planning equals full planning, on every step of the lifecycle machine.

``IncrementalMachine`` runs the whole ``LifecycleMachine`` (spec edits, faults, stale
views, time) but plans each snapshot with ``plan_incremental`` and the memo of the
previous pass, exactly as the manager does, and checks on every step that the plan is the
one ``planner.plan`` computes from scratch for the same snapshot, and the one the full
checks compute without the one-loop shortcuts for steady rows (``fast=False``).

On top of the lifecycle machine's own rules (time passing, spec edits, faults), it plans
snapshots in which exactly one pod changed (readiness lost, a container restarted, a pod
gone, unschedulable), and jumps the clock exactly to the next deadline the last pass
registered: the passes that reuse the kept per-Instance verdicts (``steps.verdicts``)
must still equal the full plan, so a verdict that went stale fails here.

``pods_change_over_passes`` keeps changes across several passes (each pass sees the
changes so far, the same changed objects each time, as the shell's caches hand them
over) that flip an Instance's Ready, serving or availability, then undoes them all: the
replica-wide totals the memo keeps (``steps.totals``: the plain rows counted, the others
read) must follow each flip and its undoing, so a total that goes stale fails here.
"""

from __future__ import annotations

from datetime import timedelta

from attrs import evolve
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import precondition, rule

from omenative_core.incremental import PlanMemo, plan_incremental
from omenative_core.model import Plan, PodView, Snapshot
from omenative_core.model.observed import ContainerView
from omenative_core.planner import plan as full_plan
from omenative_core.planner import plan_pass
from tests.property.test_lifecycle_machine import LifecycleMachine


def changed_pod(pod: PodView, change: str) -> PodView | None:
    """``pod`` after one change a watch event brings (None: the pod is gone)."""
    if change == "gone":
        return None
    if change == "unready":
        return evolve(pod, conditions={**pod.conditions, "Ready": "False"})
    if change == "restarted":
        containers = tuple(evolve(c, restart_count=c.restart_count + 1) for c in pod.containers)
        return evolve(pod, containers=containers or (ContainerView(name="c", restart_count=1),))
    return evolve(  # unschedulable
        pod,
        node_name=None,
        conditions={"PodScheduled": "False"},
        condition_reasons={"PodScheduled": "Unschedulable"},
    )


FLIPS = ("unready", "serving_off", "containers_unready", "gone", "restarted")
"""Changes that flip an Instance's Ready, serving or (through Ready) availability."""


def flipped_pod(pod: PodView, change: str) -> PodView | None:
    """``pod`` after a change that takes its Instance out of Ready or out of rotation."""
    if change == "serving_off":
        return evolve(pod, conditions={**pod.conditions, "ome.io/serving": "False"})
    if change == "containers_unready":
        return evolve(pod, conditions={**pod.conditions, "ContainersReady": "False"})
    return changed_pod(pod, change)


class IncrementalMachine(LifecycleMachine):
    """The lifecycle machine, planning incrementally and checking against a full plan."""

    memo: PlanMemo | None = None
    reused = 0
    partial = 0
    with_totals = 0

    def plan(self, snap: Snapshot) -> Plan:
        kept_totals = self.memo is not None and self.memo.totals is not None
        incremental, memo = plan_incremental(snap, self.memo)
        if memo.reused:
            IncrementalMachine.reused += 1
        if memo.rederived is not None and not memo.reused and snap.pods:
            IncrementalMachine.partial += 1  # a pass that reused per-Instance verdicts
            if kept_totals:
                IncrementalMachine.with_totals += 1  # ... and the kept row totals
        self.memo = memo
        assert incremental == full_plan(snap), "the incremental plan differs from the full plan"
        slow, _ = plan_pass(snap, fast=False)
        assert incremental == slow, "the one-loop checks of steady rows changed the plan"
        return incremental

    @rule(
        data=st.data(),
        change=st.sampled_from(["unready", "restarted", "gone", "unschedulable"]),
    )
    def one_pod_changes(self, data: st.DataObject, change: str) -> None:
        """Plan the settled view with one pod changed (not applied: the next view undoes it)."""
        self.reconcile()
        snap = self.world.snapshot()
        if not snap.pods:
            return
        pods = list(snap.pods)
        at = data.draw(st.integers(0, len(pods) - 1))
        pod = changed_pod(pods[at], change)
        if pod is None:
            del pods[at]
        else:
            pods[at] = pod
        self.plan(evolve(snap, pods=tuple(pods)))

    @rule(
        data=st.data(),
        changes=st.lists(st.sampled_from(FLIPS), min_size=1, max_size=3),
        undo=st.booleans(),
    )
    def pods_change_over_passes(
        self, data: st.DataObject, changes: list[str], undo: bool
    ) -> None:
        """Plan the settled view with the changes so far, one more each pass (not applied:
        the world stays as it is), then (``undo``) the view with every change undone."""
        self.reconcile()
        snap = self.world.snapshot()
        if not snap.pods:
            return
        changed: dict[int, PodView | None] = {}
        for change in changes:
            at = data.draw(st.integers(0, len(snap.pods) - 1))
            if at not in changed:
                changed[at] = flipped_pod(snap.pods[at], change)
            now = (changed.get(k, p) for k, p in enumerate(snap.pods))
            pods = tuple(p for p in now if p is not None)
            self.plan(evolve(snap, pods=pods))
            self.plan(evolve(snap, pods=pods, now=snap.now + timedelta(seconds=1)))
        if undo:
            self.plan(snap)

    @precondition(lambda self: self.memo is not None and bool(self.memo.wakes))
    @rule()
    def next_deadline_due(self) -> None:
        """Plan the view at exactly the earliest deadline the last pass registered (not
        applied: the world's own clock moves only by ``time_passes``)."""
        assert self.memo is not None
        snap = self.world.snapshot()
        self.plan(evolve(snap, now=max(snap.now, self.memo.wakes[0])))


IncrementalMachine.TestCase.settings = settings(
    stateful_step_count=int(__import__("os").environ.get("OMENATIVE_STEPS", "25")),
    max_examples=int(__import__("os").environ.get("OMENATIVE_INCR_EXAMPLES", "40")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    deadline=None,
)
TestIncrementalPlan = IncrementalMachine.TestCase


def test_the_machine_reused_plans() -> None:
    """Guard against a vacuous run: some passes above were answered from the memo, and
    some others rederived only the Instances that changed, with the kept row totals."""
    if not (IncrementalMachine.reused and IncrementalMachine.with_totals):
        TestIncrementalPlan().runTest()
    assert IncrementalMachine.reused > 0
    assert IncrementalMachine.partial > 0
    assert IncrementalMachine.with_totals > 0
