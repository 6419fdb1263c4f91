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
from typing import Any, Final

from attrs import evolve

from omenative_core.service.accelerators import AcceleratorClass
from omenative_core.service.autoscaler_status import with_autoscaler
from omenative_core.service.merge import (
    effective_component,
)
from omenative_core.service.model import (
    ComponentSpec,
    InferenceService,
    RuntimeRef,
    ServingRuntime,
)
from omenative_core.service.models import BaseModel, runner_placeholder_problem
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
    API_NATIVE_GANG_ALPHA,
    CRD_LEADER_WORKER_SET,
    CRD_POD_GROUP,
    CRD_POD_MONITOR,
    CRD_SCALED_OBJECT,
    ComponentPlan,
    PdbPolicy,
    ServiceCondition,
    ServiceConfig,
    ServiceEvent,
    ServicePlan,
    blocked_plan,
    condition_type,
)
from omenative_core.service.resolve import Sources, resolve_sources
from omenative_core.service.runtime_pin import (
    CONDITION_RUNTIME_DRIFTED,
    Pin,
    RuntimeRevision,
    revision_body,
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
    "API_NATIVE_GANG_ALPHA",
    "CRD_LEADER_WORKER_SET",
    "CRD_POD_GROUP",
    "CRD_POD_MONITOR",
    "CRD_SCALED_OBJECT",
    "ComponentPlan",
    "PdbPolicy",
    "ServiceCondition",
    "ServiceConfig",
    "ServiceEvent",
    "ServicePlan",
    "condition_type",
    "find_runtime",
    "isvc_owner_reference",
    "omenative_min_available",
    "peer_env_for",
    "pin_outputs",
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
    models: Sequence[BaseModel] | None = None,
    accelerator_classes: Sequence[AcceleratorClass] | None = None,
    runtime_revisions: Sequence[RuntimeRevision] | None = None,
    autoscaler_blocks: Mapping[str, Mapping[str, Any]] | None = None,
) -> ServicePlan:
    """Everything ``isvc`` needs, per component.

    ``runtimes``: the (Cluster)ServingRuntimes the shell can see; ``spec.runtime`` picks
    one, or ``auto_selected`` when the ISVC names none (runtime auto-selection is the
    shell's). ``crds_present``: CRD names (``CRD_LEADER_WORKER_SET``, ``CRD_POD_MONITOR``,
    ``CRD_POD_GROUP``), and ``API_NATIVE_GANG`` (or ``API_NATIVE_GANG_ALPHA``) when
    Kubernetes serves its own gang scheduling API in that version. ``current_replicas``:
    the live ``spec.replicas`` per component, kept when an autoscaler owns the count.
    ``collision_counts``: each InferenceReplica's ``status.collisionCount``, salting
    ``ComponentPlan.revision_hash`` as the manager does.
    Under ``spec.rollout`` the components get the peer variables of ``peer_env_for``
    (the decoder's names the engine revision rendered in this same pass). A component
    runs when the ISVC declares it (``engine: {}`` is enough); an ISVC that declares none
    runs every component its runtime configures. ``models``: the BaseModels and
    ClusterBaseModels the shell can see; with them, ``spec.model`` is rendered into the
    pods, picks the runtime when ``spec.runtime`` names none, and blocks every component
    when it is missing or disabled (``resolve_sources``); ``accelerator_classes``: the
    AcceleratorClasses, for an engine or decoder whose runtime lists classes;
    ``runtime_revisions``: the runtime revisions in OME's namespace, for an ISVC that pins
    its runtime (``spec.runtime.autoSync: false``; ``pin_outputs``).
    ``autoscaler_blocks``: by component, the ``autoscaler`` block an AutoscalerPolicy
    resolved to (``policy_resolve``), used in place of the merged one.
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
    sources = resolve_sources(isvc, runtimes, models, auto_selected, accelerator_classes,
                              runtime_revisions)
    ref, runtime, model = sources.ref, sources.runtime, sources.model
    runtime_problem = sources.problem
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
        if component in (autoscaler_blocks or {}):  # an AutoscalerPolicy's, outranking
            merged = ComponentSpec({**merged.raw,   # the runtime's block as a whole
                                    "autoscaler": dict((autoscaler_blocks or {})[component])})
        placeholder = runner_placeholder_problem(merged)
        if placeholder is not None:
            plans.append(blocked_plan(component, res, "RenderFailed", placeholder))
            continue
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
                model=model,
                accelerator=sources.accelerators.get(component),
            )
            if cp.revision_hash:
                hashes[component] = cp.revision_hash
            plans.append(_piece_missing(cp, runtime))
        elif res.mode == MODE_MULTI_NODE:
            plans.append(render_multinode(isvc, runtime, component, merged, res, crds, config,
                                          model=model,
                                          accelerator=sources.accelerators.get(component)))
        else:
            assert res.mode == MODE_RAW
            plans.append(render_raw(isvc, runtime, component, merged, res, crds, config, current,
                                    model=model, accelerator=sources.accelerators.get(component)))
    plans = _with_external_service(
        isvc, [with_autoscaler(p, isvc, runtime) for p in plans], config)
    conditions: tuple[ServiceCondition, ...] = ()
    if runtime_problem is not None and not plans:
        conditions = (
            ServiceCondition(
                type="Ready", status="False", reason=runtime_problem[0], message=runtime_problem[1]
            ),
        )
    drifted, removed, fields, revisions = pin_outputs(sources.pin)
    selected, unselected = accelerator_condition(sources)
    return ServicePlan(
        isvc=isvc.name,
        namespace=isvc.namespace,
        runtime=ref,
        components=tuple(plans),
        conditions=(*conditions, *drifted, *selected),
        events=sources.events,
        removed_conditions=(*removed, *unselected),
        status_fields=fields,
        runtime_revisions=revisions,
    )


def _piece_missing(cp: ComponentPlan, runtime: ServingRuntime | None) -> ComponentPlan:
    """A component with no containers because its runtime has no piece for it reports OME's
    ``RuntimePieceMissing`` rather than the template's ``ContainersRequired``."""
    if cp.ready is None or cp.ready.reason != "ContainersRequired" or runtime is None:
        return cp
    if runtime.config(cp.component) is not None:
        return cp
    message = (f"{runtime.kind} {runtime.name!r} has no {cp.component} piece and "
               f"spec.{cp.component} sets no containers; a {cp.component} cannot render from it")
    return evolve(cp, ready=evolve(cp.ready, reason="RuntimePieceMissing", message=message))


