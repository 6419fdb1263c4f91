"""An OMENative component: its InferenceReplica (``{isvc}-{component}``, owned by the ISVC)
with the traffic and headless Services, PodDisruptionBudget, HPA and PodMonitor.

Under ``spec.rollout`` each pod template gets its peers' endpoints (``peer_env_for``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from attrs import evolve

from omenative_core.codec import CodecError, spec_to_json
from omenative_core.gang import gang_condition, native_api_of, scheduler_name
from omenative_core.labels import (
    LABEL_REPLICA,
)
from omenative_core.model.spec import (
    InferenceReplica,
    InferenceReplicaSpec,
    LifecycleSpec,
    ObjectMeta,
    ParentRef,
)
from omenative_core.policy import BudgetError
from omenative_core.render import (
    pods_per_instance,
    validate_replica,
)
from omenative_core.revisions import spec_revision_hash
from omenative_core.service.accelerators import Accelerator
from omenative_core.service.merge import (
    component_runners,
    merge_lifecycle,
)
from omenative_core.service.model import (
    API_VERSION,
    ComponentSpec,
    InferenceService,
    ServingRuntime,
)
from omenative_core.service.models import BaseModel, finish_runners
from omenative_core.service.modes import (
    ModeResolution,
)
from omenative_core.service.objects import (
    base_labels,
    headless_service_object,
    hpa_object,
    object_meta,
    omenative_min_available,
    pdb_object,
    pdb_policy,
    pod_monitor,
    scaled_object,
    service_selector,
    traffic_service,
)
from omenative_core.service.plan import (
    ANNOTATION_CONTROLLER_WRITE,
    ANNOTATION_MIGRATION_PREFIX,
    ANNOTATION_PARENT_GENERATION,
    ANNOTATION_REVISION_HISTORY_LIMIT,
    ANNOTATION_ROLLOUT_PAUSED,
    CRD_POD_GROUP,
    CRD_POD_MONITOR,
    CRD_SCALED_OBJECT,
    ComponentPlan,
    ServiceCondition,
    ServiceConfig,
    blocked_plan,
    pairing_problem,
)
from omenative_core.service.router_rbac import router_account, router_rbac_objects, with_account
from omenative_core.service.scale import Scale, resolve_scale

__all__: list[str] = []


def _pause(isvc: InferenceService) -> tuple[bool, str | None]:
    value = isvc.annotations.get(ANNOTATION_ROLLOUT_PAUSED, "")
    if value == "true":
        return True, None
    if value.lower() == "freeze":
        return True, "Freeze"
    return False, None


def _history_limit(isvc: InferenceService) -> int | None:
    value = isvc.annotations.get(ANNOTATION_REVISION_HISTORY_LIMIT)
    if value is None or not value.isdigit() or int(value) < 1:
        return None
    return int(value)


def _migration_annotations(isvc: InferenceService, component: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in isvc.annotations.items():
        if not key.startswith(ANNOTATION_MIGRATION_PREFIX):
            continue
        try:
            req = json.loads(value)
        except ValueError:
            continue
        if isinstance(req, Mapping) and req.get("component") == component:
            out[key] = value
    return out


def _rollout_groups(isvc: InferenceService) -> bool:
    rollout = isvc.spec.get("rollout")
    return isinstance(rollout, Mapping) and bool(rollout.get("groups"))


def peer_env_for(
    isvc: InferenceService, component: str, peer_hashes: Mapping[str, str]
) -> dict[str, str]:
    """The peer variables a component's pod template gets under rollout groups.

    Every peer gets ``OME_<PEER>_ENDPOINT`` (its main Service). Only the decoder gets
    ``OME_ENGINE_REVISION_ENDPOINT``: the engine revision its template is rendered with
    (``peer_hashes["engine"]``), so the decoder of a revision talks to the engine of the
    same run. The variables are part of the template, hence of the revision hash; to keep
    that hash a fixed point the dependency is one way only (engine -> decoder): the
    engine's template never names a decoder revision and the router's names none, or the
    engine's hash would depend on the decoder's, which depends on the engine's.
    """
    env: dict[str, str] = {}
    for peer in _PEERS.get(component, ()):
        key = peer.upper()
        env[f"OME_{key}_ENDPOINT"] = f"{isvc.name}-{peer}.{isvc.namespace}.svc.cluster.local"
        if component == "decoder" and peer == "engine" and peer_hashes.get("engine"):
            env[f"OME_{key}_REVISION_ENDPOINT"] = (
                f"{isvc.name}-engine-rev-{peer_hashes['engine']}.{isvc.namespace}.svc.cluster.local"
            )
    return env


def _with_env(template: Mapping[str, Any], env: Mapping[str, str]) -> dict[str, Any]:
    """``template`` with ``env`` appended to every container that does not set the name."""
    out = dict(template)
    spec = dict(out.get("spec") or {})
    containers = []
    for raw in spec.get("containers") or ():
        c = dict(raw)
        own = list(c.get("env") or ())
        names = {e.get("name") for e in own if isinstance(e, Mapping)}
        own.extend({"name": k, "value": v} for k, v in env.items() if k not in names)
        c["env"] = own
        containers.append(c)
    spec["containers"] = containers
    out["spec"] = spec
    return out


_PEERS: Final[Mapping[str, tuple[str, ...]]] = {
    "engine": ("decoder",),
    "decoder": ("engine",),
    "router": ("engine", "decoder"),
}


def _lifecycle(
    isvc: InferenceService,
    runtime: ServingRuntime | None,
    component: str,
    config: ServiceConfig,
) -> tuple[LifecycleSpec | None, int]:
    """The merged lifecycle and ``minReadySeconds`` (a field of the replica spec, not of its
    lifecycle). Raises ``CodecError`` on a lifecycle that does not decode."""
    own = isvc.component(component)
    runtime_lc = runtime.config(component) if runtime is not None else None
    lifecycle = merge_lifecycle(
        own.lifecycle if own is not None else None,
        runtime_lc.lifecycle if runtime_lc is not None else None,
        component=component,
        operator=config.operator,
    )
    if lifecycle is None or lifecycle.min_ready_seconds is None:
        return lifecycle, 0
    min_ready = lifecycle.min_ready_seconds
    lifecycle = evolve(lifecycle, min_ready_seconds=None)
    return (None if lifecycle == LifecycleSpec() else lifecycle), min_ready


def _replica_object(
    isvc: InferenceService, component: str, spec: InferenceReplicaSpec
) -> dict[str, Any]:
    """The InferenceReplica manifest: owned by the ISVC, marked as the controller's write,
    with the ISVC generation and the component's migration requests."""
    prefix = f"{isvc.name}-{component}"
    annotations = {
        ANNOTATION_CONTROLLER_WRITE: "true",
        ANNOTATION_PARENT_GENERATION: str(isvc.generation),
        **_migration_annotations(isvc, component),
    }
    meta = object_meta(isvc, prefix, base_labels(isvc, component))
    meta["annotations"] = dict(sorted(annotations.items()))
    return {
        "apiVersion": API_VERSION,
        "kind": "InferenceReplica",
        "metadata": meta,
        "spec": spec_to_json(spec),
    }


