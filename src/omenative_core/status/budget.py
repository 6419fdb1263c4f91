"""The operations budget: how many Instance operations may be open at once.

A status write is one request, and etcd refuses a request over 1.5 MiB (its default
``--max-request-bytes``), so an InferenceReplica whose status outgrows it cannot record
anything any more, exactly when a big fleet rolls out. ColumnarV2 keeps steady rows in a
few index sets; what grows is the ``entries``: one per Instance with an open operation, a
last failure or a ``readySince`` still inside its ``minReadySeconds`` window.

The planner therefore opens a new operation only while the worst the entries can become
stays within ``ENTRIES_CAPACITY``:

- ``STATUS_TARGET`` (1.25 MiB) is the status body allowed: the PUT also carries the
  metadata and spec, so 256 KiB of the request limit is left for them;
- ``STEADY_RESERVE`` (256 KiB, OME's own steady-state gate) is kept for the columns and
  the status's other fields; ``ENTRIES_CAPACITY`` is the rest, 1 MiB;
- each row is charged an upper bound of its entry plus what it can add to the columns by
  differing from its neighbours (``FRAGMENT_BYTES``); a row with an open operation is
  charged the worst its entry can become before the operation ends
  (``OPERATION_ROW_BYTES``: an operation at its longest, a last failure at its longest and
  a ``readySince``), so no move that does not open an operation makes the total grow.

Field lengths are Kubernetes' own bounds (names 253 bytes, 8 migration hints) and the
planner's (a last failure's message ``FAILURE_MESSAGE_MAX`` bytes, ``bounded_text``).
With no other entries that allows ``OPERATION_BOUND`` operations at once; a Migrate
(which carries its node hints) costs ``MIGRATE_ROW_BYTES``. What the model cannot bound
(columns fragmented beyond 256 KiB) the shell's size guard still catches before a write.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final

from attrs import define

from omenative_core.codec import CodecError, converter, from_json
from omenative_core.conditions import build_conditions
from omenative_core.model.status import (
    Condition,
    InstanceOperation,
    InstanceStatus,
    InstanceTermination,
)
from omenative_core.status.columnar import encode_columns
from omenative_core.status.indexsets import INT32_MAX
from omenative_core.status.wire import go_json_bytes

__all__ = [
    "ENTRIES_CAPACITY",
    "FAILURE_MESSAGE_MAX",
    "FAILURE_REASON_MAX",
    "FAILURE_ROW_BYTES",
    "FRAGMENT_BYTES",
    "MIGRATE_ROW_BYTES",
    "OPERATION_BOUND",
    "OPERATION_ROW_BYTES",
    "READY_SINCE_ROW_BYTES",
    "STATUS_REQUEST_LIMIT",
    "STATUS_SIZE_EXCEEDED",
    "STATUS_TARGET",
    "STEADY_RESERVE",
    "Budget",
    "bounded_text",
    "row_cost",
    "too_large_conditions",
    "too_large_patch",
]

STATUS_REQUEST_LIMIT: Final = 1536 * 1024
"""etcd's default request limit (``--max-request-bytes``): a bigger status write is refused."""

STATUS_TARGET: Final = 1280 * 1024
"""The status body allowed (1.25 MiB): the rest of the request is metadata and spec."""

STEADY_RESERVE: Final = 256 * 1024
"""Kept for the columns and the status's other fields (OME's steady-state gate)."""

ENTRIES_CAPACITY: Final = STATUS_TARGET - STEADY_RESERVE
"""What the rows' entries (and their share of the columns) may cost together: 1 MiB."""

FAILURE_MESSAGE_MAX: Final = 1024
"""A last failure's message is cut to this many bytes as written (Go's JSON escapes)."""

FAILURE_REASON_MAX: Final = 64
"""A last failure's reason (the kubelet's word, e.g. CrashLoopBackOff) is cut to this."""

