"""The manager's listening servers: metrics, probes (``/healthz``, ``/readyz``), webhook.

One concept the manager starts at startup and stops at teardown; it reads the options'
ports (``--metrics-port`` equal to ``--probe-port`` serves both on one listener, port 0
picks a free one) and reports the ports it got.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path

import structlog

from omenative_controller.kube.client import KubeClient
from omenative_controller.manager_config import ManagerOptions
from omenative_controller.observability import Metrics, ProbeServer
from omenative_controller.webhook import (
    WebhookServer,
    kube_revision_lookup,
    kube_runtime_lookup,
    kube_service_lookup,
    serve_webhook,
)
from omenative_controller.webhook_sources import kube_sources_lookup

__all__ = ["ManagerServers"]

log = structlog.get_logger("omenative.manager")

Probe = Callable[[], tuple[bool, str]]


class ManagerServers:
    """The probe/metrics servers and the admission webhook of one manager."""

    def __init__(self) -> None:
        self.servers: list[ProbeServer] = []
        self.webhook: WebhookServer | None = None
        self.metrics_port: int | None = None
        self.probe_port: int | None = None

    async def start(self, opts: ManagerOptions, client: KubeClient, metrics: Metrics, *,
                    ready: Probe, healthy: Probe) -> None:
        """Listen on the ports ``opts`` asks for (one shared metrics+probe port runs that
        listener alone, as the manager always has)."""
        if opts.metrics_port is not None and opts.metrics_port == opts.probe_port != 0:
            server = ProbeServer(metrics=metrics, ready=ready, healthy=healthy)
            port = await server.start(opts.bind_address, opts.metrics_port)
            self.servers.append(server)
            self.metrics_port = self.probe_port = port
            return  # as before the split: one shared listener, and nothing else
        await self._start_apart(opts, metrics, ready, healthy)
        if opts.webhook_port is not None:
            certs = Path(opts.webhook_cert_dir)
            self.webhook = await serve_webhook(
                opts.bind_address, opts.webhook_port, str(certs / "tls.crt"),
                str(certs / "tls.key"), runtime_lookup=kube_runtime_lookup(client),
                revision_lookup=kube_revision_lookup(client),
                service_lookup=kube_service_lookup(client),
                on_answer=metrics.webhook_answered,
                sources_lookup=kube_sources_lookup(client))
        log.info("manager.listening", metrics_port=self.metrics_port, probe_port=self.probe_port,
                 webhook_port=self.webhook.port if self.webhook is not None else None,
                 address=opts.bind_address)

    async def _start_apart(self, opts: ManagerOptions, metrics: Metrics, ready: Probe,
                           healthy: Probe) -> None:
        if opts.metrics_port is not None:
            server = ProbeServer(metrics=metrics, ready=ready, healthy=healthy)
            self.metrics_port = await server.start(opts.bind_address, opts.metrics_port)
            self.servers.append(server)
        if opts.probe_port is not None:
            server = ProbeServer(metrics=None, ready=ready, healthy=healthy)
            self.probe_port = await server.start(opts.bind_address, opts.probe_port)
            self.servers.append(server)

    async def stop(self) -> None:
        """Close every listener (errors ignored: this is teardown)."""
        for server in self.servers:
            with contextlib.suppress(Exception):
                await server.stop()
        self.servers = []
        if self.webhook is not None:
            with contextlib.suppress(Exception):
                await self.webhook.stop()
            self.webhook = None
