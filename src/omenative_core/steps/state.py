"""The pass state: a pass's read-only view, its write-set and its incremental cache.

A pass (``planner.PASSES``) is a function of a ``PassState``. It reads ``st.view``
(``steps.view.PassView``: the snapshot, the policy, the resolved revisions and the pods
each attempt expects, frozen) and the Instance rows; it writes the write-set
(``PassWrites``): rows, actions (through ``ActionSink``), events, wake-up times, the
status extras, and the named results one step hands to a later one. The incremental
cache (``st.cache``, ``totals.PassCache``: the last pass's verdicts and totals, this pass's
pod grouping) is read through the queries below and ``steps.verdicts`` /
``steps.totals``. Nothing else is shared between passes.

Rules the passes keep:

1. A pass writes the row it is working on with ``st.rows[index] = ...``. A write to
   another Instance's row (a replacement ending its source's operation, a drained source
   releasing its replacement) goes through ``st.hand_off`` and is recorded in
   ``st.handoffs``, so every cross-Instance move is greppable and visible in a debugger.
2. Actions go to ``st.out``: the sink keeps a plan's fixed order (status, revisions,
   objects, PodGroups, creates, gates, patches, deletes ...) and keeps the first action
   per (kind, object), so two passes touching the same pod cannot emit it twice.
3. Queries (``st.view.expected``, ``is_member``, ``available`` ...) are pure functions of
   the view; ``odd_rows``, ``members`` and ``unavailable`` read the rows a step must read
   (every row, or only the ones that may not be plain while the kept totals hold), so a
   step never asks which rows were carried over from the last pass.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from attrs import define, field

from omenative_core.model.observed import PodView
from omenative_core.model.plan import (
    Action,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateRevision,
    DeleteObject,
    DeletePod,
    DeletePodGroup,
    DeleteRevision,
    Event,
    PatchPodImages,
    RecordAudit,
    RemoveAnnotations,
    ScaleDownWave,
    SetFinalizer,
    SetServingGate,
)
from omenative_core.model.status import (
    InstanceStatus,
    MigrationStatus,
    RolloutHold,
)
from omenative_core.phases import Phase
from omenative_core.retry import RetryBook
from omenative_core.status.budget import Budget
from omenative_core.steps.totals import PassCache, RowTotals, odd_indexes
from omenative_core.steps.verdicts import RowGroups, Tally
from omenative_core.steps.view import PassView

__all__ = [
    "ActionSink",
    "Continue",
    "HandOff",
    "MoveResult",
    "PassState",
    "PassWrites",
]


# The order of a plan's body: each action type goes to one bucket, buckets in this order.
_BUCKETS = (
    "meta_first",
    "revisions",
    "objects",
    "pod_groups",
    "creates",
    "gates",
    "patches",
    "deletes",
    "pod_group_deletes",
    "revision_deletes",
    "meta_last",
)


_BUCKET_OF: dict[type[Action], str] = {
    CreateRevision: "revisions",
    CreateObject: "objects",
    CreatePodGroup: "pod_groups",
    CreatePod: "creates",
    SetServingGate: "gates",
    PatchPodImages: "patches",
    DeletePod: "deletes",
    DeletePodGroup: "pod_group_deletes",
    DeleteObject: "pod_group_deletes",
    DeleteRevision: "revision_deletes",
    RemoveAnnotations: "meta_last",
    RecordAudit: "meta_last",
}


def _bucket(action: Action) -> str:
    """Adding the finalizer opens a plan; releasing it, like annotations and audit, ends it."""
    if isinstance(action, SetFinalizer):
        return "meta_first" if action.present else "meta_last"
    bucket = _BUCKET_OF.get(type(action))
    if bucket is None:
        raise TypeError(f"the planner does not emit {type(action).__name__}")
    return bucket


def _key(action: Action) -> tuple[str, str] | None:
    """The object an action acts on, for the actions a pass may reach twice."""
    match action:
        case CreatePod():
            return ("CreatePod", action.name)
        case DeletePod() | SetServingGate() | PatchPodImages():
            return (action.kind, action.name)
        case DeletePodGroup():
            return ("DeletePodGroup", f"{action.api_version}/{action.name}")
        case DeleteObject():
            return ("DeleteObject", f"{action.api_version}/{action.object_kind}/{action.name}")
        case CreatePodGroup() | CreateObject():
            body = action.body
            return (action.kind, f"{body.get('apiVersion')}/{body.get('kind')}/"
                    f"{body['metadata']['name']}")
    return None


@define
class ActionSink:
    """A plan's actions in their fixed order, at most one per (kind, object).

    Several passes may reach the same pod in one plan (a stale pod drained by its row's
    health check and again by a rebuild); the first action wins, as it is the one the
    earlier pass decided on. Duplicates are therefore impossible by construction.
    """

    _buckets: dict[str, list[Action]] = field(factory=lambda: {b: [] for b in _BUCKETS})
    _seen: set[tuple[str, str]] = field(factory=set)

    def add(self, action: Action) -> None:
        """Queue one action (ignored if an action of its kind already targets its object)."""
        key = _key(action)
        if key is not None:
            if key in self._seen:
                return
            self._seen.add(key)
        self._buckets[_bucket(action)].append(action)

    def body(self) -> list[Action]:
        """Every queued action, in plan order."""
        return [a for b in _BUCKETS for a in self._buckets[b]]


@define(frozen=True)
class HandOff:
    """One write to an Instance's row made while another Instance's step was running."""

    by: int | None
    index: int
    why: str


AdvanceFn = Callable[["PassState", int], None]


@define
class PassWrites:
    """What a pass's steps write: the plan's material, and the named results one step
    hands to a later one. Nothing else a step writes is read by another step.

    The plan's material: ``rows`` (a step writes the row it works on; another Instance's
    row only through ``hand_off``), ``out`` (the actions), ``events``, ``wake`` (wake-up
    times), ``poll``, ``audit``, ``hold``, ``extra_conditions``, ``migrations`` and
    ``book`` (the RetryBlocks), which ``steps.status.finish`` turns into the plan.
    The named results, each written by one step and read by the ones named:
    ``steady_rows``/``steady_counts``/``plain_steady`` (``repair.settled``, ``steady.find``
    -> ``steps.status``), ``unschedulable`` (``steady.find``, ``verdicts.unschedulable_now``
    -> ``capacity``), ``row_groups``/``groups_out`` (``native_gang.cleanup``), ``nodes_out``
    (``capacity.check_nodes``), ``tallies``/``plain_tallies``/``totals_out``
    (``steps.status``) -> the next pass (``verdicts.keep``, ``incremental``), ``replan``
    (``planner._advance_all`` -> ``planner.plan_pass``).
    """

    rows: dict[int, InstanceStatus] = field(factory=dict)
    out: ActionSink = field(factory=ActionSink)
    events: list[Event] = field(factory=list)
    wake: list[datetime] = field(factory=list)
    audit: list[dict[str, Any]] = field(factory=list)
    hold: RolloutHold | None = None
    extra_conditions: dict[str, tuple[str, str, str]] = field(factory=dict)
    poll: bool = False
    wave: ScaleDownWave | None = None
    """The scale-down batch of this pass (``steps.scale``), returned in the Plan."""
    handoffs: list[HandOff] = field(factory=list)
    migrations: dict[str, MigrationStatus] = field(factory=dict)
    book: RetryBook = field(init=False)
    # named results
    steady_rows: dict[int, InstanceStatus] = field(factory=dict)
    tallies: dict[int, Tally] = field(factory=dict)
    plain_tallies: dict[int, InstanceStatus] = field(factory=dict)
    """Index -> row whose tally is (row, row, True, True, True): kept so, not as a tuple
    each in ``tallies`` (``verdicts.Verdicts.plain``)."""
    row_groups: RowGroups | None = None
    """The rows and their attempts' PodGroup names, if ``native_gang.cleanup`` needed them."""
    steady_counts: dict[int, tuple[int, bool]] = field(factory=dict)
    """Index -> (pods serving, none gated) of rows ``repair.settled`` found steady by
    looking at their pods (the row is ``steady_rows``'s: the counts are of its pods)."""
    plain_steady: dict[int, InstanceStatus] = field(factory=dict)
    """Index -> row that a bulk ``steady.find`` found steady and plain as it stands
    (``steps.totals``, rule 1): ``steps.status`` tallies it unread while no step writes it."""
    unschedulable: set[int] | None = None
    """Instances with a pod the scheduler cannot place, once a step asked (``verdicts``;
    not ``operation.waiting``, an Instance's waiting reason)."""
    totals_out: RowTotals | None = None
    """This pass's row totals, for the next pass (``steps.status.finish``)."""
    groups_out: tuple[tuple[tuple[Any, ...], ...], tuple[frozenset[str], ...]] = ((), ())
    """The PodGroups this pass observed and the ones no row named (``native_gang.cleanup``)."""
    nodes_out: tuple[bool, bool, bool, int, int] | None = None
    """What this pass read of the nodes (``capacity.check_nodes``)."""
    replan: bool = False
    """This pass, which skipped the kept steady rows, must be planned again without the
    kept verdicts (``planner._advance_all``: a RetryBlock opened meanwhile)."""

    def hand_off(self, by: int | None, row: InstanceStatus, why: str) -> None:
        """Write another Instance's row from the step of Instance ``by`` (recorded)."""
        self.rows[row.index] = row
        self.handoffs.append(HandOff(by=by, index=row.index, why=why))

    def warn(self, reason: str, message: str, instance: int | None = None) -> None:
        """Record a Warning Event."""
        self.events.append(Event(type="Warning", reason=reason, message=message, instance=instance))

    def note(self, reason: str, message: str, instance: int | None = None) -> None:
        """Record a Normal Event."""
        self.events.append(Event(type="Normal", reason=reason, message=message, instance=instance))


