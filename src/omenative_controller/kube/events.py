"""The one shape of a core/v1 Event this controller writes, for every object it reports on.

The IR executor, the InferenceService controller, the rollout shell and the config reload
all emit Events through the one :class:`EventRecorder` with the body built here, which keeps
their fields (source, reportingComponent, timestamps, the 1,024-character message cap) and
their aggregation identical, so ``kubectl describe`` reads the same everywhere.
"""

from __future__ import annotations

import asyncio
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

CLUSTER_EVENTS_NAMESPACE = "default"
"""Where Events on a cluster-scoped object go (as client-go's recorder puts them)."""

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


def _micro(value: datetime) -> str:
    """A ``metav1.MicroTime`` (``series.lastObservedTime``)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _repeat_patch(count: int, now: datetime) -> JSON:
    """What a repeat writes: ``count`` and ``lastTimestamp`` (core/v1, as client-go's
    correlator) and ``series`` (as the events.k8s.io series: count, lastObservedTime)."""
    return {"count": count, "lastTimestamp": format_time(now),
            "series": {"count": count, "lastObservedTime": _micro(now)}}


@define
class EventRecorder:
    """The one Event writer of the shell: Events on any object, aggregated as Kubernetes'
    event series.

    The same (type, reason, message) on the same object is one Event while it repeats:
    the first is created, each repeat raises its ``count`` and ``series`` (``count``,
    ``lastObservedTime``) and moves ``lastTimestamp``. Its name is derived from what it
    says (``{object}.{digest}``), so a repeat after a lost answer, an API server restart
    or a manager restart (the in-memory memo is gone) finds the Event by name (409) and
    counts on it instead of creating a second one; repeats of one Event are serialized,
    so concurrent passes cannot create two either. ``window=0``: every call creates its
    own Event. ``guard`` (the leader's write guard) is checked first. Failures are
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
    _locks: dict[tuple[str, ...], asyncio.Lock] = field(factory=dict)

    async def record(self, involved: Mapping[str, Any], type_: str, reason: str,
                     message: str, *, lg: Any = None) -> bool:
        """Create the Event on ``involved`` (an ``involvedObject`` reference), or count a
        repeat; False when not sent (guard, API error)."""
        lg = lg if lg is not None else log
        if not self.guard():
            return False
        key = (str(involved.get("namespace") or ""), str(involved.get("name")),
               str(involved.get("uid")), type_, reason, message[:MESSAGE_LIMIT])
        if self.window <= 0:
            digest = hashlib.sha256(f"{key}{time.time_ns()}".encode()).hexdigest()[:16]
            return await self._create(involved, key, f"{involved.get('name')}.{digest}", lg)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            return await self._record(involved, key, lg)

    async def _record(self, involved: Mapping[str, Any], key: tuple[str, ...],
                      lg: Any) -> bool:
        """One Event per key: count on the one this process knows, else create it (or
        count on the one already there under its name)."""
        namespace, now = key[0] or CLUSTER_EVENTS_NAMESPACE, self.clock()
        seen = self._seen.get(key)
        if seen is not None and now - seen[2] < self.window:
            known, times, _ = seen
            if await self._count(known, times + 1, namespace, lg):
                self._seen[key] = (known, times + 1, now)
                return True
        digest = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
        name = f"{involved.get('name')}.{digest}"
        count: int | None = 1
        try:
            await self.client.create(EVENTS, self._body(involved, key, name), namespace)
        except ApiError as exc:
            if exc.status != 409:
                lg.warning("event.create_failed", reason=exc.reason, error=exc.message)
                return False
            count = await self._count_existing(name, namespace, lg)
        if count is None:
            return False
        self._remember(key, name, count, now)
        return True

    async def _count_existing(self, name: str, namespace: str, lg: Any) -> int | None:
        """The Event ``name`` exists already (an earlier process, a lost answer): count on."""
        try:
            existing = await self.client.get(EVENTS, name, namespace)
        except ApiError as exc:
            lg.warning("event.get_failed", reason=exc.reason, error=exc.message)
            return None
        count = int(existing.get("count") or 1) + 1
        return count if await self._count(name, count, namespace, lg) else None

    async def _count(self, name: str, count: int, namespace: str, lg: Any) -> bool:
        try:
            await self.client.patch(EVENTS, name, _repeat_patch(count, self.now()), namespace,
                                    patch_type="strategic")
        except ApiError as exc:
            if not exc.not_found:
                lg.warning("event.patch_failed", reason=exc.reason, error=exc.message)
            return False
        return True

    def _body(self, involved: Mapping[str, Any], key: tuple[str, ...], name: str) -> JSON:
        return event_body(involved, type_=key[3], reason=key[4], message=key[5],
                          component=self.component, stamp=format_time(self.now()), name=name,
                          instance=self.identity)

    async def _create(self, involved: Mapping[str, Any], key: tuple[str, ...], name: str,
                      lg: Any) -> bool:
        try:
            await self.client.create(EVENTS, self._body(involved, key, name),
                                     key[0] or CLUSTER_EVENTS_NAMESPACE)
        except ApiError as exc:
            lg.warning("event.create_failed", reason=exc.reason, error=exc.message)
            return False
        return True

    def _remember(self, key: tuple[str, ...], name: str, count: int, now: float) -> None:
        self._seen[key] = (name, count, now)
        if len(self._seen) > 4096:
            cutoff = now - self.window
            self._seen = {k: v for k, v in self._seen.items() if v[2] >= cutoff}
            self._locks = {k: v for k, v in self._locks.items() if k in self._seen or v.locked()}
