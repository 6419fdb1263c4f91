"""OME's nine decode reasons: each bad status is refused under the reason OME gives it.

A refused status must name the field and the rule (the message) and OME's classification
(``reason``), never be half read: the planner would act on Instances that do not exist.
"""

from __future__ import annotations

from typing import Any

import pytest

from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus
from omenative_core.status import DECODE_REASONS, ColumnarDecodeError, encode_columns
from omenative_core.status.wire import status_from_json, status_to_json

BASE: dict[str, Any] = {
    "members": "0-4",
    "phases": [{"value": "Pending", "indexes": "0-1"}, {"value": "Ready", "indexes": "2-4"}],
}
SIX_GROUPS = [{"value": v, "indexes": str(v)} for v in range(1, 7)]


def _refusal(columns: dict[str, Any], **status: Any) -> ColumnarDecodeError:
    obj = {"instanceStatusEncoding": "ColumnarV2", "instanceStatusColumns": columns, **status}
    with pytest.raises(ColumnarDecodeError) as info:
        status_from_json(obj)
    return info.value


def test_the_reasons_are_omes_nine() -> None:
    assert set(DECODE_REASONS) == {
        "unknown_encoding",
        "representation_union",
        "range_syntax",
        "range_order",
        "range_overflow",
        "cardinality_limit",
        "coverage",
        "canonical_order",
        "value_domain",
    }


@pytest.mark.parametrize(
    ("change", "reason", "where"),
    [
        ({"phases": [{"value": "Sleeping", "indexes": "0-4"}]}, "value_domain", "phases[0].value"),
        ({"phases": [{"value": "", "indexes": "0-4"}]}, "value_domain", "phases[0].value"),
        ({"members": "0-2147483648"}, "range_overflow", "members"),
        ({"admitted": "2147483648"}, "range_overflow", "admitted"),
        ({"rowOrder": [4, 3, 2, 1, 2147483648]}, "range_overflow", "rowOrder[4]"),
        ({"entries": [{"index": 2147483648, "announced": ["a"]}]}, "range_overflow", "entries[0]"),
        ({"runningRevisions": []}, "value_domain", "runningRevisions"),
        ({"entries": []}, "value_domain", "entries"),
        ({"rowOrder": []}, "value_domain", "rowOrder"),
        ({"phases": []}, "coverage", "phases"),
        ({"rowOrder": [0, 1, 2, 3, 4]}, "canonical_order", "rowOrder"),
        ({"podCounts": SIX_GROUPS}, "cardinality_limit", "podCounts"),
        (
            {"entries": [{"index": i, "announced": ["a"]} for i in range(6)]},
            "cardinality_limit",
            "entries",
        ),
        ({"admitted": "0-5"}, "cardinality_limit", "admitted"),
        ({"admitted": "3,1"}, "range_order", "admitted"),
        ({"admitted": "2-2"}, "range_order", "admitted"),
        ({"admitted": "1,2"}, "canonical_order", "admitted"),
        ({"admitted": "01"}, "range_syntax", "admitted"),
        ({"admitted": ""}, "range_syntax", "admitted"),
        ({"members": None}, "value_domain", "members"),
        (
            {"entries": [{"index": 3, "announced": ["a"]}, {"index": 1, "announced": ["b"]}]},
            "canonical_order",
            "entries[1].index",
        ),
        ({"incarnations": [{"value": 2**63, "indexes": "0"}]}, "value_domain", "incarnations[0]"),
        ({"podCounts": [{"value": 2**31, "indexes": "0"}]}, "value_domain", "podCounts[0]"),
    ],
)
def test_bad_columns_are_refused_under_omes_reason(
    change: dict[str, Any], reason: str, where: str
) -> None:
    error = _refusal({**BASE, **change})
    assert error.reason == reason
    assert error.path.startswith(f"status.instanceStatusColumns.{where}")
    assert str(error).startswith(f"status.instanceStatusColumns.{where}")


def test_the_union_of_spellings_is_checked() -> None:
    cols = encode_columns(tuple(InstanceStatus(index=i, phase="Ready") for i in range(2)))
    with pytest.raises(ColumnarDecodeError) as info:
        status_from_json({"instanceStatusEncoding": "DenseV1", "instanceStatuses": []})
    assert info.value.reason == "unknown_encoding"
    assert "instanceStatusEncoding" in str(info.value)
    assert _refusal(cols, instanceStatuses=[{"index": 0, "phase": "Ready"}]).reason == (
        "representation_union"
    )
    assert _refusal([]).reason == "representation_union"  # type: ignore[arg-type]


def test_a_status_omenative_writes_is_one_it_reads() -> None:
    """Rows the columns cannot hold go dense, so the writer never writes a refused status."""
    odd = InferenceReplicaStatus(
        instances=(
            InstanceStatus(index=0, phase="Ready"),
            InstanceStatus(index=1, phase="Sleeping"),
            InstanceStatus(index=2**31, phase="Ready"),
        )
    )
    out = status_to_json(odd)
    assert "instanceStatusColumns" not in out
    assert status_from_json(out) == odd


def test_the_bound_must_be_positive() -> None:
    with pytest.raises(ColumnarDecodeError) as info:
        status_from_json(
            {"instanceStatusEncoding": "ColumnarV2", "instanceStatusColumns": BASE}, max_decoded=0
        )
    assert info.value.reason == "cardinality_limit"
