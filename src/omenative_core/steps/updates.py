"""Updates by strategy: which stale Instances start an Update this pass, and how.

Members at or above ``partition`` that do not run the target are stale; the highest
indexes go first. A Create still pinned to an older target is restarted at the new one.
Ready, idle stale members start an Update under the strategy pinned now:

- ``InPlaceIfPossible`` / ``InPlaceOnly``: image-only changes patch pods in place within
  ``maxUnavailable``; the rest fall back to SurgeThenDrain (or are refused, InPlaceOnly).
- ``RecreatePod``: drain, then recreate, within ``maxUnavailable``.
- ``SurgeThenDrain``: a replacement first, within ``maxSurge``: a whole gang at a new index
  for multi-pod Instances, the other ordinal slot for single pods.

Each start claims an attempt from the target's RetryBlock; when none is allowed, or a
budget is spent, ``rolloutHold`` says why. The moves themselves are in ``update_moves``.
"""

from __future__ import annotations

from attrs import evolve

from omenative_core.model.status import InstanceStatus
from omenative_core.phases import OpType, Phase, Step, Strategy, Waiting
from omenative_core.render import is_multi_pod
from omenative_core.steps.pods import drain
from omenative_core.steps.step_pass import StepPass
from omenative_core.steps.update_moves import images_only

__all__ = ["draining_condemned", "leaving_surge_slots", "start", "surges_in_flight"]


def start(st: StepPass) -> None:
    """Start Updates on stale members, as the strategy and budgets allow."""
    target = st.view.target
    stale = sorted(
        (
            r
            for r in st.odd_rows()  # a plain row runs the target
            if (r.operation is None or st.view.is_member(r))
            and r.running_revision != target
            and r.index >= st.view.policy.partition
        ),
        key=lambda r: r.index,
        reverse=True,
    )
    # Creating attempts pinned to a revision that is no longer the target restart at it
    for row in stale:
        op = row.operation
        if op is not None and op.type == OpType.CREATE and op.target_revision != target:
            drain(st, st.pods_of(row.index), "Retarget")
            st.rows[row.index] = evolve(row, operation=None, phase=Phase.PENDING)
    candidates = [r for r in stale if r.operation is None and r.phase == Phase.READY]
    if not candidates:
        return
    if st.view.policy.paused:
        st.set_hold("Plan", "rollout paused")
        return
    if st.book.state(target) == "Held":
        st.set_hold("Held", f"revision {target} is held: {st.book.blocks[target].reason}")
        return
    strategy = st.view.policy.strategy
    if strategy in (Strategy.IN_PLACE_IF_POSSIBLE, Strategy.IN_PLACE_ONLY):
        candidates = _in_place(st, candidates, strategy)
        if strategy == Strategy.IN_PLACE_ONLY:
            return
        strategy = Strategy.SURGE_THEN_DRAIN
    if strategy == Strategy.RECREATE_POD:
        _recreate(st, candidates)
    else:
        _surge_then_drain(st, candidates)


def _in_place(
    st: StepPass, candidates: list[InstanceStatus], strategy: str
) -> list[InstanceStatus]:
    """Start in-place updates where only images change; return the rest."""
    target = st.view.target
    # a placement change (topologyKey, topologySpread...) cannot be patched into running
    # pods: those Instances are replaced, as for any change beyond images
    placement = st.view.placement_by_rev.get(target, {})
    possible = [
        r for r in candidates
        if images_only(st.view.runners(r.running_revision), st.view.runners(target))
        and st.view.placement_by_rev.get(r.running_revision, {}) == placement
    ]
    if strategy == Strategy.IN_PLACE_ONLY and len(possible) < len(candidates):
        st.extra_conditions["FailedUpdate"] = (
            "True",
            "InPlaceNotPossible",
            "updateStrategy InPlaceOnly: the new revision changes more than container "
            "images, so it cannot be applied in place",
        )
        st.set_hold("Plan", "InPlaceOnly cannot apply this revision in place")
        st.warn("InPlaceUpdateNotPossible",  # OME's Event beside the condition
                f"OMENative component={st.view.spec.component}: updateStrategy InPlaceOnly cannot "
                f"apply {target} in place (it changes more than container images); "
                f"{len(candidates) - len(possible)} Instance(s) keep their revision")
        candidates = possible
    budget = st.view.policy.max_unavailable - st.unavailable()
    for row in candidates:
        if row not in possible:
            continue
        if budget <= 0:
            st.set_hold("Budget", "maxUnavailable reached")
            break
        if not st.may_open():
            st.set_hold("Budget", "open operations fill the status budget")
            break
        if not st.start_attempt(target):
            st.hold_retry(target)
            break
        budget -= 1
        st.rows[row.index] = evolve(
            row,
            phase=Phase.UPDATING,
            operation=st.view.op(
                OpType.UPDATE, Step.IN_PLACE, target, "InPlaceUpdate", strategy=strategy
            ),
        )
        st.advance(row.index)
    return [r for r in candidates if r not in possible]


