"""One group, one pass: follow the members' revisions and advance at most one step.

``progress`` is a chain of named steps; each returns the group and whether the group's pass
ends there (a hold, a wait, a rollback). In order:

1. ``_leave_rollback``: a rolling-back group stays so until its members are back on the
   stable revision or a newer revision appears.
2. ``_follow_revisions``: which members run a new revision (the canary); a member that
   moved again restarts the run from the first step; none left ends it.
3. ``_try_start``: a Pending run starts once the sequence, the pinned-plan limit, a pause
   and the ratio allow it.
4. ``_check_members``: a failure to roll back, a held member or one with failed Instances
   stops the whole group; so does a step whose Instances are not ready yet (with the
   readyTimeout clock running).
5. ``_at_step``: the step's gate (Immediate, Pause, Manual, Analysis); once it opens, the
   last step finishes the run and any other advances to the next.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from attrs import evolve

from omenative_core.rollout.analysisgate import _AnalysisGate
from omenative_core.rollout.machine import Move, enter
from omenative_core.rollout.members import MemberView
from omenative_core.rollout.passstate import group_label, short_duration
from omenative_core.rollout.phases import (
    AUTO_ROLLBACK,
    Failure,
    GateVerdict,
    GroupPhase,
    HoldGate,
    StepGate,
)
from omenative_core.rollout.spec import RolloutGroup
from omenative_core.rollout.state import GroupState
from omenative_core.rollout.steps import last_step, step_allowance
from omenative_core.rollout.verbs import ANNOTATION_ROLLBACK

__all__: list[str] = []

_Step = tuple[GroupState, bool]
"""A step's result: the group, and whether its pass ends here."""


def _idle(gs: GroupState, move: Move, phase: GroupPhase, *, keep_hold: bool = False) -> GroupState:
    """``gs`` with no run (``move`` to ``phase``): every run field cleared."""
    return enter(
        gs,
        move,
        phase,
        canary={},
        step=0,
        step_entered_at=None,
        step_ready_at=None,
        ready_clock=None,
        analysis=None,
        failure=Failure.NONE,
        gate=StepGate.NONE,
        hold=gs.hold if keep_hold else None,
        pairing_override=None,
    )


def _canary_of(gs: GroupState, views: Mapping[str, MemberView]) -> tuple[dict[str, str], bool]:
    """Each member's new revision (members on their stable revision have none), and whether
    a member of the run moved off its canary (the run restarts)."""
    canary = dict(gs.canary)
    restart = False
    for c in gs.components:
        target = views[c].revision
        if target == gs.stable[c]:
            restart = restart or c in canary
            canary.pop(c, None)
        elif canary.get(c) != target:
            restart = restart or c in canary
            canary[c] = target
    return canary, restart


