"""Stopping child tasks without swallowing a cancel aimed at the one who stops them.

Why: the usual teardown, ``task.cancel()`` then ``with suppress(CancelledError): await
task``, cannot tell the child's CancelledError (expected) from one aimed at the caller
(the caller itself being cancelled while it waits). It swallows both. A loop that stops
children and then goes on (a CRD's informers stopped when the CRD goes, then the next
poll) therefore survives its own cancellation and runs forever; whoever waits for it, the
manager's shutdown for one, waits forever. That happened: a test's manager hung in its
teardown when the cancel came while the CRD poll was stopping the informers of a CRD just
deleted.

:func:`cancel_and_wait` counts the caller's pending cancel requests
(``Task.cancelling()``) before each wait: a CancelledError with no new request is the
child's and is absorbed, one with a new request is the caller's and is raised again
(after every child was asked to stop).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

__all__ = ["cancel_and_wait"]


async def cancel_and_wait(tasks: Iterable[asyncio.Future[Any]], *,
                          errors: bool = False) -> None:
    """Cancel every task and wait until each has ended; a task's own error is ignored,
    or raised with ``errors=True``.

    A cancel of the calling task meanwhile is never swallowed: it is raised again once
    every task was asked to stop (the rest end on their own)."""
    pending = list(tasks)
    for task in pending:
        task.cancel()
    current = asyncio.current_task()
    for task in pending:
        before = current.cancelling() if current is not None else 0
        try:
            await task
        except asyncio.CancelledError:
            if current is not None and current.cancelling() > before:
                raise
        except Exception:
            if errors:
                raise
