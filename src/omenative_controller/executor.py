"""The executor: turn a Plan's actions into API calls, the status first, stopping after a failure.

Order and concurrency: the plan's ``UpdateStatus`` goes first (it records what the rest
does), then the remaining actions in plan order, cut into runs (:func:`action_runs`): a
prelude (finalizer, revision, headless Service, Workload, a scheduler-plugins PodGroup),
Kubernetes' own PodGroups (after the Workload they name), pod creates and serving-gate
patches (never the same pod), image patches or deletes is sent at once, through at most
``max_inflight`` lanes (a run of thousands never makes thousands of tasks in one
event-loop step); any other action is a run of its own. A run with a failure ends the pass
after its members in flight answered. Every action holds a slot of one manager-wide budget
(``max_inflight``, ``--max-inflight``) while it talks to the API server, so 64 workers
cannot queue hundreds of writes ahead of a Lease renewal in the client's token bucket;
status writes and gates going True get the next free slot first (``slots.py``).
A progress-only status may be held back (``coalesce.py``). A pass sends at most
``creates_per_pass`` pod creates (whole gangs; the next pass is queued at once), or the
core's ``scale_up_batch``; with ``pipeline_depth`` set, a pass that leaves creates for the
next sends its last run of creates behind itself (``create_pipeline.py``).

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
  last saw, and their answers are written through to the cache (``replica_writes.py``).
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

from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import structlog
from attrs import define, field

from omenative_controller.action_requests import (
    create_resource,
    delete_resource,
    gate_patch,
    images_patch,
)
from omenative_controller.audit import AUDIT_KEY, AUDIT_LIMIT, record_audit
from omenative_controller.coalesce import StatusCoalescer, adds_rows
from omenative_controller.create_errors import CreateErrorStore
from omenative_controller.create_pipeline import CreatePipeline
from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.resources import INFERENCE_REPLICAS, PODS, Resource
from omenative_controller.kueue_cleanup import KUEUE_MANAGED_LABEL, KUEUE_WORKLOADS, KueueGroups
from omenative_controller.observability import Metrics
from omenative_controller.pass_context import (
    ApplyResult,
    PassContext,
    PassStop,
    instance_kw,
    instance_of,
)
from omenative_controller.replica_events import ReplicaEvents
from omenative_controller.replica_writes import (
    STATUS_SIZE_LIMIT,
    STATUS_THREAD_ROWS,
    ReplicaWriter,
)
from omenative_controller.runs import (
    action_runs,
    bound_creates,
    creates_behind,
    position,
    status_first,
)
from omenative_controller.sent_deletes import SentDeletes
from omenative_controller.slots import Slots, in_lanes
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
    PatchPodImages,
    Plan,
    RecordAudit,
    RemoveAnnotations,
    SetFinalizer,
    SetServingGate,
    UpdateStatus,
)

__all__ = [
    "AUDIT_KEY",
    "AUDIT_LIMIT",
    "DEFAULT_MAX_INFLIGHT",
    "KUEUE_MANAGED_LABEL",
    "KUEUE_WORKLOADS",
    "STATUS_SIZE_LIMIT",
    "STATUS_THREAD_ROWS",
    "ApplyResult",
    "CreateErrorStore",
    "Executor",
    "PassContext",
    "ReplicaEvents",
    "action_runs",
]

log = structlog.get_logger("omenative.executor")

DEFAULT_MAX_INFLIGHT = 32
"""Plan actions in flight at once, over every worker (``--max-inflight``).

