"""Status and conditions: the last pass, from the rows to the ``Plan``.

``finish`` computes each row's pod counts, the counters, ``currentRevision``, the
``rolloutHold`` (its ``since`` kept while the gate and target stay), the conditions, and
assembles the plan: ``UpdateStatus`` first whenever the status changed or the plan is
destructive (its resourceVersion precondition guards the deletes), then the body in the
sink's order, and when to look again. ``invalid_plan`` is the whole answer to a spec that
cannot be planned: ``Ready=False`` with the reason, and no pod touched.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime, timedelta
from itertools import compress
from operator import and_, attrgetter, is_, itemgetter
from typing import Any

from attrs import evolve, frozen

from omenative_core.conditions import build_conditions
from omenative_core.model.observed import PodView
from omenative_core.model.plan import (
    Action,
    DeletePod,
    DeletePodGroup,
    Event,
    PatchPodImages,
    Plan,
    RecordAudit,
    SetServingGate,
    UpdateStatus,
)
from omenative_core.model.spec import InferenceReplica
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus, RolloutHold
from omenative_core.model.timefmt import format_duration, to_second
from omenative_core.phases import OpType, Phase, Waiting
from omenative_core.steps import native_gang
from omenative_core.steps.state import PassState
from omenative_core.steps.step_pass import StepPass
from omenative_core.steps.teardown import drain_condition
from omenative_core.steps.totals import odd_indexes, odd_of, totals_of
from omenative_core.steps.totals import was_ready as was_ready_of
from omenative_core.steps.verdicts import (
    AVAILABLE,
    ROW_OUT,
    SERVING,
    Tally,
    kept_tally,
    unchanged_tallies,
)
from omenative_core.steps.waves import batch_creates

__all__ = ["finish", "invalid_plan"]

_AUDIT_SUFFIX = "-ome-migration-audit"
_row_out = itemgetter(ROW_OUT)
_index = attrgetter("index")


def invalid_plan(ir: InferenceReplica, now: datetime, reasons: tuple[str, ...]) -> Plan:
    """The plan for a spec that fails validation: a Ready=False condition, nothing else."""
    prev = ir.status or InferenceReplicaStatus()
    message = "; ".join(reasons)
    reason = reasons[0].split(":", 1)[0] if reasons else "InvalidSpec"
    status = evolve(
        prev,
        observed_generation=ir.metadata.generation,
        conditions=build_conditions(
            prev.conditions,
            {"Ready": ("False", reason, message)},
            to_second(now),
            ir.metadata.generation,
            replace_all=False,
        ),
    )
    actions: tuple[Action, ...] = ()
    events: tuple[Event, ...] = ()
    if status != prev:
        actions = (UpdateStatus(status=status),)
        events = (Event(type="Warning", reason=reason, message=message),)
    return Plan(actions=actions, status=status, events=events)


def finish(st: PassState) -> Plan:
    """The new status from the rows, and the plan around it."""
    tallied, rows, same_keys = _tallied(st)
    target = st.view.target
    odd = odd_of(st, tallied)  # every other row is plain: counted, not read
    st.totals_out = totals_of(st, rows, frozenset(t[ROW_OUT].index for t in odd), same_keys)
    busy = (Phase.UPDATING, Phase.MIGRATING)
    ready_t = [
        t
        for t in odd
        if t[ROW_OUT].phase == Phase.READY
        or (t[ROW_OUT].phase in busy and st.all_ready(t[ROW_OUT]))
    ]
    window = st.view.policy.min_ready
    st.wake.extend(
        [
            t[ROW_OUT].ready_since + window
            for t in ready_t
            if not t[AVAILABLE] and t[ROW_OUT].ready_since is not None
        ]
    )
    odd_rows = [t[ROW_OUT] for t in odd]
    sums = _Sums(
        plain=len(rows) - len(odd),
        rows=odd_rows,
        members=[r for r in odd_rows if r.operation is None or st.view.is_member(r)],
        available=[t[ROW_OUT] for t in ready_t if t[AVAILABLE]],
        updated=[r for r in odd_rows if r.running_revision == target],
    )
    status = InferenceReplicaStatus(
        observed_generation=st.view.ir.metadata.generation,
        replicas=len(rows),
        ready_replicas=sums.plain + len(ready_t),
        serving_replicas=sums.plain + len([t for t in odd if t[SERVING]]),
        available_replicas=sums.plain + len(sums.available),
        updated_replicas=sums.plain + len(sums.updated),
        updated_ready_replicas=sums.plain
        + len([r for r in sums.updated if r.phase == Phase.READY]),
        current_revision=_current_revision(st, sums),
        update_revision=target,
        collision_count=st.view.collision_count,
        label_selector=f"ome.io/inferencereplica={st.view.ir.metadata.name}",
        instances=rows,
        retry_blocks=st.book.result(),
        migrations=tuple(st.migrations[k] for k in sorted(st.migrations)),
        conditions=_conditions(st, sums),
        traffic=st.view.prev.traffic,
        coordination_group_ref=st.view.prev.coordination_group_ref,
        rollout_hold=_rollout_hold(st, odd_rows),
    )
    if st.audit:
        st.out.add(
            RecordAudit(
                config_map=f"{st.view.ir.isvc_name}{_AUDIT_SUFFIX}", entries=tuple(st.audit)
            )
        )
    body, batch = batch_creates(st.out.body(), st.view.config.scale_up_pod_batch_size)
    destructive = any(
        isinstance(a, DeletePod | DeletePodGroup | PatchPodImages)
        or (isinstance(a, SetServingGate) and not a.value)
        for a in body
    )
    actions: list[Action] = []
    if status != st.view.prev or destructive:
        actions.append(UpdateStatus(status=status))
    actions.extend(body)
    return Plan(
        actions=tuple(actions),
        status=status,
        events=tuple(st.events),
        requeue_after=_requeue(st, acted=bool(actions), deleting=any(
            r.operation is not None and r.operation.type == OpType.DELETE for r in odd_rows)),
        scale_down_wave=st.wave,
        scale_up_batch=batch,
    )


@frozen
class _Sums:
    """The final rows as the counters and conditions read them: how many are plain
    (``steps.totals``: each a member, Ready, available, on the target) and the others."""

    plain: int
    rows: list[InstanceStatus]
    members: list[InstanceStatus]
    available: list[InstanceStatus]
    updated: list[InstanceStatus]


def _tallied(st: PassState) -> tuple[list[Tally], tuple[InstanceStatus, ...], bool]:
    """The tallies of the rows that may not be plain (every row when the kept totals do
    not hold), the status's rows, and whether they have the kept totals' indexes.

    Each row's pods are looked at once here: counts, serving, readiness (comprehensions,
    not appends: a cold pass runs this over every row). With the kept totals, a plain
    row's tally is the kept one and its row stays in place in a copy of the kept tuple.
    """
    by_row = st.rows
    odd = odd_indexes(st)
    kept = st.cache.totals
    if odd is None or kept is None or st.cache.kept is None:
        was_ready = st.prev_ready()
        # rows whose tally the last pass kept and that did not change take it unread
        same = unchanged_tallies(st, was_ready)
        st.tallies.update(same)
        order = sorted(by_row)
        plain = _still_plain(st)
        if not plain:
            tallied = [same[i] if i in same else _tally(st, by_row[i], was_ready) for i in order]
            return tallied, tuple(map(_row_out, tallied)), False
        # the plain steady rows (a cold pass: nearly all) are tallied unread, and kept as
        # rows, not tuples (no kept tallies then: ``plain`` is found only when every
        # Instance is rederived)
        st.plain_tallies.update(plain)
        tallied = [_tally(st, by_row[i], was_ready) for i in sorted(by_row.keys() - plain.keys())]
        if not tallied:  # every row plain: the rows as they are, in index order
            return tallied, tuple(map(by_row.__getitem__, order)), False
        final = dict(by_row)
        final.update(zip(map(_index, map(_row_out, tallied)), map(_row_out, tallied), strict=True))
        return tallied, tuple(map(final.__getitem__, order)), False
    was_ready = was_ready_of(st, odd)
    st.tallies = dict(st.cache.kept.tallies)
    st.plain_tallies = dict(st.cache.kept.plain)
    for i in odd:
        st.tallies.pop(i, None)
        st.plain_tallies.pop(i, None)
    tallied = [_tally(st, by_row[i], was_ready) for i in odd]
    positions = kept.positions
    if len(by_row) == len(kept.rows) and all(i in positions for i in odd):
        out = list(kept.rows)
        for t in tallied:
            out[positions[t[ROW_OUT].index]] = t[ROW_OUT]
        return tallied, tuple(out), True
    changed = {t[ROW_OUT].index: t[ROW_OUT] for t in tallied}
    return tallied, tuple([changed.get(i) or by_row[i] for i in sorted(by_row)]), False


def _still_plain(st: PassState) -> dict[int, InstanceStatus]:
    """The rows ``steady.find`` found plain (``PassState.plain_steady``) that are still
    the pass's rows and its steady rows: no step wrote them since (identity, in C).

    Each one's tally is (row, row, serving, available, was Ready): what ``_tally``
    answers for a steady row whose counts are its row's."""
    found = st.plain_steady
    if not found or st.cache.dirty is not None:
        return {}
    keys, rows = list(found), list(found.values())
    same = map(and_, map(is_, map(st.rows.get, keys), rows),
               map(is_, map(st.steady_rows.get, keys), rows))
    ok = list(compress(keys, same))
    return found if len(ok) == len(keys) else {i: found[i] for i in ok}


