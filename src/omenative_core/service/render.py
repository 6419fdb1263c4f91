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
  ``GangSchedulingUnavailable``, by the InferenceReplica's own rule (``gang_condition``).
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

from collections.abc import Iterable, Mapping, Sequence

from attrs import evolve

from omenative_core.service.merge import (
    effective_component,
)
from omenative_core.service.model import (
    InferenceService,
    RuntimeRef,
    ServingRuntime,
)
from omenative_core.service.modes import (
    MODE_MULTI_NODE,
    MODE_OMENATIVE,
    MODE_RAW,
    MODE_VIRTUAL,
    explain_mode,
)
from omenative_core.service.objects import (
    external_service,
    find_runtime,
    isvc_owner_reference,
    omenative_min_available,
    service_selector,
)
from omenative_core.service.omenative import (
    peer_env_for,
    render_omenative,
)
from omenative_core.service.plan import (
    ANNOTATION_AUTOSCALER_CLASS,
    ANNOTATION_CONTROLLER_WRITE,
    ANNOTATION_MIGRATION_PREFIX,
    ANNOTATION_PARENT_GENERATION,
    ANNOTATION_REVISION_HISTORY_LIMIT,
    ANNOTATION_ROLLOUT_PAUSED,
    API_NATIVE_GANG,
    CRD_LEADER_WORKER_SET,
    CRD_POD_GROUP,
    CRD_POD_MONITOR,
    ComponentPlan,
    PdbPolicy,
    ServiceCondition,
    ServiceConfig,
    ServicePlan,
    blocked_plan,
    condition_type,
)
from omenative_core.service.workloads import (
    render_multinode,
    render_raw,
)

__all__ = [
    "ANNOTATION_AUTOSCALER_CLASS",
    "ANNOTATION_CONTROLLER_WRITE",
    "ANNOTATION_MIGRATION_PREFIX",
    "ANNOTATION_PARENT_GENERATION",
    "ANNOTATION_REVISION_HISTORY_LIMIT",
    "ANNOTATION_ROLLOUT_PAUSED",
    "API_NATIVE_GANG",
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

# ---------------------------------------------------------------------------- entry point


def _active_components(isvc: InferenceService, runtime: ServingRuntime | None) -> tuple[str, ...]:
    declared = isvc.declared_components
    if declared or runtime is None:
        return declared
    return tuple(c for c in ("engine", "decoder", "router") if runtime.config(c) is not None)


def _with_external_service(
    isvc: InferenceService, plans: list[ComponentPlan], config: ServiceConfig
) -> list[ComponentPlan]:
    """The external ``{isvc}`` Service added to the plan of the component it fronts: the
    router when it runs, else the engine (a blocked one keeps what exists)."""
    target = next((p for c in ("router", "engine") for p in plans if p.component == c), None)
    if target is None or target.blocked:
        return plans
    own = target.object("Service")
    ports = (own or {}).get("spec", {}).get("ports") or ()
    port = int(ports[0]["port"]) if ports else config.default_port
    service = external_service(isvc, target.component, port)
    if service is None:
        return plans
    return [evolve(p, objects=(*p.objects, service)) if p is target else p for p in plans]


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
    ``CRD_POD_GROUP``), and ``API_NATIVE_GANG`` when Kubernetes serves its own gang
    scheduling API. ``current_replicas``: the live ``spec.replicas`` per component,
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
            plans.append(blocked_plan(component, None, *runtime_problem))
            continue
        res = explain_mode(isvc, runtime, component)
        if failed is not None:
            plans.append(
                blocked_plan(
                    component,
                    res,
                    "InvalidDeploymentMode",
                    f"not reconciled: an earlier component failed ({failed})",
                )
            )
            continue
        if res.error is not None:
            failed = res.error
            plans.append(blocked_plan(component, res, "InvalidDeploymentMode", res.error))
            continue
        merged = effective_component(isvc, runtime, component)
        assert merged is not None
        if res.mode == MODE_OMENATIVE:
            cp = render_omenative(
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
            plans.append(render_multinode(isvc, runtime, component, merged, res, crds, config))
        else:
            assert res.mode == MODE_RAW
            plans.append(render_raw(isvc, runtime, component, merged, res, crds, config, current))
    plans = _with_external_service(isvc, plans, config)
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