def _gang_condition(spec: InferenceReplicaSpec, crds: frozenset[str],
                    config: ServiceConfig) -> ServiceCondition:
    """``GangSchedulingUnavailable`` for a multi-pod component: the replica's own rule
    (``gang_condition``) on the manager's ``lifecycle.gangScheduling``, the gang APIs the
    cluster offers and the scheduler the pods name, so both conditions agree."""
    status, reason, message = gang_condition(
        config.lifecycle.gang_scheduling,
        multi_pod=True,
        native_api=native_api_of(crds),
        pod_group_crd=CRD_POD_GROUP in crds,
        scheduler=scheduler_name(spec.runners),
    )
    return ServiceCondition(type="GangSchedulingUnavailable", status=status, reason=reason,
                            message=message)


def _extras(
    isvc: InferenceService,
    component: str,
    merged: ComponentSpec,
    spec: InferenceReplicaSpec,
    scale: Scale,
    crds: frozenset[str],
    config: ServiceConfig,
) -> tuple[list[dict[str, Any]], list[ServiceCondition]]:
    """The PodDisruptionBudget (or the condition saying why there is none), the HPA and the
    PodMonitor of an OMENative component."""
    prefix = f"{isvc.name}-{component}"
    labels = base_labels(isvc, component)
    own_selector = {LABEL_REPLICA: prefix}
    objects: list[dict[str, Any]] = []
    conditions: list[ServiceCondition] = []
    policy = pdb_policy(merged, config.pdb_omenative)
    if policy is not None:
        try:
            min_available = omenative_min_available(
                policy, scale.replicas, pods_per_instance(spec.runners)
            )
        except BudgetError as exc:
            conditions.append(
                ServiceCondition(
                    type="PodDisruptionBudgetInvalid",
                    status="True",
                    reason="InvalidBudget",
                    message=f"no PodDisruptionBudget: {exc}",
                )
            )
        else:
            objects.append(  # OME's selector: the component's OMENative pods
                pdb_object(isvc, prefix, labels, labels, {"minAvailable": min_available})
            )
    if scale.hpa:
        target = {"apiVersion": API_VERSION, "kind": "InferenceReplica", "name": prefix}
        objects.append(
            hpa_object(isvc, prefix, labels, target, scale.low, scale.high, merged, config)
        )
    elif scale.klass == "keda" and CRD_SCALED_OBJECT in crds:
        target = {"apiVersion": API_VERSION, "kind": "InferenceReplica", "name": prefix}
        objects.append(scaled_object(isvc, prefix, labels, target, scale.low, scale.high, merged))
    if CRD_POD_MONITOR in crds:
        lead_template = spec.runners[0].template
        objects.append(pod_monitor(isvc, prefix, labels, own_selector, lead_template, config))
    return objects, conditions


