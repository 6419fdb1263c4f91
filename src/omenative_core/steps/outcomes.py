"""How an attempt ends: settled Ready, Failed (RetryBlock, relocation) or an abandoned surge.

Every move that brings pods up ends in one of these. ``settle_ready`` clears the
revision's RetryBlock and closes an open relocation. ``fail_row`` counts the failure
against the revision's RetryBlock (``RetryHeld`` when it runs out), may open an automatic
relocation off the one node the attempt sat on, drains the pods and marks the row
Failed. ``abandon_surge`` removes a failed replacement and hands its source back
(``GangSurgeAbandoned``). ``end_migration`` closes a migration record with an audit entry
and a ``MigrationCompleted`` / ``MigrationFailed`` Event.
"""

from __future__ import annotations

from attrs import evolve

from omenative_core import restarts
from omenative_core.failures import REVISION_FAULT_REASONS, Failure
from omenative_core.model.status import InstanceStatus, InstanceTermination, MigrationStatus
from omenative_core.model.timefmt import format_time
from omenative_core.phases import ACTIVE_MIGRATION_PHASES, MigrationPhase, OpType, Phase, Step
from omenative_core.status.budget import FAILURE_REASON_MAX, bounded_text
from omenative_core.steps.pods import drain
from omenative_core.steps.step_pass import StepPass

__all__ = [
    "abandon_surge",
    "end_migration",
    "fail_row",
    "record_failure",
    "relocation",
    "settle_ready",
    "termination",
]


def termination(st: StepPass, failure: Failure) -> InstanceTermination:
    """``lastFailure`` of a surge that was given up (pod, reason, message, now)."""
    return InstanceTermination(
        pod_name=failure.pod_name,
        reason=bounded_text(failure.reason, FAILURE_REASON_MAX),
        message=bounded_text(failure.message),
        time=st.view.now,
    )


def record_failure(st: StepPass, revision: str, failure: Failure) -> None:
    """Count a failed attempt against its revision's RetryBlock (and say so if Held)."""
    block = st.book.fail(revision, failure, st.view.now)
    if block.state == "Held" and revision in st.book.held_now:
        st.book.held_now.remove(revision)
        st.warn(
            "RetryHeld",
            f"revision {revision} is held after {block.attempts_started} attempt(s): "
            f"{failure.reason}",
        )
    if block.next_retry_at is not None:
        st.wake.append(block.next_retry_at)


def fail_row(
    st: StepPass,
    row: InstanceStatus,
    revision: str,
    failure: Failure,
    *,
    delete_pods: bool = True,
) -> InstanceStatus:
    """The attempt failed: RetryBlock, maybe a relocation, drain, ``Failed``."""
    record_failure(st, revision, failure)
    _maybe_relocate(st, row, failure)
    if delete_pods:
        drain(st, st.pods_of(row.index), "AttemptFailed")
    st.warn(
        "InstanceFailed",
        f"Instance {row.index} failed on {revision}: {failure.reason}"
        + (f": {failure.message}" if failure.message else ""),
        row.index,
    )
    return evolve(
        row,
        phase=Phase.FAILED,
        operation=None,
        ready_since=None,
        last_failure=InstanceTermination(
            pod_name=failure.pod_name,
            container_name=failure.container_name,
            reason=bounded_text(failure.reason, FAILURE_REASON_MAX),
            exit_code=failure.exit_code,
            message=bounded_text(failure.message),
            time=st.view.now,
        ),
    )


def _maybe_relocate(st: StepPass, row: InstanceStatus, failure: Failure) -> None:
    """A failed attempt that sat on one node, not the revision's fault, moves off it."""
    auto = st.view.config.auto_migrate
    if auto is None or failure.revision_fault or st.view.policy.migration_mode == "Never":
        return
    nodes = {p.node_name for p in st.pods_of(row.index) if p.node_name and not p.terminating}
    if len(nodes) != 1:
        return
    node = next(iter(nodes))
    past = [
        m for m in st.migrations.values() if m.trigger == "Auto" and m.source_instance == row.index
    ]
    if len(past) >= auto.max_attempts:
        st.warn(
            "AutoMigrationCapReached",
            f"Instance {row.index} failed on {node} again; relocation budget "
            f"({auto.max_attempts}) is spent",
            row.index,
        )
        return
    uuid = f"relocate-{row.index}-{row.incarnation}-{format_time(st.view.now)}"
    st.migrations[uuid] = MigrationStatus(
        request_uuid=uuid,
        trigger="Auto",
        source_instance=row.index,
        from_node=node,
        phase=MigrationPhase.RELOCATED,
        attempt=len(past) + 1,
        reason=failure.reason,
        message=f"rebuilding off {node}",
        started_at=st.view.now,
    )
    st.note(
        "AutoMigrationTriggered",
        f"Instance {row.index} failed with all pods on {node} ({failure.reason}); "
        "rebuilding it elsewhere",
        row.index,
    )


