"""Pod deletes the API server already accepted, so one UID is not deleted twice.

A graceful DELETE answers at once with the pod marked (``deletionTimestamp``), but the
pod cache learns of it only from the watch. Until then every pass still sees the pod
whole and plans its drain's ``DeletePod`` again: one more DELETE for the same UID each
pass. While the watch is down (an API server restart: seen in issue 30) that is a
DELETE per requeue. A second graceful delete of a pod whose deletion the server accepted
changes nothing, so :class:`SentDeletes` remembers the accepted ones (by pod name, UID
and force-or-not, for ``ttl`` seconds) and the executor skips a repeat. A force delete
after a graceful one still goes (it is a different request); a delete that failed is not
remembered (the next pass sends it again); the watch's view decides once it arrives
(a terminating pod is not deleted again by the core).
"""

from __future__ import annotations

import time
from collections.abc import Callable

__all__ = ["SentDeletes"]


class SentDeletes:
    """Accepted pod deletes by (name, uid, force), for ``ttl`` seconds of ``clock``."""

    def __init__(self, ttl: float = 600.0, clock: Callable[[], float] = time.monotonic,
                 limit: int = 65536) -> None:
        self.ttl = ttl
        self.clock = clock
        self.limit = limit
        self._sent: dict[tuple[str, str, bool], float] = {}

    def already(self, name: str, uid: str, *, force: bool) -> bool:
        """Whether a delete of pod ``name`` ``uid`` (force or not) was accepted within
        ``ttl``."""
        at = self._sent.get((name, uid, force))
        return at is not None and self.clock() - at < self.ttl

    def accepted(self, name: str, uid: str, *, force: bool) -> None:
        """The API server accepted (or had already done) the delete of ``name`` ``uid``."""
        now = self.clock()
        self._sent[(name, uid, force)] = now
        if len(self._sent) > self.limit:
            cutoff = now - self.ttl
            self._sent = {k: t for k, t in self._sent.items() if t >= cutoff}
