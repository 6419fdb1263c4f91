"""InferenceService status from its components' InferenceReplicas.

For each OMENative component: ``status.components.<component>.lifecycle`` mirrors the
InferenceReplica's counts, revisions, conditions and ``rolloutHold`` (never per-Instance
rows), and the ISVC condition ``EngineReady`` / ``DecoderReady`` / ``RouterReady`` says
whether it serves:

=========================  ======  ================================================
reason                     status  message
=========================  ======  ================================================
``Ready``                  True    ``All Instances are Ready``
``MinimumAvailable``       True    ``{serving}/{total} Instances serving (min {minimum})``
``InsufficientAvailable``  False   ``{serving}/{total} Instances serving, need {minimum}``
=========================  ======  ================================================

The minimum is the desired count less the ``maxUnavailable`` of the component's update
strategy (never below one Instance), or every Instance when it is unset. A blocked
component gets its plan's ``{Component}Ready=False`` instead. The ISVC's own ``Ready``
sums them up (``service_ready``), so ``kubectl get isvc`` shows it. Conditions follow
Kubernetes' rule: ``lastTransitionTime`` moves only when the status changes, so an
unchanged world writes an identical status. ``now`` is an input: nothing here reads a clock.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from omenative_core.codec import spec_from_json, to_json
from omenative_core.conditions import merge_condition_json
from omenative_core.model.spec import InferenceReplica, InferenceReplicaSpec
from omenative_core.model.status import InferenceReplicaStatus
from omenative_core.policy import BudgetError, desired_instances, resolve_budget
from omenative_core.service.autoscaler_status import autoscaler_status
from omenative_core.service.model import COMPONENT_ORDER, InferenceService
from omenative_core.service.modes import MODE_OMENATIVE
from omenative_core.service.render import (
    ANNOTATION_MIGRATION_PREFIX,
    ComponentPlan,
    ServiceCondition,
    ServicePlan,
    condition_type,
)

__all__ = [
    "accepted_migration_annotations",
    "component_ready",
    "lifecycle_status",
    "minimum_serving",
    "service_ready",
    "service_status",
]


def lifecycle_status(status: InferenceReplicaStatus) -> dict[str, Any]:
    """``status.components.<component>.lifecycle``: counts, revisions, conditions and
    ``rolloutHold`` of the component's InferenceReplica (no per-Instance rows)."""
    out: dict[str, Any] = {
        "replicas": status.replicas,
        "readyReplicas": status.ready_replicas,
        "servingReplicas": status.serving_replicas,
        "availableReplicas": status.available_replicas,
        "updatedReplicas": status.updated_replicas,
        "updatedReadyReplicas": status.updated_ready_replicas,
        "currentRevision": status.current_revision,
        "updateRevision": status.update_revision,
    }
    if status.conditions:
        out["conditions"] = [to_json(c) for c in status.conditions]
    if status.rollout_hold is not None:
        out["rolloutHold"] = to_json(status.rollout_hold)
    return out


def minimum_serving(spec: InferenceReplicaSpec) -> int:
    """Instances that must serve for ``MinimumAvailable``: desired less the update
    strategy's ``maxUnavailable`` (at least 1), or all desired when it is unset."""
    desired = desired_instances(spec.replicas)
    strategy = spec.lifecycle.update_strategy if spec.lifecycle else None
    rolling = strategy.rolling_update if strategy else None
    if rolling is None or rolling.max_unavailable is None:
        return desired
    try:
        budget = resolve_budget(rolling.max_unavailable, desired)
    except BudgetError:
        return desired
    return max(desired - budget, 1)


def component_ready(
    component: str, spec: InferenceReplicaSpec, status: InferenceReplicaStatus | None
) -> ServiceCondition:
    """The ``{Component}Ready`` condition of an OMENative component (``status`` None: the
    InferenceReplica has no status yet, so nothing serves)."""
    kind = condition_type(component)
    desired = desired_instances(spec.replicas)  # OME: 0 runs one Instance
    serving = status.serving_replicas if status is not None else 0
    ready = status.ready_replicas if status is not None else 0
    minimum = minimum_serving(spec)
    if ready >= desired and serving >= desired:
        return ServiceCondition(
            type=kind, status="True", reason="Ready", message="All Instances are Ready"
        )
    if serving >= minimum:
        return ServiceCondition(
            type=kind,
            status="True",
            reason="MinimumAvailable",
            message=f"{serving}/{desired} Instances serving (min {minimum})",
        )
    return ServiceCondition(
        type=kind,
        status="False",
        reason="InsufficientAvailable",
        message=f"{serving}/{desired} Instances serving, need {minimum}",
    )