Every request waits for a token of the client's one bucket, in arrival order; the budget
bounds how many writes can queue there ahead of a Lease renewal (32 at 100 QPS: 0.32 s).
"""
_Stop = PassStop


@define
class Executor:
    """Applies plans through a :class:`KubeClient`: the status first, then runs of
    independent actions at once, all within one manager-wide in-flight budget."""

    client: KubeClient
    create_errors: CreateErrorStore
    metrics: Metrics | None = None
    guard: Callable[[], bool] = lambda: True
    encoding: Callable[[], tuple[str, int]] = lambda: ("ColumnarV2", 20000)
    on_replica_written: Callable[[JSON], None] | None = None
    #: write-through of every pod we created or patched into the pod cache, so the next
    #: pass plans from what we wrote (no second gate patch for a watch event still in flight)
    on_pod_written: Callable[[JSON], None] | None = None
    #: write-through of other objects we created (revisions, the headless Service), so a
    #: pass before their watch event does not plan them again (a 409 each)
    on_created: Callable[[Resource, JSON], None] | None = None
    #: where Warning Events about refused writes (an oversized status) go
    events: ReplicaEvents | None = None
    status_size_limit: int = STATUS_SIZE_LIMIT
    #: the cached pods of one InferenceReplica key; None turns the Kueue cleanup off
    pods_of: Callable[[str], Iterable[PodView]] | None = None
    #: actions in flight at once over every pass (and so every worker)
    max_inflight: int = DEFAULT_MAX_INFLIGHT
    #: holds progress-only status writes (None: every status is written when planned)
    coalescer: StatusCoalescer | None = None
    #: pod creates one pass sends at most, whole gangs (0: all). A pass holds its
    #: replica's key until every action answered, so without a bound a big replica's ready
    #: gangs get no serving gate until its last create; the manager sets it to
    #: ``max_inflight`` (one round of the budget) and queues the next pass at once
    creates_per_pass: int = DEFAULT_MAX_INFLIGHT
    #: batches of pod creates one replica may have out behind its passes (0: none, every
    #: create is answered within its pass); needs ``on_pod_expected`` and
    #: ``on_pod_unexpected`` (create_pipeline.py)
    pipeline_depth: int = 0
    #: puts a pod about to be created into the pod cache (the view put, or None)
    on_pod_expected: Callable[[JSON], object | None] | None = None
    #: takes an expected pod out of the pod cache again, if it is still that view
    on_pod_unexpected: Callable[[JSON, object], None] | None = None
    #: a create sent behind its pass failed: the replica key (queue it again, rate limited)
    on_creates_failed: Callable[[str], None] | None = None
    #: a replica whose creates waited for its batches has a place again: queue the key
    on_creates_free: Callable[[str], None] | None = None
    #: pod deletes the API server accepted, so a pass planned before the watch shows the
    #: pod terminating does not delete the same UID again (sent_deletes.py)
    sent_deletes: SentDeletes = field(factory=SentDeletes)
    _budget: Slots | None = None
    _replica: ReplicaWriter = field(init=False)
    _kueue: KueueGroups | None = None
    _pipeline: CreatePipeline | None = None

    def __attrs_post_init__(self) -> None:
        self._replica = ReplicaWriter(
            self.client, self.metrics, self.encoding, self.on_replica_written, self.events,
            self.status_size_limit, self.pods_of)
        self._kueue = KueueGroups(self.client, self.pods_of, self.guard, self.metrics)
        if (self.pipeline_depth > 0 and self.on_pod_expected is not None
                and self.on_pod_unexpected is not None):
            self._pipeline = CreatePipeline(
                self._apply_counted, self.on_pod_expected, self.on_pod_unexpected,
                guard=self.guard, on_failed=self._pipeline_failed, on_free=self.on_creates_free,
                depth=self.pipeline_depth, lanes=max(1, self.max_inflight))

    @property
    def pipeline(self) -> CreatePipeline | None:
        """The creates sent behind their passes (None: pipelining is off)."""
        return self._pipeline

    async def apply(self, plan: Plan, ctx: PassContext) -> ApplyResult:
        """Apply ``plan.actions``: the status first, then run by run; stop after the first
        run with a failure (``failed_index`` is the first failed action's position)."""
        result = ApplyResult()
        actions = status_first(plan.actions)
        if self.metrics is not None:  # Instances by phase, rollout progress, scale-down
            self.metrics.planned(ctx, plan, changed=bool(actions) and
                                 type(actions[0]) is UpdateStatus)
        batch = plan.scale_up_batch  # the core's, under scaleUpPodBatchSize: no 2nd bound
        actions, result.deferred_creates = ((actions, batch.deferred_pods) if batch else
                                            bound_creates(actions, self.creates_per_pass))
        full = self._pipeline is not None and self._pipeline.full(ctx.key)
        held = self._hold_status(plan, ctx, actions,
                                 must_write=(result.deferred_creates > 0 or full)
                                 and adds_rows(ctx.observed_status, plan.status))
        if held is not None:
            result.status_due = held
            actions = tuple(a for a in actions if not isinstance(a, UpdateStatus))
        # only a pass that leaves creates for the next one sends its own behind: a replica
        # whose bring-up fits one pass gains nothing by it (run M: 250 replicas of one
        # gang, their passes ended early and flooded the budget with status writes)
        behind_ok = self._pipeline is not None and (result.deferred_creates > 0 or full)
        runs, behind = (creates_behind(action_runs(actions)) if behind_ok
                        else (action_runs(actions), ()))
        for _, run in runs:
            if not self.guard():
                result.outcome = "not_leader"
                result.message = "not the leader (or the lease is not renewed): no writes"
                result.failed_kind = run[0].kind
                result.failed_index = position(plan.actions, run[0])
                return result
            outcomes = await self._apply_run(run, ctx)
            result.applied += sum(1 for e in outcomes.values() if e is None)
            failed = min((i for i, e in outcomes.items() if e is not None), default=None)
            if failed is not None:  # the first failure in plan order names the pass's end
                error = outcomes[failed]
                assert error is not None
                self._fail(result, run[failed], error)
                result.failed_index = position(plan.actions, run[failed])
            if not result.ok:
                return result
        if behind:
            assert self._pipeline is not None
            result.behind, result.creates_waiting = self._pipeline.offer(behind, ctx)
            result.deferred_creates += len(behind) - result.behind
        await self.end_kueue_groups(ctx)
        return result

    def _pipeline_failed(self, key: str, action: CreatePod, error: Exception) -> None:
        """A create sent behind its pass was refused: count it, say so, queue the key."""
        reason = getattr(error, "reason", "") or type(error).__name__
        self._count_failure(action.kind, str(reason))
        log.info("creates.stopped", key=key, pod=action.name, error=str(error))
        if self.on_creates_failed is not None:
            self.on_creates_failed(key)

    async def _apply_run(self, run: Sequence[Action], ctx: PassContext
                         ) -> dict[int, Exception | None]:
        """Send the members of one run through at most ``max_inflight`` lanes
        (``slots.in_lanes``: a run of thousands costs a bounded number of tasks); the
        outcome of each member sent, by position in the run. After a failure no lane
        takes another member (the pass ends once the members in flight answered; the next
        pass plans the rest again).
        """
        outcomes: dict[int, Exception | None] = {}

        async def step(i: int) -> bool:
            outcomes[i] = error = await self._apply_counted(run[i], ctx)
            return error is None

        await in_lanes(len(run), self.max_inflight, step)
        return outcomes

    def _hold_status(self, plan: Plan, ctx: PassContext, actions: Sequence[Action], *,
                     must_write: bool = False) -> float | None:
        """Seconds the plan's status write may wait (None: write it, or there is none).

        ``must_write``: the pass leaves creates of new rows for the next one, so those rows
        must be stored first (a next pass that does not find them would take their
        Instances for never planned, and their PodGroups for orphans).
        """
        if self.coalescer is None:
            return None
        if not any(isinstance(a, UpdateStatus) for a in actions):
            self.coalescer.settled(ctx.key)  # the planned status is the one stored
            return None
        if must_write:
            return None
        wait = self.coalescer.defer(ctx.key, ctx.observed_status, plan.status, actions)
        if wait is not None and self.metrics is not None:
            self.metrics.status_held.inc()
        return wait

    def _fail(self, result: ApplyResult, action: Action, error: Exception) -> None:
        if isinstance(error, PassStop):
            self._count_failure(action.kind, error.reason)
            result.outcome = error.outcome
            result.message = str(error)
        else:
            assert isinstance(error, ApiError)
            self._count_failure(action.kind, error.reason)
            result.outcome = "namespace_gone" if error.namespace_gone else "failed"
            result.message = f"{action.kind}: {error}"
        result.failed_kind = action.kind

    async def _apply_counted(self, action: Action, ctx: PassContext) -> Exception | None:
        """Apply one action within the budget; its refusal (PassStop, ApiError) or None."""
        if self._budget is None:
            self._budget = Slots(self.max_inflight, on_wait=self.metrics.slot_waited
                                 if self.metrics is not None else None,
                                 turns=getattr(self.client, "turns", None))  # fakes: none
        urgent = type(action) is UpdateStatus or (type(action) is SetServingGate
                                                  and action.value)
        async with self._budget.hold(urgent=urgent):
            if self.metrics is not None:
                self.metrics.requests_in_flight.inc()
            try:
                await self._apply_one(action, ctx)
            except (PassStop, ApiError) as exc:
                return exc
            finally:
                if self.metrics is not None:
                    self.metrics.requests_in_flight.dec()
        if isinstance(action, UpdateStatus) and self.coalescer is not None:
            self.coalescer.settled(ctx.key)
        if self.metrics is not None:
            self.metrics.actions.labels(action.kind).inc()
        return None

    async def end_kueue_groups(self, ctx: PassContext) -> None:
        """Delete the Kueue Workload of each retired pod group (see kueue_cleanup.py)."""
        assert self._kueue is not None
        await self._kueue.end(ctx)

    def forget(self, key: str) -> None:
        """The InferenceReplica ``key`` is gone: drop its status gauge and held status."""
        if self.coalescer is not None:
            self.coalescer.settled(key)
        if self.metrics is not None:
            namespace, _, name = key.partition("/")
            self.metrics.forget_status_bytes(namespace, name)

    def _count_failure(self, kind: str, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.action_failures.labels(kind, reason).inc()

    def _log(self, ctx: PassContext) -> Any:
        return ctx.log if ctx.log is not None else log

    async def _apply_one(self, action: Action, ctx: PassContext) -> None:
        if isinstance(action, CreatePod | CreatePodGroup | CreateRevision | CreateObject):
            await self._create(create_resource(action), action.body, ctx, action.kind)
        elif isinstance(action, DeletePod):
            if not action.uid:  # only an expected pod has none: its create is still out
                return
            if self.sent_deletes.already(action.name, action.uid, force=action.force):
                return  # accepted before; the watch has not shown it yet (sent_deletes.py)
            await self._delete(PODS, action.name, action.uid, ctx, action.kind,
                               grace=0 if action.force else None, reason=action.reason)
            self.sent_deletes.accepted(action.name, action.uid, force=action.force)
        elif isinstance(action, DeletePodGroup | DeleteRevision | DeleteObject):
            await self._delete(delete_resource(action), action.name,
                               "" if isinstance(action, DeleteObject) else action.uid,
                               ctx, action.kind)
        elif isinstance(action, UpdateStatus):
            await self._replica.update_status(action, ctx)
        elif isinstance(action, SetServingGate):
            await self._set_gate(action, ctx)
        elif isinstance(action, PatchPodImages):
            await self._patch_images(action, ctx)
        elif isinstance(action, SetFinalizer):
            await self._replica.set_finalizer(action, ctx)
        elif isinstance(action, RemoveAnnotations):
            await self._replica.remove_annotations(action, ctx)
        elif isinstance(action, RecordAudit):
            await record_audit(self.client, action, ctx, self._log(ctx))
        else:  # pragma: no cover - the Action union is closed
            raise _Stop("failed", f"unknown action {action!r}")

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
        lg = self._log(ctx).bind(**instance_kw(instance_of(ctx.prefix, name, obj)))
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
        elif res != PODS and self.on_created is not None and created:
            self.on_created(res, created)
        lg.info("created", kind=kind, name=name)

    async def _delete(
        self, res: Resource, name: str, uid: str, ctx: PassContext, kind: str,
        *, grace: int | None = None, reason: str = "",
    ) -> None:
        lg = self._log(ctx).bind(**instance_kw(instance_of(ctx.prefix, name)))
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
        await self._patch_pod(action.name, gate_patch(action, datetime.now(UTC)), ctx,
                              action.kind, subresource="status")
        self._log(ctx).bind(**instance_kw(instance_of(ctx.prefix, action.name))).info(
            "gate.set", pod=action.name, value="True" if action.value else "False")

    async def _patch_images(self, action: PatchPodImages, ctx: PassContext) -> None:
        await self._patch_pod(action.name, images_patch(action), ctx, action.kind,
                              subresource=None)
        self._log(ctx).bind(**instance_kw(instance_of(ctx.prefix, action.name))).info(
            "pod.images_patched", pod=action.name, images=dict(action.images))

