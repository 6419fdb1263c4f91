"""Waits nobody reports: pods no scheduler has decided on (issue 30 item 6).

A pod that kube-scheduler has looked at carries a ``PodScheduled`` condition: True once
bound, False with a reason (``Unschedulable``, ``SchedulingGated``) when it cannot be
placed, and those waits are reported elsewhere (``waiting``, ``InsufficientCapacity``).
A Pending pod with no node and no such reason for ``schedulingDecisionTimeout`` (5m by
default) was never considered: the scheduler lost its cache after an API server restart,
is not running, or does not serve the pods' ``schedulerName``. The replica says so then,
``RolloutStalled=True`` reason ``NoSchedulingDecision`` and one Warning naming the
Instances, without failing them (the readiness deadline still applies). Failed Instances
keep the condition's ``InstancesFailing``, which says more.
"""

from __future__ import annotations

from datetime import datetime

from omenative_core.model.observed import PodView
from omenative_core.model.timefmt import format_duration
from omenative_core.phases import Phase
from omenative_core.steps.step_pass import StepPass

__all__ = ["NO_DECISION", "check_scheduling", "undecided"]

NO_DECISION = "NoSchedulingDecision"
"""``RolloutStalled`` reason and Warning reason: pods no scheduler has decided on."""

_CONDITION = "RolloutStalled"


def undecided(pod: PodView) -> bool:
    """Pending with no node, no scheduling gate and no scheduler verdict (no reason on a
    ``PodScheduled`` condition): nothing has decided where, or whether, it runs."""
    return (
        pod.node_name is None
        and not pod.terminating
        and pod.phase == "Pending"
        and not pod.scheduling_gates
        and pod.conditions.get("PodScheduled") != "True"
        and not pod.condition_reasons.get("PodScheduled")
    )


def _waiting_since(st: StepPass) -> dict[int, datetime]:
    """Instance index -> the creation time of its oldest undecided pod (busy rows only:
    a row with no operation open runs Ready pods)."""
    out: dict[int, datetime] = {}
    for row in st.odd_rows():
        if row.operation is None:
            continue
        for pod in st.pods_of(row.index):
            if pod.creation_timestamp is not None and undecided(pod):
                t = pod.creation_timestamp
                out[row.index] = min(out.get(row.index, t), t)
    return out


def check_scheduling(st: StepPass) -> None:
    """Raise ``RolloutStalled`` (``NoSchedulingDecision``) and warn once when pods wait
    longer than the timeout for any scheduling decision; wake up when one becomes due."""
    timeout = st.view.config.scheduling_decision_timeout
    if timeout is None:
        return
    overdue: list[int] = []
    for index, since in sorted(_waiting_since(st).items()):
        due = since + timeout
        if st.view.now >= due:
            overdue.append(index)
        else:
            st.wake.append(due)
    if not overdue:
        return
    if any(r.phase == Phase.FAILED for r in st.odd_rows() if st.view.is_member(r)):
        return  # InstancesFailing says more
    shown = ", ".join(map(str, overdue[:5])) + (
        f" and {len(overdue) - 5} more" if len(overdue) > 5 else "")
    message = (
        f"pods of Instance(s) {shown} have had no scheduling decision for "
        f"{format_duration(timeout)} (no node, no PodScheduled reason): is kube-scheduler "
        "running and serving the pods' schedulerName? They are not failed; the readiness "
        "deadline still applies"
    )
    found = ("True", NO_DECISION, message)
    st.extra_conditions[_CONDITION] = found
    prev = next((c for c in st.view.prev.conditions if c.type == _CONDITION), None)
    if prev is None or (prev.status, prev.reason, prev.message) != found:
        st.warn(NO_DECISION, message)
