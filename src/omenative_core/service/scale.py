"""Replica counts: ``minReplicas``/``maxReplicas``, and who owns the count.

As OME v1.3's component autoscaling: the default class (HPA) gets an HPA for every
component, even with ``minReplicas == maxReplicas``, and the live ``spec.replicas`` is kept,
clamped to the bounds, so a re-render never fights it; ``External`` keeps the live count for
the user's own autoscaler (only raised to ``minReplicas``, and lowered to ``maxReplicas``
when the component sets one); ``None`` holds the count at ``minReplicas``, even after a
``kubectl scale``; ``KEDA`` keeps the live count within the bounds (its ScaledObject owns
it)."""

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


def autoscaler_class(isvc: InferenceService, merged: ComponentSpec, *,
                     legacy: bool = True) -> str:
    """The autoscaler class: the component's own, else (``legacy``: not for an OMENative
    component, whose resolver in OME has no legacy layer: ``ResolveComponentAutoscaler``)
    the ISVC's ``ome.io/autoscalerClass`` annotation, else ``hpa``."""
    own = merged.autoscaler
    value = own.get("class") if own is not None else None
    if not isinstance(value, str) or not value:
        value = isvc.annotations.get(ANNOTATION_AUTOSCALER_CLASS, "hpa") if legacy else "hpa"
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
    klass: str = "hpa"
    """The autoscaler class, lower case (hpa, keda, external, none)."""


def resolve_scale(
    isvc: InferenceService,
    merged: ComponentSpec,
    component: str,
    *,
    at_least_one: bool,
    config: ServiceConfig,
    current_replicas: Mapping[str, int],
    legacy: bool = True,
) -> Scale:
    """The replica count to render for ``component`` and whether an HPA owns it
    (``legacy``: the ``ome.io/autoscalerClass`` annotation counts, as for a RawDeployment)."""
    low = merged.min_replicas if merged.min_replicas is not None else config.default_min_replicas
    low = max(low, 1 if at_least_one else 0)
    high = merged.max_replicas or config.default_max_replicas.get(component, 0)
    high = max(high, low)  # as OME's defaulter: a filled max is raised to the min
    cls = autoscaler_class(isvc, merged, legacy=legacy)
    current = current_replicas.get(component)
    replicas, source = low, "minReplicas"
    if cls == "external" and current is not None:
        ceiling = merged.max_replicas or None  # the user's own bound, never a default
        replicas = max(current, low) if ceiling is None else min(max(current, low), ceiling)
        source = "existing" if replicas == current else "existing (clamped)"
    elif cls != "none" and high > low and current is not None:
        replicas = min(max(current, low), high)
        source = "existing" if replicas == current else "existing (clamped)"
    hpa = cls not in _NO_HPA_CLASSES
    return Scale(low, high, replicas, source, hpa, cls)
