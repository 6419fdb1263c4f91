"""The shell of the LeaderWorkerSet hand-over: watch LeaderWorkerSets, carry out each step.

``omenative_core.service.handover`` decides; this module reads and writes. The
InferenceService controller owns one ``LwsHandover``:

* ``presence``: the LeaderWorkerSet CRD, polled; while it is Established an informer caches
  the LeaderWorkerSets that carry ``ome.io/inferenceservice`` (every one we render does), and
  a change to one of them brings its InferenceService back to the queue.
* ``known()``: the CRD has been looked up and, when present, the cache has synced. Until
  then the controller does not decide that a component has no LeaderWorkerSet (it would
  switch the Service to the OMENative pods alone and drop the serving groups).
* ``prepare(step)``: before the objects are applied, the LeaderWorkerSet's leader pods get
  ``ome.io/runner=leader`` so the Service's shared selector keeps them as endpoints.
* ``finish(step)``: after the status is written, scale the LeaderWorkerSet (merge patch of
  ``spec.replicas`` with its UID and resourceVersion as preconditions, so a stale view is
  refused) or delete it (UID precondition, background propagation).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

import structlog

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.crdwatch import CrdPresence
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer, object_key
from omenative_controller.kube.resources import PODS, Resource
from omenative_core.labels import LABEL_ISVC, LABEL_RUNNER
from omenative_core.service import CRD_LEADER_WORKER_SET
from omenative_core.service.handover import (
    LABEL_LWS_NAME,
    LABEL_LWS_WORKER_INDEX,
    HandoverStep,
    LwsView,
    lws_name,
    lws_view_from_json,
)

__all__ = ["LEADER_WORKER_SETS", "LwsHandover"]

log = structlog.get_logger("omenative.lws_handover")

LEADER_WORKER_SETS: Final = Resource(
    "leaderworkerset.x-k8s.io", "v1", "leaderworkersets", "LeaderWorkerSet"
)
"""The LeaderWorkerSet resource (v1, as MultiNode renders it)."""

_COMPONENTS: Final = ("engine", "decoder")


class LwsHandover:
    """LeaderWorkerSets of InferenceServices, and the writes of their hand-overs.

    ``on_change(key)``: called with ``namespace/isvc`` when one of its LeaderWorkerSets
    changes (or ``None`` when the CRD appears or goes: look at everything again).
    """

    def __init__(
        self,
        client: KubeClient,
        namespaces: tuple[str, ...],
        on_change: Callable[[str | None], None],
        *,
        interval: float = 30.0,
    ) -> None:
        self.client = client
        self.namespaces = namespaces
        self.on_change = on_change
        self.presence = CrdPresence(
            client,
            CRD_LEADER_WORKER_SET,
            self._informer,
            interval=interval,
            on_change=lambda _present: on_change(None),
        )

    def _informer(self, version: str) -> Informer[JSON]:
        res = Resource(LEADER_WORKER_SETS.group, version, LEADER_WORKER_SETS.plural,
                       LEADER_WORKER_SETS.kind)
        return Informer(self.client, res, dict, namespaces=self.namespaces or None,
                        label_selector=LABEL_ISVC, on_change=self._changed)

    def _changed(self, namespace: str | None, old: JSON | None, new: JSON | None) -> None:
        obj = new if new is not None else old
        if obj is None:
            return
        isvc = ((obj.get("metadata") or {}).get("labels") or {}).get(LABEL_ISVC)
        if isinstance(isvc, str):
            self.on_change(object_key(namespace, isvc))

    def known(self) -> bool:
        """True once the CRD was looked up and, when it is there, the cache has synced."""
        if not self.presence.checked.is_set():
            return False
        return self.presence.version is None or self.presence.present

    def views(self, namespace: str, isvc: str, isvc_uid: str) -> dict[str, LwsView]:
        """The LeaderWorkerSet ``lws-{isvc}-{component}`` of each component that has one."""
        informer = self.presence.informer
        if informer is None or not self.presence.present:
            return {}
        out: dict[str, LwsView] = {}
        for component in _COMPONENTS:
            obj = informer.get(object_key(namespace, lws_name(isvc, component)))
            if obj is not None:
                out[component] = lws_view_from_json(obj, isvc_uid)
        return out

    async def prepare(self, namespace: str, step: HandoverStep) -> None:
        """Label the LeaderWorkerSet's leader pods ``ome.io/runner=leader`` (those without)."""
        if not step.label_leaders:
            return
        selector = (f"{LABEL_LWS_NAME}={step.lws.name},{LABEL_LWS_WORKER_INDEX}=0,"
                    f"!{LABEL_RUNNER}")
        page = await self.client.list(PODS, namespace, label_selector=selector)
        for pod in page.get("items") or ():
            meta = pod.get("metadata") or {}
            patch = {"metadata": {"uid": meta.get("uid"),
                                  "labels": {LABEL_RUNNER: "leader"}}}
            try:
                await self.client.patch(PODS, str(meta.get("name")), patch, namespace)
            except ApiError as exc:
                if not (exc.not_found or exc.conflict):
                    raise
            log.info("lws_handover.leader_labelled", lws=step.lws.name, pod=meta.get("name"))

    async def finish(self, namespace: str, step: HandoverStep) -> None:
        """Scale or delete the LeaderWorkerSet as ``step`` says; a stale view is refused
        by the API server (409) and decided again on the next pass."""
        lws = step.lws
        if step.delete:
            try:
                await self.client.delete(LEADER_WORKER_SETS, lws.name, namespace, uid=lws.uid)
            except ApiError as exc:
                if not exc.not_found:
                    raise
            log.info("lws_handover.deleted", lws=lws.name, component=step.component)
            return
        if step.scale_to is None:
            return
        patch: Mapping[str, object] = {
            "metadata": {"uid": lws.uid, "resourceVersion": lws.resource_version},
            "spec": {"replicas": step.scale_to},
        }
        written = await self.client.patch(LEADER_WORKER_SETS, lws.name, dict(patch), namespace)
        informer = self.presence.informer
        if informer is not None:
            informer.upsert_if_newer(written)
        log.info("lws_handover.scaled", lws=lws.name, component=step.component,
                 replicas=step.scale_to, serving=step.serving, desired=step.desired,
                 phase=step.phase)
