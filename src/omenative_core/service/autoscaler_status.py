"""``status.components.<c>.autoscaler`` and ``scaleTargetRef``, and the autoscalers to remove.

As OME v1.3 writes them (``pkg/apis/ome/v1beta1`` ``ComponentAutoscalerStatus`` /
``ScaleTargetRef``; ``pkg/controller/v1beta1/inferenceservice/autoscaler``
``WriteAutoscalerStatus``, ``ResolveComponentAutoscaler``):

* ``autoscaler.class``: the class in effect, spelled ``HPA``, ``KEDA``, ``External`` or
  ``None``; ``managedBy``: ``ome`` for HPA and KEDA, ``external`` for External, ``none``
  otherwise; ``specSource``: where the block came from, ``isvc``, ``runtime``, ``legacy``
  (the ``ome.io/autoscalerClass`` annotation; RawDeployment and MultiNode only: OME reads
  it through ``ResolveRawComponentAutoscaler``, so an OMENative component that sets it is
  ``HPA`` / ``default``) or ``default``.
* Under ``managedBy: ome``, the live scaler mirrored: the HPA's ``currentReplicas``,
  ``desiredReplicas`` (left out when 0), ``lastScaleTime`` and conditions; for KEDA the
  ScaledObject's conditions (a missing reason becomes the type, the transition time is kept
  while the status holds) and ``lastActiveTime``, with the counts from the HPA KEDA derives
  (``status.hpaName``). A scaler not seen yet leaves the counts out.
* ``scaleTargetRef``: ``{apiVersion, kind, name}`` of the object an autoscaler scales, the
  InferenceReplica for OMENative and the Deployment for RawDeployment, published whatever
  the class; none for MultiNode.

``stale_autoscalers`` names the HPAs and ScaledObjects this ISVC owns that its plan no
longer renders (the class changed: HPA -> KEDA, KEDA -> None, ...), for the shell to delete
after the new one is applied, as OME does. Only objects whose controller ownerReference is
this InferenceService (by UID) and that carry its label are ever named: never a user's own
autoscaler, never the HPA KEDA derives (its owner is the ScaledObject). A blocked component
keeps its autoscaler, and so does a KEDA component while KEDA's CRD is absent (OME creates
the new autoscaler before it deletes the old one, so a failed create keeps the old).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Final

from attrs import evolve

from omenative_core.conditions import transition_time
from omenative_core.labels import LABEL_COMPONENT, LABEL_ISVC
from omenative_core.model.timefmt import format_time
from omenative_core.service.merge import effective_component
from omenative_core.service.model import InferenceService, ServingRuntime
from omenative_core.service.modes import MODE_OMENATIVE, MODE_RAW
from omenative_core.service.plan import (
    ANNOTATION_AUTOSCALER_CLASS,
    API_VERSION_KEDA,
    ComponentPlan,
    ServicePlan,
)
from omenative_core.service.scale import autoscaler_class

__all__ = [
    "KIND_HPA",
    "KIND_SCALED_OBJECT",
    "OME_CLASSES",
    "autoscaler_status",
    "scale_target_ref",
    "spec_source",
    "stale_autoscalers",
    "with_autoscaler",
]

KIND_HPA: Final = "HorizontalPodAutoscaler"
KIND_SCALED_OBJECT: Final = "ScaledObject"
OME_CLASSES: Final = {"hpa": "HPA", "keda": "KEDA", "external": "External", "none": "None"}
"""Our lower-case class -> OME's spelling in spec and status."""
_MANAGED_BY: Final = {"hpa": "ome", "keda": "ome", "external": "external"}
_KINDS: Final = {"HorizontalPodAutoscaler": "autoscaling/v2", "ScaledObject": API_VERSION_KEDA}
_POD_TAIL: Final = re.compile(r"(?i) of pod \S+")
"""The rotating ``of Pod <name>`` tail of HPA metric messages (OME collapses it)."""


