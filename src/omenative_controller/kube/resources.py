"""The resources the manager reads and writes, and how their URL paths are built."""

from __future__ import annotations

from urllib.parse import quote

from attrs import frozen

__all__ = [
    "CONFIG_MAPS",
    "CONTROLLER_REVISIONS",
    "CRDS",
    "ENDPOINT_SLICES",
    "EVENTS",
    "INFERENCE_REPLICAS",
    "LEASES",
    "NAMESPACES",
    "NODES",
    "PODS",
    "POD_GROUP_CRD",
    "SECRETS",
    "SERVICES",
    "Resource",
    "pod_groups",
    "resource_for",
]


@frozen
class Resource:
    """One API resource: group, version, plural, scope and kind."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        """``group/version``, or ``v1`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    def path(
        self, namespace: str | None = None, name: str | None = None, subresource: str | None = None
    ) -> str:
        """The URL path of the collection, an object, or one of its subresources."""
        base = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace:
            base += f"/namespaces/{quote(namespace, safe='')}"
        base += f"/{self.plural}"
        if name is not None:
            base += f"/{quote(name, safe='')}"
            if subresource:
                base += f"/{subresource}"
        return base


PODS = Resource("", "v1", "pods", "Pod")
NODES = Resource("", "v1", "nodes", "Node", namespaced=False)
SERVICES = Resource("", "v1", "services", "Service")
CONFIG_MAPS = Resource("", "v1", "configmaps", "ConfigMap")
EVENTS = Resource("", "v1", "events", "Event")
SECRETS = Resource("", "v1", "secrets", "Secret")
"""Read one by one (``get``) for a canary's ``prometheus.authRef``; never listed."""
NAMESPACES = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
ENDPOINT_SLICES = Resource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice")
CONTROLLER_REVISIONS = Resource("apps", "v1", "controllerrevisions", "ControllerRevision")
LEASES = Resource("coordination.k8s.io", "v1", "leases", "Lease")
CRDS = Resource(
    "apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition",
    namespaced=False,
)
INFERENCE_REPLICAS = Resource("ome.io", "v1beta1", "inferencereplicas", "InferenceReplica")
POD_GROUP_CRD = "podgroups.scheduling.x-k8s.io"
"""Name of the scheduler-plugins PodGroup CRD whose presence turns gang scheduling on."""


def pod_groups(version: str = "v1alpha1") -> Resource:
    """The scheduler-plugins PodGroup resource at ``version``."""
    return Resource("scheduling.x-k8s.io", version, "podgroups", "PodGroup")


_KNOWN = {
    (r.api_version, r.kind): r
    for r in (
        PODS, NODES, SERVICES, CONFIG_MAPS, EVENTS, NAMESPACES, ENDPOINT_SLICES,
        CONTROLLER_REVISIONS, LEASES, CRDS, INFERENCE_REPLICAS, pod_groups(),
        Resource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"),
        Resource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
        Resource("apps", "v1", "deployments", "Deployment"),
    )
}


def resource_for(api_version: str, kind: str) -> Resource:
    """The resource of an object's ``apiVersion`` and ``kind`` (namespaced, plural guessed)."""
    known = _KNOWN.get((api_version, kind))
    if known is not None:
        return known
    group, _, version = api_version.rpartition("/")
    lower = kind.lower()
    if lower.endswith("s"):
        plural = lower + "es"
    elif lower.endswith("y"):
        plural = lower[:-1] + "ies"
    else:
        plural = lower + "s"
    return Resource(group, version, plural, kind)
