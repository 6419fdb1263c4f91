"""The first and last passes: revisions, the pods by Instance, the rows; history pruning.

``resolve_revisions`` decides the spec's revision (bumping ``collisionCount`` on a hash
collision), creates its ControllerRevision when missing and picks the rollout target
(``pacing.rollbackToRevision`` or the spec's). ``load_rows`` adopts pods that have no row
(a lost status) instead of deleting them blindly; the pods of a scale-up whose status was
not written (the shell may hold that status, ``coalesce.py``) are recognised by their
labels and resume their Create operation. ``prune_revisions`` keeps every
revision a row or the target still names, within ``revisionHistoryLimit``.
"""

from __future__ import annotations

from collections.abc import Mapping
from operator import attrgetter

from omenative_core.labels import LABEL_REVISION_HASH
from omenative_core.model.observed import Snapshot
from omenative_core.model.plan import CreateRevision, DeleteRevision
from omenative_core.model.spec import Runner
from omenative_core.model.status import InstanceStatus
from omenative_core.phases import Phase
from omenative_core.revisions import (
    hash_of,
    next_revision_number,
    placement_from_revision,
    placement_of,
    revision_body,
    revision_hash,
    revision_name,
    revisions_to_prune,
    runners_from_revision,
    spec_revision_hash,
)
from omenative_core.steps.scale import new_instance_revision, new_instance_row
from omenative_core.steps.state import PassState
from omenative_core.steps.step_pass import StepPass
from omenative_core.steps.totals import loaded_rows, rowless
from omenative_core.steps.verdicts import Grouping, group_all, regroup
from omenative_core.steps.view import Revisions

__all__ = [
    "group_pods",
    "load_rows",
    "prune_revisions",
    "record_revisions",
    "resolve_revisions",
    "unrecorded_create",
]


def resolve_revisions(snap: Snapshot) -> Revisions:
    """Stored revisions, the spec's revision (to create if missing) and the target: what
    the pass's view holds (``steps.view``); ``record_revisions`` writes what it asks for."""
    ir = snap.replica
    spec, prefix = ir.spec, ir.stable_prefix
    runners_by_rev: dict[str, tuple[Runner, ...]] = {}
    pairing_by_rev: dict[str, str | None] = {}
    placement_by_rev: dict[str, dict[str, str]] = {}
    revision_views = {r.name: r for r in snap.revisions}
    for view in snap.revisions:
        try:
            runners_by_rev[view.name] = runners_from_revision(view)
            pairing_by_rev[view.name] = view.data.get("pairingProtocol")
            placement_by_rev[view.name] = placement_from_revision(view)
        except ValueError:
            continue
    collision = ir.status.collision_count if ir.status is not None else None
    placement = placement_of(spec)
    spec_hash = spec_revision_hash(spec, collision)
    spec_rev = revision_name(prefix, spec_hash)
    if spec_rev in revision_views and spec_rev in runners_by_rev:
        stored = runners_by_rev[spec_rev]
        stored_hash = revision_hash(stored, pairing_by_rev.get(spec_rev), collision,
                                    placement_by_rev.get(spec_rev))
        if stored_hash != spec_hash:
            collision = (collision or 0) + 1
            spec_hash = spec_revision_hash(spec, collision)
            spec_rev = revision_name(prefix, spec_hash)
    runners_by_rev[spec_rev] = spec.runners
    pairing_by_rev[spec_rev] = spec.pairing_protocol
    placement_by_rev[spec_rev] = placement
    create = None
    if spec_rev not in revision_views:
        create = CreateRevision(
            body=revision_body(
                ir,
                spec.runners,
                spec.pairing_protocol,
                spec_hash,
                next_revision_number(snap.revisions),
                placement,
            )
        )
    rollback = spec.pacing.rollback_to_revision if spec.pacing else None
    target = _rollback_target(rollback, runners_by_rev) if rollback else None
    missing = None
    if rollback and target is None:
        missing = f"pacing.rollbackToRevision {rollback!r} names no stored revision"
    return Revisions(
        runners_by_rev, pairing_by_rev, placement_by_rev, collision, spec_rev,
        target or spec_rev, create, missing,
    )


def record_revisions(st: StepPass, revs: Revisions) -> None:
    """Write what ``resolve_revisions`` asked for: the spec's ControllerRevision, and the
    ``FailedUpdate`` condition of a rollback to a revision that is not stored."""
    if revs.create is not None:
        st.out.add(revs.create)
    if revs.rollback_missing is not None:
        st.extra_conditions["FailedUpdate"] = (
            "True",
            "RollbackRevisionNotFound",
            revs.rollback_missing,
        )


