"""Migrations: requests accepted, replacements started within the caps, records advanced.

A request (``ome.io/migration-request-v1-<uuid>``) becomes a ``status.migrations`` record
(``accept``), judged by admission's own check; a refused one is a Warning Event, never
``MigrationAccepted``. ``start`` gives Accepted records a replacement Instance at a new
index, as many as ``lifecycle.audit`` allows in flight and per window; the source's
operation is ``Migrate/CreateSurge``. ``progress`` moves each active record ``SurgePending →
SurgeReady → Draining`` by looking at both rows, cancels it when scale-down or teardown
condemned either, fails it at its deadline. The source's ``Migrate/Drain`` move
(``migrate_drain``) completes it; ``end_migration`` says so with ``MigrationCompleted`` or
``MigrationFailed``. ``prune`` drops finished records after the window.

Rows this module writes that are not the one being stepped go through ``st.hand_off``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from attrs import evolve

from omenative_core.labels import ANNOTATION_MIGRATION_PREFIX
from omenative_core.model.status import InstanceOperation, InstanceStatus, MigrationStatus
from omenative_core.model.timefmt import format_duration
from omenative_core.phases import (
    ACTIVE_MIGRATION_PHASES,
    TERMINAL_MIGRATION_PHASES,
    MigrationPhase,
    OpType,
    Phase,
    Step,
)
from omenative_core.service.migration_request import (
    MIGRATION_REQUEST_REJECTED,
    MigrationTarget,
    migration_request_problem,
)
from omenative_core.steps.native_gang import delete_pod_group
from omenative_core.steps.outcomes import end_migration
from omenative_core.steps.pods import drain
from omenative_core.steps.state import MoveResult
from omenative_core.steps.step_pass import StepPass
from omenative_core.steps.teardown import condemn
from omenative_core.steps.updates import draining_condemned, surges_in_flight

__all__ = ["accept", "migrate_drain", "migrate_wait", "progress", "prune", "start"]


# ---------------------------------------------------------------------- moves


def migrate_wait(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Migrate/CreateSurge: the source serves while its replacement comes up."""
    del op
    return evolve(row, phase=Phase.MIGRATING)


