"""Round trips through the JSON codec: what the manager writes, it reads back unchanged.

A status is the manager's memory between passes (operations, deadlines, retry counts), so
any field lost or altered on the way through JSON is a forgotten operation after a restart.
Every value goes through real ``json.dumps``/``json.loads`` text, as it would on the wire.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
from hypothesis import given
from hypothesis import strategies as st

from omenative_core.codec import spec_from_json, spec_to_json
from omenative_core.model.spec import InferenceReplica, InferenceReplicaSpec
from omenative_core.model.status import PHASES, InferenceReplicaStatus, InstanceStatus
from omenative_core.status import decode_columns, encode_columns
from omenative_core.status.wire import (
    go_json_bytes,
    replica_from_json,
    replica_to_json,
    status_from_json,
    status_to_json,
)
from tests.property.strategies import instance_rows, replicas, specs, statuses


def wire(obj: Any) -> Any:
    """Through JSON text and back, as the API server would deliver it."""
    return json.loads(json.dumps(obj))


def ome_phases(rows: tuple[InstanceStatus, ...]) -> tuple[InstanceStatus, ...]:
    """The rows with every phase one of OME's eight (the only ones columns may hold)."""
    return tuple(r if r.phase in PHASES else attrs.evolve(r, phase="Ready") for r in rows)


def columnar_rows(*, shuffled: bool = False) -> st.SearchStrategy[tuple[InstanceStatus, ...]]:
    """Non-empty rows that ColumnarV2 can hold."""
    return instance_rows(min_size=1, shuffled=shuffled).map(ome_phases)


@given(specs())
def test_spec_model_json_model_is_identity(spec: InferenceReplicaSpec) -> None:
    assert spec_from_json(wire(spec_to_json(spec))) == spec


@given(specs())
def test_spec_json_model_json_is_identity(spec: InferenceReplicaSpec) -> None:
    produced = wire(spec_to_json(spec))
    assert spec_to_json(spec_from_json(produced)) == produced


@given(statuses(), st.sampled_from(["ColumnarV2", "DenseV1"]))
def test_status_model_json_model_is_identity(status: InferenceReplicaStatus, encoding: str) -> None:
    assert status_from_json(wire(status_to_json(status, encoding=encoding))) == status


@given(statuses(), st.sampled_from(["ColumnarV2", "DenseV1"]))
def test_status_json_model_json_is_identity(status: InferenceReplicaStatus, encoding: str) -> None:
    produced = wire(status_to_json(status, encoding=encoding))
    assert wire(status_to_json(status_from_json(produced), encoding=encoding)) == produced


@given(statuses())
def test_both_encodings_decode_to_the_same_status(status: InferenceReplicaStatus) -> None:
    dense = status_from_json(wire(status_to_json(status, encoding="DenseV1")))
    columnar = status_from_json(wire(status_to_json(status, encoding="ColumnarV2")))
    assert dense == columnar == status


@given(columnar_rows(shuffled=True))
def test_columns_round_trip_rows_in_any_order(rows: tuple[InstanceStatus, ...]) -> None:
    columns = wire(encode_columns(rows))
    assert decode_columns(columns) == rows
    assert ("rowOrder" in columns) == (list(rows) != sorted(rows, key=lambda r: r.index))


@given(columnar_rows(shuffled=True))
def test_columns_are_canonical(rows: tuple[InstanceStatus, ...]) -> None:
    """Equal row sets give byte-identical columns, so a status rewrite is a no-op."""
    columns = encode_columns(rows)
    assert encode_columns(decode_columns(wire(columns))) == columns


@given(statuses(instance_rows(min_size=1)) | statuses(columnar_rows()))
def test_columnar_writer_picks_columns_only_when_strictly_smaller(
    status: InferenceReplicaStatus,
) -> None:
    """OME's choice: ColumnarV2 exactly when its whole status body has fewer bytes."""
    chosen = status_to_json(status, encoding="ColumnarV2")
    dense = status_to_json(status, encoding="DenseV1")
    try:
        columns = encode_columns(status.instances)
    except ValueError:
        assert chosen == dense  # rows the columns cannot hold are written dense
        return
    columnar = {
        k: v
        for key, value in dense.items()
        for k, v in (
            (("instanceStatusEncoding", "ColumnarV2"), ("instanceStatusColumns", columns))
            if key == "instanceStatuses"
            else ((key, value),)
        )
    }
    smaller = len(go_json_bytes(columnar)) < len(go_json_bytes(dense))
    assert chosen == (columnar if smaller else dense)
    assert list(chosen) == list(columnar if smaller else dense)  # OME's field order
    assert status_from_json(wire(chosen)) == status


@given(statuses(instance_rows(min_size=2)))
def test_rows_beyond_the_decode_bound_are_written_dense(status: InferenceReplicaStatus) -> None:
    out = status_to_json(status, encoding="ColumnarV2", max_decoded=len(status.instances) - 1)
    assert "instanceStatusColumns" not in out
    assert status_from_json(wire(out)) == status


@given(statuses(instance_rows(min_size=1)), st.data())
def test_rows_columns_cannot_hold_are_written_dense(
    status: InferenceReplicaStatus, data: st.DataObject
) -> None:
    k = data.draw(st.integers(0, len(status.instances) - 1))
    bad = data.draw(
        st.sampled_from(
            [
                {"pod_count": -1},
                {"serving_pod_count": -3},
                {"available_pod_count": 2**31},
                {"active_ordinal": 2},
                {"phase": "Sleeping"},
                {"phase": ""},
            ]
        )
    )
    rows = list(status.instances)
    rows[k] = attrs.evolve(rows[k], **bad)
    odd = attrs.evolve(status, instances=tuple(rows))
    out = status_to_json(odd, encoding="ColumnarV2")
    assert "instanceStatusColumns" not in out
    assert status_from_json(wire(out)) == odd


@given(replicas(), st.sampled_from(["ColumnarV2", "DenseV1"]))
def test_replica_round_trip(replica: InferenceReplica, encoding: str) -> None:
    produced = wire(replica_to_json(replica, encoding=encoding))
    assert produced["apiVersion"] == "ome.io/v1beta1"
    assert produced["kind"] == "InferenceReplica"
    assert ("status" in produced) == (replica.status is not None)
    assert replica_from_json(produced) == replica
    assert wire(replica_to_json(replica_from_json(produced), encoding=encoding)) == produced


@given(statuses())
def test_zero_values_are_never_written(status: InferenceReplicaStatus) -> None:
    """OME's omitempty: a row never carries an empty string, a 0 count or a false flag."""
    for row in status_to_json(status, encoding="DenseV1").get("instanceStatuses", []):
        for key in (
            "incarnation",
            "runningRevision",
            "targetRevision",
            "podCount",
            "servingPodCount",
            "availablePodCount",
            "admitted",
            "activeOrdinal",
        ):
            assert row.get(key, 1) not in (0, "", False)
