"""The read-only view of a pass: what every step reads and no step writes.

A pass (``planner.PASSES``) reads one snapshot, the policy resolved from it and the
revisions resolved from it (``steps.revisions.resolve_revisions``); none of that changes
while the pass runs. ``PassView`` holds them, frozen, with the pure queries over them: the
pods an attempt expects (``expected``), revision hashes, membership, availability. What
the steps build goes to the write-set (``steps.state.PassWrites``).

The view memoizes its queries (the pod names of an attempt, a revision's hash): each is
a pure function of the view, computed once a pass, so the memo is invisible to the steps.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from attrs import field, frozen

from omenative_core.labels import LABEL_POD_ORDINAL, LABEL_RUNNER
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.observed import CreateError, PodView, Snapshot
from omenative_core.model.plan import CreateRevision
from omenative_core.model.spec import InferenceReplica, InferenceReplicaSpec, Runner
from omenative_core.model.status import InferenceReplicaStatus, InstanceOperation, InstanceStatus
from omenative_core.model.timefmt import format_time, to_second
from omenative_core.phases import OpType, Phase
from omenative_core.policy import Policy
from omenative_core.render import instance_slots, is_multi_pod, pod_name
from omenative_core.revisions import hash_of

__all__ = ["PassView", "Revisions", "Shape", "legacy_attempts"]

Shape = tuple[tuple[str, tuple[Any, tuple[Runner, ...]]], ...]
"""An attempt's pods: (name after ``{prefix}-{index}``, (slot, runners)), in rank order."""

Expected = dict[str, tuple[Any, tuple[Runner, ...]]]
"""Pod name -> (slot, runners) of one attempt."""


@frozen(eq=False)
class Revisions:
    """``steps.revisions.resolve_revisions``'s answer: the stored revisions' runners,
    pairing and placement by name (the spec's among them), the spec's revision and the
    rollout target; ``create``: the spec's ControllerRevision when it is not stored;
    ``rollback_missing``: the message of a ``pacing.rollbackToRevision`` naming none."""

    runners_by_rev: Mapping[str, tuple[Runner, ...]]
    pairing_by_rev: Mapping[str, str | None]
    placement_by_rev: Mapping[str, Mapping[str, str]]
    collision_count: int | None
    spec_revision: str
    target: str
    create: CreateRevision | None = None
    rollback_missing: str | None = None


