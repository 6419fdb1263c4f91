"""Bring-up: drive one attempt's pods towards all Ready (the step every creating move takes).

``bring_up`` looks at the pods an attempt expects (deterministic names), creates the
missing ones (and the PodGroup first), recycles terminal ones, and reports one
``Outcome``: ``ready`` (every pod Ready; the serving gates go True together), ``failed``
(with the ``Failure`` that decides retries) or ``progress``. The readiness deadline is
parked while the pods wait on something outside the revision (``waiting``: Paused,
QuotaExceeded, Unschedulable, NodeUnknown, PodGroupTerminating, PodGroupUnschedulable)
and restarts with a full window when the wait ends.
"""

from __future__ import annotations

from typing import Any

from attrs import define, evolve

from omenative_core.failures import (
    CRASH_REASONS,
    REVISION_FAULT_REASONS,
    Failure,
    blame_at_deadline,
)
from omenative_core.model.observed import PodView
from omenative_core.model.plan import DeletePod, SetServingGate
from omenative_core.model.spec import Runner
from omenative_core.model.status import InstanceOperation, InstanceStatus
from omenative_core.phases import Outcome, Waiting, stops_clock
from omenative_core.steps import native_gang
from omenative_core.steps.pods import create_pod, drain, maybe_force_delete
from omenative_core.steps.step_pass import StepPass

__all__ = ["BringUp", "bring_up", "park"]

BringUp = tuple[Outcome, InstanceOperation, Failure | None]
"""``(outcome, op, failure)``: ``op`` carries the updated deadline and waiting reason."""


_NO_CREATES = (Waiting.PAUSED, Waiting.POD_GROUP_TERMINATING)
"""Waits during which the attempt's missing pods are not created."""


def park(op: InstanceOperation, reason: Waiting | None) -> InstanceOperation:
    """``op`` waiting on ``reason``: its readiness deadline is cleared when the wait stops
    the clock (``phases.stops_clock``), so it restarts with a full window afterwards."""
    if stops_clock(reason):
        return evolve(op, waiting=reason, deadline=None)
    return evolve(op, waiting=reason)


@define
class _Scan:
    """What one look at an attempt's pods found."""

    waiting: Waiting | None = None
    failure: Failure | None = None
    all_ready: bool = True
    all_containers_ready: bool = True
    admitted: bool = True
    unschedulable: bool = False
    recycled: int = 0
    """Terminal pods recycled in this look (``op.retryCount`` counts them per attempt)."""

    def fail(self, failure: Failure) -> None:
        self.failure = self.failure or failure

    def wait(self, reason: Waiting) -> None:
        self.waiting = self.waiting or reason

    def not_ready(self) -> None:
        self.all_ready = self.all_containers_ready = False


def bring_up(
    st: StepPass,
    row: InstanceStatus,
    op: InstanceOperation,
    revision: str,
    slot_ordinal: int,
    *,
    paused_applies: bool,
) -> BringUp:
    """Drive one attempt's pods towards all Ready (see the module docstring)."""
    index = row.index
    expected = st.view.expected(index, revision, row.incarnation, slot_ordinal)
    if expected is None:
        return (
            Outcome.FAILED,
            op,
            Failure(
                reason="RevisionNotFound",
                message=f"revision {revision} is not stored; cannot render its pods",
            ),
        )
    runners = next(iter(expected.values()))[1]
    pods = {p.name: p for p in st.pods_of(index) if p.name in expected}
    scan = _Scan(waiting=native_gang.ensure(st, index, row.incarnation, runners, revision))
    if scan.waiting is None and paused_applies and st.view.policy.paused:
        scan.waiting = Waiting.PAUSED
    for name, (slot, _) in expected.items():
        pod = pods.get(name)
        if pod is None:
            scan.not_ready()
            _missing(st, scan, row, name, slot, runners, revision, slot_ordinal, op)
        else:
            _look_at(st, scan, pod, row, op, revision)
    op = _unschedulable(st, scan, op, index)
    if scan.recycled:
        op = evolve(op, retry_count=op.retry_count + scan.recycled)
    if scan.failure is not None:
        return Outcome.FAILED, op, scan.failure
    if scan.all_containers_ready and len(pods) == len(expected):
        for pod in pods.values():
            if not pod.serving_gate:
                st.out.add(SetServingGate(name=pod.name, uid=pod.uid, value=True))
        if scan.all_ready:
            return Outcome.READY, evolve(op, waiting=None), None
    return _deadline(st, scan, op, index)


def _missing(
    st: StepPass,
    scan: _Scan,
    row: InstanceStatus,
    name: str,
    slot: Any,
    runners: tuple[Runner, ...],
    revision: str,
    slot_ordinal: int,
    op: InstanceOperation,
) -> None:
    """A pod the attempt expects does not exist: create it unless its create was refused."""
    err = st.view.errors_by_name.get(name)
    if err is not None and err.reason in ("Invalid", "InvalidPodSpec"):
        scan.fail(Failure(reason="InvalidPodSpec", message=err.message, pod_name=name))
        return
    if err is not None and err.reason in ("QuotaExceeded", "Forbidden"):
        scan.wait(Waiting.QUOTA_EXCEEDED)
    if scan.waiting in _NO_CREATES:
        return
    create_pod(st, row, name, slot, runners, revision, slot_ordinal, op)


