"""Turns: at most one CPU-heavy section starts per event-loop iteration.

asyncio runs, in one iteration of its loop, every callback that was ready when the
iteration began, and checks its timers and sockets only between iterations. Sixty-four
workers woken together (a watch event burst, a resync, a node change) each plan their
replica as soon as they run, until their first request: at ~2 ms a small replica's pass,
one iteration held the loop for over 100 ms, and every watch, Lease renewal and answer
waited (``benchmarks/bench_controller.py``'s stall column).

``await turns.take()`` before such a section gives it a turn: the first taker goes on at
once; the others queue in arrival order, and each iteration hands the turn to one of them
(its task runs in the next iteration, then the turn passes on). A turn is not a lock: the
section keeps it for no longer than it runs without suspending, and nothing is held while
it awaits (a request, a worker thread). The loop's other callbacks (answers, watch events,
timers) run between two sections as before.
"""

from __future__ import annotations

import asyncio
from collections import deque

__all__ = ["Turns"]


class Turns:
    """Hands out one turn per event-loop iteration, first come first served."""

    def __init__(self) -> None:
        self._handing = False  # a turn was given this iteration; the next is handed on soon
        self._waiters: deque[asyncio.Future[None]] = deque()

    @property
    def waiting(self) -> int:
        """Sections waiting for a turn."""
        return len(self._waiters)

    async def take(self) -> None:
        """Wait for this iteration's turn (at once when nobody had it this iteration)."""
        loop = asyncio.get_running_loop()
        if not self._handing:
            self._handing = True
            loop.call_soon(self._hand_on)
            return
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append(fut)
        await fut  # cancelled while waiting: skipped; after the turn came: it passes on

    def _hand_on(self) -> None:
        """A new iteration: give the turn to the first live waiter (its task runs in the
        next iteration, and this runs again right after it), or free it."""
        while self._waiters:
            fut = self._waiters.popleft()
            if not fut.done():
                fut.set_result(None)
                fut.get_loop().call_soon(self._hand_on)
                return
        self._handing = False
