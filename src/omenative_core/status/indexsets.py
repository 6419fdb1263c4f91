"""Index sets: the canonical ``"0-8,10-114,116"`` strings of ColumnarV2 status columns.

OME accepts only the canonical form, so we do too: ascending, disjoint, non-adjacent terms,
each ``n`` or ``first-last`` with ``first < last``, no leading zeros, whitespace, signs, empty
terms or trailing comma. Exactly one string stands for each non-empty set, which keeps status
writes byte-stable (no spurious updates) and makes a hand-edited or corrupt value an error
rather than a silent reinterpretation.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

__all__ = [
    "INT32_MAX",
    "IndexSetError",
    "format_index_set",
    "index_set_size",
    "parse_index_ranges",
    "parse_index_set",
]

_NUM = r"(?:0|[1-9][0-9]*)"
_TERM = rf"{_NUM}(?:-{_NUM})?"
_SET_RE = re.compile(rf"{_TERM}(?:,{_TERM})*")
_DIGITS_RE = re.compile(r"[0-9]+")

INT32_MAX = 2**31 - 1
"""The largest Instance index: OME's indexes are int32."""


class IndexSetError(ValueError):
    """An index set string that is not canonical; the message names the term and why.

    ``reason`` is OME's classification: ``range_syntax`` (not the grammar),
    ``range_order`` (a term not above the previous one, or ``first-last`` with
    first >= last), ``canonical_order`` (adjacent terms not merged), ``range_overflow``
    (an index beyond int32) or ``cardinality_limit`` (more members than allowed).
    """

    def __init__(self, message: str, *, reason: str = "range_syntax") -> None:
        super().__init__(message)
        self.reason = reason


def format_index_set(members: Iterable[int]) -> str:
    """Format indexes canonically: ascending, runs of two or more as ``first-last``.

    Duplicates are merged. The empty set formats as ``""``, which is not a valid index set
    on the wire (OME requires at least one term): writers omit empty sets instead.
    """
    values = sorted(set(members))
    if not values:
        return ""
    if values[0] < 0:
        raise IndexSetError(
            f"cannot format negative index {values[0]}: indexes are >= 0", reason="value_domain"
        )
    if values[-1] > INT32_MAX:
        raise IndexSetError(
            f"cannot format index {values[-1]}: indexes are at most {INT32_MAX} (int32)",
            reason="range_overflow",
        )
    parts: list[str] = []
    start = prev = values[0]
    for value in values[1:]:
        if value == prev + 1:
            prev = value
            continue
        parts.append(str(start) if start == prev else f"{start}-{prev}")
        start = prev = value
    parts.append(str(start) if start == prev else f"{start}-{prev}")
    return ",".join(parts)


def _show(text: str) -> str:
    return repr(text) if len(text) <= 60 else repr(text[:57] + "...")


def _term_problem(term: str) -> str | None:
    """What is wrong with one non-empty term's syntax, or None when it is well formed."""
    if any(ch.isspace() for ch in term):
        return "contains whitespace"
    if term[0] in "+-":
        return "has a sign; indexes are unsigned integers"
    bounds = term.split("-")
    if len(bounds) > 2 or bounds[-1] == "":
        return "is not 'n' or 'first-last'"
    for bound in bounds:
        if not _DIGITS_RE.fullmatch(bound):
            return "is not a decimal number"
        if len(bound) > 1 and bound[0] == "0":
            return "has a leading zero"
    return None


def _diagnose(text: str) -> IndexSetError:
    """Explain why ``text`` fails the canonical syntax (called only once it has failed)."""
    prefix = f"invalid index set {_show(text)}"
    if text == "":
        return IndexSetError(f"{prefix}: empty; an index set needs at least one term")
    terms = text.split(",")
    for pos, term in enumerate(terms):
        if term == "":
            where = "trailing comma" if pos == len(terms) - 1 else f"empty term at position {pos}"
            return IndexSetError(f"{prefix}: {where}")
        problem = _term_problem(term)
        if problem is not None:
            return IndexSetError(f"{prefix}: term {term!r} {problem}")
    return IndexSetError(f"{prefix}: not in canonical form")  # pragma: no cover - defensive


def _term_bounds(text: str, term: str) -> tuple[int, int]:
    """``(first, last)`` of one syntactically valid term, checking int32 and first < last."""
    first_text, sep, last_text = term.partition("-")
    first = int(first_text)
    last = int(last_text) if sep else first
    if max(first, last) > INT32_MAX:
        raise IndexSetError(
            f"invalid index set {_show(text)}: term {term!r} exceeds the largest index "
            f"{INT32_MAX} (int32)",
            reason="range_overflow",
        )
    if sep and first >= last:
        raise IndexSetError(
            f"invalid index set {_show(text)}: range {term!r} needs first < last"
            + (f" (write {first_text!r})" if first == last else ""),
            reason="range_order",
        )
    return first, last


def parse_index_ranges(text: object) -> tuple[tuple[int, int], ...]:
    """Parse a canonical index set into ``(first, last)`` ranges without expanding them.

    Readers use this to bound the size of a set (``index_set_size``) before materialising
    it, so a value such as ``"0-999999999"`` is rejected cheaply.
    """
    if not isinstance(text, str):
        raise IndexSetError(f"invalid index set {text!r}: expected a string")
    if _SET_RE.fullmatch(text) is None:
        raise _diagnose(text)
    ranges: list[tuple[int, int]] = []
    prev_first = prev_last = -2
    prev_term = ""
    for term in text.split(","):
        first, last = _term_bounds(text, term)
        if first <= prev_last:
            why = "overlaps" if first >= prev_first else "is below"
            raise IndexSetError(
                f"invalid index set {_show(text)}: term {term!r} {why} the previous term "
                f"{prev_term!r}; terms must be ascending and disjoint",
                reason="range_order",
            )
        if first == prev_last + 1:
            raise IndexSetError(
                f"invalid index set {_show(text)}: term {term!r} is adjacent to the previous "
                f"term {prev_term!r}; adjacent terms must be merged as '{prev_first}-{last}'",
                reason="canonical_order",
            )
        ranges.append((first, last))
        prev_first, prev_last, prev_term = first, last, term
    return tuple(ranges)


def index_set_size(ranges: Iterable[tuple[int, int]]) -> int:
    """Number of members of parsed ranges."""
    return sum(last - first + 1 for first, last in ranges)


def parse_index_set(text: object, *, max_members: int = 1_000_000) -> tuple[int, ...]:
    """Parse a canonical index set (``"0-8,10"``) strictly into its ascending members.

    A set larger than ``max_members`` is refused before it is expanded, so a value such as
    ``"0-99999999999"`` is an ``IndexSetError``, not a MemoryError.
    """
    ranges = parse_index_ranges(text)
    size = index_set_size(ranges)
    if size > max_members:
        raise IndexSetError(
            f"invalid index set {_show(str(text))}: {size} members, more than {max_members}",
            reason="cardinality_limit",
        )
    out: list[int] = []
    for first, last in ranges:
        if first == last:
            out.append(first)
        else:
            out.extend(range(first, last + 1))
    return tuple(out)
