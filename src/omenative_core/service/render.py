"""InferenceService -> the objects each component needs, as plain JSON manifests.

``render_service(isvc, runtimes, crds_present, config)`` is pure: the same inputs always
give the same ``ServicePlan``. Per component, by resolved mode:

* **OMENative**: the InferenceReplica ``{isvc}-{component}`` (owned by the ISVC, annotated
  ``ome.io/controller-write: "true"`` and ``ome.io/parent-generation``), the traffic Service
  ``{isvc}-{component}``, the headless Service ``{isvc}-{component}-headless``, a
  PodDisruptionBudget (integer ``minAvailable`` in pods, one evictable pod per Instance that
  may be disrupted), an autoscaling/v2 HPA on the
  InferenceReplica's scale subresource when ``maxReplicas > minReplicas``, and a PodMonitor
  when that CRD exists. Multi-pod components also get the condition
  ``GangSchedulingUnavailable`` (True when the PodGroup CRD is absent).
* **RawDeployment**: a Deployment ``{isvc}-{component}``, its Service, PDB, HPA and
  PodMonitor.
* **MultiNode**: a LeaderWorkerSet ``lws-{isvc}-{component}`` and its Service when the
  LeaderWorkerSet CRD exists; else no object and the condition ``MultiNodeUnavailable``.

A component that cannot be rendered (its runtime is missing, its annotation names a mode
it cannot run in, its leader/worker pair is broken, a name is too long) is *blocked*: it
has no objects and a ``{Component}Ready=False`` condition saying why. The shell must then
leave that component's existing objects alone (re-rendering without the runtime would be a
spurious new revision). As in OME, a component whose annotation asks for an impossible mode
also blocks the components after it (engine, then decoder, then router).

Replica counts: ``minReplicas`` (default 1; an OMENative component keeps at least one
Instance). When an autoscaler owns the count (``maxReplicas > minReplicas``), the count the
shell passes in ``current_replicas`` (the live ``spec.replicas``) is kept, clamped to the
bounds, so a re-render never fights the HPA.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from attrs import evolve, field, frozen

from omenative_core.codec import CodecError, spec_to_json
from omenative_core.labels import (
    LABEL_COMPONENT,
    LABEL_ISVC,
    LABEL_MANAGED_BY,
    LABEL_REPLICA,
    LABEL_RUNNER,
    MANAGED_BY,
)
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.spec import (
    InferenceReplica,
    InferenceReplicaSpec,
    IntOrStr,
    LifecycleSpec,
    ObjectMeta,
    ParentRef,
)
from omenative_core.policy import BudgetError, resolve_budget
from omenative_core.render import (
    MAX_NAME_LENGTH,
    headless_service_name,
    pods_per_instance,
    validate_replica,
)
from omenative_core.revisions import revision_hash
from omenative_core.rollout.spec import RolloutConfig
from omenative_core.service.merge import (
    MAIN_CONTAINER,
    OperatorDefaults,
    component_runners,
    effective_component,
    merge_lifecycle,
)
from omenative_core.service.model import (
    API_VERSION,
    ISVC_KIND,
    ComponentSpec,
    InferenceService,
    RuntimeRef,
    ServingRuntime,
)
from omenative_core.service.modes import (
    MODE_MULTI_NODE,
    MODE_OMENATIVE,
    MODE_RAW,
    MODE_VIRTUAL,
    ModeResolution,
    explain_mode,
)

__all__ = [
    "ANNOTATION_AUTOSCALER_CLASS",
    "ANNOTATION_CONTROLLER_WRITE",
    "ANNOTATION_MIGRATION_PREFIX",
    "ANNOTATION_PARENT_GENERATION",
    "ANNOTATION_REVISION_HISTORY_LIMIT",
    "ANNOTATION_ROLLOUT_PAUSED",
    "CRD_LEADER_WORKER_SET",
    "CRD_POD_GROUP",
    "CRD_POD_MONITOR",
    "ComponentPlan",
    "PdbPolicy",
    "ServiceCondition",
    "ServiceConfig",
    "ServicePlan",
    "condition_type",
    "find_runtime",
    "isvc_owner_reference",
    "omenative_min_available",
    "peer_env_for",
    "render_service",
    "service_selector",
]

CRD_LEADER_WORKER_SET: Final = "leaderworkersets.leaderworkerset.x-k8s.io"
"""The LeaderWorkerSet CRD (MultiNode components need it)."""
CRD_POD_MONITOR: Final = "podmonitors.monitoring.coreos.com"
"""The Prometheus operator's PodMonitor CRD."""
CRD_POD_GROUP: Final = "podgroups.scheduling.x-k8s.io"
"""The scheduler-plugins PodGroup CRD (gang scheduling)."""