def relocation(st: StepPass, index: int) -> MigrationStatus | None:
    """The open relocation record of an Instance, if any."""
    for m in st.migrations.values():
        if m.trigger == "Auto" and m.source_instance == index and m.succeeded is None:
            return m
    return None


def settle_ready(st: StepPass, row: InstanceStatus, revision: str) -> InstanceStatus:
    """The attempt serves: clear the RetryBlock and any relocation; the row is Ready."""
    st.book.succeed(revision)
    reloc = relocation(st, row.index)
    if reloc is not None:
        st.migrations[reloc.request_uuid] = evolve(reloc, succeeded=True, completed_at=st.view.now)
    ready_since = st.view.ready_stamp(row)
    if row.conditions:
        row = _series_on_ready(st, row)
    if (
        row.phase == Phase.READY
        and row.operation is None
        and row.running_revision == revision
        and row.target_revision == revision
        and row.ready_since == ready_since
    ):
        return row
    return evolve(
        row,
        phase=Phase.READY,
        operation=None,
        running_revision=revision,
        target_revision=revision,
        ready_since=ready_since,
    )


def _series_on_ready(st: StepPass, row: InstanceStatus) -> InstanceStatus:
    """A Ready Instance's restart series: its reset clock runs from the first Ready after
    the last restart; the series ends after ``resetAfter`` (``omenative_core.restarts``)."""
    series = restarts.read(row)
    cfg = st.view.policy.restart_backoff
    if series is None or cfg is None:
        return restarts.clear(row)
    series = restarts.mark_ready(series, st.view.now)
    end = restarts.expires_at(series, cfg)
    if end is not None and st.view.now >= end:
        return restarts.clear(row)
    if end is not None:
        st.wake.append(end)
    return restarts.write(row, series)


def abandon_surge(
    st: StepPass, row: InstanceStatus, revision: str, failure: Failure
) -> InstanceStatus:
    """A replacement (update or migration surge) failed: remove it, keep the source."""
    op = row.operation
    source = op.replaces if op else None
    if op is not None and op.type == OpType.UPDATE:
        record_failure(st, revision, failure)
    st.warn(
        "GangSurgeAbandoned",
        f"replacement Instance {row.index} for Instance {source} failed: "
        f"{failure.reason}; the source keeps serving",
        source,
    )
    if source is not None and source in st.rows:
        src = st.rows[source]
        if src.operation is not None and src.operation.surge_index == row.index:
            released = evolve(src, operation=None, phase=st.steady_phase(src))
            st.hand_off(row.index, released, "replacement abandoned: source keeps serving")
    for m in st.migrations.values():
        if m.surge_instance == row.index and m.phase in ACTIVE_MIGRATION_PHASES:
            end_migration(st, m, MigrationPhase.FAILED, failure.reason, failure.message)
    return evolve(
        row,
        phase=Phase.DELETING,
        operation=st.view.op(OpType.DELETE, Step.DRAIN, revision, "SurgeAbandoned"),
        last_failure=termination(st, failure),
    )


_FAILED_EVENTS = {"DeadlineExceeded": "MigrationExpired",
                  **dict.fromkeys(REVISION_FAULT_REASONS | {"CrashLoopBackOff",
                                                            "CreateContainerError",
                                                            "RunContainerError"},
                                  "MigrationSurgeWedged")}
"""OME's Event reason per migration failure reason (others: ``MigrationFailed``)."""


def end_migration(st: StepPass, m: MigrationStatus, phase: str, reason: str, message: str) -> None:
    """Close a migration record (Completed or Failed), write its audit entry and say so.

    The Event is Normal ``MigrationCompleted`` or a Warning naming the request, the source
    Instance and why (``reason: message``): OME's ``MigrationExpired`` past the deadline,
    ``MigrationSurgeWedged`` when the replacement's pod is stuck on a kubelet waiting reason,
    else ``MigrationFailed``.
    """
    if phase == MigrationPhase.COMPLETED:
        moved = f"; Instance {m.surge_instance} replaces it" if m.surge_instance is not None else ""
        st.note(
            "MigrationCompleted",
            f"migration {m.request_uuid} of Instance {m.source_instance} completed{moved}",
            m.source_instance,
        )
    else:
        why = ": ".join(part for part in (reason, message) if part) or "no reason recorded"
        st.warn(
            _FAILED_EVENTS.get(reason, "MigrationFailed"),
            f"migration {m.request_uuid} of Instance {m.source_instance} failed: {why}",
            m.source_instance,
        )
    st.migrations[m.request_uuid] = evolve(
        m,
        phase=phase,
        completed_at=st.view.now,
        succeeded=phase == MigrationPhase.COMPLETED,
        message=message or m.message,
    )
    st.audit.append(
        {
            "requestUUID": m.request_uuid,
            "component": st.view.spec.component,
            "sourceInstance": m.source_instance,
            "phase": phase,
            "reason": reason or m.reason,
            "fromNode": m.from_node,
            "startedAt": format_time(m.started_at or st.view.now),
            "completedAt": format_time(st.view.now),
            "outcome": "succeeded" if phase == MigrationPhase.COMPLETED else "failed",
        }
    )
