"""The Kubernetes objects every mode shares: owner references, labels, metadata, the traffic
and headless Services, the PodMonitor, the HPA and the PodDisruptionBudget."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from omenative_core.labels import (
    LABEL_COMPONENT,
    LABEL_ISVC,
    LABEL_MANAGED_BY,
    LABEL_REPLICA,
    LABEL_RUNNER,
    MANAGED_BY,
)
from omenative_core.model.spec import (
    IntOrStr,
)
from omenative_core.policy import BudgetError, resolve_budget
from omenative_core.render import (
    headless_service_name,
)
from omenative_core.service.merge import (
    MAIN_CONTAINER,
)
from omenative_core.service.model import (
    API_VERSION,
    ISVC_KIND,
    ComponentSpec,
    InferenceService,
    RuntimeRef,
    ServingRuntime,
)
from omenative_core.service.plan import (
    PdbPolicy,
    ServiceConfig,
)

__all__: list[str] = []


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


def base_labels(isvc: InferenceService, component: str) -> dict[str, str]:
    """The labels every object of ``component`` carries (managed-by, ISVC, component)."""
    return {LABEL_ISVC: isvc.name, LABEL_COMPONENT: component, LABEL_MANAGED_BY: MANAGED_BY}


def service_selector(isvc: InferenceService, component: str, *, multi_pod: bool) -> dict[str, str]:
    """The traffic Service's selector for an OMENative component: OME's three labels
    (``ome.io/inferenceservice``, ``component``, ``ome.io/managed-by=OMENative``), plus
    ``ome.io/runner=leader`` for a multi-pod component whose ``worker`` the ISVC itself
    sets (when only the runtime sets it, workers are selected too, as in OME)."""
    selector = base_labels(isvc, component)
    own = isvc.component(component)
    if multi_pod and own is not None and own.worker is not None:
        selector[LABEL_RUNNER] = "leader"
    return selector


def object_meta(isvc: InferenceService, name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """Metadata for an object named ``name``: namespace, labels, the ISVC as owner."""
    return {
        "name": name,
        "namespace": isvc.namespace,
        "labels": dict(labels),
        "ownerReferences": [isvc_owner_reference(isvc)],
    }


def main_container(template: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The template's main container (by name, else the first), or None."""
    spec = template.get("spec")
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if not isinstance(containers, list) or not containers:
        return None
    for c in containers:
        if isinstance(c, Mapping) and c.get("name") == MAIN_CONTAINER:
            return c
    first = containers[0]
    return first if isinstance(first, Mapping) else None


def container_ports(template: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The main container's declared ports."""
    main = main_container(template)
    ports = main.get("ports") if main is not None else None
    return [
        p for p in ports or [] if isinstance(p, Mapping) and isinstance(p.get("containerPort"), int)
    ]


def service_ports(template: Mapping[str, Any], default_port: int) -> list[dict[str, Any]]:
    """The Service ports for a template: its container ports, else ``default_port``."""
    ports = container_ports(template)
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


def traffic_service(
    isvc: InferenceService,
    name: str,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    template: Mapping[str, Any],
    config: ServiceConfig,
) -> dict[str, Any]:
    """The component's traffic Service, selecting the pods that serve."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(isvc, name, labels),
        "spec": {
            "selector": dict(selector),
            "ports": service_ports(template, config.default_port),
        },
    }


def headless_service_object(
    isvc: InferenceService, prefix: str, labels: Mapping[str, str]
) -> dict[str, Any]:
    """The headless Service ``{prefix}-headless`` (stable pod DNS names)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": object_meta(isvc, headless_service_name(prefix), labels),
        "spec": {
            "clusterIP": "None",
            "publishNotReadyAddresses": True,
            "selector": {LABEL_REPLICA: prefix},
        },
    }


def pod_monitor(
    isvc: InferenceService,
    prefix: str,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    template: Mapping[str, Any],
    config: ServiceConfig,
) -> dict[str, Any]:
    """The PodMonitor that scrapes the component's pods, with the cluster's ``podMonitor``
    labels (under omenative's own, which select nothing) and relabelings on its endpoint."""
    ports = container_ports(template)
    named = [p for p in ports if isinstance(p.get("name"), str) and p["name"]]
    metrics = next((p for p in named if p["name"] == "metrics"), named[0] if named else None)
    endpoint: dict[str, Any] = {"path": "/metrics"}
    if metrics is not None:
        endpoint["port"] = metrics["name"]
    else:
        endpoint["targetPort"] = int(ports[0]["containerPort"]) if ports else config.default_port
    extra = config.pod_monitor
    if extra.relabelings:
        endpoint["relabelings"] = [dict(r) for r in extra.relabelings]
    if extra.metric_relabelings:
        endpoint["metricRelabelings"] = [dict(r) for r in extra.metric_relabelings]
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PodMonitor",
        "metadata": object_meta(isvc, prefix, {**extra.labels, **labels}),
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "podMetricsEndpoints": [endpoint],
        },
    }


def hpa_metrics(merged: ComponentSpec, config: ServiceConfig) -> list[Any]:
    """The HPA metrics: the component's own, else CPU at the configured utilization."""
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


def hpa_object(
    isvc: InferenceService,
    prefix: str,
    labels: Mapping[str, str],
    target: Mapping[str, str],
    low: int,
    high: int,
    merged: ComponentSpec,
    config: ServiceConfig,
) -> dict[str, Any]:
    """The autoscaling/v2 HPA on ``target``'s scale subresource."""
    return {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": object_meta(isvc, prefix, labels),
        "spec": {
            "scaleTargetRef": dict(target),
            "minReplicas": low,
            "maxReplicas": high,
            "metrics": hpa_metrics(merged, config),
        },
    }


def pdb_policy(merged: ComponentSpec, fallback: PdbPolicy | None) -> PdbPolicy | None:
    """The component's PodDisruptionBudget policy, else ``fallback``."""
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


def pdb_object(
    isvc: InferenceService,
    prefix: str,
    labels: Mapping[str, str],
    selector: Mapping[str, str],
    budget: Mapping[str, IntOrStr],
) -> dict[str, Any]:
    """The PodDisruptionBudget selecting ``selector`` with ``budget``."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": object_meta(isvc, prefix, labels),
        "spec": {**budget, "selector": {"matchLabels": dict(selector)}},
    }
