"""OME's runtime selection: which (Cluster)ServingRuntime serves a model.

When an InferenceService names a model and no runtime, OME picks one (``select_runtime``;
OME v0.1.5 ``pkg/runtimeselector``: ``selector.go``, ``matcher.go``, ``scorer.go``):

* candidates are the enabled ServingRuntimes of the ISVC's namespace and the enabled
  ClusterServingRuntimes that support the model (``incompatibility``): the accelerator
  classes the ISVC asks for (``ome.io/accelerator-class`` annotation,
  ``spec.acceleratorSelector.acceleratorClass``, a component's
  ``acceleratorOverride.acceleratorClass``) are all among the runtime's
  ``acceleratorRequirements.acceleratorClasses``; no deployment mode the runtime declares
  for the engine (or decoder) differs from the ISVC's (``mode_mismatch``); one
  ``supportedModelFormats`` entry
  matches the model's format (name and version, with the entry's ``operator``), framework,
  architecture and quantization, each present on both sides or on neither; the model's
  ``modelParameterSize`` lies in the runtime's ``modelSizeRange``;
* a candidate needs an entry with ``autoSelect: true`` and a positive score: the best
  entry's ``modelFormat.weight`` (default 10) plus ``modelFramework.weight`` (default 5),
  times its ``priority`` (default 1);
* namespace runtimes come before cluster runtimes; within each, the higher score wins, then
  the size range closest to the model (sum of the distances to its two bounds), then the
  name in ascending order.

No candidate is OME's ``NoRuntimeFoundError`` text, each excluded runtime with its first
reason. A runtime the ISVC names is used even when it does not declare support for the
model: ``compatibility_advisory`` gives the text of OME's ``RuntimeCompatibilityAdvisory``
Warning (OME v1.3).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from attrs import frozen

from omenative_core.service.model import InferenceService, RuntimeRef, ServingRuntime
from omenative_core.service.models import BaseModel

__all__ = [
    "RuntimeSelection",
    "compatibility_advisory",
    "compatible_runtimes",
    "incompatibility",
    "mode_mismatch",
    "select_runtime",
    "supported_format",
]

FORMAT_WEIGHT: Final = 10
FRAMEWORK_WEIGHT: Final = 5
DEFAULT_PRIORITY: Final = 1
_SIZE_UNITS: Final = {"T": 1e12, "B": 1e9, "M": 1e6}


def _obj(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _str(obj: Mapping[str, Any], key: str) -> str | None:
    value = obj.get(key)
    return value if isinstance(value, str) else None


def parse_size(text: str | None) -> float | None:
    """OME's ``parseModelSize``: ``"8B"`` -> 8e9 (``T``, ``B``, ``M`` suffixes)."""
    if text is None:
        return None
    scale = _SIZE_UNITS.get(text[-1:], 1.0)
    body = text[:-1] if text[-1:] in _SIZE_UNITS else text
    try:
        return float(body) * scale
    except ValueError:
        return 0.0


def _version_parts(text: str) -> tuple[int, ...] | None:
    parts = text.lstrip("vV").split(".")
    return tuple(int(p) for p in parts) if all(p.isdigit() for p in parts) else None


def _version_ok(wanted: Mapping[str, Any], have: str) -> bool:
    """The runtime entry's version (with its ``operator``) against the model's."""
    need = _str(wanted, "version") or ""
    operator = _str(wanted, "operator") or "Equal"
    a, b = _version_parts(have), _version_parts(need)
    if a is None or b is None or operator == "Equal":
        return have.lstrip("vV") == need.lstrip("vV")
    if len(a) != len(b):
        return False
    if operator == "GreaterThan":
        return a > b
    if operator == "GreaterThanOrEqual":
        return a >= b
    return a == b


def _versions(what: str, want: Mapping[str, Any], model: Mapping[str, Any]) -> str | None:
    have, need = _str(model, "version"), _str(want, "version")
    if have is not None and need is not None:
        ok = _version_ok(want, have)
        return None if ok else f"{what} version mismatch (model={have}, runtime={need})"
    if need is not None:
        return f"model has no {what} version but runtime requires {need}"
    if have is not None:
        return f"model has {what} version but runtime has no version requirement"
    return None


