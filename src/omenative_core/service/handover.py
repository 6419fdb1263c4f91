"""The hand-over of a component from its LeaderWorkerSet (MultiNode) to OMENative, pure.

When a component that ran as the LeaderWorkerSet ``lws-{isvc}-{component}`` resolves to
OMENative (the upgrade default for a leader/worker component without a ``MultiNode`` pin,
or an explicit annotation change), its InferenceReplica comes up *beside* the running
LeaderWorkerSet, and ``plan_handover`` decides, from what is observed, how far the
LeaderWorkerSet may shrink:

1. Only a LeaderWorkerSet the InferenceService owns (controller owner reference, rendered
   by us) is touched; another one is reported (``NotOwned``) and left alone.
2. While the LeaderWorkerSet exists, the component's Service selects the leaders of both
   workloads (``handover_selector``; the LeaderWorkerSet's leader pods get the label
   ``ome.io/runner=leader``), so *serving* is the ready LeaderWorkerSet groups plus the
   serving OMENative Instances, as the Service's ready endpoints count them.
3. **Surge**: one group goes (``spec.replicas`` less one) when serving stays at or above
   the desired count without it. A group counts as ready only up to the LeaderWorkerSet's
   ``spec.replicas`` (a status not yet caught up never counts a removed group twice).
4. **Trade**: when no room is left (an OMENative Instance has waited ``Unschedulable`` for
   ``lifecycle.lwsHandoverTradeAfter``, 15s by default: GPUs that pods still terminating
   hold come free by then), one group goes while serving is whole (or the LeaderWorkerSet
   has a group that serves nothing) and no Instance is starting, and the condition says
   so: serving may dip by one group while the freed GPUs start the next Instance. Never a
   deadlock: with a group left there is always a next step.
5. At zero groups the LeaderWorkerSet is deleted.

Each step also names the Events it reports on the InferenceService (``handover_events``):
started, each group scaled down or traded, the LeaderWorkerSet deleted, and a Warning when
it is not owned. Everything here is a function of the snapshot: which step was taken
before is read back from the LeaderWorkerSet's own ``spec.replicas``, so a restarted
manager resumes.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

from attrs import evolve, frozen

from omenative_core.labels import LABEL_MANAGED_BY, LABEL_RUNNER
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.plan import Event
from omenative_core.model.spec import InferenceReplica
from omenative_core.model.status import InferenceReplicaStatus
from omenative_core.phases import Waiting
from omenative_core.service.modes import MODE_OMENATIVE
from omenative_core.service.plan import ComponentPlan, ServiceCondition, ServicePlan

__all__ = [
    "CONDITION_LWS_HANDOVER",
    "EVENT_DELETED",
    "EVENT_NOT_OWNED",
    "EVENT_SCALED_DOWN",
    "EVENT_STARTED",
    "EVENT_TRADED",
    "LABEL_LWS_NAME",
    "LABEL_LWS_WORKER_INDEX",
    "PHASE_DELETING",
    "PHASE_NOT_OWNED",
    "PHASE_SURGING",
    "PHASE_TRADING",
    "REASON_NO_ROOM",
    "TRADE_AFTER",
    "HandoverStep",
    "LwsView",
    "handover_events",
    "handover_selector",
    "lws_name",
    "lws_view_from_json",
    "plan_handover",
    "with_handovers",
]

CONDITION_LWS_HANDOVER: Final = "LWSHandover"
"""The component condition that reports a hand-over from a LeaderWorkerSet in progress."""
LABEL_LWS_NAME: Final = "leaderworkerset.sigs.k8s.io/name"
"""LeaderWorkerSet's label naming the set on each of its pods."""
LABEL_LWS_WORKER_INDEX: Final = "leaderworkerset.sigs.k8s.io/worker-index"
"""LeaderWorkerSet's per-pod index label; ``0`` is the leader."""

PHASE_SURGING: Final = "Surging"
"""OMENative Instances start beside the LeaderWorkerSet; groups go as Instances serve."""
PHASE_TRADING: Final = "Trading"
"""No room to surge: one LeaderWorkerSet group goes so the next Instance can start."""
PHASE_DELETING: Final = "Deleting"
"""Every group is gone: the LeaderWorkerSet is deleted."""
PHASE_NOT_OWNED: Final = "NotOwned"
"""The LeaderWorkerSet is not the InferenceService's: left alone."""