ANNOTATION_CONTROLLER_WRITE: Final = "ome.io/controller-write"
"""On a projected InferenceReplica: written by the ISVC controller."""
ANNOTATION_PARENT_GENERATION: Final = "ome.io/parent-generation"
"""On a projected InferenceReplica: the ISVC generation it was rendered from."""
ANNOTATION_MIGRATION_PREFIX: Final = "ome.io/migration-request-v1-"
"""An ISVC migration request; forwarded to the component's InferenceReplica."""
ANNOTATION_ROLLOUT_PAUSED: Final = "ome.io/rollout-paused"
"""On the ISVC: ``"true"`` pauses every OMENative component, ``freeze`` also stops repair."""
ANNOTATION_REVISION_HISTORY_LIMIT: Final = "ome.io/revision-history-limit"
"""On the ISVC: overrides the cluster ``revisionHistoryLimit``."""
ANNOTATION_AUTOSCALER_CLASS: Final = "ome.io/autoscalerClass"
"""On the ISVC (legacy): ``hpa`` (default), ``keda`` or ``external``."""

_LWS_API: Final = "leaderworkerset.x-k8s.io/v1"
_LWS_NAME_LABEL: Final = "leaderworkerset.sigs.k8s.io/name"
_LWS_WORKER_INDEX_LABEL: Final = "leaderworkerset.sigs.k8s.io/worker-index"
_RAW_APP_LABEL: Final = "app"
_NO_HPA_CLASSES: Final = frozenset({"keda", "external", "none"})


# ---------------------------------------------------------------------------- inputs


@frozen(kw_only=True)
class PdbPolicy:
    """A PodDisruptionBudget policy: exactly one of ``min_available`` / ``max_unavailable``
    (a count, or ``"N%"``), counted in Instances for OMENative."""

    min_available: IntOrStr | None = None
    max_unavailable: IntOrStr | None = None


def _default_pdb() -> PdbPolicy:
    return PdbPolicy(max_unavailable=1)


@frozen(kw_only=True)
class ServiceConfig:
    """The operator settings rendering reads; the defaults are the ome-resources chart's.

    ``pdb_omenative`` / ``pdb_raw_deployment`` None means no PodDisruptionBudget unless
    the component sets one. ``rollout``: the settings rollout groups read. All of it comes
    from the ``inferenceservice-config`` ConfigMap (``parse_service_config``).
    """

    lifecycle: LifecycleConfig = field(factory=LifecycleConfig)
    operator: OperatorDefaults = field(factory=OperatorDefaults)
    pdb_omenative: PdbPolicy | None = field(factory=_default_pdb)
    pdb_raw_deployment: PdbPolicy | None = field(factory=_default_pdb)
    default_min_replicas: int = 1
    hpa_cpu_utilization: int = 80
    default_port: int = 8080
    rollout: RolloutConfig = field(factory=RolloutConfig)


# ---------------------------------------------------------------------------- outputs


@frozen(kw_only=True)
class ServiceCondition:
    """A condition the plan reports: ``{Component}Ready`` when a component is blocked, or
    a component-scoped one (``GangSchedulingUnavailable``, ``MultiNodeUnavailable``)."""

    type: str
    status: str
    reason: str
    message: str = ""


