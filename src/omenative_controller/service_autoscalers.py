"""The InferenceServices' autoscalers, watched: HPAs and KEDA ScaledObjects.

Two list+watch caches of the objects labelled ``ome.io/inferenceservice``: the HPAs (ours,
and those KEDA derives from our ScaledObjects, which carry the ScaledObject's labels) and,
while discovery lists KEDA's ``keda.sh/v1alpha1``, the ScaledObjects. The ISVC controller
puts them in each pass's snapshot: the core mirrors their status into
``status.components.<c>.autoscaler`` and names the ones a class change left behind
(``omenative_core.service.autoscaler_status``), which ``delete`` removes with a UID
precondition (an object recreated meanwhile under the same name is not touched). A change
queues the owning InferenceService, so the status follows the HPA's counts.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

import structlog

from omenative_controller.kube.apiwatch import ServedInformers
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import Resource
from omenative_core.labels import LABEL_ISVC

__all__ = ["HPAS", "SCALED_OBJECTS", "OwnedAutoscalers", "mirrored", "relevant"]

log = structlog.get_logger("omenative.isvc")

HPAS: Final = Resource("autoscaling", "v2", "horizontalpodautoscalers",
                       "HorizontalPodAutoscaler")
"""The autoscaling/v2 HorizontalPodAutoscaler resource."""
SCALED_OBJECTS: Final = Resource("keda.sh", "v1alpha1", "scaledobjects", "ScaledObject")
"""KEDA's ScaledObject resource (its CRD may be absent)."""
_BY_KIND: Final = {HPAS.kind: HPAS, SCALED_OBJECTS.kind: SCALED_OBJECTS}

Changed = Callable[[str | None, JSON | None, JSON | None], None]


_MIRRORED: Final = ("currentReplicas", "desiredReplicas", "lastScaleTime", "conditions")
"""The status fields the ISVC status mirrors (``autoscaler_status``)."""


def mirrored(obj: JSON | None) -> object:
    """What of an autoscaler an ISVC pass reads: its identity, spec and mirrored status.
    The HPA controller rewrites the rest (``currentMetrics``, ``observedGeneration``) on its
    own beat; a change there must not queue a pass, or every pass re-applies every object
    of the InferenceService at steady state."""
    if obj is None:
        return None
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    return (meta.get("labels"), meta.get("ownerReferences"), meta.get("deletionTimestamp"),
            meta.get("uid"), obj.get("spec"), tuple(status.get(k) for k in _MIRRORED))


def relevant(on_change: Changed) -> Changed:
    """``on_change`` called only when what an ISVC pass reads of the autoscaler changed."""
    def changed(namespace: str | None, old: JSON | None, new: JSON | None) -> None:
        if old is None or new is None or mirrored(old) != mirrored(new):
            on_change(namespace, old, new)
    return changed


class OwnedAutoscalers:
    """The HPA and ScaledObject caches; ``on_change`` gets each change that an ISVC pass
    would see (the controller queues the owner)."""

    def __init__(self, client: KubeClient, namespaces: Sequence[str] | None,
                 on_change: Changed, *, interval: float = 30.0) -> None:
        self.client = client
        on_change = relevant(on_change)
        self.hpas: Informer[JSON] = Informer(
            client, HPAS, dict, namespaces=namespaces, label_selector=LABEL_ISVC,
            on_change=on_change)
        self.scaled_objects: Informer[JSON] = Informer(
            client, SCALED_OBJECTS, dict, namespaces=namespaces, label_selector=LABEL_ISVC,
            on_change=on_change)
        self.keda = ServedInformers(client, (self.scaled_objects,), interval=interval)
        """Runs the ScaledObject cache while discovery lists KEDA's API (polled)."""

    def of(self, namespace: str, isvc: str) -> tuple[Mapping[str, Any], ...]:
        """The HPAs and ScaledObjects in ``namespace`` labelled with ``isvc``."""
        caches = [self.hpas]
        if self.keda.serves(self.scaled_objects.name):
            caches.append(self.scaled_objects)
        out: list[Mapping[str, Any]] = []
        for cache in caches:
            for _key, obj in cache.items():
                meta = obj.get("metadata") or {}
                if meta.get("namespace") == namespace and \
                        (meta.get("labels") or {}).get(LABEL_ISVC) == isvc:
                    out.append({"apiVersion": cache.resource.api_version,
                                "kind": cache.resource.kind, **obj})
        return tuple(out)

    async def delete(self, namespace: str, refs: Sequence[Mapping[str, str]]) -> None:
        """Delete each named autoscaler (UID precondition); one already gone, or replaced
        meanwhile, is left as it is (the next pass decides again)."""
        for ref in refs:
            res = _BY_KIND.get(ref["kind"])
            if res is None:
                continue
            try:
                await self.client.delete(res, ref["name"], namespace,
                                         uid=ref.get("uid") or None)
            except ApiError as exc:
                log.info("isvc.autoscaler_kept", namespace=namespace, kind=ref["kind"],
                         name=ref["name"], status=exc.status, error=exc.message)
            else:
                log.info("isvc.autoscaler_removed", namespace=namespace, kind=ref["kind"],
                         name=ref["name"], component=ref.get("component"))
