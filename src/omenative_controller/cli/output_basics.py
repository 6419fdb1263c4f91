"""Shared pieces of ``kubectl ome``'s output: status decoding, ages, revisions and tables.

Pure, like every ``*_output`` module: JSON and the core's status model in, text out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from omenative_core.model.status import (
    InferenceReplicaStatus,
    InstanceStatus,
)
from omenative_core.model.timefmt import format_time
from omenative_core.revisions import hash_of
from omenative_core.status.wire import status_from_json

# ---------------------------------------------------------------------------- basics


def decode_status(ir: Mapping[str, Any]) -> InferenceReplicaStatus:
    """The InferenceReplica's status (DenseV1 or ColumnarV2 rows); empty when absent."""
    raw = ir.get("status")
    if not raw:
        return InferenceReplicaStatus()
    return status_from_json(raw)


def short_revision(name: str) -> str:
    """A revision name's hash part (the name itself if it has none; ``-`` if empty)."""
    if not name:
        return "-"
    return hash_of(name) or name


def revs(row: InstanceStatus) -> str:
    """``running→target`` in short hashes, one hash when they agree."""
    running, target = short_revision(row.running_revision), short_revision(row.target_revision)
    if row.target_revision in ("", row.running_revision):
        return running
    return f"{running}→{target}"


def age(then: datetime | None, now: datetime) -> str:
    """How long ago ``then`` was (``-`` when unknown); negative means in the future."""
    if then is None:
        return "-"
    seconds = int((now - then).total_seconds())
    if seconds < 0:
        return "in " + _span(-seconds)
    return _span(seconds) + " ago"


def _span(seconds: int) -> str:
    if seconds < 120:
        return f"{seconds}s"
    if seconds < 7200:
        return f"{seconds // 60}m{seconds % 60:02d}s" if seconds < 600 else f"{seconds // 60}m"
    if seconds < 172800:
        return f"{seconds // 3600}h{(seconds % 3600) // 60:02d}m"
    return f"{seconds // 86400}d"


def _when(value: datetime | None) -> str:
    return format_time(value) if value is not None else "-"


def table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Left-aligned columns separated by three spaces (kubectl's look)."""
    body = [list(map(str, r)) for r in rows]
    widths = [len(h) for h in headers]
    for r in body:
        for i, cell in enumerate(r):
            widths[i] = max(widths[i], len(cell))
    lines = ["   ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip()
             for r in [list(headers), *body]]
    return "\n".join(lines)
