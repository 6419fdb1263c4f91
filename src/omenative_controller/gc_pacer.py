"""Run the garbage collector's long collections when the event loop can afford them.

CPython collects wherever an allocation crosses a threshold: inside a pass, a watch
slice, a status write. A collection never gives up the GIL, so the event loop waits for
all of it, on top of the callback it landed in. At 2,000-10,000 watched pods the young
collections that reach the middle generation took 4-9 ms of CPU (their objects point into
the big caches, and every reference is a cache miss) and full ones 7-30 ms while
collecting nothing (the caches are acyclic): the loop's longest stalls
(``benchmarks/loop_callbacks.py``, ``docs/benchmarks.md``).

:class:`GcPacer` runs them itself, each in a task step of its own:

- the young generation whenever it holds ``young_limit`` objects. CPython starts a young
  collection when allocations *less deallocations* pass its threshold (700), so a manager
  that replaces what it caches (a new view for each watch event, the old one freed) hardly
  ever reaches it: its young generation held ~10,000 objects (58,000 references into the
  caches) at 2,000 pods, and collecting them took 5-9 ms at 10,000 pods. CPython's own
  young collections stay. Counting the young generation walks it, so it is counted only
  as often as its growth says it may be near the limit (``_young_full``);
- the middle generation every ``young_every`` (2) young collections, soon after they
  happen: what survives two young collections at 10,000 pods takes 2-4 ms to walk, four
  took 5-7 ms (a loop iteration of its own, and the next one's gap on top). Its survivors
  are frozen at once (``gc.freeze``: moved out of the collector's reach). They are what
  lives on (cache views, waiting passes), and left in the old generation they piled up
  until a full collection walked all of them in one callback: 47-75 ms at 10,000 pods,
  whenever the manager had been quiet for 5 s;
- a thaw every ``thaw_every`` (an hour) once the manager had no work for ``quiet_for``
  seconds (its queue empty, no pass in flight), or ``max_defer`` seconds later however
  busy it is: everything frozen goes back, one full collection frees the reference cycles
  that died frozen, and its survivors are frozen again. It walks the whole heap (47-75 ms
  at 10,000 pods), so it waits for a quiet manager, once an hour at most.

The middle collections and the thaw first wait for the loop's turn (``kube/turns.py``),
so no pass or watch slice starts in the same loop iteration; a young one is short by its
limit.

Freezing is safe because only reference cycles need a full collection: garbage without
cycles is freed by reference counting at once, frozen or not. A cycle that dies after its
objects were frozen waits for the next thaw; the full collections of a busy manager found
0-100 such objects every 10 minutes. ``settle_after_sync`` freezes the initial LISTs'
objects the same way.

CPython's own thresholds come back into force (a safety valve) if the pacer stops looking
for ``VALVE`` young collections; ``uninstall`` restores them and hands everything frozen
back to the collector.
"""

from __future__ import annotations

import asyncio
import gc
import time
from collections.abc import Callable

from omenative_controller.kube.turns import Turns

__all__ = ["COUNT_EVERY", "THAW_EVERY", "VALVE", "YOUNG_LIMIT", "GcPacer"]

YOUNG_LIMIT = 2000
"""Young objects the pacer lets pile up before it collects them: at 10,000 watched pods a
young collection costs about 0.5-0.9 ms per 1,000 objects (their references point into
the big caches, and each is a cache miss), so this keeps one to about 2 ms."""

THAW_EVERY = 3600.0
"""Seconds between thaws (unfreeze, full collection, freeze): how long a reference cycle
that died frozen may wait to be freed."""

VALVE = 100
"""While a pacer is installed CPython collects the middle generation by itself only after
this many young collections (the pacer collects it after ``young_every``), and never a
full one (the pacer's thaws are its full collections)."""

COUNT_EVERY = 0.05
"""The longest wait (s) between two counts of the young generation while the manager is
busy: a growth the last count did not see shows within it."""

_NEVER = 1 << 30
_installed: list[GcPacer] = []
_saved: list[tuple[int, int, int]] = []


