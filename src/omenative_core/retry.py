"""RetryBlocks: one retry authority per target revision, shared by every Instance.

After a failure the revision waits in ``Backoff`` until ``nextRetryAt``; then exactly one
attempt runs (``RetryInProgress``). A success clears the block. A failure of the
revision's own fault with no attempts left (or with retries unconfigured) ends ``Held``:
no new pods until a new revision replaces it or a user releases it.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from attrs import evolve

from omenative_core.failures import Failure
from omenative_core.model.config import UpdateRetry
from omenative_core.model.status import RetryBlock

__all__ = ["FALLBACK_DELAY", "RetryBook"]

FALLBACK_DELAY = timedelta(minutes=1)
"""Backoff for failures that never hold, when no ``updateRetry`` is configured."""


class RetryBook:
    """The RetryBlocks of one plan, keyed by target revision (mutable during planning)."""

    def __init__(self, blocks: tuple[RetryBlock, ...], retry: UpdateRetry | None) -> None:
        self.blocks: dict[str, RetryBlock] = {b.target_revision: b for b in blocks}
        self.retry = retry
        self.held_now: list[str] = []

    def state(self, revision: str) -> str | None:
        """``Backoff``, ``RetryInProgress``, ``Held`` or None (no block)."""
        block = self.blocks.get(revision)
        return block.state if block else None

    def next_retry(self, revision: str) -> datetime | None:
        """When the next attempt may start, if the revision is backing off."""
        block = self.blocks.get(revision)
        return block.next_retry_at if block and block.state == "Backoff" else None

    def may_start(self, revision: str, now: datetime) -> bool:
        """Whether a new attempt on ``revision`` may start now (does not claim it)."""
        block = self.blocks.get(revision)
        if block is None:
            return True
        if block.state == "Backoff":
            return block.next_retry_at is None or block.next_retry_at <= now
        return False

    def claim(self, revision: str) -> None:
        """Start the one retry attempt a backing-off revision is allowed."""
        block = self.blocks.get(revision)
        if block is not None and block.state == "Backoff":
            self.blocks[revision] = evolve(
                block,
                state="RetryInProgress",
                attempts_started=block.attempts_started + 1,
                next_retry_at=None,
            )

    def fail(self, revision: str, failure: Failure, now: datetime) -> RetryBlock:
        """Record a failed attempt; returns the block as it now stands."""
        block = self.blocks.get(revision)
        if block is not None and block.state == "Held":
            return block
        if block is not None and block.state == "Backoff":
            # a concurrent attempt of the same wave: it does not count again
            block = evolve(block, last_failure_at=now, reason=block.reason or failure.reason)
            self.blocks[revision] = block
            return block
        attempts = block.attempts_started if block is not None else 1
        first = block.first_failure_at if block is not None else now
        retry = self.retry
        hold = failure.revision_fault and (retry is None or attempts >= retry.max_attempts)
        if hold:
            new = RetryBlock(
                target_revision=revision,
                state="Held",
                attempts_started=attempts,
                first_failure_at=first,
                last_failure_at=now,
                reason=failure.reason,
            )
            self.held_now.append(revision)
        else:
            delay = retry.delay(attempts) if retry is not None else FALLBACK_DELAY
            new = RetryBlock(
                target_revision=revision,
                state="Backoff",
                attempts_started=attempts,
                next_retry_at=now + delay,
                first_failure_at=first,
                last_failure_at=now,
                reason=failure.reason,
            )
        self.blocks[revision] = new
        return new

    def succeed(self, revision: str) -> None:
        """An Instance on ``revision`` became Ready: its block (unless Held) is cleared."""
        block = self.blocks.get(revision)
        if block is not None and block.state != "Held":
            del self.blocks[revision]

    def release(self, revision: str) -> bool:
        """A user released a held revision; True when there was a hold to release."""
        block = self.blocks.get(revision)
        if block is None or block.state != "Held":
            return False
        del self.blocks[revision]
        return True

    def keep_only(self, revisions: set[str]) -> None:
        """Drop blocks for revisions no longer targeted (a new revision clears old holds)."""
        for name in list(self.blocks):
            if name not in revisions:
                del self.blocks[name]

    def result(self) -> tuple[RetryBlock, ...]:
        """The blocks, sorted by revision name for a stable status."""
        return tuple(self.blocks[k] for k in sorted(self.blocks))
