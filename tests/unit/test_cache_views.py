"""The slim views the manager's caches keep: what the core reads, shared where equal."""

from __future__ import annotations

import copy
import json
import tracemalloc
from typing import Any

from attrs import evolve

from omenative_controller.cache_views import (
    SERVICE_NAME_LABEL,
    FrozenCopy,
    labels_of,
    owner_index,
    pod_group_view,
    pod_view,
    ref_view,
    service_index,
    slice_view,
)
from omenative_controller.routed import RoutedPods
from omenative_core.labels import LABEL_REPLICA
from omenative_core.model.observed import NodeView
from omenative_core.views import pod_group_view_from_json, pod_view_from_json


def _pod(name: str, *, ready: str = "True", restarts: int = 0) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name, "uid": f"uid-{name}", "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"ome.io/inferencereplica": "r", "ome.io/instance-index": "0"},
            "annotations": {"internal.ome.io/in-place-image-transition": "vllm:1",
                            "ome.io/note": "kept", "example.com/big": "x" * 4096},
        },
        "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": "vllm:2"}]},
        "status": {
            "phase": "Running", "podIP": "10.0.0.1",
            "conditions": [{"type": "Ready", "status": ready, "reason": "R"},
                           {"type": "PodScheduled", "status": "True"}],
            "containerStatuses": [{"name": "c", "image": "vllm:2", "ready": True,
                                   "restartCount": restarts, "state": {"running": {}}}],
        },
    }


def test_the_cached_pod_is_the_cores_view_without_foreign_annotations() -> None:
    obj = _pod("a")
    core = pod_view_from_json(obj)
    own = {k: v for k, v in core.annotations.items() if k != "example.com/big"}
    assert pod_view(obj) == evolve(core, annotations=own)


def test_pods_in_the_same_state_share_their_maps_and_container_views() -> None:
    a, b = pod_view(_pod("a")), pod_view(_pod("b"))
    assert a.conditions is b.conditions and a.containers is b.containers
    assert a.images is b.images and a.annotations is b.annotations
    c = pod_view(_pod("c", ready="False", restarts=2))
    assert c.conditions == {"Ready": "False", "PodScheduled": "True"}
    assert c.containers[0].restart_count == 2 and a.containers[0].restart_count == 0


def test_the_node_map_is_one_copy_per_change_that_later_changes_do_not_reach() -> None:
    """Every Snapshot between two node changes gets the same map; after a change a new
    one, and the map already handed over stays as it was (a memo compares against it)."""
    store = {"n1": NodeView(name="n1")}
    frozen = FrozenCopy(lambda: store)
    first = frozen.get()
    assert frozen.get() is first
    store["n1"] = NodeView(name="n1", ready=False)
    frozen.changed()
    second = frozen.get()
    assert second is not first
    assert second["n1"].ready is False and first["n1"].ready is True


def test_the_cached_pod_group_is_the_cores_view_with_shared_strings() -> None:
    """Thousands of PodGroups (one per Instance attempt) share their label strings."""
    def group(index: int) -> dict[str, Any]:
        return {"metadata": {"name": f"r-{index}-1", "uid": f"u{index}", "labels": {
            "ome.io/managed-by": "OMENative", "ome.io/instance-index": str(index)}},
            "status": {"conditions": [{"type": "PodGroupScheduled", "status": "True",
                                       "reason": "Scheduled", "message": ""}]}}

    a, b = pod_group_view(group(0)), pod_group_view(group(1))
    assert a == pod_group_view_from_json(group(0))
    assert a.labels["ome.io/managed-by"] is b.labels["ome.io/managed-by"]
    assert a.scheduled_reason is b.scheduled_reason


def _endpoint_slice(name: str, service: str, replica: str,
                    endpoints: list[tuple[str, dict[str, bool]]]) -> dict[str, Any]:
    """An EndpointSlice as the API server sends it (the fields a view drops included)."""
    return {
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": name, "namespace": "ns", "uid": f"uid-{name}",
                     "resourceVersion": "7", "generateName": f"{service}-",
                     "labels": {SERVICE_NAME_LABEL: service, LABEL_REPLICA: replica,
                                "endpointslice.kubernetes.io/managed-by": "x"},
                     "ownerReferences": [{"kind": "Service", "name": service}]},
        "addressType": "IPv4", "ports": [{"name": "http", "port": 8080}],
        "endpoints": [{"addresses": [f"10.0.0.{i}"], "nodeName": f"node-{i}",
                       "targetRef": {"kind": "Pod", "name": pod, "namespace": "ns",
                                     "uid": f"uid-{pod}"},
                       "conditions": conds} for i, (pod, conds) in enumerate(endpoints)],
    }


SERVING = {"ready": True, "serving": True, "terminating": False}


def test_an_endpoint_slice_view_routes_labels_and_compares_as_the_slice_does() -> None:
    raw = _endpoint_slice("chat-headless-abc", "chat-headless", "chat", [
        ("chat-0", SERVING),
        ("chat-1", {"ready": True, "serving": False, "terminating": False}),  # gated
        ("chat-2", {"ready": True, "serving": True, "terminating": True}),
        ("chat-3", {})])  # no conditions: counts, as the API defines
    view = slice_view(raw)
    routed = RoutedPods(service_index)
    routed.on_slice("ns", None, view)
    assert routed.routed("ns/chat-headless") == {"chat-0", "chat-3"}
    assert labels_of(view) == {SERVICE_NAME_LABEL: "chat-headless", LABEL_REPLICA: "chat"}
    assert service_index("ns", view) == ["ns/chat-headless"]
    assert owner_index("ns", view) == ["ns/chat"]
    # the informer wakes on a changed view only: the same slice again is equal, a pod
    # leaving rotation is not
    assert slice_view(copy.deepcopy(raw)) == view
    raw["endpoints"][0]["conditions"] = {"ready": True, "serving": False}
    changed = slice_view(raw)
    assert changed != view
    routed.on_slice("ns", view, changed)
    assert routed.routed("ns/chat-headless") == {"chat-3"}
    routed.on_slice("ns", changed, None)
    assert routed.routed("ns/chat-headless") == frozenset()


def test_an_endpoint_slice_view_costs_a_third_of_its_json() -> None:
    # issue 36: a slice of a leader + 3 workers was ~2.6 KB as a JSON copy
    raws = [_endpoint_slice(f"r-{i}-headless-x", f"r-{i}-headless", f"r-{i}",
                            [(f"r-{i}-{p}", SERVING) for p in range(4)]) for i in range(300)]
    slice_view(raws[0])  # the shared conditions map exists
    tracemalloc.start()
    try:
        before = tracemalloc.take_snapshot()
        views = [slice_view(raw) for raw in raws]
        after = tracemalloc.take_snapshot()
    finally:
        tracemalloc.stop()
    grown = sum(d.size_diff for d in after.compare_to(before, "filename"))
    assert len(views) == 300
    assert grown / 300 < 1_200  # bytes a slice, its strings aside (the JSON copy: ~2,100)


def test_cached_service_refs_share_their_label_strings() -> None:
    def service(name: str) -> dict[str, Any]:
        return json.loads(json.dumps({"metadata": {"name": name, "uid": "u", "labels": {
            LABEL_REPLICA: name, "app.kubernetes.io/managed-by": "omenative"}}}))

    a, b = ref_view(service("a")), ref_view(service("b"))
    assert a.label(LABEL_REPLICA) == "a" and b.label(LABEL_REPLICA) == "b"
    assert a.labels[0][0] is b.labels[0][0] and a.labels[0][1] is b.labels[0][1]
