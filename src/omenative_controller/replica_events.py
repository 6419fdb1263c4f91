"""A plan's Events, sent through the shell's one ``EventRecorder`` (best effort)."""

from __future__ import annotations

from collections.abc import Sequence

import structlog
from attrs import define

from omenative_controller.kube.events import EventRecorder
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_controller.observability import Metrics
from omenative_controller.pass_context import PassContext, instance_kw, service_owner
from omenative_core.model.plan import Event

__all__ = ["ReplicaEvents"]

log = structlog.get_logger("omenative.executor")


@define
class ReplicaEvents:
    """A plan's Events on its InferenceReplica (and, for a projected one, on the owning
    InferenceService, naming the component's replica), through the one ``EventRecorder``."""

    recorder: EventRecorder
    metrics: Metrics | None = None

    async def emit(self, ctx: PassContext, events: Sequence[Event]) -> None:
        """Send ``events`` on the InferenceReplica of ``ctx``."""
        for event in events:
            if not self.recorder.guard():
                return
            await self._emit_one(ctx, event)

    async def emit_raw(self, ctx: PassContext, type_: str, reason: str, message: str) -> None:
        """Send one Event that is not from a plan (validation and decode errors)."""
        await self.emit(ctx, [Event(type=type_, reason=reason, message=message)])

    async def _emit_one(self, ctx: PassContext, event: Event) -> None:
        lg = ctx.log if ctx.log is not None else log
        lg = lg.bind(**instance_kw(event.instance))
        if self.metrics is not None:
            self.metrics.events.labels(event.type, event.reason).inc()
        lg.info("event", type=event.type, reason=event.reason, message=event.message)
        await self.recorder.record({
            "apiVersion": INFERENCE_REPLICAS.api_version, "kind": INFERENCE_REPLICAS.kind,
            "name": ctx.name, "namespace": ctx.namespace, "uid": ctx.uid,
        }, event.type, event.reason, event.message, lg=lg)
        owner = service_owner(ctx.raw)
        if owner is not None:  # surfaced on the InferenceService, naming the component's IR
            await self.recorder.record({
                "apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"),
                "name": owner.get("name"), "namespace": ctx.namespace, "uid": owner.get("uid"),
            }, event.type, event.reason, f"{ctx.name}: {event.message}", lg=lg)
