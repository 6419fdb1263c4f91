"""JSON codec: OME's camelCase wire format <-> the core's attrs model, strictly.

One cattrs converter serves every attrs class of the model:

* field names become camelCase (``instance_ready_timeout`` -> ``instanceReadyTimeout``,
  ``request_uuid`` -> ``requestUUID``); unknown input fields are ignored, so an OME manifest
  with fields we do not model (``modelRef``, ``autoscaler``, ...) still loads;
* on output, a field is omitted when it is None, or an empty tuple/mapping, and that is also
  its default (so the output is small and reads back to the same value). Status types
  follow OME's Go tags exactly (``encoding/json`` with ``omitempty``): a zero string,
  number or false is omitted unless OME's field has no ``omitempty`` (``phase``, ``step``,
  a condition's ``message``, ...), fields come in OME's struct order, and an absent
  ``incarnation`` reads as 0, as OME's decoder reads it;
* timestamps are RFC 3339 at second precision, durations are Go durations (``30m0s``),
  IntOrString is an int or a string, pod templates and other JSON objects pass through;
* input is type-checked: ``"3"`` is not an integer and ``30`` is not a duration. Any error
  is a ``CodecError`` naming the JSON path and the bad value, never a cattrs traceback.

The status and whole InferenceReplica objects (whose rows are DenseV1 or ColumnarV2) are
read and written by ``omenative_core.status.wire``; the observed views of pods, nodes and
other objects by ``omenative_core.views``. Both build on this module, never the reverse.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from types import ModuleType, NoneType, UnionType
from typing import Any, TypeVar, Union, get_args, get_origin

import attrs
from cattrs import Converter
from cattrs.errors import (
    ClassValidationError,
    IterableValidationError,
    IterableValidationNote,
    StructureHandlerNotFoundError,
)
from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

from omenative_core.model.spec import (
    InferenceReplicaSpec,
)
from omenative_core.model.status import (
    Condition,
    InferenceReplicaStatus,
    InstanceOperation,
    InstanceStatus,
    InstanceTermination,
    MigrationStatus,
    RetryBlock,
)
from omenative_core.model.timefmt import (
    format_duration,
    format_time,
    parse_duration,
    parse_time,
    to_second,
)

__all__ = [
    "API_VERSION",
    "KIND",
    "CodecError",
    "camel_name",
    "converter",
    "from_json",
    "show_value",
    "spec_from_json",
    "spec_to_json",
    "to_json",
    "warm",
]

API_VERSION = "ome.io/v1beta1"
"""apiVersion of InferenceReplica objects."""

KIND = "InferenceReplica"
"""kind of InferenceReplica objects."""

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


def show_value(value: object) -> str:
    """``repr(value)`` cut to 80 characters, for error messages that quote bad input."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


# --------------------------------------------------------------------------------------------
# leaf hooks (strict: JSON has no implicit conversions)


def _structure_int(obj: object, _: object) -> int:
    if type(obj) is int or (isinstance(obj, int) and not isinstance(obj, bool)):
        return obj
    raise _Mismatch(f"expected an integer, got {show_value(obj)}")


def _structure_str(obj: object, _: object) -> str:
    if isinstance(obj, str):
        return obj
    raise _Mismatch(f"expected a string, got {show_value(obj)}")


def _structure_bool(obj: object, _: object) -> bool:
    if isinstance(obj, bool):
        return obj
    raise _Mismatch(f"expected true or false, got {show_value(obj)}")


def _structure_float(obj: object, _: object) -> float:
    if isinstance(obj, int | float) and not isinstance(obj, bool):
        return float(obj)
    raise _Mismatch(f"expected a number, got {show_value(obj)}")


def _structure_datetime(obj: object, _: object) -> datetime:
    return to_second(parse_time(obj))


def _structure_timedelta(obj: object, _: object) -> timedelta:
    return parse_duration(obj)


def _structure_json_object(obj: object, _: object) -> Mapping[str, Any]:
    if isinstance(obj, Mapping):
        return obj
    raise _Mismatch(f"expected an object, got {show_value(obj)}")


