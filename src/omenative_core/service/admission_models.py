"""Admission of an InferenceService's model and runtime, as OME v1.3's validator decides.

OME's webhook (ome-projects/ome ``pkg/webhook/admission/isvc/inference_service_validation.go``
at ca73aa4c313b13c474be44a61de8200b77ac61a1: ``validateModelExists``,
``validateRuntimeAndModelResolution``, ``validateRuntimeOnlyAvailability``,
``resolveModelAndRuntime``) looks the model and runtimes up at admission:

1. ``spec.model`` names no BaseModel (namespace) or ClusterBaseModel: refused,
   ``ModelNotFound``.
2. With an engine, and either a runtime named or an engine without a complete runner (an
   image on ``runner``, or on both ``leader.runner`` and ``worker.runner``), the model is
   resolved: a disabled one is refused (``ModelDisabled``); a named runtime that is missing
   or disabled is refused; a named runtime that does not declare the model's format is
   admitted with OME's advisory warning; with no runtime named, the auto-selected runtime is
   named in a warning, and none is refused.
3. No model, a runtime named and live-synced (``autoSync`` not false): a disabled runtime is
   refused; a missing one is admitted (the controller reports it).

The decisions reuse the controller's own resolution (``resolve_sources``), so admission and
the controller never disagree about which runtime serves a model. ``models`` is None when
OME's model CRDs are not served: then ``spec.model`` is not checked (omenative's extension,
docs/ome-compatibility.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from attrs import frozen

from omenative_core.service.model import InferenceService, ServingRuntime
from omenative_core.service.models import BaseModel, model_ref
from omenative_core.service.rejection import Rejection, reject, warn
from omenative_core.service.resolve import resolve_sources

__all__ = ["AdmissionSources", "has_full_runner", "model_admission"]

_BLOCKING: Final = frozenset({"ModelNotFound", "ModelDisabled", "RuntimeNotFound",
                              "RuntimeDisabled"})
_ADVISORY: Final = "RuntimeCompatibilityAdvisory"


@frozen
class AdmissionSources:
    """What admission read of the cluster: every runtime visible to the InferenceService,
    and its models (None when OME's model CRDs are not served)."""

    runtimes: tuple[ServingRuntime, ...] = ()
    models: tuple[BaseModel, ...] | None = None
    policy_feature: bool | None = None
    """OME's AutoscalerPolicy CRD is served (None: not looked up: the ISVC names none)."""


def _image(role: object) -> bool:
    if not isinstance(role, Mapping):
        return False
    runner = role.get("runner")
    return isinstance(runner, Mapping) and bool(runner.get("image"))


def has_full_runner(engine: Mapping[str, Any]) -> bool:
    """OME's ``hasFullRunnerConfig``: the engine's runner has an image, or both its leader's
    and its worker's runners do."""
    if _image(engine):
        return True
    return _image(engine.get("leader")) and _image(engine.get("worker"))


def _runtime_only(isvc: InferenceService, runtimes: Sequence[ServingRuntime]) -> list[Rejection]:
    ref = isvc.runtime_ref
    raw = isvc.spec.get("runtime")
    if ref is None or (isinstance(raw, Mapping) and raw.get("autoSync") is False):
        return []
    for rt in runtimes:
        if rt.kind == ref.kind and rt.name == ref.name and rt.disabled and (
                rt.kind == "ClusterServingRuntime" or rt.namespace == isvc.namespace):
            return [reject("RuntimeDisabled", "spec.runtime.name",
                           f"{rt.kind} {rt.name} is disabled")]
    return []


def model_admission(
    isvc: InferenceService,
    runtimes: Sequence[ServingRuntime],
    models: Sequence[BaseModel] | None,
) -> list[Rejection]:
    """What OME's validator says of ``isvc``'s model and runtime (module docstring): the
    refusals, and the warnings (``Rejection.warning``) of an admitted object."""
    mref = model_ref(isvc) if models is not None else None
    engine = isvc.component("engine")
    if mref is None:
        return _runtime_only(isvc, runtimes) if engine is not None else []
    assert models is not None
    found = resolve_sources(isvc, runtimes, models)
    if found.problem is not None and found.problem[0] == "ModelNotFound":
        return [reject("ModelNotFound", "spec.model.name",
                       f"referenced model {mref.name!r} not found in namespace "
                       f"{isvc.namespace!r}: ensure a BaseModel exists in this namespace or a "
                       "ClusterBaseModel exists cluster-wide with this name")]
    named = isvc.runtime_ref is not None
    if engine is None or (not named and has_full_runner(engine.raw)):
        return []
    problem = found.problem
    if problem is not None and problem[0] in _BLOCKING:
        reason, text = problem
        if reason == "ModelDisabled":
            text = f"model {mref.name} is disabled"
        elif not named:
            text = (f"no supporting runtime found for model {mref.name} and engine does not "
                    f"have complete runner configuration: {text}")
        else:
            text = f"runtime {found.ref.name if found.ref else ''} does not support model " \
                   f"{mref.name}: {text}"
        return [reject(reason, "spec.runtime" if reason.startswith("Runtime") else
                       "spec.model.name", text)]
    out = [warn(_ADVISORY, "spec.runtime.name", e.message)
           for e in found.events if e.reason == _ADVISORY]
    if not named and found.ref is not None:
        out.append(warn("RuntimeAutoSelected", "spec.runtime",
                        f"Runtime {found.ref.name} will be auto-selected for model {mref.name}"))
    return out