@frozen(kw_only=True)
class ComponentPlan:
    """What one component needs. ``blocked``: nothing could be rendered, keep what exists.

    ``revision_hash``: for an OMENative component, the hash of the revision its
    InferenceReplica spec renders (salted with the ``collision_counts`` passed in), so the
    shell knows the revision before the manager has seen the spec.
    """

    component: str
    mode: str
    mode_source: str = ""
    objects: tuple[dict[str, Any], ...] = ()
    replica: dict[str, Any] | None = None
    replicas: int | None = None
    replicas_source: str = ""
    multi_pod: bool = False
    blocked: bool = False
    ready: ServiceCondition | None = None
    conditions: tuple[ServiceCondition, ...] = ()
    notes: tuple[str, ...] = ()
    revision_hash: str = ""

    def object(self, kind: str) -> dict[str, Any] | None:
        """The first rendered object of ``kind`` (``Service`` is the traffic Service)."""
        return next((o for o in self.objects if o.get("kind") == kind), None)


@frozen(kw_only=True)
class ServicePlan:
    """Everything one InferenceService needs, per component in reconcile order."""

    isvc: str
    namespace: str
    runtime: RuntimeRef | None = None
    components: tuple[ComponentPlan, ...] = ()
    conditions: tuple[ServiceCondition, ...] = ()

    def component(self, name: str) -> ComponentPlan | None:
        """The plan of ``name``, or None when the ISVC has no such component."""
        return next((c for c in self.components if c.component == name), None)

    @property
    def objects(self) -> tuple[dict[str, Any], ...]:
        """Every object to apply, component by component."""
        return tuple(o for c in self.components for o in c.objects)


def condition_type(component: str) -> str:
    """``EngineReady``, ``DecoderReady`` or ``RouterReady``."""
    return f"{component[:1].upper()}{component[1:]}Ready"


# ---------------------------------------------------------------------------- helpers


def isvc_owner_reference(isvc: InferenceService) -> dict[str, Any]:
    """The controller owner reference to ``isvc``."""
    return {
        "apiVersion": API_VERSION,
        "kind": ISVC_KIND,
        "name": isvc.name,
        "uid": isvc.uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def find_runtime(
    isvc: InferenceService, runtimes: Iterable[ServingRuntime], ref: RuntimeRef | None = None
) -> ServingRuntime | None:
    """The runtime ``ref`` (default ``spec.runtime``) names among ``runtimes``: same kind
    and name, and for a ServingRuntime the ISVC's namespace."""
    ref = ref or isvc.runtime_ref
    if ref is None:
        return None
    for rt in runtimes:
        if rt.kind != ref.kind or rt.name != ref.name:
            continue
        if rt.kind == "ServingRuntime" and rt.namespace != isvc.namespace:
            continue
        return rt
    return None


def _base_labels(isvc: InferenceService, component: str) -> dict[str, str]:
    return {LABEL_ISVC: isvc.name, LABEL_COMPONENT: component, LABEL_MANAGED_BY: MANAGED_BY}


def service_selector(isvc: InferenceService, component: str, *, multi_pod: bool) -> dict[str, str]:
    """The traffic Service's selector for an OMENative component: OME's three labels
    (``ome.io/inferenceservice``, ``component``, ``ome.io/managed-by=OMENative``), plus
    ``ome.io/runner=leader`` for a multi-pod component whose ``worker`` the ISVC itself
    sets (when only the runtime sets it, workers are selected too, as in OME)."""
    selector = _base_labels(isvc, component)
    own = isvc.component(component)
    if multi_pod and own is not None and own.worker is not None:
        selector[LABEL_RUNNER] = "leader"
    return selector


def _meta(isvc: InferenceService, name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": isvc.namespace,
        "labels": dict(labels),
        "ownerReferences": [isvc_owner_reference(isvc)],
    }


def _main_container(template: Mapping[str, Any]) -> Mapping[str, Any] | None:
    spec = template.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if not isinstance(containers, list) or not containers:
        return None
    for c in containers:
        if isinstance(c, Mapping) and c.get("name") == MAIN_CONTAINER:
            return c
    first = containers[0]
    return first if isinstance(first, Mapping) else None


def _container_ports(template: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    main = _main_container(template)
    ports = main.get("ports") if main is not None else None
    return [
        p for p in ports or [] if isinstance(p, Mapping) and isinstance(p.get("containerPort"), int)
    ]


def _service_ports(template: Mapping[str, Any], default_port: int) -> list[dict[str, Any]]:
    ports = _container_ports(template)
    if not ports:
        return [
            {"name": "http", "port": default_port, "targetPort": default_port, "protocol": "TCP"}
        ]
    out = []
    for n, p in enumerate(ports):
        port = int(p["containerPort"])
        name = p.get("name") if isinstance(p.get("name"), str) else None
        out.append(
            {
                "name": name or f"port-{n}",
                "port": port,
                "targetPort": port,
                "protocol": p.get("protocol") if isinstance(p.get("protocol"), str) else "TCP",
            }
        )
    return out


def _traffic_service(
    isvc: InferenceService,
    name: str,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    template: Mapping[str, Any],
    config: ServiceConfig,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(isvc, name, labels),
        "spec": {
            "selector": dict(selector),
            "ports": _service_ports(template, config.default_port),
        },
    }


def _headless_service(
    isvc: InferenceService, prefix: str, labels: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(isvc, headless_service_name(prefix), labels),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {LABEL_REPLICA: prefix},
        },
    }


def _pod_monitor(
    isvc: InferenceService,
    prefix: str,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    template: Mapping[str, Any],
    config: ServiceConfig,
) -> dict[str, Any]:
    ports = _container_ports(template)
    named = [p for p in ports if isinstance(p.get("name"), str) and p["name"]]
    metrics = next((p for p in named if p["name"] == "metrics"), named[0] if named else None)
    endpoint: dict[str, Any] = {"path": "/metrics"}
    if metrics is not None:
        endpoint["port"] = metrics["name"]
    else:
        endpoint["targetPort"] = int(ports[0]["containerPort"]) if ports else config.default_port
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": _meta(isvc, prefix, labels),
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "podMetricsEndpoints": [endpoint],
        },
    }


