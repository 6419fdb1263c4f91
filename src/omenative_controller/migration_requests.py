"""Migration requests as omenative writes them: the annotation key and value OME reads.

One home for every writer (``kubectl ome migration``/``advise --apply``, the manager's
``--advisor=apply``, ``omenative advise``), below both the manager and ``cli/``, so the
advisor loop does not import the command-line package (which imports the manager).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from omenative_core.advisor import Recommendation
from omenative_core.model.timefmt import format_time

__all__ = [
    "ACTIVE_MIGRATION_PHASES",
    "ANNOTATION_MIGRATION_PREFIX",
    "MAX_HINT_NODES",
    "migration_request",
    "move_request",
]

ANNOTATION_MIGRATION_PREFIX = "ome.io/migration-request-v1-"
"""A migration request; the rest of the key is the request's UUID."""

ACTIVE_MIGRATION_PHASES = ("Accepted", "SurgePending", "SurgeReady", "Draining")
"""Migration phases that are still work in progress."""

MAX_HINT_NODES = 8
"""At most this many ``hint_target_nodes`` in one request."""


def migration_request(
    *,
    instance: int,
    component: str,
    from_node: str | None,
    hint_nodes: Sequence[str],
    reason: str,
    requested_by: str,
    requested_at: datetime,
) -> str:
    """The annotation value of a migration request (OME's v1 JSON, compact).

    An unknown ``from_node`` is left out: admission refuses an empty one.
    """
    body: dict[str, Any] = {
        "schemaVersion": "v1",
        "component": component,
        "instance": instance,
        **({"from_node": from_node} if from_node else {}),
        "hint_target_nodes": list(hint_nodes),
        "reason": reason,
        "requested_at": format_time(requested_at.astimezone(UTC)),
        "requested_by": requested_by,
    }
    return json.dumps(body, separators=(",", ":"))


def move_request(rec: Recommendation, *, component: str, tool: str, requested_by: str,
                 requested_at: datetime) -> str:
    """The migration-request annotation value that carries out one recommended move.

    One mapping for every writer (``kubectl ome advise --apply``, the manager's
    ``--advisor=apply``, ``omenative advise``): the source node when the Instance is on one,
    the advisor's target nodes as hints (at most ``MAX_HINT_NODES``, as admission allows),
    and a reason naming ``tool``, the advisor's reason and its group.
    """
    return migration_request(
        instance=rec.instance.index, component=component,
        from_node=rec.from_nodes[0] if len(rec.from_nodes) == 1 else None,
        hint_nodes=rec.target_nodes[:MAX_HINT_NODES],
        reason=f"{tool}: {rec.reason} ({rec.group})",
        requested_by=requested_by, requested_at=requested_at)
