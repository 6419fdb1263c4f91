"""JSON codec: OME's camelCase wire format <-> the core's attrs model, strictly.

One cattrs converter serves every attrs class of the model:

* field names become camelCase (``instance_ready_timeout`` -> ``instanceReadyTimeout``,
  ``request_uuid`` -> ``requestUUID``); unknown input fields are ignored, so an OME manifest
  with fields we do not model (``modelRef``, ``autoscaler``, ...) still loads;
* on output, a field is omitted when it is None, or an empty tuple/mapping, and that is also
  its default (so the output is small and reads back to the same value);
* timestamps are RFC 3339 at second precision, durations are Go durations (``30m0s``),
  IntOrString is an int or a string, pod templates and other JSON objects pass through;
* input is type-checked: ``"3"`` is not an integer and ``30`` is not a duration. Any error
  is a ``CodecError`` naming the JSON path and the bad value, never a cattrs traceback.

The status carries its Instance rows either dense (``instanceStatuses``, DenseV1) or as
ColumnarV2 columns (``omenative_core.status.columnar``); ``status_to_json`` picks.

The ``*_view_from_json`` functions build the slim observed views from Kubernetes objects as
the API server sends them; they are lenient about absent fields, as watch events are.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping
from datetime import datetime, timedelta
from types import NoneType, UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

import attrs
from cattrs import Converter
from cattrs.errors import (
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from omenative_core.model.observed import (
    ContainerView,
    NodeView,
    PodGroupView,
    PodView,
    RevisionView,
)
from omenative_core.model.spec import (
    InferenceReplica,
    InferenceReplicaSpec,
    ObjectMeta,
)
from omenative_core.model.status import InferenceReplicaStatus, InstanceStatus
from omenative_core.model.timefmt import (
    format_duration,
    format_time,
    parse_duration,
    parse_time,
    to_second,
)

__all__ = [
    "API_VERSION",
    "ENCODINGS",
    "KIND",
    "CodecError",
    "camel_name",
    "converter",
    "from_json",
    "node_view_from_json",
    "pod_group_view_from_json",
    "pod_view_from_json",
    "replica_from_json",
    "replica_to_json",
    "revision_view_from_json",
    "routed_pods_from_endpoint_slices",
    "spec_from_json",
    "spec_to_json",
    "status_from_json",
    "status_to_json",
    "to_json",
]

API_VERSION = "ome.io/v1beta1"
"""apiVersion of InferenceReplica objects."""

KIND = "InferenceReplica"
"""kind of InferenceReplica objects."""

ENCODINGS = ("ColumnarV2", "DenseV1")
"""Instance row encodings ``status_to_json`` can write."""

T = TypeVar("T")


class CodecError(ValueError):
    """JSON that does not fit the model; the message names the JSON path and the bad value.

    ``errors`` lists every problem found as ``"path: what"``; ``path`` is the first path.
    """

    def __init__(self, message: str, *, path: str = "", errors: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.path = path
        self.errors = errors or (message,)


class _Mismatch(TypeError):
    """A leaf value of the wrong JSON type (raised inside cattrs, reported as CodecError)."""


# --------------------------------------------------------------------------------------------
# names


_SPECIAL_NAMES = {"request_uuid": "requestUUID"}


def camel_name(name: str) -> str:
    """The JSON name of a model field: camelCase, with OME's ``UUID`` spelling."""
    special = _SPECIAL_NAMES.get(name)
    if special is not None:
        return special
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


