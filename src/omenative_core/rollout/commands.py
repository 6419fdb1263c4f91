"""The promote and rollback verbs, and rolling a group back (asked for, or after a failure).

A promote passes the gate of the group whose canary revision it names, once; a rollback
sends every active group's members back to their stable revisions, and the group stays
RolledBack (its rejected revisions held) until a newer revision appears.
"""

from __future__ import annotations

from collections.abc import Mapping

from attrs import evolve

from omenative_core.revisions import hash_of
from omenative_core.rollout.machine import Move, enter
from omenative_core.rollout.members import MemberView
from omenative_core.rollout.passstate import _PassState, group_label
from omenative_core.rollout.phases import Failure, GroupPhase, StepGate
from omenative_core.rollout.state import GroupState
from omenative_core.rollout.verbs import (
    ANNOTATION_OVERRIDE_ANALYSIS,
    ANNOTATION_PROMOTE,
    ANNOTATION_ROLLBACK,
    PROMOTE_VALUE,
)

__all__: list[str] = []

PROMOTABLE = frozenset(
    {GroupPhase.PENDING, GroupPhase.CANARYING, GroupPhase.PAUSED, GroupPhase.PROMOTING}
)
"""Phases in which a promote may name the group's canary."""

_ROLLBACK_PHASES = frozenset({GroupPhase.ROLLING_BACK, GroupPhase.ROLLED_BACK})


class _Commands(_PassState):
    def rollback_verb(self) -> None:
        """Act on ``ome.io/rollout-rollback``: roll back every active group, or reject it."""
        if not self.rollback_requested:
            return
        # A group rolled back earlier does not make the request spent: a group that started
        # a run since (a new revision) is rolled back too, or the annotation would stay,
        # refusing every promote and repin, while that run waits forever.
        active = [g for g in self.groups if g.canary and g.phase != GroupPhase.STABLE]
        if active:
            for gs in active:
                i = self.groups.index(gs)
                self.groups[i] = self.start_rollback(
                    gs, Move.ROLLBACK, Failure.ROLLBACK, f"requested by {ANNOTATION_ROLLBACK}"
                )
            return
        if any(g.phase in _ROLLBACK_PHASES for g in self.groups):
            return  # already acted on; it stays until a new revision appears
        self.drop(ANNOTATION_ROLLBACK)
        self.event(
            "Warning", "RolloutRollbackRejected", "rollback rejected: no rollout is in progress"
        )

    def parse_promote(self) -> None:
        """Read ``ome.io/rollout-promote``: the group it names, or reject it."""
        value = self.annotations.get(ANNOTATION_PROMOTE)
        if value is None:
            return

        def reject(why: str) -> None:
            self.drop(ANNOTATION_PROMOTE)
            self.drop(ANNOTATION_OVERRIDE_ANALYSIS)
            self.event("Warning", "RolloutPromoteRejected", f"promote {value!r} rejected: {why}")

        if self.rollback_requested:
            reject("a rollback is in progress")
            return
        if not PROMOTE_VALUE.match(value):
            reject("expected the canary revision hash (at least 6 lowercase letters or digits)")
            return
        for i, gs in enumerate(self.groups):
            if gs.phase not in PROMOTABLE:
                continue
            if any(hash_of(rev).startswith(value) for rev in gs.canary.values()):
                override = self.annotations.get(ANNOTATION_OVERRIDE_ANALYSIS) == "true"
                self.promote = (i, override)
                return
        running = sorted(hash_of(r) for g in self.groups for r in g.canary.values())
        reject(
            "no rollout in progress has that revision"
            + (f" (in progress: {', '.join(running)})" if running else "")
        )

    def use_promote(self, gs: GroupState, reason: str | None) -> bool:
        """Consume the promote aimed at ``gs``; emit RolloutPromoted when it passed a gate."""
        if self.promote is None or self.promote[0] != gs.index or self.promote_used:
            return False
        self.promote_used = True
        self.drop(ANNOTATION_PROMOTE)
        self.drop(ANNOTATION_OVERRIDE_ANALYSIS)
        if reason is not None:
            self.group_event(
                gs, "Normal", "RolloutPromoted", f"{group_label(gs)}: promoted past {reason}"
            )
        return True

    def promote_for(self, gs: GroupState) -> tuple[bool, bool]:
        """(a promote names this group, it overrides analysis)."""
        if self.promote is None or self.promote[0] != gs.index or self.promote_used:
            return (False, False)
        return (True, self.promote[1])

    def start_rollback(self, gs: GroupState, move: Move, failure: Failure, why: str) -> GroupState:
        """Send the group back to its stable revisions (``move``: asked for, or after a
        failure); its canary becomes rejected."""
        rejected = dict(gs.rejected)
        rejected.update(gs.canary)
        self.again = True
        self.group_event(
            gs,
            "Warning",
            "RolloutRollingBack",
            f"{group_label(gs)}: rolling back to "
            f"{', '.join(gs.stable[c] for c in gs.components if c in rejected)} ({why})",
        )
        return enter(
            gs,
            move,
            GroupPhase.ROLLING_BACK,
            canary={},
            rejected=rejected,
            failure=failure,
            gate=StepGate.NONE,
            hold=None,
            analysis=None,
            step_ready_at=None,
            pairing_override=None,
        )

    def rolling_back(self, gs: GroupState, views: Mapping[str, MemberView]) -> GroupState:
        """A rolling-back group: RolledBack once every member is back on stable."""
        done = all(
            views[c].ready_on(gs.stable[c]) >= views[c].desired
            and sum(n for r, n in views[c].instances.items() if r != gs.stable[c]) == 0
            for c in gs.rejected
            if c in views
        )
        if gs.phase == GroupPhase.ROLLING_BACK and done:
            self.group_event(
                gs,
                "Normal",
                "RolloutRolledBack",
                f"{group_label(gs)}: rolled back; rejected "
                f"{', '.join(sorted(gs.rejected.values()))} (held until a new revision)",
            )
            return enter(
                gs, Move.ROLLED_BACK, GroupPhase.ROLLED_BACK, hold=None, gate=StepGate.NONE
            )
        if gs.phase == GroupPhase.ROLLED_BACK and not done:
            return enter(gs, Move.DRAIN_AGAIN, GroupPhase.ROLLING_BACK, gate=StepGate.DRAIN)
        return evolve(gs, gate=StepGate.NONE if done else StepGate.DRAIN)