def render_omenative(
    isvc: InferenceService,
    runtime: ServingRuntime | None,
    component: str,
    merged: ComponentSpec,
    res: ModeResolution,
    crds: frozenset[str],
    config: ServiceConfig,
    current_replicas: Mapping[str, int],
    peer_hashes: Mapping[str, str],
    collision_count: int | None,
    *,
    model: BaseModel | None = None,
    accelerator: Accelerator | None = None,
) -> ComponentPlan:
    """An OMENative component's plan, or a blocked plan saying what is wrong with it;
    ``model``: the BaseModel / ClusterBaseModel its pods are rendered with."""
    prefix = f"{isvc.name}-{component}"
    multi = (merged.leader is not None or merged.worker is not None) and component != "router"
    problem = pairing_problem(merged) if multi else None
    if problem is not None:
        return blocked_plan(
            component,
            res,
            "InvalidLeaderWorkerPairing",
            f"InvalidLeaderWorkerPairing: {component}: {problem}",
        )
    runners = component_runners(isvc, runtime, component, merged, multi_pod=multi)
    runners = finish_runners(runners, model, isvc, component, merged, accelerator)
    if component == "router":  # OME runs the router as its own account (router_rbac.py)
        account = router_account(isvc)
        runners = tuple(evolve(r, template=with_account(r.template, account)) for r in runners)
    if _rollout_groups(isvc):
        env = peer_env_for(isvc, component, peer_hashes)
        runners = tuple(evolve(r, template=_with_env(r.template, env)) for r in runners)
    try:
        lifecycle, min_ready = _lifecycle(isvc, runtime, component, config)
    except CodecError as exc:
        return blocked_plan(component, res, "InvalidLifecycle", str(exc))
    scale = resolve_scale(
        isvc, merged, component, at_least_one=True, config=config,
        current_replicas=current_replicas, legacy=False,
    )
    paused, pause_mode = _pause(isvc)
    spec = InferenceReplicaSpec(
        component=component,
        runners=runners,
        replicas=scale.replicas,
        min_ready_seconds=min_ready,
        topology_key=merged.topology_key,
        topology_spread=merged.topology_spread,
        topology_spread_key=merged.topology_spread_key,
        pairing_protocol=isvc.pairing_protocol if component in ("engine", "decoder") else None,
        lifecycle=lifecycle,
        paused=paused,
        pause_mode=pause_mode,
        revision_history_limit=_history_limit(isvc),
        parent_ref=ParentRef(name=isvc.name),
    )
    replica_view = InferenceReplica(
        metadata=ObjectMeta(name=prefix, namespace=isvc.namespace), spec=spec
    )
    errors = validate_replica(replica_view)
    if errors:
        reason = errors[0].split(":", 1)[0]
        return blocked_plan(component, res, reason, "; ".join(errors))

    labels = base_labels(isvc, component)
    replica = _replica_object(isvc, component, spec)
    selector = service_selector(isvc, component, multi_pod=multi)
    extras, conditions = _extras(isvc, component, merged, spec, scale, crds, config)
    objects = [
        *(router_rbac_objects(isvc, labels) if component == "router" else ()),
        replica,
        traffic_service(isvc, prefix, labels, selector, runners[0].template, config),
        headless_service_object(isvc, prefix, labels),
        *extras,
    ]
    if multi:
        conditions.append(_gang_condition(spec, crds, config))
    return ComponentPlan(
        component=component,
        mode=res.mode,
        mode_source=res.source,
        objects=tuple(objects),
        replica=replica,
        replicas=scale.replicas,
        replicas_source=scale.source,
        multi_pod=multi,
        conditions=tuple(conditions),
        notes=(f"replicas {scale.replicas} from {scale.source}",),
        revision_hash=spec_revision_hash(spec, collision_count),
    )