@frozen(eq=False)
class PassView:
    """One pass's inputs, frozen (see the module docstring); build it with ``of``."""

    snap: Snapshot
    policy: Policy
    revisions: Revisions
    fast: bool = True
    """Take the one-loop checks of steady rows (False: the full checks, for tests)."""
    now: datetime = field(init=False)
    prev: InferenceReplicaStatus = field(init=False)
    """The status the pass starts from (the replica's, or an empty one)."""
    ir: InferenceReplica = field(init=False)
    spec: InferenceReplicaSpec = field(init=False)
    prefix: str = field(init=False)
    """The name prefix of the pods of new Instances (OME's: ``InferenceReplica.prefix``)."""
    stable_prefix: str = field(init=False)
    """The name prefix of ControllerRevisions, PodGroups and Workloads."""
    legacy_attempts: frozenset[tuple[int, int, int]] = field(init=False)
    """Standalone replicas whose pre-OME Service ``{replica}-headless`` stands: the
    attempts (index, incarnation, ordinal; ``-1`` for a multi-pod Instance) whose pods
    carry the pre-OME prefix ``{replica}``; they keep it."""
    config: LifecycleConfig = field(init=False)
    errors_by_name: Mapping[str, CreateError] = field(init=False)
    """Pod name -> the API's refusal of its create in the last pass."""
    runners_by_rev: Mapping[str, tuple[Runner, ...]] = field(init=False)
    pairing_by_rev: Mapping[str, str | None] = field(init=False)
    placement_by_rev: Mapping[str, Mapping[str, str]] = field(init=False)
    """Revision -> its placement fields (``revisions.placement_of``; ``{}``: none)."""
    collision_count: int | None = field(init=False)
    spec_revision: str = field(init=False)
    target: str = field(init=False)
    """The revision the rollout moves the Instances to."""
    _shapes: dict[tuple[str, int], Shape | None] = field(init=False, factory=dict)
    _expected: dict[tuple[int, str, int, str], Expected | None] = field(init=False, factory=dict)
    _hashes: dict[str, str] = field(init=False, factory=dict)

    def __attrs_post_init__(self) -> None:
        snap, revs, put = self.snap, self.revisions, object.__setattr__
        ir = snap.replica
        put(self, "now", to_second(snap.now))
        put(self, "ir", ir)
        put(self, "spec", ir.spec)
        put(self, "prefix", ir.prefix)
        put(self, "stable_prefix", ir.stable_prefix)
        # only while the pre-OME Service stands can a pod carry the old names: the old
        # release made it before any pod, and it goes once none does (a pass then reads
        # no pod for this)
        old = ir.legacy_prefix if snap.legacy_headless_service_exists else None
        put(self, "legacy_attempts", legacy_attempts(old, snap.pods))
        put(self, "config", snap.config)
        put(self, "prev", ir.status or InferenceReplicaStatus())
        put(self, "errors_by_name", {e.name: e for e in snap.create_errors})
        put(self, "runners_by_rev", revs.runners_by_rev)
        put(self, "pairing_by_rev", revs.pairing_by_rev)
        put(self, "placement_by_rev", revs.placement_by_rev)
        put(self, "collision_count", revs.collision_count)
        put(self, "spec_revision", revs.spec_revision)
        put(self, "target", revs.target)

    # ------------------------------------------------------------------ pods of an attempt

    def runners(self, revision: str) -> tuple[Runner, ...] | None:
        """The runner templates of a stored (or the spec's) revision."""
        return self.runners_by_rev.get(revision)

    def expected(
        self, index: int, revision: str, incarnation: int, slot_ordinal: int
    ) -> Expected | None:
        """Pod name -> (slot, runners) of one attempt of Instance ``index`` (do not modify).

        Built once per (index, revision, ordinal) and pass: several steps ask for it. A
        revision's slots are laid out once per pass (``_shape``); the names are built from
        them, as ``render.pod_name`` spells them.
        """
        prefix = self.attempt_prefix(index, incarnation, slot_ordinal)
        key = (index, revision, slot_ordinal, prefix)
        if key in self._expected:
            return self._expected[key]
        kind = (revision, slot_ordinal)
        shape = self._shapes[kind] if kind in self._shapes else self._shape(revision, slot_ordinal)
        if shape is None:
            out = None
        else:
            head = f"{prefix}-{index}"
            out = {head + tail: value for tail, value in shape}
        self._expected[key] = out
        return out

    def attempt_prefix(self, index: int, incarnation: int, slot_ordinal: int) -> str:
        """The name prefix of one attempt's pods: the pre-OME ``{replica}`` while a pod of
        that attempt carries it (its workers' ``OME_LEADER_ADDRESS`` names it), else
        ``prefix``. A replacement (a restart's next incarnation, an update's surge pod,
        a gang surge or migration at a new index) is a new attempt: OME's name."""
        legacy = self.legacy_attempts
        if legacy and (
            (index, incarnation, -1) in legacy or (index, incarnation, slot_ordinal) in legacy
        ):
            return self.ir.legacy_prefix or self.prefix
        return self.prefix

    def pod_names(self, index: int, runner: str, ordinal: int) -> tuple[str, ...]:
        """The names a pod of Instance ``index`` may carry: OME's, and the pre-OME one of
        a standalone replica."""
        own = pod_name(self.prefix, index, runner, ordinal)
        legacy = self.ir.legacy_prefix
        return (own, pod_name(legacy, index, runner, ordinal)) if legacy else (own,)

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

    # ------------------------------------------------------------------ rows

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


def legacy_attempts(
    legacy: str | None, pods: tuple[PodView, ...]
) -> frozenset[tuple[int, int, int]]:
    """The attempts whose pods are named ``{legacy}-{index}-...`` (the pods are the record:
    no status field holds a prefix): (index, incarnation, ordinal) for a single pod,
    (index, incarnation, -1) for a multi-pod Instance. Empty for a projected replica.

    OME's names put the component after the replica's name, never a digit, so a name
    whose next part is a digit is the old spelling.
    """
    if legacy is None:
        return frozenset()
    head = legacy + "-"
    start = len(head)
    out: set[tuple[int, int, int]] = set()
    for pod in pods:
        name = pod.name
        if pod.instance is None or not name.startswith(head) or not name[start:start + 1].isdigit():
            continue
        single = pod.labels.get(LABEL_RUNNER) == "default"
        raw = pod.labels.get(LABEL_POD_ORDINAL, "")
        ordinal = int(raw) if single and raw.isdigit() else -1
        out.add((pod.instance, pod.incarnation, ordinal))
    return frozenset(out)
