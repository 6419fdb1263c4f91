"""The rollout's outputs: one pass's ``RolloutDecision`` and its parts (per-member writes,
events, analysis queries)."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import timedelta

from attrs import frozen

from omenative_core.model.spec import Pacing, RollingUpdate
from omenative_core.model.status import RolloutHold, TrafficTarget
from omenative_core.rollout.state import RolloutState

__all__ = ["AnalysisQuery", "ComponentDecision", "RolloutDecision", "RolloutEvent"]


@frozen(kw_only=True)
class AnalysisQuery:
    """A Prometheus query to run now; feed the result back as an ``AnalysisMeasurement``
    with the same ``id`` (ids are stable, so a query asked twice is the same query)."""

    id: str
    group: int
    step: int
    round: int
    metric: str
    query: str
    operator: str
    threshold: float


@frozen(kw_only=True)
class RolloutEvent:
    """A Kubernetes Event for the InferenceService, and for the InferenceReplica of each of
    ``components`` (the members of the group it is about; none for run-wide events)."""

    type: str
    reason: str
    message: str
    components: tuple[str, ...] = ()


@frozen(kw_only=True)
class ComponentDecision:
    """What to write on one member's InferenceReplica, and what to report for it."""

    component: str
    group: int
    phase: str
    allowed: int
    pacing: Pacing
    rolling_update: RollingUpdate | None = None
    traffic: tuple[TrafficTarget, ...] = ()
    hold: RolloutHold | None = None
    coordination_group_ref: str = ""


@frozen(kw_only=True)
class RolloutDecision:
    """One pass's decision: per-member writes, the state to persist, events, annotations to
    remove, analysis queries to run now, and when to look again (None: on change only)."""

    components: Mapping[str, ComponentDecision]
    state: RolloutState
    events: tuple[RolloutEvent, ...] = ()
    remove_annotations: tuple[str, ...] = ()
    queries: tuple[AnalysisQuery, ...] = ()
    requeue_after: timedelta | None = None
    plan_token: str = ""

    @property
    def drifted(self) -> bool:
        """The spec's plan differs from the pinned one (a repin would move the run)."""
        return bool(self.state.plan_token) and self.state.plan_token != self.plan_token
