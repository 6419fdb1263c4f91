"""The InferenceReplica status and object on the wire: DenseV1 rows or ColumnarV2 columns.

``status_from_json`` reads either encoding (ColumnarV2 strictly, through
``omenative_core.status.columnar``); ``status_to_json`` writes the smaller one as OME does;
``replica_from_json`` / ``replica_to_json`` add metadata and spec. Built on
``omenative_core.codec`` (the converter) and the columns module; neither imports this one.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

import attrs

from omenative_core.codec import (
    API_VERSION,
    KIND,
    CodecError,
    converter,
    from_json,
    show_value,
    spec_from_json,
    spec_to_json,
)
from omenative_core.model.spec import InferenceReplica, ObjectMeta
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus
from omenative_core.status.columnar import (
    ColumnarDecodeError,
    ColumnarEncodeError,
    decode_columns,
    encode_columns,
)

__all__ = [
    "ENCODINGS",
    "replica_from_json",
    "replica_to_json",
    "status_from_json",
    "status_to_json",
]

ENCODINGS = ("ColumnarV2", "DenseV1")
"""Instance row encodings ``status_to_json`` can write."""

_STATUS_ROW_KEYS = ("instanceStatuses", "instanceStatusEncoding", "instanceStatusColumns")


def status_from_json(obj: object, *, max_decoded: int = 20000) -> InferenceReplicaStatus:
    """Parse an InferenceReplica ``status``, with its rows in either encoding.

    DenseV1 rows (``instanceStatuses``) must have distinct indexes. ColumnarV2 columns are
    decoded strictly and at most ``max_decoded`` rows are accepted; their errors are a
    ``ColumnarDecodeError`` (a ``CodecError``) with a ``reason``.
    """
    if not isinstance(obj, Mapping):
        raise CodecError(f"status: expected an object, got {show_value(obj)}", path="status")
    encoding = obj.get("instanceStatusEncoding")
    columns = obj.get("instanceStatusColumns")
    if encoding is None:
        if columns is not None:
            raise ColumnarDecodeError(
                "status.instanceStatusColumns: requires instanceStatusEncoding: ColumnarV2",
                reason="schema",
                path="status.instanceStatusColumns",
            )
        status = from_json(obj, InferenceReplicaStatus, path="status")
        seen: set[int] = set()
        for i, row in enumerate(status.instances):
            if row.index in seen:
                raise CodecError(
                    f"status.instanceStatuses[{i}].index: duplicate index {row.index}",
                    path=f"status.instanceStatuses[{i}].index",
                )
            seen.add(row.index)
        return status
    if encoding != "ColumnarV2":
        raise ColumnarDecodeError(
            f"status.instanceStatusEncoding: expected 'ColumnarV2' (or absent for DenseV1), "
            f"got {show_value(encoding)}",
            reason="schema",
            path="status.instanceStatusEncoding",
        )
    if obj.get("instanceStatuses"):
        raise ColumnarDecodeError(
            "status.instanceStatuses: not allowed with instanceStatusEncoding: ColumnarV2",
            reason="schema",
            path="status.instanceStatuses",
        )
    if columns is None:
        raise ColumnarDecodeError(
            "status.instanceStatusColumns: required with instanceStatusEncoding: ColumnarV2",
            reason="schema",
            path="status.instanceStatusColumns",
        )
    rest = {k: v for k, v in obj.items() if k not in _STATUS_ROW_KEYS}
    status = from_json(rest, InferenceReplicaStatus, path="status")
    rows = decode_columns(columns, max_decoded=max_decoded, path="status.instanceStatusColumns")
    return attrs.evolve(status, instances=rows)


def _json_size(value: Any) -> int:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode("utf-8", "surrogatepass"))


@functools.cache
def _dense_row_floor() -> int:
    """Compact JSON size of the smallest possible DenseV1 row (a lower bound for any row)."""
    skeleton = InstanceStatus(index=0, incarnation=0, phase="", admitted=True)
    return _json_size(converter.unstructure(skeleton))


def status_to_json(
    status: InferenceReplicaStatus, *, encoding: str = "ColumnarV2", max_decoded: int = 20000
) -> dict[str, Any]:
    """Write an InferenceReplica ``status``, choosing the row encoding as OME does.

    ``DenseV1`` always writes ``instanceStatuses``. ``ColumnarV2`` writes columns unless
    there are no rows, more than ``max_decoded`` rows (readers would refuse them), rows the
    columns cannot hold (a negative count, an activeOrdinal other than 0/1), or the dense
    list is no larger in compact JSON bytes (``"instanceStatuses":[...]`` against
    ``"instanceStatusEncoding":"ColumnarV2","instanceStatusColumns":{...}``).
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown instance status encoding {encoding!r}: expected {ENCODINGS}")
    out: dict[str, Any] = converter.unstructure(status)
    rows = status.instances
    if encoding == "DenseV1" or not rows or len(rows) > max_decoded:
        return out
    try:
        columns = encode_columns(rows)
    except ColumnarEncodeError:
        return out
    columnar_size = _json_size(columns) + len(
        '"instanceStatusEncoding":"ColumnarV2","instanceStatusColumns":'
    )
    # Every dense row holds at least the skeleton (its always-written fields at their
    # shortest), so when even that bound exceeds the columns the exact dense size (a
    # serialisation of the whole list) is not needed: the columns are smaller.
    dense_floor = len(rows) * (_dense_row_floor() + 1) + 1 + len('"instanceStatuses":')
    if dense_floor <= columnar_size:
        dense_size = _json_size(out["instanceStatuses"]) + len('"instanceStatuses":')
        if dense_size <= columnar_size:
            return out
    result: dict[str, Any] = {}
    for key, value in out.items():
        if key == "instanceStatuses":
            result["instanceStatusEncoding"] = "ColumnarV2"
            result["instanceStatusColumns"] = columns
        else:
            result[key] = value
    return result


def replica_from_json(obj: object, *, max_decoded: int = 20000) -> InferenceReplica:
    """Parse an InferenceReplica object: metadata, spec, and status when present."""
    if not isinstance(obj, Mapping):
        raise CodecError(f"$: expected an object, got {show_value(obj)}", path="$")
    if "metadata" not in obj:
        raise CodecError("metadata: required field missing", path="metadata")
    if "spec" not in obj:
        raise CodecError("spec: required field missing", path="spec")
    metadata = from_json(obj["metadata"], ObjectMeta, path="metadata")
    spec = spec_from_json(obj["spec"])
    raw_status = obj.get("status")
    status = None if raw_status is None else status_from_json(raw_status, max_decoded=max_decoded)
    return InferenceReplica(metadata=metadata, spec=spec, status=status)


def replica_to_json(
    replica: InferenceReplica, *, encoding: str = "ColumnarV2", max_decoded: int = 20000
) -> dict[str, Any]:
    """Write an InferenceReplica object (apiVersion, kind, metadata, spec, status)."""
    out: dict[str, Any] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": converter.unstructure(replica.metadata),
        "spec": spec_to_json(replica.spec),
    }
    if replica.status is not None:
        out["status"] = status_to_json(replica.status, encoding=encoding, max_decoded=max_decoded)
    return out
