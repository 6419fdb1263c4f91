"""Effective lifecycle settings for one InferenceReplica.

Per-field precedence: the replica's ``spec.lifecycle``, then the cluster ``lifecycle``
config, then OME's fixed fallbacks (multi-pod Instances default to whole-Instance restarts
and all-pods-ready; budgets default to 25%).
"""

from __future__ import annotations

import math
from datetime import timedelta

from attrs import frozen

from omenative_core.model.config import LifecycleConfig, RestartBackoff
from omenative_core.model.spec import InferenceReplicaSpec, IntOrStr

__all__ = [
    "RECREATE_ON_RESTART",
    "STRATEGIES",
    "Policy",
    "desired_instances",
    "resolve_budget",
    "resolve_policy",
]

STRATEGIES = ("SurgeThenDrain", "RecreatePod", "InPlaceIfPossible", "InPlaceOnly")
"""Update strategies OME accepts."""

RECREATE_ON_RESTART = "RecreateInstanceOnPodRestart"
"""Restart policy that recreates the whole Instance when one of its pods fails."""


def desired_instances(replicas: int | None) -> int:
    """The Instances ``spec.replicas`` asks for: as in OME, unset or 0 runs one Instance
    (ome-projects/ome, ``InferenceReplicaSpec.Replicas``: "nil or 0 runs one Instance")."""
    return 1 if replicas is None or replicas <= 0 else replicas


class BudgetError(ValueError):
    """A surge or unavailability budget that is neither a count nor ``N%``."""


def resolve_budget(value: IntOrStr, total: int) -> int:
    """A count, or a percentage of ``total`` rounded up (``"25%"`` of 6 is 2)."""
    if isinstance(value, bool):
        raise BudgetError(f"invalid budget {value!r}")
    if isinstance(value, int):
        if value < 0:
            raise BudgetError(f"invalid budget {value!r}: must be >= 0")
        return value
    text = value.strip()
    if text.endswith("%"):
        try:
            pct = int(text[:-1])
        except ValueError as exc:
            raise BudgetError(f"invalid budget {value!r}: expected N or 'N%'") from exc
        if pct < 0:
            raise BudgetError(f"invalid budget {value!r}: must be >= 0")
        return math.ceil(total * pct / 100)
    raise BudgetError(f"invalid budget {value!r}: expected an integer or 'N%'")


@frozen(kw_only=True)
class Policy:
    """The settings the planner acts on, with every default filled in."""

    desired: int
    multi_pod: bool
    restart_policy: str
    strategy: str
    max_surge: int
    max_unavailable: int
    partition: int
    ready_timeout: timedelta | None
    min_ready: timedelta
    migration_mode: str
    mark_not_ready_in_place: bool
    paused: bool
    freeze: bool
    revision_history_limit: int | None
    restart_backoff: RestartBackoff | None = None
    """The component's restart spacing and limit (``lifecycle.restartBackoff``; None: off)."""


def resolve_policy(
    spec: InferenceReplicaSpec, config: LifecycleConfig, *, multi_pod: bool
) -> Policy:
    """Fill in every setting from the spec, the cluster config and OME's fallbacks."""
    desired = desired_instances(spec.replicas)
    lc = spec.lifecycle
    strategy_spec = lc.update_strategy if lc else None
    rolling = strategy_spec.rolling_update if strategy_spec else None
    pacing = spec.pacing
    restart = (lc.restart_policy if lc else None) or (RECREATE_ON_RESTART if multi_pod else "None")
    strategy = (strategy_spec.type if strategy_spec else None) or "SurgeThenDrain"
    surge_value: IntOrStr = (
        rolling.max_surge if rolling and rolling.max_surge is not None else "25%"
    )
    unavailable_value: IntOrStr = "25%"
    if rolling and rolling.max_unavailable is not None:
        unavailable_value = rolling.max_unavailable
    elif pacing and pacing.max_unavailable is not None:
        unavailable_value = pacing.max_unavailable
    partition = 0
    if pacing and pacing.partition is not None:
        partition = pacing.partition
    elif rolling and rolling.partition is not None:
        partition = rolling.partition
    timeout = lc.instance_ready_timeout if lc and lc.instance_ready_timeout else None
    if timeout is None or timeout <= timedelta(0):
        timeout = config.instance_ready_timeout
    mode = (lc.migration_policy.mode if lc and lc.migration_policy else None) or "Auto"
    in_place = strategy_spec.in_place_update_strategy if strategy_spec else None
    mark = True
    if in_place and in_place.mark_not_ready_during_lifecycle is not None:
        mark = in_place.mark_not_ready_during_lifecycle
    history = spec.revision_history_limit
    if history is None:
        history = config.revision_history_limit
    return Policy(
        desired=desired,
        multi_pod=multi_pod,
        restart_policy=restart,
        strategy=strategy,
        max_surge=resolve_budget(surge_value, desired),
        max_unavailable=max(resolve_budget(unavailable_value, desired), 1),
        partition=max(partition, 0),
        ready_timeout=timeout if timeout and timeout > timedelta(0) else None,
        min_ready=timedelta(seconds=max(spec.min_ready_seconds, 0)),
        migration_mode=mode,
        mark_not_ready_in_place=mark,
        paused=spec.paused,
        freeze=spec.paused and spec.pause_mode == "Freeze",
        revision_history_limit=history,
        restart_backoff=config.restart_backoff.for_component(spec.component)
        if config.restart_backoff is not None
        else None,
    )