CONDITION_ACCELERATOR_SELECTED: Final = "AcceleratorClassSelected"
"""ISVC condition (omenative extension), present only while a selection policy picks no
class for a component: ``False``, reason ``NoAcceleratorClassMatched``."""


def accelerator_condition(sources: Sources) -> tuple[tuple[ServiceCondition, ...],
                                                      tuple[str, ...]]:
    """``AcceleratorClassSelected=False`` naming each component's failed policy, or its
    removal."""
    warnings = sources.accelerator_warnings
    if not warnings:
        return (), (CONDITION_ACCELERATOR_SELECTED,)
    return (ServiceCondition(type=CONDITION_ACCELERATOR_SELECTED, status="False",
                             reason=warnings[0].reason,
                             message=" ".join(w.message for w in warnings)),), ()


def pin_outputs(pin: Pin | None) -> tuple[
    tuple[ServiceCondition, ...], tuple[str, ...], dict[str, Any], tuple[dict[str, Any], ...]
]:
    """What a pinned runtime writes: the ``RuntimeDrifted`` condition (True) or its removal,
    the status fields, the revision to create."""
    if pin is None:
        return (), (), {}, ()
    fields: dict[str, Any] = {}
    if pin.pinned:
        fields["pinnedRevisionName"] = pin.pinned
    if pin.token:
        fields["lastRuntimeSyncToken"] = pin.token
    created = (revision_body(pin.create),) if pin.create is not None else ()
    if pin.drift is None:
        return (), (CONDITION_RUNTIME_DRIFTED,), fields, created
    drifted = ServiceCondition(type=CONDITION_RUNTIME_DRIFTED, status="True",
                               reason=pin.drift[0], message=pin.drift[1])
    return (drifted,), (), fields, created