def _current_revision(st: StepPass, sums: _Sums) -> str:
    current = st.view.prev.current_revision
    target = st.view.target
    members = sums.members
    if (sums.plain or members) and not [r for r in members if r.running_revision != target]:
        return st.view.target
    if current and (
        (sums.plain and current == target) or any(r.running_revision == current for r in sums.rows)
    ):
        return current
    counts: dict[str, int] = defaultdict(int)
    if sums.plain and target:
        counts[target] += sums.plain
    for r in members:
        if r.running_revision:
            counts[r.running_revision] += 1
    return max(sorted(counts), key=lambda k: counts[k]) if counts else st.view.target


def _rollout_hold(st: StepPass, rows: Sequence[InstanceStatus]) -> RolloutHold | None:
    """The pass's hold, keeping ``since`` while gate and target are unchanged.

    ``rows``: the rows that are not plain (a plain row has no operation).
    """
    hold = st.hold
    prev = st.view.prev.rollout_hold
    if hold is not None:
        same = prev is not None and prev.gate == hold.gate and prev.target == hold.target
        return evolve(hold, since=prev.since if same and prev is not None else st.view.now)
    # the Budget gate also covers surges parked on Unschedulable
    if [
        r
        for r in rows
        if r.operation is not None
        and r.operation.waiting == Waiting.UNSCHEDULABLE
        and st.view.is_surge_target(r)
    ]:
        return RolloutHold(
            gate="Budget",
            reason="surge pods are unschedulable: no room",
            target=st.view.target,
            since=prev.since if prev and prev.gate == "Budget" else st.view.now,
        )
    return None


