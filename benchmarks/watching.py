"""What the controller benchmarks share: progress lines and watching objects become ready.

``bench_controller.py`` (omenative and the bare loop) and ``peer_lws.py`` (LeaderWorkerSet)
time the same thing, a namespace's pods becoming Ready, so they watch it with the same code.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable

import aiohttp

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import Resource

T_START = time.monotonic()


def say(msg: str) -> None:
    """A progress line with the time since the benchmark started."""
    print(f"[{time.monotonic() - T_START:7.1f}s] {msg}", flush=True)


class Tracker:
    """Watch one namespace's objects of a kind (None: a cluster-wide kind, or every
    namespace); know which are "ready" and when."""

    def __init__(self, kube: KubeClient, res: Resource, namespace: str | None,
                 is_ready: Callable[[JSON], bool], target: int,
                 on_event: Callable[[str, JSON], None] | None = None,
                 label_selector: str | None = None) -> None:
        self.kube, self.res, self.namespace = kube, res, namespace
        self.label_selector = label_selector
        self.is_ready, self.target = is_ready, target
        self.on_event = on_event
        self.seen: dict[str, float] = {}  # name -> first seen (monotonic)
        self.ready: dict[str, float] = {}  # name -> became ready
        self.done = asyncio.Event()
        self._opened = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> Tracker:
        """Open the watch (returns once it is open)."""
        self._task = asyncio.create_task(self._run())
        await asyncio.wait_for(self._opened.wait(), 30)
        return self

    def _see(self, kind: str, obj: JSON) -> None:
        name = obj["metadata"]["name"]
        now = time.monotonic()
        if self.on_event is not None:
            self.on_event(kind, obj)
        if kind == "DELETED":
            self.ready.pop(name, None)
            return
        self.seen.setdefault(name, now)
        if self.is_ready(obj):
            self.ready.setdefault(name, now)
        else:
            self.ready.pop(name, None)
        if len(self.ready) >= self.target:
            self.done.set()

    async def _run(self) -> None:
        rv: str | None = None
        while True:
            try:
                if rv is None:
                    page = await self.kube.list(self.res, self.namespace,
                                                label_selector=self.label_selector)
                    for obj in page.get("items") or ():
                        self._see("ADDED", obj)
                    rv = page["metadata"]["resourceVersion"]
                async with self.kube.watch(self.res, self.namespace, resource_version=rv,
                                           label_selector=self.label_selector,
                                           timeout_seconds=600, read_timeout=120) as events:
                    self._opened.set()
                    async for ev in events:
                        obj = ev.get("object") or {}
                        if ev.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                            self._see(ev["type"], obj)
                        elif ev.get("type") == "ERROR":
                            rv = None
                            break
                        rv = obj.get("metadata", {}).get("resourceVersion") or rv
            except ApiError as exc:
                if exc.gone:
                    rv = None
                await asyncio.sleep(0.2)
            except (aiohttp.ClientError, TimeoutError):
                await asyncio.sleep(0.2)

    async def stop(self) -> None:
        """Close the watch."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._task


def pod_ready(pod: JSON) -> bool:
    """Ready and not being deleted."""
    return not pod["metadata"].get("deletionTimestamp") and any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions") or ())


async def wait_done(tracker: Tracker, what: str, timeout: float,
                    extra: Callable[[], str] = lambda: "") -> None:
    """Until the tracker is done; a progress line every 5 s."""
    deadline = time.monotonic() + timeout
    while not tracker.done.is_set():
        left = deadline - time.monotonic()
        if left <= 0:
            raise RuntimeError(f"timed out after {timeout:.0f}s: {len(tracker.ready)}/"
                               f"{tracker.target} {what} ready{extra()}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(tracker.done.wait(), min(5.0, left))
        if not tracker.done.is_set():
            say(f"  {len(tracker.ready)}/{tracker.target} {what} ready{extra()}")
