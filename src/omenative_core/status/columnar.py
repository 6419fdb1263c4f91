"""ColumnarV2: Instance rows as columns of index sets, as OME writes large statuses.

A fleet of identical Instances costs a few index sets instead of one object per row:
``members`` lists every index, ``phases`` maps each phase to the indexes in it, and so on;
only the rare per-Instance records (conditions, operation, last failure, ...) stay as
``entries``. Columns come out in OME's struct order (members, rowOrder, phases,
runningRevisions, targetRevisions, incarnations, podCounts, servingPodCounts,
availablePodCounts, admitted, activeOrdinalOne, entries) with absent columns omitted.

The decoder is strict, because a status that is silently misread would make the planner
act on Instances that do not exist or forget ones that do. Every refusal carries one of
OME's nine reasons (``DECODE_REASONS``, described in docs/status-encoding.md), checked in
OME's order, and ``members`` is bounded by ``maxDecodedInstances`` before anything is
expanded. The encoder refuses (``ColumnarEncodeError``, so writers fall back to DenseV1)
any row the decoder would refuse to read back.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from itertools import pairwise
from typing import Any, Final

from attrs import evolve, frozen

from omenative_core.codec import CodecError, converter, from_json, show_value
from omenative_core.model.status import (
    PHASES,
    Condition,
    InstanceOperation,
    InstanceStatus,
    InstanceTermination,
)
from omenative_core.status.indexsets import (
    INT32_MAX,
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

DECODE_REASONS: Final = (
    "unknown_encoding",
    "representation_union",
    "range_syntax",
    "range_order",
    "range_overflow",
    "cardinality_limit",
    "coverage",
    "canonical_order",
    "value_domain",
)
"""OME's reasons for refusing a status encoding (the ``reason`` of ``ColumnarDecodeError``)."""

_PATH = "instanceStatusColumns"
_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_PHASE_SET = frozenset(PHASES)


class ColumnarDecodeError(CodecError):
    """A status encoding that cannot be read; ``reason`` is one of ``DECODE_REASONS``."""

    def __init__(self, message: str, *, reason: str, path: str = "") -> None:
        super().__init__(message, path=path)
        self.reason = reason


class ColumnarEncodeError(ValueError):
    """Rows the columns cannot represent (writers fall back to DenseV1)."""


@frozen(kw_only=True)
class _Entry:
    """The per-Instance records that do not fit a column (OME's InstanceStatusEntry)."""

    index: int
    conditions: tuple[Condition, ...] = ()
    ready_since: datetime | None = None
    operation: InstanceOperation | None = None
    last_failure: InstanceTermination | None = None
    announced: tuple[str, ...] = ()


def _has_records(row: InstanceStatus | _Entry) -> bool:
    return bool(
        row.conditions
        or row.ready_since is not None
        or row.operation is not None
        or row.last_failure is not None
        or row.announced
    )


