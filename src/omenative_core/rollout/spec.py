"""Rollout groups: the ``spec.rollout`` types and the cluster's rollout settings.

Frozen attrs types for an InferenceService's ``spec.rollout`` (groups, their canary steps,
analysis, blueGreen and rollingUpdate settings, ``maintainRatio``) and ``RolloutConfig``,
the cluster's defaults. ``model`` reads and writes them as JSON; ``state`` is what a run
remembers between passes.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from datetime import timedelta

from attrs import field, frozen

from omenative_core.model.spec import IntOrStr
from omenative_core.rollout.phases import (
    GroupOrdering,
    GroupPhase,
    OnInconclusive,
    Progression,
    StepGate,
)

__all__ = [
    "ANALYSIS_OPERATORS",
    "GROUP_ORDERINGS",
    "ON_INCONCLUSIVE",
    "PHASES",
    "Analysis",
    "CanaryStep",
    "GroupBlueGreen",
    "GroupCanary",
    "GroupRollingUpdate",
    "MaintainRatio",
    "Metric",
    "Pause",
    "Problem",
    "PrometheusSource",
    "RolloutConfig",
    "RolloutGroup",
    "RolloutSpec",
    "RolloutSpecError",
    "canary_capacity",
]


PHASES = tuple(p.value for p in GroupPhase)
"""Rollout group phases, as OME names them (blueGreen and rollingUpdate groups use the
same set: they are ``Promoting`` while they roll)."""

ANALYSIS_OPERATORS = ("LT", "LTE", "GT", "GTE")
"""Comparison operators of an analysis metric: the metric value OP threshold must hold."""

ON_INCONCLUSIVE = tuple(o.value for o in OnInconclusive)
"""What an inconclusive analysis round does."""

GROUP_ORDERINGS = tuple(o.value for o in GroupOrdering)
"""Accepted ``groupOrdering`` values (Sequential is the default)."""

PLAN_TOKEN_PREFIX = "rp1:"


# --------------------------------------------------------------------------------------------
# problems


@frozen(kw_only=True)
class Problem:
    """One thing wrong with a rollout spec: OME's reason, a message and the JSON path."""

    reason: str
    message: str
    path: str


class RolloutSpecError(ValueError):
    """``spec.rollout`` JSON that does not fit the types; ``problems`` lists every issue."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        first = self.problems[0] if self.problems else Problem(reason="", message="", path="")
        super().__init__(f"{first.path}: {first.message}" if self.problems else "invalid")


# --------------------------------------------------------------------------------------------
# spec types


@frozen(kw_only=True)
class Metric:
    """One Prometheus query of an analysis: passes when ``value OPERATOR threshold``."""

    name: str
    query: str
    operator: str
    threshold: float

    def passes(self, value: float) -> bool:
        """Whether ``value`` satisfies the metric (an unknown operator never passes)."""
        if self.operator == "LT":
            return value < self.threshold
        if self.operator == "LTE":
            return value <= self.threshold
        if self.operator == "GT":
            return value > self.threshold
        if self.operator == "GTE":
            return value >= self.threshold
        return False


@frozen(kw_only=True)
class Analysis:
    """A step's analysis: rounds of every metric, ``interval`` apart after ``initialDelay``."""

    interval: timedelta | None = None
    initial_delay: timedelta | None = None
    failure_limit: int | None = None
    on_inconclusive: str | None = None
    metrics: tuple[Metric, ...] = ()

    @property
    def effective_interval(self) -> timedelta:
        """``interval``, 1m when unset (omenative's default; OME's is not documented)."""
        return self.interval if self.interval and self.interval > timedelta(0) else _MINUTE

    @property
    def effective_failure_limit(self) -> int:
        """``failureLimit``, 1 when unset."""
        return self.failure_limit if self.failure_limit is not None else 1

    @property
    def effective_on_inconclusive(self) -> str:
        """``onInconclusive``, ``Hold`` when unset."""
        return self.on_inconclusive or OnInconclusive.HOLD


@frozen(kw_only=True)
class Pause:
    """A step's pause: timed when ``duration`` is set, manual (``pause: {}``) otherwise."""

    duration: timedelta | None = None


@frozen(kw_only=True)
class CanaryStep:
    """One canary step: how many Instances run the canary, and the gate to pass."""

    capacity: IntOrStr
    traffic: int | None = None
    pause: Pause | None = None
    analysis: Analysis | None = None

    @property
    def gate(self) -> StepGate:
        """``Analysis`` > ``Pause`` (timed) > ``Manual`` > ``Immediate``, OME's order."""
        if self.analysis is not None:
            return StepGate.ANALYSIS
        if self.pause is not None and self.pause.duration is not None:
            return StepGate.PAUSE
        if self.pause is not None:
            return StepGate.MANUAL
        return StepGate.IMMEDIATE


