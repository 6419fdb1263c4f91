"""The model and runtime an InferenceService renders with, resolved as OME resolves them.

``resolve_sources`` (OME v0.1.5 ``inferenceservice/controller.go`` steps 1 and 2, with
OME v1.3's treatment of a named runtime):

1. ``spec.model`` names a model: it must exist (``ModelNotFound``) and be enabled
   (``ModelDisabled``), or nothing is rendered.
2. ``spec.runtime`` names a runtime: it is used. When it does not declare support for the
   model, the plan carries OME's ``RuntimeCompatibilityAdvisory`` Warning and renders anyway.
3. No ``spec.runtime`` but a model: the runtime OME auto-selects (``select_runtime``); none
   is ``RuntimeNotFound`` with OME's ``no runtime found to support model ...`` message.
4. A named runtime is merged with its ``ome.io/inherit-from`` chain (``inheritance``); a
   chain that does not resolve blocks with ``RuntimeValidationError`` (OME's Event reason;
   ``Runtime <rt> does not support model <model>: <chain error>``), or
   ``RuntimeFetchError`` without a model.
5. A named or selected runtime that does not exist is ``RuntimeNotFound``; a disabled one
   (after inheritance) ``RuntimeDisabled``.
6. ``spec.runtime.autoSync: false``: the spec comes from a runtime revision
   (``runtime_pin``); a pinned ISVC whose runtime is gone keeps serving from it.
7. With a model, the engine's and decoder's accelerator class (``accelerators``,
   ``accelerator_policy``): a class named that does not exist is ``AcceleratorClassError``,
   OME's Event reason; a policy that picks nothing is a Warning in
   ``accelerator_warnings`` (the component renders without a class, as in OME).

``models`` None means the caller does not look models up (the simulator, older callers):
``spec.model`` is then ignored, as before models were rendered.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from attrs import evolve, field, frozen

from omenative_core.service.accelerator_policy import policy_choice
from omenative_core.service.accelerators import (
    Accelerator,
    AcceleratorClass,
    accelerator_for,
    accelerator_listed,
    accelerator_name,
)
from omenative_core.service.inheritance import InheritanceError, inherited_runtime
from omenative_core.service.model import InferenceService, RuntimeRef, ServingRuntime
from omenative_core.service.models import BaseModel, find_model, model_problem, model_ref
from omenative_core.service.objects import find_runtime
from omenative_core.service.plan import ServiceEvent
from omenative_core.service.runtime_pin import Pin, RuntimeRevision, pinning, resolve_pin
from omenative_core.service.runtime_preset import preset_problem
from omenative_core.service.runtime_select import (
    compatibility_advisory,
    select_runtime,
    supported_format,
)

__all__ = ["ADVISORY", "Sources", "resolve_sources"]

ADVISORY = "RuntimeCompatibilityAdvisory"
"""OME's Warning reason: a named runtime does not declare support for the model."""


@frozen(kw_only=True)
class Sources:
    """What the components render from: the model, the runtime (and how it was found),
    the problem that blocks every component, and Events for the pass."""

    model: BaseModel | None = None
    ref: RuntimeRef | None = None
    runtime: ServingRuntime | None = None
    problem: tuple[str, str] | None = None
    events: tuple[ServiceEvent, ...] = ()
    accelerators: Mapping[str, Accelerator] = field(factory=dict)
    pin: Pin | None = None
    accelerator_warnings: tuple[ServiceEvent, ...] = ()


def _runtime_problem(ref: RuntimeRef, runtime: ServingRuntime | None) -> tuple[str, str] | None:
    if runtime is None:
        return ("RuntimeNotFound", f"{ref.kind} {ref.name!r} not found")
    if runtime.disabled:
        return ("RuntimeDisabled", f"{runtime.kind} {runtime.name!r} is disabled")
    preset = preset_problem(runtime)
    return ("RuntimeValidationError", preset) if preset is not None else None