def _pair(field: str, entry: Mapping[str, Any], model: Mapping[str, Any] | None) -> str | None:
    """Name and version of ``field`` (format or framework) on both sides, or the mismatch."""
    want = entry.get(field)
    what = "format" if field == "modelFormat" else "framework"
    reason: str | None = None
    if not isinstance(want, Mapping):
        if field == "modelFormat":
            reason = "unknown mismatch"
        elif model is not None:
            reason = (f"model has framework {model.get('name')} but runtime has no "
                      "framework requirement")
    elif model is None:
        reason = f"model has no framework but runtime requires {want.get('name')}"
    elif want.get("name") != model.get("name"):
        reason = f"{what} name mismatch (model={model.get('name')}, runtime={want.get('name')})"
    else:
        reason = _versions(what, want, model)
    return reason


def _entry_mismatch(entry: Mapping[str, Any], model: BaseModel) -> str | None:
    """Why ``supportedModelFormats`` entry ``entry`` does not fit ``model`` (None: it fits)."""
    reasons: list[str] = []
    for key, have, what in (("modelArchitecture", model.architecture, "architecture"),
                            ("quantization", model.quantization, "quantization")):
        need = _str(entry, key)
        if have is not None and need is not None and have != need:
            reasons.append(f"{what} mismatch (model={have}, runtime={need})")
        elif have is None and need is not None:
            reasons.append(f"model has no {what} but runtime requires {need}")
        elif have is not None and need is None:
            reasons.append(f"model has {what} {have} but runtime has no {what} requirement")
    fmt = {"name": model.format_name, "version": model.format_version}
    if model.format_version is None:
        fmt.pop("version")
    for field, value in (("modelFormat", fmt), ("modelFramework", model.framework)):
        reason = _pair(field, entry, value)
        if reason is not None:
            reasons.append(reason)
    return ", ".join(reasons) if reasons else None


def _formats(runtime: ServingRuntime) -> list[Mapping[str, Any]]:
    return [f for f in runtime.spec.get("supportedModelFormats") or () if isinstance(f, Mapping)]


def _wanted_classes(isvc: InferenceService) -> set[str]:
    out: set[str] = set()
    if "ome.io/accelerator-class" in isvc.annotations:
        out.add(isvc.annotations["ome.io/accelerator-class"])
    selector = _str(_obj(isvc.spec.get("acceleratorSelector")), "acceleratorClass")
    if selector:
        out.add(selector)
    for c in ("engine", "decoder"):
        override = _str(_obj(_obj(isvc.spec.get(c)).get("acceleratorOverride")),
                        "acceleratorClass")
        if override:
            out.add(override)
    return out


_MODES: Final = ("RawDeployment", "OMENative", "MultiNode", "VirtualDeployment")


def _declared_mode(block: Mapping[str, Any]) -> str | None:
    """The ``ome.io/deploymentMode`` a component block's annotations declare (a value
    that is not one of OME's modes counts as none, as in OME)."""
    mode = _obj(block.get("annotations")).get("ome.io/deploymentMode")
    return mode if mode in _MODES else None


def mode_mismatch(runtime: ServingRuntime, isvc: InferenceService) -> str | None:
    """OME's deployment-mode filter (ome-docs ``reference/matching/
    runtime-deployment-mode-matching.md``): the engine, and the decoder when the ISVC has
    one, fail when the runtime's ``<c>Config`` annotation and the ISVC's component
    annotation (else ``spec.deploymentMode``, OMENative or RawDeployment only) both
    declare a mode and the modes differ."""
    service_mode = isvc.spec.get("deploymentMode")
    service_mode = service_mode if service_mode in ("OMENative", "RawDeployment") else None
    for comp in ("engine", "decoder"):
        own = isvc.spec.get(comp)
        if comp == "decoder" and not isinstance(own, Mapping):
            continue
        wanted = _declared_mode(_obj(own)) or service_mode
        offered = _declared_mode(_obj(runtime.spec.get(f"{comp}Config")))
        if wanted is not None and offered is not None and wanted != offered:
            return (f"runtime {comp} deployment mode {offered} does not match requested "
                    f"{comp} deployment mode {wanted}")
    return None


