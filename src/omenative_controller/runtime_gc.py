"""Runtime-revision garbage collection in OME's namespace (the shell of
``omenative_core.service.runtime_gc``).

``RevisionCollector.run`` looks every ``interval`` seconds, and soon after a runtime revision
changes (``mark``), once both the revision cache and the InferenceService cache have listed
(so a revision that an InferenceService uses is never taken for an unused one), and only
while this manager leads. It writes what ``collect`` says: the ``ome.io/gc-eligible-since``
annotation set or removed by a JSON PATCH (a merge patch is refused: the API server
re-encodes the revision's ``data`` and calls it changed), and a DELETE with the revision's UID as
precondition, so a revision recreated under the same name is never deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from functools import partial

import structlog

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Informer
from omenative_controller.kube.jsonpatch import annotation_removal, pointer
from omenative_controller.kube.resources import CONTROLLER_REVISIONS
from omenative_core.service.runtime_gc import (
    ANNOTATION_GC_ELIGIBLE_SINCE,
    DEFAULT_GRACE,
    DEFAULT_RETENTION,
    GcPlan,
    collect,
)

__all__ = ["RevisionCollector"]

log = structlog.get_logger("omenative.isvc")


class RevisionCollector:
    """Prunes runtime revisions to OME's history limit (module docstring)."""

    def __init__(self, client: KubeClient, revisions: Informer[JSON], isvcs: Informer[JSON],
                 namespace: str, *, guard: Callable[[], bool] = lambda: True,
                 retention: int = DEFAULT_RETENTION, grace: timedelta = DEFAULT_GRACE,
                 interval: float = 60.0,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.client = client
        self.revisions = revisions
        self.isvcs = isvcs
        self.namespace = namespace
        self.guard = guard
        self.retention = retention
        self.grace = grace
        self.interval = interval
        self.now = now
        self._changed = asyncio.Event()
        self._held: dict[str, str] = {}
        """Marks kept here where the API server refuses the annotation (below)."""

    def mark(self) -> None:
        """A revision changed: look again soon."""
        self._changed.set()

    def plan(self) -> GcPlan | None:
        """What to write now, or None while a cache has not listed."""
        if not (self.revisions.synced.is_set() and self.isvcs.synced.is_set()):
            return None
        revisions = [self._with_held(obj) for _key, obj in self.revisions.items()]
        isvcs = [obj for _key, obj in self.isvcs.items()]
        return collect(revisions, isvcs, self.now(), retention=self.retention,
                       grace=self.grace)

    def _with_held(self, obj: JSON) -> JSON:
        """``obj`` with the mark held in memory for it, when it carries none."""
        meta = obj.get("metadata") or {}
        held = self._held.get(str(meta.get("name")))
        annotations = meta.get("annotations") or {}
        if held is None or ANNOTATION_GC_ELIGIBLE_SINCE in annotations:
            return obj
        return {**obj, "metadata": {**meta, "annotations": {
            **annotations, ANNOTATION_GC_ELIGIBLE_SINCE: held}}}

    def _cached(self, name: str) -> JSON:
        return self.revisions.get(f"{self.namespace}/{name}") or {}

    async def _annotate(self, name: str, value: str | None) -> None:
        """Set or remove the mark by JSON patch: a merge patch makes the API server
        re-encode ``data`` (sorted keys) and refuse it as a change of an immutable field."""
        present = self._cached(name).get("metadata", {}).get("annotations")
        if value is None:
            ops = annotation_removal(present or {}, [ANNOTATION_GC_ELIGIBLE_SINCE])
        elif isinstance(present, dict):
            ops = [{"op": "add", "value": value,
                    "path": pointer("metadata", "annotations", ANNOTATION_GC_ELIGIBLE_SINCE)}]
        else:
            ops = [{"op": "add", "path": pointer("metadata", "annotations"),
                    "value": {ANNOTATION_GC_ELIGIBLE_SINCE: value}}]
        if ops:
            await self.client.patch(CONTROLLER_REVISIONS, name, ops, self.namespace,
                                    patch_type="json")

    async def _delete(self, name: str) -> None:
        uid = self._cached(name).get("metadata", {}).get("uid")
        await self.client.delete(CONTROLLER_REVISIONS, name, self.namespace, uid=uid,
                                 propagation=None)

    async def sync(self) -> GcPlan | None:
        """One collection; the plan it wrote (None: nothing looked at)."""
        if not self.guard():
            return None
        plan = self.plan()
        if plan is None:
            return None
        writes: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            *((n, partial(self._annotate, n, plan.stamp)) for n in plan.mark),
            *((n, partial(self._annotate, n, None)) for n in plan.unmark),
            *((n, partial(self._delete, n)) for n in plan.delete)]
        for name in (*plan.unmark, *plan.delete):
            self._held.pop(name, None)
        for name, write in writes:
            try:
                await write()
            except ApiError as exc:
                if exc.status == 422 and name in plan.mark:
                    # The API server compares the revision's ``data`` bytewise and calls an
                    # annotation write a change of it when the stored bytes are not in its
                    # own encoding: keep the mark here (a restart starts the grace again).
                    self._held[name] = plan.stamp
                elif not exc.not_found:
                    log.info("runtime.revision_gc_failed", revision=name, error=str(exc))
        if plan.delete:
            log.info("runtime.revisions_pruned", revisions=list(plan.delete))
        return plan

    async def run(self) -> None:
        """Until cancelled: collect after each change and every ``interval`` seconds."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(self.interval):  # not wait_for: Makefile's lint
                    await self._changed.wait()
            self._changed.clear()
            try:
                await self.sync()
            except Exception as exc:  # a bug here must not stop the ISVC controller
                log.exception("runtime.revision_gc_crashed", error=str(exc))