def _hpa_metrics(merged: ComponentSpec, config: ServiceConfig) -> list[Any]:
    autoscaler = merged.autoscaler or {}
    hpa = autoscaler.get("hpa")
    if isinstance(hpa, Mapping) and isinstance(hpa.get("metrics"), list) and hpa["metrics"]:
        return list(hpa["metrics"])
    metric = merged.raw.get("scaleMetric")
    target = merged.raw.get("scaleTarget")
    resource = metric if metric in ("cpu", "memory") else "cpu"
    utilization = (
        target
        if isinstance(target, int) and not isinstance(target, bool) and metric in ("cpu", "memory")
        else config.hpa_cpu_utilization
    )
    return [
        {
            "type": "Resource",
            "resource": {
                "name": resource,
                "target": {"type": "Utilization", "averageUtilization": utilization},
            },
        }
    ]


def _hpa(
    isvc: InferenceService,
    prefix: str,
    labels: Mapping[str, str],
    target: Mapping[str, str],
    low: int,
    high: int,
    merged: ComponentSpec,
    config: ServiceConfig,
) -> dict[str, Any]:
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(isvc, prefix, labels),
        "spec": {
            "scaleTargetRef": dict(target),
            "minReplicas": low,
            "maxReplicas": high,
            "metrics": _hpa_metrics(merged, config),
        },
    }


def _pdb_policy(merged: ComponentSpec, fallback: PdbPolicy | None) -> PdbPolicy | None:
    own = merged.pod_disruption_budget
    if own is not None and (
        own.get("minAvailable") is not None or own.get("maxUnavailable") is not None
    ):
        return PdbPolicy(
            min_available=own.get("minAvailable"), max_unavailable=own.get("maxUnavailable")
        )
    return fallback


def omenative_min_available(policy: PdbPolicy, instances: int, pods_per_instance: int) -> int:
    """OMENative PDB ``minAvailable`` in pods, so that evictions disrupt at most the budget
    of *Instances*: every pod but one per Instance that may go. Losing one pod disrupts a
    whole gang, so the pods an eviction may take must be counted in Instances, not
    ``budget x pods per Instance`` (which lets two pods of two different gangs go at once).
    Percentages round up (of the unavailable Instances for ``max_unavailable``, of the
    available ones for ``min_available``). ``BudgetError`` on a bad value."""
    if policy.min_available is not None and policy.max_unavailable is not None:
        raise BudgetError("set only one of minAvailable and maxUnavailable")
    if policy.min_available is not None:
        keep = min(resolve_budget(policy.min_available, instances), instances)
    elif policy.max_unavailable is not None:
        keep = max(instances - resolve_budget(policy.max_unavailable, instances), 0)
    else:
        raise BudgetError("set one of minAvailable and maxUnavailable")
    return instances * pods_per_instance - (instances - keep)


