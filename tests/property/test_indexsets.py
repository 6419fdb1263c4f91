"""Index sets: one canonical string per set, and every other spelling refused with a reason.

OME rejects non-canonical index sets, so a status we write must always be canonical, and a
corrupt or hand-edited one must fail loudly (naming the bad term) instead of being misread.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from omenative_core.status import (
    IndexSetError,
    format_index_set,
    index_set_size,
    parse_index_ranges,
    parse_index_set,
)

members = st.one_of(
    st.sets(st.integers(0, 60), min_size=1),  # dense: many runs and adjacencies
    st.sets(st.integers(0, 2**31 - 1), min_size=1, max_size=20),  # sparse and large
)


@given(members)
def test_format_then_parse_gives_the_set_back(indexes: set[int]) -> None:
    text = format_index_set(indexes)
    assert parse_index_set(text) == tuple(sorted(indexes))
    assert index_set_size(parse_index_ranges(text)) == len(indexes)


@given(members)
def test_format_ignores_order_and_duplicates(indexes: set[int]) -> None:
    as_list = sorted(indexes, reverse=True) * 2
    assert format_index_set(as_list) == format_index_set(indexes)


_NUM = r"(0|[1-9][0-9]{0,2})"
_syntax_like = st.one_of(
    st.text(alphabet="0123456789,- ", max_size=16),
    # well-formed terms, in any order: most fail the ascending / adjacency rules
    st.from_regex(rf"{_NUM}(-{_NUM})?(,{_NUM}(-{_NUM})?){{0,4}}", fullmatch=True),
)


@given(_syntax_like)
def test_accepted_strings_are_canonical_and_the_rest_raise_index_set_error(text: str) -> None:
    try:
        parsed = parse_index_set(text)
    except IndexSetError as exc:
        assert str(exc).startswith("invalid index set ")
        return
    assert format_index_set(parsed) == text


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("01", "term '01' has a leading zero"),
        ("1-01", "term '1-01' has a leading zero"),
        ("1,1", "term '1' overlaps the previous term '1'"),
        ("1-5,3", "term '3' overlaps the previous term '1-5'"),
        ("1-1", "range '1-1' needs first < last (write '1')"),
        ("3-2", "range '3-2' needs first < last"),
        ("3,1", "term '1' is below the previous term '3'; terms must be ascending"),
        ("1,2", "term '2' is adjacent to the previous term '1'; adjacent terms must be merged"),
        ("1,2", "merged as '1-2'"),
        ("1-2,3", "merged as '1-3'"),
        ("0-2,3-4", "merged as '0-4'"),
        (" 1", "term ' 1' contains whitespace"),
        ("1, 2", "term ' 2' contains whitespace"),
        ("1,", "trailing comma"),
        ("1,,2", "empty term at position 1"),
        (",1", "empty term at position 0"),
        ("", "empty; an index set needs at least one term"),
        ("-1", "term '-1' has a sign"),
        ("+1", "term '+1' has a sign"),
        ("1-", "term '1-' is not 'n' or 'first-last'"),
        ("1-2-3", "term '1-2-3' is not 'n' or 'first-last'"),
        ("a", "term 'a' is not a decimal number"),
        ("\u0661", "is not a decimal number"),  # a non-ASCII digit
    ],
)
def test_non_canonical_strings_are_rejected_with_the_reason(text: str, why: str) -> None:
    with pytest.raises(IndexSetError) as info:
        parse_index_set(text)
    assert why in str(info.value)
    assert str(info.value).startswith(f"invalid index set {text!r}")


def test_non_strings_are_rejected() -> None:
    with pytest.raises(IndexSetError, match="expected a string"):
        parse_index_set(5)


def test_format_refuses_negative_indexes_and_writes_empty_as_empty_string() -> None:
    with pytest.raises(IndexSetError, match="negative index -1"):
        format_index_set([3, -1])
    assert format_index_set([]) == ""


def test_examples_from_ome() -> None:
    assert format_index_set([*range(9), *range(10, 115), 116]) == "0-8,10-114,116"
    assert parse_index_set("0-2,4") == (0, 1, 2, 4)


def test_size_is_known_without_expanding_a_huge_range() -> None:
    # the largest range OME's int32 indexes allow (issue 15: beyond int32 is range_overflow)
    ranges = parse_index_ranges("0-2147483647")
    assert index_set_size(ranges) == 2**31
    with pytest.raises(IndexSetError, match="2147483648 members, more than 1000000"):
        parse_index_set("0-2147483647")
    with pytest.raises(IndexSetError, match="3 members, more than 2"):
        parse_index_set("1-3", max_members=2)


def test_twenty_thousand_members_round_trip() -> None:
    """The worst case for 20,000 members: every other index, 20,000 single terms (how fast:
    ``benchmarks/bench_indexsets.py``)."""
    scattered = list(range(0, 40000, 2))
    text = format_index_set(scattered)
    assert text.count(",") == 19_999 and "-" not in text
    assert parse_index_set(text) == tuple(scattered)
    assert format_index_set(range(20000)) == "0-19999"
    assert parse_index_set("0-19999") == tuple(range(20000))
