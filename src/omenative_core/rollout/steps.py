"""Step sizes: how many Instances of a member a group's step moves to the new revision.

A canary step moves its ``capacity``; a blueGreen or rollingUpdate step moves one more batch
(the group's surge or unavailability budget, a quarter of the member by default). The last
step is the one that moves every Instance.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from omenative_core.model.spec import IntOrStr
from omenative_core.phases import Strategy
from omenative_core.policy import BudgetError, resolve_budget
from omenative_core.rollout.members import MemberView
from omenative_core.rollout.spec import RolloutGroup, canary_capacity

__all__ = ["step_allowance"]


def budget_or_default(value: IntOrStr | None, default: IntOrStr, desired: int) -> int:
    """``value`` resolved against ``desired``; ``default`` when unset or invalid."""
    try:
        return resolve_budget(value if value is not None else default, desired)
    except BudgetError:
        return resolve_budget(default, desired)


def batch_size(group: RolloutGroup, view: MemberView) -> int:
    """Instances a blueGreen / rollingUpdate step adds for one member."""
    desired = view.desired
    if desired <= 0:
        return 1
    ru = group.rolling_update
    if ru is not None:
        if view.strategy == Strategy.SURGE_THEN_DRAIN:
            n = budget_or_default(ru.max_surge, "25%", desired)
        else:
            n = budget_or_default(ru.max_unavailable, "25%", desired)
        return max(n, 1)
    return max(math.ceil(desired / 4), 1)


def step_allowance(group: RolloutGroup, step: int, view: MemberView) -> int:
    """Instances of ``view`` allowed on the new revision at ``step`` (0-based) of ``group``:
    the canary step's capacity, or ``(step + 1)`` blueGreen/rollingUpdate batches."""
    if step < 0:
        return 0
    if group.canary is not None:
        steps = group.canary.steps
        if not steps:
            return view.desired
        return canary_capacity(steps[min(step, len(steps) - 1)].capacity, view.desired)
    return min(view.desired, (step + 1) * batch_size(group, view))


def last_step(group: RolloutGroup, views: Sequence[MemberView]) -> int:
    """The 0-based index of the step that moves every Instance of ``views``."""
    if group.canary is not None:
        return max(len(group.canary.steps) - 1, 0)
    steps = [math.ceil(v.desired / batch_size(group, v)) - 1 for v in views if v.desired > 0]
    return max(steps, default=0)


def dip_budget(group: RolloutGroup, view: MemberView) -> int:
    """Ready Instances a member may take down while it moves (at least 1)."""
    if group.rolling_update is not None:
        value: IntOrStr | None = group.rolling_update.max_unavailable
    else:
        value = view.max_unavailable
    return max(budget_or_default(value, "25%", view.desired), 1)