def service_ready(
    conditions: list[ServiceCondition], components: list[str]
) -> ServiceCondition | None:
    """The InferenceService's ``Ready``: True when every component that reports a
    ``{Component}Ready`` is ready, else False naming the first that is not (in the order
    engine, decoder, router). Components without that condition (RawDeployment and
    MultiNode ones, whose readiness is their Deployment's or LeaderWorkerSet's) do not
    count; with none reporting there is no ``Ready`` (None)."""
    by_type = {c.type: c for c in conditions}
    reported = [
        (c, by_type[condition_type(c)])
        for c in COMPONENT_ORDER
        if c in components and condition_type(c) in by_type
    ]
    if not reported:
        return None
    for _component, cond in reported:
        if cond.status != "True":
            return ServiceCondition(
                type="Ready",
                status="False",
                reason=f"{cond.type[: -len('Ready')]}NotReady",
                message=f"{cond.type} {cond.reason}: {cond.message}",
            )
    return ServiceCondition(
        type="Ready",
        status="True",
        reason="Ready",
        message=", ".join(f"{component} ready" for component, _ in reported),
    )


def _condition_json(c: ServiceCondition) -> dict[str, Any]:
    return {"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}


def _autoscaling(isvc: InferenceService, cp: ComponentPlan,
                 scalers: Mapping[tuple[str, str], Mapping[str, Any]],
                 now: datetime) -> dict[str, Any]:
    """A rendered component's ``autoscaler`` and ``scaleTargetRef`` status fields."""
    old = ((isvc.status.get("components") or {}).get(cp.component) or {}).get("autoscaler")
    entry: dict[str, Any] = {}
    autoscaler = autoscaler_status(cp, scalers, old if isinstance(old, Mapping) else None, now)
    if autoscaler is not None:
        entry["autoscaler"] = autoscaler
    if cp.scale_target is not None:
        entry["scaleTargetRef"] = dict(cp.scale_target)
    return entry


def service_status(
    isvc: InferenceService,
    plan: ServicePlan,
    replicas: Mapping[str, InferenceReplica],
    now: datetime,
    scalers: Mapping[tuple[str, str], Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The status the shell writes (merge it with ``with_status``): per OMENative component
    ``components.<c>.lifecycle`` and the ``{Component}Ready`` condition, plan conditions
    under ``components.<c>.conditions``, per rendered component OME's ``autoscaler`` and
    ``scaleTargetRef`` (``autoscaler_status.py``), and the ISVC ``conditions`` list with
    ours merged in (other types are kept as they were). ``replicas``: the live
    InferenceReplica of each component, by component name; ``scalers``: the ISVC's live
    HPAs and ScaledObjects by (kind, name)."""
    components: dict[str, Any] = {}
    wanted: list[ServiceCondition] = list(plan.conditions)
    for cp in plan.components:
        entry = _autoscaling(isvc, cp, scalers or {}, now)
        if cp.conditions:
            entry["conditions"] = [_condition_json(c) for c in cp.conditions]
        if cp.ready is not None:
            wanted.append(cp.ready)
        elif cp.mode == MODE_OMENATIVE:
            live = replicas.get(cp.component)
            spec = live.spec if live is not None else None
            if spec is None and cp.replica is not None:
                spec = spec_from_json(cp.replica["spec"])
            status = live.status if live is not None else None
            if isinstance(status, InferenceReplicaStatus):
                entry["lifecycle"] = lifecycle_status(status)
            else:
                status = None
            if spec is not None:
                wanted.append(component_ready(cp.component, spec, status))
        if entry:
            components[cp.component] = entry
    overall = service_ready(wanted, [cp.component for cp in plan.components])
    if overall is not None:
        wanted.append(overall)
    present = {cp.component for cp in plan.components}
    remove = {condition_type(c) for c in COMPONENT_ORDER if c not in present}
    remove |= set(plan.removed_conditions)
    out: dict[str, Any] = {
        "conditions": merge_condition_json(isvc.status.get("conditions"),
                                           [_condition_json(c) for c in wanted], now,
                                           remove=remove, sort=True),
        **plan.status_fields,
    }
    if components:
        out["components"] = components
    return out


def accepted_migration_annotations(
    isvc: InferenceService, replicas: Mapping[str, InferenceReplica]
) -> tuple[str, ...]:
    """The ISVC's ``ome.io/migration-request-v1-<uuid>`` annotations that some component's
    InferenceReplica has recorded in ``status.migrations``: the shell removes them, as OME
    does once a request is Accepted."""
    recorded: set[str] = set()
    for replica in replicas.values():
        status = replica.status
        if isinstance(status, InferenceReplicaStatus):
            recorded.update(m.request_uuid for m in status.migrations)
    return tuple(
        sorted(
            key
            for key in isvc.annotations
            if key.startswith(ANNOTATION_MIGRATION_PREFIX)
            and key[len(ANNOTATION_MIGRATION_PREFIX) :] in recorded
        )
    )
