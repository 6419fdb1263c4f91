"""Writes to the InferenceReplica itself: its status, its finalizer, consumed annotations.

The executor (``executor.py``) sends every action of a plan; the three that write the
InferenceReplica it hands to :class:`ReplicaWriter`. Each carries the resourceVersion the
pass last saw (a 409 or 404 means the view was stale: the pass ends as a conflict and the
key is planned again at once), and each answer is written through to the replica cache
(``on_replica_written``) and into ``PassContext.raw`` for the rest of the pass.

A status body over ``STATUS_SIZE_LIMIT`` (etcd's default request limit) is never sent: the
pass ends, a Warning Event ``StatusSizeExceeded`` names the size and the limit, and the
stored status gains ``StatusSizeExceeded=True`` (best effort). Statuses of
``STATUS_THREAD_ROWS`` rows or more are encoded in a worker thread.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from typing import Any

import structlog
from attrs import define

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_controller.observability import Metrics
from omenative_controller.ome_series import WriteResult, encoding_label
from omenative_controller.pass_context import PassContext, PassStop
from omenative_controller.replica_events import ReplicaEvents
from omenative_core.model.observed import PodView
from omenative_core.model.plan import RemoveAnnotations, SetFinalizer, UpdateStatus
from omenative_core.status.budget import too_large_patch
from omenative_core.status.wire import status_to_json

__all__ = ["STATUS_SIZE_LIMIT", "STATUS_THREAD_ROWS", "ReplicaWriter"]

log = structlog.get_logger("omenative.executor")

STATUS_SIZE_LIMIT = 1536 * 1024
"""Largest status write sent, in bytes of its JSON body: etcd's default request limit.

A larger write would be refused by etcd (or the API server) after the cost of sending it;
the manager says why instead, once per pass, and writes nothing.
"""
STATUS_THREAD_ROWS = 256
"""Statuses of this many Instance rows or more are encoded in a worker thread.

