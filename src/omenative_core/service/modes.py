"""Which mode each InferenceService component runs in, in OME's order.

For a component the InferenceService declares, the first of these that sets a mode wins:

1. the component's ``ome.io/deploymentMode`` annotation, from the InferenceService
   component or, when the InferenceService's own component does not set it, from the
   runtime's ``*Config.annotations`` (the two are merged and the service wins). Accepted
   values: ``RawDeployment``, ``OMENative``, ``MultiNode``, ``VirtualDeployment``; any other
   value is skipped;
2. ``spec.deploymentMode`` (``OMENative`` or ``RawDeployment``);
3. a ``leader`` or ``worker`` on the engine or decoder, from the InferenceService or the
   runtime: ``OMENative`` (never for the router);
4. ``RawDeployment``.

The annotation on the InferenceService's own metadata sets no component's mode; there,
only ``VirtualDeployment`` acts (no workload at all). ``VirtualDeployment`` in a component
annotation, or ``MultiNode`` on the router, fails that component: ``resolve_mode`` raises
``ModeError`` and ``explain_mode`` returns the error.
"""

from __future__ import annotations

from typing import Final

from attrs import frozen

from omenative_core.service.model import ComponentSpec, InferenceService, ServingRuntime

__all__ = [
    "ACCEPTED_MODES",
    "ANNOTATION_DEPLOYMENT_MODE",
    "MODE_MULTI_NODE",
    "MODE_OMENATIVE",
    "MODE_RAW",
    "MODE_VIRTUAL",
    "SOURCE_COMPONENT_ANNOTATION",
    "SOURCE_DEFAULT",
    "SOURCE_LEADER_WORKER",
    "SOURCE_SERVICE_ANNOTATION",
    "SOURCE_SERVICE_SPEC",
    "SPEC_MODES",
    "ModeError",
    "ModeResolution",
    "declared_mode",
    "explain_mode",
    "resolve_mode",
]

ANNOTATION_DEPLOYMENT_MODE: Final = "ome.io/deploymentMode"
"""The mode annotation, on a component (ISVC or runtime) or the ISVC's metadata."""

MODE_RAW: Final = "RawDeployment"
"""A Deployment per component."""
MODE_OMENATIVE: Final = "OMENative"
"""An InferenceReplica per component."""
MODE_MULTI_NODE: Final = "MultiNode"
"""A LeaderWorkerSet per component (deprecated; engine and decoder only)."""
MODE_VIRTUAL: Final = "VirtualDeployment"
"""Legacy: no workload, Service or ingress."""

ACCEPTED_MODES: Final = (MODE_RAW, MODE_OMENATIVE, MODE_MULTI_NODE, MODE_VIRTUAL)
"""Values of the annotation OME acts on (case-sensitive); others are skipped."""

SPEC_MODES: Final = (MODE_OMENATIVE, MODE_RAW)
"""Values ``spec.deploymentMode`` takes."""

SOURCE_SERVICE_ANNOTATION: Final = "ServiceAnnotation"
"""The ISVC's own ``VirtualDeployment`` annotation, for every component."""
SOURCE_COMPONENT_ANNOTATION: Final = "ComponentAnnotation"
"""The component's annotation, from the ISVC or its runtime."""
SOURCE_SERVICE_SPEC: Final = "ServiceSpec"
"""``spec.deploymentMode``."""
SOURCE_LEADER_WORKER: Final = "LeaderWorkerShape"
"""A ``leader`` or ``worker`` on the engine or decoder."""
SOURCE_DEFAULT: Final = "Default"
"""Nothing set a mode."""


class ModeError(ValueError):
    """A component annotation asks for a mode the component cannot run in."""


@frozen
class ModeResolution:
    """A component's mode, the rule that set it, where the annotation came from, and an
    error when the mode cannot run (then the component gets no workload)."""

    mode: str
    source: str
    origin: str = ""  # "service" or "runtime" for SOURCE_COMPONENT_ANNOTATION
    error: str | None = None

    def __str__(self) -> str:
        return f"{self.mode} ({self.source})"


def _annotation(comp: ComponentSpec | None) -> str | None:
    return None if comp is None else comp.annotations.get(ANNOTATION_DEPLOYMENT_MODE)


def explain_mode(
    isvc: InferenceService, runtime: ServingRuntime | None, component: str
) -> ModeResolution:
    """The mode of ``component``, with the rule that set it (never raises)."""
    if isvc.annotations.get(ANNOTATION_DEPLOYMENT_MODE) == MODE_VIRTUAL:
        return ModeResolution(MODE_VIRTUAL, SOURCE_SERVICE_ANNOTATION)
    own = isvc.component(component)
    config = runtime.config(component) if runtime is not None else None

    # 1. the merged component annotation: the service's value wins, even one OME skips
    value, origin = _annotation(own), "service"
    if value is None:
        value, origin = _annotation(config), "runtime"
    if value in ACCEPTED_MODES:
        error = None
        if value == MODE_VIRTUAL:
            error = (
                f"invalid deployment mode for {component}: {ANNOTATION_DEPLOYMENT_MODE}="
                f"{MODE_VIRTUAL} in the {origin}'s {component} annotations; "
                "VirtualDeployment works only on the InferenceService's own metadata"
            )
        elif value == MODE_MULTI_NODE and component == "router":
            error = (
                f"invalid deployment mode for router: {ANNOTATION_DEPLOYMENT_MODE}="
                f"{MODE_MULTI_NODE} in the {origin}'s router annotations; "
                "only the engine and the decoder can run on a LeaderWorkerSet"
            )
        return ModeResolution(value, SOURCE_COMPONENT_ANNOTATION, origin, error)

    # 2. spec.deploymentMode
    if isvc.deployment_mode in SPEC_MODES:
        return ModeResolution(isvc.deployment_mode, SOURCE_SERVICE_SPEC)

    # 3. a leader or worker on the engine or decoder
    if component in ("engine", "decoder"):
        for comp in (own, config):
            if comp is not None and (comp.leader is not None or comp.worker is not None):
                return ModeResolution(MODE_OMENATIVE, SOURCE_LEADER_WORKER)

    # 4. the default
    return ModeResolution(MODE_RAW, SOURCE_DEFAULT)


def resolve_mode(isvc: InferenceService, runtime: ServingRuntime | None, component: str) -> str:
    """The mode ``component`` runs in; ``ModeError`` when its annotation cannot run."""
    res = explain_mode(isvc, runtime, component)
    if res.error is not None:
        raise ModeError(res.error)
    return res.mode


def declared_mode(isvc: InferenceService, component: str) -> str:
    """The mode the InferenceService itself declares for ``component``, as the webhook
    reads it: the component's own annotation (accepted values only), else
    ``spec.deploymentMode``, else ``""``. Runtimes and leader/worker shapes do not count."""
    value = _annotation(isvc.component(component))
    if value in ACCEPTED_MODES:
        return value
    if isvc.deployment_mode in SPEC_MODES:
        return isvc.deployment_mode
    return ""
