"""One InferenceService pass, planned from one snapshot: ``plan_service(snapshot)``.

The InferenceService counterpart of ``omenative_core.plan`` for a replica. The shell
observes (its caches, the ControllerRevisions' pairing tokens when ``spec.rollout`` has
groups, the answers to last pass's analysis queries), calls ``plan_service`` once and
carries out the ``ServicePass`` in its order:

1. ``take_migrations``: the ISVC's migration requests a component has recorded, removed
   (a JSON patch that tests each value first; the render already reads the ISVC without
   them, and the status write goes on the patched object);
2. ``warnings``: Warning Events (a missing model or runtime, advisories), and
   ``runtime_revisions``, a pinned runtime's snapshot, created in OME's namespace;
3. ``wait_for_lws``: stop here and look again in a second (a multi-pod OMENative component
   must not be applied before the LeaderWorkerSet CRD and cache are known);
4. ``handovers``: each LeaderWorkerSet hand-over step's leader pods labelled, before the
   Service's selector changes;
5. ``rejection``: the ISVC cannot be used (a field that does not decode, admission, a
   rollout spec or state): ``status`` then holds ``SpecValid=False`` and nothing else is
   written but one Warning Event;
6. ``applies``: every object of every component that is not blocked, in order, each member
   InferenceReplica with its rollout pacing; then ``deletes``, our autoscalers a class
   change left behind;
7. ``status``: the ISVC status (components, conditions, ``status.rollout``), written when it
   changed; the commit point of the pass;
8. after the status only: the hand-overs' LeaderWorkerSet writes and ``events``, the
   rollout's Events, annotation removals, traffic mirrors and ``queries`` (their answers
   enter the next snapshot), the ``revision_services`` (the stale ones deleted, those of
   ``kept_components`` kept), and a look again after ``requeue_after``.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any, Final

from attrs import evolve, field, frozen

from omenative_core.codec import CodecError, spec_from_json
from omenative_core.conditions import merge_condition_json
from omenative_core.labels import LABEL_COMPONENT
from omenative_core.model.spec import InferenceReplica
from omenative_core.rollout.members import AnalysisMeasurement
from omenative_core.service.accelerators import AcceleratorClass
from omenative_core.service.autoscaler_status import stale_autoscalers
from omenative_core.service.handover import HandoverStep, LwsView, handover_events, with_handovers
from omenative_core.service.model import (
    InferenceService,
    ServingRuntime,
    isvc_from_json,
    with_status,
)
from omenative_core.service.models import BaseModel
from omenative_core.service.modes import MODE_OMENATIVE
from omenative_core.service.objects import find_runtime
from omenative_core.service.plan import ServiceConfig, ServiceEvent, ServicePlan
from omenative_core.service.policy_resolve import (
    hold_events,
    resolve_policies,
    with_policy_outcomes,
)
from omenative_core.service.rejection import Rejection
from omenative_core.service.render import render_service
from omenative_core.service.rollout_pass import (
    PairingTokens,
    RolloutPass,
    prepare_rollout,
    revision_services,
)
from omenative_core.service.runtime_pin import RuntimeRevision
from omenative_core.service.status import accepted_migration_annotations, service_status
from omenative_core.service.validate import validate_isvc

__all__ = [
    "VALIDATION_CONDITION",
    "ServicePass",
    "ServiceSnapshot",
    "plan_service",
    "plan_warnings",
]

VALIDATION_CONDITION: Final = "SpecValid"
"""The ISVC condition that reports a decode or admission failure (False); removed when valid."""

LWS_WAIT_SECONDS: Final = 1.0
"""How soon to look again while the LeaderWorkerSet CRD or cache is not known."""

Applies = tuple[tuple[str, dict[str, Any]], ...]
"""``(component, object)`` to apply, in order."""

_SOURCE_REASONS: Final = frozenset(
    {"ModelNotFound", "ModelDisabled", "RuntimeNotFound", "RuntimeDisabled",
     "RuntimeValidationError", "RuntimeFetchError", "RenderFailed", "RuntimePinError",
     "AcceleratorClassError", "RuntimePieceMissing"})


@frozen(kw_only=True)
class ServiceSnapshot:
    """What one InferenceService pass reads, observed before planning.

    ``isvc``: the cached InferenceService JSON. ``owned``: the live InferenceReplica JSON of
    each component, ``replicas`` the same decoded (one that does not decode is missing);
    ``deployments``: the ISVC's RawDeployment Deployments. ``lws``: its LeaderWorkerSets by
    component; ``lws_known``: their CRD and cache are known. ``pairing``: by component, each
    stored revision's pairing token (read only when ``spec.rollout`` has groups);
    ``answers``: the measurements of the analysis queries asked last pass.
    """

    isvc: Mapping[str, Any]
    now: datetime
    config: ServiceConfig = field(factory=ServiceConfig)
    runtimes: tuple[ServingRuntime, ...] = ()
    crds: frozenset[str] = frozenset()
    owned: Mapping[str, Mapping[str, Any]] = field(factory=dict)
    replicas: Mapping[str, InferenceReplica] = field(factory=dict)
    deployments: tuple[Mapping[str, Any], ...] = ()
    models: tuple[BaseModel, ...] | None = None
    accelerator_classes: tuple[AcceleratorClass, ...] | None = None
    runtime_revisions: tuple[RuntimeRevision, ...] | None = None
    lws: Mapping[str, LwsView] = field(factory=dict)
    lws_known: bool = True
    pairing: PairingTokens = field(factory=dict)
    answers: tuple[AnalysisMeasurement, ...] = ()
    autoscalers: tuple[Mapping[str, Any], ...] = ()
    """The HPAs and ScaledObjects labelled with this ISVC (ours, and those KEDA derives)."""
    policies: tuple[Mapping[str, Any], ...] | None = None
    """The AutoscalerPolicies of the ISVC's namespace; None: the feature is off (OME's
    CRD is not served), so ``autoscalerPolicyRef`` is kept and ignored."""


@frozen(kw_only=True)
class ServicePass:
    """What one InferenceService pass writes, in the order the module docstring gives.

    ``isvc``: the InferenceService as the pass reads it (None when it does not decode);
    ``render``: its rendered plan, hand-overs applied. ``applies``: ``(component, object)``
    in order. ``status``: the whole ISVC status to write (None: none). ``requeue_after``:
    seconds until the next look (None: on change only), before the rollout's own.
    """

    isvc: InferenceService | None = None
    rejection: Rejection | None = None
    take_migrations: tuple[str, ...] = ()
    render: ServicePlan | None = None
    warnings: tuple[tuple[str, str], ...] = ()
    runtime_revisions: tuple[dict[str, Any], ...] = ()
    wait_for_lws: bool = False
    handovers: tuple[HandoverStep, ...] = ()
    applies: Applies = ()
    deletes: tuple[dict[str, str], ...] = ()
    """Our HPAs / ScaledObjects the plan no longer renders (``stale_autoscalers``), deleted
    after the applies with a UID precondition."""
    status: dict[str, Any] | None = None
    events: tuple[ServiceEvent, ...] = ()
    rollout: RolloutPass | None = None
    revision_services: Mapping[str, dict[str, Any]] = field(factory=dict)
    kept_components: frozenset[str] = frozenset()
    requeue_after: float | None = None


def plan_warnings(plan: ServicePlan) -> list[tuple[str, str]]:
    """``(reason, message)`` of each Warning the plan asks for, in order, without repeats:
    a component blocked by its model or runtime, and the plan's own Warning Events."""
    out: list[tuple[str, str]] = []
    for cp in plan.components:
        if cp.blocked and cp.ready is not None and cp.ready.reason in _SOURCE_REASONS:
            out.append((cp.ready.reason, cp.ready.message))
    out.extend((e.reason, e.message) for e in plan.events if e.type == "Warning")
    return list(dict.fromkeys(out))


