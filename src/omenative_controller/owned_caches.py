"""Watch caches of every kind the InferenceService controller applies, found by kind.

``repeat_applies.py`` skips an apply only when the object in a watch cache still carries
what our last apply left; :class:`OwnedCaches` finds that cache for any object by its
``apiVersion`` and ``kind``. The controller's own informers come first (InferenceReplicas,
Deployments, HPAs, and ScaledObjects and LeaderWorkerSets while their APIs are served);
for any other kind (Services, PodDisruptionBudgets, PodMonitors, the router's
ServiceAccount, Role and RoleBinding, or a kind a later renderer adds) the first apply
starts an informer of that resource over the controller's namespaces, labelled
``ome.io/inferenceservice`` as every rendered object is. Until a cache has listed once the
answer is "unknown" and the apply goes out, as it does when the caches lack the RBAC to
list the kind. A delete seen by a started cache queues the owner, so what a user deleted
comes back at once instead of at the next resync.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import structlog

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.informer import Informer, object_key
from omenative_controller.kube.resources import resource_for
from omenative_controller.kube.tasks import cancel_and_wait
from omenative_core.labels import LABEL_ISVC

__all__ = ["OwnedCaches"]

log = structlog.get_logger("omenative.isvc")

Changed = Callable[[str | None, JSON | None, JSON | None], None]


def _kind_of(obj: Mapping[str, Any]) -> tuple[str, str]:
    return str(obj.get("apiVersion", "")), str(obj.get("kind", ""))


class OwnedCaches:
    """The watch cache holding each applied object, by kind; started on first need.

    ``known``: the controller's running informers (asked on every lookup: optional APIs come
    and go). ``on_delete``: a started cache saw an object deleted.
    """

    def __init__(self, client: KubeClient, namespaces: Sequence[str] | None,
                 known: Callable[[], Iterable[Informer[JSON]]], on_delete: Changed) -> None:
        self.client = client
        self.namespaces = namespaces
        self.known = known
        self.on_delete = on_delete
        self.started: dict[tuple[str, str], Informer[JSON]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    def _changed(self, namespace: str | None, old: JSON | None, new: JSON | None) -> None:
        if new is None and old is not None:
            self.on_delete(namespace, old, new)

    def _informer(self, obj: Mapping[str, Any], *, start: bool) -> Informer[JSON] | None:
        kind = _kind_of(obj)
        for informer in self.known():
            if (informer.resource.api_version, informer.resource.kind) == kind \
                    and informer.view is dict:
                return informer
        started = self.started.get(kind)
        if started is None and start:
            res = resource_for(*kind)
            started = Informer(self.client, res, dict, namespaces=self.namespaces,
                               label_selector=LABEL_ISVC, on_change=self._changed)
            self.started[kind] = started
            self._tasks.append(asyncio.create_task(started.run(),
                                                   name=f"isvc-owned-{res.plural}"))
            log.info("isvc.cache_started", resource=res.plural, group=res.group)
        return started

    def cached(self, obj: Mapping[str, Any]) -> JSON | None:
        """The cached object of ``obj``'s kind, namespace and name; None when it is not
        there or no cache of the kind has listed yet (one is started for the next pass)."""
        informer = self._informer(obj, start=True)
        if informer is None or not informer.synced.is_set():
            return None
        meta = obj.get("metadata") or {}
        return informer.get(object_key(meta.get("namespace"), str(meta.get("name", ""))))

    def wrote(self, body: Mapping[str, Any], applied: JSON) -> None:
        """Write the answer of the apply of ``body`` through to its kind's cache (never
        back in time, never resurrecting a deleted object)."""
        informer = self._informer(body, start=False)
        if informer is not None and informer.synced.is_set():
            informer.upsert_if_newer(applied)

    async def close(self) -> None:
        """Stop the caches started here."""
        await cancel_and_wait(self._tasks)
        self._tasks = []
