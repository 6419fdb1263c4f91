"""Scale: condemn the highest-index members above ``replicas``, or add Instances below it.

Scale-down drains the highest indexes first (and a condemned source's replacement with
it). Scale-up takes the lowest free indexes; below ``partition`` a new Instance starts on
the prior revision, so a staged rollout (a canary step) never grows by scaling. A new
Instance needs an attempt from its revision's RetryBlock; without one the rollout holds.
"""

from __future__ import annotations

from omenative_core.model.status import InstanceStatus
from omenative_core.phases import OpType, Phase, Step
from omenative_core.steps.state import PassState
from omenative_core.steps.teardown import condemn

__all__ = ["new_instance_revision", "scale"]


def scale(st: PassState) -> None:
    """Bring the member count to ``replicas``."""
    members = sorted(st.members(), key=lambda r: r.index)
    desired = st.policy.desired
    if len(members) > desired:
        _scale_down(st, members, desired)
        return
    if st.policy.paused:
        return
    for _ in range(desired - len(members)):
        index = st.free_index()
        revision = new_instance_revision(st, index)
        if not st.start_attempt(revision):
            nxt = st.book.next_retry(revision)
            if nxt is not None:
                st.wake.append(nxt)
            state = st.book.state(revision)
            st.set_hold(
                "RetryBlock" if state != "Held" else "Held", f"revision {revision} is {state}"
            )
            return
        st.rows[index] = InstanceStatus(
            index=index,
            incarnation=1,
            phase=Phase.CREATING,
            target_revision=revision,
            operation=st.op(OpType.CREATE, Step.CREATE_PODS, revision, "ScaleUp"),
        )
        st.advance(index)


def _scale_down(st: PassState, members: list[InstanceStatus], desired: int) -> None:
    for row in sorted(members, key=lambda r: r.index, reverse=True)[: len(members) - desired]:
        op = row.operation
        if op is not None and op.surge_index is not None:
            surge = st.rows.get(op.surge_index)
            if surge is not None:
                condemn(st, surge, st.target, "ScaleDown")
        st.note("ScaleDown", f"draining Instance {row.index} (replicas {desired})", row.index)
        condemn(st, row, row.running_revision or st.target, "ScaleDown")


def new_instance_revision(st: PassState, index: int) -> str:
    """The revision a new Instance at ``index`` starts on.

    Below the partition the N lowest indexes stay on the prior revision, so a scale-up
    during a staged rollout (a canary step) adds prior-revision Instances there rather
    than growing the canary past its step; at or above it, the target.
    """
    current = st.prev.current_revision
    if (
        index < st.policy.partition
        and current
        and current != st.target
        and current in st.runners_by_rev
    ):
        return current
    return st.target
