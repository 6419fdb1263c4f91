"""Scale: condemn the members worth least above ``replicas``, or add Instances below it.

Scale-down condemns, in this order (the StatefulSet controller's "condemned" set, ranked
the way the ReplicaSet controller ranks pods to delete, so serving stays highest):

1. members that do not serve now (not Ready, restarting, draining for an update), those
   still on an old revision before updated ones;
2. members that serve on an old revision (at or above ``partition``: below it the prior
   revision is what the user asked for);
3. members that serve on the target (or whose replacement already serves);

highest index first within each group, so a replica at rest still loses its highest
indexes. A condemned source takes its replacement in flight with it. Then any surge still
in flight beyond the new ``maxSurge`` is cancelled (the source keeps serving), so live
Instances never exceed the new ``replicas`` + ``maxSurge``, and no new surge opens while
condemned Instances still hold pods (``updates.draining_condemned``): Instances holding pods
never exceed the larger of the old and new ``replicas``, plus ``maxSurge``.

Scale-up takes the lowest free indexes, within the surge ceiling (members, surges in
flight and condemned Instances still draining hold at most ``replicas`` + ``maxSurge``);
below ``partition`` a new Instance starts on the prior revision, so a staged rollout (a
canary step) never grows by scaling. A new Instance needs an attempt from its revision's
RetryBlock; without one the rollout holds.
"""

from __future__ import annotations

from operator import attrgetter

from omenative_core.model.status import InstanceStatus
from omenative_core.phases import OpType, Phase, Step
from omenative_core.steps.step_pass import StepPass
from omenative_core.steps.teardown import condemn
from omenative_core.steps.update_moves import cancel_surge
from omenative_core.steps.updates import draining_condemned, surges_in_flight
from omenative_core.steps.waves import cost, deleting, deletion_wave, wave_data

__all__ = [
    "SCALE_UP",
    "condemn_order",
    "fresh_scale_up",
    "new_instance_revision",
    "new_instance_row",
    "scale",
]

SCALE_UP = "ScaleUp"
"""The reason of a new Instance's Create operation."""


def scale(st: StepPass) -> None:
    """Bring the member count to ``replicas``."""
    count = st.member_count()
    desired = st.view.policy.desired
    if count > desired:
        _scale_down(st, sorted(st.members(), key=attrgetter("index")), desired)
        return
    if st.view.policy.paused:
        return
    # the surge ceiling: members, surges and condemned Instances still draining together
    # hold at most desired + maxSurge Instances' worth of pods (a scale-up right after a
    # scale-down waits for the condemned to drain as far as that needs)
    room = (
        desired + st.view.policy.max_surge - count - surges_in_flight(st) - draining_condemned(st)
    )
    for _ in range(min(desired - count, room)):
        index = st.free_index()
        revision = new_instance_revision(st, index)
        if not st.may_open():
            st.poll = True
            return
        if not st.start_attempt(revision):
            nxt = st.book.next_retry(revision)
            if nxt is not None:
                st.wake.append(nxt)
            state = st.book.state(revision)
            st.set_hold(
                "RetryBlock" if state != "Held" else "Held", f"revision {revision} is {state}"
            )
            return
        st.rows[index] = new_instance_row(st, index, revision)
        st.advance(index)


def new_instance_row(st: StepPass, index: int, revision: str) -> InstanceStatus:
    """The row of a new Instance: incarnation 1, creating its pods on ``revision``."""
    return InstanceStatus(
        index=index,
        incarnation=1,
        phase=Phase.CREATING,
        target_revision=revision,
        operation=st.view.op(OpType.CREATE, Step.CREATE_PODS, revision, SCALE_UP),
    )


def fresh_scale_up(row: InstanceStatus) -> bool:
    """Whether ``row`` is still exactly what ``new_instance_row`` made (no failure, no
    retry, replacing nothing): the row the core re-derives from its pods' labels if its
    status is never written (``steps.revisions.unrecorded_create``)."""
    op = row.operation
    return (op is not None and str(op.type) == OpType.CREATE and op.reason == SCALE_UP
            and op.replaces is None and op.retry_count == 0 and row.incarnation == 1
            and row.last_failure is None)