class GcPacer:
    """Collects the middle and old generations as task steps of their own (module doc).

    ``busy()`` says whether the manager has work (queued keys, passes in flight); it is
    asked at each look. ``install`` starts the pacing task on the running loop,
    ``uninstall`` stops it. ``step(now)`` is one look, for tests and callers with a loop
    of their own: it collects what is due and returns the generation collected or None.
    """

    __slots__ = ("_count_at", "_last_busy", "_last_thaw", "_net_seen", "_task", "_young_at",
                 "_young_seen", "busy", "check", "counts", "freezes", "fulls", "longest",
                 "max_defer", "middles", "on_collect", "quiet_for", "thaw_every", "turns",
                 "young_every", "young_limit", "youngs")

    def __init__(self, busy: Callable[[], bool], *, turns: Turns | None = None,
                 young_every: int = 2, young_limit: int = YOUNG_LIMIT,
                 quiet_for: float = 5.0, thaw_every: float = THAW_EVERY,
                 max_defer: float = 600.0, check: float = 0.005,
                 on_collect: Callable[[int, float, bool], None] | None = None) -> None:
        self.busy = busy
        self.turns = turns
        #: told of each collection: its generation, seconds, whether it froze survivors
        #: (the manager's ``omenative_gc_*`` metrics)
        self.on_collect = on_collect
        self.young_every = young_every
        self.young_limit = young_limit
        self.quiet_for = quiet_for
        self.thaw_every = thaw_every
        self.max_defer = max_defer
        self.check = check  # seconds between looks while collections are in the offing
        self.youngs = 0  # young collections run
        self.middles = 0  # middle-generation collections run
        self.fulls = 0  # full collections run (the thaws)
        self.freezes = 0
        self.counts = 0  # times the young generation was counted (each walks it)
        self._young_seen = self._net_seen = 0  # at the last count: its size, CPython's count
        self._young_at = 0.0  # when it was last counted (or emptied)
        self._count_at = -1.0  # no count before this time, unless CPython's count jumps
        self.longest: dict[int, float] = {}  # generation -> longest collection (s)
        self._last_busy = self._last_thaw = 0.0  # clock times; install sets the loop's
        self._task: asyncio.Task[None] | None = None

    # ------------------------------------------------------------------ one look

    def due(self, now: float) -> int | None:
        """The generation to collect now, if any (2: a thaw)."""
        if self.busy():
            self._last_busy = now
        since_thaw = now - self._last_thaw
        if since_thaw >= self.thaw_every and (
                now - self._last_busy >= self.quiet_for
                or since_thaw >= self.thaw_every + self.max_defer):
            return 2
        if gc.get_count()[1] >= self.young_every:
            return 1
        if self._young_full(now):
            return 0
        return None

    def _young_full(self, now: float) -> bool:
        """True when the young generation holds ``young_limit`` objects.

        Counting them walks the generation, a cache miss an object: ~100 us at the limit at
        10,000 pods, which at a look every 5 ms was 18 % of the event loop's busy time (a
        py-spy timeline, ``benchmarks/spy_stalls.py``). So it is counted only when it may be
        near the limit: once half the way left is due at the growth its last count saw
        (at least ``check``, at most ``COUNT_EVERY`` seconds later), or at once when CPython's
        own count (allocations less deallocations: a burst of new objects shows in it) grew
        by a quarter of the limit since."""
        net = gc.get_count()[0]
        if now < self._count_at and net < self._net_seen + self.young_limit // 4:
            return False
        young = len(gc.get_objects(generation=0))
        self.counts += 1
        elapsed = now - self._young_at
        grown = young - self._young_seen if young >= self._young_seen else young
        self._young_seen, self._young_at, self._net_seen = young, now, net
        if young >= self.young_limit:
            return True
        left = (self.young_limit - young) / 2
        wait = COUNT_EVERY if grown <= 0 or elapsed <= 0 else left * elapsed / grown
        self._count_at = now + min(max(wait, self.check), COUNT_EVERY)
        return False

    def step(self, now: float) -> int | None:
        """Collect what is due; the generation collected, or None."""
        generation = self.due(now)
        if generation is not None:
            self._collect(generation, now)
        return generation

    def _collect(self, generation: int, now: float) -> None:
        """Collect ``generation`` (2: thaw first), freeze what a middle collection or a
        thaw leaves, and count it."""
        started = time.perf_counter()
        if generation == 2:
            gc.unfreeze()  # the cycles that died frozen are garbage the collection can see
        gc.collect(generation)
        froze = generation > 0  # a middle collection or a thaw: its survivors go out of reach
        if froze:
            gc.freeze()  # the young generations are empty now: only the survivors move
            self.freezes += 1
        took = time.perf_counter() - started
        self.longest[generation] = max(self.longest.get(generation, 0.0), took)
        # the young generation is empty now: its growth is counted from here
        self._young_seen, self._young_at, self._net_seen = 0, now, gc.get_count()[0]
        self._count_at = now + self.check
        if generation == 0:
            self.youngs += 1
        elif generation == 1:
            self.middles += 1
        else:
            self.fulls += 1
            self._last_thaw = now
        if self.on_collect is not None:
            self.on_collect(generation, took, froze)

    def next_look(self) -> float:
        """Seconds until the next look: soon while the manager works (young collections
        pile up fast), else a slow beat (an idle manager allocates little)."""
        return self.check if self.busy() else 0.1

    # ------------------------------------------------------------------ the task

    async def run(self) -> None:
        """Look, and collect in a turn of its own, until cancelled."""
        loop = asyncio.get_running_loop()
        while True:
            await asyncio.sleep(self.next_look())
            generation = self.due(loop.time())
            if generation is None:
                continue
            if not generation:  # a young one is short: no turn, and nothing changed since
                self._collect(0, loop.time())  # the look (a second one would count again)
                continue
            if self.turns is not None:
                await self.turns.take(alone=True)  # no other section in this iteration
            self.step(loop.time())  # what is due after the wait

    def install(self) -> None:
        """Take over the middle and full collections and start pacing (idempotent; needs
        a running loop). Several pacers may be installed (managers in one process)."""
        if self in _installed:
            return
        if not _installed:
            _saved.append(gc.get_threshold())
            gc.set_threshold(gc.get_threshold()[0], VALVE, _NEVER)
        _installed.append(self)
        loop = asyncio.get_running_loop()
        self._last_busy = self._last_thaw = self._young_at = loop.time()
        self._task = loop.create_task(self.run(), name="gc-pacer")

    def uninstall(self) -> None:
        """Stop pacing; the last pacer out gives CPython its thresholds back and hands
        every frozen object back to the collector."""
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self not in _installed:
            return
        _installed.remove(self)
        if not _installed:
            gc.set_threshold(*_saved.pop())  # the first install saved them
            gc.unfreeze()
        self.freezes = 0