def _size_range(runtime: ServingRuntime) -> tuple[float, float] | None:
    rng = runtime.spec.get("modelSizeRange")
    if not isinstance(rng, Mapping):
        return None
    low, high = parse_size(_str(rng, "min")), parse_size(_str(rng, "max"))
    return (-math.inf if low is None else low, math.inf if high is None else high)


def incompatibility(runtime: ServingRuntime, model: BaseModel,
                    isvc: InferenceService) -> str | None:
    """The first reason ``runtime`` cannot serve ``model`` (OME's compatibility report),
    or None when it can."""
    if runtime.disabled:
        return "runtime is disabled"
    wanted = _wanted_classes(isvc)
    if wanted:
        offered = _obj(runtime.spec.get("acceleratorRequirements")).get("acceleratorClasses")
        if not isinstance(offered, list) or not wanted <= set(offered):
            return "runtime does not support the required accelerator class"
    mismatch = mode_mismatch(runtime, isvc)
    if mismatch is not None:
        return mismatch
    formats = _formats(runtime)
    mismatches = [_entry_mismatch(f, model) for f in formats]
    if not formats or all(m is not None for m in mismatches):
        fw = model.framework or {}
        label = ":".join(p for p in ("mt:" + model.format_name, model.format_version,
                                     model.architecture, model.quantization,
                                     _str(fw, "name"), _str(fw, "version")) if p)
        why = "; ".join(m for m in mismatches if m) or "no supported formats defined"
        return f"model format '{label}' not in supported formats: {why}"
    size, rng = parse_size(model.parameter_size), _size_range(runtime)
    if size is not None and rng is not None and not rng[0] <= size <= rng[1]:
        spec = _obj(runtime.spec.get("modelSizeRange"))
        return (f"model size {model.parameter_size} is outside supported range "
                f"[{spec.get('min', '-inf')}, {spec.get('max', 'inf')}]")
    return None


def _entry_score(entry: Mapping[str, Any], model: BaseModel, *, own_priority: bool = True) -> int:
    """OME's ``CalculateFormatScore`` with the entry's priority (or the default one)."""
    priority = entry.get("priority") if own_priority else None
    prio = priority if isinstance(priority, int) and not isinstance(priority, bool) \
        else DEFAULT_PRIORITY
    fmt = entry.get("modelFormat")
    if not isinstance(fmt, Mapping) or fmt.get("name") != model.format_name:
        return 0
    need = _str(fmt, "version")
    if need is not None and model.format_version is not None and \
            not _version_ok(fmt, model.format_version):
        return 0
    score = int(fmt.get("weight") or FORMAT_WEIGHT) * prio
    fw, have = entry.get("modelFramework"), model.framework
    if isinstance(fw, Mapping) and have is not None:
        if fw.get("name") != have.get("name"):
            return 0
        version = _str(have, "version")
        if _str(fw, "version") is not None and version is not None and \
                not _version_ok(fw, version):
            return 0
        score += int(fw.get("weight") or FRAMEWORK_WEIGHT) * prio
    elif isinstance(fw, Mapping) or have is not None:
        return 0
    return score


def _score(runtime: ServingRuntime, model: BaseModel) -> int:
    entries = [f for f in _formats(runtime) if f.get("autoSelect") is not False]
    return max((_entry_score(f, model) for f in entries), default=0)


def _size_distance(runtime: ServingRuntime, model: BaseModel) -> float:
    size, rng = parse_size(model.parameter_size), _size_range(runtime)
    if size is None or rng is None:
        return 0.0
    return abs(rng[0] - size) + abs(rng[1] - size)