def _pdb(
    isvc: InferenceService,
    prefix: str,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    budget: Mapping[str, IntOrStr],
) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(isvc, prefix, labels),
        "spec": {**budget, "selector": {"matchLabels": dict(selector)}},
    }


def _autoscaler_class(isvc: InferenceService, merged: ComponentSpec) -> str:
    own = merged.autoscaler
    value = own.get("class") if own is not None else None
    if not isinstance(value, str) or not value:
        value = isvc.annotations.get(ANNOTATION_AUTOSCALER_CLASS, "hpa")
    return value.lower()


@frozen
class _Scale:
    low: int
    high: int
    replicas: int
    source: str
    hpa: bool


def _scale(
    isvc: InferenceService,
    merged: ComponentSpec,
    component: str,
    *,
    at_least_one: bool,
    config: ServiceConfig,
    current_replicas: Mapping[str, int],
) -> _Scale:
    low = merged.min_replicas if merged.min_replicas is not None else config.default_min_replicas
    low = max(low, 1 if at_least_one else 0)
    high = merged.max_replicas or 0
    high = max(high, low)
    replicas, source = low, "minReplicas"
    if high > low:
        current = current_replicas.get(component)
        if current is not None:
            replicas = min(max(current, low), high)
            source = "existing" if replicas == current else "existing (clamped)"
    hpa = high > low and _autoscaler_class(isvc, merged) not in _NO_HPA_CLASSES
    return _Scale(low, high, replicas, source, hpa)


def _blocked(
    component: str, res: ModeResolution | None, reason: str, message: str
) -> ComponentPlan:
    return ComponentPlan(
        component=component,
        mode=res.mode if res is not None else "",
        mode_source=res.source if res is not None else "",
        blocked=True,
        ready=ServiceCondition(
            type=condition_type(component), status="False", reason=reason, message=message
        ),
    )


def _pairing_problem(merged: ComponentSpec) -> str | None:
    leader, worker = merged.leader, merged.worker
    if leader is not None and worker is None:
        return "LeaderRequiresWorker: a leader is set but no worker"
    if worker is not None and leader is None:
        return "WorkerRequiresLeader: a worker is set but no leader"
    if worker is not None and worker.size is not None and worker.size < 1:
        return f"WorkerSizeMustBePositive: worker.size is {worker.size}; it must be >= 1"
    return None


def _name_problem(name: str, what: str) -> str | None:
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"NameTooLong: {what} {name!r} is {len(name)} characters; Kubernetes allows "
            f"{MAX_NAME_LENGTH}"
        )
    return None


# ---------------------------------------------------------------------------- OMENative


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


