"""``kubectl ome migration history``: OME's report of a service's migrations from the
InferenceReplicas' ``status.migrations`` (``AUTH``, authoritative) and the audit ConfigMap
``{isvc}-ome-migration-audit`` (``AUDIT``, key ``history.json``) (pure)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from attrs import frozen

from omenative_controller.cli.output_basics import table
from omenative_core.model.status import InferenceReplicaStatus
from omenative_core.model.timefmt import format_time, parse_time

__all__ = ["HistoryRecord", "audit_records", "auth_records", "format_history_table",
           "history_json"]

AUDIT_KEY = "history.json"
_TERMINAL = ("Completed", "Failed", "Relocated")
_DETAIL_WIDTH = 20


@frozen(kw_only=True)
class HistoryRecord:
    """One row of the history: where it comes from and what it says."""

    evidence: str  # AUTH | AUDIT
    request_id: str
    component: str
    phase: str
    state: str  # A active, T terminal, ! invalid
    when: datetime | None
    detail: str


def _latest(*times: datetime | None) -> datetime | None:
    known = [t for t in times if t is not None]
    return max(known) if known else None


def auth_records(component: str, status: InferenceReplicaStatus) -> list[HistoryRecord]:
    """The records an InferenceReplica's status holds (what ``migration status`` shows)."""
    return [HistoryRecord(evidence="AUTH", request_id=m.request_uuid, component=component,
                          phase=m.phase, state="T" if m.phase in _TERMINAL else "A",
                          when=_latest(m.started_at, m.allocated_at, m.completed_at),
                          detail=m.message or m.reason)
            for m in status.migrations]


def audit_records(config_map: Mapping[str, Any] | None) -> tuple[list[HistoryRecord],
                                                                   list[str]]:
    """The audit ConfigMap's entries, and its issue codes (``AuditMalformed``, ...)."""
    if config_map is None:
        return [], []
    text = (config_map.get("data") or {}).get(AUDIT_KEY)
    try:
        entries = json.loads(text or "{}").get("entries") or []
    except (ValueError, AttributeError):
        return [], ["AuditMalformed"]
    out: list[HistoryRecord] = []
    issues: list[str] = []
    for entry in entries if isinstance(entries, list) else ():
        if not isinstance(entry, Mapping) or not entry.get("requestUUID"):
            issues.append("RecordInvalid")
            continue
        try:
            when = _latest(*(parse_time(entry[k]) for k in ("startedAt", "completedAt")
                             if entry.get(k)))
        except (ValueError, TypeError):
            issues.append("TimestampInvalid")
            when = None
        phase = str(entry.get("phase") or "Started")
        out.append(HistoryRecord(
            evidence="AUDIT", request_id=str(entry["requestUUID"]),
            component=str(entry.get("component") or ""), phase=phase,
            state="T" if phase in _TERMINAL else "A", when=when,
            detail=str(entry.get("outcome") or entry.get("reason") or "")))
    return out, issues


def _sorted(records: Sequence[HistoryRecord]) -> list[HistoryRecord]:
    return sorted(records, key=lambda r: (r.when is None, -(r.when.timestamp() if r.when else 0),
                                          r.evidence, r.request_id))


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[:width - 3] + "..."


def format_history_table(records: Sequence[HistoryRecord], issues: Sequence[str],
                         *, wide: bool = False) -> str:
    """OME's columns EVID REQUEST/COMP PHASE/STATE WHEN DETAIL (wide: full values)."""
    rows = [(r.evidence,
             f"{r.request_id if wide else r.request_id[:8]}/"
             f"{r.component if wide else (r.component[:1].upper() or '-')}",
             f"{r.phase}/{r.state}",
             r.when.strftime("%m-%dT%H:%MZ") if r.when else "-",
             (r.detail if wide else _cut(r.detail, _DETAIL_WIDTH)) or "-")
            for r in _sorted(records)]
    state = _state(records, issues)
    rows += [("REPORT", "-", state, "-", code) for code in issues]
    if not rows:
        rows = [("-", "-/-", state, "-", "-")]
    return table(("EVID", "REQUEST/COMP", "PHASE/STATE", "WHEN", "DETAIL"), rows)


def _state(records: Sequence[HistoryRecord], issues: Sequence[str]) -> str:
    if issues:
        return "Partial"
    return "Reported" if records else "Empty"


def history_json(namespace: str, name: str, records: Sequence[HistoryRecord],
                 issues: Sequence[str], audit_found: bool) -> dict[str, Any]:
    """OME's ``MigrationHistoryReport``: sources, summary, records and issues."""
    return {
        "apiVersion": "cli.ome.io/v1alpha1", "kind": "MigrationHistoryReport",
        "metadata": {"namespace": namespace, "name": name},
        "sources": [{"evidence": "Authoritative"}, {"evidence": "ParentSummary"},
                    {"evidence": "AuditHistory",
                     "state": "Available" if audit_found else "NotFound"}],
        "content": {
            "summary": {"state": _state(records, issues), "records": len(records)},
            "records": [{"evidence": {"AUTH": "Authoritative", "AUDIT": "AuditHistory"}
                         [r.evidence], "requestID": r.request_id, "component": r.component,
                         "phase": r.phase, "terminal": r.state == "T",
                         "time": format_time(r.when) if r.when else None,
                         "detail": r.detail} for r in _sorted(records)],
            "issues": [{"code": code} for code in issues],
        },
    }
