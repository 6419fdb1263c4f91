"""Accelerator classes: what an AcceleratorClass and a runtime's ``acceleratorConfig`` add
to the engine's and decoder's pods, as OME renders them.

Which class (OME@cfa05c69 ``pkg/acceleratorclassselector/selector.go``
``GetAcceleratorClass``): only a runtime that lists ``acceleratorRequirements.
acceleratorClasses`` has one; the component's ``acceleratorOverride.acceleratorClass``
names it, else ``spec.acceleratorSelector.acceleratorClass``, else the selection policy
picks one among the runtime's (``accelerator_policy``). A named class that does not
exist is OME's ``AcceleratorClassError``.

What it adds (``components/base.go``, ``utils/merging.go``), on the runner's container:

* ``environmentOverride`` of the runtime's ``acceleratorConfig[<class>]`` in the
  ``supportedModelFormats`` entry that fits the model best (``supported_format``): each
  variable set, replacing the container's own value;
* ``runtimeArgsOverride`` merged into ``args`` by flag (``--key=value``, ``--key value``,
  ``--flag``; an override replaces the flag of the same key, new flags are appended;
  ``merge_args``), then ``tensorParallelismOverride``: ``tensorParallelSize`` replaces the
  value of ``--tp-size``, ``--tp`` or ``--tensor-parallel-size`` (args first, then
  command), ``pipelineParallelSize`` that of ``--pp-size``, ``--pp`` or
  ``--pipeline-parallel-size``;
* the class's ``resources`` as requests and limits, when the InferenceService's own
  component sets no resources;
* no ``PARALLELISM_SIZE``;

and on the pod, with a model: the class's ``discovery.nodeSelector`` (under the
component's own selector), and its ``discovery.affinity`` when the InferenceService's
component sets no affinity.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from fractions import Fraction
from typing import Any, Final

from attrs import frozen

from omenative_core.codec import CodecError
from omenative_core.model.spec import JSON
from omenative_core.service.model import InferenceService, ServingRuntime

__all__ = [
    "Accelerator",
    "AcceleratorClass",
    "accelerator_class_from_json",
    "accelerator_for",
    "accelerator_listed",
    "accelerator_name",
    "apply_to_container",
    "apply_to_pod",
    "merge_args",
    "quantity",
]

_SUFFIX: Final = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 10**3), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
    "P": Fraction(10**15), "E": Fraction(10**18),
    "Ki": Fraction(2**10), "Mi": Fraction(2**20), "Gi": Fraction(2**30), "Ti": Fraction(2**40),
    "Pi": Fraction(2**50), "Ei": Fraction(2**60)}
_QUANTITY: Final = re.compile(
    r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:[eE]([+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$")
_QUANTITY_FIELDS: Final = (("capabilities", "memoryGB"), ("capabilities", "memoryBandwidthGBps"),
                            ("cost", "perHour"), ("cost", "spotPerHour"),
                            ("cost", "perMillionTokens"))
_TP_FLAGS: Final = ("--tp-size", "--tp", "--tensor-parallel-size")
_PP_FLAGS: Final = ("--pp-size", "--pp", "--pipeline-parallel-size")


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def quantity(value: object) -> Fraction | None:
    """A Kubernetes quantity (``80Gi``, ``2.5``, ``500m``, ``1e3``, a number) exactly; None
    when ``value`` is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(value) if math.isfinite(value) else None
    m = _QUANTITY.match(str(value))
    if m is None:
        return None
    number = Fraction(m.group(1))
    if m.group(2) is not None:
        return number * Fraction(10) ** int(m.group(2))
    return number * _SUFFIX[m.group(3) or ""]


@frozen
class AcceleratorClass:
    """An AcceleratorClass (cluster-scoped), kept whole in ``raw``."""

    raw: JSON

    @property
    def name(self) -> str:
        """``metadata.name``."""
        return str(_obj(self.raw.get("metadata")).get("name", ""))

    @property
    def discovery(self) -> Mapping[str, Any]:
        """``spec.discovery`` (``nodeSelector``, ``affinity``)."""
        return _obj(_obj(self.raw.get("spec")).get("discovery"))

    @property
    def resources(self) -> list[tuple[str, str]]:
        """``spec.resources``: ``(name, quantity)`` pairs."""
        items = _obj(self.raw.get("spec")).get("resources") or ()
        return [(str(r["name"]), str(r.get("quantity", "0"))) for r in items
                if isinstance(r, Mapping) and isinstance(r.get("name"), str)]