def _render_omenative(
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
) -> ComponentPlan:
    prefix = f"{isvc.name}-{component}"
    multi = merged.leader is not None or merged.worker is not None
    if multi and component == "router":
        multi = False
    problem = _pairing_problem(merged) if multi else None
    if problem is not None:
        return _blocked(
            component,
            res,
            "InvalidLeaderWorkerPairing",
            f"InvalidLeaderWorkerPairing: {component}: {problem}",
        )
    runners = component_runners(isvc, runtime, component, merged, multi_pod=multi)
    if _rollout_groups(isvc):
        env = peer_env_for(isvc, component, peer_hashes)
        runners = tuple(evolve(r, template=_with_env(r.template, env)) for r in runners)
    own = isvc.component(component)
    runtime_lc = runtime.config(component) if runtime is not None else None
    try:
        lifecycle = merge_lifecycle(
            own.lifecycle if own is not None else None,
            runtime_lc.lifecycle if runtime_lc is not None else None,
            component=component,
            operator=config.operator,
        )
    except CodecError as exc:
        return _blocked(component, res, "InvalidLifecycle", str(exc))
    min_ready = 0
    if lifecycle is not None and lifecycle.min_ready_seconds is not None:
        min_ready = lifecycle.min_ready_seconds
        lifecycle = evolve(lifecycle, min_ready_seconds=None)
        if lifecycle == LifecycleSpec():
            lifecycle = None
    scale = _scale(
        isvc, merged, component, at_least_one=True, config=config, current_replicas=current_replicas
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
        return _blocked(component, res, reason, "; ".join(errors))

    labels = _base_labels(isvc, component)
    annotations = {
        ANNOTATION_CONTROLLER_WRITE: "true",
        ANNOTATION_PARENT_GENERATION: str(isvc.generation),
        **_migration_annotations(isvc, component),
    }
    meta = _meta(isvc, prefix, labels)
    meta["annotations"] = dict(sorted(annotations.items()))
    replica = {
        "apiVersion": API_VERSION,
        "kind": "InferenceReplica",
        "metadata": meta,
        "spec": spec_to_json(spec),
    }
    lead_template = runners[0].template
    pods = pods_per_instance(runners)
    own_selector = {LABEL_REPLICA: prefix}
    objects: list[dict[str, Any]] = [
        replica,
        _traffic_service(
            isvc,
            prefix,
            labels,
            service_selector(isvc, component, multi_pod=multi),
            lead_template,
            config,
        ),
        _headless_service(isvc, prefix, labels),
    ]
    conditions: list[ServiceCondition] = []
    notes = [f"replicas {scale.replicas} from {scale.source}"]
    policy = _pdb_policy(merged, config.pdb_omenative)
    if policy is not None:
        try:
            min_available = omenative_min_available(policy, scale.replicas, pods)
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
            objects.append(
                _pdb(isvc, prefix, labels, own_selector, {"minAvailable": min_available})
            )
    if scale.hpa:
        target = {"apiVersion": API_VERSION, "kind": "InferenceReplica", "name": prefix}
        objects.append(_hpa(isvc, prefix, labels, target, scale.low, scale.high, merged, config))
    if CRD_POD_MONITOR in crds:
        objects.append(_pod_monitor(isvc, prefix, labels, own_selector, lead_template, config))
    if multi:
        if CRD_POD_GROUP in crds:
            conditions.append(
                ServiceCondition(
                    type="GangSchedulingUnavailable",
                    status="False",
                    reason="GangSchedulingAvailable",
                    message="the scheduler-plugins PodGroup CRD is installed",
                )
            )
        else:
            conditions.append(
                ServiceCondition(
                    type="GangSchedulingUnavailable",
                    status="True",
                    reason="PodGroupCRDNotInstalled",
                    message="the scheduler-plugins PodGroup CRD is not installed, so a multi-pod "
                    "Instance's pods may schedule partially",
                )
            )
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
        notes=tuple(notes),
        revision_hash=revision_hash(spec.runners, spec.pairing_protocol, collision_count),
    )


# ---------------------------------------------------------------------------- RawDeployment


def _with_labels(template: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    meta = dict(template.get("metadata") or {})
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    return {**template, "metadata": meta}


def _render_raw(
    isvc: InferenceService,
    runtime: ServingRuntime | None,
    component: str,
    merged: ComponentSpec,
    res: ModeResolution,
    crds: frozenset[str],
    config: ServiceConfig,
    current_replicas: Mapping[str, int],
) -> ComponentPlan:
    prefix = f"{isvc.name}-{component}"
    problem = _name_problem(prefix, "Deployment name")
    if problem is not None:
        return _blocked(component, res, "NameTooLong", problem)
    (runner,) = component_runners(isvc, runtime, component, merged, multi_pod=False)
    labels = {LABEL_ISVC: isvc.name, LABEL_COMPONENT: component}
    selector = {**labels, _RAW_APP_LABEL: prefix}
    template = _with_labels(runner.template, selector)
    scale = _scale(
        isvc,
        merged,
        component,
        at_least_one=False,
        config=config,
        current_replicas=current_replicas,
    )
    spec: dict[str, Any] = {
        "replicas": scale.replicas,
        "selector": {"matchLabels": dict(selector)},
        "template": template,
    }
    strategy = merged.raw.get("deploymentStrategy")
    if isinstance(strategy, Mapping):
        spec["strategy"] = dict(strategy)
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(isvc, prefix, labels),
            "spec": spec,
        },
        _traffic_service(isvc, prefix, labels, selector, template, config),
    ]
    conditions: list[ServiceCondition] = []
    policy = _pdb_policy(merged, config.pdb_raw_deployment)
    if policy is not None:
        if (policy.min_available is None) == (policy.max_unavailable is None):
            conditions.append(
                ServiceCondition(
                    type="PodDisruptionBudgetInvalid",
                    status="True",
                    reason="InvalidBudget",
                    message="no PodDisruptionBudget: set exactly one of minAvailable and "
                    "maxUnavailable",
                )
            )
        else:
            budget: dict[str, IntOrStr] = (
                {"minAvailable": policy.min_available}
                if policy.min_available is not None
                else {"maxUnavailable": policy.max_unavailable}  # type: ignore[dict-item]
            )
            objects.append(_pdb(isvc, prefix, labels, selector, budget))
    if scale.hpa:
        target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": prefix}
        objects.append(_hpa(isvc, prefix, labels, target, scale.low, scale.high, merged, config))
    if CRD_POD_MONITOR in crds:
        objects.append(_pod_monitor(isvc, prefix, labels, selector, template, config))
    notes = [f"replicas {scale.replicas} from {scale.source}"]
    if merged.leader is not None or merged.worker is not None:
        notes.append("leader/worker are ignored in RawDeployment: one pod per replica")
    return ComponentPlan(
        component=component,
        mode=res.mode,
        mode_source=res.source,
        objects=tuple(objects),
        replicas=scale.replicas,
        replicas_source=scale.source,
        conditions=tuple(conditions),
        notes=tuple(notes),
    )


