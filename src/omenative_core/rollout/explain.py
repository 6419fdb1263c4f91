"""``explain``: one line saying which gate holds the rollout and what would release it."""

from __future__ import annotations

from datetime import datetime

from omenative_core.model.timefmt import to_second
from omenative_core.revisions import hash_of
from omenative_core.rollout.decision import RolloutDecision
from omenative_core.rollout.passstate import group_label, short_duration
from omenative_core.rollout.phases import FORWARD, GroupPhase, HoldGate, StepGate
from omenative_core.rollout.spec import CanaryStep, RolloutGroup, RolloutSpec
from omenative_core.rollout.state import GroupState, RolloutState
from omenative_core.rollout.verbs import ANNOTATION_PROMOTE, ANNOTATION_REPIN

__all__ = ["explain", "explain_decision", "explain_group"]

_RUNNING = frozenset(
    {*FORWARD, GroupPhase.PENDING, GroupPhase.FAILED, GroupPhase.ROLLING_BACK}
)


def _promote_hint(gs: GroupState) -> str:
    hashes = sorted(hash_of(r) for r in gs.canary.values() if hash_of(r))
    value = hashes[0] if hashes else "<canary hash>"
    return f"kubectl ome rollout promote ({ANNOTATION_PROMOTE}={value})"


_RELEASE: dict[str, str] = {
    HoldGate.PLAN: "releases when the reason clears (resume the rollout, or the member appears)",
    HoldGate.PAIRING: "releases when a new-token engine/decoder pair is ready",
    HoldGate.RATIO: "releases when ready engine:decoder is back within tolerance (or raise "
    "maintainRatio.tolerance)",
    HoldGate.SEQUENTIAL: "releases when the earlier group is Stable and the soak has passed",
    HoldGate.BUDGET: "releases when surge room or unavailability budget frees up",
    HoldGate.RETRY_BLOCK: "releases when the failed Instances recover or are retried",
    HoldGate.HELD: "release with ome.io/release-held-revision, push a new revision, or "
    "kubectl ome rollout rollback",
}
"""What releases each rollout hold, by gate."""


def _settled(gs: GroupState) -> str | None:
    """The line for a group outside a forward run (Stable, RolledBack, RollingBack,
    Failed), or None."""
    label = group_label(gs)
    if gs.phase == GroupPhase.STABLE:
        return f"{label} Stable: nothing to roll out"
    if gs.phase == GroupPhase.ROLLED_BACK:
        rejected = ", ".join(sorted(gs.rejected.values()))
        return f"{label} RolledBack: {rejected} rejected; push a new revision to start again"
    if gs.phase == GroupPhase.ROLLING_BACK:
        return (
            f"{label} RollingBack: returning to "
            f"{', '.join(sorted(gs.stable[c] for c in gs.rejected if c in gs.stable))}; "
            "finishes when every Instance is back"
        )
    if gs.phase == GroupPhase.FAILED:
        return f"{label} Failed ({gs.failure or 'unknown'}): rolling back on the next pass"
    return None


def _analysis_line(gs: GroupState, step: CanaryStep, now: datetime) -> str:
    """What the Analysis gate has measured so far and what releases it."""
    assert step.analysis is not None
    an = gs.analysis
    failures = an.failures if an is not None else 0
    last = an.history[-1] if an is not None and an.history else None
    detail = f"; last round {last.outcome}: {last.detail}" if last is not None else ""
    nxt = ""
    if an is not None and an.pending_round is not None:
        nxt = f"; round {an.pending_round} is being measured"
    elif an is not None and an.next_at is not None:
        nxt = f"; next round in {short_duration(an.next_at - now)}"
    return (
        f"analysis, {failures}/{step.analysis.effective_failure_limit} failed rounds"
        f"{nxt}{detail}; releases when a round passes every metric, or with "
        f"{_promote_hint(gs)} --override-analysis"
    )