def _look_at(
    st: StepPass,
    scan: _Scan,
    pod: PodView,
    row: InstanceStatus,
    op: InstanceOperation,
    revision: str,
) -> None:
    """One existing pod of the attempt: stale, terminating, ended, waiting or ready."""
    if not st.matches(pod, revision, row.incarnation):
        # a pod of another attempt holds this name: it must go first
        drain(st, [pod], "StalePod")
        scan.not_ready()
        return
    if pod.terminating:
        scan.not_ready()
        maybe_force_delete(st, pod)
        return
    if pod.phase in ("Failed", "Succeeded"):
        scan.not_ready()
        _recycle(st, scan, pod, row, op)
        return
    if pod.scheduling_gates:
        scan.admitted = False
        scan.wait(Waiting.QUOTA_EXCEEDED)
    if pod.unschedulable:
        scan.unschedulable = True
    if st.view.node_lost(pod):
        scan.wait(Waiting.NODE_UNKNOWN)
    _stuck_containers(st, scan, pod, op)
    if not pod.containers_ready:
        scan.not_ready()
    elif not pod.ready:
        scan.all_ready = False


def _recycle(
    st: StepPass, scan: _Scan, pod: PodView, row: InstanceStatus, op: InstanceOperation
) -> None:
    """A terminal pod during bring-up is recreated until the deadline, spaced out.

    The attempt's n-th recycle (``op.retryCount`` + 1) waits ``restartBackoff.delay(n)``
    after the pod it replaces was created (10 s doubling to 5 min), so a pod that dies
    before Ready is recreated ever more slowly rather than as fast as it fails.
    """
    n = op.retry_count + scan.recycled + 1
    cfg = st.view.policy.restart_backoff
    if cfg is not None:
        due = (pod.creation_timestamp or op.started_at or st.view.now) + cfg.delay(n)
        if st.view.now < due:
            st.wake.append(due)
            return
    scan.recycled += 1
    st.out.add(DeletePod(name=pod.name, uid=pod.uid, reason="TerminalPod"))
    st.warn(
        "TerminalPodRecycled",
        f"pod {pod.name} ended {pod.phase}; recreating it (recycle {n} of this attempt)",
        row.index,
    )


def _stuck_containers(st: StepPass, scan: _Scan, pod: PodView, op: InstanceOperation) -> None:
    """A container stuck on a bad image or crash-looping past the grace fails the attempt."""
    stuck_grace = st.view.config.stuck_pod_grace_period
    for c in pod.containers:
        reason = c.waiting_reason
        if reason not in REVISION_FAULT_REASONS and reason not in CRASH_REASONS:
            continue
        age_from = pod.creation_timestamp or op.started_at or st.view.now
        if reason == "InvalidImageName":
            scan.fail(_pod_failure(pod, c.name, reason, c))
        elif stuck_grace is not None:
            due = age_from + stuck_grace
            if st.view.now >= due:
                scan.fail(_pod_failure(pod, c.name, reason, c))
            else:
                st.wake.append(due)


def _unschedulable(
    st: StepPass, scan: _Scan, op: InstanceOperation, index: int
) -> InstanceOperation:
    """Track how long the pods have been unschedulable; fail after the grace period."""
    if not scan.unschedulable:
        if op.unschedulable_since is not None:
            return evolve(op, unschedulable_since=None)
        return op
    scan.wait(Waiting.UNSCHEDULABLE)
    since = op.unschedulable_since or st.view.now
    op = evolve(op, unschedulable_since=since)
    grace = st.view.config.unschedulable_grace_period
    if grace is not None:
        if st.view.now >= since + grace:
            scan.fail(
                Failure(
                    reason="Unschedulable",
                    message=f"pods of Instance {index} could not be scheduled for "
                    f"{int(grace.total_seconds())}s",
                )
            )
        else:
            st.wake.append(since + grace)
    return op


def _deadline(st: StepPass, scan: _Scan, op: InstanceOperation, index: int) -> BringUp:
    """Progress, or failure once the readiness deadline passed (parked while waiting)."""
    timeout = st.view.policy.ready_timeout
    if scan.waiting is not None and stops_clock(scan.waiting):  # most attempts wait on none
        op = park(op, scan.waiting)
    else:
        op = evolve(op, waiting=None)
        if timeout is not None:
            deadline = op.deadline
            if deadline is None:
                deadline = st.view.now + timeout
                op = evolve(op, deadline=deadline)
            if st.view.now >= deadline:
                timed_out = Failure(
                    reason="DeadlineExceeded",
                    message=f"Instance {index} was not ready within "
                    f"{int(timeout.total_seconds())}s",
                )
                return Outcome.FAILED, op, blame_at_deadline(timed_out, st.pods_of(index))
            st.wake.append(deadline)
    if not scan.admitted:
        op = evolve(op, waiting=op.waiting or Waiting.QUOTA_EXCEEDED)
    st.poll = True
    return Outcome.PROGRESS, op, None


def _pod_failure(pod: PodView, container: str, reason: str, c: Any) -> Failure:
    return Failure(
        reason=reason,
        message=c.waiting_message or f"container {container} of {pod.name}: {reason}",
        pod_name=pod.name,
        container_name=container,
        exit_code=c.terminated_exit_code,
        node=pod.node_name,
    )