_NAME_MAX = 253  # a Kubernetes object name (pod, node, ControllerRevision)
_LABEL_MAX = 63  # a container name
_WORD_MAX = 64  # reasons, strategies, steps: the planner's own words
_HINTS_MAX = 8  # migration hints, as admission caps them
_UUID = "0" * 36
_T = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
_INDEX_DIGITS = len(str(INT32_MAX))
_GROUPED_COLUMNS = 9  # phases, 2 revisions, incarnations, 3 pod counts, admitted, activeOrdinalOne

FRAGMENT_BYTES: Final = _GROUPED_COLUMNS * (2 * (2 * _INDEX_DIGITS + 2) + _INDEX_DIGITS + 1) + 48
"""What one row can add to the columns by differing from its neighbours in every column.

In each index-set column it can split a neighbour's range (``a-b`` becomes ``a-c,d-b``:
two more terms) and add its own term; 48 bytes more for a group of its own value (a new
incarnation). Revision groups are few (one per stored revision) and kept in the reserve.
"""


def bounded_text(text: str, limit: int = FAILURE_MESSAGE_MAX) -> str:
    """``text`` cut so that Go's JSON writes at most ``limit`` bytes of it (no quotes).

    Characters are never split, and escapes (``\\u003c``, ``\\n`` ...) count at their
    written length, so the bound holds for any text a container writes.
    """
    if len(text) * 6 <= limit:
        return text
    if len(go_json_bytes(text)) - 2 <= limit:
        return text
    lo, hi = 0, len(text)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if len(go_json_bytes(text[:mid])) - 2 <= limit:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def _worst_failure() -> InstanceTermination:
    return InstanceTermination(
        pod_name="p" * _NAME_MAX,
        container_name="c" * _LABEL_MAX,
        reason="r" * FAILURE_REASON_MAX,
        exit_code=-INT32_MAX - 1,
        message="m" * FAILURE_MESSAGE_MAX,
        time=_T,
    )


def _worst_operation(*, migrate: bool) -> InstanceOperation:
    revision = "v" * _NAME_MAX
    moves: dict[str, object] = {}
    if migrate:
        moves = {
            "from_node": "n" * _NAME_MAX,
            "hint_target_nodes": tuple("h" * _NAME_MAX for _ in range(_HINTS_MAX)),
            "request_uuid": _UUID,
        }
    return InstanceOperation(
        id="i" * (_WORD_MAX + _NAME_MAX + 24),
        type="Restart",
        step="s" * _WORD_MAX,
        started_at=_T,
        last_progress_at=_T,
        deadline=_T,
        retry_count=INT32_MAX,
        target_revision=revision,
        reason="r" * _WORD_MAX,
        waiting="w" * _WORD_MAX,
        capacity_refused_at=_T,
        strategy="s" * _WORD_MAX,
        surge_index=INT32_MAX,
        replaces=INT32_MAX,
        unschedulable_since=_T,
        **moves,  # type: ignore[arg-type]
    )


def _entry_bytes(row: InstanceStatus) -> int:
    """The row's entry as written in ``entries`` (with its separating comma)."""
    entries = encode_columns([row]).get("entries", [])
    return sum(len(go_json_bytes(e)) + 1 for e in entries)


@functools.cache
def _sizes() -> tuple[int, int, int, int]:
    """(readySince row, last-failure row, worst operation row, worst Migrate row) in bytes.

    Each is the row's entry at its longest (with a ``readySince`` and, but for the first,
    a last failure) plus ``FRAGMENT_BYTES``.
    """
    failure = _worst_failure()
    shapes: tuple[dict[str, Any], ...] = (
        {},
        {"last_failure": failure},
        {"last_failure": failure, "operation": _worst_operation(migrate=False)},
        {"last_failure": failure, "operation": _worst_operation(migrate=True)},
    )
    since, failed, op, migrate = (
        _entry_bytes(InstanceStatus(index=INT32_MAX, ready_since=_T, **parts))
        + FRAGMENT_BYTES
        for parts in shapes
    )
    return since, failed, op, migrate


READY_SINCE_ROW_BYTES: Final = _sizes()[0]
"""The charge for a Ready row still inside its ``minReadySeconds`` window."""

FAILURE_ROW_BYTES: Final = _sizes()[1]
"""The charge for a row with a last failure and no operation (message at its longest; a
recovered row keeps its last failure beside its ``readySince``)."""

