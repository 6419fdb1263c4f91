"""What the manager is configured with: its options (the CLI flags) and the lifecycle config.

The lifecycle config is the ``lifecycle`` key of the ``inferenceservice-config`` ConfigMap
(no ConfigMap means the chart's defaults; in a ConfigMap, an absent key means what OME's
binary makes of it, ``UNCONFIGURED``; invalid is a :class:`StartupError` at startup, and on a
reload keeps the previous settings with one Warning Event per bad version), together with
the InferenceService blocks of the same ConfigMap. OME's keys that omenative does not use
are accepted and reported once at start-up (a log line and a Normal Event
``OMEConfigKeysIgnored``); a key neither reads is refused, naming it.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
import uuid
from collections.abc import Mapping

import structlog
from attrs import define, field

from omenative_controller.coalesce import (
    STATUS_COALESCE_SECONDS,
    STATUS_READINESS_COALESCE_SECONDS,
)
from omenative_controller.executor import DEFAULT_MAX_INFLIGHT
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.events import EventRecorder
from omenative_controller.kube.resources import CONFIG_MAPS
from omenative_controller.leader import LeaderConfig
from omenative_controller.observability import Metrics
from omenative_core.model.config import (
    UNCONFIGURED,
    ConfigError,
    LifecycleConfig,
    parse_lifecycle_config,
)
from omenative_core.service import ServiceConfig, ignored_ome_keys, parse_service_config

__all__ = [
    "CONFIG_INVALID_REASON",
    "IGNORED_KEYS_REASON",
    "LIFECYCLE_KEY",
    "SERVICE_CONFIG_INVALID_REASON",
    "ConfigSource",
    "ManagerOptions",
    "StartupError",
    "default_identity",
]

log = structlog.get_logger("omenative.manager")

LIFECYCLE_KEY = "lifecycle"
"""The ConfigMap key holding the lifecycle JSON."""
CONFIG_INVALID_REASON = "InvalidLifecycleConfig"
"""The Warning Event on ``inferenceservice-config`` when its ``lifecycle`` entry is refused."""
SERVICE_CONFIG_INVALID_REASON = "InvalidServiceConfig"
"""The Warning Event on ``inferenceservice-config`` when an InferenceService block is refused."""
IGNORED_KEYS_REASON = "OMEConfigKeysIgnored"
"""The Normal Event on ``inferenceservice-config`` naming OME's keys omenative does not use."""


class StartupError(RuntimeError):
    """The manager cannot start (invalid lifecycle config, API unreachable); exit non-zero."""


def default_identity() -> str:
    """``hostname_pid_random``: unique per process, readable in the Lease."""
    return f"{socket.gethostname()}_{os.getpid()}_{uuid.uuid4().hex[:6]}"


@define(kw_only=True)
class ManagerOptions:
    """Everything the CLI flags set (seconds for durations)."""

    kubeconfig: str | None = None
    context: str | None = None
    namespaces: tuple[str, ...] = ()
    config_namespace: str = "ome"
    config_name: str = "inferenceservice-config"
    lease_name: str = "omenative-manager"
    lease_namespace: str | None = None
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    bind_address: str = "0.0.0.0"
    metrics_port: int | None = 8080
    probe_port: int | None = 8081
    #: concurrent reconcile passes; API writes are bounded by ``max_inflight`` instead
    workers: int = 64
    #: client-side limits: OME's chart sets its manager's to QPS 100, burst 200
    qps: float = 100.0
    burst: int = 200
    #: plan actions in flight at once over every worker (executor.py)
    max_inflight: int = DEFAULT_MAX_INFLIGHT
    #: pod creates one pass sends at most, whole gangs (None: ``max_inflight``; 0: no
    #: bound; executor.py, ``Executor.creates_per_pass``)
    creates_per_pass: int | None = None
    #: a pass that leaves pod creates for the next sends its own behind it, so the
    #: replica's next pass plans while they are answered (create_pipeline.py); False:
    #: every create answered in its pass
    pipeline_creates: bool = True
    #: seconds a progress-only status may wait for the next one (0: write every status)
    status_coalesce: float = STATUS_COALESCE_SECONDS
    #: seconds a status that only adds readiness may wait (0: readiness is never held)
    status_readiness_coalesce: float = STATUS_READINESS_COALESCE_SECONDS
    request_timeout: float = 30.0
    identity: str = field(factory=default_identity)
    config_reload_seconds: float = 30.0
    crd_poll_seconds: float = 5.0
    #: also run the InferenceService controller (projects ISVC components onto replicas)
    inference_services: bool = True
    #: the validating admission webhook's HTTPS port (None: off); every replica serves it,
    #: leader or not, with ``tls.crt`` / ``tls.key`` from ``webhook_cert_dir``
    webhook_port: int | None = None
    webhook_cert_dir: str = "/tmp/k8s-webhook-server/serving-certs"
    #: the GPU caretaker while leading: ``off``, ``recommend`` (Events, metrics) or ``apply``
    #: (also migration requests, one at a time); see advisor_loop.py
    advisor: str = "off"
    advisor_interval: float = 60.0
    advisor_bad_gpu_conditions: tuple[str, ...] = ()
    resync_seconds: float = 600.0
    #: OME's ``--runtime-revision-retention``: runtime revisions kept per runtime name
    runtime_revision_retention: int = 10
    #: OME's ``--runtime-revision-grace-period`` (seconds): how long an unkept revision waits
    runtime_revision_grace: float = 86400.0
    shutdown_timeout: float = 30.0
    startup_timeout: float = 60.0
    backoff_base: float = 0.05
    backoff_max: float = 60.0

    def leader_config(self) -> LeaderConfig:
        """The Lease settings."""
        return LeaderConfig(
            name=self.lease_name,
            namespace=self.lease_namespace or self.config_namespace,
            identity=self.identity,
            lease_duration=self.lease_duration,
            renew_deadline=self.renew_deadline,
            retry_period=self.retry_period,
        )