def _recreate(st: StepPass, candidates: list[InstanceStatus]) -> None:
    """RecreatePod: open Update/Drain on up to the maxUnavailable budget."""
    target = st.view.target
    budget = st.view.policy.max_unavailable - st.unavailable()
    for row in candidates:
        if budget <= 0:
            st.set_hold("Budget", f"maxUnavailable {st.view.policy.max_unavailable} reached")
            return
        if not st.may_open():
            st.set_hold("Budget", "open operations fill the status budget")
            return
        if not st.start_attempt(target):
            st.hold_retry(target)
            return
        budget -= 1
        st.rows[row.index] = evolve(
            row,
            phase=Phase.UPDATING,
            ready_since=None,
            operation=st.view.op(
                OpType.UPDATE, Step.DRAIN, target, "RecreatePod", strategy=Strategy.RECREATE_POD
            ),
        )
        st.advance(row.index)


def surges_in_flight(st: StepPass) -> int:
    """SurgeThenDrain replacements open now (building, or serving while the source drains).

    Each is an Instance beyond the members, so their number is held to ``maxSurge``.
    """
    return sum(
        1
        for r in st.rows.values()
        if r.operation is not None
        and r.operation.type == OpType.UPDATE
        and r.operation.step in (Step.GANG_SURGE, Step.SURGE, Step.SURGE_DRAIN, Step.DRAIN)
        and r.operation.strategy == Strategy.SURGE_THEN_DRAIN
    )


def draining_condemned(st: StepPass) -> int:
    """Instances' worth of pods that condemned rows (a ``Delete`` open) still hold.

    A condemned Instance keeps its GPUs until its last pod is gone, so it counts against
    the surge ceiling as a surge does: a scale-down in the middle of a rollout opens no
    new surge (and no new Instance) while the Instances it condemned drain. A gang counts
    once; a single pod counts each pod (its surge slot is an Instance's worth too). Pods
    on a lost node hold nothing the scheduler can use and never finish terminating
    unless forced, so they do not count.
    """
    gang = st.view.policy.multi_pod
    total = 0
    for row in st.odd_rows():  # a condemned row is never plain
        op = row.operation
        if op is None or op.type != OpType.DELETE:
            continue
        held = sum(1 for p in st.pods_of(row.index) if not st.view.node_lost(p))
        total += min(held, 1) if gang else held
    return total


def leaving_surge_slots(st: StepPass) -> int:
    """Single pods left in the surge slot of a row with no open Update.

    An abandoned or cancelled single-pod surge ends its operation before its pod is gone
    (in the same pass, while the pod drains, and while it terminates); that pod still
    holds an Instance's worth of GPUs, so it counts against maxSurge until it is gone (as
    ``draining_condemned`` does for condemned rows). Pods on a lost node do not count.
    """
    if st.view.policy.multi_pod:
        return 0  # a gang surge lives at its own index, condemned when abandoned
    total = 0
    for row in st.rows.values():
        op = row.operation
        if op is not None and op.type in (OpType.UPDATE, OpType.DELETE):
            continue  # counted by surges_in_flight / draining_condemned
        surge_pods = st.view.pod_names(row.index, "default", 1 - row.active_ordinal)
        total += sum(
            1
            for p in st.pods_of(row.index)
            if p.name in surge_pods and not st.view.node_lost(p)
        )
    return total


def _surge_room(st: StepPass) -> int:
    return (
        st.view.policy.max_surge
        - surges_in_flight(st)
        - draining_condemned(st)
        - leaving_surge_slots(st)
    )


