"""The InferenceReplica planner: ``plan(snapshot) -> Plan``, a pipeline of passes.

Theory of operation:

1. Everything the planner remembers lives in the status it returns. Each pass reads the
   previous status and the observed world and advances each Instance's open operation by
   at most one step; it never depends on which event woke it.
2. An Instance is a status row plus the pods labelled with its index. The pods an
   operation expects are named deterministically (``{prefix}-{index}-{runner}-{ordinal}``)
   and carry the revision hash and incarnation, so "which pods belong to this attempt"
   is a pure function of the row.
3. Nothing is deleted while it serves: a pod's ``ome.io/serving`` gate goes False first,
   and it is deleted only once the EndpointSlices stop routing to it (a pod the kubelet
   already lost is the exception).
4. Destructive actions are preceded by ``UpdateStatus`` even when the status did not
   change: the write carries the observed resourceVersion, so a plan made from a stale
   view fails before it deletes anything.
5. The order of a pass is ``PASSES`` below: revisions, verbs, advance every open operation
   (``lifecycle.advance``), then start new work (rebuilds, scale, updates, migrations)
   within the budgets; ``steps.status.finish`` turns the rows into the status and plan.
   Each pass is a function of one ``PassState`` (``steps/state.py``): it reads the frozen
   ``st.view`` (``steps/view.py``) and writes the write-set (``PassWrites``).
"""

from __future__ import annotations

from collections.abc import Callable

from attrs import evolve

from omenative_core import lifecycle
from omenative_core.model.observed import Snapshot
from omenative_core.model.plan import CreateObject, DeleteObject, Plan, SetFinalizer
from omenative_core.model.timefmt import to_second
from omenative_core.policy import BudgetError, Policy, resolve_policy
from omenative_core.render import (
    headless_service_name,
    is_multi_pod,
    render_headless_service,
    validate_replica,
)
from omenative_core.steps import (
    capacity,
    migrations,
    repair,
    revisions,
    scale,
    stalls,
    steady,
    teardown,
    updates,
    verbs,
)
from omenative_core.steps.state import PassState
from omenative_core.steps.status import finish, invalid_plan
from omenative_core.steps.teardown import FINALIZER
from omenative_core.steps.totals import PassCache, RowTotals, unsteady
from omenative_core.steps.verbs import (
    ANNOTATION_MIGRATION_PREFIX,
    ANNOTATION_RELEASE_HELD,
    ANNOTATION_RESET,
)
from omenative_core.steps.verdicts import Verdicts, basis_of, unchanged_steady
from omenative_core.steps.view import PassView

__all__ = [
    "ANNOTATION_MIGRATION_PREFIX",
    "ANNOTATION_RELEASE_HELD",
    "ANNOTATION_RESET",
    "FINALIZER",
    "PASSES",
    "plan",
    "plan_pass",
]

Pass = Callable[[PassState], None]


def _own_objects(st: PassState) -> None:
    """The finalizer, and the headless Service of a standalone replica: OME's
    ``{replica}-{component}-headless``, and the pre-OME ``{replica}-headless`` kept while a
    pod is named under it (its DNS name hangs off it), deleted once none is."""
    view = st.view
    if FINALIZER not in view.ir.metadata.finalizers:
        st.out.add(SetFinalizer(present=True))
    if view.spec.parent_ref is not None:
        return
    snap = view.snap
    if not snap.headless_service_exists:
        st.out.add(CreateObject(body=render_headless_service(view.ir)))
    legacy = view.ir.legacy_prefix
    if legacy and snap.legacy_headless_service_exists and not view.legacy_attempts:
        st.out.add(DeleteObject(api_version="v1", object_kind="Service",
                                name=headless_service_name(legacy)))


def _advance_all(st: PassState) -> None:
    """Take the next move of every Instance, in index order.

    A row with no operation goes straight to its health check (what ``lifecycle.advance``
    does for it, one call fewer per row of a pass at rest); one found steady last pass
    whose row and pods did not change is steady again (``verdicts.unchanged_steady``;
    while the kept row totals hold, only the rows that are not plain are looked at:
    ``totals.unsteady``).
    """
    rows = st.rows
    todo = unsteady(st)  # while the kept totals hold, only the rows that are not plain
    if todo is None:
        same = unchanged_steady(st)
        st.steady_rows.update(zip(same, map(rows.__getitem__, same), strict=True))
        todo = sorted(rows.keys() - same)
    # with no kept verdicts (a cold pass, a spec change), every steady row at once
    bulk = st.view.fast and (st.cache.kept is None or st.cache.dirty is None)
    found = steady.find(st, map(rows.__getitem__, todo)) if bulk else steady.Found()
    steady_now = found.rows
    if steady_now and len(steady_now) == len(todo) and not st.migrations and not st.book.blocks:
        # every row is steady (the common cold pass): the loop below would only record
        # each one, in this order, and nothing it does could change another row
        if st.steady_rows or st.steady_counts:
            st.steady_rows.update(steady_now)
            st.steady_counts.update(found.counts)
        else:  # ``found`` is this pass's: its maps become the pass's (no copy of 10,000)
            st.steady_rows, st.steady_counts = steady_now, found.counts
        return
    for index in todo:
        row = rows[index]
        if row.operation is not None:
            lifecycle.advance(st, index)
            continue
        if steady_now.get(index) is row and not st.migrations and not st.book.blocks:
            st.steady_rows[index] = row  # repair.settled's answer for it, without the call
            st.steady_counts[index] = found.counts[index]
        else:
            rows[index] = repair.settled(st, row, found if bulk else None)
    if st.book.blocks and len(todo) < len(rows):
        # a RetryBlock opened in this pass (the kept steady rows are skipped only while
        # there is none): in a full pass each steady row after it clears it
        # (``repair.settled``), so this pass is planned again in full (``plan_pass``)
        st.replan = True


