"""The manager-wide in-flight budget: slots for actions talking to the API server, urgent first.

Every action of every pass holds a slot while its request is out (``--max-inflight``), so
the workers together never queue more than that many writes in the client's token bucket
ahead of a Lease renewal. Slots are handed out in arrival order, except that an *urgent*
action (a serving gate going True, a status write: what finishes a gang or records an
operation) is served before the waiting bring-up writes. Without that, a gang whose pods
are all ready waits for its four gate patches behind the creates of every replica that
started after it, and replicas become Ready breadth-first: at 400 pods the first one was
Ready only after 21.7 s (measured, bench_controller with 64 workers and 32 slots).

``on_wait(urgent, seconds)`` is told how long each action waited for its slot (the
manager's ``omenative_slot_wait_seconds{urgent}``). With ``turns`` (``kube/turns.py``) an
action handed a slot by another's answer goes on in a loop turn: the answers of many
requests arriving together free many slots at once, and their waiters would otherwise all
build and send their requests in one loop iteration.

asyncio only: no thread safety, no fairness beyond FIFO within each class.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from omenative_controller.kube.turns import Turns

__all__ = ["Slots", "in_lanes"]


class Slots:
    """``size`` slots; :meth:`hold` waits for one, urgent waiters before the others."""

    def __init__(self, size: int,
                 on_wait: Callable[[bool, float], None] | None = None,
                 turns: Turns | None = None) -> None:
        self.size = max(1, size)
        self.on_wait = on_wait
        self.turns = turns
        self.taken = 0
        self._urgent: deque[asyncio.Future[None]] = deque()
        self._normal: deque[asyncio.Future[None]] = deque()

    def waiting(self) -> int:
        """Actions waiting for a slot."""
        return len(self._urgent) + len(self._normal)

    @asynccontextmanager
    async def hold(self, *, urgent: bool = False) -> AsyncIterator[None]:
        """Hold one slot for the body of the ``async with``."""
        started = time.monotonic()
        handed = await self._acquire(urgent)
        if self.on_wait is not None:
            self.on_wait(urgent, time.monotonic() - started)
        try:
            if handed and self.turns is not None:
                await self.turns.take()  # resumed by another's answer: in a turn
            yield
        finally:
            self._release()

    async def _acquire(self, urgent: bool) -> bool:
        """Take a slot; True when it had to wait for one to be handed over."""
        if self.taken < self.size and not self._urgent and (urgent or not self._normal):
            self.taken += 1
            return False
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        (self._urgent if urgent else self._normal).append(waiter)
        try:
            await waiter  # the slot is handed over already taken (see _release)
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self._release()  # handed over just as we were cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):  # _release may have dropped it
                    (self._urgent if urgent else self._normal).remove(waiter)
            raise
        return True

    def _release(self) -> None:
        self.taken -= 1
        for queue in (self._urgent, self._normal):
            while queue:
                waiter = queue.popleft()
                if not waiter.done():
                    self.taken += 1
                    waiter.set_result(None)
                    return


async def in_lanes(count: int, lanes: int, step: Callable[[int], Awaitable[bool]]) -> None:
    """``step(0)`` ... ``step(count - 1)`` through at most ``lanes`` concurrent lanes.

    A lane takes the next index when its last step ended, so thousands of members cost a
    bounded number of tasks and each event-loop step a bounded amount of work, while the
    members still fill the in-flight budget. Once a step returns False no lane takes
    another index (the steps in flight finish). The executor's runs and the creates sent
    behind a pass go out this way.
    """
    members = iter(range(count))
    stopped = False

    async def lane() -> None:
        nonlocal stopped
        for i in members:
            if stopped:
                return
            if not await step(i):
                stopped = True
                return

    width = min(count, max(1, lanes))
    if width == 1:
        await lane()
    elif width > 1:
        await asyncio.gather(*(lane() for _ in range(width)))