def _rollback_target(rollback: str, runners_by_rev: Mapping[str, object]) -> str | None:
    """The stored revision ``pacing.rollbackToRevision`` names, by name or hash."""
    name = rollback if rollback in runners_by_rev else None
    if name is None:
        for candidate in runners_by_rev:
            if hash_of(candidate) == rollback:
                name = candidate
    return name


def group_pods(st: PassState) -> None:
    """Index the observed pods by the Instance they are labelled with.

    Each pod's index and attempt (revision hash and incarnation) were read from its labels
    when its view was built (``PodView``); the pods are also mapped by name (``st.cache.by_name``)
    for the later passes, which compare the attempt a name stands for. With the last pass's
    verdicts only the changed pods are read (``steps.verdicts.regroup``), and ``st.cache.dirty``
    names the Instances they belong to.
    """
    got = regroup(st.view.snap, st.cache.basis, st.cache.kept)
    if got is None:
        _group_all(st)
        return
    _take(st, got.grouping)
    st.cache.positions = got.positions
    st.cache.dirty = got.dirty


def _group_all(st: PassState) -> None:
    _take(st, group_all(st.view.snap.pods))
    st.cache.positions = None
    st.cache.dirty = None


def _take(st: PassState, grouping: Grouping) -> None:
    st.cache.pods_by_index = grouping.pods_by_index
    st.cache.by_name = grouping.by_name
    st.cache.names_unique = grouping.unique


def load_rows(st: PassState) -> None:
    """The previous status's rows, plus a row for pods that have none: the scale-up that
    created them when their labels say so (``unrecorded_create``), else a Pending one."""
    loaded = loaded_rows(st)
    if loaded is None:
        rows = st.view.prev.instances
        st.rows.update(zip(map(attrgetter("index"), rows), rows, strict=True))  # in C
    else:  # the kept totals' rows, the few that differ written in (``steps.totals``)
        st.rows = loaded
    missing = rowless(st)
    if not missing:
        return
    if st.cache.dirty is not None:
        _group_all(st)  # adopt in the order a full grouping meets the pods
    orphans = [i for i in st.cache.pods_by_index if i in missing]
    for index in orphans:
        pods = st.cache.pods_by_index[index]
        # pods with no row (status lost or never written): adopt, never delete blindly
        live = [p for p in pods if not p.terminating] or pods
        inc = max(p.incarnation for p in live) or 1
        rev_hash = live[0].labels.get(LABEL_REVISION_HASH, "")
        rev = revision_name(st.view.stable_prefix, rev_hash) if rev_hash else ""
        st.rows[index] = InstanceStatus(
            index=index,
            incarnation=inc,
            phase=Phase.PENDING,
            running_revision=rev,
            target_revision=rev,
            active_ordinal=0,
        )
    for index in orphans:
        adopted = unrecorded_create(st, index)
        if adopted is not None:
            st.rows[index] = adopted


def unrecorded_create(st: StepPass, index: int) -> InstanceStatus | None:
    """The Creating row of a scale-up whose pods exist but whose status was not written.

    ``scale`` names a new Instance's pods deterministically and labels them with its
    index, incarnation 1 and the revision it starts on; pods that are exactly that (none
    terminating, every name one the attempt expects) are the attempt a pass planned, so
    its Create operation resumes (creating what is missing, deadline from now) instead of
    the pods being taken for strays and restarted. Anything else (another revision or
    incarnation, a pause, a RetryBlock) stays a Pending row.

    The status budget is charged, never asked: the operation is open in the world already
    (the pass that created the pods admitted it), and the rows this pass loaded may still
    charge operations that pass ended, so a refusal here would leave a Pending row whose
    fresh pods ``repair.rebuilds`` deletes and the next pass restarts as "pod lost".
    """
    pods = st.pods_of(index)
    revision = new_instance_revision(st, index)
    expected = st.view.expected(index, revision, 1, 0)
    if st.view.policy.paused or not expected or any(
        p.terminating or p.name not in expected or not st.matches(p, revision, 1) for p in pods
    ):
        return None
    if not st.book.may_start(revision, st.view.now):
        return None
    st.charge_open()
    st.book.claim(revision)
    return new_instance_row(st, index, revision)


def prune_revisions(st: StepPass) -> None:
    """Delete stored revisions no row names, beyond ``revisionHistoryLimit``."""
    live = {st.view.target, st.view.spec_revision}
    rows = st.odd_rows()  # a plain row runs and targets the target (``steps.totals``)
    live.update(map(attrgetter("running_revision"), rows))
    live.update(map(attrgetter("target_revision"), rows))
    if st.view.prev.current_revision:
        live.add(st.view.prev.current_revision)
    limit = st.view.policy.revision_history_limit
    for view in revisions_to_prune(st.view.snap.revisions, live, limit):
        st.out.add(DeleteRevision(name=view.name, uid=view.uid))