def migrate_drain(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Migrate/Drain: the replacement serves; drain the source, then complete the record."""
    if st.view.policy.paused:
        return evolve(row, phase=Phase.MIGRATING)
    gone = drain(st, st.pods_of(row.index), "Migrated")
    if not (gone and delete_pod_group(st, row.index, row.incarnation)):
        return evolve(row, phase=Phase.MIGRATING, operation=op)
    surge = st.rows.get(op.surge_index) if op.surge_index is not None else None
    if surge is not None and surge.operation is not None:
        st.hand_off(row.index, evolve(surge, operation=None), "source migrated: surge done")
    m = st.migrations.get(op.request_uuid or "")
    if m is not None:
        end_migration(st, m, MigrationPhase.COMPLETED, m.reason, "")
    return None


# ---------------------------------------------------------------------- records


def accept(st: StepPass, uuid: str, value: str) -> None:
    """Turn one request annotation into a record, or refuse it with a Warning Event.

    The request is judged by admission's own check (``migration_request_problem``) so a
    request the webhook would refuse is refused here with the same reason
    (``MigrationRequestRejected``, ``UnsupportedSchemaVersion``) and no record. A request
    that is well formed but cannot run (no such Instance, an unknown ``from_node``, mode
    ``Never``) gets a Failed record and a Warning; only a request that will run is
    ``MigrationAccepted``, with a ``MigrationCapReached`` Warning when the in-flight cap
    makes it wait. One that would go over ``audit.maxMigrationsPerWindow`` fails at once
    with OME's ``RateLimited`` Warning (``migration rate cap reached (10/10 in the last
    1h0m0s)``), as OME does: it never waits for the window to free up.
    """
    if uuid in st.migrations:
        return
    key = ANNOTATION_MIGRATION_PREFIX + uuid
    component = st.view.spec.component
    target = MigrationTarget(
        modes={component: "OMENative"}, implied=component, kind="InferenceReplica"
    )
    problem = migration_request_problem(key, value, target)
    if problem is not None:
        st.warn(problem[0], f"migration request {key}: {problem[1]}")
        return
    req: Mapping[str, Any] = json.loads(value)
    instance: int = req["instance"]
    record = MigrationStatus(
        request_uuid=uuid,
        trigger="Manual",
        source_instance=instance,
        from_node=req.get("from_node"),
        hint_target_nodes=tuple(req.get("hint_target_nodes") or ()),
        phase=MigrationPhase.ACCEPTED,
        reason=req.get("reason", ""),
        requested_by=req.get("requested_by", ""),
        started_at=st.view.now,
        deadline=(
            st.view.now + st.view.policy.ready_timeout if st.view.policy.ready_timeout else None
        ),
    )
    refusal = _refusal(st, record) or _rate_limited(st, uuid)
    if refusal is not None:
        reason, text = refusal
        st.migrations[uuid] = evolve(
            record,
            phase=MigrationPhase.FAILED,
            message=f"{reason}: {text}",
            completed_at=st.view.now,
            succeeded=False,
        )
        st.warn(reason, f"migration request {key}: {text}", instance)
        return
    st.migrations[uuid] = record
    st.note("MigrationAccepted", f"migration {uuid} of Instance {instance} is Accepted", instance)
    waits = _cap_wait(st, uuid)
    if waits is not None:
        st.warn(waits[0], f"migration {uuid} of Instance {instance} waits in Accepted: {waits[1]}")


def _refusal(st: StepPass, m: MigrationStatus) -> tuple[str, str] | None:
    """(reason, what is wrong) when a well-formed request cannot run here; None when it can."""
    if st.view.policy.migration_mode == "Never":
        return (  # OME's reason for a request under Never (migration_accept.go)
            MIGRATION_REQUEST_REJECTED,
            "migrations disabled by MigrationPolicy Mode=Never: "
            "lifecycle.migrationPolicy.mode is Never on this component; "
            "set it to Auto or Surge to allow migrations",
        )
    row = st.rows.get(m.source_instance)
    if row is None or not st.view.is_member(row):
        have = ", ".join(str(i) for i in sorted(st.rows) if st.view.is_member(st.rows[i]))
        return (
            MIGRATION_REQUEST_REJECTED,
            f"instance {m.source_instance}: no such Instance (there are: {have or 'none'})",
        )
    node = m.from_node
    if node is not None and node not in st.view.snap.nodes:
        on = {p.node_name for p in st.pods_of(m.source_instance)}
        if node not in on:
            return (
                MIGRATION_REQUEST_REJECTED,
                f"from_node {node!r}: no such node, and Instance {m.source_instance} "
                "has no pod on it",
            )
    return None


def _cap_wait(st: StepPass, uuid: str) -> tuple[str, str] | None:
    """Why an accepted request will wait for a migration cap (reason, words); None if not."""
    audit = st.view.config.audit
    if audit is None:
        return (
            "MigrationCapacityUnconfigured",
            "lifecycle.audit is null, so no migration starts until its caps are configured",
        )
    ahead = sum(
        1
        for m in st.migrations.values()
        if m.phase == MigrationPhase.ACCEPTED and m.request_uuid != uuid
    )
    in_flight = sum(1 for m in st.migrations.values() if m.phase in ACTIVE_MIGRATION_PHASES)
    if in_flight + ahead >= audit.max_in_flight_migrations:
        return (
            "MigrationCapReached",
            f"lifecycle.audit.maxInFlightMigrations is {audit.max_in_flight_migrations} and "
            f"{in_flight} migration(s) are in flight, {ahead} waiting before this one",
        )
    return None


def _rate_limited(st: StepPass, uuid: str) -> tuple[str, str] | None:
    """OME's ``RateLimited`` when the migrations started in ``audit.window`` plus those
    accepted before this one reach ``audit.maxMigrationsPerWindow``; None otherwise."""
    audit = st.view.config.audit
    if audit is None:
        return None
    window_start = st.view.now - audit.window
    counted = sum(
        1
        for m in st.migrations.values()
        if m.request_uuid != uuid and (
            (m.allocated_at is not None and m.allocated_at > window_start)
            or m.phase == MigrationPhase.ACCEPTED)
    )
    cap = audit.max_migrations_per_window
    if counted < cap:
        return None
    return ("RateLimited", f"migration rate cap reached ({counted}/{cap} in the last "
                           f"{format_duration(audit.window)})")


def progress(st: StepPass) -> None:
    """Advance every migration with a replacement in flight."""
    for m in [m for m in st.migrations.values() if m.phase in ACTIVE_MIGRATION_PHASES]:
        _progress_one(st, m)


def _release(st: StepPass, row: InstanceStatus, why: str) -> None:
    """End a row's migration role: no operation, the phase its pods say."""
    st.hand_off(None, evolve(row, operation=None, phase=st.steady_phase(row)), why)


