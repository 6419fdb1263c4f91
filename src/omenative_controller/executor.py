"""The executor: turn a Plan's actions into API calls, in order, stopping at the first failure.

Rules (design.md, "The shell"):

* Creates: 409 AlreadyExists is success (names are deterministic). 422 Invalid and 403
  ``exceeded quota`` become a :class:`CreateError` that the *next* snapshot carries (kept
  per InferenceReplica with a time; dropped once consumed or after a minute), and end the
  pass.
* Deletes carry a UID precondition; 404 NotFound and 409 (the precondition failed: the name
  now belongs to a newer object) are success. ``force`` is ``gracePeriodSeconds: 0``.
* ``UpdateStatus`` PUTs the status subresource with the observed resourceVersion; a 409
  means the view was stale: the pass ends and the key is planned again at once. A body
  over ``STATUS_SIZE_LIMIT`` (etcd's default request limit) is never sent: the pass ends
  and a Warning Event ``StatusSizeExceeded`` names the size and the limit. Writes to
  the InferenceReplica itself (finalizer, annotations) carry the resourceVersion the pass
  last saw, and their answers are written through to the cache.
* ``SetServingGate`` and ``PatchPodImages`` are strategic merge patches that name the pod's
  UID (a pod re-created under the same name is not touched; the server refuses the patch).
* Before every call the write guard (the leader elector's ``may_act``) must agree.
* Kueue pod groups end with their Workload: after a pass, a Kueue-managed pod group of the
  InferenceReplica whose cached pods are all terminating gets its Workload deleted (see
  :meth:`Executor.end_kueue_groups`). Kueue keeps its finalizer on a group's deleted pods
  until that Workload goes (KEP-976), so without this a retired Instance never disappears.

Events are sent separately by :class:`ReplicaEvents` through the shell's one
``kube.events.EventRecorder`` (best effort, aggregated).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog
from attrs import define, field

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.events import EventRecorder
from omenative_controller.kube.resources import (
    CONFIG_MAPS,
    CONTROLLER_REVISIONS,
    INFERENCE_REPLICAS,
    PODS,
    Resource,
    pod_groups,
    resource_for,
)
from omenative_controller.observability import Metrics
from omenative_core.labels import (
    LABEL_INSTANCE_INDEX,
    LABEL_KUEUE_POD_GROUP,
    LABEL_MANAGED_BY,
    MANAGED_BY,
    SERVING_GATE,
)
from omenative_core.model.observed import CreateError, PodView
from omenative_core.model.plan import (
    Action,
    CreateObject,
    CreatePod,
    CreatePodGroup,
    CreateRevision,
    DeleteObject,
    DeletePod,
    DeletePodGroup,
    DeleteRevision,
    Event,
    PatchPodImages,
    Plan,
    RecordAudit,
    RemoveAnnotations,
    SetFinalizer,
    SetServingGate,
    UpdateStatus,
)
from omenative_core.model.timefmt import format_time
from omenative_core.status.budget import too_large_patch
from omenative_core.status.wire import status_to_json

__all__ = [
    "AUDIT_KEY",
    "AUDIT_LIMIT",
    "KUEUE_MANAGED_LABEL",
    "KUEUE_WORKLOADS",
    "STATUS_SIZE_LIMIT",
    "ApplyResult",
    "CreateErrorStore",
    "Executor",
    "PassContext",
    "ReplicaEvents",
]

log = structlog.get_logger("omenative.executor")

AUDIT_KEY = "history.json"
"""The audit ConfigMap's key."""
AUDIT_LIMIT = 200
"""Audit entries kept."""
CREATE_ERROR_TTL = 60.0
"""Seconds a recorded create error waits for the next snapshot."""
STATUS_SIZE_LIMIT = 1536 * 1024
"""Largest status write sent, in bytes of its JSON body: etcd's default request limit.

A larger write would be refused by etcd (or the API server) after the cost of sending it;
the manager says why instead, once per pass, and writes nothing.
"""
KUEUE_MANAGED_LABEL = "kueue.x-k8s.io/managed"
"""Kueue's webhook sets this label to ``"true"`` on the pods it manages (and gates)."""
KUEUE_WORKLOADS = (
    Resource("kueue.x-k8s.io", "v1beta2", "workloads", "Workload"),
    Resource("kueue.x-k8s.io", "v1beta1", "workloads", "Workload"),
)
"""Kueue's Workload, newest API version first (v1beta1 for Kueue before v0.15)."""


