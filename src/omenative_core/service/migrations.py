"""Migration requests made on an InferenceService, after a component has taken them.

A request is the ISVC annotation ``ome.io/migration-request-v1-<uuid>``; rendering forwards
it to the component's InferenceReplica, whose manager records it in ``status.migrations``
(phase ``Accepted`` and on). From then on the ISVC controller:

- removes the annotation from the ISVC (``accepted_migration_annotations``), as OME does,
  so the request is not forwarded again and a finished migration never restarts;
- keeps an audit row per request in the ConfigMap ``<isvc>-ome-migration-audit``, key
  ``history.json`` (``merge_audit``): the InferenceReplica's records are pruned in time, the
  audit keeps the last ``AUDIT_LIMIT`` finished ones (and every one still running).

Pure: the previous audit text and the replicas in, the new text out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from omenative_core.labels import LABEL_ISVC
from omenative_core.model.spec import InferenceReplica
from omenative_core.model.status import InferenceReplicaStatus, MigrationStatus
from omenative_core.model.timefmt import format_time
from omenative_core.service.model import InferenceService
from omenative_core.service.render import ANNOTATION_MIGRATION_PREFIX, isvc_owner_reference

__all__ = [
    "AUDIT_KEY",
    "AUDIT_LIMIT",
    "accepted_migration_annotations",
    "audit_configmap",
    "audit_configmap_name",
    "merge_audit",
]

AUDIT_KEY: Final = "history.json"
"""The audit ConfigMap's data key (OME's)."""

AUDIT_LIMIT: Final = 200
"""Finished migrations the audit keeps (OME's)."""

_FINISHED: Final = {"Completed": "succeeded", "Failed": "failed", "Relocated": "relocated"}
"""Terminal phases and the outcome each records."""


def audit_configmap_name(isvc_name: str) -> str:
    """``<isvc>-ome-migration-audit``."""
    return f"{isvc_name}-ome-migration-audit"


def audit_configmap(isvc: InferenceService, text: str) -> dict[str, Any]:
    """The audit ConfigMap holding ``text`` (from ``merge_audit``), owned by ``isvc`` so it
    goes with it."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": audit_configmap_name(isvc.name),
            "namespace": isvc.namespace,
            "labels": {LABEL_ISVC: isvc.name},
            "ownerReferences": [isvc_owner_reference(isvc)],
        },
        "data": {AUDIT_KEY: text},
    }


def accepted_migration_annotations(
    isvc: InferenceService, replicas: Mapping[str, InferenceReplica]
) -> tuple[str, ...]:
    """The ISVC's ``ome.io/migration-request-v1-<uuid>`` annotations that some component's
    InferenceReplica has recorded in ``status.migrations``: the shell removes them, as OME
    does once a request is Accepted."""
    recorded: set[str] = set()
    for replica in replicas.values():
        status = replica.status
        if isinstance(status, InferenceReplicaStatus):
            recorded.update(m.request_uuid for m in status.migrations)
    return tuple(
        sorted(
            key
            for key in isvc.annotations
            if key.startswith(ANNOTATION_MIGRATION_PREFIX)
            and key[len(ANNOTATION_MIGRATION_PREFIX) :] in recorded
        )
    )


def _row(component: str, m: MigrationStatus) -> dict[str, Any]:
    row: dict[str, Any] = {
        "requestUUID": m.request_uuid,
        "component": component,
        "sourceInstance": m.source_instance,
        "phase": m.phase,
        "reason": m.reason,
        "fromNode": m.from_node or "",
        "startedAt": format_time(m.started_at) if m.started_at else "",
        "completedAt": format_time(m.completed_at) if m.completed_at else "",
    }
    outcome = _FINISHED.get(m.phase)
    if m.phase == "Relocated" and m.succeeded is not True:
        outcome = None  # an automatic relocation counts once its Instance is Ready again
    if outcome is not None:
        row["outcome"] = outcome
    return row


def _previous_rows(text: str | None) -> list[dict[str, Any]]:
    """The rows of an existing audit; a malformed one keeps what can be read."""
    if not text:
        return []
    try:
        data = json.loads(text)
    except ValueError:
        return []
    entries = data.get("entries") if isinstance(data, Mapping) else None
    if not isinstance(entries, list):
        return []
    return [dict(e) for e in entries
            if isinstance(e, Mapping) and isinstance(e.get("requestUUID"), str)]


def merge_audit(
    previous: str | None, replicas: Mapping[str, InferenceReplica]
) -> str | None:
    """The audit's new ``history.json`` after folding in every component's
    ``status.migrations``, or None when nothing changed (no write)."""
    rows = {r["requestUUID"]: r for r in _previous_rows(previous)}
    for component in sorted(replicas):
        status = replicas[component].status
        if not isinstance(status, InferenceReplicaStatus):
            continue
        for m in status.migrations:
            rows[m.request_uuid] = _row(component, m)
    if not rows:
        return None
    finished = sorted((r for r in rows.values() if "outcome" in r),
                      key=lambda r: (str(r.get("completedAt", "")), r["requestUUID"]))
    running = sorted((r for r in rows.values() if "outcome" not in r),
                     key=lambda r: (str(r.get("startedAt", "")), r["requestUUID"]))
    text = json.dumps({"entries": finished[-AUDIT_LIMIT:] + running},
                      sort_keys=True, separators=(",", ":"))
    return None if text == previous else text
