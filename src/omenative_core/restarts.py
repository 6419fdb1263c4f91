"""Restart series: how often one Instance has been restarted lately, kept in its own row.

Theory of operation:

1. A whole-Instance restart (and a lost pod's replacement) is one step of the Instance's
   *series*. The n-th step of a series waits ``RestartBackoff.delay(n)`` after the one
   before it (10 s doubling to 5 min by default, kubelet's crash-loop backoff), so a
   crash-looping Instance restarts ever more slowly instead of at the pace of its
   readiness probe.
2. A series ends once the Instance has stayed Ready for ``reset_after`` (10 min) since
   its last restart. Becoming Ready does not end it: that is what let an Instance whose
   worker failed two minutes after every start restart 88 times in 3 hours.
3. ``max_restarts`` restarts within one ``window`` (a window opens at the first restart
   after the last one closed) make the Instance Failed (``RestartLimitExceeded``) instead
   of restarted again; a Failed Instance is out of rotation and keeps its pods until a
   reset or a new revision, so it stops churning pods. A reset or a rebuild at another
   revision starts a new series.
4. The series lives in the row (everything the core remembers is in the status), as a
   ``metav1.Condition`` in the row's ``conditions``: OME's row already carries a list of
   conditions, so no field is added to OME's wire format. Type ``RestartBackoff``,
   status ``True`` while the Instance is not yet Ready after its last restart and
   ``False`` once it is (``lastTransitionTime`` then says since when), ``reason`` the
   cause, and a message that a person reads and this module parses back::

       restart 3 at 2026-01-02T03:04:05Z (2 in the window from 2026-01-02T03:00:00Z)

   A message that does not parse counts as no series (bad data never crashes a pass).
"""

from __future__ import annotations

import re
from datetime import datetime

from attrs import evolve, frozen

from omenative_core.model.config import RestartBackoff
from omenative_core.model.status import Condition, InstanceStatus
from omenative_core.model.timefmt import format_duration, format_time, parse_time

__all__ = [
    "CONDITION",
    "LIMIT_REASON",
    "Series",
    "clear",
    "describe",
    "exhausted",
    "expires_at",
    "mark_ready",
    "next_allowed",
    "read",
    "record",
    "write",
]

CONDITION = "RestartBackoff"
"""The row condition type that holds an Instance's restart series (omenative's)."""

LIMIT_REASON = "RestartLimitExceeded"
"""``lastFailure.reason`` (and the Warning's reason) of an Instance that restarted
``maxRestarts`` times within the window."""

_MESSAGE = re.compile(r"^restart (\d+) at (\S+) \((\d+) in the window from (\S+)\)")


@frozen(kw_only=True)
class Series:
    """One Instance's restarts since it last stayed Ready for ``reset_after``."""

    count: int
    last: datetime
    in_window: int
    window_start: datetime
    cause: str
    ready_since: datetime | None = None
    """When the Instance became Ready after the last restart (None: not yet)."""


def read(row: InstanceStatus) -> Series | None:
    """The row's restart series, or None (no series, or a condition that does not parse)."""
    cond = next((c for c in row.conditions if c.type == CONDITION), None)
    if cond is None:
        return None
    m = _MESSAGE.match(cond.message)
    if m is None:
        return None
    try:
        last, start = parse_time(m.group(2)), parse_time(m.group(4))
    except ValueError:
        return None
    ready = cond.last_transition_time if cond.status == "False" else None
    return Series(count=int(m.group(1)), last=last, in_window=int(m.group(3)),
                  window_start=start, cause=cond.reason or "Restart", ready_since=ready)


def next_allowed(series: Series | None, cfg: RestartBackoff) -> datetime | None:
    """When the next restart of the series may start (None: at once)."""
    if series is None:
        return None
    return series.last + cfg.delay(series.count + 1)


def exhausted(series: Series | None, cfg: RestartBackoff, now: datetime) -> bool:
    """Whether one more restart now would go past ``max_restarts`` within the window."""
    if series is None or cfg.max_restarts is None:
        return False
    return series.in_window >= cfg.max_restarts and now < series.window_start + cfg.window


def record(series: Series | None, cfg: RestartBackoff, now: datetime, cause: str) -> Series:
    """The series after one more restart at ``now``."""
    if series is None:
        return Series(count=1, last=now, in_window=1, window_start=now, cause=cause)
    if now >= series.window_start + cfg.window:
        in_window, start = 1, now
    else:
        in_window, start = series.in_window + 1, series.window_start
    return Series(count=series.count + 1, last=now, in_window=in_window, window_start=start,
                  cause=cause)


def mark_ready(series: Series, now: datetime) -> Series:
    """The Instance is Ready again after its last restart (the reset clock starts)."""
    return series if series.ready_since is not None else evolve(series, ready_since=now)


def expires_at(series: Series, cfg: RestartBackoff) -> datetime | None:
    """When the series ends if the Instance stays Ready (None: it is not Ready yet)."""
    return None if series.ready_since is None else series.ready_since + cfg.reset_after


def describe(series: Series, cfg: RestartBackoff) -> str:
    """The Event text of a restart: its number, the window count and the next wait."""
    limit = f" of {cfg.max_restarts}" if cfg.max_restarts is not None else ""
    return (f"restart {series.count} ({series.in_window}{limit} within "
            f"{format_duration(cfg.window)}); the next waits "
            f"{format_duration(cfg.delay(series.count + 1))}")


def write(row: InstanceStatus, series: Series) -> InstanceStatus:
    """``row`` carrying ``series`` as its ``RestartBackoff`` condition."""
    ready = series.ready_since
    cond = Condition(
        type=CONDITION,
        status="False" if ready is not None else "True",
        last_transition_time=ready if ready is not None else series.last,
        reason=series.cause,
        message=(f"restart {series.count} at {format_time(series.last)} ({series.in_window} "
                 f"in the window from {format_time(series.window_start)})"),
    )
    rest = tuple(c for c in row.conditions if c.type != CONDITION)
    return evolve(row, conditions=(*rest, cond))


def clear(row: InstanceStatus) -> InstanceStatus:
    """``row`` without a restart series."""
    if not any(c.type == CONDITION for c in row.conditions):
        return row
    return evolve(row, conditions=tuple(c for c in row.conditions if c.type != CONDITION))

