"""Pure helpers of ``kubectl ome``: tables, details, preconditions and request bodies.

Everything here works on JSON as the API server returns it (an InferenceReplica, its
``status`` in either row encoding) and on the core's status model; nothing does I/O, so the
formatting is unit-tested without a cluster.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from attrs import frozen

from omenative_core.codec import CodecError, from_json, to_json
from omenative_core.model.status import (
    Condition,
    InferenceReplicaStatus,
    InstanceStatus,
    MigrationStatus,
    RolloutHold,
    TrafficTarget,
)
from omenative_core.model.timefmt import format_time, parse_time
from omenative_core.revisions import hash_of
from omenative_core.rollout import (
    ANNOTATION_OVERRIDE_ANALYSIS,
    ANNOTATION_PAUSED,
    ANNOTATION_PROMOTE,
    ANNOTATION_REPIN,
    ANNOTATION_ROLLBACK,
    GroupState,
    MemberView,
    RolloutGroup,
    RolloutSpecError,
    RolloutState,
    explain,
    parse_rollout,
    plan_token,
    state_from_json,
    step_allowance,
)
from omenative_core.status.wire import status_from_json

__all__ = [
    "ACTIVE_MIGRATION_PHASES",
    "ANNOTATION_MIGRATION_PREFIX",
    "ANNOTATION_OVERRIDE_ANALYSIS",
    "ANNOTATION_PAUSED",
    "ANNOTATION_PROMOTE",
    "ANNOTATION_RELEASE_HELD",
    "ANNOTATION_REPIN",
    "ANNOTATION_ROLLBACK",
    "MAX_HINT_NODES",
    "ROLLOUT_ANNOTATIONS",
    "PromoteTarget",
    "age",
    "decode_status",
    "evidence",
    "explain_line",
    "format_history",
    "format_instance_detail",
    "format_instance_table",
    "format_migrations",
    "format_retry_blocks",
    "format_rollout_status",
    "format_service_rollout",
    "has_rollout",
    "held_revision_match",
    "history_json",
    "instance_json",
    "migration_conflict",
    "migration_request",
    "migrations_json",
    "pending_migration_requests",
    "promote_target",
    "repin_refusal",
    "retry_blocks_json",
    "revs",
    "rollback_preview",
    "rollback_requested",
    "rollout_json",
    "rollout_requests",
    "rollout_state",
    "scale_refusal",
    "service_rollout_json",
    "short_revision",
    "spec_plan_token",
    "table",
    "valid_repin_token",
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


def gang_of(pod: Mapping[str, Any]) -> str:
    """A pod's gang: ``Native:<PodGroup>`` (``spec.schedulingGroup``), ``PodGroup:<name>``
    (the scheduler-plugins label), or ``None``."""
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    if group:
        return f"Native:{group}"
    label = ((pod.get("metadata") or {}).get("labels") or {}).get(
        "scheduling.x-k8s.io/pod-group")
    return f"PodGroup:{label}" if label else "None"


def gang_by_instance(pods: Sequence[Mapping[str, Any]]) -> dict[int, str]:
    """Instance index -> the gang its pods joined (``instance list -o wide``'s GANG);
    single-pod Instances show ``-``, pods of several gangs (a restart under way) all."""
    found: dict[int, set[str]] = {}
    runners: dict[int, set[str]] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        raw = str(labels.get("ome.io/instance-index", ""))
        if raw.isdigit():
            found.setdefault(int(raw), set()).add(gang_of(pod))
            runners.setdefault(int(raw), set()).add(str(labels.get("ome.io/runner", "")))
    return {i: "-" if runners[i] == {"default"} else ",".join(sorted(g))
            for i, g in found.items()}


def format_instance_table(
    component: str, status: InferenceReplicaStatus, gangs: Mapping[int, str] | None = None
) -> str:
    """``instance list``: one line per Instance, by index (``gangs``: the wide GANG column)."""
    rows = [
        (component or "-", f"{r.index}/{r.incarnation}", r.phase, _pods(r), revs(r),
         str(r.active_ordinal), evidence(r))
        + (() if gangs is None else (gangs.get(r.index, "-"),))
        for r in sorted(status.instances, key=lambda r: r.index)
    ]
    head = ("COMP", "IDX/INC", "PHASE", "PODS(S/A/T)", "REVS", "AOF", "EVIDENCE")
    out = table(head + (() if gangs is None else ("GANG",)), rows)
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


# ---------------------------------------------------------------------------- rollout groups


ROLLOUT_ANNOTATIONS = (
    ANNOTATION_PROMOTE,
    ANNOTATION_OVERRIDE_ANALYSIS,
    ANNOTATION_ROLLBACK,
    ANNOTATION_REPIN,
    ANNOTATION_PAUSED,
)
"""The InferenceService annotations that steer its rollout groups."""

_PROMOTABLE = ("Pending", "Canarying", "Paused", "Promoting")
_REPIN_TOKEN = re.compile(r"^rp1:[0-9a-f]{12}$")


def rollout_state(isvc: Mapping[str, Any]) -> RolloutState:
    """The rollout state the controller persisted in ``status.rollout`` (empty when none).

    Raises ``RolloutStateError`` naming the JSON path when it cannot be read."""
    return state_from_json((isvc.get("status") or {}).get("rollout"))


def has_rollout(isvc: Mapping[str, Any], state: RolloutState) -> bool:
    """The InferenceService declares ``spec.rollout`` or has a persisted rollout state."""
    return bool((isvc.get("spec") or {}).get("rollout")) or bool(state.groups)


def spec_plan_token(isvc: Mapping[str, Any]) -> str | None:
    """The ``rp1:`` token of the plan ``spec.rollout`` says now (None: absent or invalid)."""
    raw = (isvc.get("spec") or {}).get("rollout")
    if not raw:
        return None
    try:
        return plan_token(parse_rollout(raw))
    except RolloutSpecError:
        return None


def rollout_requests(isvc: Mapping[str, Any]) -> dict[str, str]:
    """The rollout annotations present on the InferenceService (not yet consumed)."""
    ann = (isvc.get("metadata") or {}).get("annotations") or {}
    return {k: str(ann[k]) for k in ROLLOUT_ANNOTATIONS if k in ann}


def rollback_requested(isvc: Mapping[str, Any]) -> str | None:
    """The value of ``ome.io/rollout-rollback`` when present (None: absent)."""
    ann = (isvc.get("metadata") or {}).get("annotations") or {}
    value = ann.get(ANNOTATION_ROLLBACK)
    return None if value is None else str(value)


def explain_line(isvc: Mapping[str, Any], state: RolloutState, now: datetime) -> str:
    """``rollout explain``: one line naming the gate that holds the rollout and its release."""
    if not state.groups:
        if (isvc.get("spec") or {}).get("rollout"):
            return ("no rollout state yet: the controller has not recorded status.rollout "
                    "for spec.rollout")
        return "no rollout groups: spec.rollout is not set, each component rolls on its own"
    return explain(state, now, current_token=spec_plan_token(isvc))


def _group_label(gs: GroupState) -> str:
    return f"group {gs.index} ({'+'.join(gs.components)})"


def _pinned_group(state: RolloutState, gs: GroupState) -> RolloutGroup | None:
    try:
        pinned = state.pinned
    except RolloutSpecError:
        return None
    return pinned.groups[gs.index] if gs.index < len(pinned.groups) else None


def _step_text(gs: GroupState, group: RolloutGroup | None) -> str:
    if not gs.active and gs.phase != "Failed":
        return "-"
    if group is not None and group.canary is not None and group.canary.steps:
        return f"{gs.step + 1}/{len(group.canary.steps)}"
    return f"batch {gs.step + 1}"


def _hold_of(raw: object) -> RolloutHold | None:
    if not isinstance(raw, Mapping) or not raw.get("gate"):
        return None
    try:
        return from_json(raw, RolloutHold)
    except CodecError:
        return RolloutHold(gate=str(raw.get("gate")), reason=str(raw.get("reason") or ""))


def _traffic_of(raw: object) -> list[TrafficTarget]:
    out = []
    for item in raw if isinstance(raw, list) else ():
        try:
            out.append(from_json(item, TrafficTarget))
        except CodecError:
            continue
    return out


def _component_status(isvc: Mapping[str, Any], component: str) -> Mapping[str, Any]:
    comps = (isvc.get("status") or {}).get("components") or {}
    entry = comps.get(component) if isinstance(comps, Mapping) else None
    return entry if isinstance(entry, Mapping) else {}


def _desired(ir: Mapping[str, Any] | None) -> int | None:
    if ir is None:
        return None
    replicas = (ir.get("spec") or {}).get("replicas")
    return 1 if replicas is None else max(int(replicas), 0)


def _member_view(component: str, ir: Mapping[str, Any], revision: str) -> MemberView:
    spec = ir.get("spec") or {}
    strategy = ((spec.get("lifecycle") or {}).get("updateStrategy") or {})
    rolling = strategy.get("rollingUpdate") or {}
    return MemberView(component=component, desired=_desired(ir) or 0, revision=revision,
                      strategy=str(strategy.get("type") or "SurgeThenDrain"),
                      max_surge=rolling.get("maxSurge"),
                      max_unavailable=rolling.get("maxUnavailable"))


def _ready_on(status: InferenceReplicaStatus, revision: str) -> int:
    return sum(1 for r in status.instances
               if r.running_revision == revision and r.phase == "Ready")


def _on(status: InferenceReplicaStatus, revision: str) -> int:
    return sum(1 for r in status.instances if (r.running_revision or r.target_revision)
               == revision)


def _hold_json(hold: RolloutHold | None) -> Any:
    return None if hold is None else to_json(hold)


def _member_json(isvc: Mapping[str, Any], gs: GroupState, group: RolloutGroup | None,
                 component: str, ir: Mapping[str, Any] | None) -> dict[str, Any]:
    entry = _component_status(isvc, component)
    canary = gs.canary.get(component, "")
    desired = _desired(ir)
    allowed: int | None = None
    ready: int | None = None
    if ir is not None and gs.active and canary:
        if group is not None:
            allowed = step_allowance(group, gs.step, _member_view(component, ir, canary))
        try:
            ready = _ready_on(decode_status(ir), canary)
        except CodecError:
            ready = None
    return {
        "component": component,
        "stable": gs.stable.get(component) or None,
        "canary": canary or None,
        "rejected": gs.rejected.get(component) or None,
        "desired": desired,
        "allowed": allowed,
        "readyOnCanary": ready,
        "traffic": [to_json(t) for t in _traffic_of(entry.get("traffic"))],
        "rolloutHold": _hold_json(_hold_of((entry.get("lifecycle") or {}).get("rolloutHold"))),
    }


def service_rollout_json(isvc: Mapping[str, Any], state: RolloutState,
                         replicas: Mapping[str, Mapping[str, Any]],
                         now: datetime) -> dict[str, Any]:
    """``rollout status ISVC -o json``: plan tokens, the explanation, pending requests and
    every group with its members (revisions, capacity, traffic, holds).

    ``replicas`` maps components to their InferenceReplica JSON (missing ones are skipped:
    desired and capacity are then null)."""
    meta = isvc.get("metadata") or {}
    token = spec_plan_token(isvc)
    groups = []
    for gs in state.groups:
        group = _pinned_group(state, gs)
        steps = len(group.canary.steps) if group is not None and group.canary else None
        groups.append({
            "index": gs.index,
            "components": list(gs.components),
            "progression": gs.progression,
            "phase": gs.phase,
            "step": gs.step + 1,
            "steps": steps,
            "gate": gs.gate or None,
            "failure": gs.failure or None,
            "stableAt": None if gs.stable_at is None else format_time(gs.stable_at),
            "rolloutHold": _hold_json(gs.hold),
            "members": [_member_json(isvc, gs, group, c, replicas.get(c))
                        for c in gs.components],
        })
    return {
        "kind": "InferenceService",
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "planToken": state.plan_token or None,
        "specPlanToken": token,
        "drifted": bool(token and state.plan_token and token != state.plan_token),
        "active": state.active,
        "explain": explain_line(isvc, state, now),
        "requests": rollout_requests(isvc),
        "groups": groups,
    }


def _short_hold(raw: Any) -> str:
    return str(raw["gate"]) if isinstance(raw, Mapping) and raw.get("gate") else "-"


def _traffic_text(traffic: Sequence[Mapping[str, Any]]) -> str:
    parts = []
    for t in traffic:
        name = str(t.get("revisionName") or "")
        text = f"{short_revision(name)} {t.get('percent', 0)}%"
        if t.get("tag"):
            text += f" {t['tag']}"
        parts.append(text)
    return ", ".join(parts) or "-"


def _count(value: int | None) -> str:
    return "?" if value is None else str(value)


def _hold_line(who: str, raw: Mapping[str, Any], now: datetime) -> str:
    hold = _hold_of(raw)
    assert hold is not None
    text = f"{who}: {hold.gate}"
    if hold.reason:
        text += f": {hold.reason}"
    if hold.target:
        text += f" (target {hold.target})"
    if hold.since is not None:
        text += f", since {format_time(hold.since)} ({age(hold.since, now)})"
    return text


def format_service_rollout(isvc: Mapping[str, Any], state: RolloutState,
                           replicas: Mapping[str, Mapping[str, Any]], now: datetime) -> str:
    """``rollout status ISVC``: the plan, the one-line explanation, a line per group, a line
    per member (stable / canary / rejected revision, canary capacity, traffic) and holds.

    CAP(R/A/D) is: canary Instances Ready / Instances the step allows on the canary /
    desired Instances."""
    data = service_rollout_json(isvc, state, replicas, now)
    name = f"inferenceservice {data['namespace'] or '?'}/{data['name'] or '?'}"
    if not state.groups:
        return f"Rollout:   {name}\n{data['explain']}"
    plan = f"{data['planToken'] or '-'} pinned"
    if data["drifted"]:
        plan += (f"; spec.rollout is now {data['specPlanToken']} (drifted: kubectl ome "
                 "rollout repin moves the run)")
    elif data["specPlanToken"] is None and (isvc.get("spec") or {}).get("rollout"):
        plan += "; spec.rollout does not parse"
    lines = [f"Rollout:   {name}", f"Plan:      {plan}", f"Explain:   {data['explain']}"]
    if data["requests"]:
        lines.append("Requests:  " + ", ".join(f"{k}={v}" for k, v in data["requests"].items())
                     + " (not yet consumed by the controller)")
    lines.append("")
    group_rows = []
    member_rows = []
    holds = []
    for g, gs in zip(data["groups"], state.groups, strict=True):
        group = _pinned_group(state, gs)
        group_rows.append((str(g["index"]), "+".join(g["components"]), g["progression"],
                           g["phase"], _step_text(gs, group), g["gate"] or "-",
                           _short_hold(g["rolloutHold"])))
        if g["rolloutHold"]:
            holds.append(_hold_line(_group_label(gs), g["rolloutHold"], now))
        for m in g["members"]:
            cap = "-"
            if m["canary"] and gs.active:
                cap = f"{_count(m['readyOnCanary'])}/{_count(m['allowed'])}/" \
                      f"{_count(m['desired'])}"
            member_rows.append((m["component"], str(g["index"]),
                                short_revision(m["stable"] or ""),
                                short_revision(m["canary"] or ""),
                                short_revision(m["rejected"] or ""), cap,
                                _traffic_text(m["traffic"]), _short_hold(m["rolloutHold"])))
            if m["rolloutHold"]:
                holds.append(_hold_line(m["component"], m["rolloutHold"], now))
        if g["failure"]:
            holds.append(f"{_group_label(gs)}: failed: {g['failure']}")
    lines.append(table(("GROUP", "COMPONENTS", "PROGRESSION", "PHASE", "STEP", "GATE", "HOLD"),
                       group_rows))
    lines.append("")
    lines.append(table(("COMPONENT", "GROUP", "STABLE", "CANARY", "REJECTED", "CAP(R/A/D)",
                        "TRAFFIC", "HOLD"), member_rows))
    if any(r[5] != "-" for r in member_rows):
        lines.append("CAP(R/A/D): canary Instances Ready / allowed by the step / desired")
    if holds:
        lines.append("")
        lines.append("Holds:")
        lines.extend(f"  {h}" for h in holds)
    return "\n".join(lines)


# ------------------------------------------------------------ history


def _revision_roles(comp: str, gs: GroupState | None,
                    status: InferenceReplicaStatus) -> dict[str, list[str]]:
    roles: dict[str, list[str]] = {}
    tagged = [("current", status.current_revision)]
    if status.update_revision != status.current_revision:
        tagged.append(("update", status.update_revision))
    if gs is not None:
        tagged = [("stable", gs.stable.get(comp, "")), ("canary", gs.canary.get(comp, "")),
                  ("rejected", gs.rejected.get(comp, "")), *tagged]
    for role, rev in tagged:
        if rev:
            roles.setdefault(rev, []).append(role)
    return roles


def history_json(isvc: Mapping[str, Any], state: RolloutState,
                 replicas: Mapping[str, Mapping[str, Any]],
                 revisions: Mapping[str, Sequence[Mapping[str, Any]]]) -> dict[str, Any]:
    """``rollout history ISVC -o json``: per component, its revisions (ControllerRevisions,
    plus any the rollout state names that no longer exist) oldest first, each with its roles
    (``stable``, ``canary``, ``rejected``; ``current`` / ``update`` from the replica status)
    and when it was created."""
    meta = isvc.get("metadata") or {}
    components: list[str] = []
    for gs in state.groups:
        components.extend(c for c in gs.components if c not in components)
    components.extend(c for c in sorted(replicas) if c not in components)
    components.extend(c for c in sorted(revisions) if c not in components)
    out = []
    for comp in components:
        owner = next((g for g in state.groups if comp in g.components), None)
        ir = replicas.get(comp)
        try:
            status = decode_status(ir) if ir is not None else InferenceReplicaStatus()
        except CodecError:
            status = InferenceReplicaStatus()
        roles = _revision_roles(comp, owner, status)
        rows: list[dict[str, Any]] = []
        seen: set[str] = set()
        for cr in revisions.get(comp, ()):
            cmeta = cr.get("metadata") or {}
            rev = str(cmeta.get("name") or "")
            seen.add(rev)
            rows.append({"name": rev, "revision": cr.get("revision"),
                         "created": cmeta.get("creationTimestamp"),
                         "pairingProtocol": (cr.get("data") or {}).get("pairingProtocol")})
        for rev in roles:
            if rev not in seen:
                rows.append({"name": rev, "revision": None, "created": None,
                             "pairingProtocol": None})
        rows.sort(key=lambda r: (r["revision"] is None, r["revision"] or 0, r["name"]))
        for r in rows:
            r["hash"] = short_revision(r["name"])
            r["roles"] = roles.get(r["name"], [])
            r["instances"] = _on(status, r["name"])
            r["stableSince"] = (format_time(owner.stable_at) if owner is not None
                                and owner.stable_at and "stable" in r["roles"] else None)
        out.append({"component": comp, "group": None if owner is None else owner.index,
                    "revisions": rows})
    return {"kind": "InferenceService", "name": meta.get("name"),
            "namespace": meta.get("namespace"), "components": out}


def format_history(isvc: Mapping[str, Any], state: RolloutState,
                   replicas: Mapping[str, Mapping[str, Any]],
                   revisions: Mapping[str, Sequence[Mapping[str, Any]]], now: datetime) -> str:
    """``rollout history ISVC``: a line per revision of each component, oldest first, with
    its roles and age (``-`` = no ControllerRevision: pruned, or not written yet)."""
    data = history_json(isvc, state, replicas, revisions)
    rows = []
    for comp in data["components"]:
        for r in comp["revisions"]:
            created = r["created"]
            when = age(parse_time(created), now) if created else "-"
            role = ",".join(r["roles"]) or "-"
            if r["stableSince"]:
                role += f" (since {age(parse_time(r['stableSince']), now)})"
            rows.append((comp["component"], "-" if r["revision"] is None else str(r["revision"]),
                         r["name"], when, role, str(r["instances"])))
    if not rows:
        return "no revisions: no component of this InferenceService has a revision yet"
    return table(("COMPONENT", "REVISION", "NAME", "CREATED", "ROLE", "INSTANCES"), rows)


# ------------------------------------------------------------ verbs


@frozen(kw_only=True)
class PromoteTarget:
    """What ``rollout promote`` will ask for: the group, the annotation value, and notes on
    what the promote will (not) do at the group's current gate."""

    group: GroupState
    value: str
    notes: tuple[str, ...] = ()


def _no_rollout(isvc: Mapping[str, Any], state: RolloutState) -> str | None:
    if state.groups:
        return None
    if (isvc.get("spec") or {}).get("rollout"):
        return "no rollout yet: the controller has not recorded status.rollout"
    return "no rollout: spec.rollout is not set (each component rolls on its own)"


def _rollback_refusal(isvc: Mapping[str, Any], verb: str) -> str | None:
    value = rollback_requested(isvc)
    if value is None:
        return None
    return (f"a rollback is requested ({ANNOTATION_ROLLBACK}={value}): {verb} is refused "
            "while it is present (it is removed when a new revision appears)")


def promote_target(isvc: Mapping[str, Any], state: RolloutState, now: datetime, *,
                   group: int | None = None,
                   override_analysis: bool = False) -> PromoteTarget | str:
    """The promote to write, or why there is none to write (a refusal message).

    The value is the lowest canary revision hash of the group (the one ``explain`` names);
    without ``group`` the group is the first one at a manual or analysis gate, or with a
    Pairing hold, else the first in a run with a canary."""
    refusal = _rollback_refusal(isvc, "promote") or _no_rollout(isvc, state)
    if refusal:
        return refusal
    if any(g.phase == "RollingBack" for g in state.groups):
        return "a rollback is in progress: nothing to promote"
    candidates = [g for g in state.groups if g.phase in _PROMOTABLE and g.canary]
    if group is not None:
        if not any(g.index == group for g in state.groups):
            return f"no group {group} (groups: " + \
                ", ".join(str(g.index) for g in state.groups) + ")"
        candidates = [g for g in candidates if g.index == group]
    if not candidates:
        return f"no canary to promote: {explain_line(isvc, state, now)}" \
            if group is None else f"group {group} has no canary to promote"
    gated = [g for g in candidates if g.gate in ("Manual", "Analysis")
             or (g.hold is not None and g.hold.gate == "Pairing")]
    gs = (gated or candidates)[0]
    value = sorted(h for h in (hash_of(r) for r in gs.canary.values()) if h)[0]
    notes = []
    if gs.gate == "Analysis" and not override_analysis:
        notes.append("the step is at an analysis gate: the promote waits for a passing round "
                     "unless --override-analysis is given")
    elif gs.gate == "Pause":
        notes.append("the step is at a timed pause: a promote does not shorten it, it is "
                     "consumed when the pause ends")
    elif gs.gate in ("Capacity", "Drain", "") and gs.hold is None:
        notes.append("the step is not at a gate yet: the promote passes the next manual gate")
    return PromoteTarget(group=gs, value=value, notes=tuple(notes))


def rollback_preview(isvc: Mapping[str, Any], state: RolloutState,
                     now: datetime) -> list[str] | str:
    """What a rollback sends back (one line per member), or why it is refused."""
    refusal = _rollback_refusal(isvc, "rollback") or _no_rollout(isvc, state)
    if refusal:
        return refusal
    active = [g for g in state.groups if g.canary and g.phase not in ("Stable", "RolledBack")]
    if not active:
        return f"nothing to roll back: no rollout is in progress " \
               f"({explain_line(isvc, state, now)})"
    return [f"{_group_label(g)}: {c} {short_revision(g.canary[c])} -> "
            f"{short_revision(g.stable.get(c, ''))}"
            for g in active for c in g.components if c in g.canary]


def valid_repin_token(value: str) -> bool:
    """``now`` or ``rp1:`` and 12 lowercase hex digits."""
    return value == "now" or bool(_REPIN_TOKEN.match(value))


def _repin_run_refusal(state: RolloutState) -> str | None:
    """Why the run's own state refuses a repin: rolling back, or no run at all."""
    if any(g.phase == "RollingBack" for g in state.groups):
        return "a rollback is in progress: repin is refused"
    if not state.active:
        return "no run is active: nothing to repin (a new plan applies at once)"
    return None


def repin_refusal(isvc: Mapping[str, Any], state: RolloutState, token: str) -> str | None:
    """Why ``ome.io/rollout-repin=token`` would be rejected now (None: it would apply)."""
    refusal = (
        _rollback_refusal(isvc, "repin") or _no_rollout(isvc, state) or _repin_run_refusal(state)
    )
    if refusal:
        return refusal
    current = spec_plan_token(isvc)
    if current is None:
        return "spec.rollout is missing or does not parse: there is no plan to repin to"
    if token not in ("now", current):
        return f"{token} is not the current plan (spec.rollout is {current})"
    if state.plan_token == current:
        return f"the run already follows {current}: nothing to repin"
    return None