@frozen
class RuntimeSelection:
    """The runtime chosen for a model, or why there is none (OME's message)."""

    runtime: ServingRuntime | None
    message: str = ""
    score: int = 0

    @property
    def ref(self) -> RuntimeRef | None:
        """A reference to the chosen runtime."""
        if self.runtime is None:
            return None
        return RuntimeRef(name=self.runtime.name, kind=self.runtime.kind)


def _visible(isvc: InferenceService, runtimes: Iterable[ServingRuntime]) -> list[ServingRuntime]:
    return [rt for rt in runtimes
            if rt.kind == "ClusterServingRuntime" or rt.namespace == isvc.namespace]


def _rank(
    isvc: InferenceService, model: BaseModel, visible: Sequence[ServingRuntime]
) -> tuple[list[RuntimeSelection], list[str]]:
    ranked: list[tuple[int, int, float, str, ServingRuntime]] = []
    excluded: list[str] = []
    for rt in visible:
        reason = incompatibility(rt, model, isvc)
        if reason is not None:
            if not rt.disabled:
                excluded.append(f"{rt.name} ({reason})")
            continue
        if not any(f.get("autoSelect") is True for f in _formats(rt)):
            continue
        score = _score(rt, model)
        if score > 0:
            scope = 0 if rt.kind == "ServingRuntime" else 1
            ranked.append((scope, -score, _size_distance(rt, model), rt.name, rt))
    ranked.sort(key=lambda t: t[:4])
    return [RuntimeSelection(runtime=t[4], score=-t[1]) for t in ranked], excluded


def compatible_runtimes(
    isvc: InferenceService, model: BaseModel, runtimes: Sequence[ServingRuntime]
) -> list[RuntimeSelection]:
    """OME's ``GetCompatibleRuntimes``: every candidate with its score, best first."""
    return _rank(isvc, model, _visible(isvc, runtimes))[0]


def select_runtime(
    isvc: InferenceService, model: BaseModel, runtimes: Sequence[ServingRuntime]
) -> RuntimeSelection:
    """The runtime OME auto-selects for ``model`` (module docstring), or none with
    OME's ``no runtime found to support model ...`` message."""
    visible = _visible(isvc, runtimes)
    ranked, excluded = _rank(isvc, model, visible)
    if ranked:
        return ranked[0]
    ns = sum(1 for rt in visible if rt.kind == "ServingRuntime")
    message = (f"no runtime found to support model {model.format_name or 'unknown'} with "
               f"format {model.format_name} in namespace {isvc.namespace}")
    if visible:
        message += (f". Checked {len(visible)} runtimes ({ns} namespace-scoped, "
                    f"{len(visible) - ns} cluster-scoped)")
    if excluded:
        message += ". Excluded runtimes: " + "; ".join(sorted(excluded))
    return RuntimeSelection(runtime=None, message=message)


def supported_format(
    runtime: ServingRuntime, model: BaseModel, *, named: bool
) -> Mapping[str, Any] | None:
    """OME's ``GetSupportedModelFormat``: the runtime's ``supportedModelFormats`` entry that
    fits ``model`` best (the default priority for all; the first of equal scores), among
    all entries for a runtime the ISVC names, else among the ``autoSelect: true`` ones."""
    best: Mapping[str, Any] | None = None
    top = 0
    for entry in _formats(runtime):
        if not named and entry.get("autoSelect") is not True:
            continue
        score = _entry_score(entry, model, own_priority=False)
        if score > top:
            best, top = entry, score
    return best


def compatibility_advisory(
    isvc: InferenceService, model: BaseModel, runtime: ServingRuntime, model_name: str
) -> str | None:
    """OME's ``RuntimeCompatibilityAdvisory`` text when the runtime the ISVC names does not
    declare support for its model (the runtime is used anyway), else None."""
    reason = incompatibility(runtime, model, isvc)
    if reason is None or runtime.disabled:
        return None
    return (f"Runtime {runtime.name} does not declare support for model {model_name} "
            f"(runtime {runtime.name} does not support model {model.format_name}: {reason}); "
            "proceeding because the runtime was named explicitly")
