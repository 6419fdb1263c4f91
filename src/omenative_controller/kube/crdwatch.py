"""Notice a CRD appearing or going away without a restart, and run its informer meanwhile.

The shell's one CRD-presence watcher. The IR manager uses it for the scheduler-plugins
PodGroup CRD: while ``podgroups.scheduling.x-k8s.io`` is installed and Established, a
PodGroup informer runs; ``present`` turns True only once that informer has synced (so the
core never sees "CRD present" with an empty cache), and False as soon as the CRD is gone
(the cache is dropped). The InferenceService controller uses it without an informer for the
optional CRDs it renders for (LeaderWorkerSet, PodMonitor, PodGroup): ``present`` follows
the CRD being Established. The CRD is polled every few seconds; transient API errors keep
the last known state.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import structlog

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.resources import CRDS

__all__ = ["CrdPresence", "served_version"]

log = structlog.get_logger("omenative.crdwatch")


def served_version(crd: JSON) -> str | None:
    """The storage version if served, else the first served version; None if unusable."""
    spec = crd.get("spec") or {}
    versions = [v for v in spec.get("versions") or () if v.get("served")]
    if not versions:
        return None
    for v in versions:
        if v.get("storage"):
            return str(v["name"])
    return str(versions[0]["name"])


def _established(crd: JSON) -> bool:
    if (crd.get("metadata") or {}).get("deletionTimestamp"):
        return False
    for cond in (crd.get("status") or {}).get("conditions") or ():
        if cond.get("type") == "Established":
            return bool(cond.get("status") == "True")
    return False


class CrdPresence:
    """Poll one CRD; while it is Established run ``make_informer(version)`` (if given)."""

    def __init__(
        self,
        client: KubeClient,
        crd_name: str,
        make_informer: Callable[[str], Informer[Any]] | None = None,
        *,
        interval: float = 5.0,
        on_change: Callable[[bool], None] | None = None,
    ) -> None:
        self.client = client
        self.crd_name = crd_name
        self.make_informer = make_informer
        self.interval = interval
        self.on_change = on_change
        self.present = False
        self.checked = asyncio.Event()
        self.informer: Informer[Any] | None = None
        self.version: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._sync_task: asyncio.Task[None] | None = None

    async def _probe(self) -> str | bool | None:
        """The usable version, None when absent, False when unknown (an API error)."""
        try:
            crd = await self.client.get(CRDS, self.crd_name)
        except ApiError as exc:
            if exc.not_found:
                return None
            log.warning("crdwatch.probe_failed", crd=self.crd_name, status=exc.status,
                        reason=exc.reason)
            return False
        return served_version(crd) if _established(crd) else None

    def _set(self, present: bool) -> None:
        if present != self.present:
            self.present = present
            log.info("crdwatch.changed", crd=self.crd_name, present=present,
                     version=self.version)
            if self.on_change is not None:
                self.on_change(present)

    async def _start(self, version: str) -> None:
        self.version = version
        if self.make_informer is None:
            self._set(True)
            return
        informer = self.make_informer(version)
        self.informer = informer
        self._task = asyncio.create_task(informer.run(), name=f"informer-{self.crd_name}")

        async def synced() -> None:
            await informer.synced.wait()
            if self.informer is informer:
                self._set(True)

        self._sync_task = asyncio.create_task(synced())

    async def _stop(self) -> None:
        for task in (self._sync_task, self._task):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        self._task = self._sync_task = None
        informer, self.informer, self.version = self.informer, None, None
        self._set(False)
        if informer is not None:
            informer.clear()

    async def run(self) -> None:
        """Poll until cancelled."""
        try:
            while True:
                found = await self._probe()
                if found is not False:
                    if isinstance(found, str) and self.version is None:
                        await self._start(found)
                    elif isinstance(found, str) and found != self.version:
                        await self._stop()
                        await self._start(found)
                    elif found is None and self.version is not None:
                        await self._stop()
                    self.checked.set()
                await asyncio.sleep(self.interval)
        finally:
            await self._stop()
