"""The Kubernetes layer: raw-JSON client, rate limit, watch caches, CRD presence, work queue."""

from omenative_controller.kube.client import JSON, ApiObserver, KubeClient, load_configuration
from omenative_controller.kube.crdwatch import CrdPresence
from omenative_controller.kube.errors import ApiError
from omenative_controller.kube.informer import Backoff, Informer, object_key
from omenative_controller.kube.ratelimit import TokenBucket
from omenative_controller.kube.workqueue import WorkQueue

__all__ = [
    "JSON",
    "ApiError",
    "ApiObserver",
    "Backoff",
    "CrdPresence",
    "Informer",
    "KubeClient",
    "TokenBucket",
    "WorkQueue",
    "load_configuration",
    "object_key",
]
