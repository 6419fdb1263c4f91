"""The slim views the manager's caches keep: what the core reads, shared where equal."""

from __future__ import annotations

from typing import Any

from attrs import evolve

from omenative_controller.cache_views import FrozenCopy, pod_group_view, pod_view
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
