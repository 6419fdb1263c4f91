"""Teardown: Delete operations, condemning an Instance, deleting the InferenceReplica.

- ``delete``: a Delete operation drains every pod of the Instance, then its PodGroup;
  the row is removed once both are gone. Past its start plus ``instanceReadyTimeout`` the
  drain is overdue: one ``DrainOverdue`` Warning per Instance and the ``DrainOverdue``
  condition (``drain_condition``), report only, as in OME.
- ``condemn``: open a Delete on an Instance (scale-down, teardown, a cancelled or failed
  migration surge) and take its first step in the same pass.
- ``teardown``: the InferenceReplica is being deleted; every Instance drains (in OME's
  deletion waves under ``scaleDownPodBatchSize``, ``steps.waves``, as a scale-down), leftover
  PodGroups and Workloads go, and the ``ome.io/ir-teardown`` finalizer is released when
  nothing is left or after ``teardown.deadline`` (``TeardownDeadlineExceeded``, with the
  pods left and OME's manual escape); with no deadline, every pass that still finds pods
  or PodGroups says so (``TeardownBlocked``, condition and Warning, as OME's runbook
  expects), naming pods stuck on unreachable nodes; while a deadline will end the wait,
  such pods get the condition alone. Teardown never depends on a valid spec
  (``planner.plan_pass``).
- ``cleanup_orphan_pod_groups``: PodGroups no attempt or pod uses (an old attempt's goes
  with its pods), Workloads of revisions nothing uses.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from attrs import evolve

from omenative_core.model.plan import SetFinalizer
from omenative_core.model.status import InstanceOperation, InstanceStatus
from omenative_core.model.timefmt import format_duration, format_time
from omenative_core.phases import OpType, Phase, Step
from omenative_core.steps.native_gang import cleanup, delete_all, delete_pod_group
from omenative_core.steps.pods import drain
from omenative_core.steps.state import MoveResult, PassState
from omenative_core.steps.step_pass import StepPass
from omenative_core.steps.waves import cost, deletion_wave, wave_data

__all__ = [
    "FINALIZER",
    "cleanup_orphan_pod_groups",
    "condemn",
    "delete",
    "drain_condition",
    "drain_deadline",
    "teardown",
]

DRAIN_OVERDUE = "DrainOverdue"
"""The condition type and Warning reason of a delete draining past its deadline."""

BLOCKED = "TeardownBlocked"
"""The condition type and Warning reason of a delete that waits on stuck pods."""

FINALIZER = "ome.io/ir-teardown"
"""Held on every InferenceReplica until its Instances have drained and gone."""


def delete(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Delete/Drain: drain the pods, delete the PodGroup, then drop the row."""
    gone = drain(st, st.pods_of(row.index), op.reason or "ScaleDown")
    if gone and delete_pod_group(st, row.index, row.incarnation):
        return None
    return _overdue(st, evolve(row, phase=Phase.DELETING, operation=op), op)


def drain_deadline(st: StepPass, op: InstanceOperation) -> datetime | None:
    """When a Delete's drain is overdue: its start plus ``instanceReadyTimeout`` (OME's)."""
    timeout = st.view.policy.ready_timeout
    return op.started_at + timeout if timeout is not None and op.started_at else None


def _overdue(st: StepPass, row: InstanceStatus, op: InstanceOperation) -> InstanceStatus:
    """Past the drain deadline: one ``DrainOverdue`` Warning per Instance (report only)."""
    deadline = drain_deadline(st, op)
    if deadline is None:
        return row
    if st.view.now < deadline:
        st.wake.append(deadline)  # the condition turns at the deadline
        return row
    if DRAIN_OVERDUE in row.announced:
        return row
    pods = sorted(p.name for p in st.pods_of(row.index))
    st.warn(DRAIN_OVERDUE,
            f"OMENative component={st.view.spec.component} instance={row.index}: drain overdue by "
            f"{format_duration(st.view.now - deadline)} (deadline {format_time(deadline)}); "
            f"{len(pods)} pod(s) still Terminating or draining ({', '.join(pods)})",
            row.index)
    return evolve(row, announced=(*row.announced, DRAIN_OVERDUE))


def drain_condition(st: StepPass, rows: Iterable[InstanceStatus]) -> tuple[str, str, str]:
    """The ``DrainOverdue`` condition over the pass's rows."""
    late = sorted(r.index for r in rows if r.operation is not None
                  and r.operation.type == OpType.DELETE
                  and (at := drain_deadline(st, r.operation)) is not None and st.view.now >= at)
    if late:
        return ("True", "DrainsOverdue", f"Instance(s) {', '.join(map(str, late))} still "
                "draining past their deadline (start of the delete + instanceReadyTimeout)")
    return ("False", "DrainsWithinDeadline", "no Instance is draining past its deadline")


def condemn(st: StepPass, row: InstanceStatus, revision: str, reason: str) -> None:
    """Open a Delete operation on an Instance (drain, then delete) and take its first step."""
    st.rows[row.index] = evolve(
        row, phase=Phase.DELETING, operation=st.view.op(OpType.DELETE, Step.DRAIN, revision, reason)
    )
    st.advance(row.index)