def _invalid_status(raw: Mapping[str, Any], reason: str, message: str,
                    now: datetime) -> dict[str, Any]:
    """The status with ``SpecValid=False`` saying why."""
    old = raw.get("status")
    status = dict(old) if isinstance(old, Mapping) else {}
    status["conditions"] = merge_condition_json(
        status.get("conditions"), [{"type": VALIDATION_CONDITION, "status": "False",
                                    "reason": reason, "message": message}], now)
    return status


def _rejected(raw: Mapping[str, Any], rejection: Rejection, now: datetime,
              **so_far: Any) -> ServicePass:
    return ServicePass(rejection=rejection, status=_invalid_status(
        raw, rejection.reason, rejection.message, now), **so_far)


def _current_replicas(snap: ServiceSnapshot) -> dict[str, int]:
    """Each component's live replica count: its InferenceReplica's, else its Deployment's."""
    current: dict[str, int] = {}
    for component, obj in snap.owned.items():
        n = (obj.get("spec") or {}).get("replicas")
        if isinstance(n, int):
            current[component] = n
    for dep in snap.deployments:
        label = ((dep.get("metadata") or {}).get("labels") or {}).get(LABEL_COMPONENT)
        count = (dep.get("spec") or {}).get("replicas")
        if isinstance(label, str) and isinstance(count, int):
            current.setdefault(label, count)
    return current


