"""Turns: the CPU-heavy sections of one event-loop iteration share a small time budget.

asyncio runs, in one iteration of its loop, every callback that was ready when the
iteration began, and checks its timers and sockets only between iterations. Sixty-four
workers woken together (a watch event burst, a resync, a node change) each plan their
replica as soon as they run, until their first request: at ~2 ms a small replica's pass,
one iteration held the loop for over 100 ms, and every watch, Lease renewal and answer
waited (``benchmarks/bench_controller.py``'s stall column). The answers to 32 lanes of
creates, arriving together, did the same on a smaller scale: each resumed its pass or lane
for 0.5-2.5 ms, 60-70 callbacks in one iteration, 10-17 ms in all at 10,000 pods.

``await turns.take()`` before such a section gives it a turn. Each iteration's turns share
``budget`` seconds, counted from the start of the iteration's first section:

- a taker goes on at once while the budget lasts and nobody waits;
- the others queue in arrival order. Each iteration wakes the first ``batch`` of them (their
  tasks run in the next iteration, the first opening its budget): one at first, then as
  many as the budget holds at the last batch's cost a section (at most twice as many);
- ``take(alone=True)`` (a long garbage collection) always waits to be an iteration's first
  section, and uses the whole budget.

A turn is not a lock: the section keeps it for no longer than it runs without suspending,
and nothing is held while it awaits (a request, a worker thread). The loop's other
callbacks (answers, watch events, timers) run between two iterations' sections as before.
With ``budget=0`` exactly one section runs per iteration.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import Callable

__all__ = ["BUDGET", "Turns"]

#: seconds of sections per loop iteration: with the callbacks that are not sections (answers
#: parsed by aiohttp, timers) and one section's overrun, an iteration stays well under 10 ms
BUDGET = 0.002


class Turns:
    """Hands out the turns of each event-loop iteration, first come first served."""

    __slots__ = ("_batch_due", "_clock", "_granted", "_handing", "_ran", "_round_start",
                 "_waiters", "_woke", "batch", "budget")

    def __init__(self, budget: float = 0.0,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        self.budget = budget
        self._clock = clock
        self._handing = False  # _hand_on is scheduled: turns were given lately
        self._granted = False  # a turn was given since _hand_on last ran
        self._woke = False  # _hand_on woke waiters: the first opens the next iteration's budget
        self.batch = 1  # waiters woken per iteration while a queue lasts
        self._ran = 0  # sections of the woken batch that ran
        self._round_start = -math.inf  # when this iteration's first section began
        self._batch_due = False  # the woken batch has not run yet
        self._waiters: deque[tuple[asyncio.Future[None], bool]] = deque()  # (turn, alone)

    @property
    def waiting(self) -> int:
        """Sections waiting for a turn."""
        return len(self._waiters)

    async def take(self, *, alone: bool = False) -> None:
        """Wait for a turn: at once while this iteration's budget lasts and nobody waits;
        ``alone``: as the first section of an iteration, with no other after it."""
        loop = asyncio.get_running_loop()
        if not self._handing:  # the first turn in a while: no iteration has used any
            self._handing = self._granted = True
            self._round_start = -math.inf if alone else self._clock()
            loop.call_soon(self._hand_on)
            return
        if not alone and not self._waiters and self._within_budget():
            self._granted = True
            return
        fut: asyncio.Future[None] = loop.create_future()
        self._waiters.append((fut, alone))
        await fut  # cancelled while waiting: skipped; after the turn came: it passes on
        if alone:
            self._round_start, self._batch_due = -math.inf, False
        else:
            self._ran += 1
            if self._batch_due:  # the first of its batch to run: the budget starts
                self._batch_due = False
                self._round_start = self._clock()

    def _within_budget(self) -> bool:
        return self._clock() - self._round_start < self.budget

    def _size_batch(self, each: float) -> None:
        """As many as the budget holds at ``each`` seconds a section, at most twice as
        many as last time, at least one."""
        fits = int(self.budget / each) if each > 0 else 2 * self.batch
        self.batch = max(1, min(2 * self.batch, fits))

    def _hand_on(self) -> None:
        """Once per iteration while turns are given: wake the next batch of live waiters
        (their tasks run in the next iteration, and this runs again right after them), or
        stop after an iteration that gave none."""
        now = self._clock()
        if self._woke and not self._batch_due and self._round_start != -math.inf:
            # the batch woken last time ran (none of it alone): size the next by its cost
            self._size_batch((now - self._round_start) / max(1, self._ran))
        elif not self._woke:  # no woken section opened this iteration's budget: it opens now
            self._round_start = now
        self._woke, self._ran = False, 0
        woken = 0
        while self._waiters and woken < self.batch:
            fut, alone = self._waiters[0]
            if fut.done():  # cancelled while it waited
                self._waiters.popleft()
                continue
            if alone and woken:
                break  # it opens the next iteration, by itself
            self._waiters.popleft()
            fut.set_result(None)
            woken += 1
            if alone:
                break
        if woken:
            self._woke = self._granted = self._batch_due = True  # the first to run starts
            asyncio.get_running_loop().call_soon(self._hand_on)
            return
        if self._granted:  # keep the iteration clock going while sections still come
            self._granted = False
            asyncio.get_running_loop().call_soon(self._hand_on)
            return
        self._handing = False
