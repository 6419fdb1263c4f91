"""The slim views the manager's watch caches keep, and their secondary indexes."""

from __future__ import annotations

import sys
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

from attrs import evolve, frozen

from omenative_controller.kube.client import JSON
from omenative_controller.packed import PackedJSON
from omenative_core.labels import LABEL_MANAGED_BY, LABEL_REPLICA, MANAGED_BY
from omenative_core.model.observed import PodGroupView, PodView, RevisionView
from omenative_core.views import (
    pod_group_view_from_json,
    pod_view_fields,
    revision_view_from_json,
)

H = TypeVar("H", bound=Hashable)
V = TypeVar("V")

__all__ = [
    "MANAGED_SELECTOR",
    "SERVICE_NAME_LABEL",
    "FrozenCopy",
    "ObjectRef",
    "SliceView",
    "labels_of",
    "node_index",
    "owner_index",
    "pod_group_view",
    "pod_view",
    "ref_view",
    "replica_view",
    "revision_view",
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


class FrozenCopy(Generic[V]):
    """One copy of a cache's store, made when first asked for after a change and shared
    until the next: every replica's Snapshot gets the same node map, never changed once
    handed over, so the core's memos keep it instead of a copy each (``kept_map``).

    ``changed`` is the cache's change callback; ``get`` the copy (a dict, read-only by
    contract).
    """

    def __init__(self, store: Callable[[], Mapping[str, V]]) -> None:
        self._store = store
        self._copy: dict[str, V] | None = None

    def changed(self, *_: Any) -> None:
        """The cache changed: the next ``get`` copies it again."""
        self._copy = None

    def get(self) -> Mapping[str, V]:
        """The store as of the last change (the same object until the next one)."""
        if self._copy is None:
            self._copy = dict(self._store())
        return self._copy


OWN_ANNOTATION_SUFFIX = "ome.io"
"""Pod annotations kept in the cache: ours (``ome.io/``, ``internal.ome.io/``), no others."""
SHARED_VALUES = 65536
"""Distinct small values (condition maps, container states) shared before the table is reset."""


class _Shared:
    """One object per distinct value: pods in the same state share their condition maps,
    container views and image maps instead of keeping a copy each (the table is reset when
    full, which only costs sharing)."""

    def __init__(self, cap: int = SHARED_VALUES) -> None:
        self.cap = cap
        self.table: dict[Any, Any] = {}

    def _get(self, key: Any, make: Callable[[], Any]) -> Any:
        got = self.table.get(key)
        if got is None:
            if len(self.table) >= self.cap:
                self.table.clear()
            self.table[key] = got = make()
        return got

    def value(self, value: H) -> H:
        """The shared object equal to ``value``."""
        got: H = self._get(value, lambda: value)
        return got

    def mapping(self, mapping: Mapping[str, str]) -> Mapping[str, str]:
        """The shared read-only dict equal to ``mapping`` (strings interned)."""
        got: Mapping[str, str] = self._get(tuple(mapping.items()), lambda: _interned(mapping))
        return got

    def json_object(self, obj: JSON) -> JSON:
        """The shared dict equal to ``obj``, a JSON object of scalars (read-only)."""
        got: JSON = self._get(("json", *sorted(obj.items())), lambda: obj)
        return got


_SHARED = _Shared()


def _interned(mapping: Mapping[str, str]) -> dict[str, str]:
    return {sys.intern(k): sys.intern(v) for k, v in mapping.items()}


def pod_view(obj: JSON) -> PodView:
    """The core's ``PodView`` of a pod, slimmed for a cache of many pods: label strings
    interned, only our own annotations, and the condition maps, container views and image
    maps shared by every pod in the same state."""
    f = pod_view_fields(obj)
    shared = _SHARED
    own = {k: v for k, v in f["annotations"].items()
           if k.partition("/")[0].endswith(OWN_ANNOTATION_SUFFIX)}
    node = f["node_name"]
    f.update(
        labels=_interned(f["labels"]), annotations=shared.mapping(own),
        conditions=shared.mapping(f["conditions"]),
        condition_reasons=shared.mapping(f["condition_reasons"]),
        containers=shared.value(tuple(shared.value(c) for c in f["containers"])),
        images=shared.mapping(f["images"]), phase=sys.intern(f["phase"]),
        node_name=sys.intern(node) if node is not None else None,
    )
    return PodView(**f)


def pod_group_view(obj: JSON) -> PodGroupView:
    """The core's ``PodGroupView`` of a PodGroup or a native Workload, its strings interned:
    one group per Instance attempt means thousands that repeat the same label keys and
    values, and the same condition status, reason and message."""
    view = pod_group_view_from_json(obj)
    scheduled = view.scheduled
    return evolve(
        view, labels=_interned(view.labels),
        scheduled=sys.intern(scheduled) if scheduled is not None else None,
        scheduled_reason=sys.intern(view.scheduled_reason),
        scheduled_message=sys.intern(view.scheduled_message),
    )


def replica_view(obj: JSON) -> Mapping[str, Any]:
    """The InferenceReplica as the API sent it, minus ``managedFields``, its ``spec`` and
    ``status`` packed (parsed again when a pass decodes a new resourceVersion, or writes the
    status)."""
    meta = {sys.intern(k): v for k, v in (obj.get("metadata") or {}).items()
            if k != "managedFields"}
    return PackedJSON({**obj, "metadata": meta}, keep=("metadata",))


def revision_view(obj: JSON) -> RevisionView:
    """The core's ``RevisionView`` with its ``data`` (the runner templates) packed: read
    only when a pass renders that revision's pods."""
    view = revision_view_from_json(obj)
    return evolve(view, data=PackedJSON(view.data), labels=_interned(view.labels))


def ref_view(obj: JSON) -> ObjectRef:
    """Name, UID and labels only."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    return ObjectRef(str(meta.get("name", "")), str(meta.get("uid", "")),
                     tuple(sorted((sys.intern(str(k)), sys.intern(str(v)))
                                  for k, v in labels.items())))


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
    return _SHARED.json_object(conds)


@frozen
class SliceView:
    """The slim view of an EndpointSlice: its name, the labels that say whose it is, and
    per endpoint its ``targetRef`` kind and name and its conditions (shared). A plain JSON
    copy of the same cost ~2.6 KB a slice of 4 endpoints with its strings, this ~0.9 KB
    (issue 36)."""

    name: str | None
    labels: tuple[tuple[str, str], ...]
    endpoints: tuple[tuple[Any, Any, JSON], ...]

    def as_json(self) -> JSON:
        """The slice as ``routed_pods_from_endpoint_slices`` reads it (a fresh copy)."""
        return {
            "metadata": {"name": self.name, "labels": dict(self.labels)},
            "endpoints": [{"targetRef": {"kind": kind, "name": name}, "conditions": conds}
                          for kind, name, conds in self.endpoints],
        }


def slice_view(obj: JSON) -> SliceView:
    """What ``routed_pods_from_endpoint_slices`` reads, plus the owning labels."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    endpoints = []
    for ep in obj.get("endpoints") or ():
        ref = ep.get("targetRef") or {}
        kind = ref.get("kind")
        endpoints.append((sys.intern(kind) if isinstance(kind, str) else kind, ref.get("name"),
                          _endpoint_conditions(ep.get("conditions"))))
    name = meta.get("name")
    return SliceView(
        name=name,
        labels=tuple((k, sys.intern(str(labels[k])))
                     for k in (SERVICE_NAME_LABEL, LABEL_REPLICA) if k in labels),
        endpoints=tuple(endpoints),
    )


def labels_of(view: Any) -> dict[str, str]:
    """The labels of any cached view."""
    if isinstance(view, ObjectRef):
        return dict(view.labels)
    if isinstance(view, Mapping):
        return dict((view.get("metadata") or {}).get("labels") or {})
    labels = getattr(view, "labels", None)
    return dict(labels) if labels else {}


def owner_index(namespace: str | None, view: Any) -> list[str]:
    """Index: the ``namespace/name`` key of the owning InferenceReplica."""
    owner = labels_of(view).get(LABEL_REPLICA)
    return [sys.intern(f"{namespace}/{owner}")] if owner and namespace else []


def node_index(_: str | None, view: Any) -> list[str]:
    """Index: the node a pod is bound to."""
    node = getattr(view, "node_name", None)
    return [node] if node else []


def service_index(namespace: str | None, view: Any) -> list[str]:
    """Index: the ``namespace/name`` of the Service an EndpointSlice belongs to."""
    svc = labels_of(view).get(SERVICE_NAME_LABEL)
    return [sys.intern(f"{namespace}/{svc}")] if svc and namespace else []
