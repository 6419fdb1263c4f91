"""Rollout groups as data: the transition table, its enums and its document."""

from __future__ import annotations

import ast
import importlib
import inspect
import json
from pathlib import Path

import pytest

from omenative_core.rollout import (
    GroupState,
    RolloutState,
    RolloutStateError,
    state_from_json,
    state_to_json,
)
from omenative_core.rollout.machine import (
    TRANSITIONS,
    Move,
    RolloutMachineError,
    enter,
    render_table,
)
from omenative_core.rollout.phases import (
    Failure,
    GroupPhase,
    HoldGate,
    Progression,
    StepGate,
)

ROOT = Path(__file__).resolve().parents[2]
ROLLOUT = ROOT / "src" / "omenative_core" / "rollout"


def test_every_move_has_a_row_and_every_phase_is_entered_and_left() -> None:
    assert set(TRANSITIONS) == set(Move)
    entered = {p for row in TRANSITIONS.values() for p in row.targets}
    left = {p for row in TRANSITIONS.values() if row.sources for p in row.sources}
    assert entered == set(GroupPhase)
    assert left == set(GroupPhase)


def test_each_row_names_a_function_of_the_rollout_package() -> None:
    """``taken in`` points at a real function, so the document leads to the code."""
    for move, row in TRANSITIONS.items():
        module_name, func = row.function.split(".")
        module = importlib.import_module(f"omenative_core.rollout.{module_name}")
        owners = [module, *(c for _, c in inspect.getmembers(module, inspect.isclass))]
        assert any(
            c.__module__ == module.__name__ and func in vars(c)
            for c in owners
            if inspect.isclass(c)
        ) or callable(getattr(module, func, None)), (move, row.function)


def test_the_documented_table_is_current() -> None:
    """docs/rollout-groups.md carries the table as the code has it (``make docs``)."""
    doc = (ROOT / "docs" / "rollout-groups.md").read_text()
    section = doc.split("<!-- BEGIN GENERATED: rollout transitions (make docs) -->\n", 1)[1]
    section = section.split("<!-- END GENERATED: rollout transitions -->", 1)[0]
    assert section == render_table(), "docs/rollout-groups.md is stale: run `make docs`"


def test_enter_takes_a_listed_move_and_refuses_any_other() -> None:
    pending = GroupState(index=0, components=("engine",), phase=GroupPhase.PENDING)
    started = enter(pending, Move.START, GroupPhase.CANARYING, step=0, gate=StepGate.CAPACITY)
    assert (started.phase, started.gate) == (GroupPhase.CANARYING, StepGate.CAPACITY)
    with pytest.raises(RolloutMachineError, match="start"):
        enter(pending, Move.START, GroupPhase.PAUSED)  # start leads to Canarying/Promoting
    with pytest.raises(RolloutMachineError, match="from Stable"):
        enter(GroupState(index=0, components=("engine",)), Move.START, GroupPhase.CANARYING)


def test_a_state_is_written_as_plain_wire_strings_and_read_back_as_members() -> None:
    gs = GroupState(
        index=0,
        components=("engine", "decoder"),
        progression="canary",
        phase="Failed",
        failure="ReadyTimeout",
        gate="Capacity",
    )
    assert gs.phase is GroupPhase.FAILED and gs.gate is StepGate.CAPACITY
    written = state_to_json(RolloutState(groups=(gs,)))
    group = written["groups"][0]
    for key, value in (
        ("progression", "canary"),
        ("phase", "Failed"),
        ("failure", "ReadyTimeout"),
        ("gate", "Capacity"),
    ):
        assert group[key] == value and type(group[key]) is str, key
    back = state_from_json(json.loads(json.dumps(written)))
    assert back.groups[0] == gs
    assert back.groups[0].failure is Failure.READY_TIMEOUT
    assert back.groups[0].progression is Progression.CANARY


@pytest.mark.parametrize("field", ["phase", "gate", "failure", "progression"])
def test_an_unknown_name_in_a_persisted_state_is_refused_naming_the_field(field: str) -> None:
    raw = {"groups": [{"index": 0, "components": ["engine"], field: "Teleporting"}]}
    with pytest.raises(RolloutStateError) as err:
        state_from_json(raw)
    assert f"status.rollout.groups[0].{field}: unknown {field} 'Teleporting'" in str(err.value)


_WIRE = {
    m.value
    for enum in (GroupPhase, StepGate, HoldGate, Progression, Failure)
    for m in enum
    if m.value
}


def _strings(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return [s for elt in node.elts for s in _strings(elt)]
    return []


def test_the_rollout_core_compares_no_phase_gate_progression_or_failure_as_a_string() -> None:
    """Every such comparison uses the enums: a renamed member cannot be missed."""
    found = []
    for path in sorted(ROLLOUT.glob("*.py")):
        if path.name == "phases.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                for side in (node.left, *node.comparators):
                    found += [f"{path.name}:{node.lineno} {s!r}" for s in _strings(side)
                              if s in _WIRE]
            if isinstance(node, ast.keyword) and node.arg in ("phase", "gate", "failure"):
                found += [f"{path.name}:{node.value.lineno} {node.arg}={s!r}"
                          for s in _strings(node.value)]
    assert not found, found