def _progress_one(st: StepPass, m: MigrationStatus) -> None:
    surge = st.rows.get(m.surge_instance) if m.surge_instance is not None else None
    source = st.rows.get(m.source_instance)
    if _cancelled(st, m, source, surge) or _timed_out(st, m, source, surge):
        return
    if m.deadline is not None and m.phase == MigrationPhase.SURGE_PENDING:
        st.wake.append(m.deadline)
    if surge is None:
        if (
            source is not None
            and source.operation is not None
            and source.operation.type == OpType.MIGRATE
        ):
            _release(st, source, "migration replacement gone")
        if m.phase != MigrationPhase.DRAINING:
            end_migration(st, m, MigrationPhase.FAILED, "SurgeGone", "the replacement went away")
        return
    if source is None:
        if surge.operation is not None:
            st.hand_off(None, evolve(surge, operation=None), "migration source gone")
        end_migration(st, m, MigrationPhase.COMPLETED, m.reason, "")
        return
    if m.phase == MigrationPhase.SURGE_PENDING and surge.phase == Phase.READY:
        m = evolve(m, phase=MigrationPhase.SURGE_READY)
        st.migrations[m.request_uuid] = m
    if m.phase == MigrationPhase.SURGE_READY and st.view.available(surge):
        m = evolve(m, phase=MigrationPhase.DRAINING)
        st.migrations[m.request_uuid] = m
        if source.operation is not None:
            st.hand_off(
                None,
                evolve(source, operation=evolve(source.operation, step=Step.DRAIN)),
                "migration replacement available: source drains",
            )
            st.advance(source.index)


def _cancelled(
    st: StepPass,
    m: MigrationStatus,
    source: InstanceStatus | None,
    surge: InstanceStatus | None,
) -> bool:
    """Scale-down or teardown took the source or its replacement: the move is moot."""
    condemned = [
        r
        for r in (source, surge)
        if r is not None and r.operation is not None and r.operation.type == OpType.DELETE
    ]
    if not condemned or m.phase == MigrationPhase.DRAINING:
        return False
    for r in (source, surge):
        if r is not None and r not in condemned:
            if r is surge:
                condemn(st, r, r.target_revision, "MigrationCancelled")
            elif r.operation is not None and r.operation.type == OpType.MIGRATE:
                _release(st, r, "migration cancelled")
    end_migration(
        st, m, MigrationPhase.FAILED, "Cancelled", "the source or its replacement is being removed"
    )
    return True


def _timed_out(
    st: StepPass,
    m: MigrationStatus,
    source: InstanceStatus | None,
    surge: InstanceStatus | None,
) -> bool:
    """The replacement was not Ready by the record's deadline: remove it, keep the source."""
    if m.deadline is None or st.view.now < m.deadline or m.phase != MigrationPhase.SURGE_PENDING:
        return False
    if surge is not None:
        condemn(st, surge, surge.target_revision, "MigrationFailed")
    if source is not None and source.operation is not None:
        _release(st, source, "migration deadline passed")
    end_migration(
        st,
        m,
        MigrationPhase.FAILED,
        "DeadlineExceeded",
        "the replacement was not ready before the deadline",
    )
    return True


# ---------------------------------------------------------------------- starting