def _serving(
    st: PassState, row: InstanceStatus, in_rotation: dict[str, PodView], serving: int
) -> bool:
    """In rotation: every pod of the running attempt is ready with its gate True.

    ``in_rotation``: the row's live pods whose gate is True and containers ready.
    A single-pod Instance mid-surge serves while either of its two slots does.
    """
    if not st.view.policy.multi_pod:
        return serving > 0
    expected = st.view.expected(
        row.index, row.running_revision, row.incarnation, row.active_ordinal
    )
    if not expected or serving < len(expected):
        return False
    attempt = (st.view.revision_hash(row.running_revision), row.incarnation)
    by_name = st.cache.by_name  # every snapshot pod's, from revisions.group_pods
    for name in expected:
        pod = by_name.get(name)
        if name not in in_rotation or pod is None or pod.attempt != attempt:
            return False
    return True


def _tally(st: PassState, row: InstanceStatus, was_ready: set[int]) -> Tally:
    """(row, the row with its pod counts and ``readySince``, it serves, it is available,
    it was Ready before this pass).

    Kept for the next pass (``st.tallies``) when the clock plays no part in it: the row
    is not Ready, or Ready with no ``readySince`` window open and Ready before this pass.
    """
    was = row.index in was_ready
    kept = kept_tally(st, row, was) if st.cache.kept is not None else None
    if kept is not None:
        st.tallies[row.index] = kept
        return kept
    steady = st.steady_counts.get(row.index)
    if steady is None or st.steady_rows.get(row.index) is not row:
        tally = (row, *_count_pods(st, row, was_ready), was)
    elif row.ready_since is None and was:  # the common steady row: available, no window
        pods = len(st.cache.pods_by_index[row.index])
        serving = steady[0]
        is_serving = serving == pods if st.view.policy.multi_pod else serving > 0
        tally = (row, _counts(row, pods, serving, pods, steady[1], None), is_serving, True, was)
    else:
        tally = (row, *_steady_counts(st, row, was_ready, steady[0], admitted=steady[1]), was)
    if row.phase != Phase.READY or (row.ready_since is None and was):
        st.tallies[row.index] = tally
    return tally


def _steady_counts(
    st: StepPass, row: InstanceStatus, was_ready: set[int], serving: int, *, admitted: bool
) -> tuple[InstanceStatus, bool, bool]:
    """``_count_pods`` of a row found steady this pass, from what that check counted.

    Its pods are exactly its attempt's, all live and Ready (``repair._steady``), so it
    serves when all of them are in rotation (one of two slots, for a single pod).
    """
    ready_since = _ready_since(st, row, was_ready)
    is_available = ready_since is None
    pods = len(st.pods_of(row.index))
    is_serving = serving == pods if st.view.policy.multi_pod else serving > 0
    counts = _counts(row, pods, serving, pods if is_available else 0, admitted, ready_since)
    return counts, is_serving, is_available