Encoding costs ~15 µs a row (ColumnarV2, cattrs): a 10,000-row status would hold the event
loop for ~150 ms, and every watch and the Lease renewal with it. In a thread the loop gets
the interpreter back every switch interval (5 ms); below this size the hop is not worth it.
"""
_Stop = PassStop


def _log(ctx: PassContext) -> Any:
    return ctx.log if ctx.log is not None else log


@define
class ReplicaWriter:
    """The executor's writes to the InferenceReplica: status, finalizer, annotations."""

    client: KubeClient
    metrics: Metrics | None = None
    encoding: Callable[[], tuple[str, int]] = lambda: ("ColumnarV2", 20000)
    on_replica_written: Callable[[JSON], None] | None = None
    #: where the Warning Event about an oversized status goes
    events: ReplicaEvents | None = None
    status_size_limit: int = STATUS_SIZE_LIMIT
    #: the cached pods of one InferenceReplica key (the OME status series count them)
    pods_of: Callable[[str], Iterable[PodView]] | None = None

    def _wrote_replica(self, ctx: PassContext, obj: JSON) -> None:
        ctx.raw = obj
        if self.on_replica_written is not None:
            self.on_replica_written(obj)

    def _replica_conflict(self, exc: ApiError, what: str) -> _Stop:
        if exc.conflict or exc.not_found:
            return _Stop("conflict", f"{what}: {exc.reason} (the view was stale)", exc.reason)
        if exc.invalid:
            return _Stop("failed", f"{what} rejected: {exc.message}", exc.reason)
        return _Stop("failed", f"{what}: {exc}", exc.reason)

    def _status_body(self, action: UpdateStatus, ctx: PassContext) -> tuple[JSON, int]:
        """The status PUT's body and its size in bytes (CPU only: may run in a thread)."""
        encoding, max_decoded = self.encoding()
        status = status_to_json(action.status, encoding=encoding, max_decoded=max_decoded)
        meta = ctx.raw.get("metadata") or {}
        body = {
            "apiVersion": INFERENCE_REPLICAS.api_version,
            "kind": INFERENCE_REPLICAS.kind,
            "metadata": {
                "name": ctx.name,
                "namespace": ctx.namespace,
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "spec": ctx.raw.get("spec") or {},
            "status": status,
        }
        return body, len(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode())

    async def update_status(self, action: UpdateStatus, ctx: PassContext) -> None:
        """PUT the status subresource with the resourceVersion the pass saw (never a body
        over ``status_size_limit``); a 409 or 404 ends the pass as a conflict."""
        if len(action.status.instances) >= STATUS_THREAD_ROWS:
            body, size = await asyncio.to_thread(self._status_body, action, ctx)
        else:
            body, size = self._status_body(action, ctx)
        ome = self.metrics.ome if self.metrics is not None else None
        label = ome.status_write(ctx, body, size) if ome is not None else ""
        await self._check_status_size(body, size, ctx)
        try:
            obj = await self.client.replace(
                INFERENCE_REPLICAS, ctx.name, body, ctx.namespace, subresource="status"
            )
        except ApiError as exc:
            if ome is not None:
                ome.status_written(label, WriteResult.CONFLICT if exc.conflict
                                   else WriteResult.ERROR)
            raise self._replica_conflict(exc, "status update") from None
        if ome is not None:
            ome.status_committed(ctx, body, label, action.status, pods=self.pods_of)
        self._wrote_replica(ctx, obj)

    async def _check_status_size(self, body: JSON, size: int, ctx: PassContext) -> None:
        """End the pass, with a Warning Event, when the status body is over the limit."""
        if self.metrics is not None:
            self.metrics.status_bytes.labels(ctx.namespace, ctx.name).set(size)
        if size <= self.status_size_limit:
            return
        if self.metrics is not None:
            self.metrics.ome.status_written(encoding_label(body), WriteResult.REJECTED)
        rows = len((body.get("status") or {}).get("instanceStatuses") or ())
        message = (
            f"status update not sent: its body is {size} bytes, over the "
            f"{self.status_size_limit}-byte limit (etcd's default request size, 1.5 MiB)"
            + (f"; {rows} Instance rows are written DenseV1" if rows else "")
        )
        _log(ctx).warning("status.too_large", size=size, limit=self.status_size_limit)
        if self.events is not None:
            await self.events.emit_raw(ctx, "Warning", "StatusSizeExceeded", message)
        await self._mark_too_large(ctx, size)
        raise _Stop("failed", message, "StatusSizeExceeded")

    async def _mark_too_large(self, ctx: PassContext, size: int) -> None:
        """Add ``StatusSizeExceeded=True`` to the stored status's conditions (best effort)."""
        body = too_large_patch(ctx.raw, size, self.status_size_limit, datetime.now(UTC))
        try:
            obj = await self.client.patch(
                INFERENCE_REPLICAS, ctx.name, body, ctx.namespace, subresource="status"
            )
        except ApiError as exc:
            _log(ctx).warning("status.too_large_condition_failed", error=str(exc))
            return
        self._wrote_replica(ctx, obj)

    async def set_finalizer(self, action: SetFinalizer, ctx: PassContext) -> None:
        """Add or remove our finalizer, with the resourceVersion the pass saw."""
        meta = ctx.raw.get("metadata") or {}
        current = list(meta.get("finalizers") or [])
        if action.present == (action.finalizer in current):
            return
        wanted = ([*current, action.finalizer] if action.present
                  else [f for f in current if f != action.finalizer])
        patch = {"metadata": {"resourceVersion": meta.get("resourceVersion"),
                              "finalizers": wanted}}
        try:
            obj = await self.client.patch(INFERENCE_REPLICAS, ctx.name, patch, ctx.namespace)
        except ApiError as exc:
            if exc.not_found and not action.present:
                return  # already gone
            raise self._replica_conflict(exc, "finalizer update") from None
        self._wrote_replica(ctx, obj)
        _log(ctx).info("finalizer.set" if action.present else "finalizer.removed",
                            finalizer=action.finalizer)

    async def remove_annotations(self, action: RemoveAnnotations, ctx: PassContext) -> None:
        """Drop the annotations a pass consumed (a migration request, a verb)."""
        present = (ctx.raw.get("metadata") or {}).get("annotations") or {}
        keys = [k for k in action.keys if k in present]
        if not keys:
            return
        patch = {"metadata": {"annotations": dict.fromkeys(keys)}}
        try:
            obj = await self.client.patch(INFERENCE_REPLICAS, ctx.name, patch, ctx.namespace)
        except ApiError as exc:
            raise self._replica_conflict(exc, "annotation removal") from None
        self._wrote_replica(ctx, obj)
