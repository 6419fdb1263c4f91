"""Replica counts: ``minReplicas``/``maxReplicas``, and who owns the count.

When an autoscaler owns it (``maxReplicas > minReplicas`` and the class is not ``keda``,
``external`` or ``none``), the live ``spec.replicas`` is kept, clamped to the bounds, so a
re-render never fights the HPA."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from attrs import frozen

from omenative_core.service.model import (
    ComponentSpec,
    InferenceService,
)
from omenative_core.service.plan import ANNOTATION_AUTOSCALER_CLASS, ServiceConfig

__all__: list[str] = []

_NO_HPA_CLASSES: Final = frozenset({"keda", "external", "none"})
"""Autoscaler classes that are not an HPA: the count is theirs, no HPA is rendered."""


def autoscaler_class(isvc: InferenceService, merged: ComponentSpec) -> str:
    """The autoscaler class: the component's own, else the ISVC annotation, else ``hpa``."""
    own = merged.autoscaler
    value = own.get("class") if own is not None else None
    if not isinstance(value, str) or not value:
        value = isvc.annotations.get(ANNOTATION_AUTOSCALER_CLASS, "hpa")
    return value.lower()


@frozen
class Scale:
    """A component's replica bounds, the count to write, where it came from, and whether an
    HPA owns it."""

    low: int
    high: int
    replicas: int
    source: str
    hpa: bool


def resolve_scale(
    isvc: InferenceService,
    merged: ComponentSpec,
    component: str,
    *,
    at_least_one: bool,
    config: ServiceConfig,
    current_replicas: Mapping[str, int],
) -> Scale:
    """The replica count to render for ``component`` and whether an HPA owns it."""
    low = merged.min_replicas if merged.min_replicas is not None else config.default_min_replicas
    low = max(low, 1 if at_least_one else 0)
    high = merged.max_replicas or config.default_max_replicas.get(component, 0)
    high = max(high, low)  # as OME's defaulter: a filled max is raised to the min
    replicas, source = low, "minReplicas"
    if high > low:
        current = current_replicas.get(component)
        if current is not None:
            replicas = min(max(current, low), high)
            source = "existing" if replicas == current else "existing (clamped)"
    hpa = high > low and autoscaler_class(isvc, merged) not in _NO_HPA_CLASSES
    return Scale(low, high, replicas, source, hpa)