REASON_NO_ROOM: Final = "NoRoomToSurge"
"""The condition's reason while groups are traded one at a time."""

TRADE_AFTER: Final = LifecycleConfig().lws_handover_trade_after
"""The default of ``lifecycle.lwsHandoverTradeAfter`` (15s): how long an Instance waits
Unschedulable before a group is traded for its room."""

EVENT_STARTED: Final = "LWSHandoverStarted"
"""Normal Event: a component's hand-over from its LeaderWorkerSet runs."""
EVENT_SCALED_DOWN: Final = "LWSHandoverScaledDown"
"""Normal Event: a group went because the OMENative Instances serve in its place."""
EVENT_TRADED: Final = "LWSHandoverTraded"
"""Normal Event: no room to surge, a group went so the next Instance can start."""
EVENT_DELETED: Final = "LWSHandoverDeleted"
"""Normal Event: every group is gone and the LeaderWorkerSet was deleted."""
EVENT_NOT_OWNED: Final = "LWSHandoverNotOwned"
"""Warning Event: the LeaderWorkerSet is not the InferenceService's; left alone."""


def lws_name(isvc: str, component: str) -> str:
    """The LeaderWorkerSet a MultiNode component renders: ``lws-{isvc}-{component}``."""
    return f"lws-{isvc}-{component}"


@frozen(kw_only=True)
class LwsView:
    """What the hand-over reads of one LeaderWorkerSet.

    ``replicas``: its ``spec.replicas`` (groups wanted); ``groups``: ``status.replicas``
    (groups that exist); ``ready``: ``status.readyReplicas``; ``owned``: its controller
    owner is the InferenceService (by UID); ``deleting``: it has a deletionTimestamp.
    """

    name: str
    uid: str = ""
    resource_version: str = ""
    replicas: int = 0
    groups: int = 0
    ready: int = 0
    owned: bool = False
    deleting: bool = False


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def lws_view_from_json(obj: Mapping[str, Any], isvc_uid: str) -> LwsView:
    """An ``LwsView`` of a LeaderWorkerSet as the API server returns it; ``owned`` when its
    controller owner reference is the InferenceService with ``isvc_uid``."""
    meta = obj.get("metadata") or {}
    spec = obj.get("spec") or {}
    status = obj.get("status") or {}
    owners = meta.get("ownerReferences") or ()
    owned = bool(isvc_uid) and any(
        isinstance(o, Mapping)
        and o.get("kind") == "InferenceService"
        and o.get("controller") is True
        and o.get("uid") == isvc_uid
        for o in owners
    )
    replicas = spec.get("replicas")
    return LwsView(
        name=str(meta.get("name") or ""),
        uid=str(meta.get("uid") or ""),
        resource_version=str(meta.get("resourceVersion") or ""),
        replicas=1 if replicas is None else _int(replicas),
        groups=_int(status.get("replicas")),
        ready=_int(status.get("readyReplicas")),
        owned=owned,
        deleting=bool(meta.get("deletionTimestamp")),
    )


def handover_selector(selector: Mapping[str, str]) -> dict[str, str]:
    """The traffic Service's selector during a hand-over: the OMENative one without
    ``ome.io/managed-by`` (the LeaderWorkerSet's pods lack it), so it selects the
    LeaderWorkerSet's leaders too once they carry ``ome.io/runner=leader``."""
    return {k: v for k, v in selector.items() if k != LABEL_MANAGED_BY}


@frozen(kw_only=True)
class HandoverStep:
    """What one pass does for one component's hand-over, and the condition it reports.

    ``scale_to``: the LeaderWorkerSet's new ``spec.replicas`` (None: leave it);
    ``delete``: delete it (UID and resourceVersion preconditions from ``lws``);
    ``label_leaders``: give its leader pods ``ome.io/runner=leader`` before the Service's
    selector changes; ``selector``: the traffic Service's selector while it lasts;
    ``recheck_after``: seconds until a trade may be due (look again then).
    """

    component: str
    phase: str
    lws: LwsView
    desired: int
    serving: int
    instances_serving: int
    lws_ready: int
    scale_to: int | None = None
    delete: bool = False
    label_leaders: bool = False
    selector: Mapping[str, str] | None = None
    recheck_after: float | None = None
    reason: str = ""
    message: str = ""

    @property
    def condition_status(self) -> str:
        """``True`` while the hand-over runs; ``False`` when it is refused (not owned)."""
        return "False" if self.phase == PHASE_NOT_OWNED else "True"