def spec_source(isvc: InferenceService, runtime: ServingRuntime | None, component: str, *,
                legacy: bool = True) -> str:
    """Where ``component``'s autoscaler block comes from: ``isvc``, ``runtime``, ``legacy``
    (no block; the ISVC's ``ome.io/autoscalerClass`` annotation, counted only with
    ``legacy``: not for an OMENative component, as in OME) or ``default``."""
    own = isvc.component(component)
    if own is not None and own.autoscaler is not None:
        return "isvc"
    config = runtime.config(component) if runtime is not None else None
    if config is not None and config.autoscaler is not None:
        return "runtime"
    if legacy and isvc.annotations.get(ANNOTATION_AUTOSCALER_CLASS):
        return "legacy"
    return "default"


def scale_target_ref(mode: str, name: str) -> dict[str, str] | None:
    """The object an autoscaler of a ``mode`` component named ``name`` scales, or None
    (MultiNode has no scale target)."""
    if mode == MODE_OMENATIVE:
        return {"apiVersion": "ome.io/v1beta1", "kind": "InferenceReplica", "name": name}
    if mode == MODE_RAW:
        return {"apiVersion": "apps/v1", "kind": "Deployment", "name": name}
    return None


def with_autoscaler(cp: ComponentPlan, isvc: InferenceService,
                    runtime: ServingRuntime | None) -> ComponentPlan:
    """``cp`` with its autoscaler class (OME's spelling), spec source and scale target; a
    blocked plan is returned as it is (its status keeps what it had)."""
    if cp.blocked:
        return cp
    merged = effective_component(isvc, runtime, cp.component)
    if merged is None:
        return cp
    legacy = cp.mode != MODE_OMENATIVE  # OME: ResolveRawComponentAutoscaler is Raw-only
    klass = autoscaler_class(isvc, merged, legacy=legacy)
    return evolve(
        cp,
        autoscaler={"class": OME_CLASSES.get(klass, klass),
                    "specSource": spec_source(isvc, runtime, cp.component, legacy=legacy)},
        scale_target=scale_target_ref(cp.mode, f"{isvc.name}-{cp.component}"))


def _hpa_conditions(raw: object) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for c in raw if isinstance(raw, list) else ():
        if not isinstance(c, Mapping) or not c.get("type"):
            continue
        cond = {"type": str(c["type"]), "status": str(c.get("status") or "Unknown"),
                "reason": str(c.get("reason") or c["type"]),
                "message": _POD_TAIL.sub(" of Pod <pod>", str(c.get("message") or ""))}
        if c.get("lastTransitionTime"):
            cond["lastTransitionTime"] = c["lastTransitionTime"]
        out.append(cond)
    return out


def _keda_conditions(raw: object, previous: object, now: datetime) -> list[dict[str, Any]]:
    """KEDA's conditions carry no transition time (and Paused no reason): the reason falls
    back to the type, the time is the previous one while the status holds, else ``now``."""
    prev = {str(c.get("type")): c for c in previous if isinstance(c, Mapping)} \
        if isinstance(previous, list) else {}
    out = _hpa_conditions(raw)
    for cond in out:
        old = prev.get(cond["type"]) or {}
        since = old.get("lastTransitionTime")
        cond["lastTransitionTime"] = transition_time(
            old.get("status"), since if isinstance(since, str) else None, cond["status"],
            format_time(now))
    return out


def _counts(out: dict[str, Any], status: Mapping[str, Any]) -> None:
    for key in ("currentReplicas", "desiredReplicas"):
        n = status.get(key)
        if isinstance(n, int) and not isinstance(n, bool) and n:
            out[key] = n


