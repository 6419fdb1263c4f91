"""What a load generator run saw: each request's outcome, and the figures a test asserts on.

Pure data and arithmetic (no I/O), so the numbers a traffic test prints are the numbers it
checks. Times are seconds since the run started (``Outcome.started`` / ``ended``).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from attrs import frozen

__all__ = ["FailureWindow", "Outcome", "TrafficReport"]

FAILURE_KINDS = ("no-answer", "connection-error", "status")
"""The three ways a request fails (docs/real-nodes.md)."""


@frozen
class Outcome:
    """One request: when it started and ended, how it went, what answered (or why not)."""

    started: float
    ended: float
    #: ``new`` (a connection of its own) or ``kept`` (the kept-alive pool)
    via: str
    #: sent a second time because a reused connection closed before any answer byte
    retried: bool = False
    revision: str = ""
    instance: str = ""
    pod: str = ""
    status: int = 0
    #: empty for an answer; else one of FAILURE_KINDS
    failure: str = ""
    detail: str = ""

    @property
    def ok(self) -> bool:
        """An answer (2xx), after at most the one client retry."""
        return not self.failure


@frozen
class FailureWindow:
    """Failures close together in time: from the first one's start to the last one's end."""

    start: float
    end: float
    count: int
    kinds: tuple[str, ...]


@frozen
class TrafficReport:
    """Outcomes in start order, and the figures derived from them."""

    outcomes: tuple[Outcome, ...]
    rate: float

    @property
    def sent(self) -> int:
        """Requests sent (a client retry is not a second request)."""
        return len(self.outcomes)

    @property
    def answers(self) -> tuple[Outcome, ...]:
        """The requests that got a 2xx answer."""
        return tuple(o for o in self.outcomes if o.ok)

    @property
    def failures(self) -> tuple[Outcome, ...]:
        """The failed requests."""
        return tuple(o for o in self.outcomes if not o.ok)

    @property
    def answered(self) -> int:
        """How many requests got an answer."""
        return len(self.answers)

    @property
    def failed(self) -> int:
        """How many requests failed."""
        return self.sent - self.answered

    @property
    def retried(self) -> int:
        """Requests that needed the client's one retry on a fresh connection."""
        return sum(1 for o in self.outcomes if o.retried)

    def failures_by_kind(self) -> dict[str, int]:
        """Failed requests per kind."""
        return dict(Counter(o.failure for o in self.failures))

    def answers_by_revision(self) -> dict[str, int]:
        """Answers per revision the server named."""
        return dict(Counter(o.revision for o in self.answers))

    def revision_order(self) -> list[str]:
        """Revisions in the order of their first answer."""
        seen: list[str] = []
        for o in self.answers:
            if o.revision not in seen:
                seen.append(o.revision)
        return seen

    def first_answer(self, revision: str) -> float | None:
        """Start of the first request that revision answered."""
        return next((o.started for o in self.answers if o.revision == revision), None)

    def last_answer(self, revision: str) -> float | None:
        """Start of the last request that revision answered."""
        times = [o.started for o in self.answers if o.revision == revision]
        return max(times) if times else None

    def failed_started_before(self, t: float) -> int:
        """Failed requests among those started before ``t`` (say, before a drain began)."""
        return sum(1 for o in self.failures if o.started < t)

    def failure_windows(self, gap: float = 1.0) -> list[FailureWindow]:
        """Failures grouped so that consecutive ones start less than ``gap`` seconds apart."""
        windows: list[FailureWindow] = []
        group: list[Outcome] = []
        for o in self.failures:
            if group and o.started - group[-1].started >= gap:
                windows.append(_window(group))
                group = []
            group.append(o)
        if group:
            windows.append(_window(group))
        return windows

    def per_second(self) -> list[dict[str, int]]:
        """For each second of the run: answers per revision, and ``failed``."""
        if not self.outcomes:
            return []
        n = math.floor(max(o.started for o in self.outcomes)) + 1
        out: list[dict[str, int]] = [{} for _ in range(n)]
        for o in self.outcomes:
            key = o.revision if o.ok else "failed"
            row = out[math.floor(o.started)]
            row[key] = row.get(key, 0) + 1
        return out

    def answered_per_second(self) -> list[int]:
        """Answers per second of the run (the throughput users saw)."""
        return [sum(v for k, v in row.items() if k != "failed") for row in self.per_second()]

    def pods_answering(self) -> dict[str, set[str]]:
        """Per revision, the pods that answered."""
        out: dict[str, set[str]] = {}
        for o in self.answers:
            out.setdefault(o.revision, set()).add(o.pod)
        return out

    def summary(self, label: str) -> str:
        """One line for logs and docs: ``label: sent N, answered A, failed F (kinds)``."""
        kinds = ", ".join(f"{k} {n}" for k, n in sorted(self.failures_by_kind().items()))
        return (f"{label}: sent {self.sent}, answered {self.answered}, failed {self.failed}"
                + (f" ({kinds})" if kinds else ""))

    def table(self, title: str = "traffic") -> str:
        """The answers per revision and the failed requests, as a plain text table."""
        lines = [f"{title}: {self.sent} requests at {self.rate:g}/s, "
                 f"{self.answered} answered, {self.failed} failed, {self.retried} client retries"]
        lines.append(f"  {'revision':<28} {'answers':>8} {'first(s)':>9} {'last(s)':>9}  pods")
        counts = self.answers_by_revision()
        pods = self.pods_answering()
        for rev in self.revision_order():
            first = self.first_answer(rev) or 0.0
            last = self.last_answer(rev) or 0.0
            lines.append(f"  {rev:<28} {counts[rev]:>8} {first:>9.1f} {last:>9.1f}  "
                         f"{', '.join(sorted(pods[rev]))}")
        for kind, n in sorted(self.failures_by_kind().items()):
            lines.append(f"  {'failed: ' + kind:<28} {n:>8}")
        for w in self.failure_windows():
            lines.append(f"  failure window {w.start:.1f}s-{w.end:.1f}s: {w.count} failed "
                         f"({', '.join(w.kinds)})")
        for o in [o for o in self.outcomes if o.failure][:5]:
            lines.append(f"  failed at {o.started:.2f}s-{o.ended:.2f}s via {o.via}"
                         f"{' (retried)' if o.retried else ''}: {o.detail}")
        return "\n".join(lines)

    def timeline(self, every: int = 5) -> str:
        """Answers per revision per ``every`` seconds, one line each: how the switch went."""
        rows = self.per_second()
        lines = []
        for start in range(0, len(rows), every):
            merged: Counter[str] = Counter()
            for row in rows[start:start + every]:
                merged.update(row)
            cells = "  ".join(f"{k} {v}" for k, v in sorted(merged.items()))
            lines.append(f"  t={start:>4}s  {cells}")
        return "\n".join(lines)


def _window(group: Iterable[Outcome]) -> FailureWindow:
    items = list(group)
    return FailureWindow(start=items[0].started, end=max(o.ended for o in items),
                         count=len(items), kinds=tuple(sorted({o.failure for o in items})))
