"""The Kubernetes objects every mode shares: owner references, labels, metadata, the traffic
and headless Services, the PodMonitor, the HPA and the PodDisruptionBudget."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

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
    API_VERSION_KEDA,
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


EXTERNAL_SERVICE_COMPONENT: Final = "external-service"
"""The ``component`` label of the external ``{isvc}`` Service."""
_SERVICE_TYPES: Final = ("ClusterIP", "NodePort", "LoadBalancer")
_SERVICE_ANNOTATION_PREFIXES: Final = (
    "service.beta.kubernetes.io/", "cloud.google.com/", "service.kubernetes.io/")


def external_service(
    isvc: InferenceService, component: str, port: int
) -> dict[str, Any] | None:
    """The external Service ``{isvc}`` in front of ``component`` (the router, else the
    engine), as OME's external-service reconciler writes it when it creates no ingress
    (ome-projects/ome@58a57f25, ``reconcilers/external_service``): selector
    ``ome.io/inferenceservice`` + ``component``, one ``http`` port (the component's traffic
    port), type from ``ome.io/service-type``, the ISVC's cloud load-balancer annotations.
    None for an ISVC labelled ``networking.knative.dev/visibility: cluster-local``."""
    if isvc.labels.get("networking.knative.dev/visibility") == "cluster-local":
        return None
    kind = isvc.annotations.get("ome.io/service-type")
    annotations = {k: v for k, v in sorted(isvc.annotations.items())
                   if any(k.startswith(p) and len(k) > len(p)
                          for p in _SERVICE_ANNOTATION_PREFIXES)}
    meta = object_meta(isvc, isvc.name,
                       {LABEL_ISVC: isvc.name, LABEL_COMPONENT: EXTERNAL_SERVICE_COMPONENT})
    if annotations:
        meta["annotations"] = annotations
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": meta,
        "spec": {
            "selector": {LABEL_ISVC: isvc.name, LABEL_COMPONENT: component},
            "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}],
            "type": kind if kind in _SERVICE_TYPES else "ClusterIP",
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


_HPA_HEAD: Final = ("autoscaling/v2", "HorizontalPodAutoscaler", "minReplicas", "maxReplicas")
_SO_HEAD: Final = (API_VERSION_KEDA, "ScaledObject", "minReplicaCount", "maxReplicaCount")


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


def _scaler(
    isvc: InferenceService,
    name: str,
    labels: Mapping[str, str],
    target: Mapping[str, str],
    head: tuple[str, str, str, str],
    low: int,
    high: int,
) -> dict[str, Any]:
    """The preamble both autoscalers share: ``head`` is (apiVersion, kind, min key, max key);
    the object ``name`` owned by the ISVC, its ``scaleTargetRef`` and replica bounds."""
    api_version, kind, min_key, max_key = head
    return {"apiVersion": api_version, "kind": kind,
            "metadata": object_meta(isvc, name, labels),
            "spec": {"scaleTargetRef": dict(target), min_key: low, max_key: high}}


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
    """The autoscaling/v2 HPA on ``target``'s scale subresource, with the component's
    ``autoscaler.hpa.behavior`` copied as OME does."""
    body = _scaler(isvc, prefix, labels, target, _HPA_HEAD, low, high)
    body["spec"]["metrics"] = hpa_metrics(merged, config)
    hpa = (merged.autoscaler or {}).get("hpa")
    if isinstance(hpa, Mapping) and isinstance(hpa.get("behavior"), Mapping):
        body["spec"]["behavior"] = dict(hpa["behavior"])
    return body


def scaled_object(
    isvc: InferenceService,
    prefix: str,
    labels: Mapping[str, str],
    target: Mapping[str, str],
    low: int,
    high: int,
    merged: ComponentSpec,
) -> dict[str, Any]:
    """KEDA's ``keda.sh/v1alpha1`` ScaledObject for a ``class: KEDA`` component, as OME
    writes it: ``scaledobject-{isvc}-{component}`` (its last 50 characters), the component's
    bounds, and ``autoscaler.keda``'s triggers, pollingInterval, cooldownPeriod, fallback,
    idleReplicaCount and advanced copied."""
    keda = (merged.autoscaler or {}).get("keda")
    keda = keda if isinstance(keda, Mapping) else {}
    body = _scaler(isvc, f"scaledobject-{prefix[-50:]}", labels, target, _SO_HEAD, low, high)
    spec = body["spec"]
    spec["triggers"] = list(keda.get("triggers") or ())
    for key in ("pollingInterval", "cooldownPeriod", "idleReplicaCount", "fallback",
                "advanced"):
        if keda.get(key) is not None:
            spec[key] = keda[key]
    return body


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
    """OMENative PDB ``minAvailable``, an integer count of pods, as OME's PDB reconciler
    writes it (ome-projects/ome, ``reconcilers/pdb``, ``NormalizeOMENativeBudget``): with
    ``desired`` = Instances x pods per Instance, ``maxUnavailable`` gives ``desired -
    budget`` (never below 0) and ``minAvailable`` gives ``budget``, a percentage of
    ``desired`` rounded up in both. The chart's ``maxUnavailable: 1`` lets one pod, so one
    Instance, be evicted at a time. ``BudgetError`` on a bad value."""
    if policy.min_available is not None and policy.max_unavailable is not None:
        raise BudgetError("set only one of minAvailable and maxUnavailable")
    desired = instances * pods_per_instance
    if policy.min_available is not None:
        return resolve_budget(policy.min_available, desired)
    if policy.max_unavailable is not None:
        return max(desired - resolve_budget(policy.max_unavailable, desired), 0)
    raise BudgetError("set one of minAvailable and maxUnavailable")


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