def _status_of(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
    status = (obj or {}).get("status")
    return status if isinstance(status, Mapping) else {}


def autoscaler_status(
    cp: ComponentPlan,
    live: Mapping[tuple[str, str], Mapping[str, Any]],
    previous: Mapping[str, Any] | None,
    now: datetime,
) -> dict[str, Any] | None:
    """``status.components.<c>.autoscaler`` of a rendered component, or None (blocked).
    ``live``: the namespace's HPAs and ScaledObjects of this ISVC by (kind, name);
    ``previous``: the ``autoscaler`` status written before (KEDA's transition times).
    With an ``autoscalerPolicyRef``: ``policy`` or ``shadowedPolicyRef`` and the
    ``AutoscalerResolved`` condition (``policy_resolve``)."""
    out = _scaler_status(cp, live, previous, now)
    if out is None or cp.autoscaler is None:
        return out
    for key in ("policy", "shadowedPolicyRef"):
        if isinstance(cp.autoscaler.get(key), Mapping):
            out[key] = dict(cp.autoscaler[key])
    resolved = cp.autoscaler.get("resolved")
    if isinstance(resolved, Mapping):
        old = {str(c.get("type")): c for c in (previous or {}).get("conditions") or ()
               if isinstance(c, Mapping)}.get(str(resolved["type"])) or {}
        since = old.get("lastTransitionTime")
        cond = {**resolved, "lastTransitionTime": transition_time(
            old.get("status"), since if isinstance(since, str) else None,
            str(resolved["status"]), format_time(now))}
        out["conditions"] = [*out.get("conditions", ()), cond]
    return out


def _scaler_status(
    cp: ComponentPlan,
    live: Mapping[tuple[str, str], Mapping[str, Any]],
    previous: Mapping[str, Any] | None,
    now: datetime,
) -> dict[str, Any] | None:
    if cp.autoscaler is None:
        return None
    klass = str(cp.autoscaler.get("class", ""))
    out: dict[str, Any] = {"class": klass,
                           "managedBy": _MANAGED_BY.get(klass.lower(), "none"),
                           "specSource": cp.autoscaler.get("specSource", "default")}
    if out["managedBy"] != "ome":
        return out
    scaler = next((o for o in cp.objects if o.get("kind") in (KIND_HPA, KIND_SCALED_OBJECT)),
                  None)
    name = str(((scaler or {}).get("metadata") or {}).get("name") or "")
    kind = str((scaler or {}).get("kind") or "")
    status = _status_of(live.get((kind, name)))
    if kind == KIND_HPA:
        _counts(out, status)
        conditions = _hpa_conditions(status.get("conditions"))
        last = status.get("lastScaleTime")
    elif kind == KIND_SCALED_OBJECT:
        derived = status.get("hpaName") or name
        _counts(out, _status_of(live.get((KIND_HPA, str(derived)))))
        conditions = _keda_conditions(status.get("conditions"),
                                      (previous or {}).get("conditions"), now)
        last = status.get("lastActiveTime")
    else:
        return out
    if last:
        out["lastScaleTime"] = last
    if conditions:
        out["conditions"] = conditions
    return out


def _ours(obj: Mapping[str, Any], isvc: InferenceService) -> bool:
    meta = obj.get("metadata") or {}
    if (meta.get("labels") or {}).get(LABEL_ISVC) != isvc.name or not isvc.uid:
        return False
    return any(r.get("kind") == "InferenceService" and r.get("controller")
               and r.get("uid") == isvc.uid for r in meta.get("ownerReferences") or ())


def _settled(cp: ComponentPlan) -> bool:
    """The component's wanted autoscaler is in its plan (or it wants none), so an old one
    may go: a KEDA component without KEDA's CRD keeps its HPA."""
    if cp.blocked or cp.autoscaler is None or cp.autoscaler.get("hold"):
        return False  # a policy hold keeps whatever autoscaler is live
    if str(cp.autoscaler.get("class", "")).lower() == "keda":
        return cp.object(KIND_SCALED_OBJECT) is not None
    return True


def stale_autoscalers(isvc: InferenceService, plan: ServicePlan,
                      live: Iterable[Mapping[str, Any]]) -> tuple[dict[str, str], ...]:
    """The owned HPAs and ScaledObjects of a settled component that its plan no longer
    renders: ``{apiVersion, kind, name, uid, component}`` each, for the shell to delete with
    a UID precondition."""
    wanted = {(o.get("kind"), (o.get("metadata") or {}).get("name")) for o in plan.objects}
    settled = {cp.component for cp in plan.components if _settled(cp)}
    out: list[dict[str, str]] = []
    for obj in live:
        kind = obj.get("kind")
        meta = obj.get("metadata") or {}
        component = (meta.get("labels") or {}).get(LABEL_COMPONENT)
        if kind not in _KINDS or (kind, meta.get("name")) in wanted:
            continue
        if component not in settled or not _ours(obj, isvc):
            continue
        out.append({"apiVersion": _KINDS[str(kind)], "kind": str(kind),
                    "name": str(meta.get("name")), "uid": str(meta.get("uid") or ""),
                    "component": str(component)})
    return tuple(sorted(out, key=lambda d: (d["component"], d["kind"], d["name"])))