def _keep_targeted_blocks(st: PassState) -> None:
    """Forget RetryBlocks of revisions nothing targets any more."""
    revs = {st.view.target}
    for row in st.odd_rows():  # a plain row has no operation (``steps.totals``)
        if row.operation is not None:
            revs.add(row.operation.target_revision)
    st.book.keep_only(revs)


PASSES: tuple[Pass, ...] = (
    _own_objects,
    verbs.consume,  # release-held, reset-instances, migration requests
    _advance_all,  # every open operation takes its next move (lifecycle.MOVES)
    teardown.cleanup_orphan_pod_groups,
    migrations.progress,
    repair.rebuilds,
    scale.scale,
    migrations.progress,  # a scale-down may have condemned a source
    updates.start,
    migrations.start,
    migrations.prune,
    capacity.check_nodes,  # TopologyKeyMissing, InsufficientCapacity: conditions, not rejections
    stalls.check_scheduling,  # RolloutStalled NoSchedulingDecision: pods no scheduler decided on
    _keep_targeted_blocks,
)
"""The passes of a live InferenceReplica, in order (a deleted one runs ``teardown``)."""


def _policy(snapshot: Snapshot, *, deleting: bool) -> Policy:
    """The replica's policy; for a deleted replica whose budgets do not parse, the
    defaults' (teardown reads no budget, so a bad one must not keep it from running)."""
    spec = snapshot.replica.spec
    multi = is_multi_pod(spec.runners)
    try:
        return resolve_policy(spec, snapshot.config, multi_pod=multi)
    except BudgetError:
        if not deleting:
            raise
        bare = evolve(spec, lifecycle=None, pacing=None)
        return resolve_policy(bare, snapshot.config, multi_pod=multi)


def plan(snapshot: Snapshot) -> Plan:
    """Compute the next step for one InferenceReplica from what is observed."""
    return plan_pass(snapshot)[0]


def plan_pass(
    snapshot: Snapshot,
    *,
    fast: bool = True,
    kept: Verdicts | None = None,
    totals: RowTotals | None = None,
) -> tuple[Plan, PassState | None]:
    """``plan``, plus the pass state it ended with (None for a spec that cannot be planned).

    ``incremental.plan_incremental`` reads the state's wake-up times and poll flag, so it
    knows how long the plan stays valid while nothing else changes, and its per-Instance
    verdicts (``steps.verdicts.keep``), which it hands back as ``kept`` to the next pass so
    that pass rederives only the Instances that changed (``steps.verdicts``), and its row
    totals (``st.totals_out``, handed back as ``totals``: ``steps.totals``), so the
    replica-wide steps read only the rows that are not plain. ``fast=False`` skips the
    one-loop checks of steady rows and every kept verdict (tests compare both ways).
    """
    ir = snapshot.replica
    deleting = ir.metadata.deletion_timestamp is not None
    # teardown never depends on a valid spec: a replica scaled (``/scale``) until its pod
    # names pass 63 characters, then deleted, still drains and releases its finalizer
    invalid = () if deleting else validate_replica(ir)
    if not invalid:
        try:
            policy = _policy(snapshot, deleting=deleting)
        except BudgetError as exc:
            invalid = (f"InvalidBudget: {exc}",)
    if invalid:
        return invalid_plan(ir, to_second(snapshot.now), invalid), None
    revs = revisions.resolve_revisions(snapshot)
    st = PassState(
        view=PassView(snapshot, policy, revs, fast=fast),
        advance_fn=lifecycle.advance,
        cache=PassCache(
            kept=kept if fast else None,
            totals=totals if fast else None,
            basis=basis_of(snapshot),
        ),
    )
    revisions.record_revisions(st, revs)
    revisions.group_pods(st)
    revisions.load_rows(st)
    if ir.metadata.deletion_timestamp is not None:
        teardown.teardown(st)
    else:
        for step in PASSES:
            step(st)
            if st.replan:  # (``_advance_all``) rare: an attempt failed in a big fleet
                return plan_pass(snapshot, fast=fast)
    revisions.prune_revisions(st)
    return finish(st), st
