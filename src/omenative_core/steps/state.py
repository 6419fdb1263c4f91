"""The pass state: everything one planning pass reads and builds, in one explicit place.

A pass (``planner.PASSES``) is a function of a ``PassState``. It reads the snapshot, the
Instance rows and the policy; it writes rows, actions (through ``ActionSink``), events,
wake-up times and the status extras here. Nothing else is shared between passes.

Rules the passes keep:

1. A pass writes the row it is working on with ``st.rows[index] = ...``. A write to
   another Instance's row (a replacement ending its source's operation, a drained source
   releasing its replacement) goes through ``st.hand_off`` and is recorded in
   ``st.handoffs``, so every cross-Instance move is greppable and visible in a debugger.
2. Actions go to ``st.out``: the sink keeps a plan's fixed order (status, revisions,
   objects, PodGroups, creates, gates, patches, deletes ...) and keeps the first action
   per (kind, object), so two passes touching the same pod cannot emit it twice.
3. Queries (``expected``, ``is_member``, ``available`` ...) are pure functions of the state.
"""

from __future__ import annotations

import sys
from collections import defaultdict
from collections.abc import Callable
from datetime import datetime
from typing import Any

from attrs import define, field

from omenative_core.model.config import LifecycleConfig
from omenative_core.model.observed import CreateError, PodView, Snapshot
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
from omenative_core.model.spec import InferenceReplica, InferenceReplicaSpec, Runner
from omenative_core.model.status import (
    InferenceReplicaStatus,
    InstanceOperation,
    InstanceStatus,
    MigrationStatus,
    RolloutHold,
)
from omenative_core.model.timefmt import format_time, to_second
from omenative_core.phases import OpType, Phase
from omenative_core.policy import Policy
from omenative_core.render import instance_slots, is_multi_pod, pod_name
from omenative_core.retry import RetryBook
from omenative_core.revisions import hash_of
from omenative_core.status.budget import Budget
from omenative_core.steps.totals import RowTotals, odd_indexes
from omenative_core.steps.verdicts import RowGroups, Tally, Verdicts, basis_of

