"""Effective lifecycle settings for one InferenceReplica.

Per-field precedence: the replica's ``spec.lifecycle``, then the cluster ``lifecycle``
config, then OME's fixed fallbacks (multi-pod Instances default to whole-Instance restarts
and all-pods-ready; budgets default to 25%).
"""

from __future__ import annotations

import math
from datetime import timedelta
from typing import TypeVar

from attrs import frozen

from omenative_core.model.config import LifecycleConfig, RestartBackoff
from omenative_core.model.spec import (
    InferenceReplicaSpec,
    InPlaceUpdateStrategy,
    IntOrStr,
    LifecycleSpec,
    MigrationPolicy,
    Pacing,
    RollingUpdate,
    UpdateStrategy,
)

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


_NO_LIFECYCLE = LifecycleSpec()
_NO_STRATEGY = UpdateStrategy()
_NO_ROLLING = RollingUpdate()
_NO_PACING = Pacing()
_NO_IN_PLACE = InPlaceUpdateStrategy()
_NO_MIGRATION = MigrationPolicy()
"""Unset blocks read as empty ones, so each setting is its precedence list, no branches."""

_DEFAULT_BUDGET: IntOrStr = "25%"
"""OME's ``maxSurge`` and ``maxUnavailable`` when neither the spec nor its pacing sets one."""

_T = TypeVar("_T")


def _first(*values: _T | None, default: _T) -> _T:
    """The first value that is set (not None), else ``default``: one setting's precedence."""
    for value in values:
        if value is not None:
            return value
    return default


def _ready_timeout(lc: LifecycleSpec, config: LifecycleConfig) -> timedelta | None:
    """The spec's ``instanceReadyTimeout`` when positive, else the cluster's; None: off."""
    timeout = lc.instance_ready_timeout
    if not timeout or timeout <= timedelta(0):
        timeout = config.instance_ready_timeout
    return timeout if timeout and timeout > timedelta(0) else None


def resolve_policy(
    spec: InferenceReplicaSpec, config: LifecycleConfig, *, multi_pod: bool
) -> Policy:
    """Fill in every setting from the spec, the cluster config and OME's fallbacks."""
    desired = desired_instances(spec.replicas)
    lc = spec.lifecycle or _NO_LIFECYCLE
    strategy_spec = lc.update_strategy or _NO_STRATEGY
    rolling = strategy_spec.rolling_update or _NO_ROLLING
    pacing = spec.pacing or _NO_PACING
    in_place = strategy_spec.in_place_update_strategy or _NO_IN_PLACE
    # "" reads as unset for the names (``or``), as OME's defaulting does
    restart = lc.restart_policy or (RECREATE_ON_RESTART if multi_pod else "None")
    surge = _first(rolling.max_surge, default=_DEFAULT_BUDGET)
    unavailable = _first(rolling.max_unavailable, pacing.max_unavailable, default=_DEFAULT_BUDGET)
    partition = _first(pacing.partition, rolling.partition, default=0)
    history = _first(spec.revision_history_limit, config.revision_history_limit, default=None)
    backoff = config.restart_backoff
    return Policy(
        desired=desired,
        multi_pod=multi_pod,
        restart_policy=restart,
        strategy=strategy_spec.type or "SurgeThenDrain",
        max_surge=resolve_budget(surge, desired),
        max_unavailable=max(resolve_budget(unavailable, desired), 1),
        partition=max(partition, 0),
        ready_timeout=_ready_timeout(lc, config),
        min_ready=timedelta(seconds=max(spec.min_ready_seconds, 0)),
        migration_mode=(lc.migration_policy or _NO_MIGRATION).mode or "Auto",
        mark_not_ready_in_place=_first(in_place.mark_not_ready_during_lifecycle, default=True),
        paused=spec.paused,
        freeze=spec.paused and spec.pause_mode == "Freeze",
        revision_history_limit=history,
        restart_backoff=backoff.for_component(spec.component) if backoff is not None else None,
    )
