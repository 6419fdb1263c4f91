"""Create refusals kept for the next pass's snapshot.

A pod create refused with 422 Invalid or 403 ``exceeded quota`` ends the pass; the core
learns of it only through the next snapshot (``Snapshot.create_errors``), which turns it
into a condition and an Event naming the field or the quota. The store keeps each refusal
per InferenceReplica key with the time it was seen, hands it out once, and drops what is
older than a minute, so a refusal fixed meanwhile is not reported again.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from attrs import define, field

from omenative_core.model.observed import CreateError

__all__ = ["CREATE_ERROR_TTL", "CreateErrorStore"]

CREATE_ERROR_TTL = 60.0
"""Seconds a recorded create error waits for the next snapshot."""


@define
class CreateErrorStore:
    """Create refusals per InferenceReplica key, waiting to be read by the next snapshot."""

    ttl: float = CREATE_ERROR_TTL
    clock: Callable[[], float] = time.monotonic
    _errors: dict[str, list[tuple[float, CreateError]]] = field(factory=dict)

    def record(self, key: str, error: CreateError) -> None:
        """Keep ``error`` for ``key``."""
        self._errors.setdefault(key, []).append((self.clock(), error))

    def take(self, key: str) -> tuple[CreateError, ...]:
        """The errors of ``key`` younger than the TTL; each is handed out once."""
        items = self._errors.pop(key, [])
        now = self.clock()
        return tuple(e for t, e in items if now - t <= self.ttl)

    def drop(self, key: str) -> None:
        """Forget ``key`` (the object is gone)."""
        self._errors.pop(key, None)

    def __len__(self) -> int:
        return sum(len(v) for v in self._errors.values())