def _gate_line(gs: GroupState, step: CanaryStep | None, now: datetime) -> str:
    """The gate in force on a running group with no hold, and what releases it."""
    if gs.gate == StepGate.CAPACITY:
        return "waiting for the step's Instances to be ready on the new revision"
    if gs.gate == StepGate.DRAIN:
        return "waiting for the old revision's Instances to drain"
    if gs.gate == StepGate.MANUAL:
        return f"manual pause; release with {_promote_hint(gs)}"
    pause = step.pause if step is not None else None
    if (
        gs.gate == StepGate.PAUSE
        and pause is not None
        and pause.duration is not None
        and gs.step_ready_at
    ):
        until = gs.step_ready_at + pause.duration
        return (
            f"timed pause, {short_duration(until - now)} left; releases by itself "
            "(promote does not shorten it)"
        )
    if gs.gate == StepGate.ANALYSIS and step is not None and step.analysis is not None:
        return _analysis_line(gs, step, now)
    return "advancing"


def explain_group(gs: GroupState, group: RolloutGroup | None, now: datetime) -> str:
    """One line for one group: its phase, the gate in force and what releases it."""
    now = to_second(now)
    steps = len(group.canary.steps) if group is not None and group.canary is not None else 0
    where = f"{group_label(gs)} {gs.phase}"
    if gs.phase in FORWARD and steps:
        where += f" at step {gs.step + 1}/{steps}"
    elif gs.phase == GroupPhase.PROMOTING:
        where += f" at batch {gs.step + 1}"
    hold = gs.hold
    if hold is not None:
        release = _RELEASE.get(hold.gate, "")
        if hold.gate == HoldGate.PAIRING and "promote" in hold.reason:
            release = f"release with {_promote_hint(gs)} or scale to 2+ Instances"
        return f"{where}: {hold.gate} gate: {hold.reason}; {release}".rstrip("; ")
    settled = _settled(gs)
    if settled is not None:
        return settled
    step = (
        group.canary.steps[gs.step]
        if group is not None and group.canary is not None and gs.step < len(group.canary.steps)
        else None
    )
    return f"{where}: {_gate_line(gs, step, now)}"


def explain(
    state: RolloutState | None,
    now: datetime,
    *,
    current_token: str | None = None,
    spec: RolloutSpec | None = None,
) -> str:
    """One line for the whole rollout: the first group in a run that is held or gated
    (or Stable), plus a plan-drift note when the spec's plan differs from the pinned one."""
    if state is None or not state.groups:
        return "no rollout groups"
    pinned = spec if spec is not None else state.pinned
    running = [g for g in state.groups if g.phase in _RUNNING]
    moving = [g for g in running if g.phase != GroupPhase.PENDING]
    order = (
        [g for g in moving if g.hold is not None]
        + [g for g in moving if g.hold is None]
        + [g for g in running if g.phase == GroupPhase.PENDING]
    )
    pick = order[0] if order else None
    if pick is None:
        rolled = [g for g in state.groups if g.phase == GroupPhase.ROLLED_BACK]
        line = (
            explain_group(rolled[0], None, now)
            if rolled
            else "Stable: every group is on its stable revision"
        )
    else:
        group = pinned.groups[pick.index] if pick.index < len(pinned.groups) else None
        line = explain_group(pick, group, now)
        others = len(running) - 1
        if others > 0:
            line += f" (+{others} more group{'s' if others > 1 else ''} in progress)"
    if current_token and state.plan_token and current_token != state.plan_token and running:
        line += (
            f"; plan drifted (pinned {state.plan_token}, spec {current_token}): "
            f"{ANNOTATION_REPIN}={current_token} moves the run"
        )
    return line


def explain_decision(decision: RolloutDecision, now: datetime) -> str:
    """``explain`` of a decision's new state, with its drift note."""
    pinned = decision.state.pinned
    return explain(decision.state, now, current_token=decision.plan_token, spec=pinned)
