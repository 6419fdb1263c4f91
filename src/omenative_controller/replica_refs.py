"""A standalone InferenceReplica that renders from ``spec.runtimeRef`` / ``spec.modelRef``:
the shell side of ``omenative_core.service.replica_refs``.

The runners are rendered in memory from the runtimes and models the InferenceService
controller's caches hold (it runs while this manager leads) and put into the decoded
replica for this pass only; the stored spec is never written. Until those caches have
listed the runtimes (and, for a ``modelRef``, the models) the pass waits (``None``); a
Warning the render asks for (OME's ``RuntimeCompatibilityAdvisory``) is logged and handed
to the caller, which sends it as a Warning Event once per replica generation
(``RefsWarnings``), as OME's controller does for an InferenceService. Without
an InferenceService controller (``--no-inference-services``) the replica is blocked
``RenderFailed`` with OME's message for a controller that is not configured to render
from references.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

import structlog
from attrs import define, evolve, field

from omenative_controller.service_controller import ServiceController
from omenative_core.model.spec import InferenceReplica
from omenative_core.service import ServingRuntime, inheritance_health
from omenative_core.service.plan import ServiceConfig
from omenative_core.service.replica_refs import RefsRender, has_refs, render_replica_refs

__all__ = ["Emit", "RefsWarnings", "needs_refs", "referencing", "render_refs",
           "with_rendered_runners"]

Emit = Callable[[str, str], Awaitable[None]]
"""Sends one Warning Event ``(reason, message)`` on the replica."""

log = structlog.get_logger("omenative.manager")


def _uses_runtime(spec: Mapping[str, Any], replica_ns: str, namespace: str | None, name: str,
                  runtimes: list[ServingRuntime]) -> bool:
    ref = spec.get("runtimeRef")
    if not isinstance(ref, Mapping) or not ref.get("name"):
        # auto-selected for its model: any runtime it can see may win
        return isinstance(spec.get("modelRef"), Mapping) and namespace in (None, replica_ns)
    kind = ref.get("kind") or "ClusterServingRuntime"
    named = next((rt for rt in runtimes if rt.kind == kind and rt.name == ref.get("name") and
                  (kind == "ClusterServingRuntime" or rt.namespace == replica_ns)), None)
    if ref.get("name") == name and (kind == "ClusterServingRuntime") == (namespace is None) \
            and namespace in (None, replica_ns):
        return True
    if named is None or namespace not in (None, replica_ns):
        return False
    ancestors = (inheritance_health(named, runtimes).chain or ())[:-1]
    return name in ancestors  # one it inherits from (by name: an extra pass at worst)


def referencing(replicas: Iterable[tuple[str, Mapping[str, Any]]], kind: str,
                namespace: str | None, name: str, runtimes: list[ServingRuntime]
                ) -> list[str]:
    """The keys of the standalone replicas that render from the runtime (``kind``
    ``"runtime"``: the one they name or one it inherits from; every auto-selecting one) or
    the model (``"model"``) ``namespace``/``name`` changed (namespace None: cluster
    scoped), so a change re-renders them at once, as OME's replica controller watches
    both (``render.go``)."""
    out = []
    for key, raw in replicas:
        spec, meta = raw.get("spec"), raw.get("metadata")
        if not isinstance(spec, Mapping) or not isinstance(meta, Mapping) or \
                spec.get("runners") or not has_refs(spec):
            continue
        ns = str(meta.get("namespace") or "")
        if kind == "runtime":
            hit = _uses_runtime(spec, ns, namespace, name, runtimes)
        else:
            model = spec.get("modelRef")
            hit = isinstance(model, Mapping) and model.get("name") == name and \
                namespace in (None, ns)
        if hit:
            out.append(key)
    return out


def needs_refs(replica: InferenceReplica, raw: Mapping[str, Any]) -> bool:
    """The replica has no runners of its own and names a model or a runtime."""
    spec = raw.get("spec")
    return not replica.spec.runners and isinstance(spec, Mapping) and has_refs(spec)


@define
class RefsWarnings:
    """The render Warnings already sent, per replica key: each once per ``generation``."""

    sent: dict[str, tuple[int, frozenset[tuple[str, str]]]] = field(factory=dict)

    def fresh(self, key: str, raw: Mapping[str, Any],
              warnings: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The ``warnings`` not sent yet for this generation of the replica (and remember
        them as sent)."""
        generation = (raw.get("metadata") or {}).get("generation")
        gen = generation if isinstance(generation, int) else 0
        seen_gen, seen = self.sent.get(key, (gen, frozenset()))
        if seen_gen != gen:
            seen = frozenset()
        out = [w for w in warnings if w not in seen]
        self.sent[key] = (gen, seen | frozenset(warnings))
        return out

    def forget(self, key: str) -> None:
        """The replica is gone."""
        self.sent.pop(key, None)


def with_rendered_runners(
    replica: InferenceReplica, raw: Mapping[str, Any], isvc: ServiceController | None,
    config: ServiceConfig, warnings: list[tuple[str, str]] | None = None,
) -> InferenceReplica | RefsRender | None:
    """``replica`` with the runners its references render, the block that stops it, or
    None while the runtimes are not known yet; the render's Warnings are appended to
    ``warnings``."""
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
        if warnings is not None:
            warnings.append((reason, message))
    return evolve(replica, spec=evolve(replica.spec, runners=rendered.runners))


async def render_refs(
    replica: InferenceReplica, raw: Mapping[str, Any], isvc: ServiceController | None,
    config: ServiceConfig, sent: RefsWarnings, key: str, emit: Emit | None,
) -> InferenceReplica | RefsRender | None:
    """``with_rendered_runners``, and its Warnings sent with ``emit``, each once per
    generation of the replica (``sent`` remembers)."""
    warnings: list[tuple[str, str]] = []
    rendered = with_rendered_runners(replica, raw, isvc, config, warnings)
    for reason, message in sent.fresh(key, raw, warnings):
        if emit is not None:
            await emit(reason, message)
    return rendered