# ---------------------------------------------------------------------------- MultiNode


def _render_multinode(
    isvc: InferenceService,
    runtime: ServingRuntime | None,
    component: str,
    merged: ComponentSpec,
    res: ModeResolution,
    crds: frozenset[str],
    config: ServiceConfig,
) -> ComponentPlan:
    prefix = f"{isvc.name}-{component}"
    if CRD_LEADER_WORKER_SET not in crds:
        message = (
            f"{component} is MultiNode but the LeaderWorkerSet CRD "
            f"({CRD_LEADER_WORKER_SET}) is not installed"
        )
        plan = _blocked(component, res, "LeaderWorkerSetCRDNotInstalled", message)
        return evolve(
            plan,
            conditions=(
                ServiceCondition(
                    type="MultiNodeUnavailable",
                    status="True",
                    reason="LeaderWorkerSetCRDNotInstalled",
                    message=message,
                ),
            ),
        )
    problem = _pairing_problem(merged) or (
        None
        if merged.worker is not None
        else "WorkerRequiresLeader: MultiNode needs a leader and a worker"
    )
    if problem is not None:
        return _blocked(
            component,
            res,
            "InvalidLeaderWorkerPairing",
            f"InvalidLeaderWorkerPairing: {component}: {problem}",
        )
    name = f"lws-{prefix}"
    too_long = _name_problem(name, "LeaderWorkerSet name")
    if too_long is not None:
        return _blocked(component, res, "NameTooLong", too_long)
    leader, worker = component_runners(isvc, runtime, component, merged, multi_pod=True)
    labels = {LABEL_ISVC: isvc.name, LABEL_COMPONENT: component}
    scale = _scale(isvc, merged, component, at_least_one=True, config=config, current_replicas={})
    lws = {
        "apiVersion": _LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": _meta(isvc, name, labels),
        "spec": {
            "replicas": scale.low,
            "leaderWorkerTemplate": {
                "size": 1 + worker.size,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "leaderTemplate": _with_labels(leader.template, labels),
                "workerTemplate": _with_labels(worker.template, labels),
            },
        },
    }
    selector = {_LWS_NAME_LABEL: name, _LWS_WORKER_INDEX_LABEL: "0"}
    service = _traffic_service(isvc, prefix, labels, selector, leader.template, config)
    return ComponentPlan(
        component=component,
        mode=res.mode,
        mode_source=res.source,
        objects=(lws, service),
        replicas=scale.low,
        replicas_source="minReplicas",
        multi_pod=True,
        notes=("MultiNode gets no PodDisruptionBudget or autoscaler",),
    )


# ---------------------------------------------------------------------------- entry point


def _active_components(isvc: InferenceService, runtime: ServingRuntime | None) -> tuple[str, ...]:
    declared = isvc.declared_components
    if declared or runtime is None:
        return declared
    return tuple(c for c in ("engine", "decoder", "router") if runtime.config(c) is not None)


