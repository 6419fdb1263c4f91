"""The manager's watch caches list in small pages: a page is parsed whole before it is slimmed;
a standalone replica's pre-OME headless Service is reported and routes its old pods."""

from __future__ import annotations

from typing import Any, cast

from omenative_controller.cache_views import ObjectRef, service_index
from omenative_controller.kube.client import KubeClient
from omenative_controller.observability import Metrics
from omenative_controller.routed import RoutedPods
from omenative_controller.wakeups import Wakeups
from omenative_controller.watch_caches import LIST_PAGE, REPLICA_PAGE, build_watch_caches
from omenative_core.model.config import LifecycleConfig
from omenative_core.model.spec import InferenceReplica, InferenceReplicaSpec, ObjectMeta


def test_every_cache_lists_in_small_pages_and_the_node_map_follows_the_node_cache() -> None:
    caches = build_watch_caches(cast(KubeClient, object()), None,
                                Wakeups(lambda: None, lambda: None, lambda: None),
                                lambda *_: None, Metrics(), 5.0)
    pages = {inf.name: inf.page_size for inf in caches.always}
    assert pages.pop("inferencereplicas") == REPLICA_PAGE
    assert set(pages.values()) == {LIST_PAGE} and LIST_PAGE <= 100
    first = caches.node_map.get()
    assert caches.node_map.get() is first
    nodes: Any = caches.nodes
    nodes.on_change(None, None, None)  # a node changed: the next Snapshot gets a new map
    assert caches.node_map.get() is not first


def _slice(service: str, pod: str) -> dict[str, Any]:
    return {"metadata": {"name": f"{service}-x", "labels": {
                "kubernetes.io/service-name": service, "ome.io/inferencereplica": "llm"}},
            "endpoints": [{"targetRef": {"kind": "Pod", "name": pod},
                           "conditions": {"ready": True, "serving": True}}]}


def test_a_standalone_replicas_old_service_is_reported_and_routes_its_old_pods() -> None:
    """Upgrade to OME's names (issue 28 (a)): a standalone replica ``llm``'s pre-OME
    ``llm-headless`` is reported (only when labelled as ``llm``'s) and the pods it routes
    count as routed, so an old-named pod is never deleted while still in rotation."""
    caches = build_watch_caches(cast(KubeClient, object()), None,
                                Wakeups(lambda: None, lambda: None, lambda: None),
                                lambda *_: None, Metrics(), 5.0)
    replica = InferenceReplica(metadata=ObjectMeta(name="llm", namespace="ns"),
                               spec=InferenceReplicaSpec(component="engine"))
    routed = RoutedPods(service_index)
    routed.on_slice("ns", None, _slice("llm-headless", "llm-0-leader-0"))
    routed.on_slice("ns", None, _slice("llm-engine-headless", "llm-engine-1-leader-0"))
    store: Any = caches.services.store()

    def snap() -> Any:
        return caches.snapshot("ns/llm", replica, routed=routed, create_errors=(),
                               config=LifecycleConfig())

    assert not snap().legacy_headless_service_exists
    assert snap().routed_pods == {"llm-engine-1-leader-0"}
    store["ns/llm-headless"] = ObjectRef("llm-headless", "u1", (("ome.io/inferencereplica", "x"),))
    assert not snap().legacy_headless_service_exists  # another replica's: not ours to delete
    store["ns/llm-headless"] = ObjectRef("llm-headless", "u1",
                                         (("ome.io/inferencereplica", "llm"),))
    store["ns/llm-engine-headless"] = ObjectRef("llm-engine-headless", "u2", ())
    got = snap()
    assert got.legacy_headless_service_exists and got.headless_service_exists
    assert got.routed_pods == {"llm-0-leader-0", "llm-engine-1-leader-0"}
