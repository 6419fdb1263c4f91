"""Pure helpers of ``kubectl ome handover``: the progress of a move off LeaderWorkerSet.

One row per engine / decoder of the InferenceService: the hand-over's phase (the reason of
the component's ``LWSHandover`` condition while the LeaderWorkerSet exists), the
LeaderWorkerSet's groups ready / desired, the OMENative Instances ready / desired, and the
condition's message. Phases: ``Surging``, ``NoRoomToSurge``, ``Deleting``, ``NotOwned``
(from the condition); ``MultiNode`` (a LeaderWorkerSet and no hand-over: the component
still runs on it); ``Done`` (no LeaderWorkerSet, an InferenceReplica); ``-`` (neither).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from attrs import asdict, frozen

from omenative_core.service.handover import CONDITION_LWS_HANDOVER

__all__ = ["HandoverRow", "format_handover", "handover_json", "handover_rows"]

_COMPONENTS = ("engine", "decoder")


@frozen(kw_only=True)
class HandoverRow:
    """One component's hand-over as ``kubectl ome handover`` shows it."""

    component: str
    phase: str
    lws: str = ""
    lws_ready: int | None = None
    lws_desired: int | None = None
    instances_ready: int | None = None
    instances_desired: int | None = None
    message: str = ""


def _count(obj: Mapping[str, Any] | None, section: str, key: str) -> int | None:
    if obj is None:
        return None
    value = (obj.get(section) or {}).get(key)
    if value is None and section == "status":
        return 0
    return value if isinstance(value, int) else None


def _ready_groups(lws: Mapping[str, Any] | None) -> int | None:
    """Ready groups, never above ``spec.replicas`` (a status not caught up with a scale-down
    still counts the group that is going; the hand-over does not count it either)."""
    ready, desired = _count(lws, "status", "readyReplicas"), _count(lws, "spec", "replicas")
    return min(ready, desired) if ready is not None and desired is not None else ready


def _condition(isvc: Mapping[str, Any], component: str) -> Mapping[str, Any] | None:
    entry = ((isvc.get("status") or {}).get("components") or {}).get(component) or {}
    for cond in entry.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == CONDITION_LWS_HANDOVER:
            return cond
    return None


def _phase(lws: Mapping[str, Any] | None, replica: Mapping[str, Any] | None,
           cond: Mapping[str, Any] | None) -> str:
    if lws is not None:
        return str(cond.get("reason") or "") if cond is not None else "MultiNode"
    return "Done" if replica is not None else "-"


def handover_rows(
    isvc: Mapping[str, Any],
    lws: Mapping[str, Mapping[str, Any] | None],
    replicas: Mapping[str, Mapping[str, Any] | None],
) -> list[HandoverRow]:
    """The rows of the InferenceService's engine and decoder (those it has something for).

    ``lws``: the LeaderWorkerSet ``lws-{isvc}-{component}`` by component (None: none);
    ``replicas``: the InferenceReplica ``{isvc}-{component}`` by component (None: none).
    """
    rows: list[HandoverRow] = []
    for component in _COMPONENTS:
        set_, replica = lws.get(component), replicas.get(component)
        if set_ is None and replica is None:
            continue
        cond = _condition(isvc, component) if set_ is not None else None
        rows.append(
            HandoverRow(
                component=component,
                phase=_phase(set_, replica, cond),
                lws=str((set_.get("metadata") or {}).get("name") or "") if set_ else "",
                lws_ready=_ready_groups(set_),
                lws_desired=_count(set_, "spec", "replicas"),
                instances_ready=_count(replica, "status", "readyReplicas"),
                instances_desired=_count(replica, "spec", "replicas"),
                message=str(cond.get("message") or "") if cond is not None else "",
            )
        )
    return rows


def _ratio(ready: int | None, desired: int | None) -> str:
    if ready is None and desired is None:
        return "-"
    return f"{ready if ready is not None else 0}/{desired if desired is not None else '?'}"


def format_handover(name: str, rows: Sequence[HandoverRow]) -> str:
    """The table, then each row's message on its own line."""
    if not rows:
        return f"InferenceService {name}: no LeaderWorkerSet and no InferenceReplica"
    header = ("COMPONENT", "PHASE", "LWS GROUPS", "INSTANCES")
    body = [
        (r.component, r.phase, _ratio(r.lws_ready, r.lws_desired),
         _ratio(r.instances_ready, r.instances_desired))
        for r in rows
    ]
    widths = [max(len(str(line[i])) for line in (header, *body)) for i in range(len(header))]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(line, widths, strict=True)).rstrip()
             for line in (header, *body)]
    lines += [f"{r.component}: {r.message}" for r in rows if r.message]
    return "\n".join(lines)


def handover_json(rows: Sequence[HandoverRow]) -> list[dict[str, Any]]:
    """The rows as JSON objects (snake_case keys, as the table's columns)."""
    return [asdict(r) for r in rows]