def _count_pods(
    st: PassState, row: InstanceStatus, was_ready: set[int]
) -> tuple[InstanceStatus, bool, bool]:
    ready_since = _ready_since(st, row, was_ready)
    is_available = row.phase == Phase.READY and ready_since is None
    live = 0
    ready = 0
    admitted = True
    in_rotation: dict[str, PodView] = {}
    for p in st.pods_of(row.index):
        if p.deletion_timestamp is not None:
            continue
        live += 1
        conditions = p.conditions
        if conditions.get("ome.io/serving") == "True" and (
            conditions.get("ContainersReady") == "True"
        ):
            in_rotation[p.name] = p
        if conditions.get("Ready") == "True":
            ready += 1
        if p.scheduling_gates:
            admitted = False
    serving = len(in_rotation)
    return (
        _counts(
            row, live, serving, ready if is_available else 0, admitted and live > 0, ready_since
        ),
        _serving(st, row, in_rotation, serving),
        is_available,
    )


def _ready_since(st: StepPass, row: InstanceStatus, was_ready: set[int]) -> datetime | None:
    """The row's ``readySince`` as written: only while Ready and not yet Available.

    OME's steady Ready row carries no entry, so the stamp is dropped once
    ``minReadySeconds`` has passed (a Ready row without one reads as Available). A row
    that entered Ready this pass without a stamp (an operation that ended without a
    verdict) starts its window now.
    """
    if row.phase != Phase.READY:
        return None
    since = row.ready_since
    if since is None and row.index not in was_ready:
        since = st.view.now
    if since is not None and st.view.now >= since + st.view.policy.min_ready:
        return None
    return since


def _counts(
    row: InstanceStatus,
    pods: int,
    serving: int,
    available: int,
    admitted: bool,
    ready_since: datetime | None,
) -> InstanceStatus:
    if (
        row.pod_count == pods
        and row.serving_pod_count == serving
        and row.available_pod_count == available
        and row.admitted == admitted
        and row.ready_since == ready_since
    ):
        return row
    return evolve(
        row,
        pod_count=pods,
        serving_pod_count=serving,
        available_pod_count=available,
        admitted=admitted,
        ready_since=ready_since,
    )


def _rolling(st: StepPass, sums: _Sums) -> bool:
    target = st.view.target
    if [r for r in sums.members if r.running_revision and r.running_revision != target]:
        return True
    return bool([r for r in sums.rows if r.operation is not None and st.view.is_surge_target(r)])


def _ready_condition(st: StepPass, sums: _Sums, *, rolling: bool) -> tuple[str, str, str]:
    if [r for r in sums.members if r.phase == Phase.FAILED]:
        return ("False", "InstanceFailed", "At least one Instance has Phase=Failed")
    updated_ready = sums.plain + len(
        [
            r
            for r in sums.updated
            if r.phase == Phase.READY and (r.operation is None or st.view.is_member(r))
        ]
    )
    staged = _staged(st, sums, updated_ready, rolling=rolling)
    return staged or _count_condition(st, sums, rolling=rolling)


def _count_condition(st: StepPass, sums: _Sums, *, rolling: bool) -> tuple[str, str, str]:
    """``Ready`` when no Instance failed and the rollout is not staged: by the counts."""
    desired = st.view.policy.desired
    ready_members = sums.plain + len([r for r in sums.members if r.phase == Phase.READY])
    members = sums.plain + len(sums.members)
    minimum = max(desired - st.view.policy.max_unavailable, 0)
    if rolling:
        return ("Unknown", "RolloutInProgress", f"rolling out {st.view.target}")
    if ready_members == desired and members == desired:
        return ("True", "AllInstancesReady", f"{desired}/{desired} Instances Ready")
    if ready_members >= minimum > 0:
        return (
            "True",
            "MinimumAvailable",
            f"{ready_members}/{desired} Instances Ready (minimum {minimum})",
        )
    return ("False", "ReplicaCountMismatch", f"{ready_members}/{desired} Instances Ready")


def _below(st: StepPass, sums: _Sums, partition: int) -> int:
    """Members below ``partition``: the plain rows there (every row's index but the odd
    rows') and the odd members there."""
    plain = sum(1 for i in st.rows if i < partition) - sum(
        1 for r in sums.rows if r.index < partition
    )
    return plain + sum(1 for r in sums.members if r.index < partition)


