"""Status bytes from OME's own tests: our codec writes them exactly and reads them back.

``tests/unit/golden/ome/`` holds expected strings copied from OME's Go tests at a commit
(``tests/unit/golden/README.md`` names each file's source). The inputs are rebuilt here
from OME's fixtures with omenative's model; unlike the other goldens, these bytes were not
produced by our code.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus, InstanceTermination
from omenative_core.status.wire import go_json_bytes, status_from_json, status_to_json

OME = Path(__file__).parent / "golden" / "ome"


def _ome(name: str) -> bytes:
    return (OME / name).read_bytes().rstrip(b"\n")


def wire_example_rows() -> tuple[InstanceStatus, ...]:
    """OME's ``irstatustest.WireExampleRows()``: 500 Ready single-pod rows on one revision,
    rows 9 and 115 at incarnation 2, rows 6, 43 and 175 on ordinal 1, row 9 with a failure."""
    failure = InstanceTermination(pod_name="example-engine-9", container_name="ome-container",
                                  reason="Error", exit_code=143,
                                  time=datetime(2026, 3, 4, 5, 6, 7, tzinfo=UTC))
    return tuple(
        InstanceStatus(index=i, incarnation=2 if i in (9, 115) else 1, phase="Ready",
                       running_revision="example-engine-2f32f6fe", pod_count=1,
                       serving_pod_count=1, available_pod_count=1, admitted=True,
                       active_ordinal=1 if i in (6, 43, 175) else 0,
                       last_failure=failure if i == 9 else None)
        for i in range(500))


def test_our_columns_for_omes_wire_example_are_omes_bytes() -> None:
    status = InferenceReplicaStatus(replicas=500, instances=wire_example_rows())
    written = status_to_json(status)
    assert written["instanceStatusEncoding"] == "ColumnarV2"
    assert go_json_bytes(written["instanceStatusColumns"]) == _ome("wire-example.columns.json")


def test_omes_wire_example_reads_back_to_its_rows() -> None:
    body = {"replicas": 500, "instanceStatusEncoding": "ColumnarV2",
            "instanceStatusColumns": json.loads(_ome("wire-example.columns.json"))}
    assert status_from_json(body).instances == wire_example_rows()


def test_a_dense_status_of_one_row_is_omes_bytes() -> None:
    status = InferenceReplicaStatus(
        replicas=1, instances=(InstanceStatus(index=0, incarnation=0, phase="Ready"),))
    assert go_json_bytes(status_to_json(status)) == _ome("dense-one-row.status.json")
    assert status_from_json(json.loads(_ome("dense-one-row.status.json"))) == status
