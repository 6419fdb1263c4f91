"""Poll for an optional API and run its informers while it is served: the shared loop.

Theory of operation, for ``CrdPresence`` (a CRD) and ``ApiPresence`` (a built-in API
group/version), which differ only in how they probe and what informers they make:

1. Every ``interval`` seconds ``_probe`` answers what is served now: a key (the CRD's usable
   version, or the group/version), None when nothing is, or ``UNKNOWN`` on a transient API
   error, which keeps the last known state. An answer that repeats the last one doubles
   the wait before the next probe, up to ``POLL_BACKOFF_LIMIT`` times ``interval``; a
   change or an error brings it back to ``interval``. Optional APIs are installed or
   removed rarely, and each probe is a request in the client's shared QPS budget: ten
   presences polled every 5 s were 395 of the manager's 15,776 requests while 1,250
   replicas came up (issue 36). An API that appears is noticed within
   ``POLL_BACKOFF_LIMIT * interval`` (30 s at the manager's default 5 s; never more than
   ``POLL_BACKOFF_MAX_SECONDS``, or ``interval`` when that is longer).
2. When the key changes, the informers of the old key are stopped and their caches dropped
   (``present`` turns False at once), then those of the new key are started.
3. ``present`` turns True only once every informer of the current key has synced, so the
   core never sees "served" with an empty cache; with no informers, as soon as it is served.
4. ``checked`` is set after the first answer that was not ``UNKNOWN``.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Mapping
from typing import Any, Final

import structlog

from omenative_controller.kube.informer import Informer
from omenative_controller.kube.tasks import cancel_and_wait

__all__ = ["POLL_BACKOFF_LIMIT", "POLL_BACKOFF_MAX_SECONDS", "UNKNOWN", "Presence", "Unknown"]

log = structlog.get_logger("omenative.presence")


class Unknown(enum.Enum):
    """A probe that could not tell (an API error): keep the last known state."""

    UNKNOWN = "unknown"


UNKNOWN: Final = Unknown.UNKNOWN
"""The one ``Unknown`` value."""

POLL_BACKOFF_LIMIT: Final = 6.0
"""While the answer repeats, the wait between probes doubles up to this many ``interval``s
(and never beyond ``POLL_BACKOFF_MAX_SECONDS`` or ``interval``, whichever is longer)."""
POLL_BACKOFF_MAX_SECONDS: Final = 30.0
"""The longest a backed-off poll waits, unless its ``interval`` is longer already."""


class Presence:
    """The poll loop of an optional API: subclasses give ``_probe`` and ``_make_informers``."""

    def __init__(self, what: str, *, interval: float,
                 on_change: Callable[[bool], None] | None) -> None:
        self.what = what
        self.interval = interval
        self.on_change = on_change
        self.present = False
        self.checked = asyncio.Event()
        #: what is served now (the key ``_probe`` returned), None when nothing is
        self.served: str | None = None
        self.informers: dict[str, Informer[Any]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def _probe(self) -> str | Unknown | None:
        """What is served now: a key, None when nothing is, ``UNKNOWN`` when it cannot tell."""
        raise NotImplementedError

    def _make_informers(self, served: str) -> Mapping[str, Informer[Any]]:
        """The informers to run while ``served`` is (none by default)."""
        return {}

    def _set(self, present: bool) -> None:
        if present != self.present:
            self.present = present
            log.info("presence.changed", what=self.what, present=present, served=self.served)
            if self.on_change is not None:
                self.on_change(present)

    async def _start(self, served: str) -> None:
        self.served = served
        informers = dict(self._make_informers(served))
        self.informers = informers
        if not informers:
            self._set(True)
            return
        for informer in informers.values():
            self._tasks.append(asyncio.create_task(
                informer.run(), name=f"informer-{self.what}-{informer.name}"))

        async def synced() -> None:
            for informer in informers.values():
                await informer.synced.wait()
            if self.informers is informers:  # not stopped (or restarted) meanwhile
                self._set(True)

        self._tasks.append(asyncio.create_task(synced()))

    async def _stop(self) -> None:
        await cancel_and_wait(self._tasks)
        self._tasks = []
        informers, self.informers, self.served = self.informers, {}, None
        self._set(False)
        for informer in informers.values():
            informer.clear()

    def next_wait(self, wait: float, found: str | Unknown | None, changed: bool) -> float:
        """The wait before the next probe, after ``wait``: ``interval`` after a change or an
        error, else twice ``wait`` up to ``POLL_BACKOFF_LIMIT * interval`` (at most
        ``POLL_BACKOFF_MAX_SECONDS``; an ``interval`` that is longer is kept). ``run``
        starts from ``interval / 2``, so ``2 * wait`` is never below ``interval``."""
        if changed or found is UNKNOWN:
            return self.interval
        longest = max(self.interval, min(POLL_BACKOFF_LIMIT * self.interval,
                                         POLL_BACKOFF_MAX_SECONDS))
        return min(2 * wait, longest)

    async def run(self) -> None:
        """Poll until cancelled; the informers stop with it."""
        wait = self.interval / 2  # the first answer (unchanged or not) waits ``interval``
        try:
            while True:
                found = await self._probe()
                changed = found is not UNKNOWN and found != self.served
                if found is not UNKNOWN:
                    if changed:
                        if self.served is not None:
                            await self._stop()
                        if found is not None:
                            await self._start(found)
                    self.checked.set()
                wait = self.next_wait(wait, found, changed)
                await asyncio.sleep(wait)
        finally:
            await self._stop()
