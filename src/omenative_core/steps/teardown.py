"""Teardown: Delete operations, condemning an Instance, deleting the InferenceReplica.

- ``delete``: a Delete operation drains every pod of the Instance, then its PodGroup;
  the row is removed once both are gone.
- ``condemn``: open a Delete on an Instance (scale-down, teardown, a cancelled or failed
  migration surge) and take its first step in the same pass.
- ``teardown``: the InferenceReplica is being deleted; every Instance drains, leftover
  PodGroups go, and the ``ome.io/ir-teardown`` finalizer is released when nothing is left
  or after ``teardown.deadline`` (``TeardownDeadlineExceeded``); with no deadline, pods
  stuck on unreachable nodes that nothing will remove are reported (``TeardownBlocked``).
- ``cleanup_orphan_pod_groups``: PodGroups of Instances that no longer exist.
"""

from __future__ import annotations

from attrs import evolve

from omenative_core.labels import LABEL_INSTANCE_INDEX
from omenative_core.model.plan import DeletePodGroup, SetFinalizer
from omenative_core.model.status import InstanceOperation, InstanceStatus
from omenative_core.phases import OpType, Phase, Step
from omenative_core.steps.pods import delete_pod_group, drain
from omenative_core.steps.state import MoveResult, PassState

__all__ = ["FINALIZER", "cleanup_orphan_pod_groups", "condemn", "delete", "teardown"]

FINALIZER = "ome.io/ir-teardown"
"""Held on every InferenceReplica until its Instances have drained and gone."""


def delete(st: PassState, row: InstanceStatus, op: InstanceOperation) -> MoveResult:
    """Delete/Drain: drain the pods, delete the PodGroup, then drop the row."""
    gone = drain(st, st.pods_of(row.index), op.reason or "ScaleDown")
    if gone and delete_pod_group(st, row.index):
        return None
    return evolve(row, phase=Phase.DELETING, operation=op)


def condemn(st: PassState, row: InstanceStatus, revision: str, reason: str) -> None:
    """Open a Delete operation on an Instance (drain, then delete) and take its first step."""
    st.rows[row.index] = evolve(
        row, phase=Phase.DELETING, operation=st.op(OpType.DELETE, Step.DRAIN, revision, reason)
    )
    st.advance(row.index)


def teardown(st: PassState) -> None:
    """The InferenceReplica is being deleted: drain everything, then release the finalizer."""
    deleted_at = st.ir.metadata.deletion_timestamp
    for index in sorted(st.rows):
        row = st.rows[index]
        if row.operation is None and not st.may_open():
            st.poll = True  # drained once the status budget has room
        elif row.operation is None or row.operation.type != OpType.DELETE:
            condemn(st, row, row.running_revision or st.target, "Teardown")
        else:
            st.advance(index)
    for pg in st.snap.pod_groups.values():
        if not pg.deleting:
            st.out.add(DeletePodGroup(name=pg.name, uid=pg.uid))
    clean = not st.rows and not st.snap.pods and not st.snap.pod_groups
    deadline = st.config.teardown.deadline
    overdue = deadline is not None and deleted_at is not None and st.now >= deleted_at + deadline
    if FINALIZER in st.ir.metadata.finalizers:
        if clean or overdue:
            if overdue and not clean:
                st.warn(
                    "TeardownDeadlineExceeded",
                    "teardown.deadline passed; releasing the finalizer with pods still present",
                )
            st.out.add(SetFinalizer(present=False))
        elif deadline is not None and deleted_at is not None:
            st.wake.append(deleted_at + deadline)
        elif deadline is None:
            _blocked(st)
    st.poll = st.poll or not clean


def _blocked(st: PassState) -> None:
    """Say so when no deadline will end a teardown that cannot finish on its own.

    A pod stuck Terminating on an unreachable node is never confirmed gone by its kubelet;
    without ``lifecycle.forceDelete`` nothing removes it, and without ``teardown.deadline``
    the finalizer would be held forever with no word to the user.
    """
    if st.config.force_delete is not None:
        return
    stuck = sorted(
        f"{p.name} on {p.node_name}" for p in st.snap.pods if p.terminating and st.node_lost(p)
    )
    if stuck:
        st.warn(
            "TeardownBlocked",
            f"the ome.io/ir-teardown finalizer is held: pod(s) {', '.join(stuck)} are stuck "
            "Terminating on unreachable nodes, and neither teardown.deadline nor forceDelete "
            "is configured in lifecycle; configure one, or delete those pods by hand",
        )


def cleanup_orphan_pod_groups(st: PassState) -> None:
    """Delete PodGroups labelled with an Instance that has neither a row nor pods."""
    for pg in st.snap.pod_groups.values():
        raw = pg.labels.get(LABEL_INSTANCE_INDEX, "")
        if (
            raw.isdigit()
            and int(raw) not in st.rows
            and not pg.deleting
            and not st.pods_of(int(raw))
        ):
            st.out.add(DeletePodGroup(name=pg.name, uid=pg.uid))
