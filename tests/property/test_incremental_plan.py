"""Incremental planning equals full planning, on every step of the lifecycle machine.

``IncrementalMachine`` runs the whole ``LifecycleMachine`` (spec edits, faults, stale
views, time) but plans each snapshot with ``plan_incremental`` and the memo of the
previous pass, exactly as the manager does, and checks on every step that the plan is the
one ``planner.plan`` computes from scratch for the same snapshot, and the one the full
checks compute without the one-loop shortcuts for steady rows (``fast=False``).
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

from omenative_core.incremental import PlanMemo, plan_incremental
from omenative_core.model import Plan, Snapshot
from omenative_core.planner import plan as full_plan
from omenative_core.planner import plan_pass
from tests.property.test_lifecycle_machine import LifecycleMachine


class IncrementalMachine(LifecycleMachine):
    """The lifecycle machine, planning incrementally and checking against a full plan."""

    memo: PlanMemo | None = None
    reused = 0

    def plan(self, snap: Snapshot) -> Plan:
        incremental, memo = plan_incremental(snap, self.memo)
        if memo.reused:
            IncrementalMachine.reused += 1
        self.memo = memo
        assert incremental == full_plan(snap), "the incremental plan differs from the full plan"
        slow, _ = plan_pass(snap, fast=False)
        assert incremental == slow, "the one-loop checks of steady rows changed the plan"
        return incremental


IncrementalMachine.TestCase.settings = settings(
    stateful_step_count=int(__import__("os").environ.get("OMENATIVE_STEPS", "25")),
    max_examples=int(__import__("os").environ.get("OMENATIVE_INCR_EXAMPLES", "40")),
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    deadline=None,
)
TestIncrementalPlan = IncrementalMachine.TestCase


def test_the_machine_reused_plans() -> None:
    """Guard against a vacuous run: some passes above were answered from the memo."""
    if IncrementalMachine.reused == 0:
        TestIncrementalPlan().runTest()
    assert IncrementalMachine.reused > 0
