"""Which cache change wakes which InferenceReplica (the watch caches' change callbacks).

Pods, revisions, Services and PodGroups wake their owner (``ome.io/inferencereplica``);
an EndpointSlice the replica behind its headless Service; a node the replicas with pods on
it, or every replica when the node appeared or changed what placement reads. A pod that
is ready but for its serving gate, or has just turned Ready, wakes its replica in the work
queue's priority lane.

What needs a look but not at once (a pod scheduled, started or gone; a revision, Service,
PodGroup or EndpointSlice changed) is queued within ``WAKE_WINDOW`` (``add_soon``): a gang's
pods move together, and their events share one pass instead of one each, and so does a
status-only change of the replica (our own write). Its other changes and nodes are queued
at once, a gang ready for its gate or just Ready in the priority lane.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from omenative_controller.cache_views import SERVICE_NAME_LABEL, labels_of, owner_index
from omenative_controller.kube.client import JSON
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.workqueue import WorkQueue
from omenative_core.labels import LABEL_REPLICA
from omenative_core.model.observed import NodeView, PodView

__all__ = ["WAKE_WINDOW", "Wakeups"]

WAKE_WINDOW = 0.5
"""Seconds within which a change that is not urgent wakes its replica (one pass for a burst:
the 4 pods of a gang scheduled, then started, within a few hundred milliseconds)."""


class Wakeups:
    """The change callbacks of the manager's caches; they only queue keys."""

    def __init__(self, queue: Callable[[], WorkQueue[str] | None],
                 replicas: Callable[[], Informer[Mapping[str, Any]] | None],
                 pods: Callable[[], Informer[PodView] | None], *,
                 window: float = WAKE_WINDOW) -> None:
        self.queue = queue
        self.replicas = replicas
        self.pods = pods
        self.window = window

    def one(self, key: str) -> None:
        """Queue ``key`` (while leading)."""
        queue = self.queue()
        if queue is not None:
            queue.add(key)

    def soon(self, key: str) -> None:
        """Queue ``key`` within the window (while leading): a change that is not urgent."""
        queue = self.queue()
        if queue is not None:
            queue.add_soon(key, self.window)

    def all(self) -> None:
        """Queue every cached InferenceReplica (config reload, resync, a node change)."""
        replicas = self.replicas()
        if replicas is not None:
            for key in replicas.key_list():
                self.one(key)

    def replica(self, namespace: str | None, old: Mapping[str, Any] | None,
                new: Mapping[str, Any] | None) -> None:
        """An InferenceReplica changed: its own key, at once; soon when only its status
        changed (our own status write, written through: the pass that wrote it planned
        from it already)."""
        obj = new if new is not None else old
        name = ((obj or {}).get("metadata") or {}).get("name")
        if not namespace or not name:
            return
        if old is not None and new is not None and _asked(old) == _asked(new):
            self.soon(f"{namespace}/{name}")
        else:
            self.one(f"{namespace}/{name}")

    def owned(self, namespace: str | None, old: Any, new: Any) -> None:
        """A revision, Service or PodGroup changed: its owner's key, soon."""
        for view in (old, new):
            for key in owner_index(namespace, view) if view is not None else ():
                self.soon(key)

    def pod(self, namespace: str | None, old: PodView | None, new: PodView | None) -> None:
        """A pod changed: wake its replica soon; at once in the priority lane when the pod
        is ready but for its serving gate, or has just turned Ready (the gang is one pass
        from rotation, or from reporting it: it goes before fresh first passes, so replicas
        become Ready depth-first)."""
        urgent = new is not None and new.deletion_timestamp is None and new.containers_ready \
            and (not new.serving_gate or (new.ready and (old is None or not old.ready)))
        queue = self.queue()
        if queue is None:
            return
        for view in (old, new):
            for key in owner_index(namespace, view) if view is not None else ():
                if urgent:
                    queue.add(key, priority=True)
                else:
                    queue.add_soon(key, self.window)

    def slice(self, namespace: str | None, old: JSON | None, new: JSON | None) -> None:
        """An EndpointSlice of a headless Service changed: the replica it routes to."""
        for view in (old, new):
            if view is None or not namespace:
                continue
            labels = labels_of(view)
            owner = labels.get(LABEL_REPLICA)
            svc = labels.get(SERVICE_NAME_LABEL, "")
            if not owner and svc.endswith("-headless"):
                owner = svc[: -len("-headless")]
            if owner:
                self.soon(f"{namespace}/{owner}")

    def node(self, _: str | None, old: NodeView | None, new: NodeView | None) -> None:
        """A node changed: the replicas with pods on it, or every one (see below)."""
        node = new if new is not None else old
        pods = self.pods()
        if node is None or pods is None:
            return
        if new is not None and (old is None or (old.labels, old.gpus, old.unschedulable,
                                                old.ready) != (new.labels, new.gpus,
                                                               new.unschedulable, new.ready)):
            # a node that appeared, or changed what placement reads, may be what a Pending
            # gang or a missing spread key waits for: every replica looks again (rare)
            self.all()
            return
        owners: set[str] = set()
        for key in pods.index_keys("node", node.name):
            pod = pods.get(key)
            owners.update(owner_index(pods.namespace_of(key), pod) if pod else ())
        for key in owners:
            self.one(key)


def _asked(replica: Mapping[str, Any]) -> tuple[object, ...]:
    """What a user or another controller changes on an InferenceReplica (its spec through
    ``generation``, verbs through annotations, labels, finalizers, deletion): not the
    status, which the manager alone writes."""
    meta = replica.get("metadata") or {}
    return (meta.get("generation"), meta.get("annotations"), meta.get("labels"),
            meta.get("finalizers"), meta.get("deletionTimestamp"))
