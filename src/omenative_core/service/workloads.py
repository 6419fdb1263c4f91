"""The modes OME's other controllers run: RawDeployment (a Deployment and its Service, PDB,
HPA, PodMonitor) and MultiNode (a LeaderWorkerSet and its Service, when the CRD exists)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from attrs import evolve

from omenative_core.labels import (
    LABEL_COMPONENT,
    LABEL_ISVC,
)
from omenative_core.model.spec import (
    IntOrStr,
)
from omenative_core.replica_rules import too_long
from omenative_core.service.accelerators import Accelerator
from omenative_core.service.merge import (
    component_runners,
)
from omenative_core.service.model import (
    ComponentSpec,
    InferenceService,
    ServingRuntime,
)
from omenative_core.service.models import BaseModel, finish_runners
from omenative_core.service.modes import (
    ModeResolution,
)
from omenative_core.service.objects import (
    hpa_object,
    object_meta,
    pdb_object,
    pdb_policy,
    pod_monitor,
    scaled_object,
    traffic_service,
)
from omenative_core.service.plan import (
    CRD_LEADER_WORKER_SET,
    CRD_POD_MONITOR,
    CRD_SCALED_OBJECT,
    ComponentPlan,
    ServiceCondition,
    ServiceConfig,
    blocked_plan,
    pairing_problem,
)
from omenative_core.service.scale import resolve_scale

__all__: list[str] = []

_LWS_API: Final = "leaderworkerset.x-k8s.io/v1"
_LWS_NAME_LABEL: Final = "leaderworkerset.sigs.k8s.io/name"
_LWS_WORKER_INDEX_LABEL: Final = "leaderworkerset.sigs.k8s.io/worker-index"
_RAW_APP_LABEL: Final = "app"


def _with_labels(template: Mapping[str, Any], labels: Mapping[str, str]) -> dict[str, Any]:
    meta = dict(template.get("metadata") or {})
    meta["labels"] = {**(meta.get("labels") or {}), **labels}
    return {**template, "metadata": meta}


def render_raw(
    isvc: InferenceService,
    runtime: ServingRuntime | None,
    component: str,
    merged: ComponentSpec,
    res: ModeResolution,
    crds: frozenset[str],
    config: ServiceConfig,
    current_replicas: Mapping[str, int],
    *,
    model: BaseModel | None = None,
    accelerator: Accelerator | None = None,
) -> ComponentPlan:
    """A RawDeployment component's plan: Deployment, Service, PDB, HPA, PodMonitor
    (``model``: rendered into the pod template)."""
    prefix = f"{isvc.name}-{component}"
    problem = too_long("Deployment name", prefix)
    if problem is not None:
        return blocked_plan(component, res, "NameTooLong", problem)
    (runner,) = finish_runners(
        component_runners(isvc, runtime, component, merged, multi_pod=False),
        model, isvc, component, merged, accelerator)
    labels = {LABEL_ISVC: isvc.name, LABEL_COMPONENT: component}
    selector = {**labels, _RAW_APP_LABEL: prefix}
    template = _with_labels(runner.template, selector)
    scale = resolve_scale(
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
            "metadata": object_meta(isvc, prefix, labels),
            "spec": spec,
        },
        traffic_service(isvc, prefix, labels, selector, template, config),
    ]
    conditions: list[ServiceCondition] = []
    policy = pdb_policy(merged, config.pdb_raw_deployment)
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
            objects.append(pdb_object(isvc, prefix, labels, selector, budget))
    if scale.hpa:
        target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": prefix}
        objects.append(
            hpa_object(isvc, prefix, labels, target, scale.low, scale.high, merged, config)
        )
    elif scale.klass == "keda" and CRD_SCALED_OBJECT in crds:
        target = {"apiVersion": "apps/v1", "kind": "Deployment", "name": prefix}
        objects.append(scaled_object(isvc, prefix, labels, target, scale.low, scale.high, merged))
    if CRD_POD_MONITOR in crds:
        objects.append(pod_monitor(isvc, prefix, labels, selector, template, config))
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


def render_multinode(
    isvc: InferenceService,
    runtime: ServingRuntime | None,
    component: str,
    merged: ComponentSpec,
    res: ModeResolution,
    crds: frozenset[str],
    config: ServiceConfig,
    *,
    model: BaseModel | None = None,
    accelerator: Accelerator | None = None,
) -> ComponentPlan:
    """A MultiNode component's plan: a LeaderWorkerSet and its Service, or the condition
    saying the CRD is missing (``model``: rendered into both templates)."""
    prefix = f"{isvc.name}-{component}"
    if CRD_LEADER_WORKER_SET not in crds:
        message = (
            f"{component} is MultiNode but the LeaderWorkerSet CRD "
            f"({CRD_LEADER_WORKER_SET}) is not installed"
        )
        plan = blocked_plan(component, res, "LeaderWorkerSetCRDNotInstalled", message)
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
    problem = pairing_problem(merged) or (
        None
        if merged.worker is not None
        else "WorkerRequiresLeader: MultiNode needs a leader and a worker"
    )
    if problem is not None:
        return blocked_plan(
            component,
            res,
            "InvalidLeaderWorkerPairing",
            f"InvalidLeaderWorkerPairing: {component}: {problem}",
        )
    name = f"lws-{prefix}"
    long_name = too_long("LeaderWorkerSet name", name)
    if long_name is not None:
        return blocked_plan(component, res, "NameTooLong", long_name)
    leader, worker = finish_runners(
        component_runners(isvc, runtime, component, merged, multi_pod=True),
        model, isvc, component, merged, accelerator)
    labels = {LABEL_ISVC: isvc.name, LABEL_COMPONENT: component}
    scale = resolve_scale(
        isvc, merged, component, at_least_one=True, config=config, current_replicas={}
    )
    lws = {
        "apiVersion": _LWS_API,
        "kind": "LeaderWorkerSet",
        "metadata": object_meta(isvc, name, labels),
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
    service = traffic_service(isvc, prefix, labels, selector, leader.template, config)
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