def render_service(
    isvc: InferenceService,
    runtimes: Sequence[ServingRuntime],
    crds_present: Iterable[str],
    config: ServiceConfig | None = None,
    *,
    auto_selected: RuntimeRef | None = None,
    current_replicas: Mapping[str, int] | None = None,
    collision_counts: Mapping[str, int] | None = None,
) -> ServicePlan:
    """Everything ``isvc`` needs, per component.

    ``runtimes``: the (Cluster)ServingRuntimes the shell can see; ``spec.runtime`` picks
    one, or ``auto_selected`` when the ISVC names none (runtime auto-selection is the
    shell's). ``crds_present``: CRD names (``CRD_LEADER_WORKER_SET``, ``CRD_POD_MONITOR``,
    ``CRD_POD_GROUP``). ``current_replicas``: the live ``spec.replicas`` per component,
    kept when an autoscaler owns the count. ``collision_counts``: each InferenceReplica's
    ``status.collisionCount``, salting ``ComponentPlan.revision_hash`` as the manager does.
    Under ``spec.rollout`` the components get the peer variables of ``peer_env_for``
    (the decoder's names the engine revision rendered in this same pass). A component
    runs when the ISVC declares it (``engine: {}`` is enough); an ISVC that declares none
    runs every component its runtime configures.
    """
    config = config or ServiceConfig()
    crds = frozenset(crds_present)
    current = current_replicas or {}
    if isvc.annotations.get("ome.io/deploymentMode") == MODE_VIRTUAL:
        return ServicePlan(
            isvc=isvc.name,
            namespace=isvc.namespace,
            conditions=(
                ServiceCondition(
                    type="Ready",
                    status="True",
                    reason="VirtualDeployment",
                    message="VirtualDeployment: no workload, Service or ingress is created",
                ),
            ),
        )
    ref = isvc.runtime_ref or auto_selected
    runtime = find_runtime(isvc, runtimes, ref) if ref is not None else None
    runtime_problem: tuple[str, str] | None = None
    if ref is not None and runtime is None:
        runtime_problem = ("RuntimeNotFound", f"{ref.kind} {ref.name!r} not found")
    elif runtime is not None and runtime.disabled:
        runtime_problem = ("RuntimeDisabled", f"{runtime.kind} {runtime.name!r} is disabled")
    names = isvc.declared_components if runtime_problem else _active_components(isvc, runtime)

    plans: list[ComponentPlan] = []
    hashes: dict[str, str] = {}
    collisions = collision_counts or {}
    failed: str | None = None
    for component in names:
        if runtime_problem is not None:
            plans.append(_blocked(component, None, *runtime_problem))
            continue
        res = explain_mode(isvc, runtime, component)
        if failed is not None:
            plans.append(
                _blocked(
                    component,
                    res,
                    "InvalidDeploymentMode",
                    f"not reconciled: an earlier component failed ({failed})",
                )
            )
            continue
        if res.error is not None:
            failed = res.error
            plans.append(_blocked(component, res, "InvalidDeploymentMode", res.error))
            continue
        merged = effective_component(isvc, runtime, component)
        assert merged is not None
        if res.mode == MODE_OMENATIVE:
            cp = _render_omenative(
                isvc,
                runtime,
                component,
                merged,
                res,
                crds,
                config,
                current,
                hashes,
                collisions.get(component),
            )
            if cp.revision_hash:
                hashes[component] = cp.revision_hash
            plans.append(cp)
        elif res.mode == MODE_MULTI_NODE:
            plans.append(_render_multinode(isvc, runtime, component, merged, res, crds, config))
        else:
            assert res.mode == MODE_RAW
            plans.append(_render_raw(isvc, runtime, component, merged, res, crds, config, current))
    conditions: tuple[ServiceCondition, ...] = ()
    if runtime_problem is not None and not plans:
        conditions = (
            ServiceCondition(
                type="Ready", status="False", reason=runtime_problem[0], message=runtime_problem[1]
            ),
        )
    return ServicePlan(
        isvc=isvc.name,
        namespace=isvc.namespace,
        runtime=ref,
        components=tuple(plans),
        conditions=conditions,
    )
