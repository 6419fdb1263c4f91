"""The InferenceService controller: observe an ISVC, ``plan_service`` once, carry it out.

Per InferenceService key ``namespace/name`` a pass: ``observe`` builds the
``ServiceSnapshot`` from the caches (the ISVC, every ServingRuntime /
ClusterServingRuntime, BaseModel / ClusterBaseModel, AcceleratorClass and runtime revision
in ``service_sources.Sources``, the CRDs present, the owned InferenceReplicas and
Deployments, the LeaderWorkerSets of ``lws_handover.py``) and, with ``spec.rollout``
groups, the pairing tokens and last pass's analysis answers (``rollout_controller.py``);
``omenative_core.service.plan_service`` decides everything; ``carry_out`` makes the
``ServicePass``'s writes in its order: the migration requests a component took removed,
Warnings, pinned runtime revisions, the LeaderWorkerSet leader labels, then either the
rejection (``SpecValid=False`` and a Warning, nothing else) or every object of every
component that is not blocked, server-side applied (``application/apply-patch+yaml``, field
manager ``omenative-isvc``, ``force=true``; skipped when the body and the cached object are
as the last apply left them: ``repeat_applies.py``), and the status through the status subresource
when it changed, with the cached ``resourceVersion`` as the precondition. Only once the
status is written: the LeaderWorkerSet scale-downs and hand-over Events, the rollout's
Events, annotation removals, traffic mirrors and analysis queries, and the per-revision
Services. A blocked component keeps its objects: nothing is ever deleted here (owned
objects go with the ISVC through garbage collection) but an owned LeaderWorkerSet at the
end of its hand-over, stale per-revision Services, and, right after the applies, the HPA or
ScaledObject of ours that an autoscaler class change replaced (``service_autoscalers.py``).
The InferenceReplica spec is written only by this controller; the IR manager writes the IR
status, which brings the ISVC back here (the owned InferenceReplicas, Deployments and
autoscalers are watched).

The manager (``manager.py``) runs it while it leads, next to the IR workers, with its
client, namespaces and the settings of ``inferenceservice-config`` (``lifecycle`` and the
blocks ``parse_service_config`` reads, reloaded with the ConfigMap), and cancels it when
leadership ends. Standalone: ``await run_service_controller(client, namespaces)``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Final

import structlog

from omenative_controller.decoded import ReplicaDecoder
from omenative_controller.kube import apiwatch
from omenative_controller.kube.apiwatch import NATIVE_GANG_VERSIONS, ApiPresence
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.crdwatch import CrdPresence
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.events import EventRecorder
from omenative_controller.kube.informer import Informer, object_key
from omenative_controller.kube.jsonpatch import annotation_removal
from omenative_controller.kube.presence import Presence
from omenative_controller.kube.resources import (
    INFERENCE_REPLICAS,
    Resource,
    resource_for,
)
from omenative_controller.kube.tasks import cancel_and_wait
from omenative_controller.kube.workqueue import WorkQueue
from omenative_controller.lws_handover import LwsHandover
from omenative_controller.owned_caches import OwnedCaches
from omenative_controller.repeat_applies import RepeatApplies
from omenative_controller.rollout_controller import RolloutController
from omenative_controller.runtime_gc import RevisionCollector
from omenative_controller.service_autoscalers import OwnedAutoscalers
from omenative_controller.service_policies import Policies
from omenative_controller.service_sources import (
    CLUSTER_SERVING_RUNTIMES,
    SERVING_RUNTIMES,
    Sources,
)
from omenative_core.codec import CodecError
from omenative_core.labels import LABEL_COMPONENT, LABEL_ISVC
from omenative_core.model.spec import InferenceReplica
from omenative_core.service import (
    API_NATIVE_GANG,
    CRD_LEADER_WORKER_SET,
    CRD_POD_GROUP,
    CRD_POD_MONITOR,
    CRD_SCALED_OBJECT,
    InferenceService,
    ServiceConfig,
    ServingRuntime,
)
from omenative_core.service.rollout_pass import has_rollout_groups
from omenative_core.service.runtime_gc import DEFAULT_GRACE, DEFAULT_RETENTION
from omenative_core.service.service_pass import (
    VALIDATION_CONDITION,
    ServicePass,
    ServiceSnapshot,
    plan_service,
)

__all__ = [
    "CLUSTER_SERVING_RUNTIMES",
    "DEPLOYMENTS",
    "FIELD_MANAGER",
    "INFERENCE_SERVICES",
    "SERVING_RUNTIMES",
    "VALIDATION_CONDITION",
    "ServiceController",
    "run_service_controller",
]

log = structlog.get_logger("omenative.isvc")

INFERENCE_SERVICES: Final = Resource("ome.io", "v1beta1", "inferenceservices", "InferenceService")
"""The InferenceService resource."""
DEPLOYMENTS: Final = Resource("apps", "v1", "deployments", "Deployment")
"""RawDeployment components' Deployments."""
FIELD_MANAGER: Final = "omenative-isvc"
"""The server-side apply field manager of everything this controller writes."""