def _accelerators(
    isvc: InferenceService, sources: Sources, classes: Sequence[AcceleratorClass] | None
) -> Sources:
    """``sources`` with the engine's and decoder's accelerator classes, or the problem."""
    model, runtime = sources.model, sources.runtime
    if sources.problem is not None or model is None or runtime is None:
        return sources
    found: dict[str, Accelerator] = {}
    warnings: list[ServiceEvent] = []
    fmt = supported_format(runtime, model, named=isvc.runtime_ref is not None)
    for component in ("engine", "decoder"):
        name = accelerator_name(isvc, runtime, component)
        if name is None and accelerator_listed(runtime):
            choice = policy_choice(isvc, runtime, component, classes or ())
            if choice.blocked is not None:
                return evolve(sources, problem=choice.blocked)
            if choice.warning is not None and (component in isvc.spec
                                               or runtime.config(component) is not None):
                warnings.append(ServiceEvent(type="Warning", reason=choice.warning[0],
                                             message=choice.warning[1]))
            name = choice.name
        if name is None:
            continue
        cls = next((c for c in classes or () if c.name == name), None)
        if cls is None:
            return evolve(sources, problem=(
                "AcceleratorClassError",
                f"Failed to get accelerator class for {component}: acceleratorclass "
                f"{name!r} not found"))
        found[component] = accelerator_for(isvc, component, cls, fmt)
    return evolve(sources, accelerators=found, events=(*sources.events, *warnings),
                  accelerator_warnings=tuple(warnings))


def _pinned_runtime(isvc: InferenceService, ref: RuntimeRef, live: ServingRuntime | None,
                    spec: Mapping[str, object]) -> ServingRuntime:
    """The runtime rendered from a pinned revision's ``spec`` (the live one's metadata)."""
    if live is not None:
        return ServingRuntime({**live.raw, "spec": dict(spec)})
    meta: dict[str, object] = {"name": ref.name}
    if ref.kind == "ServingRuntime":
        meta["namespace"] = isvc.namespace
    return ServingRuntime({"kind": ref.kind, "metadata": meta, "spec": dict(spec)})


def resolve_sources(
    isvc: InferenceService,
    runtimes: Sequence[ServingRuntime],
    models: Sequence[BaseModel] | None,
    auto_selected: RuntimeRef | None = None,
    accelerator_classes: Sequence[AcceleratorClass] | None = None,
    revisions: Sequence[RuntimeRevision] | None = None,
) -> Sources:
    """The model and runtime ``isvc`` renders with, or the problem that stops it."""
    mref = model_ref(isvc) if models is not None else None
    model: BaseModel | None = None
    if mref is not None:
        assert models is not None
        model = find_model(mref, isvc.namespace, models)
        problem = model_problem(mref, model, isvc.namespace)
        if problem is not None:
            return Sources(ref=isvc.runtime_ref, problem=problem)
    ref = isvc.runtime_ref or auto_selected
    if ref is None and model is not None:
        selection = select_runtime(isvc, model, runtimes)
        if selection.ref is None:
            return Sources(model=model, problem=("RuntimeNotFound", selection.message))
        ref = selection.ref
    runtime = find_runtime(isvc, runtimes, ref) if ref is not None else None
    if runtime is not None and isvc.runtime_ref is not None:
        try:
            runtime = inherited_runtime(runtime, runtimes)
        except InheritanceError as exc:
            reason = "RuntimePinError" if pinning(isvc) else \
                "RuntimeFetchError" if mref is None else "RuntimeValidationError"
            message = str(exc) if mref is None or reason == "RuntimePinError" else \
                f"Runtime {runtime.name} does not support model {mref.name}: {exc}"
            return Sources(model=model, ref=ref, problem=(reason, message))
    pin = resolve_pin(isvc, runtime, revisions or ())
    if pin is not None:
        assert ref is not None
        if pin.spec is None:
            return Sources(model=model, ref=ref, pin=pin, problem=pin.problem)
        runtime = _pinned_runtime(isvc, ref, runtime, pin.spec)
    problem = _runtime_problem(ref, runtime) if ref is not None else None
    events: tuple[ServiceEvent, ...] = ()
    if problem is None and model is not None and runtime is not None and isvc.runtime_ref:
        assert mref is not None
        advisory = compatibility_advisory(isvc, model, runtime, mref.name)
        if advisory is not None:
            events = (ServiceEvent(type="Warning", reason=ADVISORY, message=advisory),)
    return _accelerators(isvc, Sources(model=model, ref=ref, runtime=runtime, problem=problem,
                                       events=events, pin=pin), accelerator_classes)