def _staged(
    st: StepPass, sums: _Sums, updated_ready: int, *, rolling: bool
) -> tuple[str, str, str] | None:
    """``Ready=True Staged``: every member Ready, the ones at/above the partition updated."""
    partition = st.view.policy.partition
    members = sums.plain + len(sums.members)
    if not (
        partition > 0
        and rolling
        and updated_ready + _below(st, sums, partition) >= members
        and members == st.view.policy.desired
        and all(r.phase == Phase.READY for r in sums.members)
    ):
        return None
    held = sum(1 for r in sums.members if r.running_revision != st.view.target)
    return (
        "True",
        "Staged",
        f"Staged at partition {partition}: {updated_ready}/"
        f"{members} Instances on {st.view.target}, {held} held on the prior revision",
    )


def _conditions(st: StepPass, sums: _Sums) -> tuple[Any, ...]:
    desired = st.view.policy.desired
    failed = [r for r in sums.members if r.phase == Phase.FAILED]
    rolling = _rolling(st, sums)
    minimum = max(desired - st.view.policy.max_unavailable, 0)
    available = sums.plain + len(sums.available)
    avail_ok = sums.plain + len(
        [r for r in sums.available if r.operation is None or st.view.is_member(r)]
    ) >= max(minimum, 0) and (desired == 0 or available > 0)
    wanted: dict[str, tuple[str, str, str]] = {
        "Ready": _ready_condition(st, sums, rolling=rolling),
        "Available": (
            ("True", "MinimumAvailable", f"{available} Instance(s) available")
            if avail_ok
            else (
                "False",
                "InsufficientAvailable",
                f"{available}/{desired} Instance(s) available",
            )
        ),
        "Progressing": (
            ("True", "RolloutInProgress", f"moving Instances to {st.view.target}")
            if rolling
            or sums.plain + len(sums.members) != desired
            or [r for r in sums.rows if r.operation]
            else ("True", "NewRevisionAvailable", f"all Instances run {st.view.target}")
        ),
        "RolloutStalled": (
            ("True", "InstancesFailing", f"{len(failed)} Instance(s) Failed")
            if failed
            else ("False", "Progressing", "no Instance is failing")
        ),
        **_config_conditions(st),
    }
    wanted["DrainOverdue"] = drain_condition(st, sums.rows)
    wanted.update(st.extra_conditions)
    if "FailedUpdate" not in wanted:
        wanted["FailedUpdate"] = ("False", "UpdateAccepted", "the update can proceed")
    return build_conditions(
        st.view.prev.conditions, wanted, st.view.now, st.view.ir.metadata.generation
    )


def _config_conditions(st: StepPass) -> dict[str, tuple[str, str, str]]:
    """Conditions that describe the cluster's configuration rather than the Instances."""
    audit = st.view.config.audit
    timeout = st.view.policy.ready_timeout
    gang = native_gang.mechanism_condition(st)
    migration = (
        (
            "True",
            "MigrationCapacityUnconfigured",
            "no lifecycle.audit caps are configured; migration requests wait in Accepted",
        )
        if audit is None
        else (
            "False",
            "MigrationCapacityConfigured",
            f"at most {audit.max_in_flight_migrations} in flight, "
            f"{audit.max_migrations_per_window} per {int(audit.window.total_seconds())}s",
        )
    )
    ready_timeout = (
        (
            "False",
            "InstanceReadyTimeoutConfigured",
            f"Instance readiness deadline is {format_duration(timeout)}",
        )
        if timeout is not None
        else (
            "True",
            "InstanceReadyTimeoutUnconfigured",
            "no instanceReadyTimeout is set; an Instance may wait forever",
        )
    )
    return {
        "GangSchedulingUnavailable": gang,
        "MigrationPolicyUnconfigured": migration,
        "InstanceReadyTimeoutUnconfigured": ready_timeout,
    }


def _requeue(st: StepPass, *, acted: bool, deleting: bool = False) -> timedelta | None:
    """When to look again: the earliest wake, the operation cadence after acting or when a
    step polls, and OME's ``scaleDownRequeueInterval`` while Instances are being deleted
    (``deleting``, read from the final rows so an incremental pass agrees with a full one)."""
    times = [t for t in st.wake if t > st.view.now]
    out: timedelta | None = None
    if times:
        out = min(times) - st.view.now
    if st.poll or acted:
        op_poll = st.view.config.requeue.operation
        out = op_poll if out is None else min(out, op_poll)
    interval = st.view.config.scale_down_requeue_interval
    if deleting and interval is not None:
        out = interval if out is None else min(out, interval)
    return out
