"""OME v1.3's admission rules for a component's ``autoscaler`` (pure).

* ``AutoscalerClassUnknown``: ``autoscaler.class`` is not HPA, KEDA, External or None.
* ``AutoscalerAnnotationConflict``: the ISVC's ``ome.io/autoscalerClass`` names another
  class than a component's own ``autoscaler.class``.
* ``HPAMetricMalformed``: an ``autoscaler.hpa.metrics`` entry is not an autoscaling/v2
  ``MetricSpec`` (a known ``type`` with its own block).
* ``KedaTriggersRequired``: ``class: KEDA`` without ``autoscaler.keda.triggers``.
* ``KedaIdleBelowMin``: ``keda.idleReplicaCount`` must be below ``minReplicas`` (KEDA's own
  rule: idle is the count under the minimum while no trigger is active).
* ``AutoscalerPolicyRefKindReserved``: an ``autoscalerPolicyRef.kind`` other than
  ``AutoscalerPolicy`` (``ClusterAutoscalerPolicy`` is reserved); and
  ``AutoscalerPolicyFeatureDisabled``: any reference while OME's AutoscalerPolicy CRD is not
  served (``policy_ref_rejections``; OME's ISVC webhook at 3731e1e7).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from omenative_core.service.model import InferenceService
from omenative_core.service.rejection import Rejection
from omenative_core.service.rejection import reject as _reject
from omenative_core.service.render import ANNOTATION_AUTOSCALER_CLASS

__all__ = ["autoscaler_rejections", "policy_ref_rejections"]

AUTOSCALER_CLASSES: Final = ("HPA", "KEDA", "External", "None")
_METRIC_BLOCKS: Final = {"Resource": "resource", "Pods": "pods", "Object": "object",
                         "External": "external", "ContainerResource": "containerResource"}


def _class_of(autoscaler: Mapping[str, Any]) -> str | None:
    value = autoscaler.get("class")
    return value if isinstance(value, str) and value else None


def _metric_problem(metric: Any) -> str | None:
    """Why one ``hpa.metrics`` entry is not a MetricSpec (None: it is)."""
    if not isinstance(metric, Mapping):
        return "must be an object"
    kind = metric.get("type")
    block = _METRIC_BLOCKS.get(kind) if isinstance(kind, str) else None
    if block is None:
        return f"type {kind!r} is not one of {', '.join(_METRIC_BLOCKS)}"
    body = metric.get(block)
    if not isinstance(body, Mapping) or not isinstance(body.get("target"), Mapping):
        return f"type {kind} needs {block}.target"
    return None


def _component_rules(new: InferenceService, c: str, autoscaler: Mapping[str, Any],
                     low: int | None) -> list[Rejection]:
    out: list[Rejection] = []
    path = f"spec.{c}.autoscaler"
    klass = _class_of(autoscaler)
    known = {k.lower(): k for k in AUTOSCALER_CLASSES}
    if klass is not None and klass.lower() not in known:
        out.append(_reject("AutoscalerClassUnknown", f"{path}.class",
                           f"{c}: autoscaler class {klass!r} is not one of "
                           f"{', '.join(AUTOSCALER_CLASSES)}"))
    legacy = new.annotations.get(ANNOTATION_AUTOSCALER_CLASS)
    if klass is not None and legacy and legacy.lower() != klass.lower():
        out.append(_reject("AutoscalerAnnotationConflict", f"{path}.class",
                           f"{c}: autoscaler.class {klass} conflicts with the "
                           f"{ANNOTATION_AUTOSCALER_CLASS}={legacy} annotation; remove one"))
    hpa = autoscaler.get("hpa")
    metrics = hpa.get("metrics") if isinstance(hpa, Mapping) else None
    for i, metric in enumerate(metrics if isinstance(metrics, list) else ()):
        problem = _metric_problem(metric)
        if problem is not None:
            out.append(_reject("HPAMetricMalformed", f"{path}.hpa.metrics[{i}]",
                               f"{c}: hpa.metrics[{i}] {problem}"))
    if klass is not None and klass.lower() == "keda":
        out.extend(_keda_rules(c, autoscaler, low))
    return out


def _keda_rules(c: str, autoscaler: Mapping[str, Any], low: int | None) -> list[Rejection]:
    out: list[Rejection] = []
    path = f"spec.{c}.autoscaler.keda"
    keda = autoscaler.get("keda")
    keda = keda if isinstance(keda, Mapping) else {}
    triggers = keda.get("triggers")
    if not isinstance(triggers, list) or not triggers:
        out.append(_reject("KedaTriggersRequired", f"{path}.triggers",
                           f"{c}: class KEDA needs at least one trigger"))
    idle = keda.get("idleReplicaCount")
    floor = low if low is not None else 1
    if isinstance(idle, int) and not isinstance(idle, bool) and idle >= floor:
        out.append(_reject("KedaIdleBelowMin", f"{path}.idleReplicaCount",
                           f"{c}: keda.idleReplicaCount={idle} must be below "
                           f"minReplicas={floor}"))
    return out


def autoscaler_rejections(new: InferenceService) -> list[Rejection]:
    """OME's autoscaler admission reasons for every component ``new`` declares."""
    out: list[Rejection] = []
    for c in new.declared_components:
        comp = new.component(c)
        if comp is None or not isinstance(comp.autoscaler, Mapping):
            continue
        out.extend(_component_rules(new, c, comp.autoscaler, comp.min_replicas))
    return out


def policy_ref_rejections(new: InferenceService, enabled: bool | None) -> list[Rejection]:
    """OME's reasons for ``spec.<c>.autoscalerPolicyRef``: a reserved kind, and any
    reference while the feature is off (``enabled`` False; None: not known, not checked)."""
    out: list[Rejection] = []
    for c in new.declared_components:
        comp = new.component(c)
        ref = comp.raw.get("autoscalerPolicyRef") if comp is not None else None
        if not isinstance(ref, Mapping):
            continue
        path = f"spec.{c}.autoscalerPolicyRef"
        kind = ref.get("kind") or "AutoscalerPolicy"
        if kind != "AutoscalerPolicy":
            out.append(_reject("AutoscalerPolicyRefKindReserved", f"{path}.kind",
                               f"{path}.kind: {kind!r} is reserved; only "
                               "AutoscalerPolicy is supported"))
        if enabled is False:
            out.append(_reject("AutoscalerPolicyFeatureDisabled", path,
                               f"{path}: needs the AutoscalerPolicy feature "
                               "(OME's autoscalerpolicies.ome.io CRD, "
                               "ome.autoscalerPolicy.enabled), which is not installed"))
    return out