def _structure_str_map(obj: object, _: object) -> dict[str, str]:
    if not isinstance(obj, Mapping):
        raise _Mismatch(f"expected an object of strings, got {show_value(obj)}")
    out: dict[str, str] = {}
    errors: list[Exception] = []
    for key, value in obj.items():
        if isinstance(key, str) and isinstance(value, str):
            out[key] = value
            continue
        exc = _Mismatch(
            f"expected a string, got {show_value(value)}"
            if isinstance(key, str)
            else f"expected a string key, got {show_value(key)}"
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
    raise _Mismatch(f"expected an integer or a string such as '25%', got {show_value(obj)}")


# --------------------------------------------------------------------------------------------
# the converter


_GO_TAGGED: frozenset[type] = frozenset(
    {
        InferenceReplicaStatus,
        InstanceStatus,
        Condition,
        InstanceOperation,
        InstanceTermination,
        RetryBlock,
        MigrationStatus,
    }
)
"""Status types written exactly as OME's Go structs are: zero values omitted per ``omitempty``.

``RolloutHold`` is not among them yet: the InferenceService status mirrors it and its
tests pin ``target: ""``; OME omits an empty target.
"""

_GO_WRITES_ZERO: frozenset[tuple[type, str]] = frozenset(
    {
        (InstanceStatus, "phase"),
        (Condition, "reason"),
        (Condition, "message"),
        (InstanceTermination, "pod_name"),
        (InstanceOperation, "step"),
        (RetryBlock, "attempts_started"),
        (MigrationStatus, "source_instance"),
    }
)
"""Fields of ``_GO_TAGGED`` types whose Go JSON tag has no ``omitempty``."""


def _is_go_zero(value: object) -> bool:
    return value is False or (type(value) in (int, str) and not value)


def _omit_when_default(cl: type, field: attrs.Attribute[Any]) -> bool:
    """Omit a field on output when its value equals its default, if that default is "empty".

    Empty is None or an empty collection for every type; for the status types of
    ``_GO_TAGGED`` it is also Go's zero value ("", 0, false) unless OME writes the field
    even then (``_GO_WRITES_ZERO``).
    """
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
    if cl in _GO_TAGGED and (cl, field.name) not in _GO_WRITES_ZERO:
        return _is_go_zero(default)
    return False


def _json_name(cl: type, field: attrs.Attribute[Any]) -> str:
    if cl is InferenceReplicaStatus and field.name == "instances":
        return "instanceStatuses"  # DenseV1; status_to_json may swap in ColumnarV2 columns
    return camel_name(field.name)


def _register_structure_hooks(conv: Converter) -> None:
    """Strict leaves; optional, tuple, mapping, IntOrString and attrs classes on top."""
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
                raise _Mismatch(f"expected a list, got {show_value(obj)}")
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
        # OME's incarnation is omitempty: an absent one is 0, not the model's default of 1
        absent_zero = "incarnation" if cl is InstanceStatus else None

        def hook(obj: Any, _: Any) -> Any:
            if not isinstance(obj, Mapping):
                raise _Mismatch(f"expected an object, got {show_value(obj)}")
            if absent_zero is not None and absent_zero not in obj:
                obj = {**obj, absent_zero: 0}
            return fn(obj, cl)

        return hook

    conv.register_structure_hook_factory(attrs.has, attrs_factory)
    conv.register_structure_hook_factory(_is_mapping, mapping_factory)
    conv.register_structure_hook_factory(_is_homogeneous_tuple, tuple_factory)
    conv.register_structure_hook_factory(_is_optional, optional_factory)
    # registered last: takes precedence over the generic optional hook for IntOrStr | None
    conv.register_structure_hook_factory(_is_int_or_str, lambda _t: _structure_int_or_str)


def _in_declared_order(
    fn: Callable[[Any], dict[str, Any]], order: list[str]
) -> Callable[[Any], dict[str, Any]]:
    """``fn`` with its keys put back in declaration (OME's struct) order.

    cattrs writes the always-present fields first, then the omittable ones.
    """

    def hook(value: Any) -> dict[str, Any]:
        out = fn(value)
        return {key: out[key] for key in order if key in out}

    return hook


def _register_unstructure_hooks(conv: Converter) -> None:
    """Compact camelCase output; OME's field order and omitempty rules for status types."""
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
        fields = attrs.fields(cl)
        omitted = [_omit_when_default(cl, f) for f in fields]
        overrides: dict[str, Any] = {
            f.name: override(rename=_json_name(cl, f), omit_if_default=omit)
            for f, omit in zip(fields, omitted, strict=True)
        }
        fn = make_dict_unstructure_fn(cl, conv, **overrides)
        if omitted != sorted(omitted):
            fn = _in_declared_order(fn, [_json_name(cl, f) for f in fields])
        if cl is not InstanceStatus:
            return fn

        def row_hook(value: InstanceStatus) -> dict[str, Any]:
            out = fn(value)
            if not value.incarnation:  # omitempty, though the model's default is 1
                del out["incarnation"]
            return out

        return row_hook

    conv.register_unstructure_hook_factory(attrs.has, unstructure_attrs_factory)
    conv.register_unstructure_hook_factory(_is_mapping, lambda _t: unstructure_mapping)
    conv.register_unstructure_hook_factory(_is_homogeneous_tuple, unstructure_tuple_factory)


def _make_converter() -> Converter:
    conv = Converter(detailed_validation=True, forbid_extra_keys=False)
    _register_structure_hooks(conv)
    _register_unstructure_hooks(conv)
    return conv


converter = _make_converter()
"""The cattrs converter for the model (camelCase, strict input, compact output)."""


def warm(*where: ModuleType | type, conv: Converter | None = None) -> int:
    """Build the converter's hooks now for every attrs class of ``where`` (modules, or
    classes) that JSON can decode into; how many classes that was.

    cattrs generates a class's structure and unstructure code the first time it meets the
    class (and the classes its fields name): several milliseconds each, tens for the
    status. A long-running process calls this at start, so that work does not land in its
    first passes on the event loop."""
    conv = conv or converter
    classes: list[type] = []
    for item in where:
        if isinstance(item, ModuleType):
            classes += [v for v in vars(item).values()
                        if isinstance(v, type) and attrs.has(v) and v.__module__ == item.__name__]
        else:
            classes.append(item)
    warmed = 0
    for cl in classes:
        try:
            conv.get_structure_hook(cl)
        except StructureHandlerNotFoundError:  # a field no JSON decodes into (a callable)
            continue
        conv.get_unstructure_hook(cl)
        warmed += 1
    return warmed


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