class _Stop(Exception):
    """End the pass: ``outcome`` says how (conflict, create_error, failed, not_leader)."""

    def __init__(self, outcome: str, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.outcome = outcome
        self.reason = reason or outcome


@define
class CreateErrorStore:
    """Create refusals per InferenceReplica key, waiting to be read by the next snapshot."""

    ttl: float = CREATE_ERROR_TTL
    clock: Callable[[], float] = time.monotonic
    _errors: dict[str, list[tuple[float, CreateError]]] = field(factory=dict)

    def record(self, key: str, error: CreateError) -> None:
        """Keep ``error`` for ``key``."""
        self._errors.setdefault(key, []).append((self.clock(), error))

    def take(self, key: str) -> tuple[CreateError, ...]:
        """The errors of ``key`` younger than the TTL; each is handed out once."""
        items = self._errors.pop(key, [])
        now = self.clock()
        return tuple(e for t, e in items if now - t <= self.ttl)

    def drop(self, key: str) -> None:
        """Forget ``key`` (the object is gone)."""
        self._errors.pop(key, None)

    def __len__(self) -> int:
        return sum(len(v) for v in self._errors.values())


@define
class PassContext:
    """What one pass knows about its InferenceReplica; ``raw`` follows our own writes."""

    key: str
    namespace: str
    name: str
    raw: JSON
    prefix: str = ""
    log: Any = None

    @property
    def uid(self) -> str:
        """The InferenceReplica's UID."""
        return str((self.raw.get("metadata") or {}).get("uid") or "")

    @property
    def resource_version(self) -> str:
        """The resourceVersion the pass last saw (or wrote)."""
        return str((self.raw.get("metadata") or {}).get("resourceVersion") or "")


def _service_owner(raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The InferenceService that controls this InferenceReplica (a projected replica)."""
    for ref in (raw.get("metadata") or {}).get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") and \
                ref.get("kind") == "InferenceService" and ref.get("name") and ref.get("uid"):
            return ref
    return None


@define
class ApplyResult:
    """How far a plan got: ``outcome`` is ok, conflict, create_error, failed, not_leader
    or namespace_gone (the namespace is deleted or being deleted: nothing more to do)."""

    applied: int = 0
    outcome: str = "ok"
    message: str = ""
    failed_kind: str = ""

    @property
    def ok(self) -> bool:
        """Every action was applied."""
        return self.outcome == "ok"


def _instance_of(prefix: str, name: str, body: Mapping[str, Any] | None = None) -> int | None:
    """The Instance index of an owned object, from its labels or ``{prefix}-{index}-...``."""
    if body is not None:
        raw = ((body.get("metadata") or {}).get("labels") or {}).get(LABEL_INSTANCE_INDEX)
        if isinstance(raw, str) and raw.isdigit():
            return int(raw)
    if prefix and name.startswith(prefix + "-"):
        head = name[len(prefix) + 1 :].split("-", 1)[0]
        if head.isdigit():
            return int(head)
    return None


def _instance_kw(index: int | None) -> dict[str, int]:
    """``{"instance": index}`` for log binding, or nothing when unknown."""
    return {} if index is None else {"instance": index}


def _create_resource(
    action: CreatePod | CreatePodGroup | CreateRevision | CreateObject,
) -> Resource:
    """The API resource a create action writes to."""
    if isinstance(action, CreatePod):
        return PODS
    if isinstance(action, CreatePodGroup):
        version = str(action.body.get("apiVersion", "")).rpartition("/")[2] or "v1alpha1"
        return pod_groups(version)
    if isinstance(action, CreateRevision):
        return CONTROLLER_REVISIONS
    return resource_for(str(action.body.get("apiVersion", "")), str(action.body.get("kind", "")))


def _delete_resource(action: DeletePodGroup | DeleteRevision | DeleteObject) -> Resource:
    """The API resource a delete action removes from (pods have their own path)."""
    if isinstance(action, DeletePodGroup):
        return pod_groups()
    if isinstance(action, DeleteRevision):
        return CONTROLLER_REVISIONS
    return resource_for(action.api_version, action.object_kind)


@define
class Executor:
    """Applies plans through a :class:`KubeClient`."""

    client: KubeClient
    create_errors: CreateErrorStore
    metrics: Metrics | None = None
    guard: Callable[[], bool] = lambda: True
    encoding: Callable[[], tuple[str, int]] = lambda: ("ColumnarV2", 20000)
    on_replica_written: Callable[[JSON], None] | None = None
    #: write-through of every pod we created or patched into the pod cache, so the next
    #: pass plans from what we wrote (no second gate patch for a watch event still in flight)
    on_pod_written: Callable[[JSON], None] | None = None
    #: where Warning Events about refused writes (an oversized status) go
    events: ReplicaEvents | None = None
    status_size_limit: int = STATUS_SIZE_LIMIT
    #: the cached pods of one InferenceReplica key; None turns the Kueue cleanup off
    pods_of: Callable[[str], Iterable[PodView]] | None = None
    #: per InferenceReplica key: Kueue group -> the pod UIDs whose Workload was ended
    _ended_groups: dict[str, dict[str, frozenset[str]]] = field(factory=dict)

    async def apply(self, plan: Plan, ctx: PassContext) -> ApplyResult:
        """Apply ``plan.actions`` in order; stop at the first failure."""
        result = ApplyResult()
        for action in plan.actions:
            if not self.guard():
                result.outcome = "not_leader"
                result.message = "not the leader (or the lease is not renewed): no writes"
                result.failed_kind = action.kind
                return result
            try:
                await self._apply_one(action, ctx)
            except _Stop as stop:
                self._count_failure(action.kind, stop.reason)
                result.outcome = stop.outcome
                result.message = str(stop)
                result.failed_kind = action.kind
                return result
            except ApiError as exc:
                self._count_failure(action.kind, exc.reason)
                result.outcome = "namespace_gone" if exc.namespace_gone else "failed"
                result.message = f"{action.kind}: {exc}"
                result.failed_kind = action.kind
                return result
            result.applied += 1
            if self.metrics is not None:
                self.metrics.actions.labels(action.kind).inc()
        await self.end_kueue_groups(ctx)
        return result

    # ------------------------------------------------------------------ Kueue pod groups

    async def end_kueue_groups(self, ctx: PassContext) -> None:
        """Delete the Kueue Workload of each retired pod group of this InferenceReplica.

        A group is retired when every cached pod carrying its
        ``kueue.x-k8s.io/pod-group-name`` (and Kueue's ``managed`` label) is terminating:
        omenative deleted the attempt (restart into a new incarnation, scale-down, the old
        Instance of an update, teardown). Kueue holds those pods with its finalizer until a
        replacement joins the group, the group finishes (a serving group never does) or
        the Workload is deleted; only the last applies, so omenative deletes it (Kueue's
        documented way to end a pod group, KEP-976) and Kueue then releases the pods.
        Level-triggered: it looks at the cache on every pass, so a manager restart between
        the pod deletes and this step loses nothing. Failures are logged and retried on a
        later pass; they never fail the plan.
        """
        if self.pods_of is None:
            return
        groups: dict[str, list[PodView]] = {}
        for pod in self.pods_of(ctx.key):
            group = pod.labels.get(LABEL_KUEUE_POD_GROUP)
            if group and pod.labels.get(KUEUE_MANAGED_LABEL) == "true":
                groups.setdefault(group, []).append(pod)
        done = self._ended_groups.get(ctx.key, {})
        kept: dict[str, frozenset[str]] = {}
        for group, pods in sorted(groups.items()):
            if any(p.deletion_timestamp is None for p in pods):
                continue  # a live pod: the group still serves (or a pod is being replaced)
            uids = frozenset(p.uid for p in pods)
            if done.get(group) == uids:
                kept[group] = uids
                continue
            if not self.guard():
                break
            try:
                await self._delete_workload(ctx, group, uids)
            except ApiError as exc:
                self._count_failure("DeleteKueueWorkload", exc.reason)
                self._log(ctx).warning("kueue.workload_delete_failed", group=group,
                                       reason=exc.reason, error=exc.message)
                continue
            kept[group] = uids
        if kept:
            self._ended_groups[ctx.key] = kept
        else:
            self._ended_groups.pop(ctx.key, None)

    async def _delete_workload(self, ctx: PassContext, group: str, pod_uids: frozenset[str]
                               ) -> None:
        """Delete the Workload Kueue made for ``group``, if one of ``pod_uids`` owns it.

        Kueue names a pod group's Workload after the group and makes every pod of the group
        an owner; the owner check keeps omenative off a Workload of the same name that is
        not this group's. The delete carries the Workload's UID as a precondition.
        """
        lg = self._log(ctx)
        for res in KUEUE_WORKLOADS:
            try:
                workload = await self.client.get(res, group, ctx.namespace)
            except ApiError as exc:
                if exc.not_found:
                    continue  # not at this version (or already gone)
                raise
            meta = workload.get("metadata") or {}
            owners = {str(r.get("uid")) for r in meta.get("ownerReferences") or ()
                      if isinstance(r, Mapping) and r.get("kind") == "Pod"}
            if not owners & pod_uids:
                lg.warning("kueue.workload_not_owned", group=group,
                           message="a Workload of this name is not owned by the group's pods")
                return
            if meta.get("deletionTimestamp"):
                return
            try:
                await self.client.delete(res, group, ctx.namespace, uid=str(meta.get("uid")))
            except ApiError as exc:
                if exc.not_found or exc.status == 409:
                    return
                raise
            if self.metrics is not None:
                self.metrics.actions.labels("DeleteKueueWorkload").inc()
            lg.info("kueue.workload_deleted", group=group, pods=len(pod_uids))
            return
        lg.debug("kueue.workload_gone", group=group)

    def _count_failure(self, kind: str, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.action_failures.labels(kind, reason).inc()

    def _log(self, ctx: PassContext) -> Any:
        return ctx.log if ctx.log is not None else log

    async def _apply_one(self, action: Action, ctx: PassContext) -> None:
        if isinstance(action, CreatePod | CreatePodGroup | CreateRevision | CreateObject):
            await self._create(_create_resource(action), action.body, ctx, action.kind)
        elif isinstance(action, DeletePod):
            await self._delete(PODS, action.name, action.uid, ctx, action.kind,
                               grace=0 if action.force else None, reason=action.reason)
        elif isinstance(action, DeletePodGroup | DeleteRevision | DeleteObject):
            await self._delete(_delete_resource(action), action.name,
                               "" if isinstance(action, DeleteObject) else action.uid,
                               ctx, action.kind)
        elif isinstance(action, UpdateStatus):
            await self._update_status(action, ctx)
        elif isinstance(action, SetServingGate):
            await self._set_gate(action, ctx)
        elif isinstance(action, PatchPodImages):
            await self._patch_images(action, ctx)
        elif isinstance(action, SetFinalizer):
            await self._set_finalizer(action, ctx)
        elif isinstance(action, RemoveAnnotations):
            await self._remove_annotations(action, ctx)
        elif isinstance(action, RecordAudit):
            await self._record_audit(action, ctx)
        else:  # pragma: no cover - the Action union is closed
            raise _Stop("failed", f"unknown action {action!r}")

    # ------------------------------------------------------------------ the replica

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

    async def _update_status(self, action: UpdateStatus, ctx: PassContext) -> None:
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
        await self._check_status_size(body, ctx)
        try:
            obj = await self.client.replace(
                INFERENCE_REPLICAS, ctx.name, body, ctx.namespace, subresource="status"
            )
        except ApiError as exc:
            raise self._replica_conflict(exc, "status update") from None
        self._wrote_replica(ctx, obj)

    async def _check_status_size(self, body: JSON, ctx: PassContext) -> None:
        """End the pass, with a Warning Event, when the status body is over the limit."""
        size = len(json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode())
        if size <= self.status_size_limit:
            return
        rows = len((body.get("status") or {}).get("instanceStatuses") or ())
        message = (
            f"status update not sent: its body is {size} bytes, over the "
            f"{self.status_size_limit}-byte limit (etcd's default request size, 1.5 MiB)"
            + (f"; {rows} Instance rows are written DenseV1" if rows else "")
        )
        self._log(ctx).warning("status.too_large", size=size, limit=self.status_size_limit)
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
            self._log(ctx).warning("status.too_large_condition_failed", error=str(exc))
            return
        self._wrote_replica(ctx, obj)

    async def _set_finalizer(self, action: SetFinalizer, ctx: PassContext) -> None:
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
        self._log(ctx).info("finalizer.set" if action.present else "finalizer.removed",
                            finalizer=action.finalizer)

    async def _remove_annotations(self, action: RemoveAnnotations, ctx: PassContext) -> None:
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

    # ------------------------------------------------------------------ owned objects

    def _owned_body(self, body: Mapping[str, Any], ctx: PassContext) -> dict[str, Any]:
        out = dict(body)
        meta = dict(out.get("metadata") or {})
        meta.setdefault("namespace", ctx.namespace)
        if not meta.get("ownerReferences") and ctx.uid:
            meta["ownerReferences"] = [{
                "apiVersion": INFERENCE_REPLICAS.api_version,
                "kind": INFERENCE_REPLICAS.kind,
                "name": ctx.name,
                "uid": ctx.uid,
                "controller": True,
                "blockOwnerDeletion": True,
            }]
        out["metadata"] = meta
        return out

    async def _create(
        self, res: Resource, body: Mapping[str, Any], ctx: PassContext, kind: str
    ) -> None:
        obj = self._owned_body(body, ctx)
        name = str(obj["metadata"].get("name", ""))
        lg = self._log(ctx).bind(**_instance_kw(_instance_of(ctx.prefix, name, obj)))
        try:
            created = await self.client.create(res, obj, str(obj["metadata"]["namespace"]))
        except ApiError as exc:
            if exc.already_exists:
                lg.debug("create.exists", kind=kind, name=name)
                return
            if exc.invalid or exc.quota_exceeded:
                reason = "QuotaExceeded" if exc.quota_exceeded else "Invalid"
                self.create_errors.record(ctx.key, CreateError(
                    name=name, reason=reason, message=exc.message, at=datetime.now(UTC)))
                lg.warning("create.refused", kind=kind, name=name, reason=reason,
                           error=exc.message)
                raise _Stop("create_error", f"create {name}: {reason}: {exc.message}",
                            reason) from None
            raise
        if res == PODS and self.on_pod_written is not None and created:
            self.on_pod_written(created)
        lg.info("created", kind=kind, name=name)

    async def _delete(
        self, res: Resource, name: str, uid: str, ctx: PassContext, kind: str,
        *, grace: int | None = None, reason: str = "",
    ) -> None:
        lg = self._log(ctx).bind(**_instance_kw(_instance_of(ctx.prefix, name)))
        try:
            await self.client.delete(res, name, ctx.namespace, uid=uid or None,
                                     grace_period_seconds=grace)
        except ApiError as exc:
            if exc.not_found:
                lg.debug("delete.gone", kind=kind, name=name)
                return
            if exc.status == 409:
                lg.info("delete.precondition_failed", kind=kind, name=name, uid=uid)
                return
            raise
        lg.info("deleted", kind=kind, name=name, uid=uid, force=grace == 0,
                reason=reason or None)

    async def _patch_pod(
        self, name: str, patch: JSON, ctx: PassContext, kind: str, *, subresource: str | None
    ) -> None:
        try:
            obj = await self.client.patch(PODS, name, patch, ctx.namespace,
                                          patch_type="strategic", subresource=subresource)
        except ApiError as exc:
            if exc.not_found or exc.status == 409 or (
                exc.invalid and "uid" in exc.message.lower()
            ):
                raise _Stop("conflict", f"{kind} {name}: {exc.reason} (pod changed)",
                            exc.reason) from None
            raise
        if self.on_pod_written is not None and obj:
            self.on_pod_written(obj)

    async def _set_gate(self, action: SetServingGate, ctx: PassContext) -> None:
        value = "True" if action.value else "False"
        patch = {
            "metadata": {"uid": action.uid},
            "status": {"conditions": [{
                "type": SERVING_GATE,
                "status": value,
                "reason": "InstanceServing" if action.value else "InstanceDraining",
                "message": ("all pods of the Instance are ready" if action.value
                            else "the Instance is leaving rotation"),
                "lastTransitionTime": format_time(datetime.now(UTC)),
            }]},
        }
        await self._patch_pod(action.name, patch, ctx, action.kind, subresource="status")
        self._log(ctx).bind(**_instance_kw(_instance_of(ctx.prefix, action.name))).info(
            "gate.set", pod=action.name, value=value)

    async def _patch_images(self, action: PatchPodImages, ctx: PassContext) -> None:
        meta: JSON = {"uid": action.uid}
        if action.labels:
            meta["labels"] = dict(action.labels)
        patch = {
            "metadata": meta,
            "spec": {"containers": [{"name": n, "image": i}
                                    for n, i in sorted(action.images.items())]},
        }
        await self._patch_pod(action.name, patch, ctx, action.kind, subresource=None)
        self._log(ctx).bind(**_instance_kw(_instance_of(ctx.prefix, action.name))).info(
            "pod.images_patched", pod=action.name, images=dict(action.images))

    # ------------------------------------------------------------------ audit

    async def _record_audit(self, action: RecordAudit, ctx: PassContext) -> None:
        for _ in range(3):
            try:
                cm = await self.client.get(CONFIG_MAPS, action.config_map, ctx.namespace)
            except ApiError as exc:
                if not exc.not_found:
                    raise
                body = {
                    "apiVersion": "v1",
                    "kind": "ConfigMap",
                    "metadata": {"name": action.config_map, "namespace": ctx.namespace,
                                 "labels": {LABEL_MANAGED_BY: MANAGED_BY},
                                 "ownerReferences": [_audit_owner(ctx)]},
                    "data": {AUDIT_KEY: _audit_text([], action.entries)},
                }
                try:
                    await self.client.create(CONFIG_MAPS, body, ctx.namespace)
                    return
                except ApiError as exc2:
                    if exc2.already_exists:
                        continue
                    raise
            data = cm.get("data") or {}
            try:
                old = json.loads(data.get(AUDIT_KEY) or "{}").get("entries") or []
            except (ValueError, AttributeError):
                self._log(ctx).warning("audit.unreadable", config_map=action.config_map)
                old = []
            text = _audit_text(old, action.entries)
            meta = dict(cm.get("metadata") or {})
            owner = _audit_owner(ctx)
            refs = list(meta.get("ownerReferences") or ())
            owned = any(isinstance(r, Mapping) and r.get("uid") == owner["uid"] for r in refs)
            if text == data.get(AUDIT_KEY) and owned:
                return
            if not owned:  # written before the audit map had an owner
                meta["ownerReferences"] = [*refs, owner]
            meta.pop("managedFields", None)
            cm = {**cm, "metadata": meta, "data": {**data, AUDIT_KEY: text}}
            try:
                await self.client.replace(CONFIG_MAPS, action.config_map, cm, ctx.namespace)
                return
            except ApiError as exc:
                if exc.conflict:
                    continue
                raise
        raise _Stop("conflict", f"audit {action.config_map}: kept conflicting")


def _audit_owner(ctx: PassContext) -> dict[str, Any]:
    """The audit ConfigMap belongs to the InferenceService (or the standalone replica) it
    records, so it goes with it instead of lingering for a later one of the same name."""
    owner = _service_owner(ctx.raw)
    if owner is not None:
        return {"apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"),
                "name": owner.get("name"), "uid": owner.get("uid")}
    return {"apiVersion": INFERENCE_REPLICAS.api_version, "kind": INFERENCE_REPLICAS.kind,
            "name": ctx.name, "uid": ctx.uid}


def _audit_text(old: Sequence[Any], new: Sequence[Mapping[str, Any]]) -> str:
    entries = list(old)
    for entry in new:
        if dict(entry) not in entries:
            entries.append(dict(entry))
    return json.dumps({"entries": entries[-AUDIT_LIMIT:]}, sort_keys=True)


# ---------------------------------------------------------------------------- events


@define
class ReplicaEvents:
    """A plan's Events on its InferenceReplica (and, for a projected one, on the owning
    InferenceService, naming the component's replica), through the one ``EventRecorder``."""

    recorder: EventRecorder
    metrics: Metrics | None = None

    async def emit(self, ctx: PassContext, events: Sequence[Event]) -> None:
        """Send ``events`` on the InferenceReplica of ``ctx``."""
        for event in events:
            if not self.recorder.guard():
                return
            await self._emit_one(ctx, event)

    async def emit_raw(self, ctx: PassContext, type_: str, reason: str, message: str) -> None:
        """Send one Event that is not from a plan (validation and decode errors)."""
        await self.emit(ctx, [Event(type=type_, reason=reason, message=message)])

    async def _emit_one(self, ctx: PassContext, event: Event) -> None:
        lg = ctx.log if ctx.log is not None else log
        lg = lg.bind(**_instance_kw(event.instance))
        if self.metrics is not None:
            self.metrics.events.labels(event.type, event.reason).inc()
        lg.info("event", type=event.type, reason=event.reason, message=event.message)
        await self.recorder.record({
            "apiVersion": INFERENCE_REPLICAS.api_version, "kind": INFERENCE_REPLICAS.kind,
            "name": ctx.name, "namespace": ctx.namespace, "uid": ctx.uid,
        }, event.type, event.reason, event.message, lg=lg)
        owner = _service_owner(ctx.raw)
        if owner is not None:  # surfaced on the InferenceService, naming the component's IR
            await self.recorder.record({
                "apiVersion": owner.get("apiVersion"), "kind": owner.get("kind"),
                "name": owner.get("name"), "namespace": ctx.namespace, "uid": owner.get("uid"),
            }, event.type, event.reason, f"{ctx.name}: {event.message}", lg=lg)
