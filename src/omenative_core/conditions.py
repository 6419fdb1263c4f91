"""InferenceReplica conditions, with Kubernetes' transition-time rule.

A condition's ``lastTransitionTime`` moves only when its status changes, so an unchanged
world produces an identical condition list and no status write.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from omenative_core.model.status import Condition

__all__ = ["CONDITION_ORDER", "build_conditions"]

CONDITION_ORDER = (
    "Ready",
    "Available",
    "Progressing",
    "RolloutStalled",
    "FailedUpdate",
    "GangSchedulingUnavailable",
    "MigrationPolicyUnconfigured",
    "InstanceReadyTimeoutUnconfigured",
    "DrainOverdue",
)
"""The order conditions are written in; unknown types follow, sorted."""


def build_conditions(
    previous: tuple[Condition, ...],
    wanted: Mapping[str, tuple[str, str, str]],
    now: datetime,
    generation: int,
    *,
    replace_all: bool = True,
) -> tuple[Condition, ...]:
    """Merge ``wanted`` (type -> (status, reason, message)) into the previous conditions.

    With ``replace_all`` the result holds exactly the wanted types; otherwise previous
    types not mentioned are kept unchanged.
    """
    prev = {c.type: c for c in previous}
    out: dict[str, Condition] = {}
    if not replace_all:
        out.update(prev)
    for type_, (status, reason, message) in wanted.items():
        old = prev.get(type_)
        since = now
        if old is not None and old.status == status and old.last_transition_time is not None:
            since = old.last_transition_time
        out[type_] = Condition(
            type=type_,
            status=status,
            reason=reason,
            message=message,
            last_transition_time=since,
            observed_generation=generation,
        )
    rank = {t: i for i, t in enumerate(CONDITION_ORDER)}
    return tuple(out[t] for t in sorted(out, key=lambda t: (rank.get(t, len(rank)), t)))
