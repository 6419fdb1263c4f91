"""Notice a built-in API group/version being served, and run its informers meanwhile.

Kubernetes 1.36 serves gang scheduling (``scheduling.k8s.io/v1alpha2``: ``Workload`` and
``PodGroup``) only when the cluster enables it (feature gates ``GenericWorkload``,
``GangScheduling`` and ``--runtime-config``). Like ``CrdPresence`` for a CRD, ``ApiPresence``
polls discovery (``GET /apis/<group>/<version>``) every few seconds; while every wanted
resource is listed it runs one informer per resource, and ``present`` turns True once all
of them have synced (so the core never sees "served" with an empty cache) and False as
soon as the group/version is gone (the caches are dropped). Transient API errors keep the
last known state. Discovery is readable by every authenticated user.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import structlog

from omenative_controller.kube.client import KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import Resource

__all__ = ["NATIVE_POD_GROUPS", "WORKLOADS", "ApiPresence"]

log = structlog.get_logger("omenative.apiwatch")

NATIVE_POD_GROUPS = Resource("scheduling.k8s.io", "v1alpha2", "podgroups", "PodGroup")
"""Kubernetes' own PodGroup (1.36, alpha)."""
WORKLOADS = Resource("scheduling.k8s.io", "v1alpha2", "workloads", "Workload")
"""Kubernetes' own Workload (1.36, alpha)."""


class ApiPresence:
    """Poll one API group/version; while it serves ``resources`` run their informers."""

    def __init__(
        self,
        client: KubeClient,
        resources: Sequence[Resource],
        make_informers: Callable[[], Mapping[str, Informer[Any]]],
        *,
        interval: float = 5.0,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.client = client
        self.resources = tuple(resources)
        self.group_version = self.resources[0].api_version
        self.make_informers = make_informers
        self.interval = interval
        self.on_change = on_change
        self.present = False
        self.checked = asyncio.Event()
        self.informers: dict[str, Informer[Any]] = {}
        self._tasks: list[asyncio.Task[None]] = []

    async def _probe(self) -> bool | None:
        """True when every resource is served, False when not, None when unknown."""
        try:
            found = await self.client.request(
                "GET", f"/apis/{self.group_version}", verb="get", resource="discovery")
        except ApiError as exc:
            if exc.not_found:
                return False
            log.warning("apiwatch.probe_failed", api=self.group_version, status=exc.status,
                        reason=exc.reason)
            return None
        served = {str(r.get("name")) for r in found.get("resources") or ()
                  if isinstance(r, Mapping)}
        return all(r.plural in served for r in self.resources)

    def _set(self, present: bool) -> None:
        if present != self.present:
            self.present = present
            log.info("apiwatch.changed", api=self.group_version, present=present)
            if self.on_change is not None:
                self.on_change(present)

    async def _start(self) -> None:
        self.informers = dict(self.make_informers())
        informers = list(self.informers.values())
        for informer in informers:
            self._tasks.append(asyncio.create_task(
                informer.run(), name=f"informer-{self.group_version}-{informer.name}"))

        async def synced() -> None:
            for informer in informers:
                await informer.synced.wait()
            if self.informers and all(i in self.informers.values() for i in informers):
                self._set(True)

        self._tasks.append(asyncio.create_task(synced()))

    async def _stop(self) -> None:
        for task in self._tasks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        self._tasks = []
        informers, self.informers = self.informers, {}
        self._set(False)
        for informer in informers.values():
            informer.clear()

    async def run(self) -> None:
        """Poll until cancelled."""
        try:
            while True:
                served = await self._probe()
                if served is not None:
                    if served and not self.informers:
                        await self._start()
                    elif not served and self.informers:
                        await self._stop()
                    self.checked.set()
                await asyncio.sleep(self.interval)
        finally:
            await self._stop()
