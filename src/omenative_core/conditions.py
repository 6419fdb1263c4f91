"""Conditions, with Kubernetes' transition-time rule: the one merge of the project.

A condition's ``lastTransitionTime`` moves only when its status changes, so an unchanged
world produces an identical condition list and no status write. ``build_conditions``
merges an InferenceReplica's typed conditions; ``merge_condition_json`` merges raw JSON
conditions (the InferenceService status, and the shell's rejections); both take the time
from ``transition_time``.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar

from omenative_core.model.status import Condition
from omenative_core.model.timefmt import format_time

__all__ = ["CONDITION_ORDER", "build_conditions", "merge_condition_json", "transition_time"]

_T = TypeVar("_T")

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
        since = transition_time(old.status if old is not None else None,
                                old.last_transition_time if old is not None else None,
                                status, now)
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


def transition_time(old_status: str | None, old_since: _T | None, status: str, now: _T) -> _T:
    """A condition's ``lastTransitionTime``: the old one while its status is unchanged
    (and it has one), else ``now``. Typed (datetime) and raw (string) conditions alike."""
    if old_status is not None and old_status == status and old_since is not None:
        return old_since
    return now


def merge_condition_json(
    previous: object,
    wanted: Sequence[Mapping[str, Any]],
    now: datetime,
    *,
    remove: Collection[str] = (),
    sort: bool = False,
) -> list[dict[str, Any]]:
    """``previous`` (a raw conditions list; anything else counts as empty) with each
    ``wanted`` condition set (``type``, ``status``, ``reason``, ``message``, and any other
    field it carries, such as ``observedGeneration``) and the ``remove`` types dropped.

    A set condition keeps its place (its first one) and the fields it had; a new one goes
    last; a wanted type is set even when it is also in ``remove``; ``sort`` orders the
    result by type. Entries that are not objects with a string ``type`` go."""
    old = ([dict(c) for c in previous if isinstance(c, Mapping) and isinstance(c.get("type"), str)]
           if isinstance(previous, list) else [])
    by_type = {c["type"]: c for c in old}
    stamp = format_time(now)
    entries: dict[str, dict[str, Any]] = {}
    by_wanted = {w["type"] for w in wanted}
    for w in wanted:
        prev = by_type.get(w["type"])
        since = transition_time(
            prev.get("status") if prev is not None else None,
            prev.get("lastTransitionTime") if prev is not None and isinstance(
                prev.get("lastTransitionTime"), str) and prev["lastTransitionTime"] else None,
            str(w["status"]), stamp)
        entry = dict(prev or {})
        entry.update(w)
        entry["lastTransitionTime"] = since
        entries[w["type"]] = entry
    out: list[dict[str, Any]] = []
    for c in old:
        if c["type"] in entries:
            out.append(entries.pop(c["type"]))
        elif c["type"] not in remove and c["type"] not in by_wanted:
            out.append(c)
    out += entries.values()
    return sorted(out, key=lambda c: str(c["type"])) if sort else out