@define
class ConfigSource:
    """Reads, parses and reports the lifecycle config of one manager."""

    options: ManagerOptions
    metrics: Metrics
    client: KubeClient
    events: EventRecorder | None = None
    _data: dict[str, str] | None = None
    _ref: JSON | None = None
    _rejected: dict[str, str] | None = field(default=None)

    async def read(self) -> dict[str, str] | None:
        """The keys of ``inferenceservice-config`` this manager reads (None: no ConfigMap)."""
        opts = self.options
        try:
            cm = await self.client.get(CONFIG_MAPS, opts.config_name, opts.config_namespace)
        except ApiError as exc:
            if exc.not_found:
                return None
            raise
        meta = cm.get("metadata") or {}
        self._ref = {"apiVersion": "v1", "kind": "ConfigMap", "name": opts.config_name,
                            "namespace": opts.config_namespace, "uid": meta.get("uid")}
        data = cm.get("data") or {}
        return {k: v for k, v in data.items() if isinstance(v, str)}

    @staticmethod
    def parse_all(data: Mapping[str, str] | None) -> tuple[LifecycleConfig, ServiceConfig]:
        """The lifecycle entry and the InferenceService blocks; ConfigError names the key.

        With a ConfigMap, an absent ``lifecycle`` key or key in it means OME's reading
        (``UNCONFIGURED``); with none at all, the chart's defaults. ``omenativeStatus``
        sets the status encoding of the returned lifecycle config."""
        if data is None:
            lifecycle = LifecycleConfig()
            return lifecycle, parse_service_config({}, lifecycle)
        lifecycle = parse_lifecycle_config(data.get(LIFECYCLE_KEY, ""), absent=UNCONFIGURED)
        service = parse_service_config(data, lifecycle)
        return service.lifecycle, service

    async def report_invalid(self, data: Mapping[str, str] | None, exc: ConfigError,
                                     consequence: str) -> None:
        """A Warning Event on the ConfigMap naming every refused key and its rule."""
        if self._ref is None or self.events is None:
            return
        try:
            parse_lifecycle_config((data or {}).get(LIFECYCLE_KEY), absent=UNCONFIGURED)
            reason = SERVICE_CONFIG_INVALID_REASON
        except ConfigError:
            reason = CONFIG_INVALID_REASON
        problems = exc.problems
        message = (f"{len(problems)} invalid setting(s), {consequence}: " + "; ".join(problems))
        self.metrics.events.labels("Warning", reason).inc()
        await self.events.record(self._ref, "Warning", reason, message)

    async def _parse(self, data: Mapping[str, str] | None
                     ) -> tuple[LifecycleConfig, ServiceConfig]:
        opts = self.options
        try:
            return self.parse_all(data)
        except ConfigError as exc:
            await self.report_invalid(data, exc, "the manager cannot start")
            raise StartupError(
                f"Failed to initialize lifecycle configuration from ConfigMap "
                f"{opts.config_namespace}/{opts.config_name}: {exc}"
            ) from exc

    async def initial(self) -> tuple[LifecycleConfig, ServiceConfig]:
        """The config at startup (API errors retried until ``startup_timeout``)."""
        opts = self.options
        deadline = time.monotonic() + opts.startup_timeout
        while True:
            try:
                data = await self.read()
                break
            except ApiError as exc:
                if time.monotonic() > deadline or not exc.retriable:
                    raise StartupError(
                        f"cannot read ConfigMap {opts.config_namespace}/{opts.config_name}: "
                        f"{exc}"
                    ) from exc
                log.warning("config.read_failed", error=str(exc))
                await asyncio.sleep(1.0)
        cfg = await self._parse(data)
        self._data = data
        log.info("config.loaded", source=f"{opts.config_namespace}/{opts.config_name}",
                 defaults=data is None, keys=sorted(data or ()))
        await self.report_ignored(data)
        return cfg

    async def report_ignored(self, data: Mapping[str, str] | None) -> None:
        """Once, at start-up: a log line and a Normal Event naming OME's keys not used."""
        ignored = ignored_ome_keys(data or {})
        if not ignored:
            return
        log.info("config.ome_keys_ignored", keys=list(ignored))
        if self._ref is None or self.events is None:
            return
        message = ("OME settings omenative accepts and does not use: " + ", ".join(ignored)
                   + " (docs/ome-compatibility.md)")
        self.metrics.events.labels("Normal", IGNORED_KEYS_REASON).inc()
        await self.events.record(self._ref, "Normal", IGNORED_KEYS_REASON, message)

    async def reload(self) -> tuple[LifecycleConfig, ServiceConfig] | None:
        """Read the ConfigMap again: the new settings, or None when unchanged, unreadable
        or invalid (the previous settings stay; an invalid version is reported once)."""
        try:
            data = await self.read()
        except ApiError as exc:
            self.metrics.config_reloads.labels("read_error").inc()
            log.warning("config.reload_failed", error=str(exc))
            return None
        if data == self._data:
            self.metrics.config_reloads.labels("unchanged").inc()
            return None
        try:
            cfg = self.parse_all(data)
        except ConfigError as exc:
            self.metrics.config_reloads.labels("invalid").inc()
            log.error("config.invalid_kept_previous", error=str(exc),
                      problems=list(exc.problems))
            if data != self._rejected:  # once per bad version, not per reload
                self._rejected = data
                await self.report_invalid(data, exc, "the previous settings stay in force")
            return None
        self._data, self._rejected = data, None
        self.metrics.config_reloads.labels("changed").inc()
        log.info("config.reloaded")
        return cfg
