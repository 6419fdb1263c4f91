"""Waiting for the cluster to get somewhere: ``eventually`` and what counts as "not yet".

The integration tests and the recorders under them (``serving_record``) wait the same way:
poll a check until it passes, and tell "not yet" (a falsy result, a failed ``assert``, an
answer the cluster gives while it is still getting there) from a check that is broken or a
state that is terminal, which is raised at once instead of waiting out the timeout.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from omenative_controller.kube.errors import ApiError

__all__ = ["NOT_YET_STATUSES", "eventually", "not_yet"]

T = TypeVar("T")

NOT_YET_STATUSES = frozenset({0, 403, 404, 409, 429})
"""API answers a check may get while the cluster is still getting there: no answer, not
allowed yet (RBAC in force a moment after its grant), not there yet, a conflict, throttled
(and every 5xx). Any other status (400, 401, 405, 410, 422...) says the request itself is
wrong, and no waiting will change that."""


def not_yet(exc: BaseException) -> bool:
    """Whether an exception a check raised means "not yet" (``eventually`` tries again): a
    failed ``assert``, a key or item not there yet, or an API answer of
    ``NOT_YET_STATUSES`` or 5xx. Anything else is a broken check or a terminal state."""
    if isinstance(exc, AssertionError | LookupError):
        return True
    if isinstance(exc, ApiError):
        return exc.status in NOT_YET_STATUSES or exc.status >= 500
    return False


async def eventually(
    check: Callable[[], Awaitable[T]],
    *,
    timeout: float = 60.0,
    interval: float = 0.25,
    what: str = "condition",
) -> T:
    """Poll ``check`` until it returns something truthy; fail with the last value seen.

    "Not yet" is a falsy result or an exception ``not_yet`` accepts; any other exception
    (a ``TypeError`` in the check, a 422, ``pytest.fail`` for a process that exited, the
    manager's own error) is raised at once, so a check that can never pass does not wait
    out its timeout and then report a stale "last" value.
    """
    deadline = time.monotonic() + timeout
    last: Any = None
    while True:
        try:
            result = await check()
            if result:
                return result
            last = result
        except Exception as exc:
            if not not_yet(exc):
                exc.add_note(f"(raised at once while waiting for {what}: not a 'not yet')")
                raise
            last = exc
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}; last: "
                                 f"{last!r}"[:3000])
        await asyncio.sleep(interval)