_APPLY: Final = "application/apply-patch+yaml"
_WATCHED_CRDS: Final = (CRD_LEADER_WORKER_SET, CRD_POD_MONITOR, CRD_POD_GROUP, CRD_SCALED_OBJECT)
_OWNED_SELECTOR: Final = LABEL_ISVC  # label exists: every object an ISVC renders carries it


def _owner_key(obj: Mapping[str, Any]) -> str | None:
    """``namespace/isvc`` of an owned object (its controller owner ref, else its label)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    for ref in meta.get("ownerReferences") or ():
        if ref.get("kind") == "InferenceService" and ref.get("controller"):
            return object_key(namespace, str(ref.get("name")))
    name = (meta.get("labels") or {}).get(LABEL_ISVC)
    return object_key(namespace, name) if isinstance(name, str) else None


class ServiceController:
    """Watches InferenceServices (and what they use or own) and reconciles each one.

    ``config``: the rendering settings, or a callable returning the current ones (so a
    lifecycle ConfigMap reload reaches the next pass). ``crds_present``: a callable giving
    the CRD names present; None watches the three optional CRDs (one ``CrdPresence`` each:
    Established counts as present, polled every ``crd_poll_seconds``) and runs the ISVC and
    runtime informers only while discovery lists them; given, nothing is polled.
    ``guard``: checked before every write (the manager passes "still the leader"); False
    skips the write and retries the key later. ``revision_namespace``: OME's namespace, where
    pinned runtimes' revisions live (the manager passes its config namespace), pruned to
    ``revision_retention`` per runtime name after ``revision_grace`` (``runtime_gc``).
    """

    def __init__(
        self,
        client: KubeClient,
        namespaces: Sequence[str],
        config: ServiceConfig | Callable[[], ServiceConfig] | None = None,
        *,
        crds_present: Callable[[], Iterable[str]] | None = None,
        workers: int = 2,
        resync_seconds: float = 300.0,
        crd_poll_seconds: float = 30.0,
        backoff_base: float = 0.1,
        backoff_max: float = 30.0,
        sync_timeout: float = 30.0,
        guard: Callable[[], bool] = lambda: True,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        revision_namespace: str = "ome",
        revision_retention: int = DEFAULT_RETENTION,
        revision_grace: timedelta = DEFAULT_GRACE,
    ) -> None:
        self.client = client
        self.namespaces = tuple(namespaces)
        self._config = config
        self._crds_present = crds_present
        self.lws = LwsHandover(client, self.namespaces, self._lws_changed,
                               interval=crd_poll_seconds)
        self._crd_watches: dict[str, Presence] = {
            name: CrdPresence(client, name, interval=crd_poll_seconds,
                              on_change=lambda _present: self.enqueue_all())
            for name in _WATCHED_CRDS if name != CRD_LEADER_WORKER_SET}
        self._crd_watches[CRD_LEADER_WORKER_SET] = self.lws.presence
        # not a CRD: Kubernetes' own gang scheduling API, for GangSchedulingUnavailable
        self._crd_watches[API_NATIVE_GANG] = ApiPresence(
            client, NATIVE_GANG_VERSIONS, lambda _version: {}, interval=crd_poll_seconds,
            on_change=lambda _present: self.enqueue_all())
        self.workers = workers
        self.resync_seconds = resync_seconds
        self.crd_poll_seconds = crd_poll_seconds
        self.sync_timeout = sync_timeout
        self.guard = guard
        self.now = now
        self.queue: WorkQueue[str] = WorkQueue(base_delay=backoff_base, max_delay=backoff_max)
        ns: Sequence[str] | None = self.namespaces or None
        self.isvcs: Informer[JSON] = Informer(
            client, INFERENCE_SERVICES, dict, namespaces=ns, on_change=self._isvc_changed)
        self.sources = Sources(client, ns, self.isvcs, self.queue.add,
                               interval=crd_poll_seconds, revision_namespace=revision_namespace)
        self.sources.served.on_change = lambda _present: self.enqueue_all()  # CRDs come, go
        self.replicas: Informer[JSON] = Informer(
            client, INFERENCE_REPLICAS, dict, namespaces=ns, label_selector=_OWNED_SELECTOR,
            on_change=self._owned_changed)
        self.deployments: Informer[JSON] = Informer(
            client, DEPLOYMENTS, dict, namespaces=ns, label_selector=_OWNED_SELECTOR,
            on_change=self._owned_changed)
        self.autoscalers = OwnedAutoscalers(client, ns, self._owned_changed,
                                            interval=crd_poll_seconds)
        self.policies = Policies(client, ns, self.isvcs, self.queue.add,
                                 providers=lambda: self.config.metric_providers, now=self.now,
                                 guard=self.guard, interval=crd_poll_seconds)
        self.policies.served.on_change = lambda _present: self.enqueue_all()  # feature on/off
        optional = (self.isvcs, *self.sources.runtime_informers)  # no LIST of an absent CRD
        self._informers = (*optional, self.replicas, self.deployments, self.sources.revisions,
                           self.autoscalers.hpas)
        self._served = apiwatch.ServedInformers(client, optional, interval=crd_poll_seconds)
        self._events_sent: dict[tuple[str, str, str], str] = {}
        self.events = EventRecorder(client, component=FIELD_MANAGER, guard=self.guard,
                                    window=0, now=self.now)
        self.sources.status_writer.events = self.events
        self.revision_gc = RevisionCollector(
            client, self.sources.revisions, self.isvcs, revision_namespace, guard=self.guard,
            retention=revision_retention, grace=revision_grace,
            interval=min(60.0, max(revision_grace.total_seconds() / 4, 0.5)))
        self.sources.on_revision = self.revision_gc.mark
        self.rollout = RolloutController(client, guard=self.guard, now=self.now)
        self.decoder = ReplicaDecoder()
        self.repeats = RepeatApplies()
        self.owned_caches = OwnedCaches(client, ns, self._owned_informers, self._owned_changed)

    def _owned_informers(self) -> Iterator[Informer[JSON]]:
        """The running caches of what the ISVC pass applies (``owned_caches.py``)."""
        yield from (self.replicas, self.deployments, self.autoscalers.hpas)
        yield from self.autoscalers.keda.informers.values()
        yield from self.lws.presence.informers.values()

    # ------------------------------------------------------------------ inputs

    @property
    def config(self) -> ServiceConfig:
        """The rendering settings for the next pass."""
        if self._config is None:
            return ServiceConfig()
        if isinstance(self._config, ServiceConfig):
            return self._config
        return self._config()

    def crds(self) -> frozenset[str]:
        """The optional CRDs present (PodGroup, PodMonitor, LeaderWorkerSet), and the
        version of Kubernetes' own gang scheduling API it serves (``API_NATIVE_GANG``, 1.37's,
        or ``API_NATIVE_GANG_ALPHA``, 1.36's)."""
        if self._crds_present is not None:
            return frozenset(self._crds_present())
        return frozenset((w.served or name) if name == API_NATIVE_GANG else name
                         for name, w in self._crd_watches.items() if w.present)

    # ------------------------------------------------------------------ change handlers

    def _isvc_changed(self, namespace: str | None, old: JSON | None, new: JSON | None) -> None:
        obj = new if new is not None else old
        assert obj is not None
        key = object_key(namespace, str(obj["metadata"]["name"]))
        self.policies.isvc_changed(old, new)
        if new is None:
            self.queue.discard(key)
            self.repeats.forget(key)
            self.rollout.isvc_gone(str(obj["metadata"].get("namespace") or namespace or ""),
                                   str(obj["metadata"]["name"]))
            return
        self.queue.add(key)

    def _owned_changed(self, namespace: str | None, old: JSON | None, new: JSON | None) -> None:
        for obj in (old, new):
            if obj is not None:
                key = _owner_key(obj)
                if key is not None and self.isvcs.get(key) is not None:
                    self.queue.add(key)

    def _lws_changed(self, key: str | None) -> None:
        if key is None:
            self.enqueue_all()
        elif self.isvcs.get(key) is not None:
            self.queue.add(key)

    def enqueue_all(self) -> None:
        """Look at every InferenceService again (the cluster settings changed), and at every
        AutoscalerPolicy's status (its metric provider bindings may have)."""
        for key in self.isvcs.key_list():
            self.queue.add(key)
        self.policies.mark()

    # ------------------------------------------------------------------ running

    async def run(self) -> None:
        """List+watch everything and reconcile until cancelled."""
        polled = self._crds_present is None
        direct = [i for i in self._informers if not (polled and i.name in self._served.wanted)]
        tasks = [asyncio.create_task(i.run(), name=f"isvc-informer-{i.name}") for i in direct]
        tasks.append(asyncio.create_task(self.sources.served.run(), name="isvc-models-served"))
        tasks.append(asyncio.create_task(self.autoscalers.keda.run(), name="isvc-keda-served"))
        tasks.append(asyncio.create_task(self.policies.run(), name="isvc-policies"))
        tasks.append(asyncio.create_task(self.sources.status_writer.run(),
                                         name="isvc-runtime-status"))
        if polled:
            tasks.append(asyncio.create_task(self._served.run(), name="isvc-crds-served"))
            tasks.extend(asyncio.create_task(w.run(), name=f"isvc-crd-{name}")
                         for name, w in self._crd_watches.items())
        try:
            if polled:
                await self._served.wait_synced(self.sync_timeout)
            for i in direct:  # a CRD not installed yet must not stall the rest
                await i.wait_synced(self.sync_timeout)
            await self.sources.served.wait_synced(self.sync_timeout)
            await self.autoscalers.keda.wait_synced(self.sync_timeout)
            await self.policies.served.wait_synced(self.sync_timeout)
            self.enqueue_all()
            tasks.append(asyncio.create_task(self._resync(), name="isvc-resync"))
            tasks.append(asyncio.create_task(self.revision_gc.run(), name="isvc-revision-gc"))
            tasks.extend(asyncio.create_task(self._worker(), name=f"isvc-worker-{n}")
                         for n in range(self.workers))
            await asyncio.gather(*tasks)
        finally:
            self.queue.shutdown()
            await cancel_and_wait(tasks)
            await self.owned_caches.close()
            await self.rollout.close()

    async def _resync(self) -> None:
        while True:
            await asyncio.sleep(self.resync_seconds)
            self.enqueue_all()

    async def _worker(self) -> None:
        while True:
            key = await self.queue.get()
            if key is None:
                return
            ok: bool | None
            try:
                ok = await self.reconcile(key)
            except asyncio.CancelledError:
                raise
            except ApiError as exc:
                ok = False
                if exc.namespace_gone:  # nothing can be written there again: stop for good
                    log.info("isvc.namespace_gone", key=key, status=exc.status,
                             error=exc.message)
                    self.queue.discard(key)  # a watch event meanwhile still brings it back
                    ok = None
                else:
                    log.info("isvc.reconcile_error", key=key, status=exc.status,
                             reason=exc.reason, error=exc.message)
            except Exception:
                log.exception("isvc.reconcile_bug", key=key)
                ok = False
            finally:
                self.queue.done(key)
            if ok:
                self.queue.forget(key)
            elif ok is not None:
                self.queue.add_rate_limited(key)

    # ------------------------------------------------------------------ one pass

    def runtimes_synced(self) -> bool:
        """Both runtime caches have listed (so a runtime not in them does not exist)."""
        return all(i.synced.is_set() for i in self.sources.runtime_informers)

    def all_runtimes(self) -> list[ServingRuntime]:
        """Every cached ServingRuntime and ClusterServingRuntime (standalone replicas that
        render from ``spec.runtimeRef`` read them too: ``replica_refs.py``)."""
        return self.sources.all_runtimes()

    def _owned_replicas(self, isvc: InferenceService) -> dict[str, JSON]:
        out: dict[str, JSON] = {}
        for _key, obj in self.replicas.items():
            if obj["metadata"].get("namespace") != isvc.namespace:
                continue
            if _owner_key(obj) != object_key(isvc.namespace, isvc.name):
                continue
            component = (obj.get("spec") or {}).get("component") or \
                (obj["metadata"].get("labels") or {}).get(LABEL_COMPONENT)
            if isinstance(component, str):
                out[component] = obj
        return out

    def lws_known(self) -> bool:
        """The LeaderWorkerSet CRD and cache are known (always, when the CRDs are given)."""
        return self._crds_present is not None or self.lws.known()

    async def observe(self, raw: JSON) -> ServiceSnapshot:
        """The snapshot of one InferenceService from the caches; the one read that is not
        cached: the pairing tokens of its ControllerRevisions, when it has rollout groups."""
        isvc = InferenceService(raw)
        owned = self._owned_replicas(isvc)
        key = object_key(isvc.namespace, isvc.name)
        grouped = has_rollout_groups(isvc)
        if not grouped:
            self.rollout.forget(isvc.uid)
        models = self.sources.all_models()
        revisions = self.sources.all_runtime_revisions()
        return ServiceSnapshot(
            isvc=raw, now=self.now(), config=self.config,
            runtimes=tuple(self.sources.all_runtimes()), crds=self.crds(), owned=owned,
            replicas=self._decoded(isvc, owned),
            deployments=tuple(d for _k, d in self.deployments.items() if _owner_key(d) == key),
            models=tuple(models) if models is not None else None,
            accelerator_classes=tuple(self.sources.all_accelerator_classes()),
            runtime_revisions=tuple(revisions),
            lws=self.lws.views(isvc.namespace, isvc.name, isvc.uid), lws_known=self.lws_known(),
            pairing=await self.rollout.pairing_tokens(isvc) if grouped else {},
            answers=self.rollout.answers(isvc.uid),
            autoscalers=self.autoscalers.of(isvc.namespace, isvc.name),
            policies=self.policies.of(isvc.namespace))

    async def reconcile(self, key: str) -> bool:
        """One pass over ``namespace/name``; False asks for a (rate-limited) retry."""
        raw = self.isvcs.get(key)
        if raw is None or (raw.get("metadata") or {}).get("deletionTimestamp"):
            return True
        sp = plan_service(await self.observe(raw))
        return await self.carry_out(key, raw, sp)

    async def carry_out(self, key: str, raw: JSON, sp: ServicePass) -> bool:
        """Make the writes of ``sp`` in its order (``service_pass.py``); False: retry."""
        if sp.take_migrations:
            raw = await self._take_migrations(raw, sp.take_migrations)
        for reason, message in sp.warnings:  # a missing model or runtime, advisories
            await self._warn(raw, reason, message)
        if sp.runtime_revisions and self.guard():  # a pinned runtime's snapshot, first
            await self.sources.create_revisions(sp.runtime_revisions)
        if sp.wait_for_lws:  # never decide "no LeaderWorkerSet" before we can see them
            self.queue.add_after(key, sp.requeue_after or 1.0)
            return True
        for step in sp.handovers:  # before the Service's selector changes
            assert sp.isvc is not None
            await self.lws.prepare(sp.isvc.namespace, step)
        if sp.rejection is not None:
            await self._report_invalid(raw, sp)
            return True
        owned = await self._apply_all(key, sp)
        if sp.deletes and sp.isvc is not None and self.guard():  # the new one is applied
            await self.autoscalers.delete(sp.isvc.namespace, sp.deletes)
        assert sp.status is not None
        ok = await self._put_status(raw, {**raw, "status": sp.status})
        if ok:
            await self._after_status(key, raw, sp, owned)
        return ok

    async def _after_status(self, key: str, raw: JSON, sp: ServicePass,
                            owned: Mapping[str, JSON]) -> None:
        """Once the status is written: finish hand-overs, the rollout pass, and keep the
        per-revision Services of every OMENative component (as OME does)."""
        assert sp.isvc is not None
        if self.guard():
            for step in sp.handovers:
                await self.lws.finish(sp.isvc.namespace, step)
            for event in sp.events:
                await self._event(raw, event.type, event.reason, event.message)
            if sp.requeue_after is not None:  # a trade may be due then
                self.queue.add_after(key, sp.requeue_after)
        if sp.rollout is not None:
            delay = await self.rollout.finish(raw, sp.isvc, sp.rollout, owned)
            if delay is not None:
                self.queue.add_after(key, delay)
        if self.guard():
            await self.rollout.revision_services(sp.isvc, sp.revision_services,
                                                 sp.kept_components)

    async def _apply_all(self, key: str, sp: ServicePass) -> dict[str, JSON]:
        """Apply every object in order; returns the owned InferenceReplicas as written."""
        assert sp.isvc is not None and sp.render is not None
        owned = self._owned_replicas(sp.isvc)
        for cp in sp.render.components:
            if cp.blocked:
                log.info("isvc.component_blocked", key=key, component=cp.component,
                         reason=cp.ready.reason if cp.ready else "")
        for component, obj in sp.applies:
            applied = await self.apply(obj, owner=key)
            if obj.get("kind") == "InferenceReplica":
                self.replicas.upsert_if_newer(applied)
                owned[component] = self.replicas.get(
                    object_key(sp.isvc.namespace, obj["metadata"]["name"])) or applied
        return owned

    async def apply(self, obj: Mapping[str, Any], *, owner: str = "") -> JSON:
        """Server-side apply ``obj`` (field manager ``omenative-isvc``, force), unless it is
        the body last applied for ``owner`` and the cached object still carries what that
        apply left (``repeat_applies.py``): then the cached object, and no write."""
        if not self.guard():
            raise ApiError(0, "NotLeader", "writes are not allowed now")
        cached = self.owned_caches.cached(obj)
        if cached is not None and self.repeats.unchanged(owner, obj, cached):
            return cached
        meta = obj["metadata"]
        res = resource_for(str(obj["apiVersion"]), str(obj["kind"]))
        applied = await self.client.request(
            "PATCH", res.path(meta.get("namespace"), meta["name"]), verb="patch",
            resource=res.plural, query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            body=dict(obj), content_type=_APPLY,
        )
        self.repeats.record(owner, obj, applied)
        self.owned_caches.wrote(obj, applied)
        return applied

    def _decoded(self, isvc: InferenceService,
                 owned: Mapping[str, JSON]) -> dict[str, InferenceReplica]:
        """The owned InferenceReplicas decoded (each once per resourceVersion), by component;
        one that does not decode is left out and logged."""
        self.decoder.trim(self.replicas)
        decoded: dict[str, InferenceReplica] = {}
        for component, obj in owned.items():
            try:
                decoded[component] = self.decoder.decode(obj)
            except CodecError as exc:
                log.info("isvc.bad_replica", isvc=isvc.name, component=component,
                         error=str(exc))
        return decoded

    async def _take_migrations(self, raw: JSON, taken: Sequence[str]) -> JSON:
        """Drop the ISVC's migration requests that a component has recorded (the IR manager
        audits them), so they are not forwarded again; returns the ISVC as it now stands."""
        meta = raw["metadata"]
        ops = annotation_removal(meta.get("annotations") or {}, tuple(taken))
        if not ops or not self.guard():
            return raw
        try:
            patched = await self.client.patch(INFERENCE_SERVICES, meta["name"], ops,
                                              meta.get("namespace"), patch_type="json")
        except ApiError as exc:  # rewritten meanwhile, or gone: the next pass decides again
            log.info("isvc.migration_annotations_kept", isvc=meta["name"], keys=list(taken),
                     error=exc.message)
            return raw
        log.info("isvc.migration_requests_taken", isvc=meta["name"], keys=list(taken))
        self.isvcs.upsert_if_newer(patched)
        return patched

    async def _put_status(self, raw: JSON, body: JSON) -> bool:
        if body.get("status") == raw.get("status"):
            return True
        if not self.guard():
            return False
        meta = raw["metadata"]
        try:
            written = await self.client.replace(
                INFERENCE_SERVICES, meta["name"], body, meta.get("namespace"),
                subresource="status")
        except ApiError as exc:
            if exc.conflict or exc.not_found:
                return not exc.conflict
            raise
        self.isvcs.upsert_if_newer(written)
        return True

    async def _report_invalid(self, raw: JSON, sp: ServicePass) -> None:
        """``SpecValid=False`` with the rejection's reason on the ISVC, plus one Warning."""
        assert sp.rejection is not None and sp.status is not None
        reason, message = sp.rejection.reason, sp.rejection.message
        log.info("isvc.invalid", name=raw["metadata"].get("name"), reason=reason,
                 error=message)
        with contextlib.suppress(ApiError):
            await self._put_status(raw, {**raw, "status": sp.status})
        await self._warn(raw, reason, message)

    async def _warn(self, raw: JSON, reason: str, message: str) -> None:
        await self._event(raw, "Warning", reason, message)

    async def _event(self, raw: JSON, type_: str, reason: str, message: str) -> None:
        """One Event on the ISVC ``raw``, sent once per (reason, message) and generation."""
        meta = raw.get("metadata") or {}
        uid = str(meta.get("uid") or "")
        generation = str(meta.get("generation") or "")
        key = (uid, reason, message)
        if self._events_sent.get(key) == generation:
            return
        involved = {"apiVersion": INFERENCE_SERVICES.api_version, "kind": "InferenceService",
                    "name": meta.get("name"), "namespace": meta.get("namespace"), "uid": uid,
                    "resourceVersion": meta.get("resourceVersion")}
        if not await self.events.record(involved, type_, reason, message, lg=log):
            return
        if len(self._events_sent) > 4096:  # a memo, not a record: keep it bounded
            self._events_sent.clear()
        self._events_sent[key] = generation


async def run_service_controller(
    client: KubeClient,
    namespaces: Sequence[str],
    config: ServiceConfig | Callable[[], ServiceConfig] | None = None,
    **options: Any,
) -> None:
    """Run a :class:`ServiceController` until cancelled (``options``: its keyword settings)."""
    await ServiceController(client, namespaces, config, **options).run()