def condemn_order(st: StepPass, members: list[InstanceStatus]) -> list[InstanceStatus]:
    """Members in the order a scale-down removes them: the one worth least first."""
    return sorted(members, key=lambda r: (*_worth(st, r), -r.index))


def _worth(st: StepPass, row: InstanceStatus) -> tuple[bool, bool]:
    """(serves now, on the target): what a member adds to serving and to the rollout.

    A source counts its replacement: one that already serves makes the pair serving and
    updated, as it is about to take over.
    """
    op = row.operation
    surge = st.rows.get(op.surge_index) if op is not None and op.surge_index is not None else None
    taking_over = surge is not None and surge.phase == Phase.READY and st.all_ready(surge)
    swapped = op is not None and op.type == OpType.UPDATE and op.step == Step.SURGE_DRAIN
    serving = st.all_ready(row) or taking_over or swapped
    updated = (
        row.running_revision == st.view.target
        or row.index < st.view.policy.partition
        or taking_over
        or swapped
    )
    return serving, updated


def _scale_down(st: StepPass, members: list[InstanceStatus], desired: int) -> None:
    """Condemn the members worth least, in OME's waves under ``scaleDownPodBatchSize``
    (``steps.waves``): deletion work already running counts first, whole Instances (with
    their surge) join while they fit, the first one larger than the whole budget goes alone,
    and once one does not fit the later ones wait too."""
    active = deleting(st)
    wave = deletion_wave(st, active)
    active_cost = wave.spent
    victims = condemn_order(st, members)[: len(members) - desired]
    for row in victims:
        op = row.operation
        surge = st.rows.get(op.surge_index) if op is not None and op.surge_index is not None \
            else None
        pods = cost(st, row) + cost(st, surge)
        if not wave.fits(pods):
            break  # this wave is full: the rest wait for the next one
        if op is None and not st.may_open():
            st.poll = True  # the rest drain once the status budget has room
            break
        if surge is not None:
            condemn(st, surge, st.view.target, "ScaleDown")
        st.note("ScaleDown", f"draining Instance {row.index} (replicas {desired})", row.index)
        condemn(st, row, row.running_revision or st.view.target, "ScaleDown")
        wave.admit(pods)
    st.wave = wave_data(wave, active, active_cost, len(victims))
    _cancel_excess_surges(st, desired)


def _cancel_excess_surges(st: StepPass, desired: int) -> None:
    """Surges in flight beyond the new ``maxSurge``: cancel the least advanced ones.

    Only a surge still being built is cancelled (its source keeps serving); one whose
    replacement already serves is draining its source, which lowers the count.
    """
    excess = surges_in_flight(st) - st.view.policy.max_surge
    if excess <= 0:
        return
    building = [
        r
        for r in st.rows.values()
        if r.operation is not None
        and r.operation.type == OpType.UPDATE
        and r.operation.step in (Step.GANG_SURGE, Step.SURGE)
    ]
    for row in condemn_order(st, building)[:excess]:
        st.note(
            "SurgeCancelled",
            f"replicas {desired}: maxSurge {st.view.policy.max_surge} leaves no room for the "
            f"replacement of Instance {row.index}; it keeps serving",
            row.index,
        )
        cancel_surge(st, row)


def new_instance_revision(st: StepPass, index: int) -> str:
    """The revision a new Instance at ``index`` starts on.

    Below the partition the N lowest indexes stay on the prior revision, so a scale-up
    during a staged rollout (a canary step) adds prior-revision Instances there rather
    than growing the canary past its step; at or above it, the target.
    """
    current = st.view.prev.current_revision
    if (
        index < st.view.policy.partition
        and current
        and current != st.view.target
        and current in st.view.runners_by_rev
    ):
        return current
    return st.view.target
