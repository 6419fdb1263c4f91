"""The work queue: deduplicated keys, one worker per key at a time, delays and backoff.

The semantics are client-go's ``workqueue``: a key added while it waits is not added twice;
a key added while a worker holds it is queued again only when that worker calls ``done``
(so two workers never reconcile one key at once); ``add_after`` keeps the earliest pending
time per key; ``add_rate_limited`` waits ``base * 2**failures`` (capped) and ``forget``
resets the count after a success. ``shutdown`` stops handing out keys; ``wait_idle`` waits
for the keys in flight.

One addition: a priority lane. ``add(key, priority=True)`` queues the key ahead of every
ordinary key (and moves it there if it already waits in the ordinary lane); ``get`` serves the
priority lane first, each lane in arrival order. The manager uses it for replicas whose pods
wait only for their serving gate, so a nearly Ready gang is not queued behind hundreds of
fresh first passes (readiness then comes depth-first, not breadth-first).

A second addition: ``add_soon(key, window)`` queues the key within ``window`` seconds, once
for any number of calls meanwhile, and not at all when a worker takes the key first (a
pass that starts after a change sees it: the reconcile is level-triggered). The manager
wakes a replica this way for changes that need a look but not at once (a gang's pods
scheduled or started together, its EndpointSlice, its PodGroup's status): a burst is one
pass, not one per event.

``on_wait(priority, seconds)`` is told, as a worker takes a key, how long the key waited
since it was added (a key added while in flight waits for its pass to end too) and whether
it came from the priority lane: the manager's ``omenative_queue_wait_seconds{lane}``.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["WorkQueue"]

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    """An asyncio work queue with per-key serialisation, dedupe, delays and backoff."""

    def __init__(
        self,
        *,
        base_delay: float = 0.05,
        max_delay: float = 60.0,
        on_depth: Callable[[int], None] | None = None,
        on_wait: Callable[[bool, float], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_delay = base_delay
        self.max_delay = max_delay
        self._on_depth = on_depth
        self._on_wait = on_wait
        self._clock = clock
        self._added: dict[K, float] = {}  # key -> when it was queued (while dirty)
        self._queue: deque[K] = deque()
        self._priority: deque[K] = deque()
        self._urgent: set[K] = set()  # keys that go to the priority lane when re-queued
        self._dirty: set[K] = set()
        self._processing: set[K] = set()
        self._timers: dict[K, asyncio.TimerHandle] = {}
        self._soon: dict[K, asyncio.TimerHandle] = {}  # add_soon: cancelled when taken
        self._failures: dict[K, int] = {}
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._lane_waiters: deque[asyncio.Future[None]] = deque()  # get(priority_only=True)
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._shutdown = False

    # ------------------------------------------------------------------ state

    def __len__(self) -> int:
        """Keys waiting for a worker (not counting delayed or in-flight keys)."""
        return len(self._queue) + len(self._priority)

    @property
    def in_flight(self) -> int:
        """Keys a worker holds now."""
        return len(self._processing)

    @property
    def delayed(self) -> int:
        """Keys with a pending delayed add."""
        return len(self._timers)

    @property
    def shutting_down(self) -> bool:
        """True after ``shutdown``."""
        return self._shutdown

    def failures(self, key: K) -> int:
        """Consecutive rate-limited requeues of ``key`` since the last ``forget``."""
        return self._failures.get(key, 0)

    def _depth_changed(self) -> None:
        if self._on_depth is not None:
            self._on_depth(len(self))

    def _wake_one(self) -> None:
        """Wake one worker that can take a waiting key: a priority key goes to a worker of
        the priority lane first, an ordinary key only to a worker of both lanes."""
        for waiters in ((self._lane_waiters, self._waiters) if self._priority
                        else (self._waiters,)):
            while waiters:
                fut = waiters.popleft()
                if not fut.done():
                    fut.set_result(None)
                    return

    # ------------------------------------------------------------------ adding

    def add(self, key: K, *, priority: bool = False) -> None:
        """Queue ``key`` now (no-op if already waiting; deferred while in flight).

        ``priority`` puts it in the priority lane, ahead of every ordinary key; a key that
        already waits in the ordinary lane moves up.
        """
        if self._shutdown:
            return
        if key in self._dirty:
            if priority and key not in self._urgent:
                self._urgent.add(key)
                if key not in self._processing:  # waiting in the ordinary lane: move up
                    self._queue.remove(key)
                    self._priority.append(key)
                    self._wake_one()  # a worker of the priority lane may take it now
            return
        self._dirty.add(key)
        if self._on_wait is not None:
            self._added[key] = self._clock()
        if priority:
            self._urgent.add(key)
        if key in self._processing:
            return
        (self._priority if priority else self._queue).append(key)
        self._depth_changed()
        self._wake_one()

    def _requeue(self, key: K) -> None:
        (self._priority if key in self._urgent else self._queue).append(key)

    def add_after(self, key: K, delay: float) -> None:
        """Queue ``key`` after ``delay`` seconds; an earlier pending time wins."""
        if self._shutdown:
            return
        if delay <= 0:
            self.add(key)
            return
        loop = asyncio.get_running_loop()
        due = loop.time() + delay
        existing = self._timers.get(key)
        if existing is not None:
            if existing.when() <= due:
                return
            existing.cancel()
        self._timers[key] = loop.call_at(due, self._fire, key)

    def _fire(self, key: K) -> None:
        self._timers.pop(key, None)
        self.add(key)

    def add_soon(self, key: K, window: float) -> None:
        """Queue ``key`` within ``window`` seconds, unless it waits already or a worker
        takes it first: the changes of a burst share one pass."""
        if self._shutdown or key in self._dirty or key in self._soon:
            return
        if window <= 0:
            self.add(key)
            return
        self._soon[key] = asyncio.get_running_loop().call_later(window, self._fire_soon, key)

    def _fire_soon(self, key: K) -> None:
        self._soon.pop(key, None)
        self.add(key)

    def _cancel_soon(self, key: K) -> None:
        timer = self._soon.pop(key, None)
        if timer is not None:
            timer.cancel()

    def add_rate_limited(self, key: K) -> float:
        """Queue ``key`` after its exponential backoff; return the delay used."""
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        delay = min(self.max_delay, self.base_delay * (2.0 ** n))
        self.add_after(key, delay)
        return delay

    def forget(self, key: K) -> None:
        """Reset ``key``'s backoff (after a successful pass)."""
        self._failures.pop(key, None)

    def discard(self, key: K) -> None:
        """Drop every trace of ``key`` that is not in flight (the object is gone): its
        backoff, its delayed add and, unless a worker holds it, its place in the queue."""
        self._failures.pop(key, None)
        timer = self._timers.pop(key, None)
        if timer is not None:
            timer.cancel()
        self._cancel_soon(key)
        if key in self._dirty and key not in self._processing:
            self._dirty.discard(key)
            (self._priority if key in self._urgent else self._queue).remove(key)
            self._urgent.discard(key)
            self._added.pop(key, None)
            self._depth_changed()

    def holds(self, key: K) -> bool:
        """True while ``key`` waits, is delayed, backs off or is in flight."""
        return (key in self._dirty or key in self._processing or key in self._timers
                or key in self._soon or key in self._failures)

    # ------------------------------------------------------------------ taking

    async def get(self, *, priority_only: bool = False) -> K | None:
        """The next key (the caller must call ``done``); None once shut down.

        ``priority_only``: only a key of the priority lane (the manager keeps a few workers
        for it, so a gang one pass from its gate never waits for a worker held by a first
        pass that waits for its writes).
        """
        while True:
            if self._shutdown:
                return None
            if self._priority or (self._queue and not priority_only):
                priority = bool(self._priority)
                key = (self._priority or self._queue).popleft()
                self._processing.add(key)
                added = self._seen(key)
                self._depth_changed()
                if self._on_wait is not None and added is not None:
                    self._on_wait(priority, self._clock() - added)
                return key
            if priority_only and self._queue:
                self._wake_one()  # woken for an ordinary key: pass it on to who can take it
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            (self._lane_waiters if priority_only else self._waiters).append(fut)
            try:
                await fut
            except asyncio.CancelledError:
                if fut.done() and not fut.cancelled():
                    self._wake_one()  # pass the wake-up on
                raise

    def reading(self, key: K) -> None:
        """The worker holding ``key`` reads the caches now: what was added for it since it
        was taken (while it waited for its turn, ``kube/turns.py``) is seen by this very
        pass, so it need not run again for that; an add from now on re-queues it as ever.
        Call it with no await between it and the reads."""
        if key in self._processing:
            self._seen(key)

    def _seen(self, key: K) -> float | None:
        """Clear what asked for a pass of ``key`` (its waiting mark, urgency and windowed
        add): the pass about to read the caches sees it. When it was first asked for."""
        self._dirty.discard(key)
        self._urgent.discard(key)
        self._cancel_soon(key)
        return self._added.pop(key, None)

    def done(self, key: K) -> None:
        """The worker finished ``key``; re-queue it if it was added meanwhile."""
        self._processing.discard(key)
        if key in self._dirty and not self._shutdown:
            self._requeue(key)
            self._depth_changed()
            self._wake_one()
        if not self._processing:
            for fut in self._idle_waiters:
                if not fut.done():
                    fut.set_result(None)
            self._idle_waiters.clear()

    # ------------------------------------------------------------------ stopping

    def shutdown(self) -> None:
        """Stop handing out keys and cancel the delayed adds."""
        self._shutdown = True
        for timer in (*self._timers.values(), *self._soon.values()):
            timer.cancel()
        self._timers.clear()
        self._soon.clear()
        for waiters in (self._waiters, self._lane_waiters):
            while waiters:
                fut = waiters.popleft()
                if not fut.done():
                    fut.set_result(None)

    async def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no key is in flight; False on timeout."""
        if not self._processing:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._idle_waiters.append(fut)
        try:
            async with asyncio.timeout(timeout):
                await fut
        except TimeoutError:
            return False
        return True