@define(kw_only=True)
class PassState(PassWrites):
    """One pass: its read-only ``view``, its write-set (``PassWrites``) and the incremental
    cache (the last pass's verdicts and totals, and this pass's pod grouping)."""

    view: PassView
    """What the pass reads: the snapshot, policy and revisions, frozen (``steps.view``)."""
    advance_fn: AdvanceFn
    cache: PassCache = field(factory=PassCache)
    """The incremental cache: the last pass's verdicts and totals, this pass's pod grouping
    (``steps.totals.PassCache``)."""
    # scratch of the queries below
    _used_indexes: set[int] | None = None
    _free_cursor: int = 0
    _budget: Budget | None = None
    _prev_ready: set[int] | None = None

    def __attrs_post_init__(self) -> None:
        view = self.view
        self.book = RetryBook(view.prev.retry_blocks, view.config.update_retry)
        self.migrations = {m.request_uuid: m for m in view.prev.migrations}

    # ------------------------------------------------------------------ shorthands

    def pods_of(self, index: int) -> list[PodView]:
        """The pods labelled with Instance ``index`` (empty if none)."""
        return self.cache.pods_by_index.get(index, [])

    def advance(self, index: int) -> None:
        """Take the next step of Instance ``index``'s open operation (``lifecycle.advance``)."""
        self.advance_fn(self, index)

    # ------------------------------------------------------------------ pods of an attempt

    def prev_ready(self) -> set[int]:
        """The Instances whose row in the previous status was Ready (found once a pass)."""
        got = self._prev_ready
        if got is None:
            ready = Phase.READY
            got = self._prev_ready = {
                r.index for r in self.view.prev.instances if r.phase == ready
            }
        return got

    def matches(self, pod: PodView, revision: str, incarnation: int) -> bool:
        """Whether a pod belongs to this attempt (revision hash and incarnation labels)."""
        return self.attempt(pod) == (self.view.revision_hash(revision), incarnation)

    def attempt(self, pod: PodView) -> tuple[str | None, int]:
        """The (revision-hash label, incarnation) of the pod of ``pod``'s name (``by_name``:
        the last pod of that name, as the grouping met them; else ``pod``'s own)."""
        got = self.cache.by_name.get(pod.name)
        if got is None:
            got = self.cache.by_name[pod.name] = pod
        return got.attempt

    def all_ready(self, row: InstanceStatus) -> bool:
        """Every pod of the row's running attempt exists, is Ready and is not terminating."""
        expected = self.view.expected(
            row.index, row.running_revision, row.incarnation, row.active_ordinal
        )
        if not expected:
            return False
        pods = {p.name: p for p in self.pods_of(row.index)}
        for name in expected:
            pod = pods.get(name)
            if pod is None or not pod.ready or pod.terminating:
                return False
            if not self.matches(pod, row.running_revision, row.incarnation):
                return False
        return True

    def steady_phase(self, row: InstanceStatus) -> str:
        """The phase of a row whose operation just ended without a verdict."""
        if self.all_ready(row):
            return Phase.READY
        return Phase.FAILED if row.last_failure else Phase.PENDING

    # ------------------------------------------------------------------ membership

    def members(self) -> list[InstanceStatus]:
        """The member rows, in index order of insertion."""
        # a row with no operation is a member: asked only about the others (a pass at rest
        # makes this query over every row)
        return [r for r in self.rows.values() if r.operation is None or self.view.is_member(r)]

    def odd_rows(self) -> list[InstanceStatus]:
        """The rows that may not be plain, in index order (``steps.totals``); every row, in
        the rows' order, when the kept totals do not hold. A plain row is a Ready, available
        member with no operation, no failure and no ``readySince``, on the target
        revision: the replica-wide steps read only the others."""
        rows = self.rows
        odd = odd_indexes(self)
        return list(rows.values()) if odd is None else [rows[i] for i in odd]

    def member_count(self) -> int:
        """How many rows are members (``members``, with plain rows counted, not read)."""
        odd = self.odd_rows()
        return len(self.rows) - len(odd) + len(
            [r for r in odd if r.operation is None or self.view.is_member(r)]
        )

    def unavailable(self) -> int:
        """Members that are not Ready, busy, or not yet available (``available``, inlined)."""
        now, window, ready = self.view.now, self.view.policy.min_ready, Phase.READY
        rows = self.odd_rows()  # a plain row is a Ready, available member
        busy = [r for r in rows if r.operation is not None and self.view.is_member(r)]
        waiting = [
            r
            for r in rows
            if r.operation is None
            and (r.phase != ready or (r.ready_since is not None and now < r.ready_since + window))
        ]
        return len(busy) + len(waiting)

    def free_index(self, start: int = 0) -> int:
        """The lowest index at or above ``start`` that no row or pod uses, now reserved."""
        used = self._used_indexes
        if used is None:
            used = self._used_indexes = set(self.rows) | set(self.cache.pods_by_index)
        i = max(start, self._free_cursor) if start <= self._free_cursor else start
        while i in used:
            i += 1
        used.add(i)
        if start <= self._free_cursor:
            self._free_cursor = i + 1
        return i

    # ------------------------------------------------------------------ operations

    def _gate(self) -> Budget:
        if self._budget is None:
            self._budget = Budget.of(self.odd_rows())  # a plain row is charged nothing
        return self._budget

    def charge_open(self) -> None:
        """Charge an operation already open in the world (an unrecorded scale-up whose pods
        exist) to the status budget; later operations wait for the room it takes."""
        self._gate().charge()

    def may_open(self, count: int = 1, *, migrate: bool = False) -> bool:
        """Whether ``count`` new operations fit the status (``status.budget``); else they wait.

        The first refusal of a pass says so with an ``OperationsBounded`` Event.
        """
        budget = self._gate()
        if budget.admit(count, migrate=migrate):
            return True
        if budget.deferred == count:
            self.note(
                "OperationsBounded",
                "new operations wait: the ones open now fill the status budget "
                f"({budget.used} of {budget.capacity} bytes), so the status stays "
                "under etcd's request limit",
            )
        return False

    def start_attempt(self, revision: str) -> bool:
        """Claim an attempt on ``revision`` if its RetryBlock allows one now."""
        if not self.book.may_start(revision, self.view.now):
            return False
        self.book.claim(revision)
        return True

    def set_hold(self, gate: str, reason: str) -> None:
        """Record why the rollout waits (the first reason of the pass wins)."""
        if self.hold is None:
            self.hold = RolloutHold(gate=gate, reason=reason, target=self.view.target)

    def hold_retry(self, target: str) -> None:
        """The rollout waits for ``target``'s backoff."""
        nxt = self.book.next_retry(target)
        if nxt is not None:
            self.wake.append(nxt)
        self.set_hold("RetryBlock", f"revision {target} is backing off after a failure")


@define(frozen=True)
class Continue:
    """A move's result: the operation went on to its next step in this pass; run it now.

    ``row.operation.step`` is the new step; ``lifecycle.advance`` checks that the table
    allows the move and runs the next handler on the same row.
    """

    row: InstanceStatus


MoveResult = InstanceStatus | Continue | None
"""What a move returns: the row as it ends the pass, a ``Continue``, or None (removed)."""
