"""What one reconcile pass carries through the executor: its context, result and stop.

Shared by the executor and its helpers (audit, Events, Kueue cleanup), which each live in
their own module so none of them outgrows a screenful of concepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from attrs import define

from omenative_controller.kube.client import JSON, KubeClient
from omenative_controller.kube.resources import INFERENCE_REPLICAS
from omenative_controller.kube.workqueue import WorkQueue
from omenative_core.conditions import merge_condition_json
from omenative_core.labels import LABEL_INSTANCE_INDEX
from omenative_core.model.plan import Plan, ScaleDownWave

__all__ = ["ApplyResult", "PassContext", "PassStop", "instance_kw", "instance_of", "log_pass",
           "pass_kind", "requeue", "scale_down_wave_fields", "service_owner", "write_rejection"]


class PassStop(Exception):
    """End the pass: ``outcome`` says how (conflict, create_error, failed, not_leader)."""

    def __init__(self, outcome: str, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.outcome = outcome
        self.reason = reason or outcome


@define
class PassContext:
    """What one pass knows about its InferenceReplica; ``raw`` follows our own writes."""

    key: str
    namespace: str
    name: str
    raw: Mapping[str, Any]
    prefix: str = ""
    log: Any = None
    #: the decoded status the pass planned from (InferenceReplicaStatus; None: never written)
    observed_status: Any = None

    @property
    def uid(self) -> str:
        """The InferenceReplica's UID."""
        return str((self.raw.get("metadata") or {}).get("uid") or "")

    @property
    def resource_version(self) -> str:
        """The resourceVersion the pass last saw (or wrote)."""
        return str((self.raw.get("metadata") or {}).get("resourceVersion") or "")


def service_owner(raw: Mapping[str, Any]) -> Mapping[str, Any] | None:
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
    #: the position in ``plan.actions`` of the first action that failed (-1: none)
    failed_index: int = -1
    #: seconds until a held status write is due (None: nothing held), see coalesce.py
    status_due: float | None = None
    #: pod creates left for the next pass (``runs.bound_creates``), which comes at once
    deferred_creates: int = 0
    #: pod creates sent behind the pass (``create_pipeline.py``), answered after it ended
    behind: int = 0
    #: the replica has all its batches of creates out: it is queued again when one ends
    creates_waiting: bool = False

    @property
    def ok(self) -> bool:
        """Every action was applied."""
        return self.outcome == "ok"


def requeue(queue: WorkQueue[str], key: str, plan: Plan, result: ApplyResult) -> None:
    """Queue ``key`` again as its pass ended: at once for the next chunk of a big bring-up,
    rate limited after a failure, after ``plan.requeue_after``, when a held status is due;
    not at all when leadership was lost (the next leader looks at every key)."""
    if result.outcome == "not_leader":
        return
    if result.ok:
        queue.forget(key)
        if result.deferred_creates and not result.creates_waiting:
            queue.add(key)  # the rest of a big bring-up: the next chunk now
    else:
        queue.add_rate_limited(key)
    if plan.requeue_after is not None:
        queue.add_after(key, max(plan.requeue_after.total_seconds(), 0.0))
    if result.status_due is not None:  # a held status: look again when it is due
        queue.add_after(key, result.status_due)


def instance_of(prefix: str, name: str, body: Mapping[str, Any] | None = None) -> int | None:
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


def instance_kw(index: int | None) -> dict[str, int]:
    """``{"instance": index}`` for log binding, or nothing when unknown."""
    return {} if index is None else {"instance": index}


def pass_kind(plan: Plan, result: ApplyResult) -> str:
    """What a pass did, for ``omenative_pass_duration_seconds{kind}``: the first of
    delete, create, gate, patch, status, held (a status held back) or none."""
    kinds = {a.kind for a in plan.actions}
    for label, names in _PASS_KINDS:
        if kinds & names:
            return "held" if label == "status" and result.status_due is not None else label
    return "none"


_PASS_KINDS = (
    ("delete", frozenset({"DeletePod", "DeletePodGroup", "DeleteRevision", "DeleteObject"})),
    ("create", frozenset({"CreatePod", "CreatePodGroup", "CreateRevision", "CreateObject"})),
    ("gate", frozenset({"SetServingGate"})),
    ("patch", frozenset({"PatchPodImages", "SetFinalizer", "RemoveAnnotations",
                         "RecordAudit"})),
    ("status", frozenset({"UpdateStatus"})),
)


async def write_rejection(client: KubeClient, ctx: PassContext, reason: str, message: str
                          ) -> JSON | None:
    """Patch ``Ready=False`` with ``reason``/``message`` on the replica of ``ctx``; the
    answer, or None when that condition is already there (ApiError propagates)."""
    previous = dict(ctx.raw.get("status") or {}).get("conditions")
    current = next((c for c in previous or () if isinstance(c, dict)
                    and c.get("type") == "Ready"), None)
    if current is not None and (current.get("status"), current.get("reason"),
                                current.get("message")) == ("False", reason, message):
        return None
    generation = (ctx.raw.get("metadata") or {}).get("generation")
    ready: JSON = {"type": "Ready", "status": "False", "reason": reason,
                   "message": message[:32768]}
    if isinstance(generation, int):
        ready["observedGeneration"] = generation
    conditions = merge_condition_json(previous, [ready], datetime.now(UTC))
    patch = {"metadata": {"resourceVersion": ctx.resource_version},
             "status": {"conditions": conditions}}
    return await client.patch(INFERENCE_REPLICAS, ctx.name, patch, ctx.namespace,
                              subresource="status")


def scale_down_wave_fields(wave: ScaleDownWave) -> dict[str, Any]:
    """A scale-down wave as OME logs it (``podBudget``, ``activePodCost``,
    ``activeInstances``, ``admittedInstances``, ``deferredInstances``); the logger already
    carries the namespace, InferenceService and component."""
    return {"podBudget": wave.pod_budget, "activePodCost": wave.active_pod_cost,
            "activeInstances": wave.active_instances,
            "admittedInstances": wave.admitted_instances,
            "deferredInstances": wave.deferred_instances, "oversized": wave.oversized}


def log_pass(lg: Any, plan: Plan, result: ApplyResult) -> None:
    """The pass's log lines: the scale-down wave (OME's line and field names), then how it
    ended."""
    if (wave := plan.scale_down_wave) is not None:
        lg.info("OMENative scale-down wave", **scale_down_wave_fields(wave))
    if not result.ok:
        lg.info("reconcile.stopped", outcome=result.outcome, applied=result.applied,
                action=result.failed_kind, error=result.message)
    elif plan.actions:
        lg.debug("reconcile.applied", actions=len(plan.actions))
