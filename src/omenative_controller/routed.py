"""The routed-pod set of each headless Service, kept up to date from EndpointSlice events.

A pass used to rebuild the set of pods a Service routes to from all of its EndpointSlices
(~29 ms at 10,000 Instances). ``RoutedPods`` keeps, per Service, each slice's routed pod
names (by the rule of ``views.routed_pods_from_endpoint_slices``, one slice at a time) and
their union, recomputed only when a slice of that Service changes. While nothing changes
``routed()`` returns the same frozenset object, so the incremental planner sees an
unchanged input by identity.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from omenative_controller.cache_views import SliceView
from omenative_core.views import routed_pods_from_endpoint_slices

__all__ = ["RoutedPods"]

ServiceOf = Callable[[str | None, Any], list[str]]
"""(namespace, slice view) -> the ``namespace/service`` keys the slice belongs to."""

_EMPTY: frozenset[str] = frozenset()


def _slice_key(namespace: str | None, view: Any) -> str | None:
    if isinstance(view, SliceView):
        name: Any = view.name
    else:
        name = ((view.get("metadata") or {}) if isinstance(view, dict) else {}).get("name")
    return f"{namespace}/{name}" if namespace and isinstance(name, str) else None


class RoutedPods:
    """Routed pod names per Service, updated slice by slice (``on_slice``)."""

    def __init__(self, service_of: ServiceOf) -> None:
        self._service_of = service_of
        self._slices: dict[str, dict[str, frozenset[str]]] = {}  # service -> slice -> names
        self._union: dict[str, frozenset[str]] = {}

    def on_slice(self, namespace: str | None, old: Any, new: Any) -> None:
        """Take one EndpointSlice add, update or delete (the informer's ``on_change``)."""
        if old is not None:
            key = _slice_key(namespace, old)
            for service in self._service_of(namespace, old):
                self._drop(service, key)
        if new is not None:
            key = _slice_key(namespace, new)
            if key is None:
                return
            names = routed_pods_from_endpoint_slices(
                [new.as_json() if isinstance(new, SliceView) else new])
            for service in self._service_of(namespace, new):
                self._slices.setdefault(service, {})[key] = names
                self._union.pop(service, None)

    def _drop(self, service: str, key: str | None) -> None:
        slices = self._slices.get(service)
        if slices is None or key is None or slices.pop(key, None) is None:
            return
        self._union.pop(service, None)
        if not slices:
            del self._slices[service]

    def routed(self, service: str) -> frozenset[str]:
        """The pods ``namespace/service`` routes to (the same object until a slice changes)."""
        union = self._union.get(service)
        if union is None:
            slices = self._slices.get(service)
            union = frozenset().union(*slices.values()) if slices else _EMPTY
            self._union[service] = union
        return union

    def clear(self) -> None:
        """Forget every slice (the informer re-reports them)."""
        self._slices.clear()
        self._union.clear()