def teardown(st: StepPass) -> None:
    """The InferenceReplica is being deleted: drain everything, then release the finalizer."""
    deleted_at = st.view.ir.metadata.deletion_timestamp
    _drain_in_waves(st)
    groups_gone = delete_all(st)
    clean = not st.rows and not st.view.snap.pods and groups_gone
    deadline = st.view.config.teardown.deadline
    overdue = (
        deadline is not None and deleted_at is not None and st.view.now >= deleted_at + deadline
    )
    if FINALIZER in st.view.ir.metadata.finalizers:
        if clean or overdue:
            if overdue and not clean:
                assert deadline is not None
                st.warn(
                    "TeardownDeadlineExceeded",
                    f"teardown deadline {format_duration(deadline)} exceeded "
                    f"({len(st.view.snap.pods)} owned pod(s) observed); releasing finalizer "
                    f"{FINALIZER} to background GC; {_escape(st)}",
                )
            st.out.add(SetFinalizer(present=False))
        elif deadline is None:
            _blocked_forever(st)
        else:
            if deleted_at is not None:
                st.wake.append(deleted_at + deadline)
            _blocked(st, deleted_at + deadline if deleted_at else None)
    st.poll = st.poll or not clean


def _drain_in_waves(st: StepPass) -> None:
    """Condemn every Instance, in OME's deletion waves (``steps.waves``, as a scale-down):
    the Deletes already running go on and count first, then Instances join in index order
    while their pods fit ``scaleDownPodBatchSize``; the rest wait for a later pass."""
    active = [r for r in st.rows.values()
              if r.operation is not None and r.operation.type == OpType.DELETE]
    wave = deletion_wave(st, active)
    active_cost, candidates, full = wave.spent, 0, False
    for index in sorted(st.rows):
        row = st.rows[index]
        if row.operation is not None and row.operation.type == OpType.DELETE:
            st.advance(index)
            continue
        candidates += 1
        pods = cost(st, row)
        full = full or not wave.fits(pods)
        if full or (row.operation is None and not st.may_open()):
            st.poll = True  # drained by a later wave, or once the status budget has room
            continue
        condemn(st, row, row.running_revision or st.view.target, "Teardown")
        wave.admit(pods)
    if candidates or active:
        st.wave = wave_data(wave, active, active_cost, candidates)


def _escape(st: StepPass) -> str:
    """OME's manual escape: release the finalizer by hand."""
    return (f"manual escape: kubectl patch inferencereplica {st.view.ir.metadata.name} -n "
            f"{st.view.ir.metadata.namespace} --type=merge -p "
            """'{"metadata":{"finalizers":null}}'""")


def _stuck(st: StepPass) -> list[str]:
    """Pods stuck Terminating on lost nodes, as ``name on node``."""
    return sorted(
        f"{p.name} on {p.node_name}"
        for p in st.view.snap.pods
        if p.terminating and st.view.node_lost(p)
    )


def _blocked_forever(st: StepPass) -> None:
    """No teardown deadline and pods or PodGroups remain: ``TeardownBlocked`` (condition and
    Warning, as OME records it while it waits, an ordinary teardown included)."""
    groups = len(st.view.snap.pod_groups) + len(st.view.snap.native_pod_groups)
    if not st.view.snap.pods and not groups:
        return  # only rows left: this pass removes them
    stuck = _stuck(st)
    message = (f"teardown blocked: {len(st.view.snap.pods)} owned pod(s) and {groups} owned "
               f"PodGroup(s) remain; finalizer {FINALIZER} holds until cleanup completes "
               f"(no lifecycle.teardown.deadline configured); {_escape(st)}")
    if stuck and st.view.config.force_delete is None:
        message += (f"; pod(s) {', '.join(stuck)} are stuck Terminating on unreachable "
                    "nodes and no forceDelete is configured: delete them by hand")
    st.extra_conditions[BLOCKED] = (
        "True", "PodsStuckTerminating" if stuck else "TeardownInProgress", message)
    st.warn(BLOCKED, message)


def _blocked(st: StepPass, ends_at: datetime | None) -> None:
    """A teardown deadline will end the wait: while pods stuck Terminating on unreachable
    nodes (that nothing else removes: no ``forceDelete``) hold it, the ``TeardownBlocked``
    condition names them and when the deadline releases the finalizer (no Warning)."""
    if st.view.config.force_delete is not None:
        return
    stuck = _stuck(st)
    if not stuck or ends_at is None:
        return
    st.extra_conditions[BLOCKED] = (
        "True", "PodsStuckTerminating",
        f"the ome.io/ir-teardown finalizer is held: pod(s) {', '.join(stuck)} are stuck "
        f"Terminating on unreachable nodes; teardown.deadline releases it at "
        f"{format_time(ends_at)}")


def cleanup_orphan_pod_groups(st: PassState) -> None:
    """Delete PodGroups no attempt or pod uses, and Workloads of unused revisions."""
    cleanup(st)
