"""A standalone InferenceReplica that renders its pods from ``spec.runtimeRef`` /
``spec.modelRef`` instead of stored ``spec.runners``, as OME's InferenceReplica controller
does (ome-projects/ome@a543351b, ``pkg/controller/v1beta1/inferencereplica/render.go``).

The runners are rendered in memory on every pass and never written to the spec: the
runtime's piece for ``spec.component`` (its ``engineConfig`` for an engine replica) goes
through the InferenceService rendering, for an InferenceService shell named after the
replica that declares the component empty and sets ``deploymentMode: OMENative``. A
template source that cannot render is a block with OME's reason (``RuntimeNotFound``,
``RuntimeDisabled``, ``RuntimePieceMissing``, ``RenderFailed``), which the shell reports
as ``Ready=False`` and a Warning Event, leaving the replica's pods as they are.

``spec.modelRef`` (model volumes, ``MODEL_PATH``, runtime selection by model) is rendered
by the model layer; until it is there, a ``modelRef`` replica is blocked ``RenderFailed``
with a message saying so. Pure: JSON and runtimes in, runners or a block out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from attrs import frozen

from omenative_core.codec import CodecError, spec_from_json
from omenative_core.model.spec import Runner
from omenative_core.service.model import ServingRuntime, isvc_from_json
from omenative_core.service.modes import MODE_OMENATIVE
from omenative_core.service.plan import ServiceConfig
from omenative_core.service.render import render_service

__all__ = ["RefsRender", "has_refs", "render_replica_refs"]

_DEFAULT_RUNTIME_KIND: Final = "ClusterServingRuntime"
"""OME: a ``runtimeRef`` without a kind names a ClusterServingRuntime."""


@frozen(kw_only=True)
class RefsRender:
    """The runners a refs replica renders, or why it cannot (``reason`` set)."""

    runners: tuple[Runner, ...] = ()
    reason: str = ""
    message: str = ""


def has_refs(spec: Mapping[str, Any]) -> bool:
    """The replica's pods come from ``modelRef`` or ``runtimeRef``, not stored runners."""
    return spec.get("modelRef") is not None or spec.get("runtimeRef") is not None


def _blocked(reason: str, message: str) -> RefsRender:
    return RefsRender(reason=reason, message=message)


def _find(runtimes: Sequence[ServingRuntime], kind: str, name: str,
          namespace: str) -> ServingRuntime | None:
    for rt in runtimes:
        if rt.kind == kind and rt.name == name and (
            kind != "ServingRuntime" or rt.namespace == namespace
        ):
            return rt
    return None


def _runtime(spec: Mapping[str, Any], namespace: str,
             runtimes: Sequence[ServingRuntime]) -> ServingRuntime | RefsRender:
    """The runtime ``spec.runtimeRef`` names, with the piece for the component; else the
    block saying why not."""
    component = str(spec.get("component") or "engine")
    ref = spec.get("runtimeRef") or {}
    name = ref.get("name") if isinstance(ref, Mapping) else None
    if not isinstance(name, str) or not name:
        return _blocked("RenderFailed", "spec.runtimeRef.name is not set")
    kind = str(ref.get("kind") or _DEFAULT_RUNTIME_KIND)
    runtime = _find(runtimes, kind, name, namespace)
    if runtime is None:
        return _blocked("RuntimeNotFound", f"{kind} {name!r} not found")
    if runtime.disabled:
        return _blocked("RuntimeDisabled", f"{kind} {name!r} is disabled")
    if runtime.config(component) is None:
        return _blocked("RuntimePieceMissing", f"{kind} {name!r} has no {component} piece; "
                        f"a {component} replica cannot render from it")
    return runtime


def render_replica_refs(
    replica: Mapping[str, Any], runtimes: Sequence[ServingRuntime], config: ServiceConfig
) -> RefsRender:
    """The runners of ``replica`` (its JSON) rendered from its references."""
    spec = replica.get("spec") or {}
    meta = replica.get("metadata") or {}
    component = str(spec.get("component") or "engine")
    if spec.get("modelRef") is not None:
        return _blocked("RenderFailed", "rendering from spec.modelRef (the model's volumes, "
                        "MODEL_PATH and runtime selection) is not available in this "
                        "omenative; name the runtime alone in spec.runtimeRef or give "
                        "spec.runners")
    runtime = _runtime(spec, str(meta.get("namespace") or "default"), runtimes)
    if isinstance(runtime, RefsRender):
        return runtime
    shell = isvc_from_json({
        "apiVersion": "ome.io/v1beta1", "kind": "InferenceService",
        "metadata": {k: meta[k] for k in ("name", "namespace", "uid", "labels",
                                          "annotations") if k in meta},
        "spec": {"deploymentMode": MODE_OMENATIVE,
                 "runtime": {"name": runtime.name, "kind": runtime.kind}, component: {}},
    })
    plan = render_service(shell, [runtime], (), config).component(component)
    if plan is None or plan.blocked or plan.replica is None:
        why = plan.ready.message if plan is not None and plan.ready is not None else ""
        return _blocked("RenderFailed", why or f"{component} did not render")
    try:
        rendered = spec_from_json({"component": component,
                                   "runners": plan.replica["spec"].get("runners") or []})
    except CodecError as exc:
        return _blocked("RenderFailed", str(exc))
    return RefsRender(runners=rendered.runners)
