"""Pure helpers of ``kubectl ome``: tables, details, preconditions and request bodies.

Everything here works on JSON as the API server returns it (an InferenceReplica, its
``status`` in either row encoding) and on the core's status model; nothing does I/O, so the
formatting is unit-tested without a cluster.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from omenative_core.codec import status_from_json, to_json
from omenative_core.model.status import (
    Condition,
    InferenceReplicaStatus,
    InstanceStatus,
    MigrationStatus,
)
from omenative_core.model.timefmt import format_time
from omenative_core.revisions import hash_of

__all__ = [
    "ACTIVE_MIGRATION_PHASES",
    "ANNOTATION_MIGRATION_PREFIX",
    "ANNOTATION_RELEASE_HELD",
    "MAX_HINT_NODES",
    "age",
    "decode_status",
    "evidence",
    "format_instance_detail",
    "format_instance_table",
    "format_migrations",
    "format_retry_blocks",
    "format_rollout_status",
    "held_revision_match",
    "instance_json",
    "migration_conflict",
    "migration_request",
    "migrations_json",
    "pending_migration_requests",
    "retry_blocks_json",
    "revs",
    "rollout_json",
    "scale_refusal",
    "short_revision",
    "table",
]

ANNOTATION_RELEASE_HELD = "ome.io/release-held-revision"
"""Release a Held revision (``<full name | hash>``); the manager consumes it."""

ANNOTATION_MIGRATION_PREFIX = "ome.io/migration-request-v1-"
"""A migration request; the rest of the key is the request's UUID."""

ACTIVE_MIGRATION_PHASES = ("Accepted", "SurgePending", "SurgeReady", "Draining")
"""Migration phases that are still work in progress."""

MAX_HINT_NODES = 8
"""At most this many ``hint_target_nodes`` in one request."""


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


# ---------------------------------------------------------------------------- instances


def evidence(row: InstanceStatus) -> str:
    """Why the Instance is as it is: its last failure, else what its operation waits on."""
    parts: list[str] = []
    failure = row.last_failure
    if failure is not None and failure.reason:
        text = failure.reason
        if failure.exit_code is not None:
            text += f" (exit {failure.exit_code})"
        if failure.pod_name:
            text += f" on {failure.pod_name}"
        parts.append(text)
    op = row.operation
    if op is not None:
        text = op.type + (f"/{op.step}" if op.step else "")
        if op.waiting:
            text += f" waiting {op.waiting}"
        parts.append(text)
    return "; ".join(parts) or "-"


def _pods(row: InstanceStatus) -> str:
    return f"{row.serving_pod_count}/{row.available_pod_count}/{row.pod_count}"


def format_instance_table(component: str, status: InferenceReplicaStatus) -> str:
    """``instance list``: one line per Instance, by index."""
    rows = [
        (component or "-", f"{r.index}/{r.incarnation}", r.phase, _pods(r), revs(r),
         str(r.active_ordinal), evidence(r))
        for r in sorted(status.instances, key=lambda r: r.index)
    ]
    out = table(("COMP", "IDX/INC", "PHASE", "PODS(S/A/T)", "REVS", "AOF", "EVIDENCE"), rows)
    if not rows:
        out += "\n(no Instances)"
    return out


def instance_json(row: InstanceStatus, component: str = "") -> dict[str, Any]:
    """One Instance row as OME's DenseV1 JSON (plus ``component`` when given)."""
    out: dict[str, Any] = to_json(row)
    if component:
        out = {"component": component, **out}
    return out