def _surge_then_drain(st: StepPass, candidates: list[InstanceStatus]) -> None:
    """SurgeThenDrain: open a replacement for each candidate within maxSurge."""
    target = st.view.target
    if st.view.policy.max_surge == 0:
        _no_surge_budget(st)
        return
    room = _surge_room(st)
    for row in candidates:
        if room <= 0:
            st.set_hold("Budget", _no_room_reason(st))
            return
        gang = st.view.policy.multi_pod or is_multi_pod(st.view.runners(target) or ())
        if not st.may_open(2 if gang else 1):  # a gang surge opens two operations
            st.set_hold("Budget", "open operations fill the status budget")
            return
        if not st.start_attempt(target):
            st.hold_retry(target)
            return
        room -= 1
        if gang:
            _open_gang_surge(st, row)
        else:
            st.rows[row.index] = evolve(
                row,
                phase=Phase.UPDATING,
                target_revision=target,
                operation=st.view.op(
                    OpType.UPDATE,
                    Step.SURGE,
                    target,
                    "SurgeThenDrain",
                    strategy=Strategy.SURGE_THEN_DRAIN,
                ),
            )
            st.advance(row.index)


NO_SURGE_BUDGET = "NoSurgeBudget"
"""``FailedUpdate`` reason: SurgeThenDrain with ``maxSurge`` 0 can never open a replacement."""


def _no_surge_budget(st: StepPass) -> None:
    """SurgeThenDrain with maxSurge 0: say so (condition, one Warning), start nothing.

    A replacement is built before its source drains, so with no surge room the rollout
    could never start; a silent wait would look like a slow rollout. The user picks:
    a maxSurge of at least 1, or ``RecreatePod`` (which is paced by maxUnavailable).
    """
    message = (
        "lifecycle.updateStrategy.rollingUpdate.maxSurge resolves to 0: SurgeThenDrain "
        "builds each replacement before its source drains, so no Instance can be updated; "
        "set maxSurge >= 1 or updateStrategy.type RecreatePod"
    )
    st.extra_conditions["FailedUpdate"] = ("True", NO_SURGE_BUDGET, message)
    st.set_hold("Plan", "maxSurge 0: SurgeThenDrain cannot open a replacement")
    prev = next((c for c in st.view.prev.conditions if c.type == "FailedUpdate"), None)
    if prev is None or prev.status != "True" or prev.reason != NO_SURGE_BUDGET:
        st.warn(NO_SURGE_BUDGET, message)


def _no_room_reason(st: StepPass) -> str:
    """Why no surge opens: unschedulable replacements, condemned Instances, or maxSurge."""
    stuck = any(
        r.operation is not None
        and r.operation.waiting == Waiting.UNSCHEDULABLE
        and st.view.is_surge_target(r)
        for r in st.rows.values()
    )
    if stuck:
        return "no room to surge: replacement pods are unschedulable"
    draining = draining_condemned(st)
    if draining:
        return (f"maxSurge {st.view.policy.max_surge}: {draining} condemned Instance(s) still "
                "draining")
    leaving = leaving_surge_slots(st)
    if leaving:
        return (f"maxSurge {st.view.policy.max_surge}: {leaving} ended surge pod(s) still "
                "going")
    return f"maxSurge {st.view.policy.max_surge} replacement(s) in flight"


def _open_gang_surge(st: StepPass, row: InstanceStatus) -> None:
    """A replacement gang at a free index at or above the partition; the source waits."""
    target = st.view.target
    new_index = st.free_index(st.view.policy.partition)
    st.rows[new_index] = InstanceStatus(
        index=new_index,
        incarnation=1,
        phase=Phase.CREATING,
        target_revision=target,
        operation=st.view.op(
            OpType.UPDATE,
            Step.GANG_SURGE_TARGET,
            target,
            "GangSurge",
            strategy=Strategy.SURGE_THEN_DRAIN,
            replaces=row.index,
        ),
    )
    st.rows[row.index] = evolve(
        row,
        phase=Phase.UPDATING,
        target_revision=target,
        operation=st.view.op(
            OpType.UPDATE,
            Step.GANG_SURGE,
            target,
            "SurgeThenDrain",
            strategy=Strategy.SURGE_THEN_DRAIN,
            surge_index=new_index,
        ),
    )
    st.advance(new_index)