def _instances(
    status: InferenceReplicaStatus | None,
) -> tuple[int, int, int, datetime | None]:
    """(serving, starting, parked Unschedulable) Instances of the InferenceReplica, and the
    earliest time a parked one started waiting (None: unknown)."""
    if status is None:
        return 0, 0, 0, None
    serving = status.serving_replicas
    ops = [
        i.operation
        for i in status.instances
        if i.operation is not None and i.operation.waiting == Waiting.UNSCHEDULABLE
    ]
    since = [op.unschedulable_since for op in ops if op.unschedulable_since is not None]
    starting = max(len(status.instances) - serving - len(ops), 0)
    return serving, starting, len(ops), min(since) if since else None


def _trade_wait(
    parked_since: datetime | None, now: datetime | None, trade_after: timedelta
) -> float:
    """Seconds before a parked Instance has waited ``trade_after`` (0: due now)."""
    if now is None:
        return 0.0
    since = parked_since if parked_since is not None else now
    return max((since + trade_after - now).total_seconds(), 0.0)


def plan_handover(
    component: str,
    desired: int,
    lws: LwsView,
    status: InferenceReplicaStatus | None,
    selector: Mapping[str, str],
    now: datetime | None = None,
    trade_after: timedelta = TRADE_AFTER,
) -> HandoverStep:
    """The next step of ``component``'s hand-over from ``lws`` (see the module docstring).

    ``desired``: the component's desired Instances; ``status``: its InferenceReplica's
    status (None before the first one); ``selector``: the OMENative traffic selector;
    ``now``: the pass's time, for ``trade_after`` (None trades without waiting).
    """
    serving_ir, starting, parked, parked_since = _instances(status)
    lws_ready = min(lws.ready, lws.replicas)
    serving = serving_ir + lws_ready
    shared = handover_selector(selector)
    step = HandoverStep(
        component=component,
        phase=PHASE_SURGING,
        lws=lws,
        desired=desired,
        serving=serving,
        instances_serving=serving_ir,
        lws_ready=lws_ready,
        label_leaders=LABEL_RUNNER in shared,
        selector=shared,
        reason=PHASE_SURGING,
    )
    counts = (
        f"{serving_ir}/{desired} Instances serving, LeaderWorkerSet {lws.name} "
        f"{lws_ready}/{lws.replicas} groups ready"
    )
    if not lws.owned:
        return evolve(
            step,
            phase=PHASE_NOT_OWNED,
            reason=PHASE_NOT_OWNED,
            label_leaders=False,
            selector=None,
            message=f"LeaderWorkerSet {lws.name} is not owned by this InferenceService: "
            "it is left alone (delete it yourself to free its GPUs)",
        )
    if lws.deleting or lws.replicas == 0:
        return evolve(
            step,
            phase=PHASE_DELETING,
            reason=PHASE_DELETING,
            delete=not lws.deleting,
            message=f"{counts}; every group is gone: deleting the LeaderWorkerSet",
        )
    down = lws.replicas - 1
    if serving - 1 >= desired:
        return evolve(
            step, scale_to=down, message=f"{counts}; scaling the LeaderWorkerSet down to {down}"
        )
    if parked:
        wait = _trade_wait(parked_since, now, trade_after)
        if wait > 0:  # not yet "no room": terminating pods may still be freeing GPUs
            return evolve(
                step,
                recheck_after=wait,
                message=f"{counts}; {parked} Instance(s) Unschedulable: if no room appears "
                f"within {int(trade_after.total_seconds())}s, one group is traded for it",
            )
        trade = not starting and (serving >= desired or lws_ready < lws.replicas)
        if trade:
            doing = (
                f"scaling the LeaderWorkerSet down to {down}; serving may drop to "
                f"{desired - 1} until the next Instance is Ready"
            )
        elif starting:
            doing = f"waiting for {starting} starting Instance(s)"
        else:
            doing = "waiting for the traded group's Instance to become Ready"
        return evolve(
            step,
            phase=PHASE_TRADING,
            reason=REASON_NO_ROOM,
            scale_to=down if trade else None,
            message=f"{counts}; no room to surge ({parked} Instance(s) Unschedulable): "
            f"trading one group at a time, {doing}",
        )
    return evolve(
        step,
        message=f"{counts}; OMENative Instances start beside the LeaderWorkerSet, which "
        "loses one group for each Instance that becomes Ready",
    )


