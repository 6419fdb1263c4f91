"""The slim views the manager's watch caches keep, and their secondary indexes."""

from __future__ import annotations

from typing import Any

from attrs import frozen

from omenative_controller.kube.client import JSON
from omenative_core.labels import LABEL_MANAGED_BY, LABEL_REPLICA, MANAGED_BY

__all__ = [
    "MANAGED_SELECTOR",
    "SERVICE_NAME_LABEL",
    "ObjectRef",
    "labels_of",
    "node_index",
    "owner_index",
    "ref_view",
    "replica_view",
    "service_index",
    "slice_view",
]

SERVICE_NAME_LABEL = "kubernetes.io/service-name"
"""The EndpointSlice label naming its Service."""
MANAGED_SELECTOR = f"{LABEL_MANAGED_BY}={MANAGED_BY}"
"""The label selector of every object omenative owns."""


@frozen
class ObjectRef:
    """The slim view of an object we only need to know exists (the headless Service)."""

    name: str
    uid: str
    labels: tuple[tuple[str, str], ...] = ()

    def label(self, key: str) -> str | None:
        """One label's value."""
        return dict(self.labels).get(key)


def replica_view(obj: JSON) -> JSON:
    """The InferenceReplica as the API sent it, minus ``managedFields``."""
    meta = dict(obj.get("metadata") or {})
    meta.pop("managedFields", None)
    return {**obj, "metadata": meta}


def ref_view(obj: JSON) -> ObjectRef:
    """Name, UID and labels only."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return ObjectRef(str(meta.get("name", "")), str(meta.get("uid", "")),
                     tuple(sorted((str(k), str(v)) for k, v in labels.items())))


def _endpoint_conditions(raw: Any) -> JSON:
    """Endpoint conditions with ``ready`` meaning "in rotation" for every Service kind.

    The headless Service publishes not-ready addresses (DNS must resolve before Ready), and
    for such a Service the EndpointSlice controller forces ``ready: true`` on every
    endpoint. ``serving`` still follows the pod's Ready condition (which includes the
    ``ome.io/serving`` gate), so "routed" is recomputed as the controller does for an
    ordinary Service: ``serving and not terminating``. Without ``serving`` (old API
    servers) ``ready`` is kept as sent.
    """
    conds = dict(raw or {})
    serving = conds.get("serving")
    if isinstance(serving, bool):
        conds["ready"] = serving and conds.get("terminating") is not True
    return conds


def slice_view(obj: JSON) -> JSON:
    """What ``routed_pods_from_endpoint_slices`` reads, plus the owning labels."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    endpoints = []
    for ep in obj.get("endpoints") or ():
        ref = ep.get("targetRef") or {}
        endpoints.append({
            "targetRef": {"kind": ref.get("kind"), "name": ref.get("name")},
            "conditions": _endpoint_conditions(ep.get("conditions")),
        })
    return {
        "metadata": {"name": meta.get("name"), "labels": {
            k: labels[k] for k in (SERVICE_NAME_LABEL, LABEL_REPLICA) if k in labels}},
        "endpoints": endpoints,
    }


def labels_of(view: Any) -> dict[str, str]:
    """The labels of any cached view."""
    if isinstance(view, ObjectRef):
        return dict(view.labels)
    if isinstance(view, dict):
        return dict((view.get("metadata") or {}).get("labels") or {})
    labels = getattr(view, "labels", None)
    return dict(labels) if labels else {}


def owner_index(namespace: str | None, view: Any) -> list[str]:
    """Index: the ``namespace/name`` key of the owning InferenceReplica."""
    owner = labels_of(view).get(LABEL_REPLICA)
    return [f"{namespace}/{owner}"] if owner and namespace else []


def node_index(_: str | None, view: Any) -> list[str]:
    """Index: the node a pod is bound to."""
    node = getattr(view, "node_name", None)
    return [node] if node else []


def service_index(namespace: str | None, view: Any) -> list[str]:
    """Index: the ``namespace/name`` of the Service an EndpointSlice belongs to."""
    svc = labels_of(view).get(SERVICE_NAME_LABEL)
    return [f"{namespace}/{svc}"] if svc and namespace else []
