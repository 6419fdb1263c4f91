"""The Instance lifecycle table (``omenative_core.lifecycle``): complete, closed, documented."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from attrs import evolve
from hypothesis import given
from hypothesis import strategies as st

from omenative_core import lifecycle
from omenative_core.lifecycle import MOVES, End, LifecycleError, Stage, render_table, stage_of
from omenative_core.model.status import InstanceOperation, InstanceStatus
from omenative_core.phases import OpType, Step, Strategy
from omenative_core.policy import resolve_policy
from omenative_core.render import is_multi_pod
from omenative_core.steps import revisions
from omenative_core.steps.state import Continue, MoveResult, PassState
from omenative_core.steps.view import PassView
from omenative_sim.world import ClusterSpec, World

ROOT = Path(__file__).resolve().parents[2]


def _op(
    type_: str, step: str, strategy: str | None = None, surge: int | None = None
) -> InstanceOperation:
    return InstanceOperation(
        id="x", type=type_, step=step, strategy=strategy, surge_index=surge, target_revision="r"
    )


@given(
    type_=st.sampled_from([*OpType, "Resize", ""]),
    step=st.sampled_from([*Step, "Teleport", ""]),
    strategy=st.sampled_from([*Strategy, None, "Other"]),
    surge=st.sampled_from([None, 0, 3]),
)
def test_every_operation_maps_to_one_row_of_its_own_type(
    type_: str, step: str, strategy: str | None, surge: int | None
) -> None:
    """Any (type, step) a status may hold, known or not, has a move; none crashes."""
    stage = stage_of(_op(type_, step, strategy, surge))
    move = MOVES[stage]
    if type_ in set(OpType):
        assert move.op == type_
    else:
        assert stage is Stage.UNKNOWN


def test_update_drain_is_two_moves_that_write_the_same_step() -> None:
    gang = stage_of(_op(OpType.UPDATE, "Drain", Strategy.SURGE_THEN_DRAIN, surge=4))
    recreate = stage_of(_op(OpType.UPDATE, "Drain", Strategy.RECREATE_POD))
    assert gang is Stage.GANG_DRAIN and recreate is Stage.RECREATE_DRAIN
    assert MOVES[gang].handler is not MOVES[recreate].handler
    assert MOVES[gang].step == MOVES[recreate].step == "Drain"


def test_every_stage_has_a_row_and_leads_only_to_rows_or_ends() -> None:
    assert set(MOVES) == set(Stage)
    for stage, move in MOVES.items():
        for nxt in move.leads_to():
            assert nxt in set(Stage) | set(End), (stage, nxt)


def test_the_documented_table_is_current() -> None:
    """docs/lifecycle.md carries the table as the code has it (``make docs`` refreshes it)."""
    doc = (ROOT / "docs" / "lifecycle.md").read_text()
    section = doc.split("<!-- BEGIN GENERATED: lifecycle table (make docs) -->\n", 1)[1]
    section = section.split("<!-- END GENERATED: lifecycle table -->", 1)[0]
    assert section == render_table(), "docs/lifecycle.md is stale: run `make docs`"
    check = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "render_docs.py"), "--check"],
        capture_output=True,
        text=True,
        check=False,
        env={"PYTHONPATH": str(ROOT / "src")},
    )
    assert check.returncode == 0, check.stderr


def _state() -> PassState:
    tpl = {"spec": {"containers": [{"name": "c", "image": "img:1"}]}}
    world = World(
        ClusterSpec(nodes=2, gpus_per_node=1),
        {
            "metadata": {"name": "r", "namespace": "ns"},
            "spec": {"component": "engine", "runners": [{"name": "default", "template": tpl}]},
        },
    )
    snap = world.snapshot()
    spec = snap.replica.spec
    policy = resolve_policy(spec, snap.config, multi_pod=is_multi_pod(spec.runners))
    revs = revisions.resolve_revisions(snap)
    st_ = PassState(view=PassView(snap, policy, revs), advance_fn=lifecycle.advance)
    revisions.record_revisions(st_, revs)
    return st_


def test_a_move_off_the_table_is_refused_with_the_instance_and_stage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A handler that hands over to a stage its row does not list is a bug, caught loudly."""

    def wanders(st_: PassState, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
        return Continue(evolve(row, operation=evolve(op, type=OpType.MIGRATE, step="Drain")))

    monkeypatch.setitem(MOVES, Stage.SURGE, evolve(MOVES[Stage.SURGE], handler=wanders))
    state = _state()
    state.rows[7] = InstanceStatus(
        index=7, operation=_op(OpType.UPDATE, Step.SURGE, Strategy.SURGE_THEN_DRAIN)
    )
    with pytest.raises(LifecycleError, match=r"Instance 7: Update/Surge may not continue to "
                       r"Migrate/Drain"):
        lifecycle.advance(state, 7)


def test_an_unknown_operation_is_dropped_not_fatal() -> None:
    state = _state()
    state.rows[2] = InstanceStatus(index=2, operation=_op("Resize", "Grow"))
    lifecycle.advance(state, 2)
    assert state.rows[2].operation is None
