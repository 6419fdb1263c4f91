"""``kubectl ome migration`` and ``scale``: migration records, requests and preconditions.

Pure: decides what may be written and formats what was recorded; the command writes it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from omenative_controller.cli.output_basics import age, table
from omenative_controller.migration_requests import (
    ACTIVE_MIGRATION_PHASES,
    ANNOTATION_MIGRATION_PREFIX,
)
from omenative_core.codec import to_json
from omenative_core.model.status import (
    InferenceReplicaStatus,
    MigrationStatus,
)

# ---------------------------------------------------------------------------- migrations


def format_migrations(status: InferenceReplicaStatus, pending: Sequence[str],
                      now: datetime) -> str:
    """``migration status``: one line per record, then requests not yet accepted."""
    rows = [
        (m.request_uuid, m.trigger, m.phase, str(m.source_instance),
         "-" if m.surge_instance is None else str(m.surge_instance), m.from_node or "-",
         age(m.started_at, now), _outcome(m))
        for m in status.migrations
    ]
    out = (table(("REQUEST", "TRIGGER", "PHASE", "SOURCE", "SURGE", "FROM NODE", "STARTED",
                  "RESULT"), rows) if rows else "no migrations")
    if pending:
        out += "\nrequests not yet accepted: " + ", ".join(pending)
    return out


def _outcome(m: MigrationStatus) -> str:
    if m.phase == "Completed" or m.succeeded:
        return "succeeded"
    if m.phase in ACTIVE_MIGRATION_PHASES:
        return m.message or m.reason or "-"
    return ("failed: " + (m.message or m.reason or "-")) if m.succeeded is False \
        else (m.message or m.reason or "-")


def migrations_json(status: InferenceReplicaStatus, pending: Sequence[str]) -> dict[str, Any]:
    """``migration status -o json``."""
    return {"migrations": [to_json(m) for m in status.migrations],
            "pendingRequests": list(pending)}


def pending_migration_requests(ir: Mapping[str, Any]) -> list[str]:
    """UUIDs of migration-request annotations the manager has not consumed yet."""
    ann = (ir.get("metadata") or {}).get("annotations") or {}
    return sorted(k[len(ANNOTATION_MIGRATION_PREFIX):] for k in ann
                  if k.startswith(ANNOTATION_MIGRATION_PREFIX))


def migration_conflict(ir: Mapping[str, Any], status: InferenceReplicaStatus,
                       instance: int) -> str | None:
    """Why a migration of ``instance`` cannot start now (None: it can)."""
    rows = {r.index: r for r in status.instances}
    name = (ir.get("metadata") or {}).get("name")
    row = rows.get(instance)
    if row is None:
        known = ", ".join(str(i) for i in sorted(rows)) or "none"
        return f"{name} has no Instance {instance} (Instances: {known})"
    if row.phase == "Deleting":
        return f"Instance {instance} is being deleted"
    if row.operation is not None and row.operation.type in ("Migrate", "Delete"):
        return f"Instance {instance} is busy with a {row.operation.type} operation"
    for m in status.migrations:
        if m.phase in ACTIVE_MIGRATION_PHASES and (
                instance in (m.source_instance, m.surge_instance)):
            return f"Instance {instance} is already migrating (request {m.request_uuid}, " \
                   f"phase {m.phase})"
    ann = (ir.get("metadata") or {}).get("annotations") or {}
    for key, value in ann.items():
        if key.startswith(ANNOTATION_MIGRATION_PREFIX):
            try:
                other = json.loads(value).get("instance")
            except (ValueError, AttributeError):
                continue
            if other == instance:
                return f"a migration request for Instance {instance} is already waiting " \
                       f"({key})"
    return None


# ---------------------------------------------------------------------------- scale


def scale_bounds_refusal(component_spec: Mapping[str, Any] | None,
                         replicas: int) -> str | None:
    """Why ``replicas`` is outside the InferenceService component's
    ``minReplicas``..``maxReplicas`` (None: inside, or no bounds are set), as OME refuses."""
    if not component_spec:
        return None
    low, high = component_spec.get("minReplicas"), component_spec.get("maxReplicas")
    if isinstance(low, int) and replicas < low:
        return f"{replicas} is below the component's minReplicas {low}"
    if isinstance(high, int) and high > 0 and replicas > high:
        return f"{replicas} is above the component's maxReplicas {high}"
    return None


def scale_refusal(ir: Mapping[str, Any], status: InferenceReplicaStatus,
                  replicas: int) -> str | None:
    """Why ``scale`` must not write ``replicas`` now (None: it may)."""
    if replicas <= 0:
        return "refusing to scale to 0: OME reads 0 as one Instance, as an unset count " \
               "(scale to 1, or delete the InferenceReplica to remove every Instance)"
    if status.updated_replicas != status.replicas or (
            status.update_revision and status.update_revision != status.current_revision):
        return (f"a rollout is in progress ({status.updated_replicas}/{status.replicas} "
                f"Instances on {status.update_revision or '-'}): wait for it to finish")
    active = [m.request_uuid for m in status.migrations if m.phase in ACTIVE_MIGRATION_PHASES]
    pending = pending_migration_requests(ir)
    if active or pending:
        return "migration work is in progress (" + ", ".join(active + pending) + \
               "): wait for it to finish"
    migrating = [r.index for r in status.instances
                 if r.phase == "Migrating" or (r.operation and r.operation.type == "Migrate")]
    if migrating:
        return f"Instance(s) {', '.join(map(str, migrating))} are migrating: wait for them"
    return None
