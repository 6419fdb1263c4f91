"""Incremental planning: reuse the last pass's plan while its inputs have not changed.

``plan_incremental(snapshot, memo) -> (plan, memo)`` returns exactly what
``planner.plan(snapshot)`` returns (a property test checks this on every step of simulated
fleets); it only skips the work when it can prove the answer is the same.

Theory of operation:

1. The planner is a pure function of the snapshot, so a snapshot whose inputs are the same
   as the last pass's (the same objects, or equal ones) has the same plan. ``PlanMemo``
   keeps those inputs and the plan; it is plain data, passed in and returned, so the core
   stays pure and the shell decides where it lives (one per InferenceReplica).
2. Inputs are compared by identity first (the shell's caches hand back the same view
   objects while nothing changed, so the check is a pointer comparison per pod done in C),
   then by equality. A change to any of them (a pod, the status rows, the spec, the
   config, the nodes, the routed set, the revisions) plans afresh (see 4).
3. Time: a plan with no action and no Event depends on ``now`` only through the
   deadlines it registered as wake-up times (readiness deadlines, minReadySeconds,
   backoffs, grace periods). Until the earliest of them is due, the same plan holds; only
   ``requeue_after`` is recomputed from ``now``. A plan that acts is reused only within
   the same second (its timestamps are stamped with the second), and never across a
   clock that went backwards.
4. When the plan cannot be reused, the pass still reuses what it found per Instance
   (``steps.verdicts``): only the Instances whose pods changed since the last pass are
   rederived from their pods; a spec, config, node or revision change rederives all.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from attrs import evolve, frozen

from omenative_core.model.observed import Snapshot
from omenative_core.model.plan import Plan
from omenative_core.model.timefmt import to_second
from omenative_core.planner import plan_pass
from omenative_core.steps.totals import RowTotals
from omenative_core.steps.verdicts import Verdicts, keep, kept_map, same_inputs

__all__ = ["PlanMemo", "plan_incremental", "reuse"]


def _inputs(snap: Snapshot) -> tuple[Any, ...]:
    """Everything but ``now`` the planner reads from a snapshot, in a fixed order.

    Pods and the previous status come first: they are what changes most between passes.
    The node and PodGroup maps are kept as ``kept_map`` says: a live view of a cache is
    copied (it would always compare equal to itself), the snapshot's own map is shared.
    """
    ir = snap.replica
    return (
        snap.pods,
        ir.status,
        ir.metadata,
        ir.spec,
        snap.config,
        snap.routed_pods,
        kept_map(snap.nodes),
        kept_map(snap.pod_groups),
        snap.revisions,
        snap.create_errors,
        snap.pod_group_crd,
        snap.headless_service_exists,
        snap.legacy_headless_service_exists,
        snap.native_gang_api,
        snap.native_pod_groups,
        snap.workloads,
    )


@frozen
class PlanMemo:
    """What one pass leaves for the next: its inputs, its plan and when that plan expires.

    ``inputs``: the snapshot's inputs but ``now`` (see ``_inputs``); ``now``: the pass's
    second; ``wakes``: the deadlines after ``now`` the pass registered, earliest first;
    ``poll``: the pass asked to look again soon; ``quiet``: the plan has no action and no
    Event, so it holds until the earliest wake; ``reused``: how many passes in a row were
    answered from this memo (for metrics and tests); ``verdicts``: the pass's per-Instance
    verdicts, so a pass over changed inputs rederives only the Instances that changed;
    ``rederived``: how many Instances this pass rederived from their pods because they
    changed (None: every one, as in a cold pass or after a spec change; 0 when reused);
    ``totals``: the pass's row totals (``steps.totals``), so the next pass's replica-wide
    steps read only the rows that are not plain.
    """

    inputs: tuple[Any, ...]
    now: datetime
    plan: Plan
    wakes: tuple[datetime, ...] = ()
    poll: bool = False
    quiet: bool = False
    reused: int = 0
    verdicts: Verdicts | None = None
    rederived: int | None = None
    totals: RowTotals | None = None


def _reusable(memo: PlanMemo, now: datetime, inputs: tuple[Any, ...]) -> bool:
    """Whether ``memo.plan`` is the plan of these inputs at ``now``."""
    if now < memo.now:
        return False  # the clock went back: decide afresh
    if now != memo.now:
        if not memo.quiet:
            return False
        if memo.wakes and now >= memo.wakes[0]:
            return False  # a deadline is due
    return same_inputs(inputs, memo.inputs)


def _requeue(memo: PlanMemo, now: datetime, op_poll: timedelta) -> timedelta | None:
    """``requeue_after`` of a reused quiet plan at ``now`` (as ``steps.status`` computes it)."""
    out = memo.wakes[0] - now if memo.wakes else None
    if memo.poll:
        out = op_poll if out is None else min(out, op_poll)
    return out


def reuse(snapshot: Snapshot, memo: PlanMemo | None) -> tuple[Plan, PlanMemo] | None:
    """``memo``'s plan for ``snapshot`` when it is provably the same, else None (no pass)."""
    if memo is None:
        return None
    now = to_second(snapshot.now)
    inputs = _inputs(snapshot)
    if not _reusable(memo, now, inputs):
        return None
    plan = memo.plan
    if now != memo.now:
        requeue = _requeue(memo, now, snapshot.config.requeue.operation)
        plan = evolve(plan, requeue_after=requeue)
    # keep this snapshot's inputs: the next snapshot shares its objects
    return plan, evolve(
        memo, inputs=inputs, plan=plan, now=now, reused=memo.reused + 1, rederived=0
    )


def plan_incremental(snapshot: Snapshot, memo: PlanMemo | None) -> tuple[Plan, PlanMemo]:
    """``planner.plan(snapshot)``, reusing ``memo``'s plan when nothing it read has changed.

    Pass the memo this function returned last time for the same InferenceReplica (None on
    the first pass, after a restart, or to force a full pass).
    """
    reused = reuse(snapshot, memo)
    if reused is not None:
        return reused
    now = to_second(snapshot.now)
    inputs = _inputs(snapshot)
    plan, st = plan_pass(
        snapshot,
        kept=memo.verdicts if memo is not None else None,
        totals=memo.totals if memo is not None else None,
    )
    wakes: tuple[datetime, ...] = ()
    poll = False
    verdicts = None
    rederived = None
    totals = None
    if st is not None:
        wakes = tuple(sorted(t for t in st.wake if t > now))
        poll = st.poll
        verdicts = keep(st)
        rederived = None if st.cache.dirty is None else len(st.cache.dirty)
        totals = st.totals_out if verdicts is not None else None
    quiet = not plan.actions and not plan.events
    return plan, PlanMemo(
        inputs=inputs,
        now=now,
        plan=plan,
        wakes=wakes,
        poll=poll,
        quiet=quiet,
        verdicts=verdicts,
        rederived=rederived,
        totals=totals,
    )
