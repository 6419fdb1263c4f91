"""ColumnarV2: Instance rows as columns of index sets, as OME writes large statuses.

A fleet of identical Instances costs a few index sets instead of one object per row:
``members`` lists every index, ``phases`` maps each phase to the indexes in it, and so on;
only the rare per-Instance records (conditions, operation, last failure, ...) stay as
``entries``. The decoder is strict, because a status that is silently misread would make the
planner act on Instances that do not exist or forget ones that do:

* ``members`` is bounded by ``maxDecodedInstances`` before anything is expanded
  (``reason="cardinality_limit"``);
* every index set is canonical (``reason="range_syntax"``);
* every member is in exactly one phase group; group and entry indexes are members, groups of
  a column are disjoint, entries are ascending with at most one per member, ``rowOrder`` is
  a permutation of the members (``reason="coverage"``);
* JSON types and the value rules hold: revision values non-empty, incarnations != 0, pod
  counts >= 1, groups sorted (bytewise for strings, numerically for numbers) with no repeated
  value, entries with at least one record (``reason="schema"``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from itertools import pairwise
from typing import Any, Final

from attrs import frozen

from omenative_core.codec import CodecError, converter, from_json
from omenative_core.model.status import (
    Condition,
    InstanceOperation,
    InstanceStatus,
    InstanceTermination,
)
from omenative_core.status.indexsets import (
    IndexSetError,
    format_index_set,
    index_set_size,
    parse_index_ranges,
)

__all__ = [
    "DECODE_REASONS",
    "ColumnarDecodeError",
    "ColumnarEncodeError",
    "decode_columns",
    "encode_columns",
]

DECODE_REASONS: Final = ("cardinality_limit", "coverage", "range_syntax", "schema")
"""The ``reason`` values of ``ColumnarDecodeError`` (the first three are OME's)."""

_PATH = "instanceStatusColumns"


class ColumnarDecodeError(CodecError):
    """ColumnarV2 columns that cannot be decoded; ``reason`` is one of ``DECODE_REASONS``."""

    def __init__(self, message: str, *, reason: str, path: str = "") -> None:
        super().__init__(message, path=path)
        self.reason = reason


class ColumnarEncodeError(ValueError):
    """Rows the columns cannot represent (writers fall back to DenseV1)."""


@frozen(kw_only=True)
class _Entry:
    """The per-Instance records that do not fit a column."""

    index: int
    conditions: tuple[Condition, ...] = ()
    ready_since: datetime | None = None
    operation: InstanceOperation | None = None
    last_failure: InstanceTermination | None = None
    announced: tuple[str, ...] = ()


def _bytes_key(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass")


# --------------------------------------------------------------------------------------------
# encode


def _groups(pairs: dict[Any, list[int]], sort_key: Callable[[Any], Any]) -> list[dict[str, Any]]:
    return [
        {"value": value, "indexes": format_index_set(indexes)}
        for value, indexes in sorted(pairs.items(), key=lambda kv: sort_key(kv[0]))
    ]


def encode_columns(rows: Sequence[InstanceStatus]) -> dict[str, Any]:
    """Encode Instance rows as ``instanceStatusColumns`` JSON (the inverse of ``decode_columns``).

    Raises ``ColumnarEncodeError`` for rows the columns cannot hold: none at all, a repeated
    or negative index, a negative pod count, or an activeOrdinal other than 0 or 1.
    """
    if not rows:
        raise ColumnarEncodeError("no rows: an empty status is written without columns")
    indexes = [row.index for row in rows]
    if len(set(indexes)) != len(indexes):
        raise ColumnarEncodeError("rows repeat an index")
    phases: dict[str, list[int]] = {}
    running: dict[str, list[int]] = {}
    target: dict[str, list[int]] = {}
    incarnations: dict[int, list[int]] = {}
    pods: dict[int, list[int]] = {}
    serving: dict[int, list[int]] = {}
    available: dict[int, list[int]] = {}
    admitted: list[int] = []
    ordinal_one: list[int] = []
    entries: list[tuple[int, _Entry]] = []
    for row in rows:
        i = row.index
        if i < 0:
            raise ColumnarEncodeError(f"index {i} is negative")
        phases.setdefault(row.phase, []).append(i)
        if row.running_revision:
            running.setdefault(row.running_revision, []).append(i)
        if row.target_revision:
            target.setdefault(row.target_revision, []).append(i)
        if row.incarnation:
            incarnations.setdefault(row.incarnation, []).append(i)
        for value, column in (
            (row.pod_count, pods),
            (row.serving_pod_count, serving),
            (row.available_pod_count, available),
        ):
            if value < 0:
                raise ColumnarEncodeError(f"Instance {i}: negative pod count {value}")
            if value:
                column.setdefault(value, []).append(i)
        if row.admitted:
            admitted.append(i)
        if row.active_ordinal == 1:
            ordinal_one.append(i)
        elif row.active_ordinal != 0:
            raise ColumnarEncodeError(f"Instance {i}: activeOrdinal {row.active_ordinal}")
        if (
            row.conditions
            or row.ready_since is not None
            or row.operation is not None
            or row.last_failure is not None
            or row.announced
        ):
            entries.append(
                (
                    i,
                    _Entry(
                        index=i,
                        conditions=row.conditions,
                        ready_since=row.ready_since,
                        operation=row.operation,
                        last_failure=row.last_failure,
                        announced=row.announced,
                    ),
                )
            )
    ascending = all(a < b for a, b in pairwise(indexes))
    out: dict[str, Any] = {"members": format_index_set(indexes)}
    if not ascending:
        out["rowOrder"] = indexes
    out["phases"] = _groups(phases, _bytes_key)
    for key, str_column in (("runningRevisions", running), ("targetRevisions", target)):
        if str_column:
            out[key] = _groups(str_column, _bytes_key)
    for key, int_column in (
        ("incarnations", incarnations),
        ("podCounts", pods),
        ("servingPodCounts", serving),
        ("availablePodCounts", available),
    ):
        if int_column:
            out[key] = _groups(int_column, int)
    if admitted:
        out["admitted"] = format_index_set(admitted)
    if ordinal_one:
        out["activeOrdinalOne"] = format_index_set(ordinal_one)
    if entries:
        entries.sort(key=lambda pair: pair[0])
        hook = converter.get_unstructure_hook(_Entry)
        out["entries"] = [hook(entry) for _, entry in entries]
    return out


# --------------------------------------------------------------------------------------------
# decode


class _Decoder:
    """One decode: the members, their slots, and error helpers carrying the path."""

    def __init__(self, columns: Mapping[str, Any], path: str, max_decoded: int) -> None:
        self.columns = columns
        self.path = path
        raw = columns.get("members")
        if raw is None:
            raise self.error("schema", "members", "required field missing")
        ranges = self.ranges(raw, "members")
        count = index_set_size(ranges)
        if count > max_decoded:
            raise self.error(
                "cardinality_limit",
                "members",
                f"{count} Instances exceed maxDecodedInstances ({max_decoded})",
            )
        members: list[int] = []
        for first, last in ranges:
            members.extend(range(first, last + 1))
        self.members = members
        self.slot = {index: s for s, index in enumerate(members)}

    def error(self, reason: str, where: str, what: str) -> ColumnarDecodeError:
        path = f"{self.path}.{where}" if where else self.path
        return ColumnarDecodeError(f"{path}: {what}", reason=reason, path=path)

    def ranges(self, raw: object, where: str) -> tuple[tuple[int, int], ...]:
        if not isinstance(raw, str):
            raise self.error("schema", where, f"expected an index set string, got {raw!r}")
        try:
            return parse_index_ranges(raw)
        except IndexSetError as exc:
            raise self.error("range_syntax", where, str(exc)) from None

    def blocks(self, raw: object, where: str) -> list[tuple[int, int]]:
        """An index set as blocks of member slots ``(first, last)``, checking membership.

        Members are strictly ascending, so a range ``a-b`` lies wholly inside the members
        exactly when ``slot[b] - slot[a] == b - a``: one check per range, not per index.
        """
        ranges = self.ranges(raw, where)
        n = len(self.members)
        if index_set_size(ranges) > n:
            raise self.error("coverage", where, f"has more indexes than the {n} members")
        slot = self.slot
        out: list[tuple[int, int]] = []
        for first, last in ranges:
            s0 = slot.get(first)
            s1 = slot.get(last)
            if s0 is None or s1 is None or s1 - s0 != last - first:
                missing = next(i for i in range(first, last + 1) if i not in slot)
                raise self.error("coverage", where, f"index {missing} is not a member")
            out.append((s0, s1))
        return out

    def column(
        self,
        key: str,
        check: Callable[[object], str | None],
        sort_key: Callable[[Any], Any],
        default: Any,
    ) -> list[Any]:
        """Decode a grouped column into a value per slot (``default`` where no group has it).

        The value rules guarantee that no group holds ``default``, so a slot already holding
        something else was claimed by an earlier group: the groups are not disjoint.
        """
        values: list[Any] = [default] * len(self.members)
        raw = self.columns.get(key)
        if raw is None:
            return values
        if not isinstance(raw, list):
            raise self.error("schema", key, f"expected a list of groups, got {raw!r}")
        prev: Any = None
        for g, group in enumerate(raw):
            where = f"{key}[{g}]"
            if not isinstance(group, Mapping):
                raise self.error("schema", where, f"expected an object, got {group!r}")
            if "value" not in group:
                raise self.error("schema", f"{where}.value", "required field missing")
            value = group["value"]
            problem = check(value)
            if problem is not None:
                raise self.error("schema", f"{where}.value", problem)
            order = sort_key(value)
            if prev is not None and order <= prev:
                raise self.error(
                    "schema",
                    f"{where}.value",
                    f"{value!r} is out of order: groups must be sorted by value without repeats",
                )
            prev = order
            if "indexes" not in group:
                raise self.error("schema", f"{where}.indexes", "required field missing")
            for s0, s1 in self.blocks(group["indexes"], f"{where}.indexes"):
                size = s1 - s0 + 1
                segment = values[s0 : s1 + 1]
                if segment.count(default) != size:
                    k = next(k for k, v in enumerate(segment) if v != default)
                    raise self.error(
                        "coverage",
                        f"{where}.indexes",
                        f"index {self.members[s0 + k]} is already in the group with value "
                        f"{segment[k]!r}",
                    )
                values[s0 : s1 + 1] = [value] * size
        return values

    def flags(self, key: str, on: Any, off: Any) -> list[Any]:
        """An index-set column as ``on`` for its members and ``off`` for the rest."""
        flags: list[Any] = [off] * len(self.members)
        raw = self.columns.get(key)
        if raw is None:
            return flags
        for s0, s1 in self.blocks(raw, key):
            flags[s0 : s1 + 1] = [on] * (s1 - s0 + 1)
        return flags

    def row_order(self) -> list[int] | None:
        """The slots in ``rowOrder``, or None for ascending order."""
        raw = self.columns.get("rowOrder")
        if raw is None:
            return None
        if not isinstance(raw, list):
            raise self.error("schema", "rowOrder", f"expected a list of indexes, got {raw!r}")
        seen = [False] * len(self.members)
        order: list[int] = []
        for k, index in enumerate(raw):
            if not isinstance(index, int) or isinstance(index, bool):
                raise self.error("schema", f"rowOrder[{k}]", f"expected an integer, got {index!r}")
            s = self.slot.get(index)
            if s is None:
                raise self.error("coverage", f"rowOrder[{k}]", f"index {index} is not a member")
            if seen[s]:
                raise self.error("coverage", f"rowOrder[{k}]", f"index {index} appears twice")
            seen[s] = True
            order.append(s)
        if len(order) != len(self.members):
            missing = [self.members[s] for s, ok in enumerate(seen) if not ok][:5]
            raise self.error(
                "coverage", "rowOrder", f"is not a permutation of members: missing {missing}"
            )
        return order

    def entries(self) -> list[_Entry | None]:
        out: list[_Entry | None] = [None] * len(self.members)
        raw = self.columns.get("entries")
        if raw is None:
            return out
        if not isinstance(raw, list):
            raise self.error("schema", "entries", f"expected a list, got {raw!r}")
        prev = -1
        for k, item in enumerate(raw):
            where = f"entries[{k}]"
            try:
                entry = from_json(item, _Entry, path=f"{self.path}.{where}")
            except CodecError as exc:
                raise ColumnarDecodeError(str(exc), reason="schema", path=exc.path) from None
            s = self.slot.get(entry.index)
            if s is None:
                raise self.error(
                    "coverage", f"{where}.index", f"index {entry.index} is not a member"
                )
            if entry.index <= prev:
                raise self.error(
                    "coverage",
                    f"{where}.index",
                    f"index {entry.index} after {prev}: entries must be ascending, "
                    "at most one per member",
                )
            prev = entry.index
            if not (
                entry.conditions
                or entry.ready_since is not None
                or entry.operation is not None
                or entry.last_failure is not None
                or entry.announced
            ):
                raise self.error("schema", where, "an entry needs at least one record")
            out[s] = entry
        return out


def _check_str(value: object) -> str | None:
    return None if isinstance(value, str) else f"expected a string, got {value!r}"


def _check_revision(value: object) -> str | None:
    if not isinstance(value, str):
        return f"expected a string, got {value!r}"
    return None if value else "must not be empty (a member in no group has '')"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_incarnation(value: object) -> str | None:
    if not _is_int(value):
        return f"expected an integer, got {value!r}"
    return None if value != 0 else "must not be 0 (a member in no group has 0)"


def _check_count(value: object) -> str | None:
    if not _is_int(value):
        return f"expected an integer, got {value!r}"
    assert isinstance(value, int)
    return None if value >= 1 else f"must be >= 1 (a member in no group has 0), got {value}"


def decode_columns(
    columns: object, *, max_decoded: int = 20000, path: str = f"status.{_PATH}"
) -> tuple[InstanceStatus, ...]:
    """Decode ``instanceStatusColumns`` JSON into rows, strictly (see the module docstring).

    Rows come out ascending by index, or in ``rowOrder`` when it is given. Raises
    ``ColumnarDecodeError`` whose message names the path and whose ``reason`` is one of
    ``DECODE_REASONS``.
    """
    if not isinstance(columns, Mapping):
        raise ColumnarDecodeError(
            f"{path}: expected an object, got {columns!r}", reason="schema", path=path
        )
    dec = _Decoder(columns, path, max_decoded)
    members = dec.members
    n = len(members)
    phases = dec.column("phases", _check_str, _bytes_key, None)
    if None in phases:
        if columns.get("phases") is None:
            raise dec.error("schema", "phases", "required field missing")
        missing = [members[s] for s in range(n) if phases[s] is None][:5]
        raise dec.error("coverage", "phases", f"members in no phase group: {missing}")
    running = dec.column("runningRevisions", _check_revision, _bytes_key, "")
    target = dec.column("targetRevisions", _check_revision, _bytes_key, "")
    incarnations = dec.column("incarnations", _check_incarnation, int, 0)
    pods = dec.column("podCounts", _check_count, int, 0)
    serving = dec.column("servingPodCounts", _check_count, int, 0)
    available = dec.column("availablePodCounts", _check_count, int, 0)
    admitted = dec.flags("admitted", True, False)
    ordinal = dec.flags("activeOrdinalOne", 1, 0)
    entries = dec.entries()
    order = dec.row_order()

    rows: list[InstanceStatus] = []
    append = rows.append
    for index, inc, phase, run, tgt, pc, sc, ac, adm, ao, entry in zip(
        members,
        incarnations,
        phases,
        running,
        target,
        pods,
        serving,
        available,
        admitted,
        ordinal,
        entries,
        strict=True,
    ):
        if entry is None:
            append(
                InstanceStatus(
                    index=index,
                    incarnation=inc,
                    phase=phase,
                    running_revision=run,
                    target_revision=tgt,
                    pod_count=pc,
                    serving_pod_count=sc,
                    available_pod_count=ac,
                    admitted=adm,
                    active_ordinal=ao,
                )
            )
        else:
            append(
                InstanceStatus(
                    index=index,
                    incarnation=inc,
                    phase=phase,
                    running_revision=run,
                    target_revision=tgt,
                    pod_count=pc,
                    serving_pod_count=sc,
                    available_pod_count=ac,
                    admitted=adm,
                    active_ordinal=ao,
                    conditions=entry.conditions,
                    ready_since=entry.ready_since,
                    operation=entry.operation,
                    last_failure=entry.last_failure,
                    announced=entry.announced,
                )
            )
    if order is not None:
        rows = [rows[s] for s in order]
    return tuple(rows)