def format_instance_detail(
    name: str,
    component: str,
    row: InstanceStatus,
    pods: Sequence[Mapping[str, Any]],
    now: datetime,
) -> str:
    """``instance status``: the Instance, its operation, last failure, conditions and pods."""
    lines = [
        f"Instance:      {name} {component or '-'} #{row.index} (incarnation {row.incarnation})",
        f"Phase:         {row.phase}",
        f"Revisions:     running {row.running_revision or '-'}, "
        f"target {row.target_revision or '-'}",
        f"Pods:          serving {row.serving_pod_count}, available {row.available_pod_count}, "
        f"total {row.pod_count}; admitted {str(row.admitted).lower()}",
        f"ActiveOrdinal: {row.active_ordinal}",
        f"ReadySince:    {_when(row.ready_since)}",
    ]
    op = row.operation
    if op is None:
        lines.append("Operation:     none")
    else:
        lines.append(f"Operation:     {op.type}" + (f" step {op.step}" if op.step else "")
                     + f" (id {op.id})")
        if op.deadline is not None:
            deadline = f"{format_time(op.deadline)} ({age(op.deadline, now)})"
        else:
            deadline = "parked (clock stopped)" if op.waiting else "none"
        details = [
            ("Started", f"{_when(op.started_at)} ({age(op.started_at, now)})"),
            ("LastProgress", _when(op.last_progress_at)),
            ("Deadline", deadline),
            ("Waiting", op.waiting or "-"),
            ("Target", op.target_revision or "-"),
            ("Reason", op.reason or "-"),
            ("Retries", str(op.retry_count)),
        ]
        if op.strategy:
            details.append(("Strategy", op.strategy))
        if op.type == "Migrate" or op.surge_index is not None:
            details.append(("SurgeIndex", "-" if op.surge_index is None else str(op.surge_index)))
            details.append(("FromNode", op.from_node or "-"))
            details.append(("HintNodes", ",".join(op.hint_target_nodes) or "-"))
            details.append(("RequestUUID", op.request_uuid or "-"))
        if op.replaces is not None:
            details.append(("Replaces", str(op.replaces)))
        lines.extend(f"  {k + ':':<14}{v}" for k, v in details)
    failure = row.last_failure
    if failure is None:
        lines.append("LastFailure:   none")
    else:
        code = "" if failure.exit_code is None else f" exit {failure.exit_code}"
        lines.append(f"LastFailure:   {failure.reason or '-'}{code} at {_when(failure.time)}")
        lines.append(f"  {'Pod:':<14}{failure.pod_name or '-'} "
                     f"container {failure.container_name or '-'}")
        if failure.message:
            lines.append(f"  {'Message:':<14}{failure.message}")
    if row.conditions:
        lines.append("Conditions:")
        lines.append(_indent(_conditions_table(row.conditions, now)))
    lines.append("Pod objects:" if pods else "Pod objects:   none")
    if pods:
        lines.append(_indent(_pods_table(pods)))
    return "\n".join(lines)


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())


def _conditions_table(conds: Sequence[Condition], now: datetime) -> str:
    return table(("TYPE", "STATUS", "REASON", "SINCE", "MESSAGE"),
                 [(c.type, c.status, c.reason or "-", age(c.last_transition_time, now),
                   c.message or "") for c in conds])


def _pod_condition(pod: Mapping[str, Any], type_: str) -> str:
    for c in (pod.get("status") or {}).get("conditions") or ():
        if c.get("type") == type_:
            return str(c.get("status", "?"))
    return "-"


