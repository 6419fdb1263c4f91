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
    "go_json_bytes",
    "replica_from_json",
    "replica_to_json",
    "status_from_json",
    "status_to_json",
]

ENCODINGS = ("ColumnarV2", "DenseV1")
"""Instance row encodings ``status_to_json`` can write."""

_STATUS_ROW_KEYS = ("instanceStatuses", "instanceStatusEncoding", "instanceStatusColumns")
_GO_ESCAPES = str.maketrans(
    {"<": "\\u003c", ">": "\\u003e", "&": "\\u0026", "\u2028": "\\u2028", "\u2029": "\\u2029"}
)


def go_json_bytes(value: Any) -> bytes:
    """``value`` as Go's ``json.Marshal`` writes it: compact, UTF-8, HTML characters escaped.

    Key order is the dict's (the codec writes OME's struct order). This is the body OME's
    client sends, so its length is the size OME compares when it picks an encoding.
    """
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return text.translate(_GO_ESCAPES).encode("utf-8", "surrogatepass")


def _union_error(what: str, where: str, reason: str = "representation_union") -> CodecError:
    path = f"status.{where}"
    return ColumnarDecodeError(f"{path}: {what}", reason=reason, path=path)


def _dense_from_json(obj: Mapping[str, Any]) -> InferenceReplicaStatus:
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


def status_from_json(obj: object, *, max_decoded: int = 20000) -> InferenceReplicaStatus:
    """Parse an InferenceReplica ``status``, with its rows in either encoding.

    DenseV1 rows (``instanceStatuses``) must have distinct indexes. ColumnarV2 columns are
    decoded strictly and at most ``max_decoded`` rows are accepted. Encoding errors are a
    ``ColumnarDecodeError`` (a ``CodecError``) whose ``reason`` is one of OME's
    (``unknown_encoding`` for a marker other than ColumnarV2, ``representation_union`` for
    a mixed or incomplete spelling, the column reasons of ``decode_columns`` otherwise).
    """
    if not isinstance(obj, Mapping):
        raise CodecError(f"status: expected an object, got {show_value(obj)}", path="status")
    encoding = obj.get("instanceStatusEncoding")
    columns = obj.get("instanceStatusColumns")
    if encoding is None:
        if columns is not None:
            raise _union_error(
                "requires instanceStatusEncoding: ColumnarV2; an unmarked status carries only "
                "instanceStatuses",
                "instanceStatusColumns",
            )
        return _dense_from_json(obj)
    if encoding != "ColumnarV2":
        raise _union_error(
            f"expected 'ColumnarV2' (or absent for DenseV1), got {show_value(encoding)}",
            "instanceStatusEncoding",
            "unknown_encoding",
        )
    if obj.get("instanceStatuses"):
        raise _union_error(
            "not allowed with instanceStatusEncoding: ColumnarV2", "instanceStatuses"
        )
    if columns is None:
        raise _union_error(
            "required with instanceStatusEncoding: ColumnarV2", "instanceStatusColumns"
        )
    rest = {k: v for k, v in obj.items() if k not in _STATUS_ROW_KEYS}
    status = from_json(rest, InferenceReplicaStatus, path="status")
    rows = decode_columns(columns, max_decoded=max_decoded, path="status.instanceStatusColumns")
    return attrs.evolve(status, instances=rows)


@functools.cache
def _dense_row_floor() -> int:
    """Size of the smallest possible DenseV1 row (a lower bound for any row)."""
    skeleton = InstanceStatus(index=0, incarnation=0, phase="")
    return len(go_json_bytes(converter.unstructure(skeleton)))


_DENSE_KEY = len('"instanceStatuses":')
_COLUMNAR_KEYS = len('"instanceStatusEncoding":"ColumnarV2","instanceStatusColumns":')


def _columnar_if_smaller(
    rows: tuple[InstanceStatus, ...], dense_rows: list[Any], max_decoded: int
) -> dict[str, Any] | None:
    """The columns when they are strictly smaller than the dense list, else None."""
    if not rows or len(rows) > max_decoded:
        return None
    try:
        columns = encode_columns(rows)
    except ColumnarEncodeError:
        return None
    columnar_size = len(go_json_bytes(columns)) + _COLUMNAR_KEYS
    # Every dense row holds at least the skeleton (its always-written fields at their
    # shortest), so when even that bound exceeds the columns the exact dense size (a
    # serialisation of the whole list) is not needed: the columns are smaller.
    dense_floor = len(rows) * (_dense_row_floor() + 1) + 1 + _DENSE_KEY
    if dense_floor <= columnar_size:
        dense_size = len(go_json_bytes(dense_rows)) + _DENSE_KEY
        if dense_size <= columnar_size:
            return None
    return columns


def status_to_json(
    status: InferenceReplicaStatus, *, encoding: str = "ColumnarV2", max_decoded: int = 20000
) -> dict[str, Any]:
    """Write an InferenceReplica ``status`` as OME does, choosing the row encoding as OME does.

    Fields come in OME's struct order with OME's ``omitempty`` rules (see ``codec``).
    ``DenseV1`` always writes ``instanceStatuses``. ``ColumnarV2`` writes columns only when
    they are strictly smaller in Go's compact JSON bytes (``"instanceStatuses":[...]``
    against ``"instanceStatusEncoding":"ColumnarV2","instanceStatusColumns":{...}``), and
    never when there are no rows, more than ``max_decoded`` rows (readers would refuse
    them) or rows the columns cannot hold (an unknown phase, a count outside int32, an
    activeOrdinal other than 0/1, ...).
    """
    if encoding not in ENCODINGS:
        raise ValueError(f"unknown instance status encoding {encoding!r}: expected {ENCODINGS}")
    out: dict[str, Any] = converter.unstructure(status)
    if encoding == "DenseV1" or "instanceStatuses" not in out:
        return out
    columns = _columnar_if_smaller(status.instances, out["instanceStatuses"], max_decoded)
    if columns is None:
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