def start(st: StepPass) -> None:
    """Start replacements for Accepted records, within the in-flight and window caps."""
    audit = st.view.config.audit
    accepted = sorted(
        (m for m in st.migrations.values() if m.phase == MigrationPhase.ACCEPTED),
        key=lambda m: (m.started_at or st.view.now, m.request_uuid),
    )
    if accepted and audit is None:
        st.extra_conditions["MigrationPolicyUnconfigured"] = (
            "True",
            "MigrationCapacityUnconfigured",
            "migration requests wait in Accepted until lifecycle.audit caps are configured",
        )
    if audit is None or st.view.policy.paused:
        return
    in_flight = sum(1 for m in st.migrations.values() if m.phase in ACTIVE_MIGRATION_PHASES)
    window_start = st.view.now - audit.window
    allocated = [
        m.allocated_at
        for m in st.migrations.values()
        if m.allocated_at is not None and m.allocated_at > window_start
    ]
    started = len(allocated)
    _wake_for_accepted(st, accepted, allocated, audit.window)
    for m in accepted:
        if in_flight >= audit.max_in_flight_migrations:
            break
        if started >= audit.max_migrations_per_window:
            break
        source = st.rows.get(m.source_instance)
        if source is None:
            end_migration(
                st,
                m,
                MigrationPhase.FAILED,
                "SourceGone",
                f"Instance {m.source_instance} no longer exists",
            )
            continue
        if m.deadline is not None and st.view.now >= m.deadline:
            # it waited in Accepted past its deadline: a replacement opened now would only
            # be removed again in this pass, its pods still draining when the next opens
            end_migration(
                st,
                m,
                MigrationPhase.FAILED,
                "DeadlineExceeded",
                "the deadline passed while the request waited in Accepted",
            )
            continue
        if source.phase != Phase.READY or source.operation is not None:
            continue
        if _condemned_fill_max_surge(st):
            break
        if not st.may_open(2, migrate=True):  # the surge and its source
            break
        _open(st, m, source)
        in_flight += 1
        started += 1


def _wake_for_accepted(
    st: StepPass,
    accepted: list[MigrationStatus],
    allocated: list[datetime],
    window: timedelta,
) -> None:
    """The times a waiting Accepted record's fate changes with the clock alone: its
    deadline (it fails then, ``DeadlineExceeded``) and the first start leaving the window
    (the window cap frees a slot). Without them a pass at rest is reused past them."""
    if not accepted:
        return
    st.wake.extend(m.deadline for m in accepted if m.deadline is not None)
    if allocated:
        st.wake.append(min(allocated) + window)


def _condemned_fill_max_surge(st: StepPass) -> bool:
    """Condemned Instances still draining (a failed or cancelled replacement, say) fill
    more than ``maxSurge`` beside the surges open: a replacement opened now would take
    the Instances holding pods past ``replicas`` + ``maxSurge`` + migrations in flight,
    so the record waits in Accepted until they drain."""
    return surges_in_flight(st) + draining_condemned(st) > st.view.policy.max_surge


def _open(st: StepPass, m: MigrationStatus, source: InstanceStatus) -> None:
    """Open the replacement row (Create/CreatePods) and the source's Migrate/CreateSurge."""
    surge_index = st.free_index()
    moves = {
        "from_node": m.from_node,
        "hint_target_nodes": m.hint_target_nodes,
        "request_uuid": m.request_uuid,
    }
    st.rows[surge_index] = InstanceStatus(
        index=surge_index,
        incarnation=1,
        phase=Phase.CREATING,
        target_revision=source.running_revision,
        operation=st.view.op(
            OpType.CREATE,
            Step.CREATE_PODS,
            source.running_revision,
            "MigrationSurge",
            replaces=source.index,
            **moves,
        ),
    )
    st.rows[source.index] = evolve(
        source,
        phase=Phase.MIGRATING,
        operation=st.view.op(
            OpType.MIGRATE,
            Step.CREATE_SURGE,
            source.running_revision,
            "Migration",
            surge_index=surge_index,
            **moves,
        ),
    )
    st.note("MigrationRequestAccepted",
            f"OMENative component={st.view.spec.component} instance={source.index} migration "
            f"accepted (uuid={m.request_uuid}, source-node={m.from_node or ''}, "
            f"surge-index={surge_index})", source.index)
    st.migrations[m.request_uuid] = evolve(
        m,
        phase=MigrationPhase.SURGE_PENDING,
        surge_instance=surge_index,
        allocated_at=st.view.now,
        attempt=m.attempt + 1,
    )
    st.advance(surge_index)


def prune(st: StepPass) -> None:
    """Drop finished records older than the audit window (1h when unconfigured)."""
    audit = st.view.config.audit
    window = audit.window if audit is not None else timedelta(hours=1)
    for uuid, m in list(st.migrations.items()):
        if m.phase in TERMINAL_MIGRATION_PHASES and m.completed_at is not None:
            if st.view.now >= m.completed_at + window:
                del st.migrations[uuid]
            else:
                st.wake.append(m.completed_at + window)