class _Progress(_AnalysisGate):
    def progress(self, old: GroupState, group: RolloutGroup) -> GroupState:
        """The group after this pass (at most one step further)."""
        views = self.views(old)
        stable = {c: old.stable.get(c) or self.initial_stable(c) for c in old.components}
        gs = evolve(old, stable={c: s for c, s in stable.items() if s})
        missing = [c for c in gs.components if c not in views]
        if missing:
            why = f"waiting for the {', '.join(missing)} InferenceReplica"
            return self.hold(gs, HoldGate.PLAN, why)
        steps: Sequence[Callable[[GroupState, RolloutGroup], _Step]] = (
            self._leave_rollback,
            self._follow_revisions,
            self._try_start,
            self._check_members,
        )
        for step in steps:
            gs, done = step(gs, group)
            if done:
                return gs
        return self._at_step(gs, group)

    def _changed(self, gs: GroupState) -> list[MemberView]:
        """The views of the members that run a new revision."""
        return [self.members[c] for c in gs.components if c in gs.canary]

    def _leave_rollback(self, gs: GroupState, group: RolloutGroup) -> _Step:
        """Rolling back, or rolled back: until a newer revision appears."""
        if gs.phase not in (GroupPhase.ROLLING_BACK, GroupPhase.ROLLED_BACK):
            return gs, False
        views = self.views(gs)
        newer = [
            c
            for c in gs.components
            if views[c].revision not in (gs.stable[c], gs.rejected.get(c, gs.stable[c]))
        ]
        reverted = all(views[c].revision == gs.stable[c] for c in gs.components)
        if not newer and not reverted:
            return self.rolling_back(gs, views), True
        self.drop(ANNOTATION_ROLLBACK)
        if reverted:
            self.group_event(
                gs,
                "Normal",
                "RolloutReverted",
                f"{group_label(gs)}: the spec is back on the stable revision",
            )
        left = enter(
            gs,
            Move.LEAVE_ROLLBACK,
            GroupPhase.STABLE,
            rejected={},
            canary={},
            failure=Failure.NONE,
            hold=None,
            gate=StepGate.NONE,
        )
        return left, False

    def _follow_revisions(self, gs: GroupState, group: RolloutGroup) -> _Step:
        """What changed: a new run, a restarted run, or no run any more."""
        canary, restart = _canary_of(gs, self.views(gs))
        if not canary:
            if gs.phase != GroupPhase.STABLE:
                self.group_event(
                    gs,
                    "Normal",
                    "RolloutAbandoned",
                    f"{group_label(gs)}: no member has a new revision any more",
                )
            return _idle(gs, Move.ABANDON, GroupPhase.STABLE), True
        if not (restart or gs.phase == GroupPhase.STABLE):
            return evolve(gs, canary=canary), False
        self.drop(ANNOTATION_ROLLBACK)  # a new revision: the rollback is over
        if restart:
            self.group_event(
                gs,
                "Normal",
                "RolloutRestarted",
                f"{group_label(gs)}: a member moved to a new revision; the run "
                "starts again from the first step",
            )
        move = Move.RESTART if restart else Move.NEW_RUN
        return evolve(_idle(gs, move, GroupPhase.PENDING, keep_hold=True), canary=canary), False

    def _start_blocker(self, gs: GroupState, group: RolloutGroup) -> GroupState | None:
        """The hold that keeps a Pending run from starting, or None."""
        wait = self.sequence_wait(gs)
        if wait is not None:
            name, until = wait
            if until is None:
                return self.hold(gs, HoldGate.SEQUENTIAL, f"Sequential waiting on {name}")
            self.timers.append(until)
            left = until - self.now
            return self.hold(
                gs,
                HoldGate.SEQUENTIAL,
                f"Sequential waiting on {name} (soak, {short_duration(left)} left)",
            )
        if self.too_big:
            return self.hold(
                gs,
                HoldGate.PLAN,
                f"the plan is {self.plan_bytes} bytes, above the "
                f"{self.config.max_pinned_plan_bytes}-byte pinned-plan limit",
            )
        if self.paused:
            return self.hold(gs, HoldGate.PLAN, "rollout paused")
        proposed = {v.component: step_allowance(group, 0, v) for v in self._changed(gs)}
        why = self.ratio_check(gs, group, proposed)
        return None if why is None else self.hold(gs, HoldGate.RATIO, why)

    def _try_start(self, gs: GroupState, group: RolloutGroup) -> _Step:
        """Waiting to start: start the run at its first step when nothing holds it."""
        if gs.phase != GroupPhase.PENDING:
            return gs, False
        blocked = self._start_blocker(gs, group)
        if blocked is not None:
            return blocked, True
        self.again = True
        self.group_event(
            gs,
            "Normal",
            "RolloutStarted",
            f"{group_label(gs)}: rolling out "
            f"{', '.join(gs.canary[c] for c in gs.components if c in gs.canary)} "
            f"({group.progression}, plan {self.pinned_token})",
        )
        started = enter(
            gs,
            Move.START,
            self.running_phase(group, 0, self._changed(gs)),
            step=0,
            step_entered_at=self.now,
            ready_clock=self.now,
            step_ready_at=None,
            hold=None,
            gate=StepGate.CAPACITY,
        )
        return started, False

    def _check_members(self, gs: GroupState, group: RolloutGroup) -> _Step:
        """A failure rolls back; a held or failing member stops the whole group; so does a
        step whose Instances are not ready yet."""
        if gs.phase == GroupPhase.FAILED and gs.failure in AUTO_ROLLBACK:
            return self.start_rollback(gs, Move.AUTO_ROLLBACK, gs.failure, gs.failure), True
        views = self.views(gs)
        changed = self._changed(gs)
        held = [c for c in gs.canary if views[c].held]
        if held:
            if gs.phase != GroupPhase.FAILED:
                self.group_event(
                    gs,
                    "Warning",
                    "RolloutHeld",
                    f"{group_label(gs)}: {', '.join(held)} revision "
                    f"{', '.join(gs.canary[c] for c in held)} is held; the group stops",
                )
            gs = enter(gs, Move.MEMBER_HELD, GroupPhase.FAILED, failure=Failure.HELD)
            return self.hold(
                gs,
                HoldGate.HELD,
                f"{', '.join(f'{c} revision {gs.canary[c]}' for c in held)} is held",
            ), True
        if gs.phase == GroupPhase.FAILED and gs.failure == Failure.HELD:
            phase = self.running_phase(group, gs.step, changed)
            gs = enter(gs, Move.MEMBER_RELEASED, phase, failure=Failure.NONE)
        failing = [c for c in gs.canary if views[c].failed]
        if failing:
            reason = (
                f"{', '.join(failing)} has failed Instances on "
                f"{', '.join(gs.canary[c] for c in failing)}; the group waits for them"
            )
            return self.timeout_or(gs, group, self.hold(gs, HoldGate.RETRY_BLOCK, reason)), True
        alloc = {v.component: step_allowance(group, gs.step, v) for v in changed}
        if not all(v.ready_on(gs.canary[v.component]) >= alloc[v.component] for v in changed):
            phase = self.running_phase(group, gs.step, changed)
            waiting = enter(
                gs,
                Move.STEP_NOT_READY,
                phase,
                gate=StepGate.CAPACITY,
                step_ready_at=None,
                hold=None,
            )
            return self.timeout_or(gs, group, waiting), True
        ready = evolve(
            gs, step_ready_at=gs.step_ready_at or self.now, ready_clock=self.now, hold=None
        )
        return ready, False

    def _pass_gate(
        self, gs: GroupState, group: RolloutGroup, gate: StepGate
    ) -> tuple[GroupState, GateVerdict, str | None]:
        """The step's gate: the group, ``open`` | ``wait`` | ``failed``, and what a promote
        passed (None when no promote was needed)."""
        named, override = self.promote_for(gs)
        if gate == StepGate.ANALYSIS:
            gs, verdict = self.analysis_gate(gs, group)
            if verdict == GateVerdict.WAIT and named and override:
                return gs, GateVerdict.OPEN, "the analysis gate (analysis overridden)"
            return gs, verdict, None
        if gate == StepGate.PAUSE:
            assert group.canary is not None
            pause = group.canary.steps[gs.step].pause
            assert pause is not None and pause.duration is not None
            until = (gs.step_ready_at or self.now) + pause.duration
            if self.now < until:
                self.timers.append(until)
                return gs, GateVerdict.WAIT, None
            return gs, GateVerdict.OPEN, None
        if gate == StepGate.MANUAL and not named:
            return gs, GateVerdict.WAIT, None
        return gs, GateVerdict.OPEN, "a manual pause" if gate == StepGate.MANUAL else None

    def _at_step(self, gs: GroupState, group: RolloutGroup) -> GroupState:
        """The step's Instances are ready: pass its gate, then finish or advance."""
        changed = self._changed(gs)
        phase = self.running_phase(group, gs.step, changed)
        gate = (
            group.canary.steps[gs.step].gate
            if group.canary and group.canary.steps
            else StepGate.IMMEDIATE
        )
        gs, verdict, promoted_past = self._pass_gate(gs, group, gate)
        if verdict == GateVerdict.FAILED:
            self.again = True
            return enter(
                gs, Move.ANALYSIS_FAILED, GroupPhase.FAILED, gate=StepGate.ANALYSIS, hold=None
            )
        if verdict == GateVerdict.WAIT:
            closed = GroupPhase.CANARYING if gate == StepGate.ANALYSIS else GroupPhase.PAUSED
            return enter(gs, Move.GATE_CLOSED, closed, gate=gate)
        if gs.step >= last_step(group, changed):
            return self._finish(gs, changed, promoted_past)
        return self._advance(gs, group, phase, gate, promoted_past)

    def _finish(
        self, gs: GroupState, changed: Sequence[MemberView], promoted_past: str | None
    ) -> GroupState:
        """The last step's gate is open: drain the old revision, then the group is Stable."""
        done = all(
            v.ready_on(gs.canary[v.component]) >= v.desired
            and sum(n for r, n in v.instances.items() if r != gs.canary[v.component]) == 0
            for v in changed
        )
        if promoted_past is not None:
            self.use_promote(gs, promoted_past)
        if not done:
            return enter(gs, Move.DRAIN, GroupPhase.PROMOTING, gate=StepGate.DRAIN)
        self.use_promote(gs, None)
        stable = dict(gs.stable)
        stable.update(gs.canary)
        self.group_event(
            gs,
            "Normal",
            "RolloutGroupStable",
            f"{group_label(gs)}: stable on "
            f"{', '.join(gs.canary[c] for c in gs.components if c in gs.canary)}",
        )
        self.again = True
        return evolve(_idle(gs, Move.FINISH, GroupPhase.STABLE), stable=stable, stable_at=self.now)

    def _advance(
        self,
        gs: GroupState,
        group: RolloutGroup,
        phase: GroupPhase,
        gate: StepGate,
        promoted_past: str | None,
    ) -> GroupState:
        """The gate is open: advance to the next step unless paused or the ratio forbids."""
        if self.paused:
            stay = GroupPhase.PAUSED if gate != StepGate.IMMEDIATE else phase
            return self.hold(
                enter(gs, Move.STAY, stay, gate=gate), HoldGate.PLAN, "rollout paused"
            )
        changed = self._changed(gs)
        proposed = {v.component: step_allowance(group, gs.step + 1, v) for v in changed}
        why = self.ratio_check(gs, group, proposed)
        if why is not None:
            return self.hold(enter(gs, Move.STAY, phase, gate=gate), HoldGate.RATIO, why)
        self.use_promote(gs, promoted_past)
        nxt = gs.step + 1
        self.again = True
        self.group_event(
            gs,
            "Normal",
            "RolloutStepAdvanced",
            f"{group_label(gs)}: step {nxt + 1}/{last_step(group, changed) + 1} "
            + ", ".join(
                f"{c} {proposed[c]}/{self.members[c].desired}"
                for c in gs.components
                if c in proposed
            ),
        )
        return enter(
            gs,
            Move.ADVANCE,
            self.running_phase(group, nxt, changed),
            step=nxt,
            step_entered_at=self.now,
            ready_clock=self.now,
            step_ready_at=None,
            analysis=None,
            gate=StepGate.CAPACITY,
            hold=None,
            pairing_override=None,
        )

    def timeout_or(self, gs: GroupState, group: RolloutGroup, result: GroupState) -> GroupState:
        """A canary step whose Instances are not ready within readyTimeout fails.

        The clock does not run while the Pairing gate holds part of the step back.
        """
        if group.canary is None:
            return result
        alloc = {c: step_allowance(group, gs.step, self.members[c]) for c in gs.canary}
        if self.pairing_cap(gs, alloc)[1] is not None:
            return evolve(result, ready_clock=self.now)
        clock = result.ready_clock or gs.step_entered_at or self.now
        deadline = clock + self.ready_timeout(group)
        if self.now >= deadline:
            self.again = True
            self.group_event(
                gs,
                "Warning",
                "CanaryReadyTimeout",
                f"{group_label(gs)}: step {gs.step + 1} was not ready within "
                f"{short_duration(self.ready_timeout(group))}",
            )
            return enter(
                result,
                Move.READY_TIMEOUT,
                GroupPhase.FAILED,
                failure=Failure.READY_TIMEOUT,
                hold=None,
            )
        self.timers.append(deadline)
        return result
