"""Keep the garbage collector's full collections short as the caches grow.

A full (generation 2) collection walks every object the collector tracks and never gives
up the GIL: the event loop waits for all of it, wherever it runs. ``settle_after_sync``
freezes what the first LISTs left (``gc.freeze``: moved out of the collector's reach),
but a manager started before its fleet grows its caches afterwards: at 5,000 watched pods
the heap holds hundreds of thousands of young-then-old objects, and CPython starts a
full collection whenever a quarter more has survived since the last one, each walking
all of it (tens to hundreds of milliseconds on the loop, ``benchmarks/bench_controller.py``'s
stall column).

:class:`SurvivorFreezer` (a ``gc.callbacks`` entry) freezes the survivors of a full
collection that took longer than ``FREEZE_AFTER``: right after a full collection the
young generations are empty, so exactly what survived it (the caches, the memos, the
decoded replicas) leaves the collector's reach, and the next full collection walks only
what came since. Short full collections freeze nothing, so a manager at rest keeps
collecting its own churn as before.

The cost, as with ``settle_after_sync``: a reference cycle among frozen objects that later
becomes garbage is never collected (objects without cycles are freed by reference counting
as ever). The caches' views, memos and JSON are acyclic; what may leak is the few cyclic
objects in flight at a freeze (a request's, an exception's), once per freeze, and freezes
follow the heap's growth, not time. ``uninstall`` (the manager's teardown) hands
everything frozen back to the collector, so a process that runs many managers in turn (the
integration tests) collects what they left.
"""

from __future__ import annotations

import gc
import time
from typing import Any

__all__ = ["FREEZE_AFTER", "SurvivorFreezer"]

FREEZE_AFTER = 0.003
"""A full collection longer than this (seconds) has its survivors frozen: shorter ones cost
the loop less than the stall target (10 ms), whatever the load."""


class SurvivorFreezer:
    """A ``gc.callbacks`` entry: freeze what survived a long full collection.

    ``install``/``uninstall`` add and remove it (the callback list is the process's:
    several managers in one test process share one). ``freezes`` counts the freezes made.
    """

    __slots__ = ("_started", "freeze_after", "freezes")

    def __init__(self, freeze_after: float = FREEZE_AFTER) -> None:
        self.freeze_after = freeze_after
        self.freezes = 0
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if info.get("generation") != 2:
            return
        if phase == "start":
            self._started = time.perf_counter()
        elif phase == "stop" and time.perf_counter() - self._started > self.freeze_after:
            gc.freeze()  # the young generations are empty now: only the survivors move
            self.freezes += 1

    def install(self) -> None:
        """Start freezing (idempotent)."""
        if self not in gc.callbacks:
            gc.callbacks.append(self)

    def uninstall(self) -> None:
        """Stop freezing; after a freeze, hand every frozen object back to the collector."""
        if self in gc.callbacks:
            gc.callbacks.remove(self)
        if self.freezes:
            gc.unfreeze()
            self.freezes = 0
