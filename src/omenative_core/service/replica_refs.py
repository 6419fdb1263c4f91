"""A standalone InferenceReplica that renders its pods from ``spec.runtimeRef`` /
``spec.modelRef`` instead of stored ``spec.runners``, as OME's InferenceReplica controller
does (ome-projects/ome@a543351b, ``pkg/controller/v1beta1/inferencereplica/render.go``).

The runners are rendered in memory on every pass and never written to the spec: the
replica becomes an InferenceService shell named after it (OME's ``serviceShell``) whose
``spec.model`` is the ``modelRef``, ``spec.runtime`` the ``runtimeRef``, which declares
the component empty, sets ``deploymentMode: OMENative`` and names no accelerator class;
the shell goes through the InferenceService rendering. So the model is found as for an
InferenceService (a BaseModel in the replica's namespace, then a ClusterBaseModel; a
``modelRef.kind`` restricts it), the runtime is the one ``runtimeRef`` names or the one
auto-selected for the model, and the model's ``MODEL_PATH``, volume, mount, model-ready
node selector and ``PARALLELISM_SIZE`` are rendered into the runners (``models``).

A template source that cannot render is a block with OME's reason (``classifyResolveError``:
``ModelNotFound``, ``ModelDisabled``, ``RuntimeNotFound``, ``RuntimeDisabled``,
``RuntimeSelectionFailed`` when no runtime serves the model, ``RuntimePieceMissing``, else
``RenderFailed``), which the shell reports as ``Ready=False`` and a Warning Event, leaving
the replica's pods as they are. A named runtime that does not declare the model renders
anyway with OME's ``RuntimeCompatibilityAdvisory`` Warning (``warnings``). Pure: JSON,
runtimes and models in, runners or a block out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from attrs import frozen

from omenative_core.codec import CodecError, spec_from_json
from omenative_core.model.spec import Runner
from omenative_core.service.model import InferenceService, ServingRuntime, isvc_from_json
from omenative_core.service.models import BaseModel
from omenative_core.service.modes import MODE_OMENATIVE
from omenative_core.service.plan import ComponentPlan, ServiceConfig
from omenative_core.service.render import render_service
from omenative_core.service.resolve import Sources, resolve_sources

__all__ = ["RefsRender", "has_refs", "render_replica_refs"]

_KEPT_REASONS: Final = frozenset(
    {"ModelNotFound", "ModelDisabled", "RuntimeNotFound", "RuntimeDisabled"})
"""The InferenceService reasons a replica reports as they are; any other is RenderFailed."""


@frozen(kw_only=True)
class RefsRender:
    """The runners a refs replica renders, or why it cannot (``reason`` set);
    ``warnings``: ``(reason, message)`` Warnings the render asks for (an advisory)."""

    runners: tuple[Runner, ...] = ()
    reason: str = ""
    message: str = ""
    warnings: tuple[tuple[str, str], ...] = ()


def has_refs(spec: Mapping[str, Any]) -> bool:
    """The replica's pods come from ``modelRef`` or ``runtimeRef``, not stored runners."""
    return spec.get("modelRef") is not None or spec.get("runtimeRef") is not None


def _blocked(reason: str, message: str) -> RefsRender:
    return RefsRender(reason=reason, message=message)


def _shell(meta: Mapping[str, Any], spec: Mapping[str, Any],
           component: str) -> InferenceService | RefsRender:
    """OME's ``serviceShell``: the InferenceService the replica renders as."""
    body: dict[str, Any] = {"deploymentMode": MODE_OMENATIVE, component: {}}
    for ref, key in (("modelRef", "model"), ("runtimeRef", "runtime")):
        if spec.get(ref) is not None:
            body[key] = spec[ref]
    runtime_ref = spec.get("runtimeRef")
    if runtime_ref is not None and not (isinstance(runtime_ref, Mapping)
                                        and isinstance(runtime_ref.get("name"), str)
                                        and runtime_ref["name"]):
        return _blocked("RenderFailed", "spec.runtimeRef.name is not set")
    model_ref = spec.get("modelRef")
    if model_ref is not None and not (isinstance(model_ref, Mapping)
                                      and isinstance(model_ref.get("name"), str)
                                      and model_ref["name"]):
        return _blocked("RenderFailed", "spec.modelRef.name is not set")
    try:
        return isvc_from_json({
            "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
            "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "labels",
                                              "annotations") if k in meta},
            "spec": body,
        })
    except CodecError as exc:
        return _blocked("RenderFailed", str(exc))


def _source_block(shell: InferenceService, sources: Sources) -> RefsRender | None:
    """The block for a model or runtime that does not resolve (OME's
    ``classifyResolveError``), or None."""
    if sources.problem is None:
        return None
    reason, message = sources.problem
    if reason == "RuntimeNotFound" and shell.runtime_ref is None:
        return _blocked("RuntimeSelectionFailed", message)  # none serves the model
    return _blocked(reason if reason in _KEPT_REASONS else "RenderFailed", message)


def render_replica_refs(
    replica: Mapping[str, Any],
    runtimes: Sequence[ServingRuntime],
    config: ServiceConfig,
    models: Sequence[BaseModel] | None = None,
) -> RefsRender:
    """The runners of ``replica`` (its JSON) rendered from its references.

    ``runtimes``: every (Cluster)ServingRuntime the shell sees; ``models``: every
    BaseModel and ClusterBaseModel (None or empty when their CRDs are not served: a
    ``modelRef`` then finds no model)."""
    spec = replica.get("spec") or {}
    meta = replica.get("metadata") or {}
    component = str(spec.get("component") or "engine")
    shell = _shell(meta, spec, component)
    if isinstance(shell, RefsRender):
        return shell
    lookup = (models or ()) if spec.get("modelRef") is not None else None
    sources = resolve_sources(shell, runtimes, lookup)
    block = _source_block(shell, sources)
    if block is not None:
        return block
    runtime = sources.runtime
    if runtime is None or sources.ref is None:
        return _blocked("RenderFailed", "spec.runtimeRef or spec.modelRef names no runtime")
    if runtime.config(component) is None:
        return _blocked("RuntimePieceMissing", f"{runtime.kind} {runtime.name!r} has no "
                        f"{component} piece; a {component} replica cannot render from it")
    plan = render_service(shell, runtimes, (), config, auto_selected=sources.ref,
                          models=lookup)
    warnings = tuple((e.reason, e.message) for e in sources.events if e.type == "Warning")
    return _runners(plan.component(component), component, warnings)


def _runners(plan: ComponentPlan | None, component: str,
             warnings: tuple[tuple[str, str], ...]) -> RefsRender:
    """The runners the component's plan renders, or ``RenderFailed`` saying why not."""
    if plan is None or plan.blocked or plan.replica is None:
        why = plan.ready.message if plan is not None and plan.ready is not None else ""
        return _blocked("RenderFailed", why or f"{component} did not render")
    try:
        rendered = spec_from_json({"component": component,
                                   "runners": plan.replica["spec"].get("runners") or []})
    except CodecError as exc:
        return _blocked("RenderFailed", str(exc))
    return RefsRender(runners=rendered.runners, warnings=warnings)
