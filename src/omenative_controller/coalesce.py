"""Status write coalescing: a status that only reports progress waits, at most a window.

A gang's bring-up plans three statuses (the Create operation recorded, its pods counted,
the Instance Ready); written as planned they are a quarter of the manager's writes. A
status may wait (``--status-coalesce``, 10 s by default) when nothing a user or the core
relies on is in it yet:

* the plan destroys nothing: its other actions are creates, the finalizer, or a serving
  gate going True (the design writes the status that records a destroying step first);
* readiness is unchanged: ready, available, serving and updated-ready counts, and the set
  of conditions that are True (``Progressing`` and the configuration advice aside: see
  ``ADVICE``) are what the API server holds;
* nothing the core remembers across a restart changes: retry blocks, migrations, the
  rollout hold, traffic, the coordination group, the Instances the status already holds,
  and per Instance its incarnation, last failure and operation (id, type, retry count).
  The one kind of new row that may wait is a fresh scale-up (incarnation 1, a ``ScaleUp``
  Create operation, no failure, replacing nothing): the core recognises its pods by their
  labels and resumes its Create (``steps.revisions.unrecorded_create``), so a gang's first
  status waits like any other progress. Before that rule a gang whose Create was not
  written saw its own pods as strays and restarted them (41 writes instead of 13 for two
  gangs in the simulator).

A readiness gain waits too, but only briefly (``--status-readiness-coalesce``, 1 s by
default): while a big replica comes up, nearly every pass turns a few more Instances Ready,
and written each time that was 154 status writes of a 250-row replica for 250 gangs. A
gain is a plan that destroys nothing, whose readiness counts only rise while no condition
changes its status or reason (the replica turning Ready, or all its Instances Ready, is
written at once: users and the InferenceService wait for it), and whose rows change
their memory only by an operation that ended with its Instance Ready (the core ends it
again from the pods after a restart). The counts users read lag by at most the window,
and an Instance's ``minReadySeconds`` starts at most that much later (its ``readySince``
is stamped by the pass that writes it).

Configuration advice (``GangSchedulingUnavailable``, ``MigrationPolicyUnconfigured``,
``InstanceReadyTimeoutUnconfigured``) does not end a wait: it describes the cluster and the
lifecycle config, not this replica's progress, and reaches the user with the next status
that is due (at most the window later; the replica's first Ready at the latest). Before
this rule a replica on a cluster without gang scheduling wrote its first status at once
only to say so: 13 writes for a gang of 4 pods instead of 12 (``bench_controller.py
--gang-scheduling None``).

A waiting status is not stored: the key is looked at again when the window ends, and that
pass plans from the cache and writes whatever status is then due (level-triggered, so a
manager killed meanwhile loses nothing a new one cannot derive). Any pass whose status is
significant writes at once and ends the wait.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from attrs import define, field

from omenative_core.model.plan import (
    Action,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateRevision,
    SetFinalizer,
    SetServingGate,
    UpdateStatus,
)
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus
from omenative_core.phases import Phase
from omenative_core.steps.scale import fresh_scale_up

__all__ = ["ADVICE", "PROGRESS", "READINESS", "STATUS_COALESCE_SECONDS",
           "STATUS_READINESS_COALESCE_SECONDS", "StatusCoalescer", "adds_rows",
           "status_hold", "status_may_wait"]

STATUS_COALESCE_SECONDS = 10.0
"""How long a progress-only status may wait for the next one (``--status-coalesce``)."""
STATUS_READINESS_COALESCE_SECONDS = 1.0
"""How long a status that only adds readiness may wait (``--status-readiness-coalesce``)."""
PROGRESS = "progress"
"""A status that only reports progress (:func:`status_hold`)."""
READINESS = "readiness"
"""A status that also reports more Instances Ready, no condition changed (:func:`status_hold`)."""

ADVICE = frozenset({"GangSchedulingUnavailable", "MigrationPolicyUnconfigured",
                    "InstanceReadyTimeoutUnconfigured"})
"""Conditions that advise on the cluster or the lifecycle config: they ride the next due
status instead of ending a wait (a replica's readiness and memory still write at once)."""
_IGNORED = ADVICE | {"Progressing"}

_NOT_DESTROYING = (UpdateStatus, CreatePod, CreatePodGroup, CreateRevision, CreateObject)


def _harmless(action: Action) -> bool:
    """True for an action that destroys nothing and takes nobody out of rotation."""
    if isinstance(action, _NOT_DESTROYING):
        return True
    if isinstance(action, SetFinalizer):
        return action.present
    return isinstance(action, SetServingGate) and action.value


def _counts(s: InferenceReplicaStatus) -> tuple[int, ...]:
    return (s.ready_replicas, s.available_replicas, s.serving_replicas,
            s.updated_ready_replicas)


def _true_conditions(s: InferenceReplicaStatus) -> frozenset[str]:
    return frozenset(c.type for c in s.conditions if c.status == "True") - _IGNORED


def _condition_states(s: InferenceReplicaStatus) -> frozenset[tuple[str, str, str]]:
    """Each condition's type, status and reason (its message carries the counts)."""
    return frozenset((c.type, c.status, c.reason) for c in s.conditions
                     if c.type not in _IGNORED)


def _memory(s: InferenceReplicaStatus) -> tuple[object, ...]:
    return (s.retry_blocks, s.migrations, s.rollout_hold, s.traffic,
            s.coordination_group_ref, s.collision_count)


def _instance_memory(i: InstanceStatus) -> tuple[object, ...]:
    op = i.operation
    return (i.index, i.incarnation, i.last_failure,
            (op.id, str(op.type), op.retry_count) if op is not None else None)


def _row_hold(old: InstanceStatus, new: InstanceStatus) -> str | None:
    """How a kept row's change may wait: PROGRESS (its memory is the same), READINESS (its
    operation ended with the Instance Ready), or None."""
    if _instance_memory(new) == _instance_memory(old):
        return PROGRESS
    if (new.operation is None and old.operation is not None and new.phase == Phase.READY
            and new.incarnation == old.incarnation and new.last_failure == old.last_failure):
        return READINESS
    return None


def _readiness_hold(old: InferenceReplicaStatus, new: InferenceReplicaStatus) -> str | None:
    """PROGRESS when readiness is unchanged, READINESS when its counts only rose (the
    caller then checks that no condition changed its status or reason), else None."""
    if _true_conditions(old) != _true_conditions(new):
        return None
    before, after = _counts(old), _counts(new)
    if before == after:
        return PROGRESS
    return READINESS if all(b >= a for a, b in zip(before, after, strict=True)) else None


def status_hold(observed: InferenceReplicaStatus | None, new: InferenceReplicaStatus,
                actions: Iterable[Action]) -> str | None:
    """Whether the status write of a plan with ``actions`` may wait: PROGRESS, READINESS
    (a shorter window), or None (write it now)."""
    if not all(_harmless(a) for a in actions):
        return None
    old = observed if observed is not None else InferenceReplicaStatus()
    if _memory(old) != _memory(new):
        return None
    kind = _readiness_hold(old, new)
    if kind is None:
        return None
    kept = {i.index: i for i in new.instances}
    for row in old.instances:
        now = kept.pop(row.index, None)
        row_kind = _row_hold(row, now) if now is not None else None
        if row_kind is None:
            return None
        if row_kind == READINESS:
            kind = READINESS
    if kind == READINESS and _condition_states(old) != _condition_states(new):
        return None  # more Ready, or an operation ended, and a condition changed with it
    return kind if all(fresh_scale_up(i) for i in kept.values()) else None


def status_may_wait(observed: InferenceReplicaStatus | None, new: InferenceReplicaStatus,
                    actions: Iterable[Action]) -> bool:
    """True when the status write of a plan with ``actions`` only reports progress."""
    return status_hold(observed, new, actions) == PROGRESS


def adds_rows(observed: InferenceReplicaStatus | None, new: InferenceReplicaStatus) -> bool:
    """Whether ``new`` has Instance rows the stored status lacks (a scale-up): such a
    status is never held when the pass leaves some of those rows' pods for the next."""
    have = {i.index for i in observed.instances} if observed is not None else set()
    return any(i.index not in have for i in new.instances)


@define
class StatusCoalescer:
    """Which keys owe a status write, since when; ``window <= 0`` turns waiting off,
    ``readiness_window <= 0`` only the wait of readiness gains."""

    window: float = STATUS_COALESCE_SECONDS
    readiness_window: float = STATUS_READINESS_COALESCE_SECONDS
    clock: Callable[[], float] = time.monotonic
    _owed: dict[str, float] = field(factory=dict)

    def defer(self, key: str, observed: InferenceReplicaStatus | None,
              new: InferenceReplicaStatus, actions: Iterable[Action]) -> float | None:
        """Seconds the status of ``key`` may still wait, or None: write it now."""
        kind = status_hold(observed, new, actions) if self.window > 0 else None
        if kind is None:
            return None
        window = self.window if kind == PROGRESS else min(self.window, self.readiness_window)
        if window <= 0:
            return None
        now = self.clock()
        since = self._owed.setdefault(key, now)
        left = since + window - now
        return left if left > 0 else None

    def settled(self, key: str) -> None:
        """``key`` owes nothing: its status was written or equals the one planned."""
        self._owed.pop(key, None)

    def owed(self) -> int:
        """Keys with a status waiting."""
        return len(self._owed)
