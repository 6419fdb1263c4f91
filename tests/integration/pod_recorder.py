"""Waiting and recording for the integration tests (re-exported by ``manager_fixtures``).

``eventually`` polls a check until it passes, telling "not yet" from a broken check (it
lives in ``omenative_devcluster.waiting``, so the recorders in ``src`` wait the same way);
``PodRecorder`` keeps every change of a namespace's pods (or another resource) from one
watch, so a test can check what was true at every moment ("never two pods in one slot",
"the gate never True before the gang was ready") instead of sampling it, and fails loudly
when the recording was cut.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable

import aiohttp
from attrs import define, field

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import PODS, Resource
from omenative_devcluster.serving_record import listed_versions
from omenative_devcluster.waiting import NOT_YET_STATUSES, eventually, not_yet

__all__ = ["NOT_YET_STATUSES", "PodRecorder", "RecorderDied", "eventually", "not_yet"]


# ---------------------------------------------------------------------------- recording


class RecorderDied(RuntimeError):
    """A ``PodRecorder`` stopped on its own (its watch expired, its LIST failed): what it
    recorded is cut short, so checks over it would pass on a partial history."""


@define
class PodRecorder:
    """Watches the namespace's pods and keeps every change, in resourceVersion order.

    The API server delivers one watch's events in resourceVersion order, so replaying the
    history shows the namespace as it was at each change: what a user would have seen.
    """

    kube: KubeClient
    namespace: str
    resource: Resource = PODS
    history: list[tuple[str, JSON]] = field(factory=list)
    #: how many entries of ``history`` came from the initial LIST (the state at start)
    baseline: int = 0
    _task: asyncio.Task[None] | None = None
    _ready: asyncio.Event = field(factory=asyncio.Event)

    async def start(self) -> PodRecorder:
        """Begin recording (returns once the watch is open; raises if the recorder died)."""
        self._task = asyncio.create_task(self._run(), name=f"recorder-{self.namespace}")
        opened = asyncio.ensure_future(self._ready.wait())
        await asyncio.wait({opened, self._task}, timeout=30,
                           return_when=asyncio.FIRST_COMPLETED)
        opened.cancel()
        self.check()
        if not self._ready.is_set():
            raise RecorderDied(f"the recorder's watch of {self.namespace} did not open in 30s")
        return self

    async def _run(self) -> None:
        page = await self.kube.list(self.resource, self.namespace)
        for obj in page.get("items") or ():
            self.history.append(("ADDED", obj))
        self.baseline = len(self.history)
        rv = page["metadata"]["resourceVersion"]
        while True:
            try:
                async with self.kube.watch(self.resource, self.namespace, resource_version=rv,
                                           timeout_seconds=600, read_timeout=700) as events:
                    self._ready.set()
                    async for ev in events:
                        if ev.get("type") == "ERROR":
                            if (ev.get("object") or {}).get("code") == 410:  # changes missed
                                raise RecorderDied(f"the watch expired: {ev.get('object')}")
                            break  # a broken stream: watch again from ``rv``
                        if ev.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                            self.history.append((ev["type"], ev["object"]))
                        new_rv = (ev.get("object") or {}).get("metadata", {}).get(
                            "resourceVersion")
                        if new_rv:
                            rv = new_rv
            except (ApiError, aiohttp.ClientError, TimeoutError) as exc:
                if isinstance(exc, ApiError) and exc.gone:
                    raise
                await asyncio.sleep(0.2)  # resumes from ``rv``: nothing is missed

    def check(self) -> None:
        """Raise ``RecorderDied`` if the recording stopped on its own: its history is cut, so
        nothing checked over it would mean what it says."""
        task = self._task
        if task is None or not task.done() or task.cancelled():
            return
        exc = task.exception()
        if isinstance(exc, RecorderDied):
            raise exc
        raise RecorderDied(f"the recorder of {self.namespace} died: {exc!r}") from exc

    async def caught_up(self, timeout: float = 30) -> None:
        """Until the history holds every pod as a LIST shows it now, so a "never" check
        over it covers everything up to this moment."""
        async def same() -> bool:
            self.check()
            state = self.replay(from_start=True)[-1][2] if self.history else {}
            return await listed_versions(self.kube, self.resource, self.namespace) == {
                n: o["metadata"]["resourceVersion"] for n, o in state.items()}

        await eventually(same, timeout=timeout, what="the recorder to catch up with a LIST")

    def assert_never(self, bad: Callable[[dict[str, JSON]], str | None], what: str, *,
                     since: int = 0) -> int:
        """``bad`` (the namespace's objects -> what is wrong, or None) holds at no state of
        the history (``since``: from the state when ``history`` had that many entries on);
        returns how many states were checked."""
        states = (self.replay(from_start=True)[since - 1:] if since > self.baseline
                  else self.replay())
        for kind, obj, state in states:
            problem = bad(state)
            assert problem is None, (
                f"{what}: after {kind} {obj['metadata']['name']} "
                f"(resourceVersion {obj['metadata'].get('resourceVersion')}): {problem}")
        return len(states)

    async def stop(self) -> None:
        """Stop recording; raise ``RecorderDied`` if it had stopped on its own before."""
        if self._task is None:
            return
        self.check()
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task

    def replay(self, *, from_start: bool = False) -> list[tuple[str, JSON, dict[str, JSON]]]:
        """(event type, object, the namespace's pods after the event) for every change.

        By default the entries of the initial LIST are folded into the first state (a
        half-listed namespace is not a state anyone saw); ``from_start`` keeps them. Raises
        ``RecorderDied`` if the recording stopped on its own.
        """
        self.check()
        state: dict[str, JSON] = {}
        out = []
        for kind, obj in self.history:
            name = obj["metadata"]["name"]
            if kind == "DELETED":
                state.pop(name, None)
            else:
                state[name] = obj
            out.append((kind, obj, dict(state)))
        if not from_start and self.baseline:
            return out[self.baseline - 1:]
        return out