def handover_events(step: HandoverStep) -> tuple[Event, ...]:
    """The Events of ``step``, to send once its writes are done.

    A step repeated on a later pass names the same Events with the same messages, so the
    shell's de-duplication (per InferenceService, reason and message) sends each once: one
    "started", one per group scaled down or traded (the message names the new count), one
    "deleted", one Warning while the LeaderWorkerSet is not owned.
    """
    lws, comp = step.lws.name, step.component
    if step.phase == PHASE_NOT_OWNED:
        return (Event(type="Warning", reason=EVENT_NOT_OWNED, message=f"{comp}: {step.message}"),)
    events = [Event(type="Normal", reason=EVENT_STARTED,
                    message=f"{comp}: hand-over from LeaderWorkerSet {lws} to OMENative")]
    if step.scale_to is not None and step.phase == PHASE_TRADING:
        events.append(Event(
            type="Normal", reason=EVENT_TRADED,
            message=f"{comp}: no room to surge: LeaderWorkerSet {lws} scaled down to "
            f"{step.scale_to} group(s) so the next OMENative Instance can start"))
    elif step.scale_to is not None:
        events.append(Event(
            type="Normal", reason=EVENT_SCALED_DOWN,
            message=f"{comp}: LeaderWorkerSet {lws} scaled down to {step.scale_to} "
            f"group(s): OMENative Instances serve in their place"))
    if step.delete:
        events.append(Event(
            type="Normal", reason=EVENT_DELETED,
            message=f"{comp}: every group is gone: LeaderWorkerSet {lws} deleted"))
    return tuple(events)


def _with_selector(cp: ComponentPlan, selector: Mapping[str, str]) -> tuple[dict[str, Any], ...]:
    """``cp``'s objects with the traffic Service (the first Service) selecting ``selector``."""
    first = next(i for i, o in enumerate(cp.objects) if o.get("kind") == "Service")
    service = cp.objects[first]
    changed = {**service, "spec": {**service["spec"], "selector": dict(selector)}}
    return (*cp.objects[:first], changed, *cp.objects[first + 1 :])


def with_handovers(
    plan: ServicePlan,
    lws: Mapping[str, LwsView],
    replicas: Mapping[str, InferenceReplica],
    now: datetime | None = None,
    trade_after: timedelta = TRADE_AFTER,
) -> tuple[ServicePlan, tuple[HandoverStep, ...]]:
    """``plan`` with each hand-over applied, and the steps the shell carries out.

    ``lws``: the observed LeaderWorkerSet ``lws-{isvc}-{component}`` by component;
    ``replicas``: the live InferenceReplicas by component; ``now`` and ``trade_after``
    (``lifecycle.lwsHandoverTradeAfter``): see ``plan_handover``. A multi-pod OMENative component
    with a LeaderWorkerSet gets the ``LWSHandover`` condition and, while the hand-over runs,
    the shared Service selector; other components are returned as they are.
    """
    steps: list[HandoverStep] = []
    components: list[ComponentPlan] = []
    for cp in plan.components:
        view = lws.get(cp.component)
        service = cp.object("Service")
        if (
            view is None
            or cp.blocked
            or cp.mode != MODE_OMENATIVE
            or not cp.multi_pod
            or service is None
        ):
            components.append(cp)
            continue
        live = replicas.get(cp.component)
        status = live.status if live is not None else None
        step = plan_handover(
            cp.component,
            cp.replicas if cp.replicas is not None else 1,
            view,
            status if isinstance(status, InferenceReplicaStatus) else None,
            service["spec"]["selector"],
            now,
            trade_after,
        )
        steps.append(step)
        condition = ServiceCondition(
            type=CONDITION_LWS_HANDOVER,
            status=step.condition_status,
            reason=step.reason,
            message=step.message,
        )
        objects = cp.objects if step.selector is None else _with_selector(cp, step.selector)
        components.append(evolve(cp, objects=objects, conditions=(*cp.conditions, condition)))
    return evolve(plan, components=tuple(components)), tuple(steps)
