"""Golden bytes: the statuses omenative writes do not change by accident.

The expected files hold the compact JSON omenative's encoder wrote for the statuses of
``status_golden_cases`` (OME's struct order, zero values left out where OME's fields are
``omitempty``, ColumnarV2 only when it is strictly smaller): ``*.dense.json`` is the DenseV1
spelling of a status, ``*.written.json`` what the manager sends. They were not produced by
OME's code; the bytes checked against OME's own tests are in ``test_status_golden_ome``
(``tests/unit/golden/README.md`` says where each file comes from).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.unit.status_golden_cases import CASES

from omenative_core.status.wire import go_json_bytes, status_from_json, status_to_json

GOLDEN = Path(__file__).parent / "golden"


def _expected(name: str, kind: str) -> bytes:
    return (GOLDEN / f"{name}.{kind}.json").read_bytes().rstrip(b"\n")


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_written_status_is_omes_bytes(name: str) -> None:
    assert go_json_bytes(status_to_json(CASES[name]())) == _expected(name, "written")


@pytest.mark.parametrize("name", sorted(CASES))
def test_the_dense_status_is_omes_bytes(name: str) -> None:
    assert go_json_bytes(status_to_json(CASES[name](), encoding="DenseV1")) == _expected(
        name, "dense"
    )


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("kind", ["written", "dense"])
def test_omes_bytes_read_back_to_the_same_status(name: str, kind: str) -> None:
    assert status_from_json(json.loads(_expected(name, kind))) == CASES[name]()


def test_the_encoding_chosen_is_the_strictly_smaller_one() -> None:
    chosen = {name: b"instanceStatusColumns" in _expected(name, "written") for name in CASES}
    assert chosen == {"uniform": True, "mixed": True, "failure-heavy": False}
    for name in CASES:
        written, dense = _expected(name, "written"), _expected(name, "dense")
        assert (written != dense) == (len(written) < len(dense))


def test_a_dense_row_carries_no_zero_values() -> None:
    """OME omits empty strings, 0 and false: a Ready row is 8 fields, a Creating row 5."""
    rows = json.loads(_expected("mixed", "dense"))["instanceStatuses"]
    assert list(rows[0]) == [
        "index",
        "incarnation",
        "phase",
        "runningRevision",
        "podCount",
        "servingPodCount",
        "availablePodCount",
        "admitted",
    ]
    assert list(rows[-1]) == ["index", "incarnation", "phase", "targetRevision", "operation"]


def test_an_absent_incarnation_reads_as_zero() -> None:
    status = status_from_json({"instanceStatuses": [{"index": 0, "phase": "Pending"}]})
    assert status.instances[0].incarnation == 0
    assert status_to_json(status, encoding="DenseV1")["instanceStatuses"] == [
        {"index": 0, "phase": "Pending"}
    ]