def _pods_table(pods: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for pod in sorted(pods, key=lambda p: str(p.get("metadata", {}).get("name", ""))):
        meta = pod.get("metadata") or {}
        status = pod.get("status") or {}
        phase = str(status.get("phase") or "Pending")
        if meta.get("deletionTimestamp"):
            phase = "Terminating"
        restarts = sum(int(c.get("restartCount") or 0)
                       for c in status.get("containerStatuses") or ())
        labels = meta.get("labels") or {}
        rows.append((str(meta.get("name", "?")), phase, _pod_condition(pod, "Ready"),
                     _pod_condition(pod, "ome.io/serving"), str(restarts),
                     str((pod.get("spec") or {}).get("nodeName") or "-"),
                     str(labels.get("ome.io/revision-hash", "-"))))
    return table(("POD", "PHASE", "READY", "SERVING", "RESTARTS", "NODE", "REV"), rows)


# ---------------------------------------------------------------------------- retry blocks


def format_retry_blocks(status: InferenceReplicaStatus, now: datetime) -> str:
    """``instance retry-blocks``: one line per target revision."""
    names = {"Backoff": "BACKOFF", "RetryInProgress": "RUNNING", "Held": "HELD"}
    rows = [
        (names.get(b.state, b.state.upper()), b.target_revision, str(b.attempts_started),
         _next_retry(b.state, b.next_retry_at, now), age(b.last_failure_at, now), b.reason or "-")
        for b in status.retry_blocks
    ]
    if not rows:
        return "no retry blocks: no revision has failed"
    return table(("STATE", "REVISION", "ATTEMPTS", "NEXT RETRY", "LAST FAILURE", "REASON"), rows)


def _next_retry(state: str, at: datetime | None, now: datetime) -> str:
    if state == "Held":
        return "never (held)"
    if state == "RetryInProgress":
        return "running"
    if at is None:
        return "-"
    return "now" if at <= now else f"{format_time(at)} ({age(at, now)})"


def retry_blocks_json(status: InferenceReplicaStatus) -> list[Any]:
    """The retry blocks as OME's JSON."""
    return [to_json(b) for b in status.retry_blocks]


def held_revision_match(status: InferenceReplicaStatus, revision: str) -> list[str]:
    """Held revisions that ``revision`` names (full name, hash, or an 8+ character prefix)."""
    if not revision:
        return []
    out = []
    for b in status.retry_blocks:
        if b.state != "Held":
            continue
        h = hash_of(b.target_revision)
        if revision in (b.target_revision, h) or (len(revision) >= 8 and h.startswith(revision)):
            out.append(b.target_revision)
    return out


# ---------------------------------------------------------------------------- rollout


def _condition(status: InferenceReplicaStatus, type_: str) -> Condition | None:
    return next((c for c in status.conditions if c.type == type_), None)


def rollout_json(ir: Mapping[str, Any], status: InferenceReplicaStatus) -> dict[str, Any]:
    """``rollout status -o json``: revisions, counts, pause, hold and the Ready condition."""
    spec = ir.get("spec") or {}
    ready = _condition(status, "Ready")
    hold = status.rollout_hold
    return {
        "name": (ir.get("metadata") or {}).get("name"),
        "component": spec.get("component"),
        "desiredReplicas": spec.get("replicas", 1),
        "paused": bool(spec.get("paused")),
        "pauseMode": spec.get("pauseMode") or ("Recover" if spec.get("paused") else ""),
        "currentRevision": status.current_revision,
        "updateRevision": status.update_revision,
        "replicas": status.replicas,
        "readyReplicas": status.ready_replicas,
        "servingReplicas": status.serving_replicas,
        "availableReplicas": status.available_replicas,
        "updatedReplicas": status.updated_replicas,
        "updatedReadyReplicas": status.updated_ready_replicas,
        "rolloutHold": None if hold is None else to_json(hold),
        "ready": None if ready is None else to_json(ready),
    }


def format_rollout_status(ir: Mapping[str, Any], status: InferenceReplicaStatus,
                          now: datetime) -> str:
    """``rollout status``: where the rollout stands, in a few lines."""
    data = rollout_json(ir, status)
    done = status.update_revision == status.current_revision and \
        status.updated_replicas == status.replicas
    lines = [
        f"Rollout:    {data['name']} ({data['component'] or '-'})",
        f"Revisions:  current {status.current_revision or '-'} -> update "
        f"{status.update_revision or '-'} ({'complete' if done else 'in progress'})",
        f"Replicas:   desired {data['desiredReplicas']}, current {status.replicas}, "
        f"updated {status.updated_replicas} ({status.updated_ready_replicas} ready), "
        f"ready {status.ready_replicas}, serving {status.serving_replicas}, "
        f"available {status.available_replicas}",
        "Paused:     " + (f"yes ({data['pauseMode']})" if data["paused"] else "no"),
    ]
    hold = status.rollout_hold
    if hold is None:
        lines.append("Hold:       none")
    else:
        since = f", since {format_time(hold.since)} ({age(hold.since, now)})" if hold.since \
            else ""
        lines.append(f"Hold:       gate {hold.gate}: {hold.reason or '-'}"
                     + (f" (target {hold.target})" if hold.target else "") + since)
    ready = _condition(status, "Ready")
    if ready is None:
        lines.append("Ready:      unknown (no status yet)")
    else:
        lines.append(f"Ready:      {ready.status} {ready.reason}"
                     + (f": {ready.message}" if ready.message else ""))
    return "\n".join(lines)


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
    """The annotation value of a migration request (OME's v1 JSON, compact)."""
    body: dict[str, Any] = {
        "schemaVersion": "v1",
        "component": component,
        "instance": instance,
        "from_node": from_node or "",
        "hint_target_nodes": list(hint_nodes),
        "reason": reason,
        "requested_at": format_time(requested_at.astimezone(UTC)),
        "requested_by": requested_by,
    }
    return json.dumps(body, separators=(",", ":"))


# ---------------------------------------------------------------------------- scale


def scale_refusal(ir: Mapping[str, Any], status: InferenceReplicaStatus,
                  replicas: int) -> str | None:
    """Why ``scale`` must not write ``replicas`` now (None: it may)."""
    if replicas <= 0:
        return "refusing to scale to 0: that removes every Instance (delete the " \
               "InferenceReplica, or set spec.replicas explicitly, if you mean it)"
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
