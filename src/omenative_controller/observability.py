"""Metrics, probes and logs of the manager.

* Prometheus metrics on a per-manager registry (two managers can run in one process, as the
  tests do): reconcile latency (by result, and by what the pass did), queue depth, actions
  by kind, actions in flight, every API request by verb, resource and code (reads
  included), write calls, API errors, status bytes per InferenceReplica, held status
  writes, the wait for a worker (by queue lane) and for an in-flight slot, leadership,
  cache sizes and watch restarts, admission answers by code, the paced garbage
  collections; OME's ``ome_omenative_*`` series beside them (``Metrics.ome``,
  ome_series.py); Instances by phase and rollout progress per replica
  (``Metrics.replicas``, replica_gauges.py).
* An aiohttp server for ``/metrics``, ``/healthz`` (the loop answers) and ``/readyz``
  (caches synced). Port 0 picks a free port; :meth:`ProbeServer.start` returns it.
* structlog JSON logs; callers bind ``isvc``, ``component`` and ``instance``.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable
from typing import Any

import structlog
from aiohttp import web
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from omenative_controller.gauge_rows import GaugeRows
from omenative_controller.ome_series import OMESeries
from omenative_controller.planning import in_worker
from omenative_controller.replica_gauges import ReplicaGauges

__all__ = ["WRITE_VERBS", "Metrics", "ProbeServer", "configure_logging"]

WRITE_VERBS = frozenset({"create", "update", "patch", "delete"})
"""API verbs that change the cluster (counted by ``omenative_api_writes_total``)."""


class Metrics:
    """The manager's Prometheus metrics, on their own registry."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.reconcile_duration = Histogram(
            "omenative_reconcile_duration_seconds",
            "Time of one reconcile pass (snapshot, plan, apply), by result.",
            ["result"],
            registry=r,
            buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
        )
        self.queue_depth = Gauge(
            "omenative_queue_depth", "InferenceReplica keys waiting for a worker.", registry=r
        )
        self.actions = Counter(
            "omenative_actions", "Plan actions applied successfully, by kind.", ["kind"],
            registry=r,
        )
        self.action_failures = Counter(
            "omenative_action_failures", "Plan actions that failed, by kind and reason.",
            ["kind", "reason"], registry=r,
        )
        self.api_requests = Counter(
            "omenative_api_requests",
            "Every Kubernetes API request the manager made, by verb, resource and HTTP code "
            "(timeout / error without an answer).",
            ["verb", "resource", "code"],
            registry=r,
        )
        self.api_writes = Counter(
            "omenative_api_writes",
            "Write requests (create, update, patch, delete), by resource.",
            ["resource"],
            registry=r,
        )
        self.api_errors = Counter(
            "omenative_api_errors",
            "API requests that did not succeed, by verb, resource and code.",
            ["verb", "resource", "code"],
            registry=r,
        )
        self.api_latency = Histogram(
            "omenative_api_request_duration_seconds", "API request latency, by verb.", ["verb"],
            registry=r,
        )
        self.leader = Gauge(
            "omenative_leader", "1 while this manager holds the Lease and acts.", registry=r
        )
        self.caches_synced = Gauge(
            "omenative_caches_synced", "1 once every watch cache has listed.", registry=r
        )
        self.watch_restarts = Counter(
            "omenative_watch_restarts", "Watch streams restarted, by resource and reason.",
            ["resource", "reason"], registry=r,
        )
        self.cache_objects = Gauge(
            "omenative_cache_objects", "Objects held per watch cache.", ["resource"], registry=r
        )
        self.reconcile_errors = Counter(
            "omenative_reconcile_errors", "Reconcile passes that ended in an error, by reason.",
            ["reason"], registry=r,
        )
        self.events = Counter(
            "omenative_events", "Kubernetes Events emitted, by type and reason.",
            ["type", "reason"], registry=r,
        )
        self.pass_duration = Histogram(
            "omenative_pass_duration_seconds",
            "Time of one reconcile pass, by what its plan did (create, delete, gate, patch, "
            "status, held, none, rejected, gone).",
            ["kind"],
            registry=r,
            buckets=(0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
        )
        waits = (0.001, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
        self.queue_wait, self.slot_wait = (Histogram(
            name, text, [label], registry=r, buckets=waits) for name, text, label in (
            ("omenative_queue_wait_seconds", "Time an InferenceReplica key waited in the work "
             "queue for a worker, by lane (priority: pods one pass from their gate or from "
             "Ready; ordinary).", "lane"),
            ("omenative_slot_wait_seconds", "Time a plan action waited for a slot of "
             "--max-inflight, by urgency (urgent: status writes and gates going True).",
             "urgent")))
        self.requests_in_flight = Gauge(
            "omenative_api_requests_in_flight",
            "Plan actions talking to the API server now (bounded by --max-inflight).",
            registry=r,
        )
        self.status_bytes = GaugeRows(  # a series per replica: rows, not Gauge children
            "omenative_status_bytes",
            "Bytes of the last status write body per InferenceReplica, sent or refused "
            "(etcd refuses requests over 1.5 MiB).",
            ["namespace", "replica"],
            registry=r,
        )
        self.status_held = Counter(
            "omenative_status_writes_held",
            "Status writes held back as progress-only (--status-coalesce).", registry=r,
        )
        self.config_reloads = Counter(
            "omenative_config_reloads", "Lifecycle config reads, by result.", ["result"],
            registry=r,
        )
        self.webhook_requests = Counter(
            "omenative_webhook_requests", "Admission requests the webhook answered, by path "
            "and HTTP code (a denial is a 200; OMEWebhookFailing reads the 5xx share).",
            ["webhook", "code"], registry=r,
        )
        self.gc_collections = Histogram(
            "omenative_gc_collection_seconds",
            "The garbage collections the manager paces (gc_pacer.py), by generation: 0 (young, "
            "once 2,000 young objects piled up), 1 (the middle one, soon after young ones, its "
            "survivors frozen) and 2 (full: the hourly thaw, once the manager is quiet). A "
            "long one holds the event loop that long.",
            ["generation"], registry=r,
            buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25),
        )
        self.gc_freezes = Counter(
            "omenative_gc_freezes", "Paced collections that froze their survivors "
            "(gc.freeze: no full collection walks them until the next hourly thaw).",
            registry=r,
        )
        #: OME's ``ome_omenative_*`` series (ome_series.py), beside these
        self.ome = OMESeries(r)
        #: Instances by phase and rollout progress per replica (replica_gauges.py)
        self.replicas = ReplicaGauges(r)

    # ------------------------------------------------------------------ observers

    def queue_waited(self, priority: bool, seconds: float) -> None:
        """A key left the work queue after ``seconds`` (the WorkQueue's ``on_wait``)."""
        self.queue_wait.labels("priority" if priority else "ordinary").observe(seconds)

    def slot_waited(self, urgent: bool, seconds: float) -> None:
        """An action got its in-flight slot after ``seconds`` (the Slots' ``on_wait``)."""
        self.slot_wait.labels("true" if urgent else "false").observe(seconds)

    def gc_collected(self, generation: int, seconds: float, froze: bool) -> None:
        """One paced collection (the GcPacer's ``on_collect``)."""
        self.gc_collections.labels(str(generation)).observe(seconds)
        if froze:
            self.gc_freezes.inc()

    def api_request(self, verb: str, resource: str, code: str, seconds: float) -> None:
        """Count one API request (the KubeClient's observer hook)."""
        self.api_requests.labels(verb, resource, code).inc()
        self.api_latency.labels(verb).observe(seconds)
        if verb in WRITE_VERBS:
            self.api_writes.labels(resource).inc()
        if not code.startswith("2"):
            self.api_errors.labels(verb, resource, code).inc()

    def forget_status_bytes(self, namespace: str, replica: str) -> None:
        """Drop the per-replica series (status sizes, ours and OME's; Instances by phase;
        rollout progress) of a deleted InferenceReplica."""
        with contextlib.suppress(KeyError):
            self.status_bytes.remove(namespace, replica)
        self.ome.forget(namespace, replica)
        self.replicas.forget(namespace, replica)

    def planned(self, ctx: Any, plan: Any, *, changed: bool) -> None:
        """A pass over ``ctx`` (a ``PassContext``) planned ``plan`` (``changed``: its status
        differs from the stored one): Instances by phase, rollout progress, and the
        scale-down wave OME's series count once the status commits."""
        self.replicas.observe(ctx, plan.status, changed=changed)
        self.ome.planned_wave(ctx.key, plan.scale_down_wave)

    def stopped_leading(self) -> None:
        """The manager no longer leads: no queue, and no per-replica state to report."""
        self.queue_depth.set(0)
        self.replicas.clear()

    def webhook_answered(self, path: str, code: int) -> None:
        """Count one admission answer (the webhook server's ``on_answer`` hook)."""
        self.webhook_requests.labels(path, str(code)).inc()

    def watch_restart(self, resource: str, reason: str) -> None:
        """Count a watch restart (the informer's observer hook)."""
        self.watch_restarts.labels(resource, reason).inc()

    def cache_size(self, resource: str, size: int) -> None:
        """Record a cache size (the informer's observer hook)."""
        self.cache_objects.labels(resource).set(size)

    # ------------------------------------------------------------------ reading back

    def sample(self, name: str, labels: dict[str, str] | None = None) -> float:
        """Sum of the samples called ``name`` whose labels include ``labels``."""
        total = 0.0
        for family in self.registry.collect():
            for s in family.samples:
                if s.name != name:
                    continue
                if labels and any(s.labels.get(k) != v for k, v in labels.items()):
                    continue
                total += s.value
        return total

    def writes(self, *, exclude: tuple[str, ...] = ("leases",)) -> float:
        """``omenative_api_writes_total`` summed over resources, Lease renewals excluded."""
        total = 0.0
        for family in self.registry.collect():
            for s in family.samples:
                if s.name == "omenative_api_writes_total" and s.labels.get("resource") not in (
                    exclude
                ):
                    total += s.value
        return total


class ProbeServer:
    """``/metrics``, ``/healthz`` and ``/readyz`` on one port."""

    def __init__(
        self,
        *,
        metrics: Metrics | None,
        ready: Callable[[], tuple[bool, str]],
        healthy: Callable[[], tuple[bool, str]] = lambda: (True, "ok"),
        name: str = "probes",
    ) -> None:
        self.metrics = metrics
        self.ready = ready
        self.healthy = healthy
        self.name = name
        self.port: int | None = None
        self._runner: web.AppRunner | None = None

    async def _metrics(self, _: web.Request) -> web.Response:
        if self.metrics is None:
            return web.Response(status=404, text="no metrics here\n")
        # ~0.2 ms a series: at 500 replicas (13 gauges each) ~100-160 ms of CPU, which on the
        # event loop held every watch and pass for the whole scrape (bench_controller.py)
        body = await in_worker(generate_latest, self.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def _healthz(self, _: web.Request) -> web.Response:
        ok, detail = self.healthy()
        return web.Response(status=200 if ok else 503, text=detail + "\n")

    async def _readyz(self, _: web.Request) -> web.Response:
        ok, detail = self.ready()
        return web.Response(status=200 if ok else 503, text=detail + "\n")

    async def start(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (0: a free port); return the port."""
        app = web.Application()
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/readyz", self._readyz)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        await site.start()
        self._runner = runner
        server = site._server  # the bound socket tells the port picked for 0
        sockets: Any = getattr(server, "sockets", None) or ()
        self.port = int(sockets[0].getsockname()[1]) if sockets else port
        return self.port

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def configure_logging(level: str = "info", *, json_logs: bool = True) -> None:
    """structlog to stdout: JSON lines (or console text) with level, time and bound context."""
    lvl = logging.getLevelNamesMapping().get(level.upper(), logging.INFO)
    renderer: Any = (
        structlog.processors.JSONRenderer() if json_logs else structlog.dev.ConsoleRenderer()
    )
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.StackInfoRenderer(),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(lvl),
        logger_factory=structlog.WriteLoggerFactory(file=sys.stdout),
        cache_logger_on_first_use=False,
    )
