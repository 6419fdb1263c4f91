"""Teardown: Delete operations, condemning an Instance, deleting the InferenceReplica.

- ``delete``: a Delete operation drains every pod of the Instance, then its PodGroup;
  the row is removed once both are gone.
- ``condemn``: open a Delete on an Instance (scale-down, teardown, a cancelled or failed
  migration surge) and take its first step in the same pass.
- ``teardown``: the InferenceReplica is being deleted; every Instance drains, leftover
  PodGroups and Workloads go, and the ``ome.io/ir-teardown`` finalizer is released when
  nothing is left or after ``teardown.deadline`` (``TeardownDeadlineExceeded``); with no
  deadline, pods stuck on unreachable nodes that nothing will remove are reported
  (``TeardownBlocked``, condition and Warning; the condition alone while a deadline will
  end the wait). Teardown never depends on a valid spec (``planner.plan_pass``).
- ``cleanup_orphan_pod_groups``: PodGroups no attempt or pod uses (an old attempt's goes
  with its pods), Workloads of revisions nothing uses.
"""

from __future__ import annotations

from datetime import datetime

from attrs import evolve

from omenative_core.model.plan import SetFinalizer
from omenative_core.model.status import InstanceOperation, InstanceStatus
from omenative_core.model.timefmt import format_time
from omenative_core.phases import OpType, Phase, Step
from omenative_core.steps.native_gang import cleanup, delete_all, delete_pod_group
from omenative_core.steps.pods import drain
from omenative_core.steps.state import MoveResult, PassState

__all__ = ["FINALIZER", "cleanup_orphan_pod_groups", "condemn", "delete", "teardown"]

BLOCKED = "TeardownBlocked"
"""The condition type and Warning reason of a delete that waits on stuck pods."""

FINALIZER = "ome.io/ir-teardown"
"""Held on every InferenceReplica until its Instances have drained and gone."""


def delete(st: PassState, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Delete/Drain: drain the pods, delete the PodGroup, then drop the row."""
    gone = drain(st, st.pods_of(row.index), op.reason or "ScaleDown")
    if gone and delete_pod_group(st, row.index, row.incarnation):
        return None
    return evolve(row, phase=Phase.DELETING, operation=op)


def condemn(st: PassState, row: InstanceStatus, revision: str, reason: str) -> None:
    """Open a Delete operation on an Instance (drain, then delete) and take its first step."""
    st.rows[row.index] = evolve(
        row, phase=Phase.DELETING, operation=st.view.op(OpType.DELETE, Step.DRAIN, revision, reason)
    )
    st.advance(row.index)


def teardown(st: PassState) -> None:
    """The InferenceReplica is being deleted: drain everything, then release the finalizer."""
    deleted_at = st.view.ir.metadata.deletion_timestamp
    for index in sorted(st.rows):
        row = st.rows[index]
        if row.operation is None and not st.may_open():
            st.poll = True  # drained once the status budget has room
        elif row.operation is None or row.operation.type != OpType.DELETE:
            condemn(st, row, row.running_revision or st.view.target, "Teardown")
        else:
            st.advance(index)
    groups_gone = delete_all(st)
    clean = not st.rows and not st.view.snap.pods and groups_gone
    deadline = st.view.config.teardown.deadline
    overdue = (
        deadline is not None and deleted_at is not None and st.view.now >= deleted_at + deadline
    )
    if FINALIZER in st.view.ir.metadata.finalizers:
        if clean or overdue:
            if overdue and not clean:
                st.warn(
                    "TeardownDeadlineExceeded",
                    "teardown.deadline passed; releasing the finalizer with pods still present",
                )
            st.out.add(SetFinalizer(present=False))
        else:
            if deadline is not None and deleted_at is not None:
                st.wake.append(deleted_at + deadline)
            _blocked(st, deleted_at + deadline if deadline and deleted_at else None)
    st.poll = st.poll or not clean


def _blocked(st: PassState, ends_at: datetime | None) -> None:
    """Say why a delete waits on pods that nothing will remove (condition + Event).

    A pod stuck Terminating on an unreachable node is never confirmed gone by its kubelet;
    without ``lifecycle.forceDelete`` nothing removes it. The ``TeardownBlocked``
    condition names the pods (and the deadline that will end the wait, if any); with no
    ``teardown.deadline`` either, the finalizer would be held forever, so each pass also
    says so with a Warning.
    """
    if st.view.config.force_delete is not None:
        return
    stuck = sorted(
        f"{p.name} on {p.node_name}"
        for p in st.view.snap.pods
        if p.terminating and st.view.node_lost(p)
    )
    if not stuck:
        return
    held = f"the ome.io/ir-teardown finalizer is held: pod(s) {', '.join(stuck)} are stuck " \
        "Terminating on unreachable nodes"
    if ends_at is not None:
        st.extra_conditions[BLOCKED] = (
            "True", "PodsStuckTerminating",
            f"{held}; teardown.deadline releases it at {format_time(ends_at)}")
        return
    message = (f"{held}, and neither teardown.deadline nor forceDelete is configured in "
               "lifecycle; configure one, or delete those pods by hand")
    st.extra_conditions[BLOCKED] = ("True", "PodsStuckTerminating", message)
    st.warn(BLOCKED, message)


def cleanup_orphan_pod_groups(st: PassState) -> None:
    """Delete PodGroups no attempt or pod uses, and Workloads of unused revisions."""
    cleanup(st)
