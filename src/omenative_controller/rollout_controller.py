"""Rollout groups, the shell side: feed ``omenative_core.rollout.decide`` and apply it.

The InferenceService controller calls this module in every pass over an ISVC whose
``spec.rollout`` has groups (without groups nothing here runs and every component rolls
on its own). One pass:

1. ``RolloutController.prepare`` (before any write): one ``MemberView`` per member from
   the live InferenceReplica's status and the *rendered* spec (so the revision is the one
   about to be applied), the pairing token of every live revision from its
   ControllerRevision, the state persisted in ``status.rollout``, the measurements taken
   for the queries asked last pass, then ``decide``.
2. ``RolloutPass.replica_body``: the member's pacing (``spec.pacing.partition``,
   ``rollbackToRevision``) and a rollingUpdate group's budgets
   (``spec.lifecycle.updateStrategy.rollingUpdate``) go into the same server-side apply
   body as the template, under the same field manager: a new template never lands without
   the partition that holds it back, and the pacing is dropped by SSA when rollout groups
   are removed.
3. ``RolloutPass.shape_status``: ``status.rollout`` (``state_to_json``),
   ``status.components.<c>.traffic`` and the group's hold in
   ``status.components.<c>.lifecycle.rolloutHold``; the ISVC status write is the commit
   point of the pass.
4. ``RolloutController.finish`` (only after that write succeeded, so a pass repeated from
   the same persisted state emits nothing twice): Events on the ISVC, consumed annotations
   removed by a JSON patch that first tests their value, each member's traffic and
   ``coordinationGroupRef`` mirrored into the InferenceReplica status (the planner keeps
   both; its own status PUT carries a resourceVersion, so a concurrent write makes it
   re-read, never overwrite), per-revision Services created and the stale ones deleted,
   the due analysis queries run (with the ``authRef`` Secret's credentials); it returns
   when to look again.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, Final

import structlog
from attrs import define, evolve, field

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
from omenative_core.codec import CodecError, spec_from_json
from omenative_core.labels import LABEL_COMPONENT, LABEL_ISVC, LABEL_REVISION_HASH
from omenative_core.model.spec import InferenceReplica
from omenative_core.revisions import hash_of, pairing_from_revision
from omenative_core.rollout import (
    AnalysisMeasurement,
    MemberView,
    RolloutConfig,
    RolloutDecision,
    RolloutSpec,
    RolloutSpecError,
    RolloutState,
    RolloutStateError,
    decide,
    member_view,
    parse_rollout,
    state_from_json,
    validate_rollout,
)
from omenative_core.rollout.services import component_revision_services, live_revision_hashes
from omenative_core.rollout.validate import errors as rollout_errors
from omenative_core.service import InferenceService, ServicePlan
from omenative_core.service.modes import MODE_OMENATIVE
from omenative_core.service.render import isvc_owner_reference
from omenative_core.service.rollout_writes import (
    member_replica_body,
    member_traffic,
    shape_rollout_status,
)
from omenative_core.views import revision_view_from_json

__all__ = [
    "ANSWERED_REQUEUE_SECONDS",
    "RolloutController",
    "RolloutPass",
    "RolloutRejected",
    "has_rollout_groups",
]

log = structlog.get_logger("omenative.rollout")

ANSWERED_REQUEUE_SECONDS: Final = 0.5
"""Look again this soon after analysis queries were answered, so the round is evaluated."""

_INFERENCE_SERVICES: Final = Resource(
    "ome.io", "v1beta1", "inferenceservices", "InferenceService"
)


def has_rollout_groups(isvc: InferenceService) -> bool:
    """``spec.rollout`` names at least one group (otherwise components roll on their own)."""
    rollout = isvc.spec.get("rollout")
    return isinstance(rollout, Mapping) and bool(rollout.get("groups"))


class RolloutRejected(Exception):
    """``spec.rollout`` or ``status.rollout`` cannot be used; nothing is applied."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@define
class RolloutPass:
    """One decided pass: what to write into the member specs, the status, and after."""

    spec: RolloutSpec
    decision: RolloutDecision
    members: dict[str, MemberView]
    live: dict[str, JSON] = field(factory=dict)
    #: the group phases persisted before this pass (for the transition counter)
    phases_before: tuple[str, ...] = ()

    def replica_body(self, component: str, obj: Mapping[str, Any]) -> dict[str, Any]:
        """The InferenceReplica apply body with the member's pacing (and group budgets)."""
        return member_replica_body(obj, self.decision.components.get(component))

    def traffic_json(self, component: str) -> list[Any]:
        """The member's traffic targets as status JSON."""
        return member_traffic(self.decision.components.get(component))

    def shape_status(self, status: dict[str, Any]) -> dict[str, Any]:
        """Add ``rollout``, each member's ``traffic`` and the group holds to a status."""
        return shape_rollout_status(status, self.decision)


def _live_revisions(component: str, view: MemberView, state: RolloutState) -> set[str]:
    """The revisions of ``component`` that run, are rendered, or are a group's stable or
    canary revision."""
    revisions = {r for r, n in view.instances.items() if n > 0} | {view.revision}
    for g in state.groups:
        for m in (g.stable, g.canary):
            if m.get(component):
                revisions.add(m[component])
    return revisions


