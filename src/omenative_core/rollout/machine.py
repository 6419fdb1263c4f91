"""A rollout group's run as one table: each move between phases, where it is taken, why.

Theory of operation:

1. A group's phase changes only through ``enter(gs, move, phase, ...)``, which looks the
   move up in ``TRANSITIONS`` and checks that the group's phase may take it and that
   ``phase`` is one the move leads to. A move outside the table raises
   ``RolloutMachineError``: a bug in omenative, never bad input (a persisted state with an
   unknown phase is refused by ``state_from_json`` before a pass).
2. The steps of a pass (``commands``, ``pinning``, ``progress``) decide *when* a move is
   taken; this table says *from where to where*. A pass may take several moves in a row
   (a rolled-back group that sees a new revision: leave rollback, new run, start).
3. Sources are what the pass's order allows, not only what a healthy run shows: after
   ``_leave_rollback`` no group is rolling back; after ``_try_start`` none is Pending.
4. ``render_table`` writes the table into ``docs/rollout-groups.md`` (``make docs``); a
   test checks the document against the code.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from attrs import evolve, frozen

from omenative_core.rollout.phases import GroupPhase
from omenative_core.rollout.state import GroupState

__all__ = [
    "TRANSITIONS",
    "Move",
    "RolloutMachineError",
    "Transition",
    "enter",
    "render_table",
]

_P = GroupPhase

_ANY = frozenset(GroupPhase)
_NOT_ROLLING_BACK = _ANY - {_P.ROLLING_BACK, _P.ROLLED_BACK}
"""Phases left once ``_leave_rollback`` has run."""
_STARTED = _NOT_ROLLING_BACK - {_P.PENDING, _P.STABLE}
"""Phases left once ``_try_start`` has run: Canarying, Paused, Promoting, Failed."""
_RUNNING = frozenset({_P.CANARYING, _P.PROMOTING})
"""What ``running_phase`` returns: Canarying before the last canary step, else Promoting."""


class Move(StrEnum):
    """One move of a group between phases (a row of ``TRANSITIONS``)."""

    NEW_PLAN = "new plan"
    REPIN = "repin"
    ROLLBACK = "rollback"
    AUTO_ROLLBACK = "auto rollback"
    ROLLED_BACK = "rolled back"
    DRAIN_AGAIN = "drain again"
    LEAVE_ROLLBACK = "leave rollback"
    ABANDON = "abandon"
    NEW_RUN = "new run"
    RESTART = "restart"
    START = "start"
    MEMBER_HELD = "member held"
    MEMBER_RELEASED = "member released"
    STEP_NOT_READY = "step not ready"
    READY_TIMEOUT = "ready timeout"
    ANALYSIS_FAILED = "analysis failed"
    GATE_CLOSED = "gate closed"
    DRAIN = "drain"
    FINISH = "finish"
    STAY = "stay at step"
    ADVANCE = "advance"


@frozen
class Transition:
    """One row: where the move is taken, the phases it leaves and enters, and why.

    ``sources`` None: the move builds a group state anew (the plan's groups), so any
    phase the fresh state has is accepted.
    """

    function: str
    sources: frozenset[GroupPhase] | None
    targets: frozenset[GroupPhase]
    when: str
    events: tuple[str, ...] = ()


def _t(
    function: str,
    sources: frozenset[GroupPhase] | None,
    targets: set[GroupPhase],
    when: str,
    events: tuple[str, ...] = (),
) -> Transition:
    return Transition(function, sources, frozenset(targets), when, events)


TRANSITIONS: dict[Move, Transition] = {
    Move.NEW_PLAN: _t(
        "pinning.fresh_groups", None, {_P.STABLE, _P.ROLLED_BACK},
        "no run is under way and the plan's groups changed: idle groups, rejected "
        "revisions kept",
    ),
    Move.REPIN: _t(
        "pinning.refit", None, {_P.STABLE, _P.ROLLED_BACK, _P.PENDING, *_RUNNING},
        "ome.io/rollout-repin moves a run onto the current plan: a group re-enters at the "
        "first step that covers what already runs the new revision",
        ("RolloutPlanRepinned",),
    ),
    Move.ROLLBACK: _t(
        "commands.rollback_verb", _ANY - {_P.STABLE}, {_P.ROLLING_BACK},
        "ome.io/rollout-rollback while the group has a canary",
        ("RolloutRollingBack",),
    ),
    Move.AUTO_ROLLBACK: _t(
        "progress._check_members", frozenset({_P.FAILED}), {_P.ROLLING_BACK},
        "the group failed with AnalysisFailed, AnalysisInconclusive, AnalysisStalled or "
        "ReadyTimeout",
        ("RolloutRollingBack",),
    ),
    Move.ROLLED_BACK: _t(
        "commands.rolling_back", frozenset({_P.ROLLING_BACK}), {_P.ROLLED_BACK},
        "every rejected member is back on its stable revision",
        ("RolloutRolledBack",),
    ),
    Move.DRAIN_AGAIN: _t(
        "commands.rolling_back", frozenset({_P.ROLLED_BACK}), {_P.ROLLING_BACK},
        "a rolled-back member has Instances off its stable revision again",
    ),
    Move.LEAVE_ROLLBACK: _t(
        "progress._leave_rollback", frozenset({_P.ROLLING_BACK, _P.ROLLED_BACK}), {_P.STABLE},
        "a member runs a newer revision, or every member is back on stable in the spec",
        ("RolloutReverted",),
    ),
    Move.ABANDON: _t(
        "progress._follow_revisions", _NOT_ROLLING_BACK, {_P.STABLE},
        "no member runs a new revision any more",
        ("RolloutAbandoned",),
    ),
    Move.NEW_RUN: _t(
        "progress._follow_revisions", frozenset({_P.STABLE}), {_P.PENDING},
        "a member runs a revision other than its stable one",
    ),
    Move.RESTART: _t(
        "progress._follow_revisions", _NOT_ROLLING_BACK, {_P.PENDING},
        "a member of the run moved to yet another revision: the run starts again",
        ("RolloutRestarted",),
    ),
    Move.START: _t(
        "progress._try_start", frozenset({_P.PENDING}), set(_RUNNING),
        "no Sequential, Plan or Ratio hold keeps the run from its first step",
        ("RolloutStarted",),
    ),
    Move.MEMBER_HELD: _t(
        "progress._check_members", _STARTED, {_P.FAILED},
        "a member's new revision is held (failure Held, hold Held)",
        ("RolloutHeld",),
    ),
    Move.MEMBER_RELEASED: _t(
        "progress._check_members", frozenset({_P.FAILED}), set(_RUNNING),
        "the held revision was released",
    ),
    Move.STEP_NOT_READY: _t(
        "progress._check_members", _STARTED, set(_RUNNING),
        "the step's Instances are not ready on the new revision yet (gate Capacity)",
    ),
    Move.READY_TIMEOUT: _t(
        "progress.timeout_or", _STARTED, {_P.FAILED},
        "a canary step was not ready within readyTimeout (failure ReadyTimeout)",
        ("CanaryReadyTimeout",),
    ),
    Move.ANALYSIS_FAILED: _t(
        "progress._at_step", _STARTED, {_P.FAILED},
        "the step's analysis failed, or was inconclusive with onInconclusive Rollback or "
        "RollbackOnStall",
        ("CanaryAnalysisFailed", "CanaryAnalysisInconclusive"),
    ),
    Move.GATE_CLOSED: _t(
        "progress._at_step", _STARTED, {_P.CANARYING, _P.PAUSED},
        "the step's gate is closed: Canarying at Analysis, Paused at Pause or Manual",
    ),
    Move.DRAIN: _t(
        "progress._finish", _STARTED, {_P.PROMOTING},
        "the last step's gate is open; the old revision's Instances drain (gate Drain)",
    ),
    Move.FINISH: _t(
        "progress._finish", _STARTED, {_P.STABLE},
        "every Instance runs the new revision: it becomes stable",
        ("RolloutGroupStable",),
    ),
    Move.STAY: _t(
        "progress._advance", _STARTED, {_P.PAUSED, *_RUNNING},
        "the gate is open but the rollout is paused (hold Plan) or the next step would "
        "leave maintainRatio (hold Ratio)",
    ),
    Move.ADVANCE: _t(
        "progress._advance", _STARTED, set(_RUNNING),
        "the gate is open: on to the next step",
        ("RolloutStepAdvanced",),
    ),
}  # fmt: skip
"""Every move of a rollout group, in the order a run meets them."""


class RolloutMachineError(AssertionError):
    """A step tried a move the table does not list (a bug in omenative, not input)."""


def enter(gs: GroupState, move: Move, phase: GroupPhase, **changes: Any) -> GroupState:
    """``gs`` in ``phase`` (with ``changes``), after checking the move against the table."""
    row = TRANSITIONS[move]
    if (row.sources is not None and gs.phase not in row.sources) or phase not in row.targets:
        raise RolloutMachineError(
            f"group {gs.index}: the move {move!r} may not go from {gs.phase} to {phase}"
        )
    return evolve(gs, phase=phase, **changes)


def _phases(values: frozenset[GroupPhase] | None) -> str:
    if values is None:
        return "(new)"
    if values == _ANY:
        return "any"
    return ", ".join(p.value for p in GroupPhase if p in values)


def render_table() -> str:
    """``TRANSITIONS`` as a Markdown table (the generated section of
    ``docs/rollout-groups.md``)."""
    lines = [
        "| move | from | to | taken in | when | events |",
        "|---|---|---|---|---|---|",
    ]
    for move, row in TRANSITIONS.items():
        events = ", ".join(f"`{e}`" for e in row.events) or "—"
        lines.append(
            f"| {move.value} | {_phases(row.sources)} | {_phases(row.targets)} "
            f"| `{row.function}` | {row.when} | {events} |"
        )
    return "\n".join(lines) + "\n"