def _collision_counts(owned: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """Each owned InferenceReplica's ``status.collisionCount`` (salts its revision hash)."""
    out: dict[str, int] = {}
    for component, obj in owned.items():
        n = (obj.get("status") or {}).get("collisionCount")
        if isinstance(n, int) and n > 0:
            out[component] = n
    return out


def _without_annotations(isvc: InferenceService, keys: tuple[str, ...]) -> InferenceService:
    """``isvc`` as it stands once ``keys`` are removed from its annotations."""
    if not keys:
        return isvc
    meta = dict(isvc.metadata)
    meta["annotations"] = {k: v for k, v in isvc.annotations.items() if k not in keys}
    return InferenceService({**isvc.raw, "metadata": meta})


def _waits_for_lws(plan: ServicePlan, lws_known: bool) -> bool:
    """A multi-pod OMENative component is about to be applied while the LeaderWorkerSet
    CRD or cache is not known yet."""
    return not lws_known and any(cp.mode == MODE_OMENATIVE and cp.multi_pod and not cp.blocked
                                 for cp in plan.components)


def _applies(plan: ServicePlan, rollout: RolloutPass | None) -> Applies:
    """Every object of every component that is not blocked; members get their pacing."""
    out: list[tuple[str, dict[str, Any]]] = []
    for cp in plan.components:
        if cp.blocked:
            continue
        for rendered in cp.objects:
            obj = rendered
            if rollout is not None and obj.get("kind") == "InferenceReplica":
                obj = rollout.replica_body(cp.component, obj)
            out.append((cp.component, obj))
    return tuple(out)


def _as_applied(snap: ServiceSnapshot, applies: Applies) -> dict[str, InferenceReplica]:
    """The live InferenceReplicas with the spec about to be applied (what the status reads)."""
    out = dict(snap.replicas)
    for component, obj in applies:
        live = out.get(component)
        if obj.get("kind") != "InferenceReplica" or live is None:
            continue
        try:
            out[component] = evolve(live, spec=spec_from_json(obj["spec"]))
        except (CodecError, KeyError):
            continue
    return out


def _status(isvc: InferenceService, plan: ServicePlan, replicas: Mapping[str, InferenceReplica],
            rollout: RolloutPass | None, snap: ServiceSnapshot) -> dict[str, Any]:
    """The whole status to write: the roll-up without ``SpecValid``, the rollout's shape."""
    scalers = {(str(o.get("kind")), str((o.get("metadata") or {}).get("name"))): o
               for o in snap.autoscalers}
    status = service_status(isvc, plan, replicas, snap.now, scalers)
    status["conditions"] = [c for c in status["conditions"]
                            if c.get("type") != VALIDATION_CONDITION]
    if rollout is not None:
        status = rollout.shape_status(status)
    merged: dict[str, Any] = with_status(isvc, status)["status"]
    return merged


def plan_service(snap: ServiceSnapshot) -> ServicePass:
    """Plan one InferenceService pass from ``snap`` (pure: same snapshot, same pass)."""
    raw = snap.isvc
    try:
        observed = isvc_from_json(raw)
    except CodecError as exc:
        return _rejected(raw, Rejection("InvalidSpec", str(exc), "spec"), snap.now)
    found = validate_isvc(observed, runtime=find_runtime(observed, snap.runtimes))
    if found:
        return _rejected(raw, Rejection(found[0].reason, "; ".join(r.message for r in found),
                                        found[0].field), snap.now, isvc=observed)
    taken = accepted_migration_annotations(observed, snap.replicas)
    isvc = _without_annotations(observed, taken)
    config = snap.config
    outcomes = {} if snap.policies is None else resolve_policies(
        isvc, find_runtime(isvc, snap.runtimes), snap.policies, config.metric_providers,
        snap.crds, config, snap.autoscalers)
    rendered = with_policy_outcomes(render_service(
        isvc, snap.runtimes, snap.crds, config, current_replicas=_current_replicas(snap),
        collision_counts=_collision_counts(snap.owned), models=snap.models,
        accelerator_classes=snap.accelerator_classes, runtime_revisions=snap.runtime_revisions,
        autoscaler_blocks={c: o.block for c, o in outcomes.items() if o.block is not None}),
        isvc, outcomes)
    so_far: dict[str, Any] = {
        "isvc": isvc, "take_migrations": taken, "render": rendered,
        "warnings": tuple(plan_warnings(rendered)),
        "runtime_revisions": rendered.runtime_revisions}
    if _waits_for_lws(rendered, snap.lws_known):
        return ServicePass(wait_for_lws=True, requeue_after=LWS_WAIT_SECONDS, **so_far)
    plan, steps = with_handovers(rendered, snap.lws, snap.replicas, snap.now,
                                 config.lifecycle.lws_handover_trade_after)
    so_far.update(render=plan, handovers=steps)
    rollout = prepare_rollout(isvc, plan, snap.replicas, snap.now, pairing=snap.pairing,
                              answers=snap.answers, config=config.rollout)
    if isinstance(rollout, Rejection):
        return _rejected(raw, rollout, snap.now, **so_far)
    applies = _applies(plan, rollout)
    rechecks = [s.recheck_after + 0.5 for s in steps if s.recheck_after is not None]
    return ServicePass(
        applies=applies,
        deletes=stale_autoscalers(isvc, plan, snap.autoscalers),
        status=_status(isvc, plan, _as_applied(snap, applies), rollout, snap),
        events=(*hold_events(isvc, plan),
                *(ServiceEvent(type=e.type, reason=e.reason, message=e.message)
                  for s in steps for e in handover_events(s))),
        rollout=rollout,
        revision_services=revision_services(isvc, plan, snap.replicas, rollout),
        kept_components=frozenset(cp.component for cp in plan.components if cp.blocked),
        requeue_after=min(rechecks) if rechecks else None,
        **so_far)
