"""The manager: watch caches -> snapshot -> ``plan`` -> executor, one key at a time.

Startup: read the lifecycle config (``inferenceservice-config`` ConfigMap, key
``lifecycle``; absent means chart defaults, invalid is a :class:`StartupError`), start the
probe/metrics servers and the watch caches (reads only), then campaign for the Lease. Only
the leader runs workers, and the executor checks the Lease before every write, so a standby
never writes. Leadership lost: workers are cancelled at once. Graceful stop (``stop()``,
SIGTERM in the CLI): no new keys, in-flight reconciles finish, the Lease is released.
Cancelling :meth:`Manager.run` is a hard kill (nothing is drained or released), which is
what a crash looks like to the cluster.

A reconcile pass for ``namespace/name``: decode the cached InferenceReplica (a decode or
validation problem is reported as ``Ready=False`` with the reason and a Warning Event, and
nothing else is done), build the :class:`Snapshot` from the caches (pods, PodGroups and
ControllerRevisions by the ``ome.io/inferencereplica`` label, all nodes, the routed pods of
the ``{prefix}-headless`` EndpointSlices, the create errors of the last pass, wall-clock
``now``), call ``plan``, apply it, send its Events, and requeue: at once (rate limited) on
a conflict or an error, else after ``plan.requeue_after``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Coroutine, Mapping
from functools import partial
from typing import Any

import structlog
from attrs import evolve

from omenative_controller.advisor_loop import AdvisorMetrics
from omenative_controller.cache_views import FrozenCopy, ObjectRef, service_index
from omenative_controller.coalesce import StatusCoalescer
from omenative_controller.create_pipeline import PIPELINE_DEPTH
from omenative_controller.decoded import ReplicaDecoder
from omenative_controller.executor import (
    ApplyResult,
    CreateErrorStore,
    Executor,
    PassContext,
    ReplicaEvents,
)
from omenative_controller.gc_pacer import GcPacer
from omenative_controller.kube.apiwatch import ApiPresence
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.crdwatch import CrdPresence
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.events import EventRecorder
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import CONTROLLER_REVISIONS, SERVICES
from omenative_controller.kube.tasks import cancel_and_wait
from omenative_controller.kube.turns import BUDGET as TURN_BUDGET
from omenative_controller.kube.turns import Turns
from omenative_controller.kube.workqueue import WorkQueue
from omenative_controller.leader import LeaderElector, LeaseNamespaceMissing
from omenative_controller.leader_tasks import LeaderTasks
from omenative_controller.manager_config import (
    LIFECYCLE_KEY,
    ConfigSource,
    ManagerOptions,
    StartupError,
    default_identity,
)
from omenative_controller.manager_servers import ManagerServers
from omenative_controller.memos import PlanMemos
from omenative_controller.observability import Metrics
from omenative_controller.pass_context import log_pass, pass_kind, requeue, write_rejection
from omenative_controller.planning import decode_replica, plan_replica
from omenative_controller.replica_refs import RefsWarnings, needs_refs, referencing, render_refs
from omenative_controller.routed import RoutedPods
from omenative_controller.service_controller import ServiceController
from omenative_controller.wakeups import Wakeups
from omenative_controller.watch_caches import (
    WatchCaches,
    build_watch_caches,
    return_free_heap,
    settle_after_sync,
)
from omenative_controller.webhook import WebhookServer
from omenative_core import planner
from omenative_core.codec import CodecError
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.observed import NodeView, PodView, Snapshot
from omenative_core.model.plan import (
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateRevision,
    Plan,
    RecordAudit,
)
from omenative_core.model.spec import InferenceReplica
from omenative_core.render import validate_replica
from omenative_core.service import ServiceConfig
from omenative_core.service.replica_refs import RefsRender

__all__ = ["LIFECYCLE_KEY", "Manager", "ManagerOptions", "StartupError", "WorkQueue",
           "default_identity"]

log = structlog.get_logger("omenative.manager")

INSTALL_HINT = "install omenative first (`kubectl apply -k config/` or `omenative install`)"
"""What a missing install step tells the operator to run."""
_CREATES = (CreatePod, CreatePodGroup, CreateRevision, CreateObject, RecordAudit)
"""Actions that create something (the audit may create its ConfigMap)."""
PRIORITY_WORKERS = 8
"""Workers beside ``--workers`` for the priority lane only (``WorkQueue.get``)."""


class Manager:
    """One omenative manager: caches, election, workers, probes."""

    def __init__(
        self,
        options: ManagerOptions,
        *,
        metrics: Metrics | None = None,
        plan_fn: Callable[[Snapshot], Plan] | None = None,
    ) -> None:
        self.options = options
        self.metrics = metrics or Metrics()
        self.plan_fn = plan_fn or planner.plan
        # the default planner runs incrementally: PlanMemos kept per replica key (memos.py)
        self._memos: PlanMemos | None = None if plan_fn else PlanMemos()
        self.routed = RoutedPods(service_index)
        self.config = LifecycleConfig()
        self.service_config = ServiceConfig()
        self.client: KubeClient | None = None
        self.queue: WorkQueue[str] | None = None
        self.create_errors = CreateErrorStore()
        self.elector: LeaderElector | None = None
        self.executor: Executor | None = None
        self.events: EventRecorder | None = None
        self.recorder: ReplicaEvents | None = None
        self._refs_warnings = RefsWarnings()
        self.caches: WatchCaches | None = None
        self.replicas: Informer[Mapping[str, Any]] | None = None
        self.decoder = ReplicaDecoder(max_decoded=self.config.max_decoded_instances)
        self.pods: Informer[PodView] | None = None
        self.nodes: Informer[NodeView] | None = None
        self.node_map: FrozenCopy[NodeView] | None = None  # what the Snapshots get
        self.revisions: Informer[Any] | None = None
        self.services: Informer[ObjectRef] | None = None
        self.slices: Informer[JSON] | None = None
        self.pod_group_crd: CrdPresence | None = None
        self.native_gang: ApiPresence | None = None  # scheduling.k8s.io/v1beta1 or v1alpha2
        self.listeners = ManagerServers()
        self.started = asyncio.Event()
        self._stop = asyncio.Event()
        self._tasks: list[asyncio.Task[Any]] = []
        self._workers: list[asyncio.Task[None]] = []
        self.config_source: ConfigSource | None = None
        self.leader_tasks = LeaderTasks()
        self._pass_kinds: dict[str, str] = {}  # key -> what its pass in flight did
        self.wakeups = Wakeups(lambda: self.queue, lambda: self.replicas, lambda: self.pods)
        self.advisor_metrics = AdvisorMetrics(self.metrics.registry)
        self._turns = Turns(TURN_BUDGET)  # passes, answers, watch slices share each loop
        # iteration's 2 ms (kube/turns.py)
        self._gc = GcPacer(self._busy, turns=self._turns,  # installed once caches synced
                           on_collect=self.metrics.gc_collected)

    # ------------------------------------------------------------------ public

    @property
    def metrics_port(self) -> int | None:
        """The bound metrics port (None when not serving metrics)."""
        return self.listeners.metrics_port

    @property
    def probe_port(self) -> int | None:
        """The bound probe port (None when not serving probes)."""
        return self.listeners.probe_port

    @property
    def _isvc(self) -> ServiceController | None:
        """The InferenceService controller while leading (``--inference-services``)."""
        return self.leader_tasks.isvc

    @property
    def webhook(self) -> WebhookServer | None:
        """The running admission webhook, if ``--webhook-port`` was given."""
        return self.listeners.webhook

    def stop(self) -> None:
        """Ask for a graceful stop (finish in-flight passes, release the Lease)."""
        self._stop.set()

    @property
    def is_leader(self) -> bool:
        """True while this manager holds the Lease."""
        return self.elector is not None and self.elector.is_leader

    def _source_changed(self, kind: str, namespace: str | None, name: str) -> None:
        """Queue the standalone replicas that render from the runtime or model changed."""
        if self.queue is not None and self.replicas is not None and self._isvc is not None:
            for key in referencing(self.replicas.items(), kind, namespace, name,
                                   self._isvc.all_runtimes()):
                self.queue.add(key)

    def _busy(self) -> bool:
        """Keys wait or passes run: full collections wait (``gc_pacer.py``)."""
        return self.queue is not None and (len(self.queue) > 0 or self.queue.in_flight > 0)

    def caches_synced(self) -> bool:
        """Every watch cache listed once (and the PodGroup one, when its CRD is present; the
        native gang ones, when served, unless their LISTs keep failing: an API server that
        cannot read the gang objects must not stop the reconciling of everything else)."""
        informers = (self.replicas, self.pods, self.nodes, self.revisions, self.services,
                     self.slices)
        if any(i is None or not i.synced.is_set() for i in informers):
            return False
        crd, native = self.pod_group_crd, self.native_gang
        if crd is None or not crd.checked.is_set():
            return False
        if native is None or not native.checked.is_set():
            return False
        return (crd.informer is None or crd.present) and (
            not native.informers or native.present or bool(native.failing))

    def readiness(self) -> tuple[bool, str]:
        """/readyz: ready once the caches are synced."""
        if self.caches_synced():
            return True, "ok (leader)" if self.is_leader else "ok (standby)"
        return False, "caches not synced"

    def health(self) -> tuple[bool, str]:
        """/healthz: unhealthy when a background task died."""
        for task in self._tasks:
            if task.done() and not task.cancelled() and task.exception() is not None:
                return False, f"{task.get_name()} failed: {task.exception()!r}"
        return True, "ok"

    async def run(self) -> None:
        """Run until :meth:`stop` (graceful) or cancellation (hard kill)."""
        opts = self.options
        self._stop = asyncio.Event()
        self.client = await KubeClient.connect(
            opts.kubeconfig, context=opts.context, qps=opts.qps, burst=opts.burst,
            timeout=opts.request_timeout, observer=self.metrics,
        )
        self.client.turns = self._turns
        self.events = EventRecorder(
            self.client, identity=opts.identity,
            guard=lambda: self.elector is None or self.elector.may_act())
        try:
            self.config = await self._initial_config()
            await self._start_servers()
            self._build()
            self._spawn(self._config_loop(), "config-reload")
            self._spawn(self._resync_loop(), "resync")
            self._spawn(self._sync_gauge(), "sync-gauge")
            self.started.set()
            log.info("manager.started", identity=opts.identity,
                     namespaces=list(opts.namespaces) or "all",
                     lease=f"{opts.leader_config().namespace}/{opts.lease_name}",
                     metrics_port=self.metrics_port, probe_port=self.probe_port)
            assert self.elector is not None
            try:
                await self.elector.run(self._stop)
            except LeaseNamespaceMissing as exc:
                raise StartupError(
                    f"the leader-election Lease namespace {exc.namespace!r} does not exist: "
                    f"{INSTALL_HINT}, or pass --lease-namespace with an existing namespace"
                ) from exc
            log.info("manager.stopped", identity=opts.identity)
        finally:
            await self._teardown()

    # ------------------------------------------------------------------ startup

    async def _initial_config(self) -> LifecycleConfig:
        assert self.client is not None
        self.config_source = ConfigSource(self.options, self.metrics, self.client, self.events)
        lifecycle, self.service_config = await self.config_source.initial()
        return lifecycle

    async def _start_servers(self) -> None:
        assert self.client is not None
        await self.listeners.start(self.options, self.client, self.metrics,
                                   ready=self.readiness, healthy=self.health)

    def _spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> None:
        self._tasks.append(asyncio.create_task(coro, name=name))

    def _build(self) -> None:
        client = self.client
        assert client is not None
        m = self.metrics
        self.caches = caches = build_watch_caches(client, self.options.namespaces,
                                                  self.wakeups, self._on_slice, m,
                                                  self.options.crd_poll_seconds)
        self.replicas, self.pods, self.nodes = caches.replicas, caches.pods, caches.nodes
        self.node_map = caches.node_map
        self.revisions, self.services = caches.revisions, caches.services
        self.slices = caches.slices
        self.pod_group_crd, self.native_gang = caches.pod_group_crd, caches.native_gang
        for inf in caches.always:
            self._spawn(inf.run(), f"informer-{inf.name}")
        self._spawn(self.pod_group_crd.run(), "crd-podgroups")
        self._spawn(self.native_gang.run(), "api-native-gang")

        self.elector = LeaderElector(
            client, self.options.leader_config(),
            on_started=self._on_started_leading, on_stopped=self._on_stopped_leading,
            on_state=lambda v: self.metrics.leader.set(1 if v else 0),
        )
        assert self.events is not None
        self.recorder = ReplicaEvents(self.events, metrics=m)
        pods = self.pods
        self.executor = Executor(
            client, self.create_errors, metrics=m, guard=self.elector.may_act,
            encoding=lambda: (self.config.instance_status_encoding,
                              self.config.max_decoded_instances),
            on_replica_written=self.replicas.upsert_if_newer,
            on_pod_written=self.pods.upsert_if_newer,
            on_created=self._created,
            events=self.recorder,
            pods_of=lambda key: pods.by_index("owner", key),
            max_inflight=self.options.max_inflight,
            creates_per_pass=(self.options.max_inflight if self.options.creates_per_pass is None
                              else self.options.creates_per_pass),
            pipeline_depth=PIPELINE_DEPTH if self.options.pipeline_creates else 0,
            on_pod_expected=self.pods.expect, on_pod_unexpected=self.pods.unexpect,
            on_creates_failed=self._creates_failed,
            on_creates_free=self._creates_free,
            coalescer=StatusCoalescer(
                window=self.options.status_coalesce,
                readiness_window=self.options.status_readiness_coalesce),
        )

    def _creates_failed(self, key: str) -> None:
        """A create sent behind its pass failed: look at the replica again, rate limited."""
        self.metrics.reconcile_errors.labels("create_behind").inc()
        if self.queue is not None:
            self.queue.add_rate_limited(key)

    def _creates_free(self, key: str) -> None:
        """A replica whose creates waited for its batches out has a place again: its next
        chunk now."""
        if self.queue is not None:
            self.queue.add(key)

    def _created(self, res: Any, obj: JSON) -> None:
        """Write a created revision or Service through to its cache."""
        cache = {CONTROLLER_REVISIONS: self.revisions, SERVICES: self.services}.get(res)
        if cache is not None:
            cache.upsert_if_newer(obj)

    # ------------------------------------------------------------------ event handlers

    def _on_slice(self, namespace: str | None, old: JSON | None, new: JSON | None) -> None:
        self.routed.on_slice(namespace, old, new)  # the routed-pod set first, then the wakeup
        self.wakeups.slice(namespace, old, new)

    # ------------------------------------------------------------------ leadership

    async def _wait_synced(self) -> None:
        while not self.caches_synced():
            if self._stop.is_set():
                return
            await asyncio.sleep(0.05)

    async def _on_started_leading(self) -> None:
        await self._wait_synced()
        opts = self.options
        queue: WorkQueue[str] = WorkQueue(base_delay=opts.backoff_base,
                                          max_delay=opts.backoff_max,
                                          on_depth=self.metrics.queue_depth.set,
                                          on_wait=self.metrics.queue_waited)
        self.queue = queue
        self.wakeups.all()
        ordinary = max(1, opts.workers)  # at least one worker takes ordinary keys
        self._workers = [asyncio.create_task(self._worker(queue, i >= ordinary),
                                             name=f"worker-{i}")
                         for i in range(ordinary + PRIORITY_WORKERS)]
        if self.client is not None:
            self.leader_tasks.start(opts, self.client, self.events,
                                    service_config=lambda: self.service_config,
                                    lifecycle=lambda: self.config,
                                    is_leader=lambda: self.is_leader,
                                    advisor_metrics=self.advisor_metrics,
                                    ome_series=self.metrics.ome)
            if self._isvc is not None:  # a runtime/model change re-renders its replicas
                self._isvc.sources.on_source = self._source_changed
        log.info("manager.leading", workers=len(self._workers), replicas=len(queue))

    async def _on_stopped_leading(self) -> None:
        await self.leader_tasks.stop()
        queue, self.queue = self.queue, None
        if queue is not None:
            queue.shutdown()
            graceful = self._stop.is_set()  # else: lost the Lease, or killed
            if graceful and not await queue.wait_idle(self.options.shutdown_timeout):
                log.warning("manager.drain_timeout", in_flight=queue.in_flight)
        pipeline = self.executor.pipeline if self.executor is not None else None
        if pipeline is not None:
            if self._stop.is_set():
                await pipeline.drain(self.options.shutdown_timeout)
            await pipeline.cancel()
        await cancel_and_wait(self._workers)
        self._workers = []
        self.metrics.stopped_leading()
        log.info("manager.standby")

    # ------------------------------------------------------------------ background loops

    async def _config_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.config_reload_seconds)
            assert self.config_source is not None
            changed = await self.config_source.reload()
            if changed is None:
                continue
            self.config, self.service_config = changed
            self.wakeups.all()
            self.leader_tasks.settings_changed()

    async def _resync_loop(self) -> None:
        while True:
            await asyncio.sleep(self.options.resync_seconds)
            self.wakeups.all()

    async def _sync_gauge(self) -> None:
        settled = False
        while True:
            synced = self.caches_synced()
            self.metrics.caches_synced.set(1 if synced else 0)
            if synced and not settled:  # once: the initial LISTs are parsed and dropped
                settle_after_sync()
                self._gc.install()  # long collections in turns of their own from now on
                await asyncio.to_thread(return_free_heap)  # off the loop, without the GIL
                settled = True
            await asyncio.sleep(0.5)

    # ------------------------------------------------------------------ workers

    async def _worker(self, queue: WorkQueue[str], priority_only: bool = False) -> None:
        while True:
            key = await queue.get(priority_only=priority_only)
            if key is None:
                return
            try:
                await self._process(key, queue)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                self.metrics.reconcile_errors.labels("exception").inc()
                log.exception("reconcile.crashed", key=key, error=repr(exc))
                queue.add_rate_limited(key)
            finally:
                queue.done(key)

    async def _process(self, key: str, queue: WorkQueue[str]) -> None:
        started = time.monotonic()
        result_label = "ok"
        try:
            result_label = await self._reconcile(key, queue)
        except Exception:
            result_label = "exception"
            raise
        finally:
            took = time.monotonic() - started
            self.metrics.reconcile_duration.labels(result_label).observe(took)
            kind = self._pass_kinds.pop(key, None) or (
                result_label if result_label in ("gone", "rejected", "exception") else "none")
            self.metrics.pass_duration.labels(kind).observe(took)

    def snapshot(self, key: str, replica: Any) -> Snapshot:
        """The Snapshot of one InferenceReplica from the caches (no awaits inside)."""
        assert self.caches is not None
        return self.caches.snapshot(key, replica, routed=self.routed,
                                    create_errors=self.create_errors.take(key),
                                    config=self.config)

    async def _undecodable(self, ctx: PassContext, exc: CodecError) -> str:
        """The replica does not decode: reject it (and count OME's decode reason)."""
        where = "InstanceStatusDecodeFailed" if exc.path.startswith("status") else "InvalidSpec"
        if isinstance(reason := getattr(exc, "reason", None), str):
            self.metrics.ome.codec_error(reason)
        await self._reject(ctx, where, str(exc))
        return "rejected"

    async def _reconcile(self, key: str, queue: WorkQueue[str]) -> str:
        assert self.replicas is not None and self.executor is not None
        await self._turns.take()  # workers woken together plan one per loop iteration
        queue.reading(key)  # what came while it waited for the turn is read below
        raw = self.replicas.get(key)
        if raw is None:
            self._drop_key(key, queue)
            return "gone"
        namespace, _, name = key.partition("/")
        lg = log.bind(namespace=namespace, replica=name)
        ctx = PassContext(key=key, namespace=namespace, name=name, raw=raw, log=lg)
        if self.decoder.max_decoded != self.config.max_decoded_instances:  # reloaded
            self.decoder = ReplicaDecoder(max_decoded=self.config.max_decoded_instances)
        self.decoder.trim(self.replicas)
        try:  # a pass for a pod change decodes the (unchanged) replica no more
            replica = await decode_replica(self.decoder, raw)  # a big one off the loop
        except CodecError as exc:
            return await self._undecodable(ctx, exc)
        if needs_refs(replica, raw):  # rendered from spec.runtimeRef, this pass only
            warn = None if self.recorder is None else partial(self.recorder.emit_raw, ctx,
                                                                "Warning")
            rendered = await render_refs(replica, raw, self._isvc, self.service_config,
                                         self._refs_warnings, key, warn)
            if not isinstance(rendered, InferenceReplica):
                return await self._refs_blocked(ctx, rendered, queue)
            replica = rendered
        ctx.prefix = replica.prefix
        ctx.observed_status = replica.status
        ctx.log = lg = lg.bind(isvc=replica.isvc_name, component=replica.spec.component)
        problems = validate_replica(replica)
        if problems:
            await self._reject(ctx, "InvalidSpec", "; ".join(problems))
            return "rejected"
        snap = self.snapshot(key, replica)
        if self._memos is None:
            plan = self.plan_fn(snap)
        else:
            # taken out: a big pass frees the last memo in its worker thread, off the loop
            plan, memo = await plan_replica(snap, self._memos.pop(key))
            self._memos.put(key, memo, replica.spec.replicas or 0)
        result = await self.executor.apply(plan, ctx)
        self._pass_kinds[key] = pass_kind(plan, result)
        if plan.events and (result.applied > 0 or result.ok) and self.recorder is not None:
            await self.recorder.emit(ctx, plan.events)
        if result.outcome == "namespace_gone":
            rest = await self._apply_without_creates(plan, result, ctx)
            self._drop_key(key, queue)
            lg.info("reconcile.namespace_gone", action=result.failed_kind,
                    error=result.message, then_applied=rest.applied)
            return result.outcome
        self._requeue(key, queue, plan, result)
        log_pass(lg, plan, result)
        return result.outcome

    async def _apply_without_creates(self, plan: Plan, failed: ApplyResult,
                                     ctx: PassContext) -> ApplyResult:
        """In a namespace being deleted nothing can be created, but a teardown must still
        delete and release its finalizer (or the namespace never goes): apply what follows
        the refused create, creates left out."""
        assert self.executor is not None
        rest = tuple(a for a in plan.actions[failed.failed_index + 1:]
                     if not isinstance(a, _CREATES))
        if not rest:
            return ApplyResult()
        return await self.executor.apply(evolve(plan, actions=rest), ctx)

    def _drop_key(self, key: str, queue: WorkQueue[str]) -> None:
        """End the work for ``key``: no retry, no delayed look, no stored create errors (a
        watch event for the object brings it back)."""
        self.create_errors.drop(key)
        self._refs_warnings.forget(key)
        if self._memos is not None:
            self._memos.pop(key)
        queue.forget(key)
        queue.discard(key)
        if self.executor is not None:
            self.executor.forget(key)

    def _requeue(self, key: str, queue: WorkQueue[str], plan: Plan, result: ApplyResult) -> None:
        if not result.ok and result.outcome != "not_leader":
            self.metrics.reconcile_errors.labels(result.outcome).inc()
        requeue(queue, key, plan, result)

    async def _refs_blocked(self, ctx: PassContext, block: RefsRender | None,
                            queue: WorkQueue[str]) -> str:
        if block is None:  # the runtime caches have not listed yet
            queue.add_after(ctx.key, 1.0)
            return "waiting"
        await self._reject(ctx, block.reason, block.message)
        return "rejected"

    async def _reject(self, ctx: PassContext, reason: str, message: str) -> None:
        """Report an InferenceReplica we will not act on: Ready=False + a Warning Event."""
        assert self.client is not None and self.replicas is not None
        ctx.log.warning("replica.rejected", reason=reason, error=message)
        if self.elector is None or not self.elector.may_act():
            return
        try:
            obj = await write_rejection(self.client, ctx, reason, message)
        except ApiError as exc:
            ctx.log.warning("replica.reject_status_failed", reason=exc.reason,
                            error=exc.message)
            if self.queue is not None and exc.conflict:
                self.queue.add_rate_limited(ctx.key)
            return
        if obj is None:
            return  # already reported: stay quiet
        self.replicas.upsert_if_newer(obj)
        if self.recorder is not None:
            await self.recorder.emit_raw(ctx, "Warning", reason, message[:1000])

    # ------------------------------------------------------------------ teardown

    async def _teardown(self) -> None:
        self._gc.uninstall()
        if self.executor is not None and self.executor.pipeline is not None:
            await self.executor.pipeline.cancel()
        await cancel_and_wait([*self._workers, *self._tasks])
        self._workers, self._tasks = [], []
        await self.listeners.stop()
        if self.client is not None:
            with contextlib.suppress(Exception):
                await self.client.close()
        self.metrics.leader.set(0)
