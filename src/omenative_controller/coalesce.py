"""Status write coalescing: a status that only reports progress waits, at most a window.

A gang's bring-up plans three statuses (the Create operation recorded, its pods counted,
the Instance Ready); written as planned they are a quarter of the manager's writes. A
status may wait (``--status-coalesce``, 10 s by default) when nothing a user or the core
relies on is in it yet:

* the plan destroys nothing: its other actions are creates, the finalizer, or a serving
  gate going True (the design writes the status that records a destroying step first);
* readiness is unchanged: ready, available, serving and updated-ready counts, and the set
  of conditions that are True (``Progressing`` aside) are what the API server holds;
* nothing the core remembers across a restart changes: retry blocks, migrations, the
  rollout hold, traffic, the coordination group, the Instances the status already holds,
  and per Instance its incarnation, last failure and operation (id, type, retry count).
  The one kind of new row that may wait is a fresh scale-up (incarnation 1, a ``ScaleUp``
  Create operation, no failure, replacing nothing): the core recognises its pods by their
  labels and resumes its Create (``steps.revisions.unrecorded_create``), so a gang's first
  status waits like any other progress. Before that rule a gang whose Create was not
  written saw its own pods as strays and restarted them (41 writes instead of 13 for two
  gangs in the simulator).

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
from omenative_core.steps.scale import fresh_scale_up

__all__ = ["STATUS_COALESCE_SECONDS", "StatusCoalescer", "adds_rows", "status_may_wait"]

STATUS_COALESCE_SECONDS = 10.0
"""How long a progress-only status may wait for the next one (``--status-coalesce``)."""

_NOT_DESTROYING = (UpdateStatus, CreatePod, CreatePodGroup, CreateRevision, CreateObject)


def _harmless(action: Action) -> bool:
    """True for an action that destroys nothing and takes nobody out of rotation."""
    if isinstance(action, _NOT_DESTROYING):
        return True
    if isinstance(action, SetFinalizer):
        return action.present
    return isinstance(action, SetServingGate) and action.value


def _readiness(s: InferenceReplicaStatus) -> tuple[object, ...]:
    true = frozenset(c.type for c in s.conditions if c.status == "True")
    return (s.ready_replicas, s.available_replicas, s.serving_replicas,
            s.updated_ready_replicas, true - {"Progressing"})


def _memory(s: InferenceReplicaStatus) -> tuple[object, ...]:
    return (s.retry_blocks, s.migrations, s.rollout_hold, s.traffic,
            s.coordination_group_ref, s.collision_count)


def _instance_memory(i: InstanceStatus) -> tuple[object, ...]:
    op = i.operation
    return (i.index, i.incarnation, i.last_failure,
            (op.id, str(op.type), op.retry_count) if op is not None else None)


def status_may_wait(observed: InferenceReplicaStatus | None, new: InferenceReplicaStatus,
                    actions: Iterable[Action]) -> bool:
    """True when the status write of a plan with ``actions`` only reports progress."""
    if not all(_harmless(a) for a in actions):
        return False
    old = observed if observed is not None else InferenceReplicaStatus()
    if _readiness(old) != _readiness(new) or _memory(old) != _memory(new):
        return False
    kept = {i.index: i for i in new.instances}
    for row in old.instances:
        now = kept.pop(row.index, None)
        if now is None or _instance_memory(now) != _instance_memory(row):
            return False
    return all(fresh_scale_up(i) for i in kept.values())


def adds_rows(observed: InferenceReplicaStatus | None, new: InferenceReplicaStatus) -> bool:
    """Whether ``new`` has Instance rows the stored status lacks (a scale-up): such a
    status is never held when the pass leaves some of those rows' pods for the next."""
    have = {i.index for i in observed.instances} if observed is not None else set()
    return any(i.index not in have for i in new.instances)


@define
class StatusCoalescer:
    """Which keys owe a status write, since when; ``window <= 0`` turns waiting off."""

    window: float = STATUS_COALESCE_SECONDS
    clock: Callable[[], float] = time.monotonic
    _owed: dict[str, float] = field(factory=dict)

    def defer(self, key: str, observed: InferenceReplicaStatus | None,
              new: InferenceReplicaStatus, actions: Iterable[Action]) -> float | None:
        """Seconds the status of ``key`` may still wait, or None: write it now."""
        if self.window <= 0 or not status_may_wait(observed, new, actions):
            return None
        now = self.clock()
        since = self._owed.setdefault(key, now)
        left = since + self.window - now
        return left if left > 0 else None

    def settled(self, key: str) -> None:
        """``key`` owes nothing: its status was written or equals the one planned."""
        self._owed.pop(key, None)

    def owed(self) -> int:
        """Keys with a status waiting."""
        return len(self._owed)
