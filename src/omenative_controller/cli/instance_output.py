"""``kubectl ome instance`` and replica ``rollout status`` output: rows, details, retry blocks.

Pure: an InferenceReplica's JSON and its decoded status in, tables and JSON out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from omenative_controller.cli.output_basics import _when, age, revs, table
from omenative_core.codec import to_json
from omenative_core.model.status import (
    Condition,
    InferenceReplicaStatus,
    InstanceStatus,
)
from omenative_core.model.timefmt import format_time
from omenative_core.revisions import hash_of

ANNOTATION_RELEASE_HELD = "ome.io/release-held-revision"
"""Release a Held revision (``<full name | hash>``); the manager consumes it."""

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


def gang_of(pod: Mapping[str, Any], native_api: str = "") -> str:
    """A pod's gang, mechanism and API version: ``Native/<version>:<PodGroup>``
    (``spec.schedulingGroup``; the version of ``scheduling.k8s.io`` the cluster serves,
    ``native_api``, left out when unknown), ``PodGroup/v1alpha1:<name>`` (the scheduler-plugins
    label), or ``None``."""
    group = ((pod.get("spec") or {}).get("schedulingGroup") or {}).get("podGroupName")
    if group:
        version = native_api.rpartition("/")[2]
        return f"Native/{version}:{group}" if version else f"Native:{group}"
    label = ((pod.get("metadata") or {}).get("labels") or {}).get(
        "scheduling.x-k8s.io/pod-group")
    return f"PodGroup/v1alpha1:{label}" if label else "None"


def gang_by_instance(pods: Sequence[Mapping[str, Any]], native_api: str = "") -> dict[int, str]:
    """Instance index -> the gang its pods joined (``instance list -o wide``'s GANG, see
    ``gang_of``); single-pod Instances show ``-``, pods of several gangs (a restart under
    way) all."""
    found: dict[int, set[str]] = {}
    runners: dict[int, set[str]] = {}
    for pod in pods:
        labels = (pod.get("metadata") or {}).get("labels") or {}
        raw = str(labels.get("ome.io/instance-index", ""))
        if raw.isdigit():
            found.setdefault(int(raw), set()).add(gang_of(pod, native_api))
            runners.setdefault(int(raw), set()).add(str(labels.get("ome.io/runner", "")))
    return {i: "-" if runners[i] == {"default"} else ",".join(sorted(g))
            for i, g in found.items()}


def format_instance_table(
    component: str, status: InferenceReplicaStatus, gangs: Mapping[int, str] | None = None
) -> str:
    """``instance list``: one line per Instance, by index (``gangs``: the wide GANG column)."""
    return format_components_table([(component, status, gangs)], wide=gangs is not None)


def format_components_table(
    parts: Sequence[tuple[str, InferenceReplicaStatus, Mapping[int, str] | None]],
    *, wide: bool = False,
) -> str:
    """``instance list ISVC``: every component's Instances in one table, component by
    component (``wide``: the GANG column from each part's gangs)."""
    rows = [
        (component or "-", f"{r.index}/{r.incarnation}", r.phase, _pods(r), revs(r),
         str(r.active_ordinal), evidence(r))
        + (() if not wide else ((gangs or {}).get(r.index, "-"),))
        for component, status, gangs in parts
        for r in sorted(status.instances, key=lambda r: r.index)
    ]
    head = ("COMP", "IDX/INC", "PHASE", "PODS(S/A/T)", "REVS", "AOF", "EVIDENCE")
    out = table(head + (("GANG",) if wide else ()), rows)
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