def accelerator_class_from_json(obj: object) -> AcceleratorClass:
    """Check and wrap an AcceleratorClass; a bad field it reads is a ``CodecError``."""
    if not isinstance(obj, Mapping):
        raise CodecError("$: expected an object", path="$")
    name = _obj(obj.get("metadata")).get("name")
    if not isinstance(name, str) or not name:
        raise CodecError("metadata.name: expected a non-empty string", path="metadata.name")
    spec = obj.get("spec")
    if spec is not None and not isinstance(spec, Mapping):
        raise CodecError("spec: expected an object", path="spec")
    selector = _obj(_obj(_obj(spec).get("discovery")).get("nodeSelector"))
    for key, value in selector.items():
        if not isinstance(value, str):
            path = f"spec.discovery.nodeSelector.{key}"
            raise CodecError(f"{path}: expected a string", path=path)
    for block, key in _QUANTITY_FIELDS:
        value = _obj(_obj(spec).get(block)).get(key)
        if value is not None and quantity(value) is None:
            path = f"spec.{block}.{key}"
            raise CodecError(f"{path}: {value!r} is not a Kubernetes quantity", path=path)
    return AcceleratorClass(dict(obj))


def accelerator_listed(runtime: ServingRuntime) -> bool:
    """The runtime lists ``acceleratorRequirements.acceleratorClasses`` (else no component
    of it gets a class, named or by policy)."""
    listed = _obj(runtime.spec.get("acceleratorRequirements")).get("acceleratorClasses")
    return isinstance(listed, list) and bool(listed)


def accelerator_name(isvc: InferenceService, runtime: ServingRuntime | None,
                     component: str) -> str | None:
    """The class ``component`` asks for by name, when its runtime lists classes at all."""
    if runtime is None or component not in ("engine", "decoder") or \
            not accelerator_listed(runtime):
        return None
    override = _obj(_obj(isvc.spec.get(component)).get("acceleratorOverride"))
    name = override.get("acceleratorClass")
    if not isinstance(name, str) or not name:
        name = _obj(isvc.spec.get("acceleratorSelector")).get("acceleratorClass")
    return name if isinstance(name, str) and name else None


@frozen(kw_only=True)
class Accelerator:
    """The class a component runs on, and the runtime's ``acceleratorConfig`` for it."""

    cls: AcceleratorClass
    config: Mapping[str, Any]
    own_resources: bool
    own_affinity: bool
    own_selector: Mapping[str, str]


def accelerator_for(
    isvc: InferenceService, component: str, cls: AcceleratorClass,
    fmt: Mapping[str, Any] | None,
) -> Accelerator:
    """What ``cls`` means for ``component``: the ``acceleratorConfig`` entry of the chosen
    supported format ``fmt`` for it, and what the InferenceService's component sets itself."""
    own = _obj(isvc.spec.get(component))
    runner_resources = _obj(_obj(own.get("runner")).get("resources"))
    config = _obj(_obj(_obj(fmt).get("acceleratorConfig")).get(cls.name))
    selector = {str(k): str(v) for k, v in _obj(own.get("nodeSelector")).items()}
    return Accelerator(cls=cls, config=config,
                       own_resources=bool(runner_resources.get("limits")
                                          or runner_resources.get("requests")
                                          or runner_resources.get("claims")),
                       own_affinity=own.get("affinity") is not None, own_selector=selector)


# ---------------------------------------------------------------------------- args


def _arg_key(arg: str) -> str:
    arg = arg.strip()
    if not arg.startswith("-"):
        return arg
    if "=" in arg:
        return arg[:arg.index("=")]
    parts = arg.split()
    return parts[0] if parts else arg


def _groups(args: list[str]) -> list[tuple[str, list[str]]]:
    """OME's ``parseArgsIntoGroups``: ``--key=value``, ``--key value`` or a lone item."""
    out: list[tuple[str, list[str]]] = []
    i = 0
    while i < len(args):
        arg, key = args[i], _arg_key(args[i])
        if "=" not in arg and i + 1 < len(args) and not args[i + 1].startswith("-"):
            out.append((key, [arg, args[i + 1]]))
            i += 2
            continue
        out.append((key, [arg]))
        i += 1
    return out


