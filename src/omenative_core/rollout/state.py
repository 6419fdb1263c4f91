"""Rollout groups: the persisted run state and its codec.

``RolloutState`` is what the controller must remember between passes (design: level
triggered, so it lives in status): the pinned plan and its token, and per group the phase,
the current step, when it was entered and became ready, the analysis so far, the stable,
canary and rejected revision of every member, and the last hold. ``state_to_json`` /
``state_from_json`` are its codec; timestamps have second precision so a state written and
read back is equal to the one decided.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from attrs import field, frozen

from omenative_core.model.spec import COMPONENTS
from omenative_core.model.status import RolloutHold
from omenative_core.model.timefmt import format_time, parse_time
from omenative_core.rollout.model import drop_none, parse_rollout, show_value
from omenative_core.rollout.phases import SETTLED, Failure, GroupPhase, Progression, StepGate
from omenative_core.rollout.spec import RolloutSpec, RolloutSpecError

__all__ = [
    "AnalysisRound",
    "AnalysisState",
    "GroupState",
    "RolloutState",
    "RolloutStateError",
    "state_from_json",
    "state_to_json",
]


class RolloutStateError(ValueError):
    """A persisted rollout state that cannot be read; the message names the JSON path."""


def _phase(value: str) -> GroupPhase:
    return GroupPhase(value)


def _progression(value: str) -> Progression:
    return Progression(value)


def _gate(value: str) -> StepGate:
    return StepGate(value)


def _failure(value: str) -> Failure:
    return Failure(value)


# --------------------------------------------------------------------------------------------
# state


@frozen(kw_only=True)
class AnalysisRound:
    """One evaluated analysis round: ``Pass``, ``Fail`` or ``Inconclusive``, and why."""

    round: int
    at: datetime
    outcome: str
    detail: str = ""


@frozen(kw_only=True)
class AnalysisState:
    """The analysis of the current step: rounds so far, failures, the round in flight."""

    step: int
    rounds: int = 0
    failures: int = 0
    inconclusive: int = 0
    next_at: datetime | None = None
    pending_round: int | None = None
    pending_since: datetime | None = None
    passed: bool = False
    history: tuple[AnalysisRound, ...] = ()


@frozen(kw_only=True)
class GroupState:
    """One group's progress through the current run.

    ``step`` is 0-based: the canary step, or the blueGreen/rollingUpdate batch (batch ``s``
    allows ``(s+1) * batch`` Instances). ``stable`` / ``canary`` / ``rejected`` map each
    member to a revision name; ``gate`` names the step gate in force (``Capacity``,
    ``Analysis``, ``Pause``, ``Manual``, ``Drain``) and ``hold`` the rollout hold, if any.
    """

    index: int
    components: tuple[str, ...]
    progression: Progression = field(default=Progression.BLUE_GREEN, converter=_progression)
    phase: GroupPhase = field(default=GroupPhase.STABLE, converter=_phase)
    step: int = 0
    step_entered_at: datetime | None = None
    step_ready_at: datetime | None = None
    ready_clock: datetime | None = None
    stable: Mapping[str, str] = field(factory=dict)
    canary: Mapping[str, str] = field(factory=dict)
    rejected: Mapping[str, str] = field(factory=dict)
    analysis: AnalysisState | None = None
    stable_at: datetime | None = None
    failure: Failure = field(default=Failure.NONE, converter=_failure)
    gate: StepGate = field(default=StepGate.NONE, converter=_gate)
    hold: RolloutHold | None = None
    pairing_override: int | None = None

    @property
    def active(self) -> bool:
        """A run is under way (not settled at Stable or RolledBack)."""
        return self.phase not in SETTLED


@frozen(kw_only=True)
class RolloutState:
    """Everything the rollout controller remembers: the pinned plan and every group."""

    plan_token: str = ""
    plan: Mapping[str, Any] = field(factory=dict)
    groups: tuple[GroupState, ...] = ()

    @property
    def pinned(self) -> RolloutSpec:
        """The pinned plan, parsed."""
        return parse_rollout(self.plan) if self.plan else RolloutSpec()

    @property
    def active(self) -> bool:
        """Some group is in a run."""
        return any(g.active for g in self.groups)


def _t(value: datetime | None) -> str | None:
    return None if value is None else format_time(value)


def _hold_json(h: RolloutHold | None) -> dict[str, Any] | None:
    if h is None:
        return None
    return drop_none(
        {
            "gate": str(h.gate),
            "reason": h.reason or None,
            "target": h.target or None,
            "since": _t(h.since),
        }
    )


def _analysis_json(a: AnalysisState | None) -> dict[str, Any] | None:
    if a is None:
        return None
    return drop_none(
        {
            "step": a.step,
            "rounds": a.rounds or None,
            "failures": a.failures or None,
            "inconclusive": a.inconclusive or None,
            "nextAt": _t(a.next_at),
            "pendingRound": a.pending_round,
            "pendingSince": _t(a.pending_since),
            "passed": a.passed or None,
            "history": [
                drop_none(
                    {
                        "round": r.round,
                        "at": _t(r.at),
                        "outcome": str(r.outcome),
                        "detail": r.detail or None,
                    }
                )
                for r in a.history
            ]
            or None,
        }
    )


def _group_state_json(g: GroupState) -> dict[str, Any]:
    return drop_none(
        {
            "index": g.index,
            "components": list(g.components),
            "progression": g.progression.value,
            "phase": g.phase.value,
            "step": g.step,
            "stepEnteredAt": _t(g.step_entered_at),
            "stepReadyAt": _t(g.step_ready_at),
            "readyClock": _t(g.ready_clock),
            "stable": dict(sorted(g.stable.items())) or None,
            "canary": dict(sorted(g.canary.items())) or None,
            "rejected": dict(sorted(g.rejected.items())) or None,
            "analysis": _analysis_json(g.analysis),
            "stableAt": _t(g.stable_at),
            "failure": g.failure.value or None,
            "gate": g.gate.value or None,
            "hold": _hold_json(g.hold),
            "pairingOverride": g.pairing_override,
        }
    )


def state_to_json(state: RolloutState) -> dict[str, Any]:
    """The state as compact JSON for ``status`` (omitting empty fields)."""
    return drop_none(
        {
            "planToken": state.plan_token or None,
            "plan": dict(state.plan) or None,
            "groups": [_group_state_json(g) for g in state.groups] or None,
        }
    )


_E = TypeVar("_E", bound=StrEnum)


class _Reader:
    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, path: str, message: str) -> RolloutStateError:
        return RolloutStateError(f"{path}: {message}")

    def obj(self, value: object, path: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(path, f"expected an object, got {show_value(value)}")
        return value

    def opt_obj(self, value: object, path: str) -> Mapping[str, Any] | None:
        return None if value is None else self.obj(value, path)

    def integer(self, value: object, path: str, default: int | None = 0) -> int:
        if value is None and default is not None:
            return default
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(path, f"expected an integer, got {show_value(value)}")
        return value

    def opt_int(self, value: object, path: str) -> int | None:
        return None if value is None else self.integer(value, path)

    def text(self, value: object, path: str, default: str = "") -> str:
        if value is None:
            return default
        if not isinstance(value, str):
            raise self.fail(path, f"expected a string, got {show_value(value)}")
        return value

    def time(self, value: object, path: str) -> datetime | None:
        if value is None:
            return None
        try:
            return parse_time(value)
        except ValueError as exc:
            raise self.fail(path, str(exc)) from None

    def str_map(self, value: object, path: str) -> dict[str, str]:
        if value is None:
            return {}
        data = self.obj(value, path)
        return {str(k): self.text(v, f"{path}.{k}") for k, v in data.items()}

    def items(self, value: object, path: str) -> list[Any]:
        if value is None:
            return []
        if not isinstance(value, list | tuple):
            raise self.fail(path, f"expected a list, got {show_value(value)}")
        return list(value)

    def member(self, kind: type[_E], value: object, path: str, what: str, default: _E) -> _E:
        text = self.text(value, path, default.value)
        try:
            return kind(text)
        except ValueError:
            raise self.fail(path, f"unknown {what} {text!r}") from None


def state_from_json(obj: object, *, path: str = "status.rollout") -> RolloutState:
    """Read a state written by ``state_to_json``; None means no state yet."""
    if obj is None:
        return RolloutState()
    r = _Reader(path)
    data = r.obj(obj, path)
    groups: list[GroupState] = []
    for i, raw in enumerate(r.items(data.get("groups"), f"{path}.groups")):
        gp = f"{path}.groups[{i}]"
        g = r.obj(raw, gp)
        hold_raw = r.opt_obj(g.get("hold"), f"{gp}.hold")
        hold = None
        if hold_raw is not None:
            hold = RolloutHold(
                gate=r.text(hold_raw.get("gate"), f"{gp}.hold.gate"),
                reason=r.text(hold_raw.get("reason"), f"{gp}.hold.reason"),
                target=r.text(hold_raw.get("target"), f"{gp}.hold.target"),
                since=r.time(hold_raw.get("since"), f"{gp}.hold.since"),
            )
        an_raw = r.opt_obj(g.get("analysis"), f"{gp}.analysis")
        analysis = None
        if an_raw is not None:
            ap = f"{gp}.analysis"
            history = []
            for j, hr in enumerate(r.items(an_raw.get("history"), f"{ap}.history")):
                hp = f"{ap}.history[{j}]"
                h = r.obj(hr, hp)
                at = r.time(h.get("at"), f"{hp}.at")
                if at is None:
                    raise r.fail(f"{hp}.at", "required")
                history.append(
                    AnalysisRound(
                        round=r.integer(h.get("round"), f"{hp}.round"),
                        at=at,
                        outcome=r.text(h.get("outcome"), f"{hp}.outcome"),
                        detail=r.text(h.get("detail"), f"{hp}.detail"),
                    )
                )
            analysis = AnalysisState(
                step=r.integer(an_raw.get("step"), f"{ap}.step"),
                rounds=r.integer(an_raw.get("rounds"), f"{ap}.rounds"),
                failures=r.integer(an_raw.get("failures"), f"{ap}.failures"),
                inconclusive=r.integer(an_raw.get("inconclusive"), f"{ap}.inconclusive"),
                next_at=r.time(an_raw.get("nextAt"), f"{ap}.nextAt"),
                pending_round=r.opt_int(an_raw.get("pendingRound"), f"{ap}.pendingRound"),
                pending_since=r.time(an_raw.get("pendingSince"), f"{ap}.pendingSince"),
                passed=bool(an_raw.get("passed", False)),
                history=tuple(history),
            )
        components = tuple(
            r.text(c, f"{gp}.components[{j}]")
            for j, c in enumerate(r.items(g.get("components"), f"{gp}.components"))
        )
        for c in components:
            if c not in COMPONENTS:
                raise r.fail(f"{gp}.components", f"unknown component {c!r}")
        phase = r.member(GroupPhase, g.get("phase"), f"{gp}.phase", "phase", GroupPhase.STABLE)
        groups.append(
            GroupState(
                index=r.integer(g.get("index"), f"{gp}.index", default=i),
                components=components,
                progression=r.member(
                    Progression,
                    g.get("progression"),
                    f"{gp}.progression",
                    "progression",
                    Progression.BLUE_GREEN,
                ),
                phase=phase,
                step=r.integer(g.get("step"), f"{gp}.step"),
                step_entered_at=r.time(g.get("stepEnteredAt"), f"{gp}.stepEnteredAt"),
                step_ready_at=r.time(g.get("stepReadyAt"), f"{gp}.stepReadyAt"),
                ready_clock=r.time(g.get("readyClock"), f"{gp}.readyClock"),
                stable=r.str_map(g.get("stable"), f"{gp}.stable"),
                canary=r.str_map(g.get("canary"), f"{gp}.canary"),
                rejected=r.str_map(g.get("rejected"), f"{gp}.rejected"),
                analysis=analysis,
                stable_at=r.time(g.get("stableAt"), f"{gp}.stableAt"),
                failure=r.member(
                    Failure, g.get("failure"), f"{gp}.failure", "failure", Failure.NONE
                ),
                gate=r.member(StepGate, g.get("gate"), f"{gp}.gate", "gate", StepGate.NONE),
                hold=hold,
                pairing_override=r.opt_int(g.get("pairingOverride"), f"{gp}.pairingOverride"),
            )
        )
    plan = r.opt_obj(data.get("plan"), f"{path}.plan") or {}
    if plan:
        try:
            parse_rollout(plan, path=f"{path}.plan")
        except RolloutSpecError as exc:
            raise RolloutStateError(str(exc)) from None
    return RolloutState(
        plan_token=r.text(data.get("planToken"), f"{path}.planToken"),
        plan=dict(plan),
        groups=tuple(groups),
    )
