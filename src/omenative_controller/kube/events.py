"""The one shape of a core/v1 Event this controller writes, for every object it reports on.

The IR executor, the InferenceService controller, the rollout shell and the config reload
all emit Events through the one :class:`EventRecorder` with the body built here, which keeps
their fields (source, reportingComponent, timestamps, the 1,024-character message cap) and
their aggregation identical, so ``kubectl describe`` reads the same everywhere.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import structlog
from attrs import define, field

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import EVENTS
from omenative_core.model.timefmt import format_time

__all__ = ["MESSAGE_LIMIT", "EventRecorder", "event_body", "involved_object"]

log = structlog.get_logger("omenative.events")

MESSAGE_LIMIT = 1024
"""The API server rejects longer Event messages; ours are cut to this."""


def involved_object(obj: Mapping[str, Any], *, api_version: str, kind: str) -> dict[str, Any]:
    """An Event's ``involvedObject`` for ``obj``: its name, namespace and uid, as
    ``api_version``/``kind`` (list answers carry no apiVersion or kind on their items)."""
    meta = obj.get("metadata") or {}
    return {"apiVersion": api_version, "kind": kind, "name": meta.get("name"),
            "namespace": meta.get("namespace"), "uid": meta.get("uid")}


def event_body(
    involved: Mapping[str, Any],
    *,
    type_: str,
    reason: str,
    message: str,
    component: str,
    stamp: str,
    name: str | None = None,
    instance: str | None = None,
) -> JSON:
    """An Event about ``involved`` (an ``involvedObject`` reference with apiVersion, kind,
    name, namespace and uid), named ``name`` or generated from the object's name."""
    namespace = involved.get("namespace")
    metadata: JSON = ({"name": name, "namespace": namespace} if name is not None
                      else {"generateName": f"{involved.get('name')}.", "namespace": namespace})
    body: JSON = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": metadata,
        "involvedObject": dict(involved),
        "type": type_,
        "reason": reason,
        "message": message[:MESSAGE_LIMIT],
        "source": {"component": component},
        "reportingComponent": component,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
    }
    if instance is not None:
        body["reportingInstance"] = instance
    return body


@define
class EventRecorder:
    """The one Event writer of the shell: Events on any object, aggregated like client-go's
    correlator.

    The same (type, reason, message) on the same object within ``window`` seconds bumps
    ``count`` on the existing Event instead of creating another (``window=0``: every call
    creates one). ``guard`` (the leader's write guard) is checked first. Failures are
    logged, never raised: an Event is a courtesy, not part of a reconcile.
    """

    client: KubeClient
    component: str = "omenative-manager"
    identity: str | None = None
    guard: Callable[[], bool] = lambda: True
    window: float = 600.0
    clock: Callable[[], float] = time.monotonic
    now: Callable[[], datetime] = lambda: datetime.now(UTC)
    _seen: dict[tuple[str, ...], tuple[str, int, float]] = field(factory=dict)

    async def record(self, involved: Mapping[str, Any], type_: str, reason: str,
                     message: str, *, lg: Any = None) -> bool:
        """Create the Event on ``involved`` (an ``involvedObject`` reference), or count a
        repeat within ``window``; False when not sent (guard, API error)."""
        lg = lg if lg is not None else log
        if not self.guard():
            return False
        now = self.clock()
        namespace = str(involved.get("namespace") or "")
        key = (namespace, str(involved.get("name")), str(involved.get("uid")), type_, reason,
               message)
        stamp = format_time(self.now())
        seen = self._seen.get(key) if self.window > 0 else None
        if seen is not None and now - seen[2] < self.window:
            name, count, _ = seen
            try:
                await self.client.patch(
                    EVENTS, name, {"count": count + 1, "lastTimestamp": stamp}, namespace,
                    patch_type="strategic",
                )
                self._seen[key] = (name, count + 1, now)
                return True
            except ApiError as exc:
                if not exc.not_found:
                    lg.warning("event.patch_failed", reason=exc.reason, error=exc.message)
                    return False
        digest = hashlib.sha256(f"{key}{time.time_ns()}".encode()).hexdigest()[:16]
        name = f"{involved.get('name')}.{digest}"
        body = event_body(involved, type_=type_, reason=reason, message=message,
                          component=self.component, stamp=stamp, name=name,
                          instance=self.identity)
        try:
            await self.client.create(EVENTS, body, namespace)
        except ApiError as exc:
            lg.warning("event.create_failed", reason=exc.reason, error=exc.message)
            return False
        if self.window > 0:
            self._seen[key] = (name, 1, now)
            if len(self._seen) > 4096:
                cutoff = now - self.window
                self._seen = {k: v for k, v in self._seen.items() if v[2] >= cutoff}
        return True