def _normalize(args: Iterable[str]) -> list[str]:
    out: list[str] = []
    for arg in args:
        lines = arg.split("\n") if ("\n" in arg or "\\" in arg) else [arg]
        for line in lines:
            text = line.strip().rstrip("\\").strip()
            if text:
                out.append(text)
    return out


def merge_args(args: list[str], overrides: list[str]) -> list[str]:
    """OME's ``MergeArgs``: ``overrides`` merged into ``args`` flag by flag; a multi-line
    ``args`` (newlines or backslashes in its first item) stays one multi-line item."""
    if not overrides:
        return args
    if not args:
        return list(overrides)
    table: dict[str, list[str]] = {}
    for key, values in _groups(_normalize(args)) + _groups(_normalize(overrides)):
        table[key] = values
    merged = [v for values in table.values() for v in values]
    if "\n" in args[0] or "\\" in args[0]:
        return [" \\\n".join(merged)]
    return merged


def _override_param(items: list[str], flags: tuple[str, ...], value: int, *,
                    multiline: bool = False) -> bool:
    """OME's ``OverrideArgParam`` / ``OverrideCommandParam``: the first of ``flags`` found
    gets ``value`` (``--flag=v`` or ``--flag v``; in a multi-line item, a number after it)."""
    for flag in flags:
        if multiline and items:
            pattern = re.compile(re.escape(flag) + r"(?:=|\s+)\d+")
            if pattern.search(items[0]):
                items[0] = pattern.sub(f"{flag}={value}", items[0])
                return True
            continue
        for i, arg in enumerate(items):
            if arg == flag and i + 1 < len(items):
                items[i + 1] = str(value)
                return True
            if arg.startswith(flag + "="):
                items[i] = f"{flag}={value}"
                return True
    return False


def apply_to_container(c: dict[str, Any], acc: Accelerator) -> None:
    """The class's and ``acceleratorConfig``'s changes to the runner container ``c``."""
    env = [dict(e) for e in c.get("env") or () if isinstance(e, Mapping)]
    for name, value in sorted(_obj(acc.config.get("environmentOverride")).items()):
        hit = next((e for e in env if e.get("name") == name), None)
        if hit is None:
            env.append({"name": name, "value": str(value)})
        else:
            hit.pop("valueFrom", None)
            hit["value"] = str(value)
    if env:
        c["env"] = env
    overrides = [str(a) for a in acc.config.get("runtimeArgsOverride") or ()]
    args = merge_args([str(a) for a in c.get("args") or ()], overrides)
    command = [str(a) for a in c.get("command") or ()]
    tp = _obj(acc.config.get("tensorParallelismOverride"))
    for key, flags in (("tensorParallelSize", _TP_FLAGS), ("pipelineParallelSize", _PP_FLAGS)):
        value = tp.get(key)
        multiline = bool(args) and ("\n" in args[0] or "\\" in args[0])
        if isinstance(value, int) and value > 0 and \
                not _override_param(args, flags, value, multiline=multiline):
            _override_param(command, flags, value)
    if args:
        c["args"] = args
    if command:
        c["command"] = command
    if not acc.own_resources and acc.cls.resources:
        res = {k: dict(_obj(v)) for k, v in _obj(c.get("resources")).items()}
        for kind in ("requests", "limits"):
            res.setdefault(kind, {}).update(dict(acc.cls.resources))
        c["resources"] = res


def apply_to_pod(pod: dict[str, Any], acc: Accelerator) -> None:
    """The class's node selector (over the runtime's, under the InferenceService's own
    component's: OME's ``MergeNodeSelector``) and affinity (when the InferenceService's
    component sets none) on ``pod``."""
    selector = {str(k): str(v) for k, v in _obj(acc.cls.discovery.get("nodeSelector")).items()}
    if selector:
        pod["nodeSelector"] = {**_obj(pod.get("nodeSelector")), **selector, **acc.own_selector}
    affinity = acc.cls.discovery.get("affinity")
    if isinstance(affinity, Mapping) and not acc.own_affinity:
        pod["affinity"] = dict(affinity)