@frozen(kw_only=True)
class PrometheusSource:
    """Where the shell runs analysis queries (omenative reads, never calls it)."""

    provider_ref: str | None = None
    server_address: str | None = None
    auth_ref: str | None = None
    headers: Mapping[str, str] = field(factory=dict)


@frozen(kw_only=True)
class GroupCanary:
    """A canary progression: ordered steps, the last at 100%."""

    steps: tuple[CanaryStep, ...] = ()
    prometheus: PrometheusSource | None = None
    scale_down_delay_seconds: int | None = None
    ready_timeout: timedelta | None = None


@frozen(kw_only=True)
class GroupBlueGreen:
    """A blue-green progression: each member updates at most 25% (rounded up) per step."""


@frozen(kw_only=True)
class GroupRollingUpdate:
    """A rolling progression with group-wide budgets (25% each by default)."""

    max_surge: IntOrStr | None = None
    max_unavailable: IntOrStr | None = None

    @property
    def effective_max_surge(self) -> IntOrStr:
        """``maxSurge``, ``25%`` when unset."""
        return self.max_surge if self.max_surge is not None else "25%"

    @property
    def effective_max_unavailable(self) -> IntOrStr:
        """``maxUnavailable``, ``25%`` when unset."""
        return self.max_unavailable if self.max_unavailable is not None else "25%"


@frozen(kw_only=True)
class MaintainRatio:
    """Keep ready engine:decoder within ``tolerance`` percent of the target ratio."""

    tolerance: int | None = None


@frozen(kw_only=True)
class RolloutGroup:
    """Components that roll together, and how."""

    components: tuple[str, ...] = ()
    order: tuple[str, ...] = ()
    canary: GroupCanary | None = None
    blue_green: GroupBlueGreen | None = None
    rolling_update: GroupRollingUpdate | None = None
    policy_ref: str | None = None
    soak: timedelta | None = None
    maintain_ratio: MaintainRatio | None = None

    @property
    def progression(self) -> Progression:
        """``canary``, ``rollingUpdate`` or ``blueGreen`` (none set means blueGreen)."""
        if self.canary is not None:
            return Progression.CANARY
        if self.rolling_update is not None:
            return Progression.ROLLING_UPDATE
        return Progression.BLUE_GREEN


@frozen(kw_only=True)
class RolloutSpec:
    """``spec.rollout``: up to three ordered groups, the pairing token, the group ordering."""

    groups: tuple[RolloutGroup, ...] = ()
    pairing_protocol: str | None = None
    group_ordering: str | None = None

    @property
    def ordering(self) -> str:
        """``groupOrdering``, ``Sequential`` when unset."""
        return self.group_ordering or GroupOrdering.SEQUENTIAL

    def group_of(self, component: str) -> int | None:
        """The index of the (first) group naming ``component``."""
        for i, group in enumerate(self.groups):
            if component in group.components:
                return i
        return None

    def sequence(self) -> tuple[int, ...]:
        """Indexes of the single-component blueGreen groups, when two or more: they roll
        one at a time, in list order."""
        seq = tuple(
            i
            for i, g in enumerate(self.groups)
            if len(g.components) == 1 and g.progression == Progression.BLUE_GREEN
        )
        return seq if len(seq) >= 2 else ()

    def sequence_wait(self) -> timedelta:
        """The wait between two groups of the sequence: the longest soak but the last's."""
        seq = self.sequence()
        soaks = [self.groups[i].soak for i in seq[:-1]]
        return max((s for s in soaks if s is not None), default=timedelta(0))


_MINUTE = timedelta(minutes=1)


def canary_capacity(capacity: IntOrStr, desired: int) -> int:
    """Instances a step puts on the canary: a count (capped at ``desired``) or ``N%`` of
    ``desired`` rounded up. An unreadable value counts as 100%."""
    if desired <= 0:
        return 0
    if isinstance(capacity, bool):
        return desired
    if isinstance(capacity, int):
        return max(0, min(capacity, desired))
    text = capacity.strip()
    if text.endswith("%"):
        try:
            pct = int(text[:-1])
        except ValueError:
            return desired
        return max(0, min(desired, math.ceil(desired * pct / 100)))
    return desired


# --------------------------------------------------------------------------------------------
# config


@frozen(kw_only=True)
class RolloutConfig:
    """Cluster settings for rollout groups (OME's chart defaults).

    ``default_ready_timeout``: ``rollout.defaultReadyTimeout``; ``default_ratio_tolerance``:
    ``coordination.defaultRatioTolerancePercent``; ``traffic_deadband``:
    ``coordination.trafficWeightDeadbandPercent``; ``max_pinned_plan_bytes``:
    ``rollout.maxPinnedPlanBytes``. A None tolerance means no drift bound for a group
    that sets none, and 0 bytes no cap on a pinned plan (OME's meanings).
    """

    default_ready_timeout: timedelta = timedelta(minutes=15)
    default_ratio_tolerance: int | None = 5
    traffic_deadband: int = 0
    max_pinned_plan_bytes: int = 16384