__all__ = [
    "ActionSink",
    "Continue",
    "HandOff",
    "MoveResult",
    "PassState",
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

Shape = tuple[tuple[str, tuple[Any, tuple[Runner, ...]]], ...]
"""An attempt's pods: (name after ``{prefix}-{index}``, (slot, runners)), in rank order."""


@define
class PassState:
    """One planning pass's inputs and scratch results (see the module docstring)."""

    snap: Snapshot
    policy: Policy
    advance_fn: AdvanceFn
    fast: bool = True
    """Take the one-loop checks of steady rows (False: the full checks, for tests)."""
    kept: Verdicts | None = None
    """The last pass's per-Instance verdicts (``steps.verdicts``), or None: derive all."""
    totals: RowTotals | None = None
    """The last pass's row totals (``steps.totals``), or None: read every row."""
    now: datetime = field(init=False)
    prev: InferenceReplicaStatus = field(init=False)
    ir: InferenceReplica = field(init=False)
    spec: InferenceReplicaSpec = field(init=False)
    prefix: str = field(init=False)
    config: LifecycleConfig = field(init=False)
    rows: dict[int, InstanceStatus] = field(factory=dict)
    pods_by_index: dict[int, list[PodView]] = field(factory=lambda: defaultdict(list))
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
    errors_by_name: dict[str, CreateError] = field(factory=dict)
    migrations: dict[str, MigrationStatus] = field(factory=dict)
    book: RetryBook = field(init=False)
    # revisions (steps/revisions.py fills these first)
    runners_by_rev: dict[str, tuple[Runner, ...]] = field(factory=dict)
    pairing_by_rev: dict[str, str | None] = field(factory=dict)
    placement_by_rev: dict[str, dict[str, str]] = field(factory=dict)
    """Revision -> its placement fields (``revisions.placement_of``; ``{}``: none)."""
    collision_count: int | None = None
    spec_revision: str = ""
    target: str = ""
    # caches
    _used_indexes: set[int] | None = None
    _free_cursor: int = 0
    _shapes: dict[tuple[str, int], Shape] = field(factory=dict)
    _expected: dict[tuple[int, str, int], dict[str, tuple[Any, tuple[Runner, ...]]] | None] = field(
        factory=dict
    )
    _hashes: dict[str, str] = field(factory=dict)
    by_name: dict[str, PodView] = field(factory=dict)
    """Pod name -> the pod (a name's last, as ``revisions.group_pods`` met them): the
    attempt a name stands for is that pod's (``attempt``)."""
    names_unique: bool = True
    """No two grouped pods share a name, so ``by_name`` has each one itself."""
    _budget: Budget | None = None
    # per-Instance verdicts (steps/verdicts.py): what this pass reuses and what it keeps
    basis: tuple[Any, ...] = ()
    dirty: set[int] | None = None
    """Instances whose pods changed since ``kept`` (None: every Instance is recomputed)."""
    positions: dict[int, int] | None = None
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
    _prev_ready: set[int] | None = None
    waiting: set[int] | None = None
    """Instances with a pod the scheduler cannot place, once a step asked (``verdicts``)."""
    totals_out: RowTotals | None = None
    """This pass's row totals, for the next pass (``steps.status.finish``)."""
    groups_out: tuple[tuple[tuple[Any, ...], ...], tuple[frozenset[str], ...]] = ((), ())
    """The PodGroups this pass observed and the ones no row named (``native_gang.cleanup``)."""
    nodes_out: tuple[bool, bool, bool, int, int] | None = None
    """What this pass read of the nodes (``capacity.check_nodes``)."""
    replan: bool = False
    """This pass, which skipped the kept steady rows, must be planned again without the
    kept verdicts (``planner._advance_all``: a RetryBlock opened meanwhile)."""

    def __attrs_post_init__(self) -> None:
        self.now = to_second(self.snap.now)
        self.ir = self.snap.replica
        self.spec = self.ir.spec
        self.prefix = self.ir.prefix  # the name prefix of its pods and PodGroups
        self.config = self.snap.config
        self.prev = self.snap.replica.status or InferenceReplicaStatus()
        self.book = RetryBook(self.prev.retry_blocks, self.snap.config.update_retry)
        self.migrations = {m.request_uuid: m for m in self.prev.migrations}
        self.errors_by_name = {e.name: e for e in self.snap.create_errors}
        self.basis = basis_of(self.snap)

    # ------------------------------------------------------------------ shorthands

    def pods_of(self, index: int) -> list[PodView]:
        """The pods labelled with Instance ``index`` (empty if none)."""
        return self.pods_by_index.get(index, [])

    def advance(self, index: int) -> None:
        """Take the next step of Instance ``index``'s open operation (``lifecycle.advance``)."""
        self.advance_fn(self, index)

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

    # ------------------------------------------------------------------ pods of an attempt

    def runners(self, revision: str) -> tuple[Runner, ...] | None:
        """The runner templates of a stored (or the spec's) revision."""
        return self.runners_by_rev.get(revision)

    def expected(
        self, index: int, revision: str, incarnation: int, slot_ordinal: int
    ) -> dict[str, tuple[Any, tuple[Runner, ...]]] | None:
        """Pod name -> (slot, runners) of one attempt of Instance ``index`` (do not modify).

        Built once per (index, revision, ordinal) and pass: several passes ask for it. A
        revision's slots are laid out once per pass (``_shape``); the names are built from
        them, as ``render.pod_name`` spells them.
        """
        del incarnation  # names do not carry it; kept so call sites read as "this attempt"
        key = (index, revision, slot_ordinal)
        if key in self._expected:
            return self._expected[key]
        kind = (revision, slot_ordinal)
        shape = self._shapes[kind] if kind in self._shapes else self._shape(revision, slot_ordinal)
        if shape is None:
            out = None
        else:
            head = f"{self.prefix}-{index}"
            out = {head + tail: value for tail, value in shape}
        self._expected[key] = out
        return out

    def _shape(self, revision: str, slot_ordinal: int) -> Shape | None:
        """Each pod's name after ``{prefix}-{index}`` and its (slot, runners), in rank order."""
        runners = self.runners(revision)
        if runners is None:
            return None
        multi = is_multi_pod(runners)
        shape = tuple(
            (
                pod_name("", 0, slot.runner, slot.ordinal if multi else slot_ordinal)[2:],
                (slot, runners),
            )
            for slot in instance_slots(runners)
        )
        self._shapes[(revision, slot_ordinal)] = shape
        return shape

    def matches(self, pod: PodView, revision: str, incarnation: int) -> bool:
        """Whether a pod belongs to this attempt (revision hash and incarnation labels)."""
        return self.attempt(pod) == (self.revision_hash(revision), incarnation)

    def attempt(self, pod: PodView) -> tuple[str | None, int]:
        """The (revision-hash label, incarnation) of the pod of ``pod``'s name (``by_name``:
        the last pod of that name, as the grouping met them; else ``pod``'s own)."""
        got = self.by_name.get(pod.name)
        if got is None:
            got = self.by_name[pod.name] = pod
        return got.attempt

    def prev_ready(self) -> set[int]:
        """The Instances whose row in the previous status was Ready (found once a pass)."""
        got = self._prev_ready
        if got is None:
            ready = Phase.READY
            got = self._prev_ready = {r.index for r in self.prev.instances if r.phase == ready}
        return got

    def revision_hash(self, revision: str) -> str:
        """``hash_of(revision)``, computed once per pass (interned, as ``PodView``'s label
        is: comparing the two is then a pointer comparison)."""
        if revision in self._hashes:
            return self._hashes[revision]
        got = self._hashes[revision] = sys.intern(hash_of(revision))
        return got

    def node_lost(self, pod: PodView) -> bool:
        """Whether the pod's node is gone or not Ready."""
        if not pod.node_name:
            return False
        node = self.snap.nodes.get(pod.node_name)
        return node is None or node.ready is not True

    def all_ready(self, row: InstanceStatus) -> bool:
        """Every pod of the row's running attempt exists, is Ready and is not terminating."""
        expected = self.expected(
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

    def available(self, row: InstanceStatus) -> bool:
        """Ready for at least ``minReadySeconds``.

        A Ready row without ``readySince`` is Available: the status drops the stamp once
        the window has passed (``steps.status``), so a steady Ready row carries no entry.
        """
        if row.phase != Phase.READY:
            return False
        return row.ready_since is None or self.now >= row.ready_since + self.policy.min_ready

    def ready_stamp(self, row: InstanceStatus) -> datetime | None:
        """The ``readySince`` of a row that is Ready after this move.

        A row already Ready keeps its own (None once Available); one entering Ready now
        starts its ``minReadySeconds`` window now.
        """
        return row.ready_since if row.phase == Phase.READY else self.now

    # ------------------------------------------------------------------ membership

    def is_surge_target(self, row: InstanceStatus) -> bool:
        """A replacement being built for another Instance (not yet a member)."""
        op = row.operation
        return (
            op is not None and op.replaces is not None and op.type in (OpType.UPDATE, OpType.CREATE)
        )

    def is_member(self, row: InstanceStatus) -> bool:
        """Counts towards ``replicas``: neither condemned nor a replacement in flight."""
        op = row.operation
        if op is None:
            return True
        if op.type == OpType.DELETE:
            return False
        return not self.is_surge_target(row)

    def members(self) -> list[InstanceStatus]:
        """The member rows, in index order of insertion."""
        # a row with no operation is a member: asked only about the others (a pass at rest
        # makes this query over every row)
        return [r for r in self.rows.values() if r.operation is None or self.is_member(r)]

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
            [r for r in odd if r.operation is None or self.is_member(r)]
        )

    def unavailable(self) -> int:
        """Members that are not Ready, busy, or not yet available (``available``, inlined)."""
        now, window, ready = self.now, self.policy.min_ready, Phase.READY
        rows = self.odd_rows()  # a plain row is a Ready, available member
        busy = [r for r in rows if r.operation is not None and self.is_member(r)]
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
            used = self._used_indexes = set(self.rows) | set(self.pods_by_index)
        i = max(start, self._free_cursor) if start <= self._free_cursor else start
        while i in used:
            i += 1
        used.add(i)
        if start <= self._free_cursor:
            self._free_cursor = i + 1
        return i

    # ------------------------------------------------------------------ operations

    def op(self, type_: str, step: str, target: str, reason: str, **kw: Any) -> InstanceOperation:
        """A new operation of ``type_`` at ``step`` on ``target``, started now."""
        return InstanceOperation(
            id=f"{type_.lower()}-{target.rsplit('-', 1)[-1]}-{format_time(self.now)}",
            type=type_,
            step=step,
            started_at=self.now,
            last_progress_at=self.now,
            target_revision=target,
            reason=reason,
            **kw,
        )

    def may_open(self, count: int = 1, *, migrate: bool = False) -> bool:
        """Whether ``count`` new operations fit the status (``status.budget``); else they wait.

        The first refusal of a pass says so with an ``OperationsBounded`` Event.
        """
        if self._budget is None:
            self._budget = Budget.of(self.odd_rows())  # a plain row is charged nothing
        if self._budget.admit(count, migrate=migrate):
            return True
        if self._budget.deferred == count:
            self.note(
                "OperationsBounded",
                "new operations wait: the ones open now fill the status budget "
                f"({self._budget.used} of {self._budget.capacity} bytes), so the status stays "
                "under etcd's request limit",
            )
        return False

    def start_attempt(self, revision: str) -> bool:
        """Claim an attempt on ``revision`` if its RetryBlock allows one now."""
        if not self.book.may_start(revision, self.now):
            return False
        self.book.claim(revision)
        return True

    def set_hold(self, gate: str, reason: str) -> None:
        """Record why the rollout waits (the first reason of the pass wins)."""
        if self.hold is None:
            self.hold = RolloutHold(gate=gate, reason=reason, target=self.target)

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
