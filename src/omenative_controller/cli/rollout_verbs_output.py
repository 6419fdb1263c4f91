"""Preconditions of the rollout verbs (``promote``, ``rollback``, ``repin``).

Pure: each returns what the verb would write, or why it must refuse, before anything is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from attrs import frozen

from omenative_controller.cli.output_basics import short_revision
from omenative_controller.cli.rollout_output import (
    _PROMOTABLE,
    _REPIN_TOKEN,
    _group_label,
    explain_line,
    rollback_requested,
    spec_plan_token,
)
from omenative_core.revisions import hash_of
from omenative_core.rollout import (
    ANNOTATION_ROLLBACK,
    GroupState,
    RolloutState,
)

# ------------------------------------------------------------ verbs


@frozen(kw_only=True)
class PromoteTarget:
    """What ``rollout promote`` will ask for: the group, the annotation value, and notes on
    what the promote will (not) do at the group's current gate."""

    group: GroupState
    value: str
    notes: tuple[str, ...] = ()


def _no_rollout(isvc: Mapping[str, Any], state: RolloutState) -> str | None:
    if state.groups:
        return None
    if (isvc.get("spec") or {}).get("rollout"):
        return "no rollout yet: the controller has not recorded status.rollout"
    return "no rollout: spec.rollout is not set (each component rolls on its own)"


def _rollback_refusal(isvc: Mapping[str, Any], verb: str) -> str | None:
    value = rollback_requested(isvc)
    if value is None:
        return None
    return (f"a rollback is requested ({ANNOTATION_ROLLBACK}={value}): {verb} is refused "
            "while it is present (it is removed when a new revision appears)")


def promote_target(isvc: Mapping[str, Any], state: RolloutState, now: datetime, *,
                   group: int | None = None,
                   override_analysis: bool = False) -> PromoteTarget | str:
    """The promote to write, or why there is none to write (a refusal message).

    The value is the lowest canary revision hash of the group (the one ``explain`` names);
    without ``group`` the group is the first one at a manual or analysis gate, or with a
    Pairing hold, else the first in a run with a canary."""
    refusal = _rollback_refusal(isvc, "promote") or _no_rollout(isvc, state)
    if refusal:
        return refusal
    if any(g.phase == "RollingBack" for g in state.groups):
        return "a rollback is in progress: nothing to promote"
    candidates = [g for g in state.groups if g.phase in _PROMOTABLE and g.canary]
    if group is not None:
        if not any(g.index == group for g in state.groups):
            return f"no group {group} (groups: " + \
                ", ".join(str(g.index) for g in state.groups) + ")"
        candidates = [g for g in candidates if g.index == group]
    if not candidates:
        return f"no canary to promote: {explain_line(isvc, state, now)}" \
            if group is None else f"group {group} has no canary to promote"
    gated = [g for g in candidates if g.gate in ("Manual", "Analysis")
             or (g.hold is not None and g.hold.gate == "Pairing")]
    gs = (gated or candidates)[0]
    value = sorted(h for h in (hash_of(r) for r in gs.canary.values()) if h)[0]
    notes = []
    if gs.gate == "Analysis" and not override_analysis:
        notes.append("the step is at an analysis gate: the promote waits for a passing round "
                     "unless --override-analysis is given")
    elif gs.gate == "Pause":
        notes.append("the step is at a timed pause: a promote does not shorten it, it is "
                     "consumed when the pause ends")
    elif gs.gate in ("Capacity", "Drain", "") and gs.hold is None:
        notes.append("the step is not at a gate yet: the promote passes the next manual gate")
    return PromoteTarget(group=gs, value=value, notes=tuple(notes))


def rollback_preview(isvc: Mapping[str, Any], state: RolloutState,
                     now: datetime) -> list[str] | str:
    """What a rollback sends back (one line per member), or why it is refused."""
    refusal = _rollback_refusal(isvc, "rollback") or _no_rollout(isvc, state)
    if refusal:
        return refusal
    active = [g for g in state.groups if g.canary and g.phase not in ("Stable", "RolledBack")]
    if not active:
        return f"nothing to roll back: no rollout is in progress " \
               f"({explain_line(isvc, state, now)})"
    return [f"{_group_label(g)}: {c} {short_revision(g.canary[c])} -> "
            f"{short_revision(g.stable.get(c, ''))}"
            for g in active for c in g.components if c in g.canary]


def valid_repin_token(value: str) -> bool:
    """``now`` or ``rp1:`` and 12 lowercase hex digits."""
    return value == "now" or bool(_REPIN_TOKEN.match(value))


def _repin_run_refusal(state: RolloutState) -> str | None:
    """Why the run's own state refuses a repin: rolling back, or no run at all."""
    if any(g.phase == "RollingBack" for g in state.groups):
        return "a rollback is in progress: repin is refused"
    if not state.active:
        return "no run is active: nothing to repin (a new plan applies at once)"
    return None


def repin_refusal(isvc: Mapping[str, Any], state: RolloutState, token: str) -> str | None:
    """Why ``ome.io/rollout-repin=token`` would be rejected now (None: it would apply)."""
    refusal = (
        _rollback_refusal(isvc, "repin") or _no_rollout(isvc, state) or _repin_run_refusal(state)
    )
    if refusal:
        return refusal
    current = spec_plan_token(isvc)
    if current is None:
        return "spec.rollout is missing or does not parse: there is no plan to repin to"
    if token not in ("now", current):
        return f"{token} is not the current plan (spec.rollout is {current})"
    if state.plan_token == current:
        return f"the run already follows {current}: nothing to repin"
    return None