OPERATION_ROW_BYTES: Final = _sizes()[2]
"""The charge for a row with an open operation (worst entry plus its column fragments)."""

MIGRATE_ROW_BYTES: Final = _sizes()[3]
"""The charge for a row with an open Migrate (or migration surge): it carries node hints."""

OPERATION_BOUND: Final = ENTRIES_CAPACITY // OPERATION_ROW_BYTES
"""Operations open at once when no other row has an entry (the bound documented)."""


def row_cost(row: InstanceStatus) -> int:
    """The bytes a row is charged: an upper bound of its entry and its column fragments."""
    op = row.operation
    if op is not None:
        migrating = op.request_uuid is not None or bool(op.hint_target_nodes) or op.from_node
        return MIGRATE_ROW_BYTES if migrating else OPERATION_ROW_BYTES
    if row.last_failure is not None:
        return FAILURE_ROW_BYTES
    if row.ready_since is not None:
        return READY_SINCE_ROW_BYTES
    return 0


@define
class Budget:
    """The operations gate of one pass: opens an operation only while the entries fit.

    ``used`` starts as the charge of the rows as they are; each admitted operation adds
    its worst case. ``deferred`` counts the operations refused, so the pass can say so.
    """

    used: int
    capacity: int = ENTRIES_CAPACITY
    deferred: int = 0

    @classmethod
    def of(cls, rows: Iterable[InstanceStatus], capacity: int = ENTRIES_CAPACITY) -> Budget:
        """The gate for rows as they stand."""
        return cls(used=sum(row_cost(r) for r in rows), capacity=capacity)

    @property
    def room(self) -> int:
        """How many more (non-Migrate) operations fit now."""
        return max(self.capacity - self.used, 0) // OPERATION_ROW_BYTES

    def admit(self, count: int = 1, *, migrate: bool = False) -> bool:
        """Charge ``count`` new operations if they fit; otherwise count them deferred."""
        cost = count * (MIGRATE_ROW_BYTES if migrate else OPERATION_ROW_BYTES)
        if self.used + cost > self.capacity:
            self.deferred += count
            return False
        self.used += cost
        return True

    def charge(self, count: int = 1) -> None:
        """Charge ``count`` operations that are open already (their pods exist) without
        refusing them: refusing cannot shrink what the status must record."""
        self.used += count * OPERATION_ROW_BYTES


STATUS_SIZE_EXCEEDED: Final = "StatusSizeExceeded"
"""The condition (and Event) saying a status was not written because it was too large."""


def too_large_conditions(
    previous: tuple[Condition, ...], size: int, limit: int, now: datetime, generation: int
) -> tuple[Condition, ...]:
    """The conditions to record when a status of ``size`` bytes cannot be sent.

    ``StatusSizeExceeded=True`` (reason ``StatusTooLarge``) joins the conditions the status
    already has; the next status that fits is written without it.
    """
    message = (
        f"the status was not written: it is {size} bytes, over the {limit}-byte request "
        "limit, so the Instance rows stored are those of the last write that fit"
    )
    wanted = {STATUS_SIZE_EXCEEDED: ("True", "StatusTooLarge", message)}
    return build_conditions(previous, wanted, now, generation, replace_all=False)


def too_large_patch(
    replica: Mapping[str, Any], size: int, limit: int, now: datetime
) -> dict[str, Any]:
    """A merge patch of the status subresource adding ``StatusSizeExceeded`` to ``replica``.

    It carries the replica's resourceVersion and only the conditions, so what is stored
    stays as it is apart from the condition that says why it no longer changes.
    """
    meta = replica.get("metadata") or {}
    stored = replica.get("status") or {}
    try:
        previous = tuple(from_json(c, Condition) for c in stored.get("conditions") or ())
    except CodecError:
        previous = ()
    generation = int(meta.get("generation") or 0)
    conditions = too_large_conditions(previous, size, limit, now, generation)
    return {
        "metadata": {"resourceVersion": meta.get("resourceVersion")},
        "status": {"conditions": [converter.unstructure(c) for c in conditions]},
    }