def _wanted_revision_services(
    isvc: InferenceService, plan: ServicePlan, decoded: Mapping[str, InferenceReplica],
    rp: RolloutPass | None,
) -> dict[str, JSON]:
    """By name, the traffic and headless Service of every live revision of every OMENative
    component, as in OME (a rollout group's stable and canary revisions included)."""
    owner = isvc_owner_reference(isvc)
    wanted: dict[str, JSON] = {}
    for cp in plan.components:
        if cp.mode != MODE_OMENATIVE or cp.blocked or cp.replica is None:
            continue
        hashes = live_revision_hashes(decoded.get(cp.component), cp.revision_hash)
        view = rp.members.get(cp.component) if rp is not None else None
        if rp is not None and view is not None:
            hashes |= {hash_of(r) for r in _live_revisions(cp.component, view,
                                                            rp.decision.state)}
        wanted.update(component_revision_services(
            isvc.name, isvc.namespace, cp.component, {h for h in hashes if h},
            main_service=cp.object("Service"), owner=owner))
    return wanted


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
        config: RolloutConfig | None = None,
        source: str = "omenative-isvc",
    ) -> None:
        self.client = client
        self.guard = guard
        self.now = now
        self.prometheus = prometheus or PrometheusClient()
        self.config = config or RolloutConfig()
        self.source = source
        self.events = EventRecorder(client, component=source, guard=guard, window=0, now=now)
        self._answers: dict[str, dict[str, AnalysisMeasurement]] = {}
        #: per ISVC uid, the revision Services last made to match (``revision_services``)
        self._revision_memo: dict[str, str] = {}
        #: OME's series; the manager sets it, and committed passes count group transitions
        self.ome_series: OMESeries | None = None

    # ------------------------------------------------------------------ before writing

    async def prepare(
        self,
        isvc: InferenceService,
        raw: Mapping[str, Any],
        plan: ServicePlan,
        owned: Mapping[str, JSON],
        decoded: Mapping[str, InferenceReplica],
    ) -> RolloutPass | None:
        """Decide this pass (None without rollout groups); raises ``RolloutRejected``.

        ``owned``: each member's live InferenceReplica object, ``decoded``: the same decoded
        (one that does not decode is missing and its group holds)."""
        if not has_rollout_groups(isvc):
            self._answers.pop(isvc.uid, None)
            return None
        rollout_json = isvc.spec.get("rollout")
        try:
            spec = parse_rollout(rollout_json)
        except RolloutSpecError as exc:
            first = exc.problems[0] if exc.problems else None
            raise RolloutRejected(first.reason if first else "InvalidRolloutSpec",
                                  str(exc)) from None
        found = rollout_errors(validate_rollout(rollout_json, annotations=isvc.annotations,
                                                config=self.config))
        if found:
            raise RolloutRejected(found[0].reason,
                                  "; ".join(f"{r.path}: {r.message}" for r in found))
        status = raw.get("status") if isinstance(raw.get("status"), Mapping) else {}
        assert isinstance(status, Mapping)
        try:
            state = state_from_json(status.get("rollout"))
        except RolloutStateError as exc:
            raise RolloutRejected("InvalidRolloutState", str(exc)) from None
        members: dict[str, MemberView] = {}
        named = {c for g in spec.groups for c in g.components}
        pairing = await self._pairing_tokens(isvc) if named else {}
        for cp in plan.components:
            if cp.component not in named or cp.blocked or cp.replica is None:
                continue
            live = decoded.get(cp.component)
            if live is None or not cp.revision_hash:
                continue  # not created yet (or undecodable): its group holds with gate Plan
            try:  # the live status against the spec about to be applied
                replica = evolve(live, spec=spec_from_json(cp.replica["spec"]))
            except CodecError as exc:
                log.info("rollout.bad_replica", isvc=isvc.name, component=cp.component,
                         error=str(exc))
                continue
            revision = f"{isvc.name}-{cp.component}-{cp.revision_hash}"
            tokens: dict[str, str | None] = dict(pairing.get(cp.component, {}))
            tokens[revision] = replica.spec.pairing_protocol
            members[cp.component] = member_view(replica, revision, pairing=tokens)
        answers = list(self._answers.get(isvc.uid, {}).values())
        decision = decide(spec, state, members, self.now(), answers, isvc.annotations,
                          self.config)
        return RolloutPass(spec=spec, decision=decision, members=members, live=dict(owned),
                           phases_before=tuple(g.phase.value for g in state.groups))

    async def _pairing_tokens(self, isvc: InferenceService) -> dict[str, dict[str, str | None]]:
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
        self, raw: Mapping[str, Any], isvc: InferenceService, plan: ServicePlan,
        rp: RolloutPass,
    ) -> float | None:
        """Apply the rest of a committed pass; returns seconds until the next look."""
        d = rp.decision
        if self.ome_series is not None:
            self.ome_series.group_transitions(isvc.namespace, isvc.name, (
                (i, rp.phases_before[i], g.phase.value) for i, g in enumerate(d.state.groups)
                if i < len(rp.phases_before)))
        for ev in d.events:
            await self._event(_reference(raw, "InferenceService"), ev.type, ev.reason,
                              ev.message)
            for component in ev.components:  # also where `kubectl describe irep` shows it
                member = rp.live.get(component)
                if member is not None:
                    await self._event(_reference(member, INFERENCE_REPLICAS.kind), ev.type,
                                      ev.reason, ev.message)
        if d.remove_annotations:
            await self._remove_annotations(raw, d.remove_annotations)
        await self._mirror_traffic(isvc, rp)
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

    async def _mirror_traffic(self, isvc: InferenceService, rp: RolloutPass) -> None:
        for c, cd in sorted(rp.decision.components.items()):
            live = rp.live.get(c)
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
        self, isvc: InferenceService, plan: ServicePlan,
        decoded: Mapping[str, InferenceReplica], rp: RolloutPass | None,
    ) -> None:
        """Create the Services of every live revision of every OMENative component; delete
        the rest (a blocked component's are kept)."""
        wanted = _wanted_revision_services(isvc, plan, decoded, rp)
        kept = {cp.component for cp in plan.components if cp.blocked}
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
