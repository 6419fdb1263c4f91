"""Each runtime's ``status.inheritanceChain`` and ``InheritanceReady`` condition, as OME v1.3's
runtime controller writes them (ome-docs ``concepts/runtimes/runtime-inheritance.md``, "When a
chain breaks"; ``ServingRuntimeStatus`` in ``servingruntime_types.go`` at 3731e1e7).

``RuntimeStatusWriter.run`` waits until a runtime changes (``mark``, called by the runtime
caches), then compares every cached runtime's status with what its chain says
(``omenative_core.service.inheritance.inheritance_health``: a parent's change can break or
mend its children) and PATCHes the status subresource of those that differ: the chain root
first (kept as it was while the chain is broken), and ``InheritanceReady`` True ``Resolved``
or False with ``ParentNotFound``, ``InheritanceCycle``, ``MaxDepthExceeded``, and a Warning
Event on the runtime with that reason naming the runtime and the broken link
(``<kind> <ns>/<name>: ome.io/inherit-from link <child> -> <parent> is broken: <OME's
error>``), once per break (OME records a warning too; its reason is not published). Its own writes
come back as changes and find nothing to do. A runtime CRD without a status subresource
(the loose opt-out, ``config/crd-loose/``) answers 404: nothing is written there.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.events import EventRecorder, involved_object
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import Resource
from omenative_core.codec import CodecError
from omenative_core.service import ServingRuntime, decode_runtime
from omenative_core.service.inheritance import (
    INHERITANCE_READY,
    InheritanceHealth,
    broken_chain_message,
    inheritance_health,
)

__all__ = ["RuntimeStatusWriter", "status_patch"]

log = structlog.get_logger("omenative.isvc")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def status_patch(obj: Mapping[str, Any], health: InheritanceHealth,
                 now: str) -> dict[str, Any] | None:
    """The ``status`` to write on runtime ``obj`` for ``health``, or None when its status
    says so already (``lastTransitionTime`` moves only when the condition's status does)."""
    status = obj.get("status") if isinstance(obj.get("status"), Mapping) else {}
    assert isinstance(status, Mapping)
    conditions = [c for c in status.get("conditions") or () if isinstance(c, Mapping)]
    current = next((c for c in conditions if c.get("type") == INHERITANCE_READY), None)
    flag = "True" if health.ready else "False"
    old_chain = list(status.get("inheritanceChain") or ())
    chain = list(health.chain) if health.chain is not None else old_chain
    if current is not None and (current.get("status"), current.get("reason"),
                                current.get("message")) == (flag, health.reason,
                                                            health.message) \
            and old_chain == chain:
        return None
    since = current.get("lastTransitionTime") if current is not None and \
        current.get("status") == flag else None
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), Mapping) else {}
    assert isinstance(meta, Mapping)
    condition: dict[str, Any] = {
        "type": INHERITANCE_READY, "status": flag, "reason": health.reason,
        "message": health.message, "lastTransitionTime": since or now}
    if isinstance(meta.get("generation"), int):
        condition["observedGeneration"] = meta["generation"]
    others = [dict(c) for c in conditions if c.get("type") != INHERITANCE_READY]
    return {"inheritanceChain": chain, "conditions": [*others, condition]}


class RuntimeStatusWriter:
    """Keeps the runtimes' inheritance status true (module docstring)."""

    def __init__(self, client: KubeClient,
                 caches: Sequence[tuple[Informer[JSON], Resource]],
                 clock: Callable[[], str] = _now) -> None:
        self.client = client
        self.caches = tuple(caches)
        self.clock = clock
        self.events: EventRecorder | None = None
        """Where the broken-chain Warnings go (the controller sets its recorder)."""
        self._changed = asyncio.Event()
        self._announced: dict[tuple[str, str, str], str] = {}

    def mark(self) -> None:
        """A runtime changed: look again."""
        self._changed.set()

    def _runtimes(self) -> list[tuple[JSON, Resource, ServingRuntime]]:
        out: list[tuple[JSON, Resource, ServingRuntime]] = []
        for informer, res in self.caches:
            for _key, obj in informer.items():
                try:
                    out.append((obj, res, decode_runtime({**obj, "kind": res.kind})))
                except CodecError:
                    continue  # reported by the ISVC controller's own decode
        return out

    async def sync(self) -> int:
        """Write every runtime status that differs; the number written."""
        found = self._runtimes()
        everyone = [rt for _obj, _res, rt in found]
        written = 0
        for obj, res, rt in found:
            health = inheritance_health(rt, everyone)
            await self._announce(obj, res, rt, health)
            patch = status_patch(obj, health, self.clock())
            if patch is None:
                continue
            try:
                await self.client.patch(res, rt.name, {"status": patch}, rt.namespace,
                                        subresource="status")
            except ApiError as exc:
                if not exc.not_found:  # not found: gone, or no status subresource
                    log.info("runtime.status_failed", runtime=rt.name, error=str(exc))
                continue
            written += 1
        return written

    async def _announce(self, obj: JSON, res: Resource, rt: ServingRuntime,
                        health: InheritanceHealth) -> None:
        """A Warning Event on ``rt`` when its chain breaks, or breaks another way (once per
        break, also where the CRD has no status subresource); forgotten when it mends."""
        key = (res.kind, rt.namespace or "", rt.name)
        if health.ready:
            self._announced.pop(key, None)
            return
        message = broken_chain_message(rt, health)
        if self._announced.get(key) == message or self.events is None:
            return
        involved = involved_object(obj, api_version=res.api_version, kind=res.kind)
        if await self.events.record(involved, "Warning", health.reason, message, lg=log):
            self._announced[key] = message

    async def run(self) -> None:
        """Until cancelled: after each change, write what differs."""
        while True:
            await self._changed.wait()
            self._changed.clear()
            try:
                await self.sync()
            except Exception as exc:  # a bug here must not stop the ISVC controller
                log.exception("runtime.status_sync_failed", error=str(exc))
