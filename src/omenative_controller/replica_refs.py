"""A standalone InferenceReplica that renders from ``spec.runtimeRef`` / ``spec.modelRef``:
the shell side of ``omenative_core.service.replica_refs``.

The runners are rendered in memory from the runtimes and models the InferenceService
controller's caches hold (it runs while this manager leads) and put into the decoded
replica for this pass only; the stored spec is never written. Until those caches have
listed the runtimes (and, for a ``modelRef``, the models) the pass waits (``None``); a
Warning the render asks for (OME's ``RuntimeCompatibilityAdvisory``) is logged. Without
an InferenceService controller (``--no-inference-services``) the replica is blocked
``RenderFailed`` with OME's message for a controller that is not configured to render
from references.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import structlog
from attrs import evolve

from omenative_controller.service_controller import ServiceController
from omenative_core.model.spec import InferenceReplica
from omenative_core.service.plan import ServiceConfig
from omenative_core.service.replica_refs import RefsRender, has_refs, render_replica_refs

__all__ = ["needs_refs", "with_rendered_runners"]

log = structlog.get_logger("omenative.manager")


def needs_refs(replica: InferenceReplica, raw: Mapping[str, Any]) -> bool:
    """The replica has no runners of its own and names a model or a runtime."""
    spec = raw.get("spec")
    return not replica.spec.runners and isinstance(spec, Mapping) and has_refs(spec)


def with_rendered_runners(
    replica: InferenceReplica, raw: Mapping[str, Any], isvc: ServiceController | None,
    config: ServiceConfig,
) -> InferenceReplica | RefsRender | None:
    """``replica`` with the runners its references render, the block that stops it, or
    None while the runtimes are not known yet."""
    if isvc is None:
        return RefsRender(reason="RenderFailed", message="this controller is not configured "
                          "to render from modelRef or runtimeRef")
    spec = raw.get("spec") or {}
    models = spec.get("modelRef") is not None
    if not isvc.runtimes_synced() or (models and not isvc.sources.models_synced()):
        return None
    body = {"metadata": raw.get("metadata") or {}, "spec": spec}
    rendered = render_replica_refs(body, isvc.all_runtimes(), config,
                                   isvc.sources.all_models() if models else None)
    if rendered.reason:
        return rendered
    for reason, message in rendered.warnings:
        log.info("replica.refs_warning", replica=(raw.get("metadata") or {}).get("name"),
                 reason=reason, error=message)
    return evolve(replica, spec=evolve(replica.spec, runners=rendered.runners))
