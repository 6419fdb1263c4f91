"""Rollout groups, the shell side: what ``omenative_core.service.plan_service`` asks of them.

The core decides a pass's rollout groups (``omenative_core.service.rollout_pass``: the
members' views, ``decide``, the pacing in each member's apply body, ``status.rollout``,
traffic and holds in the status, the per-revision Services wanted). This module does the
I/O around it for the InferenceService controller:

1. before planning: ``pairing_tokens`` (the pairing token of every stored revision, read
   from the ISVC's ControllerRevisions) and ``answers`` (the measurements of the queries
   asked last pass, kept in memory by ISVC uid) go into the ``ServiceSnapshot``;
2. ``finish`` (only after the ISVC status write succeeded, so a pass repeated from the same
   persisted state emits nothing twice): Events on the ISVC and its members, consumed
   annotations removed by a JSON patch that first tests their value, each member's traffic
   and ``coordinationGroupRef`` mirrored into the InferenceReplica status (the planner keeps
   both; its own status PUT carries a resourceVersion, so a concurrent write makes it
   re-read, never overwrite), the due analysis queries run (with the ``authRef`` Secret's
   credentials); it returns when to look again;
3. ``revision_services``: the per-revision Services the pass wants created (server-side
   apply) and the stale ones deleted.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

import structlog

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.events import EventRecorder, involved_object
from omenative_controller.kube.resources import (
    CONTROLLER_REVISIONS,
    INFERENCE_REPLICAS,
    SECRETS,
    SERVICES,
    Resource,
)
from omenative_controller.ome_series import OMESeries
from omenative_controller.prometheus import AuthSecretError, PrometheusClient, auth_headers
from omenative_core.codec import CodecError
from omenative_core.labels import LABEL_COMPONENT, LABEL_ISVC, LABEL_REVISION_HASH
from omenative_core.revisions import pairing_from_revision
from omenative_core.rollout import AnalysisMeasurement
from omenative_core.service import InferenceService
from omenative_core.service.rollout_pass import RolloutPass
from omenative_core.views import revision_view_from_json

__all__ = [
    "ANSWERED_REQUEUE_SECONDS",
    "RolloutController",
]

log = structlog.get_logger("omenative.rollout")

ANSWERED_REQUEUE_SECONDS: Final = 0.5
"""Look again this soon after analysis queries were answered, so the round is evaluated."""

_INFERENCE_SERVICES: Final = Resource(
    "ome.io", "v1beta1", "inferenceservices", "InferenceService"
)


_REVISION_MEMOS: Final = 4096
"""ISVCs whose per-revision Services are remembered as done; past it, all are looked at again."""


class RolloutController:
    """Runs the rollout decisions for the InferenceService controller.

    ``prometheus``: the analysis client (one is created when None). Measurements wait in
    memory, by ISVC uid, until the pass after the one that asked for them; lost ones (a
    restart) are asked again, since a pending round re-issues its queries.
    """

    def __init__(
        self,
        client: KubeClient,
        *,
        guard: Callable[[], bool],
        now: Callable[[], datetime],
        prometheus: PrometheusClient | None = None,
        source: str = "omenative-isvc",
    ) -> None:
        self.client = client
        self.guard = guard
        self.now = now
        self.prometheus = prometheus or PrometheusClient()
        self.source = source
        self.events = EventRecorder(client, component=source, guard=guard, window=0, now=now)
        self._answers: dict[str, dict[str, AnalysisMeasurement]] = {}
        #: per ISVC uid, the revision Services last made to match (``revision_services``)
        self._revision_memo: dict[str, str] = {}
        #: OME's series; the manager sets it, and committed passes count group transitions
        self.ome_series: OMESeries | None = None

    # ------------------------------------------------------------------ before planning

    def answers(self, uid: str) -> tuple[AnalysisMeasurement, ...]:
        """The measurements taken for the queries asked last pass (the next snapshot's)."""
        return tuple(self._answers.get(uid, {}).values())

    def forget(self, uid: str) -> None:
        """The ISVC has no rollout groups (any more): drop what waits for it."""
        self._answers.pop(uid, None)

    def isvc_gone(self, namespace: str, name: str) -> None:
        """The ISVC was deleted: drop OME's series labelled with it."""
        if self.ome_series is not None:
            self.ome_series.forget_isvc(namespace, name)

    async def pairing_tokens(self, isvc: InferenceService) -> dict[str, dict[str, str | None]]:
        """By component, the pairing token of each revision stored for ``isvc``."""
        page = await self.client.list(CONTROLLER_REVISIONS, isvc.namespace,
                                      label_selector=f"{LABEL_ISVC}={isvc.name}")
        out: dict[str, dict[str, str | None]] = {}
        for obj in page.get("items") or ():
            component = (obj["metadata"].get("labels") or {}).get(LABEL_COMPONENT)
            if not isinstance(component, str):
                continue
            try:
                view = revision_view_from_json(obj)
            except CodecError:
                continue
            out.setdefault(component, {})[view.name] = pairing_from_revision(view)
        return out

    # ------------------------------------------------------------------ after the status

    async def finish(
        self, raw: Mapping[str, Any], isvc: InferenceService, rp: RolloutPass,
        live: Mapping[str, JSON],
    ) -> float | None:
        """Apply the rest of a committed pass (``live``: each member's InferenceReplica as
        last written or cached); returns seconds until the next look."""
        d = rp.decision
        if self.ome_series is not None:
            self.ome_series.rollout_groups(isvc.namespace, isvc.name, (
                (i, rp.phases_before[i] if i < len(rp.phases_before) else g.phase.value,
                 g.phase.value, g.failure.value) for i, g in enumerate(d.state.groups)))
        for ev in d.events:
            await self._event(_reference(raw, "InferenceService"), ev.type, ev.reason,
                              ev.message)
            for component in ev.components:  # also where `kubectl describe irep` shows it
                member = live.get(component)
                if member is not None:
                    await self._event(_reference(member, INFERENCE_REPLICAS.kind), ev.type,
                                      ev.reason, ev.message)
        if d.remove_annotations:
            await self._remove_annotations(raw, d.remove_annotations)
        await self._mirror_traffic(isvc, rp, live)
        answered = await self._run_queries(isvc, rp)
        delays = []
        if d.requeue_after is not None:
            delays.append(max(d.requeue_after.total_seconds(), 0.0))
        if answered:
            delays.append(ANSWERED_REQUEUE_SECONDS)
        return min(delays) if delays else None

    async def _event(self, involved: Mapping[str, Any], type_: str, reason: str,
                     message: str) -> None:
        await self.events.record(involved, type_, reason, message, lg=log)

    async def _remove_annotations(self, raw: Mapping[str, Any], keys: tuple[str, ...]) -> None:
        meta = raw.get("metadata") or {}
        present = meta.get("annotations") or {}
        ops: list[JSON] = []
        for key in keys:
            if key not in present:
                continue
            path = "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")
            ops.append({"op": "test", "path": path, "value": present[key]})
            ops.append({"op": "remove", "path": path})
        if not ops or not self.guard():
            return
        try:
            await self.client.patch(_INFERENCE_SERVICES, str(meta["name"]), ops,
                                    meta.get("namespace"), patch_type="json")
        except ApiError as exc:
            # a changed value (test failed) or a gone ISVC: the next pass decides again
            log.info("rollout.annotations_not_removed", keys=list(keys), error=exc.message)

    async def _mirror_traffic(self, isvc: InferenceService, rp: RolloutPass,
                              members: Mapping[str, JSON]) -> None:
        for c, cd in sorted(rp.decision.components.items()):
            live = members.get(c)
            status = live.get("status") if live is not None else None
            if not isinstance(status, Mapping) or live is None:
                continue  # the manager has not written a status yet
            traffic = rp.traffic_json(c)
            if (status.get("traffic") or []) == traffic and \
                    status.get("coordinationGroupRef") == cd.coordination_group_ref:
                continue
            if not self.guard():
                return
            try:
                await self.client.patch(
                    INFERENCE_REPLICAS, str(live["metadata"]["name"]),
                    {"status": {"traffic": traffic,
                                "coordinationGroupRef": cd.coordination_group_ref}},
                    isvc.namespace, subresource="status")
            except ApiError as exc:
                log.info("rollout.traffic_not_mirrored", component=c, error=exc.message)

    async def revision_services(
        self, isvc: InferenceService, wanted: Mapping[str, JSON], kept: frozenset[str],
    ) -> None:
        """Create the ``wanted`` per-revision Services; delete the rest, except those of the
        ``kept`` components (blocked ones)."""
        memo = json.dumps([sorted(kept), wanted], sort_keys=True)
        if self._revision_memo.get(isvc.uid) == memo:
            return  # done for this set already: no LIST on every pass of every ISVC
        page = await self.client.list(SERVICES, isvc.namespace, label_selector=(
            f"{LABEL_ISVC}={isvc.name},{LABEL_REVISION_HASH}"))
        existing = {s["metadata"]["name"]: s for s in page.get("items") or ()}
        for name, svc in sorted(wanted.items()):
            have = existing.get(name)
            if have is not None and _same_service(have, svc):
                continue
            if not self.guard():
                return
            try:
                await self.client.request(
                    "PATCH", SERVICES.path(isvc.namespace, name), verb="patch",
                    resource=SERVICES.plural,
                    query=[("fieldManager", self.source), ("force", "true")],
                    body=svc, content_type="application/apply-patch+yaml")
            except ApiError as exc:
                log.info("rollout.service_failed", name=name, error=exc.message)
                return
        for name, have in sorted(existing.items()):
            component = (have["metadata"].get("labels") or {}).get(LABEL_COMPONENT)
            if name in wanted or "-rev-" not in name or component in kept:
                continue
            refs = have["metadata"].get("ownerReferences") or ()
            if not any(r.get("uid") == isvc.uid for r in refs):
                continue
            if not self.guard():
                return
            try:
                await self.client.delete(SERVICES, name, isvc.namespace,
                                         uid=have["metadata"].get("uid"))
            except ApiError as exc:
                if not exc.not_found:
                    log.info("rollout.service_delete_failed", name=name, error=exc.message)
                    return
        if len(self._revision_memo) > _REVISION_MEMOS:
            self._revision_memo.clear()
        self._revision_memo[isvc.uid] = memo

    async def _run_queries(self, isvc: InferenceService, rp: RolloutPass) -> bool:
        """Run the due queries not answered yet; True when some got an answer."""
        asked = {q.id: q for q in rp.decision.queries}
        kept = {i: m for i, m in self._answers.get(isvc.uid, {}).items() if i in asked}
        todo = [q for i, q in sorted(asked.items()) if i not in kept]
        if not todo:
            if kept:
                self._answers[isvc.uid] = kept
            else:
                self._answers.pop(isvc.uid, None)
            return False
        pinned = rp.decision.state.pinned
        groups = pinned.groups if pinned.groups else rp.spec.groups

        def source_of(q: Any) -> Any:
            group = groups[q.group] if q.group < len(groups) else None
            return group.canary.prometheus if group and group.canary else None

        # each authRef Secret read once per pass: its header, or why there is none
        refs = sorted({s.auth_ref for s in map(source_of, todo)
                       if s is not None and s.server_address and s.auth_ref})
        auths = dict(zip(refs, await asyncio.gather(
            *(self._auth_header(isvc.namespace, r) for r in refs)), strict=True))

        async def one(q: Any) -> AnalysisMeasurement:
            source = source_of(q)
            if source is None or not source.server_address:
                why = ("prometheus.providerRef is not supported; set serverAddress"
                       if source is not None and source.provider_ref else
                       "no canary.prometheus.serverAddress")
                return AnalysisMeasurement(id=q.id, value=None, error=f"error: {why}")
            headers = dict(source.headers)
            if source.auth_ref:
                auth = auths[source.auth_ref]
                if isinstance(auth, str):
                    return AnalysisMeasurement(id=q.id, value=None, error=f"error: {auth}")
                # the Secret's header wins over a spelled-out one, whatever its case
                headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
                headers.update(auth)
            result = await self.prometheus.query(source.server_address, q.query,
                                                 headers=headers)
            m = result.measurement(q.id)
            if m.value is not None and math.isnan(m.value):
                return AnalysisMeasurement(id=q.id, value=None, error="inconclusive: NaN")
            return m

        results = await asyncio.gather(*(one(q) for q in todo))
        for m in results:
            kept[m.id] = m
        self._answers[isvc.uid] = kept
        log.info("rollout.analysis", isvc=isvc.name,
                 answers={m.id: m.value if m.value is not None else m.error for m in results})
        return True

    async def _auth_header(self, namespace: str, name: str) -> dict[str, str] | str:
        """The ``Authorization`` header of authRef Secret ``name``, or why there is none
        (never raises; neither the Secret's content nor the header is logged)."""
        try:
            secret = await self.client.get(SECRETS, name, namespace)
        except ApiError as exc:
            if exc.not_found:
                return f"authRef secret {name} not found"
            if exc.status == 403:
                return f"reading authRef secret {name} is forbidden: {exc.message}"[:300]
            return f"reading authRef secret {name} failed: {exc}"[:300]
        try:
            return auth_headers(secret)
        except AuthSecretError as exc:
            return str(exc)

    async def close(self) -> None:
        """Close the Prometheus session."""
        await self.prometheus.close()


def _reference(obj: Mapping[str, Any], kind: str) -> dict[str, Any]:
    """An Event's ``involvedObject`` for ``obj`` (an ome.io/v1beta1 object of ``kind``)."""
    return involved_object(obj, api_version=_INFERENCE_SERVICES.api_version, kind=kind)


def _same_service(have: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    hs, ws = have.get("spec") or {}, want.get("spec") or {}
    if hs.get("selector") != ws.get("selector"):
        return False
    hp = [(p.get("name"), p.get("port"), p.get("targetPort")) for p in hs.get("ports") or ()]
    wp = [(p.get("name"), p.get("port"), p.get("targetPort")) for p in ws.get("ports") or ()]
    if hp != wp:
        return False
    refs = have.get("metadata", {}).get("ownerReferences") or ()
    want_refs = want.get("metadata", {}).get("ownerReferences") or ()
    return [r.get("uid") for r in refs] == [r.get("uid") for r in want_refs]