def _bytes_key(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# --------------------------------------------------------------------------------------------
# value domains: None when the value may be grouped, else what is wrong with it


def _phase_domain(value: object) -> str | None:
    if value in _PHASE_SET and isinstance(value, str):
        return None
    return f"{show_value(value)} is not an Instance phase (one of {', '.join(PHASES)})"


def _revision_domain(value: object) -> str | None:
    if not isinstance(value, str):
        return f"expected a revision name, got {show_value(value)}"
    return None if value else "must not be empty (a member in no group has '')"


def _incarnation_domain(value: object) -> str | None:
    if not _is_int(value):
        return f"expected an integer, got {show_value(value)}"
    assert isinstance(value, int)
    if not _INT64_MIN <= value <= _INT64_MAX:
        return f"{value} is outside int64"
    return None if value != 0 else "must not be 0 (a member in no group has 0)"


def _count_domain(value: object) -> str | None:
    if not _is_int(value):
        return f"expected an integer, got {show_value(value)}"
    assert isinstance(value, int)
    if 1 <= value <= INT32_MAX:
        return None
    return f"must be between 1 and {INT32_MAX} (a member in no group has 0), got {value}"


# --------------------------------------------------------------------------------------------
# encode


def _groups(pairs: dict[Any, list[int]], sort_key: Callable[[Any], Any]) -> list[dict[str, Any]]:
    return [
        {"value": value, "indexes": format_index_set(indexes)}
        for value, indexes in sorted(pairs.items(), key=lambda kv: sort_key(kv[0]))
    ]


def _check_row(row: InstanceStatus) -> None:
    """Refuse a row the decoder would not read back (so the writer falls back to DenseV1)."""
    i = row.index
    if not 0 <= i <= INT32_MAX:
        raise ColumnarEncodeError(f"index {i} is outside 0..{INT32_MAX}")
    if _phase_domain(row.phase) is not None:
        raise ColumnarEncodeError(f"Instance {i}: phase {row.phase!r} is not an OME phase")
    if row.incarnation and _incarnation_domain(row.incarnation) is not None:
        raise ColumnarEncodeError(f"Instance {i}: incarnation {row.incarnation} is outside int64")
    for value in (row.pod_count, row.serving_pod_count, row.available_pod_count):
        if value and _count_domain(value) is not None:
            raise ColumnarEncodeError(f"Instance {i}: pod count {value} is outside 0..int32")
    if row.active_ordinal not in (0, 1):
        raise ColumnarEncodeError(f"Instance {i}: activeOrdinal {row.active_ordinal}")


_STR_COLUMNS: Final = (
    ("phases", "phase"),
    ("runningRevisions", "running_revision"),
    ("targetRevisions", "target_revision"),
)
_INT_COLUMNS: Final = (
    ("incarnations", "incarnation"),
    ("podCounts", "pod_count"),
    ("servingPodCounts", "serving_pod_count"),
    ("availablePodCounts", "available_pod_count"),
)


def _collect(rows: Sequence[InstanceStatus]) -> dict[str, dict[Any, list[int]]]:
    """Each grouped column as value -> indexes (the empty string and 0 are never grouped)."""
    columns: dict[str, dict[Any, list[int]]] = {
        key: {} for key, _ in (*_STR_COLUMNS, *_INT_COLUMNS)
    }
    for row in rows:
        _check_row(row)
        for key, attr in (*_STR_COLUMNS, *_INT_COLUMNS):
            value = getattr(row, attr)
            if value or key == "phases":
                columns[key].setdefault(value, []).append(row.index)
    return columns


def encode_columns(rows: Sequence[InstanceStatus]) -> dict[str, Any]:
    """Encode Instance rows as ``instanceStatusColumns`` JSON (the inverse of ``decode_columns``).

    Raises ``ColumnarEncodeError`` for rows the columns cannot hold: none at all, a repeated
    index, an index outside int32, a phase OME does not define, a pod count outside
    0..int32, or an activeOrdinal other than 0 or 1.
    """
    if not rows:
        raise ColumnarEncodeError("no rows: an empty status is written without columns")
    indexes = [row.index for row in rows]
    if len(set(indexes)) != len(indexes):
        raise ColumnarEncodeError("rows repeat an index")
    grouped = _collect(rows)
    out: dict[str, Any] = {"members": format_index_set(indexes)}
    if not all(a < b for a, b in pairwise(indexes)):
        out["rowOrder"] = indexes
    for key, _ in _STR_COLUMNS:
        if grouped[key]:
            out[key] = _groups(grouped[key], _bytes_key)
    for key, _ in _INT_COLUMNS:
        if grouped[key]:
            out[key] = _groups(grouped[key], int)
    admitted = [row.index for row in rows if row.admitted]
    if admitted:
        out["admitted"] = format_index_set(admitted)
    ordinal_one = [row.index for row in rows if row.active_ordinal == 1]
    if ordinal_one:
        out["activeOrdinalOne"] = format_index_set(ordinal_one)
    entries = sorted((row for row in rows if _has_records(row)), key=lambda row: row.index)
    if entries:
        hook = converter.get_unstructure_hook(_Entry)
        out["entries"] = [hook(_entry_of(row)) for row in entries]
    return out


def _entry_of(row: InstanceStatus) -> _Entry:
    return _Entry(
        index=row.index,
        conditions=row.conditions,
        ready_since=row.ready_since,
        operation=row.operation,
        last_failure=row.last_failure,
        announced=row.announced,
    )


# --------------------------------------------------------------------------------------------
# decode


@frozen
class _Column:
    """How one grouped column is read: its JSON key, value domain, order and default."""

    key: str
    domain: Callable[[object], str | None]
    sort_key: Callable[[Any], Any]
    default: Any
    required: bool = False


_PHASES_COLUMN = _Column("phases", _phase_domain, _bytes_key, None, required=True)
_OPTIONAL_COLUMNS: Final = (
    _Column("runningRevisions", _revision_domain, _bytes_key, ""),
    _Column("targetRevisions", _revision_domain, _bytes_key, ""),
    _Column("incarnations", _incarnation_domain, int, 0),
    _Column("podCounts", _count_domain, int, 0),
    _Column("servingPodCounts", _count_domain, int, 0),
    _Column("availablePodCounts", _count_domain, int, 0),
)


class _Decoder:
    """One decode: the members, their slots, and error helpers carrying the path."""

    def __init__(self, columns: Mapping[str, Any], path: str, max_decoded: int) -> None:
        self.columns = columns
        self.path = path
        if max_decoded < 1:
            raise self.error(
                "cardinality_limit", "", f"maxDecodedInstances must be >= 1, got {max_decoded}"
            )
        if "members" not in columns:
            raise self.error("range_syntax", "members", "required field missing")
        ranges = self.ranges(columns["members"], "members", max_decoded)
        members: list[int] = []
        for first, last in ranges:
            members.extend(range(first, last + 1))
        self.members = members
        self.slot = {index: s for s, index in enumerate(members)}

    def error(self, reason: str, where: str, what: str) -> ColumnarDecodeError:
        path = f"{self.path}.{where}" if where else self.path
        return ColumnarDecodeError(f"{path}: {what}", reason=reason, path=path)

    def ranges(self, raw: object, where: str, bound: int) -> tuple[tuple[int, int], ...]:
        """A canonical index set of at most ``bound`` members, as ranges."""
        if not isinstance(raw, str):
            raise self.error(
                "value_domain", where, f"expected an index set string, got {show_value(raw)}"
            )
        try:
            ranges = parse_index_ranges(raw)
        except IndexSetError as exc:
            raise self.error(exc.reason, where, str(exc)) from None
        count = index_set_size(ranges)
        if count > bound:
            limit = f"maxDecodedInstances ({bound})" if where == "members" else "the members"
            raise self.error("cardinality_limit", where, f"{count} Instances exceed {limit}")
        return ranges

    def blocks(self, raw: object, where: str) -> list[tuple[int, int]]:
        """An index set as blocks of member slots ``(first, last)``, checking membership.

        Members are strictly ascending, so a range ``a-b`` lies wholly inside the members
        exactly when ``slot[b] - slot[a] == b - a``: one check per range, not per index.
        """
        slot = self.slot
        out: list[tuple[int, int]] = []
        for first, last in self.ranges(raw, where, len(self.members)):
            s0 = slot.get(first)
            s1 = slot.get(last)
            if s0 is None or s1 is None or s1 - s0 != last - first:
                missing = next(i for i in range(first, last + 1) if i not in slot)
                raise self.error("coverage", where, f"index {missing} is not a member")
            out.append((s0, s1))
        return out

    def group_list(self, column: _Column) -> list[Any] | None:
        """The column's groups, checked as a list: None when absent and optional."""
        raw = self.columns.get(column.key)
        if raw is None:
            if column.required:
                raise self.error("coverage", column.key, "required field missing")
            return None
        if not isinstance(raw, list):
            raise self.error(
                "value_domain", column.key, f"expected a list of groups, got {show_value(raw)}"
            )
        if not raw:
            if column.required:
                raise self.error("coverage", column.key, "has no groups; every member needs one")
            raise self.error(
                "value_domain", column.key, "is an empty list; an absent column is written absent"
            )
        if len(raw) > len(self.members):
            raise self.error(
                "cardinality_limit",
                column.key,
                f"{len(raw)} groups for {len(self.members)} members",
            )
        return raw

    def group_value(self, column: _Column, group: object, where: str) -> tuple[Any, Any]:
        """A group's value and its sort key, checked against the column's domain."""
        if not isinstance(group, Mapping):
            raise self.error("value_domain", where, f"expected an object, got {show_value(group)}")
        if "value" not in group:
            raise self.error("value_domain", f"{where}.value", "required field missing")
        value = group["value"]
        problem = column.domain(value)
        if problem is not None:
            raise self.error("value_domain", f"{where}.value", problem)
        if "indexes" not in group:
            raise self.error("range_syntax", f"{where}.indexes", "required field missing")
        return value, column.sort_key(value)

    def fill(self, values: list[Any], column: _Column, value: Any, raw: object, where: str) -> None:
        """Give ``value`` to the slots of ``raw``; a slot already holding one is an overlap.

        The value domains guarantee that no group holds the default, so a slot that does not
        hold it was claimed by an earlier group: the groups are not disjoint.
        """
        default = column.default
        for s0, s1 in self.blocks(raw, where):
            size = s1 - s0 + 1
            segment = values[s0 : s1 + 1]
            if segment.count(default) != size:
                k = next(k for k, v in enumerate(segment) if v != default)
                raise self.error(
                    "coverage",
                    where,
                    f"index {self.members[s0 + k]} is already in the group with value "
                    f"{segment[k]!r}",
                )
            values[s0 : s1 + 1] = [value] * size

    def column(self, column: _Column) -> list[Any]:
        """Decode a grouped column into a value per slot (its default where no group has it)."""
        values: list[Any] = [column.default] * len(self.members)
        groups = self.group_list(column)
        if groups is None:
            return values
        prev: Any = None
        for g, group in enumerate(groups):
            where = f"{column.key}[{g}]"
            value, order = self.group_value(column, group, where)
            if prev is not None and order <= prev:
                raise self.error(
                    "canonical_order",
                    f"{where}.value",
                    f"{show_value(value)} is out of order: groups must be sorted by value "
                    "without repeats",
                )
            prev = order
            self.fill(values, column, value, group["indexes"], f"{where}.indexes")
        if column.required and column.default in values:
            missing = [self.members[s] for s, v in enumerate(values) if v is None][:5]
            raise self.error("coverage", column.key, f"members in no phase group: {missing}")
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

    def index_slot(self, index: object, where: str) -> int:
        """The slot of a member index written as a JSON integer."""
        if not _is_int(index):
            raise self.error("value_domain", where, f"expected an integer, got {show_value(index)}")
        assert isinstance(index, int)
        if index > INT32_MAX:
            raise self.error(
                "range_overflow", where, f"index {index} exceeds the largest index {INT32_MAX}"
            )
        s = self.slot.get(index)
        if s is None:
            raise self.error("coverage", where, f"index {index} is not a member")
        return s

    def row_order(self) -> list[int] | None:
        """The slots in ``rowOrder``, or None for ascending order."""
        raw = self.columns.get("rowOrder")
        if raw is None:
            return None
        if not isinstance(raw, list) or not raw:
            raise self.error(
                "value_domain",
                "rowOrder",
                f"expected a non-empty list of indexes, got {show_value(raw)}; "
                "ascending order is written by leaving rowOrder out",
            )
        if len(raw) != len(self.members):
            raise self.error(
                "coverage",
                "rowOrder",
                f"has {len(raw)} indexes for {len(self.members)} members; it must list "
                "every member once",
            )
        seen = [False] * len(self.members)
        for k, index in enumerate(raw):
            s = self.index_slot(index, f"rowOrder[{k}]")
            if seen[s]:
                raise self.error("coverage", f"rowOrder[{k}]", f"index {index} appears twice")
            seen[s] = True
        if all(a < b for a, b in pairwise(raw)):
            raise self.error(
                "canonical_order",
                "rowOrder",
                "is ascending order, which is written by leaving rowOrder out",
            )
        return [self.slot[index] for index in raw]

    def entry(self, item: object, where: str) -> _Entry:
        """One entry, type-checked; its index is checked by the caller."""
        if isinstance(item, Mapping) and "index" in item:
            self.index_slot(item["index"], f"{where}.index")
        try:
            return from_json(item, _Entry, path=f"{self.path}.{where}")
        except CodecError as exc:
            raise ColumnarDecodeError(str(exc), reason="value_domain", path=exc.path) from None

    def entries(self) -> list[_Entry | None]:
        """The entries by slot: ascending, one per member at most, each with a record."""
        out: list[_Entry | None] = [None] * len(self.members)
        raw = self.columns.get("entries")
        if raw is None:
            return out
        if not isinstance(raw, list) or not raw:
            raise self.error(
                "value_domain",
                "entries",
                f"expected a non-empty list, got {show_value(raw)}; no entries are written "
                "by leaving entries out",
            )
        if len(raw) > len(self.members):
            raise self.error(
                "cardinality_limit",
                "entries",
                f"{len(raw)} entries for {len(self.members)} members",
            )
        prev = -1
        for k, item in enumerate(raw):
            where = f"entries[{k}]"
            entry = self.entry(item, where)
            if entry.index == prev:
                raise self.error(
                    "coverage", f"{where}.index", f"index {entry.index} has a second entry"
                )
            if entry.index < prev:
                raise self.error(
                    "canonical_order",
                    f"{where}.index",
                    f"index {entry.index} after {prev}: entries must be ascending",
                )
            prev = entry.index
            if not _has_records(entry):
                raise self.error("coverage", where, "an entry needs at least one record")
            out[self.slot[entry.index]] = entry
        return out


def _row(fields: tuple[Any, ...], entry: _Entry | None) -> InstanceStatus:
    index, phase, run, tgt, inc, pc, sc, ac, adm, ao = fields
    row = InstanceStatus(
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
    if entry is None:
        return row
    return evolve(
        row,
        conditions=entry.conditions,
        ready_since=entry.ready_since,
        operation=entry.operation,
        last_failure=entry.last_failure,
        announced=entry.announced,
    )


def decode_columns(
    columns: object, *, max_decoded: int = 20000, path: str = f"status.{_PATH}"
) -> tuple[InstanceStatus, ...]:
    """Decode ``instanceStatusColumns`` JSON into rows, strictly (see the module docstring).

    Rows come out ascending by index, or in ``rowOrder`` when it is given. Raises
    ``ColumnarDecodeError`` whose message names the path and the rule, and whose ``reason``
    is one of ``DECODE_REASONS``.
    """
    if not isinstance(columns, Mapping):
        raise ColumnarDecodeError(
            f"{path}: expected an object, got {show_value(columns)}",
            reason="representation_union",
            path=path,
        )
    dec = _Decoder(columns, path, max_decoded)
    grouped = [dec.column(_PHASES_COLUMN), *(dec.column(c) for c in _OPTIONAL_COLUMNS)]
    admitted = dec.flags("admitted", True, False)
    ordinal = dec.flags("activeOrdinalOne", 1, 0)
    entries = dec.entries()
    order = dec.row_order()
    rows = [
        _row(fields, entry)
        for fields, entry in zip(
            zip(dec.members, *grouped, admitted, ordinal, strict=True), entries, strict=True
        )
    ]
    if order is not None:
        rows = [rows[s] for s in order]
    return tuple(rows)
