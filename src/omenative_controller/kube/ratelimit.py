"""A client-side token bucket (QPS and burst), as client-go's ``flowcontrol`` limiter.

kubernetes-asyncio has no rate limit of its own. The bucket holds ``burst`` tokens and
refills at ``qps`` per second; ``acquire`` reserves a token and sleeps until it is due, so
waiters are served in arrival order and a burst of callers is spread out, not rejected.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["TokenBucket"]


class TokenBucket:
    """``qps`` tokens per second, at most ``burst`` saved up; ``qps <= 0`` means no limit."""

    def __init__(
        self,
        qps: float,
        burst: int,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if burst < 1:
            raise ValueError(f"burst must be >= 1, got {burst}")
        self.qps = float(qps)
        self.burst = int(burst)
        self._clock = clock
        self._sleep = sleep
        self._tokens = float(burst)
        self._last = clock()

    @property
    def unlimited(self) -> bool:
        """True when ``qps <= 0``."""
        return self.qps <= 0

    def _refill(self) -> float:
        now = self._clock()
        if now > self._last:
            self._tokens = min(float(self.burst), self._tokens + (now - self._last) * self.qps)
            self._last = now
        return now

    def reserve(self) -> float:
        """Take one token now (possibly borrowing); return the seconds to wait before use."""
        if self.unlimited:
            return 0.0
        self._refill()
        self._tokens -= 1.0
        if self._tokens >= 0:
            return 0.0
        return -self._tokens / self.qps

    def try_acquire(self) -> bool:
        """Take a token only if one is available now."""
        if self.unlimited:
            return True
        self._refill()
        if self._tokens >= 1.0:
            self._tokens -= 1.0
            return True
        return False

    async def acquire(self) -> float:
        """Wait for a token; return how long we waited (seconds)."""
        wait = self.reserve()
        if wait > 0:
            await self._sleep(wait)
        return wait