def _show(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --------------------------------------------------------------------------------------------
# leaf hooks (strict: JSON has no implicit conversions)


def _structure_int(obj: object, _: object) -> int:
    if type(obj) is int or (isinstance(obj, int) and not isinstance(obj, bool)):
        return obj
    raise _Mismatch(f"expected an integer, got {_show(obj)}")


def _structure_str(obj: object, _: object) -> str:
    if isinstance(obj, str):
        return obj
    raise _Mismatch(f"expected a string, got {_show(obj)}")


def _structure_bool(obj: object, _: object) -> bool:
    if isinstance(obj, bool):
        return obj
    raise _Mismatch(f"expected true or false, got {_show(obj)}")


def _structure_float(obj: object, _: object) -> float:
    if isinstance(obj, int | float) and not isinstance(obj, bool):
        return float(obj)
    raise _Mismatch(f"expected a number, got {_show(obj)}")


def _structure_datetime(obj: object, _: object) -> datetime:
    return to_second(parse_time(obj))


def _structure_timedelta(obj: object, _: object) -> timedelta:
    return parse_duration(obj)


def _structure_json_object(obj: object, _: object) -> Mapping[str, Any]:
    if isinstance(obj, Mapping):
        return obj
    raise _Mismatch(f"expected an object, got {_show(obj)}")


def _structure_str_map(obj: object, _: object) -> dict[str, str]:
    if not isinstance(obj, Mapping):
        raise _Mismatch(f"expected an object of strings, got {_show(obj)}")
    out: dict[str, str] = {}
    errors: list[Exception] = []
    for key, value in obj.items():
        if isinstance(key, str) and isinstance(value, str):
            out[key] = value
            continue
        exc = _Mismatch(
            f"expected a string, got {_show(value)}"
            if isinstance(key, str)
            else f"expected a string key, got {_show(key)}"
        )
        exc.__notes__ = [IterableValidationNote(f"key {key!r}", str(key), str)]
        errors.append(exc)
    if errors:
        raise IterableValidationError("While structuring a string map", errors, dict)
    return out


def _is_union(t: object) -> bool:
    return get_origin(t) in (Union, UnionType)


def _is_optional(t: object) -> bool:
    return _is_union(t) and NoneType in get_args(t) and len(get_args(t)) > 1


def _is_int_or_str(t: object) -> bool:
    return _is_union(t) and set(get_args(t)) - {NoneType} == {int, str}


def _is_homogeneous_tuple(t: object) -> bool:
    args = get_args(t)
    return get_origin(t) is tuple and len(args) == 2 and args[1] is Ellipsis


def _is_mapping(t: object) -> bool:
    return get_origin(t) is Mapping or get_origin(t) is dict


def _structure_int_or_str(obj: object, _: object) -> int | str | None:
    if obj is None:
        return None
    if isinstance(obj, str) or (isinstance(obj, int) and not isinstance(obj, bool)):
        return obj
    raise _Mismatch(f"expected an integer or a string such as '25%', got {_show(obj)}")


# --------------------------------------------------------------------------------------------
# the converter


def _omit_when_default(field: attrs.Attribute[Any]) -> bool:
    """Omit a field on output when its value equals a None / empty default."""
    default = field.default
    if default is None:
        return True
    if isinstance(default, tuple | frozenset) and not default:
        return True
    if isinstance(default, attrs.Factory):  # type: ignore[arg-type]
        if default.takes_self:  # pragma: no cover - the model has none
            return False
        made = default.factory()
        return isinstance(made, Mapping | tuple | list | frozenset | set) and not made
    return False


def _json_name(cl: type, field: attrs.Attribute[Any]) -> str:
    if cl is InferenceReplicaStatus and field.name == "instances":
        return "instanceStatuses"  # DenseV1; status_to_json may swap in ColumnarV2 columns
    return camel_name(field.name)


def _make_converter() -> Converter:
    conv = Converter(detailed_validation=True, forbid_extra_keys=False)

    # structure: strict leaves
    conv.register_structure_hook(int, _structure_int)
    conv.register_structure_hook(str, _structure_str)
    conv.register_structure_hook(bool, _structure_bool)
    conv.register_structure_hook(float, _structure_float)
    conv.register_structure_hook(datetime, _structure_datetime)
    conv.register_structure_hook(timedelta, _structure_timedelta)

    def optional_factory(t: Any) -> Callable[[Any, Any], Any]:
        others = tuple(a for a in get_args(t) if a is not NoneType)
        inner_t: Any = others[0] if len(others) == 1 else Union[others]  # noqa: UP007
        inner = conv.get_structure_hook(inner_t)

        def hook(obj: Any, _: Any) -> Any:
            return None if obj is None else inner(obj, inner_t)

        return hook

    def tuple_factory(t: Any) -> Callable[[Any, Any], tuple[Any, ...]]:
        elem_t = get_args(t)[0]
        elem = conv.get_structure_hook(elem_t)

        def hook(obj: Any, _: Any) -> tuple[Any, ...]:
            if not isinstance(obj, list | tuple):
                raise _Mismatch(f"expected a list, got {_show(obj)}")
            try:
                return tuple([elem(item, elem_t) for item in obj])
            except Exception:
                pass
            errors: list[Exception] = []
            for i, item in enumerate(obj):
                try:
                    elem(item, elem_t)
                except Exception as exc:
                    exc.__notes__ = [
                        *getattr(exc, "__notes__", []),
                        IterableValidationNote(f"item {i}", i, elem_t),
                    ]
                    errors.append(exc)
            raise IterableValidationError("While structuring a list", errors, tuple)

        return hook

    def mapping_factory(t: Any) -> Callable[[Any, Any], Any]:
        args = get_args(t)
        if args == (str, str):
            return _structure_str_map
        return _structure_json_object

    def attrs_factory(cl: type[Any]) -> Callable[[Any, Any], Any]:
        overrides: dict[str, Any] = {
            f.name: override(rename=_json_name(cl, f)) for f in attrs.fields(cl)
        }
        fn = make_dict_structure_fn(cl, conv, **overrides)

        def hook(obj: Any, _: Any) -> Any:
            if not isinstance(obj, Mapping):
                raise _Mismatch(f"expected an object, got {_show(obj)}")
            return fn(obj, cl)

        return hook

    conv.register_structure_hook_factory(attrs.has, attrs_factory)
    conv.register_structure_hook_factory(_is_mapping, mapping_factory)
    conv.register_structure_hook_factory(_is_homogeneous_tuple, tuple_factory)
    conv.register_structure_hook_factory(_is_optional, optional_factory)
    # registered last: takes precedence over the generic optional hook for IntOrStr | None
    conv.register_structure_hook_factory(_is_int_or_str, lambda _t: _structure_int_or_str)

    # unstructure
    conv.register_unstructure_hook(datetime, format_time)
    conv.register_unstructure_hook(timedelta, format_duration)

    def unstructure_tuple_factory(t: Any) -> Callable[[Any], list[Any]]:
        elem_t = get_args(t)[0]
        if elem_t in (str, int, bool):
            return list
        elem = conv.get_unstructure_hook(elem_t)

        def hook(value: Any) -> list[Any]:
            return [elem(item) for item in value]

        return hook

    def unstructure_mapping(value: Any) -> Any:
        return value if type(value) is dict else dict(value)

    def unstructure_attrs_factory(cl: type[Any]) -> Callable[[Any], dict[str, Any]]:
        overrides: dict[str, Any] = {
            f.name: override(rename=_json_name(cl, f), omit_if_default=_omit_when_default(f))
            for f in attrs.fields(cl)
        }
        return make_dict_unstructure_fn(cl, conv, **overrides)

    conv.register_unstructure_hook_factory(attrs.has, unstructure_attrs_factory)
    conv.register_unstructure_hook_factory(_is_mapping, lambda _t: unstructure_mapping)
    conv.register_unstructure_hook_factory(_is_homogeneous_tuple, unstructure_tuple_factory)
    return conv


converter = _make_converter()
"""The cattrs converter for the model (camelCase, strict input, compact output)."""


# --------------------------------------------------------------------------------------------
# errors


def _leaf_message(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return "required field missing"
    if isinstance(exc, _Mismatch | ValueError):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"


def _flatten(exc: BaseException, path: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(exc, ClassValidationError):
        with_notes, without = exc.group_exceptions()
        for sub, note in with_notes:
            out.extend(_flatten(sub, f"{path}.{camel_name(note.name)}"))
        for sub in without:
            out.extend(_flatten(sub, path))
    elif isinstance(exc, IterableValidationError):
        with_inotes, without = exc.group_exceptions()
        for sub, inote in with_inotes:
            key = inote.index
            sub_path = f"{path}[{key}]" if isinstance(key, int) else f"{path}[{key!r}]"
            out.extend(_flatten(sub, sub_path))
        for sub in without:
            out.extend(_flatten(sub, path))
    else:
        out.append((path, _leaf_message(exc)))
    return out


def _codec_error(exc: BaseException, path: str) -> CodecError:
    problems = _flatten(exc, path) or [(path, str(exc))]
    lines = tuple(f"{p}: {m}" for p, m in problems)
    message = lines[0]
    if len(lines) > 1:
        message += f" (and {len(lines) - 1} more: " + "; ".join(lines[1:]) + ")"
    return CodecError(message, path=problems[0][0], errors=lines)


def from_json(obj: object, cl: type[T], *, path: str = "$") -> T:
    """Structure JSON into any model class; errors become a ``CodecError`` under ``path``."""
    try:
        return converter.structure(obj, cl)
    except CodecError:
        raise
    except Exception as exc:
        raise _codec_error(exc, path) from None


def to_json(value: Any) -> Any:
    """Unstructure any model value into JSON (camelCase, compact)."""
    return converter.unstructure(value)


# --------------------------------------------------------------------------------------------
# spec, status, replica


def spec_from_json(obj: object) -> InferenceReplicaSpec:
    """Parse an InferenceReplica ``spec``; unknown fields are ignored."""
    return from_json(obj, InferenceReplicaSpec, path="spec")


def spec_to_json(spec: InferenceReplicaSpec) -> dict[str, Any]:
    """Write an InferenceReplica ``spec`` as OME's JSON."""
    out: dict[str, Any] = converter.unstructure(spec)
    return out


_STATUS_ROW_KEYS = ("instanceStatuses", "instanceStatusEncoding", "instanceStatusColumns")


def status_from_json(obj: object, *, max_decoded: int = 20000) -> InferenceReplicaStatus:
    """Parse an InferenceReplica ``status``, with its rows in either encoding.

    DenseV1 rows (``instanceStatuses``) must have distinct indexes. ColumnarV2 columns are
    decoded strictly and at most ``max_decoded`` rows are accepted; their errors are a
    ``ColumnarDecodeError`` (a ``CodecError``) with a ``reason``.
    """
    from omenative_core.status.columnar import (  # noqa: PLC0415 - columnar imports this module
        ColumnarDecodeError,
        decode_columns,
    )

    if not isinstance(obj, Mapping):
        raise CodecError(f"status: expected an object, got {_show(obj)}", path="status")
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
            f"got {_show(encoding)}",
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
    from omenative_core.status.columnar import (  # noqa: PLC0415 - columnar imports this module
        ColumnarEncodeError,
        encode_columns,
    )

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
        raise CodecError(f"$: expected an object, got {_show(obj)}", path="$")
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


# --------------------------------------------------------------------------------------------
# observed views from Kubernetes JSON (lenient about absent fields, strict about timestamps)


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _list(value: object) -> list[Any]:
    return value if isinstance(value, list) else []


def _str_map(value: object) -> dict[str, str]:
    return {str(k): str(v) for k, v in _obj(value).items()}


def _time(value: object, path: str) -> datetime | None:
    if value is None or value == "":
        return None
    try:
        return to_second(parse_time(value))
    except ValueError as exc:
        raise CodecError(f"{path}: {exc}", path=path) from None


def _int(value: object, default: int = 0) -> int:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return default


def _container_view(status: Mapping[str, Any]) -> ContainerView:
    state = _obj(status.get("state"))
    last = _obj(status.get("lastState"))
    waiting = state.get("waiting")
    terminated = state.get("terminated")
    if not isinstance(terminated, Mapping):
        terminated = last.get("terminated")
    waiting_obj = _obj(waiting)
    term_obj = _obj(terminated)
    exit_code = term_obj.get("exitCode")
    return ContainerView(
        name=str(status.get("name", "")),
        image=str(status.get("image") or ""),
        ready=status.get("ready") is True,
        restart_count=_int(status.get("restartCount")),
        running=isinstance(state.get("running"), Mapping),
        waiting_reason=(waiting_obj.get("reason") or "") if isinstance(waiting, Mapping) else None,
        waiting_message=str(waiting_obj.get("message") or ""),
        terminated_reason=(
            str(term_obj.get("reason") or "") if isinstance(terminated, Mapping) else None
        ),
        terminated_exit_code=(
            exit_code if isinstance(exit_code, int) and not isinstance(exit_code, bool) else None
        ),
    )


def pod_view_from_json(obj: Mapping[str, Any]) -> PodView:
    """Build a ``PodView`` from a Pod object (``metadata``, ``spec``, ``status``)."""
    meta = _obj(obj.get("metadata"))
    spec = _obj(obj.get("spec"))
    status = _obj(obj.get("status"))
    conditions: dict[str, str] = {}
    reasons: dict[str, str] = {}
    for cond in _list(status.get("conditions")):
        cond_obj = _obj(cond)
        ctype = cond_obj.get("type")
        if not isinstance(ctype, str):
            continue
        conditions[ctype] = str(cond_obj.get("status", "Unknown"))
        reason = cond_obj.get("reason")
        if isinstance(reason, str) and reason:
            reasons[ctype] = reason
    images = {
        str(c.get("name", "")): str(c.get("image") or "")
        for c in map(_obj, _list(spec.get("containers")))
    }
    gates = tuple(str(g.get("name", "")) for g in map(_obj, _list(spec.get("schedulingGates"))))
    node_name = spec.get("nodeName")
    pod_ip = status.get("podIP")
    return PodView(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        labels=_str_map(meta.get("labels")),
        annotations=_str_map(meta.get("annotations")),
        node_name=node_name if isinstance(node_name, str) and node_name else None,
        phase=str(status.get("phase") or "Pending"),
        conditions=conditions,
        condition_reasons=reasons,
        containers=tuple(_container_view(_obj(c)) for c in _list(status.get("containerStatuses"))),
        images=images,
        deletion_timestamp=_time(meta.get("deletionTimestamp"), "metadata.deletionTimestamp"),
        creation_timestamp=_time(meta.get("creationTimestamp"), "metadata.creationTimestamp"),
        scheduling_gates=gates,
        pod_ip=pod_ip if isinstance(pod_ip, str) and pod_ip else None,
    )


def node_view_from_json(obj: Mapping[str, Any]) -> NodeView:
    """Build a ``NodeView`` from a Node: Ready True/False, or None when Unknown or missing.

    ``not_ready_since`` is the Ready condition's lastTransitionTime while it is not True.
    """
    meta = _obj(obj.get("metadata"))
    spec = _obj(obj.get("spec"))
    status = _obj(obj.get("status"))
    ready: bool | None = None
    since: datetime | None = None
    for cond in map(_obj, _list(status.get("conditions"))):
        if cond.get("type") != "Ready":
            continue
        value = cond.get("status")
        ready = True if value == "True" else False if value == "False" else None
        if ready is not True:
            since = _time(
                cond.get("lastTransitionTime"), "status.conditions[Ready].lastTransitionTime"
            )
        break
    return NodeView(
        name=str(meta.get("name", "")),
        ready=ready,
        unschedulable=spec.get("unschedulable") is True,
        labels=_str_map(meta.get("labels")),
        not_ready_since=since,
    )


def pod_group_view_from_json(obj: Mapping[str, Any]) -> PodGroupView:
    """Build a ``PodGroupView`` from a scheduler-plugins PodGroup (deleting: being deleted)."""
    meta = _obj(obj.get("metadata"))
    return PodGroupView(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        deleting=bool(meta.get("deletionTimestamp")),
        labels=_str_map(meta.get("labels")),
    )


def revision_view_from_json(obj: Mapping[str, Any]) -> RevisionView:
    """Build a ``RevisionView`` from a ControllerRevision (its ``data`` and ``revision``)."""
    meta = _obj(obj.get("metadata"))
    data = obj.get("data")
    return RevisionView(
        name=str(meta.get("name", "")),
        uid=str(meta.get("uid", "")),
        revision=_int(obj.get("revision")),
        data=data if isinstance(data, Mapping) else {},
        labels=_str_map(meta.get("labels")),
    )


def routed_pods_from_endpoint_slices(slices: Iterable[Mapping[str, Any]]) -> frozenset[str]:
    """Names of the pods a Service routes to: endpoints that are ready.

    Rule: an endpoint counts when its ``targetRef`` is a Pod (or has no kind) with a name,
    and neither ``conditions.ready`` nor ``conditions.serving`` is False (absent counts as
    true, as the EndpointSlice API defines). ``serving`` matters for a Service with
    ``publishNotReadyAddresses`` (our headless Service): there ``ready`` stays true for a
    pod that is not Ready, and only ``serving`` says it left rotation.
    """
    names: set[str] = set()
    for slc in slices:
        for endpoint in map(_obj, _list(_obj(slc).get("endpoints"))):
            ref = _obj(endpoint.get("targetRef"))
            name = ref.get("name")
            if not isinstance(name, str) or not name or ref.get("kind", "Pod") != "Pod":
                continue
            conditions = _obj(endpoint.get("conditions"))
            if conditions.get("ready") is False or conditions.get("serving") is False:
                continue
            names.add(name)
    return frozenset(names)
