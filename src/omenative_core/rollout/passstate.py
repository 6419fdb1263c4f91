"""The state of one rollout pass: its inputs, what it has decided so far, small helpers.

``_PassState`` is the base of the decider: every step of the pass (verbs, pinning, guards,
analysis, progress, the per-member decisions) is a method on a subclass of it, reads the
inputs from it and appends to its accumulators (events, annotations to remove, queries,
timers). One pass, one instance; nothing survives it except the returned decision.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta

from attrs import evolve

from omenative_core.model.status import RolloutHold
from omenative_core.model.timefmt import DurationError, parse_duration, to_second
from omenative_core.revisions import canonical_json
from omenative_core.rollout.decision import AnalysisQuery, RolloutEvent
from omenative_core.rollout.members import AnalysisMeasurement, MemberView
from omenative_core.rollout.model import plan_token, rollout_to_json
from omenative_core.rollout.phases import CLOCK_HOLDS, GroupPhase, HoldGate
from omenative_core.rollout.spec import RolloutConfig, RolloutGroup, RolloutSpec
from omenative_core.rollout.state import GroupState, RolloutState
from omenative_core.rollout.steps import last_step
from omenative_core.rollout.validate import ANNOTATION_READY_TIMEOUT
from omenative_core.rollout.verbs import ANNOTATION_PAUSED, ANNOTATION_ROLLBACK

__all__: list[str] = []


def group_label(gs: GroupState) -> str:
    """How events and holds name a group: ``group 0 (engine+decoder)``."""
    return f"group {gs.index} ({'+'.join(gs.components)})"


def short_duration(value: timedelta) -> str:
    """A duration for a message: ``1h2m``, ``3m4s``, ``5s``."""
    seconds = max(int(value.total_seconds()), 0)
    minutes, secs = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes}m"
    if minutes:
        return f"{minutes}m{secs}s" if secs else f"{minutes}m"
    return f"{secs}s"


class _PassState:
    def __init__(
        self,
        spec: RolloutSpec,
        state: RolloutState | None,
        members: Mapping[str, MemberView],
        now: datetime,
        results: Sequence[AnalysisMeasurement],
        annotations: Mapping[str, str],
        config: RolloutConfig,
    ) -> None:
        self.spec = spec
        self.state = state or RolloutState()
        self.members = members
        self.now = to_second(now)
        self.results = {m.id: m for m in results}
        self.annotations = annotations
        self.config = config
        self.token = plan_token(spec)
        self.plan_json = rollout_to_json(spec)
        self.plan_bytes = len(canonical_json(self.plan_json))
        self.too_big = 0 < config.max_pinned_plan_bytes < self.plan_bytes
        self.events: list[RolloutEvent] = []
        self.remove: list[str] = []
        self.queries: list[AnalysisQuery] = []
        self.timers: list[datetime] = []
        self.again = False
        self.allowed: dict[str, int] = {}
        self.groups: list[GroupState] = []
        self.pinned = spec
        self.pinned_token = self.token
        raw = annotations.get(ANNOTATION_PAUSED, "")
        self.paused = raw.lower() in ("true", "freeze")
        self.rollback_requested = annotations.get(ANNOTATION_ROLLBACK) == "true"
        self.promote: tuple[int, bool] | None = None
        self.promote_used = False
        self.prev_holds: dict[int, RolloutHold | None] = {}

    def event(self, type_: str, reason: str, message: str) -> None:
        """Record a run-wide Event."""
        self.events.append(RolloutEvent(type=type_, reason=reason, message=message))

    def group_event(self, gs: GroupState, type_: str, reason: str, message: str) -> None:
        """Record an Event about ``gs`` (also on its members' InferenceReplicas)."""
        self.events.append(
            RolloutEvent(type=type_, reason=reason, message=message, components=gs.components)
        )

    def drop(self, key: str) -> None:
        """Remove the annotation ``key`` (once acted on or rejected)."""
        if key in self.annotations and key not in self.remove:
            self.remove.append(key)

    def hold(self, gs: GroupState, gate: HoldGate, reason: str) -> GroupState:
        """Set the group's rollout hold; ``since`` survives while gate and target stay."""
        target = ",".join(gs.canary[c] for c in gs.components if c in gs.canary)
        since = self.now
        prev = self.prev_holds.get(gs.index)
        if prev is not None and prev.gate == gate and prev.target == target and prev.since:
            since = prev.since
        clock = self.now if gate in CLOCK_HOLDS else gs.ready_clock
        return evolve(
            gs,
            hold=RolloutHold(gate=gate.value, reason=reason, target=target, since=since),
            ready_clock=clock,
        )

    def views(self, gs: GroupState) -> dict[str, MemberView]:
        """The views of the group's members that exist."""
        return {c: self.members[c] for c in gs.components if c in self.members}

    def running_phase(
        self, group: RolloutGroup, step: int, views: Sequence[MemberView]
    ) -> GroupPhase:
        """``Canarying`` before the last canary step, else ``Promoting``."""
        if group.canary is not None and step < last_step(group, views):
            return GroupPhase.CANARYING
        return GroupPhase.PROMOTING

    def ready_timeout(self, group: RolloutGroup) -> timedelta:
        """How long a step may take to be ready: the annotation, the group's, the cluster's."""
        raw = self.annotations.get(ANNOTATION_READY_TIMEOUT)
        if raw is not None:
            try:
                value = parse_duration(raw)
                if value > timedelta(0):
                    return value
            except DurationError:
                pass
        if group.canary is not None and group.canary.ready_timeout:
            return group.canary.ready_timeout
        return self.config.default_ready_timeout

    def initial_stable(self, component: str) -> str:
        """A member's stable revision when none is remembered: its current one."""
        view = self.members.get(component)
        if view is None:
            return ""
        return view.current_revision or view.revision
