"""The Instance lifecycle as one table: each move of an open operation and where it leads.

Theory of operation:

1. Everything that decides how an open operation moves is in this file: ``stage_of``
   names the move for an operation's (type, step) and ``MOVES`` maps it to its handler
   and to the stages it may lead to. The handlers (in ``steps/``) decide *when*; this
   table says *where to*.
2. An Instance with an open operation takes one move per pass, except that a move that
   finishes early (a drain whose pods are already gone) hands over to the next stage in
   the same pass (``Continue``), and only to a stage its row lists. ``advance`` checks
   that, so a handler cannot wander off the table.
3. A stage is not always a wire step. ``Drain`` is written for four different moves; the
   table tells them apart by operation type and, for Update, by the pinned strategy and
   ``surgeIndex`` (``Update/Drain`` of a SurgeThenDrain source vs of a RecreatePod).
4. Unknown input is closed, never a crash: an operation type this version does not know
   is dropped, an Update at an unknown step ends (the next pass decides again).
5. This file does not know about budgets, strategies being chosen or migrations being
   accepted: those are passes (``planner.PASSES``) that *open* operations; here they only
   move. Rows without an operation are checked by ``steps.repair.settled``.

``docs/lifecycle.md`` carries this table, rendered by ``render_table`` (``make docs``).
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum

from attrs import evolve, frozen

from omenative_core.model.status import InstanceOperation, InstanceStatus
from omenative_core.phases import OpType, Step, Strategy
from omenative_core.steps import migrations, repair, teardown, update_moves
from omenative_core.steps.state import Continue, MoveResult, PassState
from omenative_core.steps.step_pass import StepPass

__all__ = [
    "MOVES",
    "End",
    "LifecycleError",
    "Move",
    "Stage",
    "advance",
    "drop_operation",
    "render_table",
    "stage_of",
]


class Stage(StrEnum):
    """One move of an open operation (a row of ``MOVES``); the wire step is on the row."""

    CREATE = "Create/CreatePods"
    RESTART_DRAIN = "Restart/Drain"
    RESTART_CREATE = "Restart/CreatePods"
    GANG_TARGET = "Update/GangSurgeTarget"
    GANG_SOURCE = "Update/GangSurge"
    GANG_DRAIN = "Update/Drain[surge-source]"
    SURGE = "Update/Surge"
    SURGE_DRAIN = "Update/SurgeDrain"
    IN_PLACE = "Update/InPlace"
    RECREATE_DRAIN = "Update/Drain[recreate]"
    RECREATE_CREATE = "Update/CreatePods"
    UPDATE_UNKNOWN = "Update/?"
    DELETE = "Delete/Drain"
    MIGRATE_WAIT = "Migrate/CreateSurge"
    MIGRATE_DRAIN = "Migrate/Drain"
    UNKNOWN = "?/?"


class End(StrEnum):
    """Where a move leads when it leads to no further stage."""

    SAME = "same stage"
    SETTLED = "settled"
    FAILED = "Failed"
    REMOVED = "removed"


Next = Stage | End
Handler = Callable[[PassState, InstanceStatus, InstanceOperation], MoveResult]


@frozen
class Move:
    """One row of the table: the handler of a stage and where each outcome leads.

    ``ready``: the attempt serves (or what the source waited for is ready);
    ``progress``: still waiting; ``failure``: the attempt failed;
    ``gone``: what the move drains (or waits on) is gone.
    """

    op: OpType | None
    step: Step | None
    when: str
    handler: Handler
    ready: tuple[Next, ...] = ()
    progress: tuple[Next, ...] = (End.SAME,)
    failure: tuple[Next, ...] = ()
    gone: tuple[Next, ...] = ()

    def leads_to(self) -> frozenset[Next]:
        """Every stage or end this move may lead to."""
        return frozenset((*self.ready, *self.progress, *self.failure, *self.gone))


def drop_operation(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """An operation this version cannot move: drop it; the next pass decides afresh."""
    del st, op
    return evolve(row, operation=None)


MOVES: dict[Stage, Move] = {
    Stage.CREATE: Move(
        OpType.CREATE, Step.CREATE_PODS, "any step", repair.create,
        ready=(End.SETTLED, End.SAME), failure=(End.FAILED, Stage.DELETE),
    ),
    Stage.RESTART_DRAIN: Move(
        OpType.RESTART, Step.DRAIN, "", repair.restart_drain,
        gone=(Stage.RESTART_CREATE,),
    ),
    Stage.RESTART_CREATE: Move(
        OpType.RESTART, Step.CREATE_PODS, "any other step", repair.restart_create,
        ready=(End.SETTLED,), failure=(End.FAILED,),
    ),
    Stage.GANG_TARGET: Move(
        OpType.UPDATE, Step.GANG_SURGE_TARGET, "the replacement row",
        update_moves.gang_surge_target,
        ready=(End.SETTLED, End.SAME), failure=(Stage.DELETE,),
    ),
    Stage.GANG_SOURCE: Move(
        OpType.UPDATE, Step.GANG_SURGE,
        "the source row (Drain[recreate] only if its strategy is not SurgeThenDrain)",
        update_moves.gang_surge,
        ready=(Stage.GANG_DRAIN, Stage.RECREATE_DRAIN), gone=(End.SETTLED,),
    ),
    Stage.GANG_DRAIN: Move(
        OpType.UPDATE, Step.DRAIN, "strategy SurgeThenDrain and surgeIndex set",
        update_moves.gang_drain,
        gone=(End.REMOVED,),
    ),
    Stage.SURGE: Move(
        OpType.UPDATE, Step.SURGE, "single pod: the other ordinal slot", update_moves.surge,
        ready=(Stage.SURGE_DRAIN,), failure=(End.SETTLED,),
    ),
    Stage.SURGE_DRAIN: Move(
        OpType.UPDATE, Step.SURGE_DRAIN, "", update_moves.surge_drain,
        gone=(End.SETTLED,),
    ),
    Stage.IN_PLACE: Move(
        OpType.UPDATE, Step.IN_PLACE, "", update_moves.in_place,
        ready=(End.SETTLED,), failure=(End.FAILED,), gone=(End.SETTLED,),
    ),
    Stage.RECREATE_DRAIN: Move(
        OpType.UPDATE, Step.DRAIN, "any other Update/Drain (RecreatePod)",
        update_moves.recreate_drain,
        gone=(Stage.RECREATE_CREATE,),
    ),
    Stage.RECREATE_CREATE: Move(
        OpType.UPDATE, Step.CREATE_PODS, "", update_moves.recreate_create,
        ready=(End.SETTLED,), failure=(End.FAILED,),
    ),
    Stage.UPDATE_UNKNOWN: Move(
        OpType.UPDATE, None, "a step this version does not know", update_moves.unknown_step,
        progress=(End.SETTLED,),
    ),
    Stage.DELETE: Move(
        OpType.DELETE, Step.DRAIN, "any step", teardown.delete,
        gone=(End.REMOVED,),
    ),
    Stage.MIGRATE_WAIT: Move(
        OpType.MIGRATE, Step.CREATE_SURGE,
        "any step but Drain; migrations.progress sets Drain once the replacement is available",
        migrations.migrate_wait,
        ready=(Stage.MIGRATE_DRAIN,),
    ),
    Stage.MIGRATE_DRAIN: Move(
        OpType.MIGRATE, Step.DRAIN, "", migrations.migrate_drain,
        gone=(End.REMOVED,),
    ),
    Stage.UNKNOWN: Move(
        None, None, "an operation type this version does not know", drop_operation,
        progress=(End.SETTLED,),
    ),
}  # fmt: skip


_UPDATE_STEPS: dict[str, Stage] = {
    Step.GANG_SURGE_TARGET: Stage.GANG_TARGET,
    Step.GANG_SURGE: Stage.GANG_SOURCE,
    Step.SURGE: Stage.SURGE,
    Step.SURGE_DRAIN: Stage.SURGE_DRAIN,
    Step.IN_PLACE: Stage.IN_PLACE,
    Step.DRAIN: Stage.RECREATE_DRAIN,
    Step.CREATE_PODS: Stage.RECREATE_CREATE,
}


_AT_DRAIN_OR_NOT: dict[str, tuple[Stage, Stage]] = {
    OpType.CREATE: (Stage.CREATE, Stage.CREATE),
    OpType.DELETE: (Stage.DELETE, Stage.DELETE),
    OpType.RESTART: (Stage.RESTART_DRAIN, Stage.RESTART_CREATE),
    OpType.MIGRATE: (Stage.MIGRATE_DRAIN, Stage.MIGRATE_WAIT),
}
"""Operation type -> (its stage at step Drain, its stage at any other step)."""


def stage_of(op: InstanceOperation) -> Stage:
    """The move an open operation is at (always a row of ``MOVES``)."""
    if op.type == OpType.UPDATE:
        if (
            op.step == Step.DRAIN
            and op.strategy == Strategy.SURGE_THEN_DRAIN
            and op.surge_index is not None
        ):
            return Stage.GANG_DRAIN
        return _UPDATE_STEPS.get(op.step, Stage.UPDATE_UNKNOWN)
    stages = _AT_DRAIN_OR_NOT.get(op.type)
    if stages is None:
        return Stage.UNKNOWN
    return stages[0] if op.step == Step.DRAIN else stages[1]


class LifecycleError(AssertionError):
    """A handler tried a move the table does not list (a bug in omenative, not input)."""


def advance(st: PassState, index: int) -> None:
    """Take Instance ``index``'s next move (or check its health when it has no operation)."""
    row = st.rows[index]
    op = row.operation
    if op is None:
        st.rows[index] = repair.settled(st, row)
        return
    stage = stage_of(op)
    result = MOVES[stage].handler(st, row, op)
    hops = 0
    while isinstance(result, Continue):
        row = result.row
        op = row.operation
        hops += 1
        if op is None:
            raise LifecycleError(f"Instance {index}: {stage} continued with no operation")
        nxt = stage_of(op)
        if nxt not in MOVES[stage].leads_to() or hops > len(Stage):
            raise LifecycleError(f"Instance {index}: {stage} may not continue to {nxt}")
        stage = nxt
        result = MOVES[stage].handler(st, row, op)
    if result is None:
        del st.rows[index]
    else:
        st.rows[index] = result


def _cell(values: tuple[Next, ...]) -> str:
    return ", ".join(f"`{v}`" if isinstance(v, Stage) else str(v) for v in values) or "—"


def render_table() -> str:
    """``MOVES`` as a Markdown table (the generated section of ``docs/lifecycle.md``)."""
    lines = [
        "| stage | type | step written | when | handler | ready | progress | failure | gone |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for stage, move in MOVES.items():
        handler = move.handler
        name = f"{handler.__module__.rsplit('.', 1)[-1]}.{handler.__name__}"
        lines.append(
            f"| `{stage}` | {move.op or 'other'} | {move.step or '—'} | {move.when or '—'} "
            f"| `{name}` | {_cell(move.ready)} | {_cell(move.progress)} "
            f"| {_cell(move.failure)} | {_cell(move.gone)} |"
        )
    return "\n".join(lines) + "\n"
