"""Watchers the API server closed as too slow during a timed phase.

On a 2-core machine that runs the whole cluster, a consumer that does not read its watch
stream in time (its process waits for a core) has its watch closed by kube-apiserver's
watch cache ("Forcing ... watcher close due to unresponsiveness"); it then watches again
from its last resourceVersion, which costs the API server more CPU, and meanwhile that
consumer (kube-scheduler, the manager) acts on an older view. :class:`SlowWatchers` marks
the API server's log at a phase's start and end and counts those closures in between, by
the watched resource and selector, so a report can show how saturated the cluster was.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

__all__ = ["SlowWatchers"]

_CLOSED = re.compile(r'Forcing (\w+) watcher close due to unresponsiveness: key: "([^"]*)", '
                     r'labels: "([^"]*)", fields: "([^"]*)"')
_WHO = {  # selectors of the consumers this benchmark runs
    "status.phase!=Failed,status.phase!=Succeeded": "kube-scheduler",
    "ome.io/managed-by=OMENative": "manager",
}


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class SlowWatchers:
    """Counts slow-watcher closures in ``kube-apiserver.log`` between start() and stop()."""

    def __init__(self, log: Path | None) -> None:
        self.log = log
        self._start = self._end = 0

    def start(self) -> None:
        """Mark the log's current end."""
        self._start = _size(self.log) if self.log is not None else 0

    def stop(self) -> None:
        """Mark the phase's end."""
        self._end = _size(self.log) if self.log is not None else 0

    def counts(self) -> Counter[str]:
        """Closures in the phase, by ``resource selector (consumer, where known)``."""
        out: Counter[str] = Counter()
        if self.log is None or self._end <= self._start:
            return out
        with self.log.open("rb") as f:
            f.seek(self._start)
            text = f.read(self._end - self._start).decode(errors="replace")
        for resource, key, labels, fields in _CLOSED.findall(text):
            selector = ",".join(s for s in (labels, fields) if s)
            scope = "all namespaces" if key.count("/") <= 2 else "one namespace"
            who = _WHO.get(labels) or _WHO.get(fields)
            out[f"{resource} {scope} {selector or '(no selector)'}"
                + (f" ({who})" if who else "")] += 1
        return out

    def line(self) -> str:
        """``N closed: what x count, ...`` or ``none``."""
        c = self.counts()
        if not c:
            return "none"
        return f"{sum(c.values())}: " + "; ".join(f"{k} x{v}" for k, v in c.most_common())
